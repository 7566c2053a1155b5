import Faultline
import FaultlineCore
import Foundation
import Testing

/// Every file in scenarios/ loads, and every route in it is exercised by a real request.
@Suite struct BundledScenarioTests {
    @Test func everyBundledScenarioLoadsAndEveryRouteAnswers() async throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: TestSupport.scenariosFolder)
            .filter { $0.hasSuffix(".json") && !$0.hasSuffix(".schema.json") }
        #expect(files.count >= 3)
        let server = try TestSupport.bundledServer()
        defer { Task { await server.stop() } }
        let scenarios = try ScenarioLoader.load(paths: [TestSupport.scenariosFolder])
        #expect(scenarios.count == files.count)
        for scenario in scenarios {
            for route in scenario.routes {
                var request = Self.sampleRequest(for: route, base: server.baseURL.absoluteString)
                if let auth = scenario.auth, auth.protect.contains(where: { request.last!.dropFirst(server.baseURL.absoluteString.count).hasPrefix($0) }) {
                    request.insert(contentsOf: ["-H", "Authorization: Bearer \(auth.initialToken)"], at: 0)
                }
                if let idempotency = route.idempotency {
                    request.insert(contentsOf: ["-H", "\(idempotency.header): sample-\(route.id)"], at: 0)
                }
                // Faults make curl fail on purpose (and a hang only ends at the time limit); the journal is
                // what shows the route took the request.
                let breaks = route.chaos != nil || route.responses.contains { $0.fault != nil }
                let result = try TestSupport.curl((breaks ? ["--max-time", "1"] : []) + request)
                if !breaks { #expect(result.status == 0, "\(scenario.name)/\(route.id): \(result.stderr)") }
                let matched = await server.requests(JournalFilter(route: route.id))
                #expect(!matched.isEmpty, "\(scenario.name)/\(route.id) was not matched by \(request)")
            }
        }
    }

    /// A curl command line that the route should take: its method, its path with parameters filled in,
    /// its required query and headers, and a body that satisfies its body matcher.
    static func sampleRequest(for route: Route, base: String) -> [String] {
        var path = "/"
        if let pattern = route.match.path {
            path = "/" + pattern.segments.map { segment -> String in
                switch segment {
                case .literal(let text): return text
                case .parameter: return "sample"
                }
            }.joined(separator: "/")
        }
        var query: [String] = []
        for (name, matcher) in route.match.query {
            switch matcher {
            case .equals(let value): query.append("\(name)=\(value)")
            case .present, .contains, .regex: query.append("\(name)=sample")
            case .absent: break
            }
        }
        var arguments = ["-o", "/dev/null", "-X", route.match.methods.first ?? "GET"]
        for (name, matcher) in route.match.headers {
            switch matcher {
            case .equals(let value), .contains(let value): arguments += ["-H", "\(name): \(value)"]
            case .present, .regex: arguments += ["-H", "\(name): sample"]
            case .absent: break
            }
        }
        switch route.match.body {
        case .equals(let text)?, .contains(let text)?: arguments += ["--data-binary", text]
        case .jsonSubset(let value)?: arguments += ["--data-binary", value.serialized()]
        case nil: break
        }
        return arguments + [base + path + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))]
    }
}
