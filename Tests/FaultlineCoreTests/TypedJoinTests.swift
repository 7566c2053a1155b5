import Testing
@testable import FaultlineCore

/// The engine and the verdicts agree on what took a request, which side effects happened and which Retry-After
/// advertisement a retry answers through types (`DecisionSource`, `JournalNote`, `RetryAfterKey`), not through
/// text: a route whose id looks like the policy layer's own names is still judged as a route, and the journal
/// still prints the same text.
@Suite struct TypedJoinTests {
    /// Plays `(ms, method, target)` requests through an engine and a journal, as the server does, and returns
    /// the report (`GET /__faultline/report`).
    static func report(_ documents: [String], _ requests: [(ms: UInt64, method: String, target: String)]) throws
        -> (Engine, [JournalEntry], JSONValue) {
        let scenarios = try documents.enumerated().map { index, text in
            try ScenarioLoader.load(bytes: Array(text.utf8), file: "s\(index).json", directory: nil)
        }
        let engine = Engine(scenarios: scenarios)
        var journal = Journal()
        for request in requests {
            let http = EngineTests.request(request.method, request.target)
            let now = EngineInstant(monotonicMilliseconds: request.ms, wallSeconds: 1_800_000_000)
            let decision = engine.decide(http, requestID: journal.nextSequence, now: now)
            var entry = JournalEntry(
                receivedAtWall: 0, receivedAtMonotonicNanos: request.ms * 1_000_000, connectionID: 1,
                indexOnConnection: 0, clientAddress: "t", head: http.head, body: http.body, bodySize: http.body.count)
            entry.record(decision)
            // Answered at once, as the server would journal it: the exchange ends when it arrives.
            entry.outcome = .completed
            entry.finishedAtMonotonicNanos = entry.receivedAtMonotonicNanos
            journal.record(entry)
            if let completion = decision.completion { engine.finish(completion, now: now) }
        }
        return (engine, journal.entries, engine.report(journal: journal.entries))
    }

    /// The report's verdict for `rule` of `scenario`.
    static func verdict(_ report: JSONValue, _ scenario: String, _ rule: String) -> JSONValue? {
        guard case .array(let verdicts)? = report["verdicts"] else { return nil }
        return verdicts.first { $0["scenario"] == .string(scenario) && $0["rule"] == .string(rule) }
    }

    @Test func aRouteNamedAuthTokenIsJudgedAsARouteNotAsTheTokenEndpoint() throws {
        let scenario = """
            {"name": "look-alike", "expect": {"maxAttempts": 1, "maxRefreshes": 0},
             "routes": [{"id": "auth:token", "match": {"method": "GET", "path": "/a"}, "responses": [{"status": 503}]}]}
            """
        let (_, entries, report) = try Self.report([scenario], [(0, "GET", "/a"), (100, "GET", "/a")])
        // The journal prints the id as it is.
        #expect(entries.map { $0.json()["route"] } == [.string("auth:token"), .string("auth:token")])
        #expect(report["requests"] == .int(2))
        // Two attempts at one route: maxAttempts 1 is broken, and these are no token refreshes.
        let attempts = try #require(Self.verdict(report, "look-alike", "maxAttempts"))
        #expect(attempts["passed"] == .bool(false), "\(attempts)")
        #expect(attempts["evidence"] == .array([.int(1), .int(2)]))
        let refreshes = try #require(Self.verdict(report, "look-alike", "maxRefreshes"))
        #expect(refreshes["passed"] == .bool(true), "\(refreshes)")
        #expect(refreshes["evidence"] == .array([]))
    }

    @Test func aRouteNamedLikeARateLimitIsJudgedAsARoute() throws {
        let scenario = """
            {"name": "look-alike", "expect": {"maxAttempts": 1},
             "routes": [{"id": "rate-limit:x", "match": {"method": "GET", "path": "/b"}, "responses": [{"status": 503}]}]}
            """
        // Another scenario whose rate-limit rule is called "x": the route's requests are not its own.
        let limits = """
            {"name": "limits", "expect": {"maxAttempts": 1},
             "rateLimits": [{"id": "x", "path": "/limited", "limit": 100, "windowMs": 60000}],
             "routes": [{"id": "c", "match": {"method": "GET", "path": "/c"}, "responses": [{"status": 200}]}]}
            """
        let (_, entries, report) = try Self.report([scenario, limits], [(0, "GET", "/b"), (100, "GET", "/b")])
        #expect(entries.map(\.route) == [.route("rate-limit:x"), .route("rate-limit:x")])
        #expect(entries.map { $0.json()["route"] } == [.string("rate-limit:x"), .string("rate-limit:x")])
        let attempts = try #require(Self.verdict(report, "look-alike", "maxAttempts"))
        #expect(attempts["passed"] == .bool(false), "\(attempts)")
        #expect(attempts["evidence"] == .array([.int(1), .int(2)]))
        let others = try #require(Self.verdict(report, "limits", "maxAttempts"))
        #expect(others["passed"] == .bool(true), "\(others)")
    }

    @Test func aRetryAfterJudgementBelongsToItsOwnRouteOnly() throws {
        // Route "x [y]"'s Retry-After key, printed `route x [y] []`, starts with `route x [`: a prefix match on
        // that text gave scenario "a" (route "x") a retry that was scenario "b"'s.
        let a = """
            {"name": "a", "expect": {"honorsRetryAfter": true},
             "routes": [{"id": "x", "match": {"method": "GET", "path": "/x"}, "responses": [{"status": 200}]}]}
            """
        let b = """
            {"name": "b", "expect": {"honorsRetryAfter": true},
             "routes": [{"id": "x [y]", "match": {"method": "GET", "path": "/y"},
                         "responses": [{"status": 503, "headers": {"Retry-After": "1"}}, {"status": 200}]}]}
            """
        let (engine, _, report) = try Self.report([a, b], [(0, "GET", "/y"), (200, "GET", "/y")])
        #expect(engine.policy.retryAfter.observations.map(\.key) == [.route(id: "x [y]", partition: "")])
        let state = engine.stateJSON(now: EngineInstant(monotonicMilliseconds: 300))
        guard case .array(let observations)? = state["retryAfter"]?["observations"] else {
            Issue.record("no observations in \(state)")
            return
        }
        #expect(observations.map { $0["key"] } == [.string("route x [y] []")])
        let own = try #require(Self.verdict(report, "b", "honorsRetryAfter"))
        #expect(own["passed"] == .bool(false), "\(own)")
        let other = try #require(Self.verdict(report, "a", "honorsRetryAfter"))
        #expect(other["passed"] == .bool(true), "\(other)")
        #expect(other["evidence"] == .array([]))
    }

    @Test func onlyASideEffectNoteCountsAsASideEffect() {
        func entry(_ sequence: Int, _ notes: [JournalNote]) -> JournalEntry {
            let head = HTTPRequestHead(
                method: "POST", target: "/order", version: .http1_1,
                headers: HTTPHeaders([("Idempotency-Key", "\"k1\"")]))
            var entry = JournalEntry(
                sequence: sequence, receivedAtWall: 0, receivedAtMonotonicNanos: 0, connectionID: 1,
                indexOnConnection: 0, clientAddress: "t", head: head)
            entry.route = .route("order")
            entry.notes = notes
            return entry
        }
        // A remark that reads like a side effect is a remark.
        let lookAlike = JournalNote.remark("side effect: order created a resource")
        let real = JournalNote.sideEffect(route: "order")
        #expect(lookAlike.description == real.description)
        var expect = Expectations()
        expect.noDuplicateSideEffects = true
        let once = Verdicts.evaluate(expect, VerdictInput(
            entries: [entry(1, [real]), entry(2, [lookAlike])], idempotencyHeaders: ["order": "Idempotency-Key"]))
        #expect(once.map(\.passed) == [true], "\(once)")
        #expect(once.first?.evidence == [1])
        let twice = Verdicts.evaluate(expect, VerdictInput(
            entries: [entry(1, [real]), entry(2, [.remark("idempotency: key k1 first use"), real])],
            idempotencyHeaders: ["order": "Idempotency-Key"]))
        #expect(twice.map(\.passed) == [false], "\(twice)")
        #expect(twice.first?.evidence == [1, 2])
    }

    @Test func theJournalTextIsMadeInOnePlacePerType() {
        #expect(DecisionSource.route("orders").description == "orders")
        #expect(DecisionSource.tokenEndpoint.description == "auth:token")
        #expect(DecisionSource.rateLimit("per-client").description == "rate-limit:per-client")
        #expect(JournalNote.sideEffect(route: "orders").description == "side effect: orders created a resource")
        #expect(JournalNote.remark("auth: ok").description == "auth: ok")
        #expect(RetryAfterKey.route(id: "orders", partition: "abc").description == "route orders [abc]")
        #expect(RetryAfterKey.rateLimit(id: "per-client", bucket: "10.0.0.1").description == "rate-limit per-client [10.0.0.1]")
        // `?route=` compares the printed text, so `auth:token` still finds token calls.
        var token = JournalEntry(
            receivedAtWall: 0, receivedAtMonotonicNanos: 0, connectionID: 1, indexOnConnection: 0, clientAddress: "t",
            head: nil)
        token.route = .tokenEndpoint
        #expect(JournalFilter(route: "auth:token").accepts(token))
        #expect(!JournalFilter(route: "tokenEndpoint").accepts(token))
    }

    @Test func anEntryReadBackFromJSONKeepsItsTypes() throws {
        func roundTrip(scenario: String?, route: DecisionSource, notes: [JournalNote]) throws -> JournalEntry {
            var entry = JournalEntry(
                sequence: 3, receivedAtWall: 0, receivedAtMonotonicNanos: 0, connectionID: 1, indexOnConnection: 0,
                clientAddress: "t", head: nil)
            entry.scenario = scenario
            entry.route = route
            entry.notes = notes
            return try #require(JournalEntry(json: entry.json()))
        }
        let token = try roundTrip(scenario: nil, route: .tokenEndpoint, notes: [.remark("auth: token call issued t1")])
        #expect(token.route == .tokenEndpoint && token.notes == [.remark("auth: token call issued t1")])
        let limited = try roundTrip(scenario: nil, route: .rateLimit("x"), notes: [])
        #expect(limited.route == .rateLimit("x"))
        // A scenario's route keeps its id whatever it looks like; its side-effect note comes back as one.
        let lookAlike = try roundTrip(
            scenario: "s", route: .route("auth:token"), notes: [.sideEffect(route: "auth:token")])
        #expect(lookAlike.route == .route("auth:token") && lookAlike.notes == [.sideEffect(route: "auth:token")])
        let other = try roundTrip(scenario: "s", route: .route("a"), notes: [.remark("side effect: b created a resource")])
        #expect(other.notes == [.remark("side effect: b created a resource")])
    }
}
