@testable import Faultline
import Foundation
import Testing

/// `GET /__faultline/openapi.json` serves docs/openapi.json (a link to Sources/Faultline/Resources/openapi.json, which
/// SwiftPM compiles into the binary: `.embedInCode`).
/// These fail when someone edits the file and forgets to regenerate; Tests/Python/test_openapi.py fuzzes the API
/// against the description.
@Suite struct OpenAPISpecTests {
    static let scenario = """
        { "name": "spec", "routes": [ { "id": "a", "match": { "path": "/a" }, "responses": [ { "status": 200 } ] } ] }
        """

    static var specPath: String { TestSupport.repositoryRoot.appendingPathComponent("docs/openapi.json").path }

    @Test func servesDocsOpenAPIJSONByteForByte() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let onDisk = try String(contentsOfFile: Self.specPath, encoding: .utf8)
        let served = try TestSupport.curl(["-i", "\(server.baseURL.absoluteString)/__faultline/openapi.json"])
        let parts = served.stdout.components(separatedBy: "\r\n\r\n")
        let head = try #require(parts.first)
        #expect(head.hasPrefix("HTTP/1.1 200"))
        #expect(head.contains("Content-Type: application/json"))
        // Compared first, so a failure names the fix instead of printing 50 KB of JSON twice.
        let same = parts.dropFirst().joined(separator: "\r\n\r\n") == onDisk
        #expect(same, "the served document differs from docs/openapi.json")
    }

    @Test func describesThisVersion() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.specPath))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let info = try #require(document["info"] as? [String: Any])
        #expect(info["version"] as? String == Faultline.version, "info.version follows Faultline.version")
    }

    /// `AdminAPI.queryParameters`, which the server checks every query against, names the same query parameters as
    /// openapi.json for each operation, both ways (HEAD takes GET's).
    @Test func queryParameterTableAgreesWithTheSpec() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.specPath))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let components = try #require((document["components"] as? [String: Any])?["parameters"] as? [String: [String: Any]])
        var fromSpec: [String: [String]] = [:]
        for (path, operations) in paths {
            for (method, operation) in operations {
                guard let operation = operation as? [String: Any] else { continue }
                let names = (operation["parameters"] as? [[String: Any]] ?? []).compactMap { parameter -> String? in
                    let resolved = (parameter["$ref"] as? String).map { components[String($0.split(separator: "/").last!)] ?? [:] } ?? parameter
                    return resolved["in"] as? String == "query" ? resolved["name"] as? String : nil
                }
                guard !names.isEmpty else { continue }
                fromSpec["\(method.uppercased()) \(path.dropFirst(AdminAPI.prefix.count))"] = names
            }
        }
        for (key, names) in fromSpec {
            let tableKey = key.hasPrefix("HEAD ") ? "GET " + key.dropFirst(5) : key
            #expect(AdminAPI.queryParameters[tableKey].map(Set.init) == Set(names), "\(key): openapi.json has \(names)")
        }
        for (key, names) in AdminAPI.queryParameters {
            #expect(fromSpec[key].map(Set.init) == Set(names), "\(key): the table has \(names), openapi.json not")
            if key.hasPrefix("GET ") {
                #expect(fromSpec["HEAD " + key.dropFirst(4)].map(Set.init) == Set(names), "HEAD of \(key)")
            }
        }
    }
}
