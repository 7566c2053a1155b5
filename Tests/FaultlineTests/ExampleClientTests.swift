import ExampleClients
import Faultline
import FaultlineCore
import Foundation
import Testing

/// The example URLSession clients against the bundled scenarios: the careful client passes every verdict,
/// the naive one fails exactly the rules it breaks, with evidence naming its requests.
@Suite struct ExampleClientTests {
    static func server(_ file: String) throws -> FaultlineServer {
        let path = TestSupport.repositoryRoot.appendingPathComponent("scenarios/\(file)").path
        return try FaultlineServer(configuration: .init(scenarios: ScenarioLoader.load(paths: [path])))
    }

    /// Failed rules of the report, and the explanations by rule.
    static func verdicts(_ server: FaultlineServer) throws -> (failed: Set<String>, explanations: [String: String]) {
        let report = try TestSupport.admin(server, "report")
        let verdicts = report["verdicts"] as? [[String: Any]] ?? []
        #expect(!verdicts.isEmpty)
        var explanations: [String: String] = [:]
        for verdict in verdicts { explanations[verdict["rule"] as! String] = verdict["explanation"] as? String }
        return (Set(verdicts.filter { $0["passed"] as? Bool == false }.map { $0["rule"] as! String }), explanations)
    }

    @Test func carefulPOSTSurvivesTheUnknownOutcome() async throws {
        let server = try Self.server("idempotent-orders.json")
        defer { Task { await server.stop() } }
        let client = CarefulClient(baseURL: server.baseURL)
        let order = try await client.post("shop/v1/orders", json: ["sku": "w-1"])
        #expect(order["id"] as? String == "o-1")
        #expect(try Self.verdicts(server).failed.isEmpty)
    }

    @Test func naivePOSTRetriesWithoutAKey() async throws {
        let server = try Self.server("idempotent-orders.json")
        defer { Task { await server.stop() } }
        let status = await NaiveClient(baseURL: server.baseURL).send("POST", "shop/v1/orders", json: ["sku": "w-1"])
        #expect(status == 400, "the route requires a key")
        let (failed, explanations) = try Self.verdicts(server)
        #expect(failed == ["retriesOnlyReplayable"])
        #expect(explanations["retriesOnlyReplayable"]?.hasPrefix("request #2 repeated POST /shop/v1/orders of #1") == true)
    }

    /// A scripted 429 with `Retry-After: SECONDS`, then success: deterministic however loaded the machine is
    /// (a loaded machine only makes a retry later).
    static func throttled(seconds: Int) -> String {
        throttledTemplate.replacingOccurrences(of: "SECONDS", with: String(seconds))
    }

    static let throttledTemplate = #"""
        {"name": "throttled", "expect": {"honorsRetryAfter": true, "noRetryOn4xx": true},
         "routes": [{"id": "search", "match": {"pathPrefix": "/search"},
                     "responses": [{"status": 429, "headers": {"Retry-After": "SECONDS"}}, {"json": {"hits": []}}]}]}
        """#

    @Test func carefulClientWaitsAsRetryAfterAsks() async throws {
        let server = try TestSupport.server([Self.throttled(seconds: 1)])
        defer { Task { await server.stop() } }
        _ = try await CarefulClient(baseURL: server.baseURL).get("search")
        let attempts = await server.requests(JournalFilter(route: "search"))
        #expect(attempts.map(\.status) == [429, 200])
        #expect(try Self.verdicts(server).failed.isEmpty)
    }

    @Test func naiveClientRetriesTooSoon() async throws {
        // A long Retry-After, so that even a starved test process retries "at once" well inside it.
        let server = try TestSupport.server([Self.throttled(seconds: 60)])
        defer { Task { await server.stop() } }
        await NaiveClient(baseURL: server.baseURL).send("GET", "search")
        let (failed, explanations) = try Self.verdicts(server)
        let seen = try TestSupport.journal(server).map { "\($0["sequence"]!) \($0["connection"]!) \($0["response"]!) \($0["notes"]!)" }
        #expect(failed == ["honorsRetryAfter"], "\(seen)")
        #expect(explanations["honorsRetryAfter"]?.hasPrefix("request #2 came") == true)
        #expect(explanations["honorsRetryAfter"]?.contains("after #1, whose Retry-After asked for 60000 ms") == true)
    }

    /// Every report answers 503 three times (no Retry-After), then 200: each GET is a logical request retried
    /// three times, so the backoff rule sees 60 samples at each of retries 1–3.
    static let busyReports = #"""
        {"name": "busy-reports", "expect": {"backoff": {"jitter": true}, "maxAttempts": 4},
         "routes": [{"id": "report", "match": {"method": "GET", "path": "/reports/{id}"}, "sequenceBy": "path:id",
                     "responses": [{"status": 503, "json": {"error": "busy"}, "times": 3}, {"json": {"id": "{{path.id}}"}}]}]}
        """#

    /// The outcome of one rule in the report.
    static func outcome(_ server: FaultlineServer, _ rule: String) throws -> (outcome: String?, explanation: String?) {
        let verdicts = try TestSupport.admin(server, "report")["verdicts"] as? [[String: Any]] ?? []
        let verdict = verdicts.first { $0["rule"] as? String == rule }
        return (verdict?["outcome"] as? String, verdict?["explanation"] as? String)
    }

    @Test func carefulClientBacksOffWithJitterAcross60Requests() async throws {
        let server = try TestSupport.server([Self.busyReports])
        defer { Task { await server.stop() } }
        // A 200 ms base (waits of 100–200, 200–400 and 400–800 ms): on a loaded machine the scheduler can add a
        // couple of hundred milliseconds to a wait, which at the default 50 ms base hides the growth it judges.
        let client = CarefulClient(baseURL: server.baseURL, baseDelay: 0.2)
        // Six at a time (URLSession's connections per host), so queueing does not blur the client's own waits.
        for batch in stride(from: 0, to: 60, by: 6) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in batch..<batch + 6 { group.addTask { _ = try await client.get("reports/\(i)") } }
                try await group.waitForAll()
            }
        }
        let (failed, _) = try Self.verdicts(server)
        let backoff = try Self.outcome(server, "backoff")
        #expect(failed.isEmpty && backoff.outcome == "pass", "failed: \(failed); backoff: \(backoff)")
    }

    @Test func naiveClientDoesNotBackOff() async throws {
        let server = try TestSupport.server([Self.busyReports])
        defer { Task { await server.stop() } }
        let naive = NaiveClient(baseURL: server.baseURL)
        // 30 logical requests, not 10: on a loaded machine the scheduler's noise is all the naive client's waits
        // are, and the upper quartile of 10 noisy samples per retry index could seem to grow by chance.
        for i in 0..<30 { await naive.send("GET", "reports/\(i)") }
        let backoff = try Self.outcome(server, "backoff")
        #expect(backoff.outcome == "fail", "\(backoff)")
        #expect(backoff.explanation?.hasPrefix("the intervals do not grow") == true)
    }

    @Test func concurrent401sShareOneRefreshOnlyInTheCarefulClient() async throws {
        let careful = try Self.server("token-refresh.json")
        defer { Task { await careful.stop() } }
        _ = try TestSupport.admin(careful, "auth/expire", method: "POST")
        let client = CarefulClient(baseURL: careful.baseURL, tokenPath: "/bank/oauth/token", initialToken: "token-1")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<6 { group.addTask { _ = try await client.get("bank/v1/accounts/a\(i)") } }
            try await group.waitForAll()
        }
        #expect(try Self.verdicts(careful).failed.isEmpty)

        let naiveServer = try Self.server("token-refresh.json")
        defer { Task { await naiveServer.stop() } }
        _ = try TestSupport.admin(naiveServer, "auth/expire", method: "POST")
        let naive = NaiveClient(baseURL: naiveServer.baseURL, tokenPath: "/bank/oauth/token", initialToken: "token-1")
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<6 { group.addTask { await naive.send("GET", "bank/v1/accounts/a\(i)") } }
        }
        let (failed, explanations) = try Self.verdicts(naiveServer)
        #expect(failed == ["singleFlightRefresh", "maxRefreshes"])
        #expect(explanations["singleFlightRefresh"]?.contains("token refreshes were in flight at once") == true)
    }
}
