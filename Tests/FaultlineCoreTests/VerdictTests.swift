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
            "responses": [{"status": 503, "headers": {"Retry-After": "1"}, "times": 3}, {"status": 200}]},
           {"id": "order", "match": {"method": "POST", "path": "/order"}, "idempotency": {},
            "responses": [{"status": 201, "json": {"id": "{{resource.id}}"}, "fault": "commit-then-reset", "times": 1},
                          {"status": 201, "json": {"id": "{{resource.id}}"}}]},
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
            // Answered at once, as the server would journal it: the exchange ends when it arrives.
            entry.outcome = decision.script.steps.contains(.abortConnection(.reset)) ? .resetSent : .completed
            entry.finishedAtMonotonicNanos = entry.receivedAtMonotonicNanos
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
        // Three 503s, each waited out, then it gives up: the limit of three attempts was put to the test.
        let (_, verdicts) = try Self.play([
            (0, "GET", "/item", []), (1000, "GET", "/item", []), (3100, "GET", "/item", []),
            (3200, "POST", "/order", [("Idempotency-Key", "k1")]), (3300, "POST", "/order", [("Idempotency-Key", "k1")]),
            (3400, "GET", "/bad", []),
        ])
        #expect(verdicts.count == 6)
        #expect(Self.failed(verdicts) == [], "\(verdicts.filter { !$0.passed })")
        let outcomes = Dictionary(uniqueKeysWithValues: verdicts.map { ($0.rule, $0.outcome) })
        // One logical request retried twice is too few to judge backoff across logical requests. The rest were
        // judged, and passed.
        #expect(outcomes == ["honorsRetryAfter": .pass, "noDuplicateSideEffects": .pass, "retriesOnlyReplayable": .pass,
                             "maxAttempts": .pass, "backoff": .inconclusive, "noRetryOn4xx": .pass])
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
        // The two POSTs without a key are one logical request too (the first was reset): 3 retried in all.
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

/// What a retry is (`Retries`): requests that overlap in time are distinct requests, whatever the protocol; a
/// retry is sent after the earlier attempt's answer. Each journal here is played through the engine as the server
/// plays it — decided when a request arrives, finished when its answer is out — on a fake clock.
@Suite struct ConcurrentRequestTests {
    static let scenario = """
        {"name": "c", "expect": {"honorsRetryAfter": true, "maxAttempts": 1, "noRetryOn4xx": true},
         "routes": [
           {"id": "busy", "match": {"method": "GET", "path": "/busy"},
            "responses": [{"status": 503, "headers": {"Retry-After": "1"}, "times": 3}, {"status": 200}]},
           {"id": "gone", "match": {"method": "GET", "path": "/gone"}, "responses": [{"status": 404}]}
         ]}
        """

    /// A request: when it arrives and when its exchange ends (ms), and over which connection and stream.
    struct Attempt {
        var path: String
        var arrives: UInt64
        var ends: UInt64
        var connection = 1
        var stream: Int? = nil
    }

    /// Decides each request when it arrives and finishes it when it ends, in time order, as the loop does.
    static func judge(_ attempts: [Attempt], maxAttempts: Int = 1) throws -> [String: Verdict] {
        var text = scenario
        if maxAttempts != 1 { text = text.replacingOccurrences(of: #""maxAttempts": 1"#, with: #""maxAttempts": \#(maxAttempts)"#) }
        let loaded = try ScenarioLoader.load(bytes: Array(text.utf8), file: "c.json", directory: nil)
        let engine = Engine(scenarios: [loaded])
        var journal = Journal()
        enum Event { case arrive(Int), end(Int) }
        var events: [(ms: UInt64, order: Int, event: Event)] = []
        for (index, attempt) in attempts.enumerated() {
            events.append((attempt.arrives, 2 * index, .arrive(index)))
            events.append((attempt.ends, 2 * index + 1, .end(index)))
        }
        var sequences: [Int: Int] = [:]
        var completions: [Int: ExchangeCompletion] = [:]
        for (ms, _, event) in events.sorted(by: { ($0.ms, $0.order) < ($1.ms, $1.order) }) {
            let now = EngineInstant(monotonicMilliseconds: ms, wallSeconds: 1_800_000_000)
            switch event {
            case .arrive(let index):
                let attempt = attempts[index]
                let http = EngineTests.request("GET", attempt.path, version: attempt.stream == nil ? .http1_1 : .http2)
                let decision = engine.decide(
                    http, requestID: journal.nextSequence, now: now,
                    attempt: Retries.Attempt(connection: attempt.connection, stream: attempt.stream, arrivedAtNanos: ms * 1_000_000))
                var entry = JournalEntry(
                    receivedAtWall: 0, receivedAtMonotonicNanos: ms * 1_000_000, connectionID: attempt.connection,
                    indexOnConnection: 0, clientAddress: "t", head: http.head, body: [], bodySize: 0)
                entry.record(decision)
                if let stream = attempt.stream {
                    entry.exchangeProtocol = .http2
                    entry.stream = stream
                }
                sequences[index] = journal.record(entry)
                completions[index] = decision.completion
            case .end(let index):
                journal.update(sequences[index]!) {
                    $0.outcome = .completed
                    $0.finishedAtMonotonicNanos = ms * 1_000_000
                }
                if let completion = completions[index] { engine.finish(completion, now: now) }
            }
        }
        var input = VerdictInput(entries: journal.entries, retryAfter: engine.policy.retryAfter.observations)
        input.retryAfterPending = engine.policy.retryAfter.pending
        return Dictionary(uniqueKeysWithValues: Verdicts.evaluate(loaded.expect!, input).map { ($0.rule, $0) })
    }

    /// Three identical GETs at once on one HTTP/2 connection (streams 3, 5, 7), or on three HTTP/1.1 connections.
    static func burst(_ path: String, at ms: UInt64, h2: Bool) -> [Attempt] {
        (0..<3).map { index in
            h2 ? Attempt(path: path, arrives: ms, ends: ms + 2, connection: 1, stream: 3 + 2 * index)
                : Attempt(path: path, arrives: ms, ends: ms + 2 + UInt64(index), connection: index + 1)
        }
    }

    @Test(arguments: [true, false])
    func concurrent404sAreThreeRequestsNotThreeAttempts(h2: Bool) throws {
        let verdicts = try Self.judge(Self.burst("/gone", at: 0, h2: h2))
        #expect(verdicts["maxAttempts"]?.outcome == .pass, "\(verdicts["maxAttempts"]!)")
        #expect(verdicts["noRetryOn4xx"]?.outcome == .pass, "\(verdicts["noRetryOn4xx"]!)")
        #expect(verdicts["noRetryOn4xx"]?.evidence == [1, 2, 3])
    }

    @Test(arguments: [true, false])
    func concurrent503sWaitedOutEachPass(h2: Bool) throws {
        // Each gets 503 with Retry-After: 1, and each is retried once, 1.06 s after the answers.
        let verdicts = try Self.judge(Self.burst("/busy", at: 0, h2: h2) + Self.burst("/busy", at: 1060, h2: h2), maxAttempts: 2)
        let honours = try #require(verdicts["honorsRetryAfter"])
        #expect(honours.outcome == .pass, "\(honours)")
        #expect(honours.explanation.hasPrefix("3 retries after Retry-After, none early"))
        #expect(verdicts["maxAttempts"]?.outcome != .fail, "\(verdicts["maxAttempts"]!)")
    }

    @Test(arguments: [true, false])
    func oneEarlyRetryAfterABurstIsNamed(h2: Bool) throws {
        var attempts = Self.burst("/busy", at: 0, h2: h2)
        attempts.append(Attempt(path: "/busy", arrives: 1060, ends: 1062, connection: 1, stream: h2 ? 9 : nil))
        attempts.append(Attempt(path: "/busy", arrives: 1060, ends: 1062, connection: 2, stream: h2 ? 11 : nil))
        // The third is retried 100 ms after the answers: 900 ms early.
        attempts.append(Attempt(path: "/busy", arrives: 104, ends: 106, connection: 3, stream: h2 ? 13 : nil))
        let honours = try #require(try Self.judge(attempts, maxAttempts: 2)["honorsRetryAfter"])
        #expect(honours.outcome == .fail)
        #expect(honours.explanation.hasPrefix("request #4 came "), "\(honours.explanation)")
        #expect(honours.explanation.contains("whose Retry-After asked for 1000 ms"))
    }

    @Test func aRequestOnAnOpenConnectionWithinTheGraceIsNotARetry() throws {
        // Read 5 ms after the first answer, on another connection that was already open: part of the burst.
        let burst = try Self.judge([Attempt(path: "/gone", arrives: 0, ends: 1, connection: 1),
                                    Attempt(path: "/gone", arrives: 6, ends: 7, connection: 2)])
        #expect(burst["noRetryOn4xx"]?.outcome == .pass && burst["maxAttempts"]?.outcome == .pass)
        // 10 ms after it: sent because of it.
        let retried = try Self.judge([Attempt(path: "/gone", arrives: 0, ends: 1, connection: 1),
                                      Attempt(path: "/gone", arrives: 11, ends: 12, connection: 2)])
        #expect(retried["noRetryOn4xx"]?.outcome == .fail && retried["maxAttempts"]?.outcome == .fail)
    }

    /// CI's case: a naive client retried a 503 five times on its HTTP/2 connection, each retry 0.7–1.6 ms after the
    /// answer. Those inside the 1 ms grace start or join other chains, and the chain #1, #2, #4 "was not tried again"
    /// although #5 came 0.8 ms after #4's answer: that is no proof, so maxAttempts may not pass. Here in whole
    /// milliseconds with a limit of 2: #1 and #2 fail, and #3 comes as #2's answer ends.
    @Test func aRequestTooSoonAfterTheLastAnswerToTellIsNoProofOfNoRetry() throws {
        let attempts = [Attempt(path: "/busy", arrives: 0, ends: 1, stream: 1),
                        Attempt(path: "/busy", arrives: 3, ends: 4, stream: 3),
                        Attempt(path: "/busy", arrives: 4, ends: 5, stream: 5)]
        let verdict = try #require(try Self.judge(attempts, maxAttempts: 2)["maxAttempts"])
        #expect(verdict.outcome == .inconclusive, "\(verdict)")
        #expect(verdict.explanation.contains("too soon to tell a retry from a request sent alongside"), "\(verdict.explanation)")
        // A 404 sent again on the connection as its answer ends: not judged a retry, and no proof of none either: only
        // the second 404, which nothing followed, is evidence.
        let gone = try #require(try Self.judge([Attempt(path: "/gone", arrives: 0, ends: 1, stream: 1),
                                                Attempt(path: "/gone", arrives: 1, ends: 2, stream: 3)])["noRetryOn4xx"])
        #expect(gone.outcome == .pass && gone.evidence == [2], "\(gone)")
    }

    @Test func aRequestThatOverlapsTheAnswerIsNotItsRetry() throws {
        // The second GET arrives while the first's 404 is still going out (a slow answer): two requests.
        let verdicts = try Self.judge([Attempt(path: "/gone", arrives: 0, ends: 50), Attempt(path: "/gone", arrives: 49, ends: 60, connection: 2)])
        #expect(verdicts["noRetryOn4xx"]?.outcome == .pass && verdicts["maxAttempts"]?.outcome == .pass)
        // A nanosecond-exact rule: arriving as the answer ends is after it.
        let retried = try Self.judge([Attempt(path: "/gone", arrives: 0, ends: 50), Attempt(path: "/gone", arrives: 50, ends: 60)])
        #expect(retried["noRetryOn4xx"]?.outcome == .fail && retried["maxAttempts"]?.outcome == .fail)
    }

    @Test func aClientThatNeverRetriesIsInconclusiveNotPassed() throws {
        let verdicts = try Self.judge([Attempt(path: "/busy", arrives: 0, ends: 2)], maxAttempts: 3)
        let honours = try #require(verdicts["honorsRetryAfter"])
        #expect(honours.outcome == .inconclusive && honours.evidence == [1])
        #expect(honours.explanation.hasPrefix("no request followed a Retry-After (1 sent)"), "\(honours.explanation)")
        let attempts = try #require(verdicts["maxAttempts"])
        #expect(attempts.outcome == .inconclusive)
        #expect(attempts.explanation == "no logical request failed 3 time(s) in a row (at most 1), so the limit of 3 was never put to the test")
        #expect(verdicts["noRetryOn4xx"]?.outcome == .inconclusive)
    }
}
