#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One judged rule: whether the client kept it, a sentence a developer understands without reading our code,
/// and the journal sequence numbers that show it.
///
/// A rule is *inconclusive* when the situation it judges never happened — no request followed a Retry-After, no
/// logical request failed as often as `maxAttempts` allows, no download was cut — or, for a statistical rule
/// (`backoff`), when too few samples were seen: never a vacuous pass. Then `passed` stays true (an inconclusive
/// verdict does not fail the report unless asked: `faultline verify --strict`), `outcome` says so, and the
/// explanation names what the rule waited for.
package struct Verdict: Sendable, Equatable {
    package var rule: String
    package var passed: Bool
    package var explanation: String
    /// Journal sequence numbers, each once, in the order the rule named them.
    package var evidence: [Int] {
        didSet { if evidence.count > 1 { evidence = Self.once(evidence) } }
    }
    /// The situation the rule judges never happened (or too few samples to tell); `passed` is true.
    package var inconclusive = false

    package init(rule: String, passed: Bool, explanation: String, evidence: [Int], inconclusive: Bool = false) {
        self.rule = rule
        self.passed = passed
        self.explanation = explanation
        self.evidence = Self.once(evidence)
        self.inconclusive = inconclusive
    }

    /// Each number once, where it first appears.
    private static func once(_ numbers: [Int]) -> [Int] {
        var seen = Set<Int>()
        return numbers.filter { seen.insert($0).inserted }
    }

    package var outcome: VerdictOutcome { inconclusive ? .inconclusive : passed ? .pass : .fail }

    package static func inconclusive(rule: String, explanation: String, evidence: [Int]) -> Verdict {
        Verdict(rule: rule, passed: true, explanation: explanation, evidence: evidence, inconclusive: true)
    }

    package func json() -> JSONValue {
        .object([
            ("rule", .string(rule)), ("passed", .bool(passed)), ("outcome", .string(outcome.rawValue)),
            ("explanation", .string(explanation)), ("evidence", .array(evidence.map(JSONValue.int))),
        ])
    }
}

/// A verdict's state in the report's `outcome` field. `passed` is false exactly for `.fail`.
package enum VerdictOutcome: String, Sendable, Equatable {
    case pass, fail, inconclusive
}

/// The facts the verdicts are drawn from, gathered by the engine. Pure data, so the rules are tested
/// without a server.
package struct VerdictInput: Sendable {
    /// Journal entries of scripted routes (not admin calls), oldest first.
    package var entries: [JournalEntry]
    package var retryAfter: [RetryAfterTracker.Observation]
    /// Advertisements no request has followed yet: with no observation, what `honorsRetryAfter` waited for.
    package var retryAfterPending: [RetryAfterTracker.Advertisement] = []
    package var refreshCalls: Int?
    package var maxRefreshesInFlight: Int?
    /// The header holding the idempotency key, per side-effecting route id.
    package var idempotencyHeaders: [String: String]
    /// The routes with a WebSocket step: their requests are connection attempts.
    package var webSocketRoutes: Set<String> = []
    /// The network's changes and the connection attempts its listener answered (ARCHITECTURE §3b), oldest first.
    package var network: [JournalEntry] = []

    package init(
        entries: [JournalEntry], retryAfter: [RetryAfterTracker.Observation] = [], refreshCalls: Int? = nil,
        maxRefreshesInFlight: Int? = nil, idempotencyHeaders: [String: String] = [:]
    ) {
        self.entries = entries
        self.retryAfter = retryAfter
        self.refreshCalls = refreshCalls
        self.maxRefreshesInFlight = maxRefreshesInFlight
        self.idempotencyHeaders = idempotencyHeaders
    }
}

/// Judges the client against `Expectations` (ARCHITECTURE §8). Each rule explains its failure with the requests
/// that broke it.
package enum Verdicts {
    /// Statuses after which trying again is legitimate (RFC 9110 §15.5: timeout, conflict, too early, too many).
    static let retryable4xx: Set<Int> = [408, 409, 425, 429]

    package static func evaluate(_ expect: Expectations, _ input: VerdictInput) -> [Verdict] {
        var verdicts: [Verdict] = []
        if expect.honorsRetryAfter { verdicts.append(honorsRetryAfter(input)) }
        if expect.singleFlightRefresh { verdicts.append(singleFlight(input)) }
        if let limit = expect.maxRefreshes { verdicts.append(maxRefreshes(limit, input)) }
        if expect.noDuplicateSideEffects { verdicts.append(noDuplicateSideEffects(input)) }
        let attempts = Retries.logicalRequests(input.entries, expect.logicalKey)
        if expect.retriesOnlyReplayable { verdicts.append(retriesOnlyReplayable(input)) }
        if expect.retriesOnlyUnprocessed { verdicts.append(retriesOnlyUnprocessed(input)) }
        if expect.retriesRefusedStreams { verdicts.append(retriesRefusedStreams(attempts)) }
        if let limit = expect.maxAttempts { verdicts.append(maxAttempts(limit, attempts, expect.logicalKey)) }
        if expect.backoff { verdicts.append(backoff(attempts, jitter: expect.jitter)) }
        if expect.noRetryOn4xx { verdicts.append(noRetryOn4xx(attempts, expect.logicalKey)) }
        if expect.revalidatesWithValidators { verdicts.append(ResourceVerdicts.revalidates(input.entries)) }
        if expect.resumesDownloads { verdicts.append(ResourceVerdicts.resumes(input.entries)) }
        if expect.conditionalWrites { verdicts.append(ResourceVerdicts.conditionalWrites(input.entries)) }
        if expect.honorsRetryAfterOnUpgrade {
            var upgrades = input
            upgrades.retryAfter = input.retryAfter.filter {
                if case .route(let id, _) = $0.key { return input.webSocketRoutes.contains(id) }
                return false
            }
            upgrades.retryAfterPending = input.retryAfterPending.filter {
                if case .route(let id, _) = $0.key { return input.webSocketRoutes.contains(id) }
                return false
            }
            var verdict = honorsRetryAfter(upgrades)
            verdict.rule = "honorsRetryAfterOnUpgrade"
            if upgrades.retryAfter.isEmpty {
                verdict = .inconclusive(rule: verdict.rule, explanation: "no upgrade was refused with Retry-After and tried again",
                                        evidence: upgrades.retryAfterPending.map(\.sequence))
            }
            verdicts.append(verdict)
        }
        if expect.reconnectBackoff { verdicts.append(WebSocketVerdicts.reconnectBackoff(input, jitter: expect.reconnectJitter)) }
        if let messages = expect.resubscribes { verdicts.append(WebSocketVerdicts.resubscribes(input, messages)) }
        if let limit = expect.heartbeatMilliseconds { verdicts.append(WebSocketVerdicts.heartbeat(input, limit)) }
        if let storm = expect.noRequestStorm {
            verdicts.append(NetworkVerdicts.noRequestStorm(input, max: storm.max, withinMilliseconds: storm.withinMilliseconds))
        }
        if expect.backsOffDuringOutage { verdicts.append(NetworkVerdicts.backsOffDuringOutage(input)) }
        return verdicts
    }

    private static func honorsRetryAfter(_ input: VerdictInput) -> Verdict {
        let early = input.retryAfter.filter { !$0.honoured }
        if input.retryAfter.isEmpty {
            let waiting = input.retryAfterPending
            let delivered = waiting.filter { $0.deliveredAtNanos != nil }
            return .inconclusive(
                rule: "honorsRetryAfter",
                explanation: waiting.isEmpty
                    ? "no response carried Retry-After: nothing to honour"
                    : "no request followed a Retry-After (\(delivered.count) sent\(waiting.count > delivered.count ? ", \(waiting.count - delivered.count) still going out" : "")): "
                        + "a retry of the same request (or, for a rate limit, any request it counts) after the answer was needed",
                evidence: waiting.map(\.sequence))
        }
        guard let first = early.first else {
            return Verdict(
                rule: "honorsRetryAfter", passed: true,
                explanation: "\(input.retryAfter.count) retr\(input.retryAfter.count == 1 ? "y" : "ies") after Retry-After, none early",
                evidence: input.retryAfter.map(\.retrySequence))
        }
        let more = early.count > 1 ? " (and \(early.count - 1) more early retr\(early.count == 2 ? "y" : "ies"))" : ""
        return Verdict(
            rule: "honorsRetryAfter", passed: false,
            explanation: "request #\(first.retrySequence) came \(first.actualWaitMilliseconds) ms after "
                + "#\(first.advertisedSequence), whose Retry-After asked for \(first.advertisedWaitMilliseconds) ms\(more)",
            evidence: early.flatMap { [$0.advertisedSequence, $0.retrySequence] })
    }

    private static func tokenCalls(_ input: VerdictInput) -> [JournalEntry] {
        input.entries.filter { $0.route == .tokenEndpoint }
    }

    /// Requests auth refused with 401: what sends a client to the token endpoint.
    private static func refused(_ input: VerdictInput) -> [JournalEntry] {
        input.entries.filter { $0.answeredBy == .auth }
    }

    private static func singleFlight(_ input: VerdictInput) -> Verdict {
        let calls = tokenCalls(input)
        let most = input.maxRefreshesInFlight ?? 0
        let refusals = refused(input)
        // The situation: two requests refused at the same time — neither sent after the other's 401 (`Retries`), so
        // that both needed a refresh at once.
        let together = zip(refusals, refusals.dropFirst()).contains {
            !Retries.follows(Retries.Attempt($1), Retries.Answer($0))
        }
        if most <= 1 && (!together || (input.refreshCalls ?? calls.count) == 0) {
            return .inconclusive(
                rule: "singleFlightRefresh",
                explanation: !together
                    ? "\(refusals.count) request(s) refused with 401, never two at the same time: a refresh that could be "
                        + "shared was never needed"
                    : "\(refusals.count) requests refused with 401, but no token refresh followed",
                evidence: refusals.map(\.sequence) + calls.map(\.sequence))
        }
        if most <= 1 {
            return Verdict(rule: "singleFlightRefresh", passed: true,
                           explanation: "\(calls.count) token refresh(es), never more than one at a time",
                           evidence: calls.map(\.sequence))
        }
        return Verdict(
            rule: "singleFlightRefresh", passed: false,
            explanation: "\(most) token refreshes were in flight at once (\(calls.count) in all): "
                + "concurrent 401s each refreshed instead of sharing one refresh",
            evidence: calls.map(\.sequence))
    }

    private static func maxRefreshes(_ limit: Int, _ input: VerdictInput) -> Verdict {
        let calls = tokenCalls(input)
        let count = input.refreshCalls ?? calls.count
        if count <= limit && refused(input).isEmpty {
            return .inconclusive(
                rule: "maxRefreshes",
                explanation: "no request was refused with 401, so no refresh was needed (\(count) token call(s))",
                evidence: calls.map(\.sequence))
        }
        return Verdict(
            rule: "maxRefreshes", passed: count <= limit,
            explanation: "\(count) token refresh call(s); at most \(limit) expected", evidence: calls.map(\.sequence))
    }

    private static func noDuplicateSideEffects(_ input: VerdictInput) -> Verdict {
        var byKey: [String: [Int]] = [:]
        var order: [String] = []
        for entry in input.entries {
            guard let route = entry.notes.lazy.compactMap(\.sideEffectRoute).first,
                  let header = input.idempotencyHeaders[route] else { continue }
            let key = entry.head?.headers[header].flatMap(IdempotencyStore.parseKey)
            // Without a key, the same request sent again (same method, target and body) is the duplicate.
            let label = key.map { "\(route) key \($0)" } ?? "\(route) without a key, request "
                + IdempotencyStore.fingerprint(method: entry.method ?? "", target: entry.head?.target ?? "", body: entry.body)
                    .prefix(12)
            if byKey[label] == nil { order.append(label) }
            byKey[label, default: []].append(entry.sequence)
        }
        let duplicated = order.filter { byKey[$0]!.count > 1 }
        let total = byKey.values.reduce(0) { $0 + $1.count }
        if total == 0 {
            return .inconclusive(rule: "noDuplicateSideEffects",
                                 explanation: "no request had a side effect: nothing could be duplicated", evidence: [])
        }
        guard let first = duplicated.first else {
            return Verdict(rule: "noDuplicateSideEffects", passed: true,
                           explanation: "\(total) side effect(s), one per idempotency key",
                           evidence: order.flatMap { byKey[$0]! })
        }
        let sequences = byKey[first]!
        return Verdict(
            rule: "noDuplicateSideEffects", passed: false,
            explanation: "\(first) created \(sequences.count) resources (requests \(sequences.map { "#\($0)" }.joined(separator: ", ")))",
            evidence: duplicated.flatMap { byKey[$0]! })
    }

    /// The POSTs and PATCHes, as retry chains (`Retries`) of the same request: method, target and the
    /// `Idempotency-Key`, or without a key the body. A request auth refused never reached its route: sending it
    /// again with a token is no retry.
    private static func nonIdempotent(_ entries: [JournalEntry]) -> [[JournalEntry]] {
        Retries.chains(entries) { entry in
            guard entry.route != nil, entry.answeredBy != .auth, let head = entry.head,
                  ["POST", "PATCH"].contains(head.method) else { return nil }
            if let key = head.headers["idempotency-key"] { return "\(head.method) \(head.target) key \(key)" }
            let fingerprint = IdempotencyStore.fingerprint(method: head.method, target: head.target, body: entry.body)
            return "\(head.method) \(head.target) \(fingerprint)"
        }
    }

    private static func keyless(_ chain: [JournalEntry]) -> Bool { chain[0].head?.headers["idempotency-key"] == nil }

    /// The attempts of `chains` that failed and so tempted the client to send them again.
    private static func failures(_ chains: [[JournalEntry]]) -> [JournalEntry] {
        chains.flatMap { $0.filter(Retries.invitesRetry) }
    }

    /// A keyless POST or PATCH is never retried. Judged once some POST or PATCH failed: a keyed one retried, or a
    /// keyless one left alone, is the behaviour the rule asks for.
    private static func retriesOnlyReplayable(_ input: VerdictInput) -> Verdict {
        let chains = nonIdempotent(input.entries)
        if let chain = chains.first(where: { keyless($0) && $0.count > 1 }) {
            let (earlier, retry) = (chain[0], chain[1])
            let head = retry.head!
            return Verdict(
                rule: "retriesOnlyReplayable", passed: false,
                explanation: "request #\(retry.sequence) repeated \(head.method) \(head.target) of #\(earlier.sequence) "
                    + "without an Idempotency-Key (#\(earlier.sequence): \(how(earlier))): a non-idempotent request was retried",
                evidence: [earlier.sequence, retry.sequence])
        }
        let failed = failures(chains)
        guard !failed.isEmpty else {
            return .inconclusive(rule: "retriesOnlyReplayable",
                                 explanation: "no POST or PATCH failed, so none was tempted to be sent again", evidence: [])
        }
        let keyed = chains.filter { !keyless($0) && $0.count > 1 }
        return Verdict(
            rule: "retriesOnlyReplayable", passed: true,
            explanation: "\(failed.count) POST or PATCH attempt(s) failed; "
                + (keyed.isEmpty ? "none was sent again" : "\(keyed.count) retried with the same Idempotency-Key, none without one"),
            evidence: failed.map(\.sequence) + keyed.flatMap { $0.map(\.sequence) })
    }

    /// RFC 9113 §8.7 as a rule: a keyless POST or PATCH may be sent again only after the server said the earlier
    /// attempt was not processed. Each retry is judged against the attempt it retried; the evidence is the pair, and
    /// the explanation names their streams and the frame that made the retry safe or not. Judged once a POST or
    /// PATCH was sent again, or failed in a way that leaves its processing unknown.
    private static func retriesOnlyUnprocessed(_ input: VerdictInput) -> Verdict {
        let chains = nonIdempotent(input.entries)
        var safe: [(JournalEntry, JournalEntry)] = []
        for chain in chains where keyless(chain) {
            for (earlier, entry) in zip(chain, chain.dropFirst()) {
                if earlier.outcome == .notProcessed {
                    safe.append((earlier, entry))
                    continue
                }
                let head = entry.head!
                return Verdict(
                    rule: "retriesOnlyUnprocessed", passed: false,
                    explanation: "request #\(entry.sequence) (\(where_(entry))) repeated \(head.method) \(head.target) of "
                        + "#\(earlier.sequence) (\(where_(earlier))) without an Idempotency-Key, but nothing said #\(earlier.sequence) "
                        + "was not processed: \(how(earlier))",
                    evidence: [earlier.sequence, entry.sequence])
            }
        }
        guard safe.isEmpty else {
            let pairs = safe.map { "#\($0.0.sequence) (\(where_($0.0)), \(how($0.0))) → #\($0.1.sequence)" }
            return Verdict(
                rule: "retriesOnlyUnprocessed", passed: true,
                explanation: "\(safe.count) keyless retr\(safe.count == 1 ? "y" : "ies"), each of a request the server "
                    + "had not processed: " + pairs.joined(separator: "; "),
                evidence: safe.flatMap { [$0.0.sequence, $0.1.sequence] })
        }
        // No keyless retry: judged only if something failed in a way that left it unknown whether it was processed —
        // the temptation the rule is about.
        let risky = failures(chains).filter { $0.outcome != .notProcessed }
        guard !risky.isEmpty else {
            return .inconclusive(
                rule: "retriesOnlyUnprocessed",
                explanation: "no POST or PATCH failed in a way that leaves its processing unknown, and none was sent again",
                evidence: failures(chains).map(\.sequence))
        }
        return Verdict(
            rule: "retriesOnlyUnprocessed", passed: true,
            explanation: "\(risky.count) POST or PATCH attempt(s) failed with their processing unknown "
                + "(\(risky.prefix(3).map { "#\($0.sequence): \(how($0))" }.joined(separator: "; "))); no keyless one was sent again",
            evidence: risky.map(\.sequence))
    }

    /// RFC 9113 §8.7 the other way round: a request the server said it did not process (REFUSED_STREAM, or above a
    /// GOAWAY's last stream id) is safe to send again, whatever its method, and a client that never does turns a
    /// graceful server restart into a user-visible error. Each such attempt must have a retry.
    private static func retriesRefusedStreams(_ chains: [[JournalEntry]]) -> Verdict {
        var resent: [(JournalEntry, JournalEntry)] = []
        var dropped: [JournalEntry] = []
        for chain in chains {
            for (index, attempt) in chain.enumerated() where attempt.outcome == .notProcessed {
                if index + 1 < chain.count { resent.append((attempt, chain[index + 1])) } else { dropped.append(attempt) }
            }
        }
        let rule = "retriesRefusedStreams"
        if let first = dropped.first, let head = first.head {
            return Verdict(
                rule: rule, passed: false,
                explanation: "request #\(first.sequence) (\(head.method) \(head.path), \(where_(first))) was not processed — "
                    + "\(how(first)) — and was never sent again, though RFC 9113 §8.7 makes that safe"
                    + (dropped.count > 1 ? " (and \(dropped.count - 1) more)" : ""),
                evidence: dropped.map(\.sequence))
        }
        guard !resent.isEmpty else {
            return .inconclusive(rule: rule, explanation: "no request was refused with REFUSED_STREAM or left above a GOAWAY's "
                                 + "last stream id", evidence: [])
        }
        return Verdict(
            rule: rule, passed: true,
            explanation: "\(resent.count) request(s) the server did not process, each sent again: "
                + resent.prefix(4).map { "#\($0.0.sequence) → #\($0.1.sequence) (\(where_($0.1)))" }.joined(separator: "; "),
            evidence: resent.flatMap { [$0.0.sequence, $0.1.sequence] })
    }

    /// "h2 stream 3 on connection 2", "HTTP/1.1 on connection 4".
    private static func where_(_ entry: JournalEntry) -> String {
        if let stream = entry.stream { return "\(entry.protocolName) stream \(stream) on connection \(entry.connectionID)" }
        return "\(entry.protocolName) on connection \(entry.connectionID)"
    }

    /// The frame or event that ended an attempt, as a reason a retry was or was not safe.
    private static func how(_ entry: JournalEntry) -> String {
        switch (entry.outcome, entry.fault) {
        case (.notProcessed, "rst-stream"?): return "RST_STREAM REFUSED_STREAM"
        case (.notProcessed, _): return "above the last stream id of the server's GOAWAY"
        case (.streamReset, _): return "the server reset its stream after taking it (RST_STREAM, not REFUSED_STREAM)"
        case (.resetSent, _): return "the connection was reset after the request arrived"
        case (.completed, _): return "it was answered \(entry.status.map(String.init) ?? "")"
        case (.clientClosed, _), (.hangReleased, _): return "the client gave up waiting; the server may have processed it"
        case (let outcome, _): return "it ended \(outcome.rawValue)"
        }
    }

    /// At most `limit` attempts per logical request. Judged only when some logical request failed `limit` times in
    /// a row, so that the client had a reason to try once more: a client that never gets there, or never retries,
    /// has not shown its limit.
    /// A chain counts as not tried again only when no request of the same logical request came too soon after its
    /// last answer to tell (`Retries.TooSoonIndex`); when every such chain has one, the verdict is inconclusive.
    private static func maxAttempts(_ limit: Int, _ chains: [[JournalEntry]], _ key: LogicalRequestKey) -> Verdict {
        if let worst = chains.max(by: { $0.count < $1.count }), worst.count > limit, let head = worst[0].head {
            return Verdict(
                rule: "maxAttempts", passed: false,
                explanation: "\(head.method) \(head.path) was attempted \(worst.count) times, each after the previous "
                    + "one's answer; at most \(limit) expected",
                evidence: worst.map(\.sequence))
        }
        let reached = chains.filter { $0.count == limit && Retries.invitesRetry($0[limit - 1]) }
        // Each reached chain with the request that came too soon after its last answer, if one did.
        let tooSoon = reached.isEmpty ? nil : Retries.TooSoonIndex(chains, key)
        let looked = reached.map { ($0, tooSoon?.successor(of: $0[limit - 1])) }
        let tested = looked.filter { $0.1 == nil }.map(\.0)
        if tested.isEmpty, case let (chain, later?)? = looked.first {
            return .inconclusive(
                rule: "maxAttempts",
                explanation: "\(reached.count) logical request(s) failed \(limit) time(s), but "
                    + Retries.tooSoonText(later, after: chain[limit - 1]),
                evidence: chain.map(\.sequence) + [later.sequence])
        }
        guard !tested.isEmpty else {
            let most = chains.map { chain in chain.prefix { Retries.invitesRetry($0) }.count }.max() ?? 0
            return .inconclusive(
                rule: "maxAttempts",
                explanation: "no logical request failed \(limit) time(s) in a row (at most \(most)), so the limit of "
                    + "\(limit) was never put to the test", evidence: [])
        }
        return Verdict(rule: "maxAttempts", passed: true,
                       explanation: "\(tested.count) logical request(s) failed \(limit) time(s) and were not tried again",
                       evidence: tested.flatMap { $0.map(\.sequence) })
    }

    /// The waits before each retry of a chain: from the end of the attempt it retried to its arrival — the time
    /// the client chose to wait, not the server's own delay or the client's timeout.
    private static func gaps(_ attempts: [JournalEntry]) -> [Double] {
        zip(attempts, attempts.dropFirst()).map {
            Double($1.receivedAtMonotonicNanos &- ($0.finishedAtMonotonicNanos ?? $0.receivedAtMonotonicNanos)) / 1_000_000
        }
    }

    /// The thresholds of the `backoff` rule (README, "Verdicts"). VerdictTests measures them on simulated
    /// clients: full, equal and decorrelated jitter and plain exponential backoff pass, constant and immediate
    /// retries fail, and plain exponential backoff fails `jitter`.
    package enum BackoffRule {
        /// A retry index is judged when at least this many logical requests waited before that retry.
        package static let minimumSamples = 5
        /// Envelopes below this count as this: scheduling noise on an immediate retry is not growth.
        package static let floorMilliseconds = 20.0
        /// The envelope must grow at least this much per retry (a log-linear fit over the judged indices).
        package static let minimumGrowth = 1.15
        /// The median of the waits must grow at least this much per retry too (same fit).
        package static let minimumMedianGrowth = 1.03
        /// With `jitter`: the interquartile range of the waits at one index, over their median, at least this
        /// (the weighted median over the judged indices).
        package static let minimumSpread = 0.1
    }

    /// The weighted least-squares line through the points (x, y): its slope and each point's residual. The
    /// backoff rules fit log(wait) against the retry index, so exp(slope) is the growth per retry.
    static func fitLine(_ xs: [Double], _ ys: [Double], weights: [Double]) -> (slope: Double, residuals: [Double]) {
        let total = weights.reduce(0, +)
        let xMean = zip(weights, xs).map(*).reduce(0, +) / total
        let yMean = zip(weights, ys).map(*).reduce(0, +) / total
        var covariance = 0.0, variance = 0.0
        for i in xs.indices {
            covariance += weights[i] * (xs[i] - xMean) * (ys[i] - yMean)
            variance += weights[i] * (xs[i] - xMean) * (xs[i] - xMean)
        }
        let slope = covariance / variance
        return (slope, xs.indices.map { ys[$0] - (yMean + slope * (xs[$0] - xMean)) })
    }

    /// The lower weighted median: the least value at which the values' cumulative weight reaches half the total.
    static func weightedMedian(_ values: [Double], weights: [Double]) -> Double {
        let pairs = zip(values, weights).sorted { $0.0 < $1.0 }
        let half = weights.reduce(0, +) / 2
        var cumulative = 0.0
        for (value, weight) in pairs {
            cumulative += weight
            if cumulative >= half { return value }
        }
        return pairs.last?.0 ?? 0
    }

    /// The `p` quantile of sorted values, linearly interpolated between ranks.
    static func quantile(_ sorted: [Double], _ p: Double) -> Double {
        let rank = p * Double(sorted.count - 1)
        let low = Int(rank.rounded(.down)), high = Int(rank.rounded(.up))
        return sorted[low] + (sorted[high] - sorted[low]) * (rank - Double(low))
    }

    /// Backoff judged as statistics across logical requests, never within one: a jittered client's second wait
    /// is often shorter than its first. The n-th retry's waits of all logical requests are one sample. Its
    /// envelope (the upper quartile) must grow with n, and so must its median, a little: a stall that delays a
    /// few waits at one index (a loaded CI runner) can lift an upper quartile of few samples, rarely a median.
    /// With `jitter` the waits of one sample must be spread (the weighted median of the indices' spreads, so one
    /// stalled index does not lend jitter to a fixed schedule). Too few samples to tell is inconclusive, not a failure.
    private static func backoff(_ groups: [[JournalEntry]], jitter: Bool) -> Verdict {
        let retried = groups.filter { $0.count >= 2 }
        // waits[n]: the waits before retry n + 1, one per logical request that got that far.
        var waits: [[Double]] = []
        for attempts in retried {
            for (index, gap) in gaps(attempts).enumerated() {
                if index == waits.count { waits.append([]) }
                waits[index].append(gap)
            }
        }
        let evidence = retried.flatMap { $0.map(\.sequence) }
        let judged = Array(waits.prefix { $0.count >= BackoffRule.minimumSamples }.map { $0.sorted() })
        let twice = waits.count > 1 ? waits[1].count : 0
        guard judged.count >= 2 else {
            return .inconclusive(
                rule: "backoff",
                explanation: "\(retried.count) logical request(s) retried, \(twice) of them twice or more: too few to "
                    + "judge backoff (at least \(BackoffRule.minimumSamples) logical requests retried twice or more are needed)",
                evidence: evidence)
        }
        let floor = BackoffRule.floorMilliseconds
        // Weighted least squares of log(statistic) against the retry index, weighted by the sample size.
        let xs = judged.indices.map { Double($0 + 1) }
        let ws = judged.map { Double($0.count) }
        func growth(_ values: [Double]) -> Double {
            exp(fitLine(xs, values.map { log(max(floor, $0)) }, weights: ws).slope)
        }
        func listed(_ values: [Double]) -> String {
            judged.indices.map { "retry \($0 + 1): \(Int(values[$0].rounded())) ms (\(judged[$0].count))" }
                .joined(separator: ", ")
        }
        // The upper quartile grows as a jittered client's ceiling does (¾ of it under full jitter).
        let envelopes = judged.map { quantile($0, 0.75) }
        let medians = judged.map { quantile($0, 0.5) }
        let envelopeGrowth = growth(envelopes), medianGrowth = growth(medians)
        let growthText = "×\(decimalText(envelopeGrowth, places: 2)) per retry"
        let summary = "the upper quartile of the waits before \(listed(envelopes))"
        guard envelopeGrowth >= BackoffRule.minimumGrowth else {
            return Verdict(
                rule: "backoff", passed: false,
                explanation: "the intervals do not grow: \(summary) grows \(growthText), at least "
                    + "×\(decimalText(BackoffRule.minimumGrowth, places: 2)) expected",
                evidence: evidence)
        }
        guard medianGrowth >= BackoffRule.minimumMedianGrowth else {
            return Verdict(
                rule: "backoff", passed: false,
                explanation: "the intervals do not grow: \(summary) grows \(growthText), but their median (\(listed(medians))) "
                    + "grows ×\(decimalText(medianGrowth, places: 2)), at least ×\(decimalText(BackoffRule.minimumMedianGrowth, places: 2)) "
                    + "expected: a few long waits, not a schedule that backs off",
                evidence: evidence)
        }
        if jitter {
            let spreads = judged.indices.map {
                (envelopes[$0] - quantile(judged[$0], 0.25)) / max(floor, medians[$0])
            }
            let spread = weightedMedian(spreads, weights: ws)
            if spread < BackoffRule.minimumSpread {
                return Verdict(
                    rule: "backoff", passed: false,
                    explanation: "no jitter: logical requests wait the same before the same retry (interquartile range "
                        + "\(Int((spread * 100).rounded())) % of the median, at least "
                        + "\(Int(BackoffRule.minimumSpread * 100)) % expected); \(summary)",
                    evidence: evidence)
            }
        }
        return Verdict(
            rule: "backoff", passed: true,
            explanation: "\(retried.count) retried logical request(s): \(summary) grows \(growthText)"
                + (jitter ? ", with jitter" : ""),
            evidence: [])
    }

    /// A 4xx counts as not retried only when no request of the same logical request came too soon after it to tell
    /// (`Retries.tooSoonToTell`).
    private static func noRetryOn4xx(_ chains: [[JournalEntry]], _ key: LogicalRequestKey) -> Verdict {
        func final4xx(_ entry: JournalEntry) -> Bool {
            guard let status = entry.status, entry.outcome == .completed else { return false }
            return (400..<500).contains(status) && !retryable4xx.contains(status)
        }
        for chain in chains {
            for (entry, next) in zip(chain, chain.dropFirst()) where final4xx(entry) {
                let status = entry.status!
                return Verdict(
                    rule: "noRetryOn4xx", passed: false,
                    explanation: "request #\(next.sequence) retried #\(entry.sequence), which got \(status): "
                        + "a \(status) will not change by sending the same request again",
                    evidence: [entry.sequence, next.sequence])
            }
        }
        let all4xx = chains.flatMap { $0.filter(final4xx) }
        // Each 4xx with the request that came too soon after it, if one did.
        let tooSoon = all4xx.isEmpty ? nil : Retries.TooSoonIndex(chains, key)
        let looked = all4xx.map { ($0, tooSoon?.successor(of: $0)) }
        let answered = looked.filter { $0.1 == nil }.map(\.0)
        if answered.isEmpty, case let (first, later?)? = looked.first {
            return .inconclusive(rule: "noRetryOn4xx",
                                 explanation: "\(first.status!) to request #\(first.sequence), but "
                                    + Retries.tooSoonText(later, after: first),
                                 evidence: [first.sequence, later.sequence])
        }
        guard !answered.isEmpty else {
            return .inconclusive(rule: "noRetryOn4xx",
                                 explanation: "no request was answered with a 4xx that a retry cannot change", evidence: [])
        }
        return Verdict(rule: "noRetryOn4xx", passed: true,
                       explanation: "\(answered.count) request(s) answered with a non-retryable 4xx, none retried",
                       evidence: answered.map(\.sequence))
    }
}

extension Engine {
    /// `GET /__faultline/report?scenario=NAME`: why no scenario of that name can be judged, with the nearest name;
    /// nil when one is loaded.
    package func unknownScenario(_ name: String) -> String? {
        let names = scenarios.map(\.name)
        guard !names.contains(name) else { return nil }
        guard !names.isEmpty else { return "scenario: no scenario is loaded, so none is named \"\(name)\"" }
        return "scenario: no loaded scenario is named \"\(name)\""
            + ScenarioLoader.hint(for: name, among: names, listName: "loaded:")
    }

    /// `GET /__faultline/report`: every loaded scenario's `expect` (or only `scenario`'s), judged against the journal
    /// and the state.
    package func report(journal: [JournalEntry], scenario only: String? = nil) -> JSONValue {
        var headers: [String: String] = [:]
        for scenario in scenarios {
            for route in scenario.routes { if let config = route.idempotency { headers[route.id] = config.header } }
        }
        var input = VerdictInput(
            entries: journal.filter { $0.malformed == nil }, retryAfter: policy.retryAfter.observations,
            refreshCalls: policy.authority?.refreshCalls, maxRefreshesInFlight: policy.authority?.maxRefreshesInFlight,
            idempotencyHeaders: headers)
        input.retryAfterPending = policy.retryAfter.pending
        input.network = journal.filter { $0.network.map { $0.event != .shaped } ?? false }
        for scenario in scenarios {
            for route in scenario.routes where route.responses.contains(where: \.isWebSocket) {
                input.webSocketRoutes.insert(route.id)
            }
        }
        var verdicts: [JSONValue] = []
        var passed = true
        var inconclusive = 0
        for scenario in scenarios where only == nil || scenario.name == only {
            guard let expect = scenario.expect else { continue }
            // Each scenario is judged on its own routes (auth's 401s included: they are journaled under the route
            // they matched, and the rules leave them out of attempts), its rate limits and (when it declares
            // auth) token calls.
            let routeIDs = Set(scenario.routes.map(\.id))
            let limitIDs = Set(scenario.rateLimits.map(\.rule.id))
            var own = input
            own.entries = input.entries.filter { entry in
                switch entry.route {
                case nil, .connectionLimit: return false
                case .tokenEndpoint: return scenario.auth != nil
                case .rateLimit(let id): return limitIDs.contains(id)
                case .route, .resource: return entry.scenario == scenario.name
                }
            }
            func owned(_ key: RetryAfterKey) -> Bool {
                switch key {
                case .route(let id, _): return routeIDs.contains(id)
                case .rateLimit(let id, _): return limitIDs.contains(id)
                }
            }
            own.retryAfter = input.retryAfter.filter { owned($0.key) }
            own.retryAfterPending = input.retryAfterPending.filter { owned($0.key) }
            if scenario.auth == nil {
                own.refreshCalls = nil
                own.maxRefreshesInFlight = nil
            }
            for verdict in Verdicts.evaluate(expect, own) {
                passed = passed && verdict.passed
                if verdict.inconclusive { inconclusive += 1 }
                var json = verdict.json()
                if case .object(var members) = json {
                    members.insert(("scenario", .string(scenario.name)), at: 0)
                    json = .object(members)
                }
                verdicts.append(json)
            }
        }
        // `passed` stays "nothing failed"; `outcome` tells a pass from a report with inconclusive verdicts.
        let outcome: VerdictOutcome = !passed ? .fail : inconclusive > 0 ? .inconclusive : .pass
        return .object([
            ("passed", .bool(passed)), ("outcome", .string(outcome.rawValue)), ("judged", .int(verdicts.count)),
            ("inconclusive", .int(inconclusive)), ("requests", .int(input.entries.count)), ("verdicts", .array(verdicts)),
            ("logicalRequests", .array(logicalRequestsJSON(input.entries, only: only))),
        ])
    }

    /// Every scenario's attempts as the rules see them (`Retries.logicalRequests`, by its `logicalRequest` key): one
    /// object per chain — a first attempt and its retries — in the order the first attempts arrived. The dashboard
    /// draws a row per chain; a test can assert which attempts the verdicts took for retries of which.
    func logicalRequestsJSON(_ entries: [JournalEntry], only: String?) -> [JSONValue] {
        var byScenario: [String: [JournalEntry]] = [:]
        for entry in entries { if let name = entry.scenario { byScenario[name, default: []].append(entry) } }
        var chains: [(first: Int, json: JSONValue)] = []
        for scenario in scenarios where only == nil || scenario.name == only {
            let key = scenario.expect?.logicalKey ?? .methodPathAndIdempotencyKey
            for chain in Retries.logicalRequests(byScenario[scenario.name] ?? [], key) {
                guard let first = chain.first, let head = first.head else { continue }
                chains.append((first.sequence, .object([
                    ("scenario", .string(scenario.name)),
                    ("label", .string(Retries.label(head, key))),
                    ("attempts", .array(chain.map { .int($0.sequence) })),
                ])))
            }
        }
        return chains.sorted { $0.first < $1.first }.map(\.json)
    }
}
