@testable import Faultline
import FaultlineCore
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `faultline verify` and `faultline export`, called directly against an in-process server: the same logic the
/// executable runs, without a process in between.
@Suite struct RemoteCommandsTests {
    static let scenario = """
        {"name": "v", "routes": [{"id": "r", "match": {"path": "/r"}, "responses": [{"status": 503, "headers": {"Retry-After": "30"}, "times": 1}, {"text": "ok"}]}],
         "expect": {"honorsRetryAfter": true, "noRetryOn4xx": true}}
        """

    static func server() throws -> FaultlineServer {
        let scenario = try ScenarioLoader.load(bytes: Array(scenario.utf8), file: "v.json", directory: nil)
        return try FaultlineServer(configuration: .init(scenarios: [scenario]))
    }

    static func get(_ server: FaultlineServer, _ path: String) async throws {
        _ = try await URLSession.shared.data(from: server.baseURL.appendingPathComponent(path))
    }

    @Test func verifyPassesAndFailsWithTheDocumentedExitCodes() async throws {
        let server = try Self.server()
        try await Self.get(server, "r")
        try await Self.get(server, "r")  // at once: 30 s earlier than Retry-After asked
        let failing = await RemoteCommands.verify(url: server.baseURL.absoluteString + "/")
        #expect(failing.exitCode == 1)
        #expect(failing.stdout.contains("FAIL  v/honorsRetryAfter: "))
        #expect(failing.stdout.contains("PASS  v/noRetryOn4xx: "))
        #expect(failing.stdout.hasSuffix("1 of 2 verdicts passed\n"))
        await server.resetScenarios()
        await server.clearJournal()
        let passing = await RemoteCommands.verify(url: server.baseURL.absoluteString)
        #expect(passing.exitCode == 0 && passing.stdout.hasSuffix("2 of 2 verdicts passed\n"), "\(passing)")
        await server.stop()
        let started = Date()
        let gone = await RemoteCommands.verify(url: server.baseURL.absoluteString)
        #expect(gone.exitCode == 2 && gone.stderr.contains("verify: cannot reach"), "\(gone)")
        #expect(Date().timeIntervalSince(started) < 5, "\(Date().timeIntervalSince(started)) s")
        #expect(await RemoteCommands.verify(url: "ftp://x").exitCode == 64)
    }

    @Test func exportWritesHARAndNDJSON() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        try await Self.get(server, "r")
        try await Self.get(server, "r")
        let url = server.baseURL.absoluteString
        let ndjson = await RemoteCommands.export(ExportOptions(url: url, format: .ndjson))
        #expect(ndjson.exitCode == 0)
        let lines = ndjson.stdout.split(separator: "\n")
        #expect(lines.count == 2 && lines.allSatisfy { $0.hasPrefix("{\"sequence\":") })
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID()).har").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let har = await RemoteCommands.export(ExportOptions(url: url, format: .har, output: file))
        #expect(har.exitCode == 0 && har.stdout.isEmpty)
        let document = try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        if case .array(let entries)? = document["log"]?["entries"] { #expect(entries.count == 2) } else {
            Issue.record("no HAR entries")
        }
        let unwritable = await RemoteCommands.export(ExportOptions(url: url, output: "/nonexistent/dir/x.har"))
        #expect(unwritable.exitCode == 1 && unwritable.stderr.contains("export: cannot write"))
    }
}
