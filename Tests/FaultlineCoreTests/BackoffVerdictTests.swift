import Testing
@testable import FaultlineCore

/// The `backoff` rule on simulated clients, without sockets: journal entries with the receive times a retry
/// strategy would produce. Each strategy runs over 2,000 seeds; every run has 20–60 logical requests, each retried
/// 0–R times (R = 4 or 5, uniformly), a base delay of 25, 50, 100 or 200 ms, no cap, and per attempt 0.3–3 ms of
/// exchange time plus, one time in 50, a 0–60 ms scheduling hiccup. The README states the measured rates.
@Suite struct BackoffVerdictTests {
    enum Strategy: String, CaseIterable {
        /// wait uniform in [0, base·2^n]
        case fullJitter
        /// base·2^n / 2 + uniform in [0, base·2^n / 2]
        case equalJitter
        /// AWS's decorrelated jitter: sleep = min(cap, uniform in [base, previous sleep · 3])
        case decorrelatedJitter
        /// base·2^n, no randomness
        case exponential
        /// 2·base every time
        case constant
        /// no wait at all
        case immediate
    }

    static let runs = 2_000

    /// The waits (ms) of one logical request's `count` retries.
    static func waits(_ strategy: Strategy, count: Int, base: Double, random: inout SeededRandom) -> [Double] {
        var previous = base
        return (0..<count).map { n in
            let ceiling = base * Double(1 << n)
            switch strategy {
            case .fullJitter: return random.nextUnit() * ceiling
            case .equalJitter: return ceiling / 2 + random.nextUnit() * ceiling / 2
            case .decorrelatedJitter:
                previous = base + random.nextUnit() * (previous * 3 - base)
                return previous
            case .exponential: return ceiling
            case .constant: return 2 * base
            case .immediate: return 0
            }
        }
    }

    /// One simulated run: the journal of every logical request's attempts, logical requests interleaved as a
    /// concurrent client would send them (the grouping does not depend on the order).
    static func journal(_ strategy: Strategy, seed: UInt64) -> [JournalEntry] {
        var random = SeededRandom(seed: seed)
        let logical = 20 + Int(random.next() % 41)
        let maxRetries = 4 + Int(random.next() % 2)
        let base = [25.0, 50, 100, 200][Int(random.next() % 4)]
        var entries: [JournalEntry] = []
        for request in 0..<logical {
            let retries = Int(random.next() % UInt64(maxRetries + 1))
            var ms = Double(request) * 7
            var times = [ms]
            for wait in waits(strategy, count: retries, base: base, random: &random) {
                var noise = 0.3 + random.nextUnit() * 2.7
                if random.next() % 50 == 0 { noise += random.nextUnit() * 60 }
                ms += wait + noise
                times.append(ms)
            }
            for time in times {
                var entry = JournalEntry(
                    receivedAtWall: 0, receivedAtMonotonicNanos: UInt64(time * 1_000_000), connectionID: request,
                    indexOnConnection: 0, clientAddress: "sim",
                    head: EngineTests.request("GET", "/reports/\(request)").head, body: [], bodySize: 0)
                entry.route = .route("report")
                entry.status = 503
                entry.outcome = .completed
                entry.finishedAtMonotonicNanos = entry.receivedAtMonotonicNanos
                entries.append(entry)
            }
        }
        entries.sort { $0.receivedAtMonotonicNanos < $1.receivedAtMonotonicNanos }
        for index in entries.indices { entries[index].sequence = index + 1 }
        return entries
    }

    static func outcomes(_ strategy: Strategy, jitter: Bool) -> [VerdictOutcome: Int] {
        var expect = Expectations()
        expect.backoff = true
        expect.jitter = jitter
        var counts: [VerdictOutcome: Int] = [:]
        for seed in 1...UInt64(runs) {
            let verdict = Verdicts.evaluate(expect, VerdictInput(entries: journal(strategy, seed: seed)))[0]
            counts[verdict.outcome, default: 0] += 1
        }
        return counts
    }

    @Test(arguments: [Strategy.fullJitter, .equalJitter, .decorrelatedJitter])
    func jitteredBackoffPassesWithJitter(_ strategy: Strategy) {
        let counts = Self.outcomes(strategy, jitter: true)
        print("backoff+jitter \(strategy): \(counts) of \(Self.runs)")
        #expect(counts[.fail, default: 0] <= 1, "false failures of \(strategy): \(counts)")
        #expect(counts[.inconclusive, default: 0] == 0)
    }

    @Test func plainExponentialPassesBackoffAndFailsJitter() {
        let backoff = Self.outcomes(.exponential, jitter: false)
        print("backoff exponential: \(backoff) of \(Self.runs)")
        #expect(backoff[.fail, default: 0] <= 1)
        let jitter = Self.outcomes(.exponential, jitter: true)
        print("backoff+jitter exponential: \(jitter) of \(Self.runs)")
        #expect(jitter[.pass, default: 0] <= 1, "false passes of jitter: \(jitter)")
    }

    @Test(arguments: [Strategy.constant, .immediate])
    func noBackoffFails(_ strategy: Strategy) {
        let counts = Self.outcomes(strategy, jitter: false)
        print("backoff \(strategy): \(counts) of \(Self.runs)")
        #expect(counts[.pass, default: 0] <= 1, "false passes of \(strategy): \(counts)")
    }
}

/// The `backoff` verdict's sentences on small, exact journals.
@Suite struct BackoffVerdictExplanationTests {
    /// Logical request i's attempts at the given times (ms), one path per logical request.
    static func verdict(_ schedules: [[UInt64]], jitter: Bool = false) -> Verdict {
        var entries: [JournalEntry] = []
        for (request, times) in schedules.enumerated() {
            for ms in times {
                var entry = JournalEntry(
                    receivedAtWall: 0, receivedAtMonotonicNanos: ms * 1_000_000, connectionID: request,
                    indexOnConnection: 0, clientAddress: "t",
                    head: EngineTests.request("GET", "/r/\(request)").head, body: [], bodySize: 0)
                entry.route = .route("r")
                entry.status = 503
                entry.outcome = .completed
                entry.finishedAtMonotonicNanos = entry.receivedAtMonotonicNanos
                entry.sequence = entries.count + 1
                entries.append(entry)
            }
        }
        var expect = Expectations()
        expect.backoff = true
        expect.jitter = jitter
        return Verdicts.evaluate(expect, VerdictInput(entries: entries))[0]
    }

    @Test func aConstantPauseIsNotBackoff() {
        let verdict = Self.verdict((0..<6).map { _ in [0, 1500, 3000] })
        #expect(verdict.outcome == .fail && verdict.evidence == Array(1...18))
        #expect(verdict.explanation == "the intervals do not grow: the slower half of the waits before retry 1: 1500 ms (6), "
                + "retry 2: 1500 ms (6) grows ×1.00 per retry, at least ×1.15 expected")
    }

    @Test func exactDoublingPassesBackoffButNotJitter() {
        let schedules: [[UInt64]] = (0..<5).map { _ in [0, 100, 300, 700] }
        #expect(Self.verdict(schedules).outcome == .pass)
        let verdict = Self.verdict(schedules, jitter: true)
        #expect(verdict.outcome == .fail)
        #expect(verdict.explanation.hasPrefix("no jitter: logical requests wait the same before the same retry "
                                              + "(interquartile range 0 % of the median, at least 10 % expected)"))
    }

    @Test func tooFewRetriedRequestsAreInconclusive() {
        let verdict = Self.verdict([[0, 100, 300, 700], [0, 80, 250], [0, 90], [0]])
        #expect(verdict.passed && verdict.outcome == .inconclusive)
        #expect(verdict.explanation == "3 logical request(s) retried, 2 of them twice or more: too few to judge backoff "
                + "(at least 5 logical requests retried twice or more are needed)")
        #expect(verdict.json()["outcome"] == .string("inconclusive"))
    }
}
