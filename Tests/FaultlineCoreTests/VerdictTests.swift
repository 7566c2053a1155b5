import Testing
@testable import FaultlineCore

/// The verdict rules on journals built by the engine on a fake clock: a careful client passes, a naive one
/// fails exactly the rules it breaks, with evidence naming the right requests.
@Suite struct VerdictTests {
    static let scenario = """
        {"name": "v", "expect": {"honorsRetryAfter": true, "noDuplicateSideEffects": true, "retriesOnlyReplayable": true,
                                 "maxAttempts": 3, "backoff": true, "noRetryOn4xx": true},
         "routes": [
           {"id": "item", "match": {"method": "GET", "path": "/item"},
            "responses": [{"status": 503, "headers": {"Retry-After": "1"}, "times": 2}, {"status": 200}]},
           {"id": "order", "match": {"method": "POST", "path": "/order"}, "idempotency": {},
            "responses": [{"status": 201, "json": {"id": "{{resource.id}}"}}]},
           {"id": "bad", "match": {"method": "GET", "path": "/bad"}, "responses": [{"status": 400}]}
         ]}
        """

    /// Plays requests at the given milliseconds through an engine and a journal, like the server does.
    static func play(_ requests: [(ms: UInt64, method: String, target: String, headers: [(String, String)])]) throws
        -> (Engine, [Verdict]) {
        let scenario = try ScenarioLoader.load(bytes: Array(scenario.utf8), file: "v.json", directory: nil)
        let engine = Engine(scenarios: [scenario])
        var journal = Journal()
        for request in requests {
            let http = EngineTests.request(request.method, request.target, headers: request.headers, body: "{}")
            let now = EngineInstant(monotonicMilliseconds: request.ms, wallSeconds: 1_800_000_000)
            let decision = engine.decide(http, requestID: journal.nextSequence, now: now)
            var entry = JournalEntry(
                receivedAtWall: 0, receivedAtMonotonicNanos: request.ms * 1_000_000, connectionID: 1,
                indexOnConnection: 0, clientAddress: "t", head: http.head, body: http.body, bodySize: http.body.count)
            entry.record(decision)
            journal.record(entry)
            if let completion = decision.completion { engine.finish(completion, now: now) }
        }
        let input = VerdictInput(
            entries: journal.entries, retryAfter: engine.policy.retryAfter.observations,
            idempotencyHeaders: ["order": "Idempotency-Key"])
        return (engine, Verdicts.evaluate(scenario.expect!, input))
    }

    static func failed(_ verdicts: [Verdict]) -> [String] { verdicts.filter { !$0.passed }.map(\.rule) }

    @Test func aCarefulClientPassesEveryRule() throws {
        let (_, verdicts) = try Self.play([
            (0, "GET", "/item", []), (1000, "GET", "/item", []), (3100, "GET", "/item", []),
            (3200, "POST", "/order", [("Idempotency-Key", "k1")]), (3300, "POST", "/order", [("Idempotency-Key", "k1")]),
            (3400, "GET", "/bad", []),
        ])
        #expect(verdicts.count == 6)
        #expect(Self.failed(verdicts) == [], "\(verdicts.filter { !$0.passed })")
        // One logical request retried twice is too few to judge backoff across logical requests.
        #expect(verdicts.first { $0.rule == "backoff" }?.outcome == .inconclusive)
    }

    @Test func aNaiveClientFailsExactlyTheRulesItBreaks() throws {
        let (_, verdicts) = try Self.play([
            (0, "GET", "/item", []), (200, "GET", "/item", []), (300, "GET", "/item", []), (350, "GET", "/item", []),
            (400, "POST", "/order", []), (500, "POST", "/order", []),
            (600, "GET", "/bad", []), (700, "GET", "/bad", []),
        ])
        #expect(Set(Self.failed(verdicts)) == ["honorsRetryAfter", "retriesOnlyReplayable", "maxAttempts", "noRetryOn4xx",
                                               "noDuplicateSideEffects"])
        let early = try #require(verdicts.first { $0.rule == "honorsRetryAfter" })
        #expect(early.explanation.hasPrefix("request #2 came 200 ms after #1, whose Retry-After asked for 1000 ms"))
        #expect(early.evidence.prefix(2) == [1, 2])
        let replay = try #require(verdicts.first { $0.rule == "retriesOnlyReplayable" })
        #expect(replay.evidence == [5, 6])
        let fourxx = try #require(verdicts.first { $0.rule == "noRetryOn4xx" })
        #expect(fourxx.evidence == [7, 8] && fourxx.explanation.contains("got 400"))
        let attempts = try #require(verdicts.first { $0.rule == "maxAttempts" })
        #expect(attempts.evidence == [1, 2, 3, 4])
        // Backoff is judged across logical requests (BackoffVerdictTests): one retried GET is inconclusive.
        let backoff = try #require(verdicts.first { $0.rule == "backoff" })
        #expect(backoff.passed && backoff.outcome == .inconclusive)
        #expect(backoff.explanation.hasPrefix("3 logical request(s) retried, 1 of them twice or more: too few"))
    }

    @Test func duplicateSideEffectsNameTheKeyAndRequests() throws {
        let (_, verdicts) = try Self.play([
            (0, "POST", "/order", [("Idempotency-Key", "a")]),
            (10, "POST", "/order", [("Idempotency-Key", "b")]),
        ])
        #expect(Self.failed(verdicts) == [])
        // The same key twice with different payload is a 422, not a second resource: still one per key.
        let verdict = try #require(verdicts.first { $0.rule == "noDuplicateSideEffects" })
        #expect(verdict.explanation == "2 side effect(s), one per idempotency key" && verdict.evidence == [1, 2])
    }
}
