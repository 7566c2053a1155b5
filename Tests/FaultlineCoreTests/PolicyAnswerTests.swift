import Testing
@testable import FaultlineCore

/// How the policy layer's answers are journaled (auth's 401 under the route it matched), idempotent routes
/// that answer 429/5xx, and the connection policy's errors.
@Suite struct PolicyAnswerTests {
    static let auth = """
        {"name": "a", "seed": 3, "auth": {"tokenPath": "/token", "protect": ["/api/"]},
         "rateLimits": [{"id": "slow", "path": "/api/limited", "limit": 1, "windowMs": 60000}],
         "routes": [{"id": "me", "match": {"path": "/api/me"}, "responses": [{"text": "me"}, {"status": 201}]},
                    {"id": "limited", "match": {"path": "/api/limited"}, "responses": [{"text": "ok"}]}],
         "expect": {"retriesOnlyReplayable": true, "noRetryOn4xx": true, "maxAttempts": 2}}
        """

    /// A journal entry built from a decision the way the Dispatcher builds it.
    static func entry(_ decision: Decision, _ request: HTTPRequest, sequence: Int) -> JournalEntry {
        var entry = JournalEntry(
            sequence: sequence, receivedAtWall: 0, receivedAtMonotonicNanos: UInt64(sequence) * 1_000_000_000,
            connectionID: 1, indexOnConnection: 0, clientAddress: "127.0.0.1:1", head: request.head, body: request.body,
            bodySize: request.body.count)
        entry.record(decision)
        entry.outcome = .completed
        return entry
    }

    @Test func aRefusedRequestIsJournaledUnderTheRouteItMatched() throws {
        let engine = try PolicyEngineTests.engine(Self.auth)
        var journal = Journal()
        var sequence = 0
        func send(_ method: String, _ target: String, token: Bool) -> Decision {
            sequence += 1
            let request = PolicyEngineTests.request(method, target, token ? [("Authorization", "Bearer token-1")] : [])
            let decision = engine.decide(request, requestID: sequence)
            journal.record(Self.entry(decision, request, sequence: sequence))
            return decision
        }
        let refused = send("POST", "/api/me", token: false)
        #expect(refused.script.status == 401)
        #expect(refused.route == .route("me") && refused.scenario == "a" && refused.step == nil && refused.unmatched == nil)
        #expect(refused.answeredBy == .auth)
        // The route did not run: its script has not moved.
        let served = send("POST", "/api/me", token: true)
        #expect(served.script.status == 200 && served.step == 0 && served.answeredBy == nil)
        // A protected path no route serves: unmatched, counted as such, answered by auth.
        let nowhere = send("GET", "/api/nowhere", token: false)
        #expect(nowhere.script.status == 401 && nowhere.route == nil && nowhere.unmatched?.nearestRoute != nil)
        #expect(nowhere.answeredBy == .auth)
        // A rate limit keeps its own route, and says it answered.
        #expect(send("GET", "/api/limited", token: true).script.status == 200)
        let limited = send("GET", "/api/limited", token: true)
        #expect(limited.script.status == 429 && limited.route == .rateLimit("slow") && limited.answeredBy == .rateLimit("slow"))

        // Counters and filters agree.
        #expect(journal.totalUnmatched == 1)
        #expect(journal.count(JournalFilter(matched: false)) == journal.totalUnmatched)
        #expect(journal.count(JournalFilter(route: "me")) == 2 && journal.perRoute["me"] == 2)
        #expect(journal.count(JournalFilter(route: "rate-limit:slow")) == 1 && journal.perRoute["rate-limit:slow"] == 1)
        let json = journal.entries.map { $0.json() }
        #expect(json.map { $0["route"] } == [.string("me"), .string("me"), .null, .string("limited"), .string("rate-limit:slow")])
        #expect(json.map { $0["matched"] } == [.bool(true), .bool(true), .bool(false), .bool(true), .bool(true)])
        #expect(json.map { $0["answeredBy"] }
            == [.string("auth"), .null, .string("auth"), .null, .string("rate-limit:slow")])
        let har = HAR.document(journal.entries, creatorVersion: "test")
        if case .array(let entries)? = har["log"]?["entries"] {
            #expect(entries.map { $0["_route"] } == json.map { $0["route"] })
            #expect(entries.map { $0["_answeredBy"] } == json.map { $0["answeredBy"] })
        } else {
            Issue.record("no HAR entries")
        }
        // Read back from JSON (a remote client's view), the answer is typed again.
        #expect(journal.entries.compactMap { JournalEntry(json: $0.json())?.answeredBy }
            == [.auth, .auth, .rateLimit("slow")])

        // The 401 is not an attempt: POST /api/me sent again with a token is no keyless retry, and a 401 is no 4xx
        // that was retried.
        let report = engine.report(journal: journal.entries)
        #expect(report["passed"] == .bool(true), "\(report)")
    }

    static let orders = """
        {"name": "o", "routes": [
          {"id": "order", "match": {"method": "POST", "path": "/orders"}, "idempotency": {"required": true},
           "responses": [{"status": 503, "headers": {"Retry-After": "0"}}, {"status": 429}, {"status": 201, "json": {"id": 1}}]},
          {"id": "stored", "match": {"method": "POST", "path": "/stored"}, "idempotency": {"storeStatuses": [503, "2xx"]},
           "responses": [{"status": 503}, {"status": 201}]},
          {"id": "conflict", "match": {"method": "POST", "path": "/conflict"}, "idempotency": {},
           "responses": [{"status": 409}, {"status": 201}]}
        ]}
        """

    @Test func aScripted503Or429LeavesTheKeyFree() throws {
        let engine = try PolicyEngineTests.engine(Self.orders)
        func post(_ path: String, key: String, at ms: UInt64) -> Decision {
            let decision = engine.decide(
                PolicyEngineTests.request("POST", path, [("Idempotency-Key", "\"\(key)\"")], body: "{}"),
                requestID: Int(ms), now: PolicyEngineTests.at(ms))
            if let completion = decision.completion { engine.finish(completion, now: PolicyEngineTests.at(ms)) }
            return decision
        }
        let statuses = (1...4).map { post("/orders", key: "k1", at: UInt64($0)) }
        #expect(statuses.map(\.script.status) == [503, 429, 201, 201])
        #expect(statuses[0].notes.contains(.remark("idempotency: key k1 not stored (503), free for a retry")))
        #expect(EngineTests.written(statuses[3].script).contains("Idempotent-Replayed: true"))
        #expect(statuses.map { $0.notes.contains(.sideEffect(route: "order")) } == [false, false, true, false])
        let state = engine.stateJSON(now: PolicyEngineTests.at(10))
        #expect(state["sideEffects"]?["total"] == .int(1))

        // A route that says 503 is stored keeps replaying it.
        #expect(post("/stored", key: "k2", at: 11).script.status == 503)
        let replay = post("/stored", key: "k2", at: 12)
        #expect(replay.script.status == 503 && EngineTests.written(replay.script).contains("Idempotent-Replayed: true"))
        // A 4xx other than 429 is stored by default (the request was processed and refused).
        #expect(post("/conflict", key: "k3", at: 13).script.status == 409)
        #expect(post("/conflict", key: "k3", at: 14).script.status == 409)
    }

    @Test func storeStatusesLoadsStatusesAndClasses() throws {
        let base = #"{"name": "s", "routes": [{"id": "r", "match": {}, "responses": [{}], "idempotency": {"storeStatuses": LIST}}]}"#
        func errors(_ list: String) -> [String] { FaultCatalogueTests.errors(base.replacingOccurrences(of: "LIST", with: list)) }
        #expect(errors(#"[201, "4xx"]"#) == [])
        #expect(errors(#"["6xx"]"#) == [#"routes[0].idempotency.storeStatuses[0]: "6xx" is not a status class ("1xx" … "5xx")"#])
        #expect(errors("[99]").count == 1 && errors("[99]")[0].hasPrefix("routes[0].idempotency.storeStatuses[0]: "))
        #expect(errors("201").count == 1)
        let scenario = try ScenarioLoader.load(
            bytes: Array(base.replacingOccurrences(of: "LIST", with: #"[201, "4xx"]"#).utf8), file: "s.json", directory: nil)
        let config = try #require(scenario.routes[0].idempotency)
        #expect(config.stores(201) && config.stores(404) && config.stores(429) && !config.stores(200) && !config.stores(503))
        #expect(IdempotencyConfig().stores(201) && IdempotencyConfig().stores(422))
        #expect(!IdempotencyConfig().stores(429) && !IdempotencyConfig().stores(500) && !IdempotencyConfig().stores(503))
    }

    @Test func aMisspelledConnectionsKeyIsOneError() {
        let json = #"{"name": "c", "connections": {"maxRequest": 2}, "routes": []}"#
        #expect(FaultCatalogueTests.errors(json)
            == [#"connections: unknown key "maxRequest"; did you mean "maxRequests"?"#])
    }
}
