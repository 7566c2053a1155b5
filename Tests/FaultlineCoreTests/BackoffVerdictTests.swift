import Foundation
import Testing
@testable import FaultlineCore

/// The `backoff` rule on simulated clients, without sockets: journal entries with the receive times a retry
/// strategy would produce. Each strategy runs over 2,000 seeds; every run has 20–60 logical requests, each retried
/// 0–R times (R = 4 or 5, uniformly), a base delay of 25, 50, 100 or 200 ms, no cap, and per attempt 0.3–3 ms of
/// exchange time plus, one time in 50, a 0–60 ms scheduling hiccup; "loaded" runs add, one wait in 20, a stall of
/// 50 ms–3 s (log-uniform), as a CI runner testing in parallel does. docs/verdicts.md states the measured rates.
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
    static func journal(_ strategy: Strategy, seed: UInt64, loaded: Bool = false) -> [JournalEntry] {
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
                // A loaded machine (a CI runner building and testing in parallel): one wait in 20 stalls
                // 50 ms–3 s, log-uniformly. A naive client passed `backoff` ×1.30 on such stalls alone.
                if loaded && random.next() % 20 == 0 { noise += 50 * pow(60, random.nextUnit()) }
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

    static func outcomes(_ strategy: Strategy, jitter: Bool, loaded: Bool = false) -> [VerdictOutcome: Int] {
        var expect = Expectations()
        expect.backoff = true
        expect.jitter = jitter
        var counts: [VerdictOutcome: Int] = [:]
        for seed in 1...UInt64(runs) {
            let verdict = Verdicts.evaluate(expect, VerdictInput(entries: journal(strategy, seed: seed, loaded: loaded)))[0]
            counts[verdict.outcome, default: 0] += 1
        }
        return counts
    }

    @Test(arguments: [Strategy.fullJitter, .equalJitter, .decorrelatedJitter], [false, true])
    func jitteredBackoffPassesWithJitter(_ strategy: Strategy, loaded: Bool) {
        let counts = Self.outcomes(strategy, jitter: true, loaded: loaded)
        print("backoff+jitter \(strategy)\(loaded ? " loaded" : ""): \(counts) of \(Self.runs)")
        #expect(counts[.fail, default: 0] <= 5, "false failures of \(strategy): \(counts)")
        #expect(counts[.inconclusive, default: 0] == 0)
    }

    @Test(arguments: [false, true])
    func plainExponentialPassesBackoffAndFailsJitter(loaded: Bool) {
        let backoff = Self.outcomes(.exponential, jitter: false, loaded: loaded)
        print("backoff exponential\(loaded ? " loaded" : ""): \(backoff) of \(Self.runs)")
        #expect(backoff[.fail, default: 0] <= 2)
        let jitter = Self.outcomes(.exponential, jitter: true, loaded: loaded)
        print("backoff+jitter exponential\(loaded ? " loaded" : ""): \(jitter) of \(Self.runs)")
        #expect(jitter[.pass, default: 0] <= 2, "false passes of jitter: \(jitter)")
    }

    @Test(arguments: [Strategy.constant, .immediate], [false, true])
    func noBackoffFails(_ strategy: Strategy, loaded: Bool) {
        let counts = Self.outcomes(strategy, jitter: false, loaded: loaded)
        print("backoff \(strategy)\(loaded ? " loaded" : ""): \(counts) of \(Self.runs)")
        #expect(counts[.pass, default: 0] <= 2, "false passes of \(strategy): \(counts)")
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
        #expect(verdict.explanation == "the intervals do not grow: the upper quartile of the waits before retry 1: 1500 ms (6), "
                + "retry 2: 1500 ms (6) grows ×1.00 per retry, at least ×1.15 expected")
    }

    /// The shape of a CI failure: 30 logical requests retried at once (2 ms) three times on a loaded runner, a
    /// few waits stalled. The mean of the slower half read 44, 299 and 74 ms as ×1.30 growth and passed.
    @Test func aFewStalledImmediateRetriesAreNotBackoff() {
        let stalls: [Int: [UInt64]] = [0: [600], 1: [1000, 1500, 2000], 2: [1000]]
        let schedules: [[UInt64]] = (0..<30).map { request in
            var times: [UInt64] = [0]
            for retry in 0..<3 {
                let stalled = stalls[retry]!
                times.append(times.last! + (request < stalled.count ? stalled[request] : 2))
            }
            return times
        }
        let verdict = Self.verdict(schedules, jitter: true)
        #expect(verdict.outcome == .fail)
        #expect(verdict.explanation == "the intervals do not grow: the upper quartile of the waits before retry 1: 2 ms (30), "
                + "retry 2: 2 ms (30), retry 3: 2 ms (30) grows ×1.00 per retry, at least ×1.15 expected")
    }

    /// Stalls in more than a quarter of few samples lift the upper quartile; the median stays where the client's
    /// schedule puts it.
    @Test func stallsThatLiftTheUpperQuartileDoNotLiftTheMedian() {
        let second: [UInt64] = [2, 2, 2, 900, 1500, 2]
        let schedules: [[UInt64]] = (0..<6).map { [0, 2, 2 + second[$0]] }
        let verdict = Self.verdict(schedules)
        #expect(verdict.outcome == .fail)
        #expect(verdict.explanation == "the intervals do not grow: the upper quartile of the waits before retry 1: 2 ms (6), "
                + "retry 2: 676 ms (6) grows ×33.78 per retry, but their median (retry 1: 2 ms (6), retry 2: 2 ms (6)) grows "
                + "×1.00, at least ×1.03 expected: a few long waits, not a schedule that backs off")
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
