#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The rules about what a client does while the network is away and when it comes back (ARCHITECTURE §3b, §8),
/// judged from the journal's network changes, the connection attempts the server saw and the client's requests.
enum NetworkVerdicts {
    /// An outage: from a change that made the network unusable (listener not up, `offline`, a freeze) to the one that
    /// ended it; `end` nil while it lasts.
    struct Outage {
        var start: UInt64
        var end: UInt64?
        var startSequence: Int
        var endSequence: Int?
    }

    /// The outages the network changes describe, oldest first. A freeze is an outage of its own length.
    static func outages(_ changes: [JournalEntry]) -> [Outage] {
        var outages: [Outage] = []
        var open: Outage?
        for entry in changes {
            guard let record = entry.network, record.event == .change else { continue }
            let at = entry.receivedAtMonotonicNanos
            if record.outage, open == nil {
                open = Outage(start: at, end: nil, startSequence: entry.sequence, endSequence: nil)
            } else if !record.outage, var ended = open {
                ended.end = at
                ended.endSequence = entry.sequence
                outages.append(ended)
                open = nil
            }
            if let freeze = record.freezeMilliseconds, !record.outage, open == nil {
                outages.append(Outage(start: at, end: at + UInt64(freeze) * 1_000_000, startSequence: entry.sequence,
                                      endSequence: entry.sequence))
            }
        }
        if let open { outages.append(open) }
        return outages.sorted { $0.start < $1.start }
    }

    /// What the client did that the server saw: its requests and the connection attempts the listener answered,
    /// by arrival.
    static func arrivals(_ input: VerdictInput) -> [JournalEntry] {
        let attempts = input.network.filter { $0.network?.event == .attempt }
        return (input.entries + attempts).sorted { $0.receivedAtMonotonicNanos < $1.receivedAtMonotonicNanos }
    }

    /// After an outage ends, no more than `max` requests and attempts arrive within any `withinMilliseconds`: the
    /// client's retries and queued work are spread, not a burst. Each recovery is watched for 10 s or ten windows,
    /// whichever is longer (a steady client later on is not a storm), and until the next outage.
    static func noRequestStorm(_ input: VerdictInput, max: Int, withinMilliseconds: Int) -> Verdict {
        let rule = "noRequestStorm"
        let all = outages(input.network)
        let ended = all.filter { $0.end != nil }
        guard !ended.isEmpty else {
            return .inconclusive(rule: rule, explanation: "no outage ended: nothing to judge", evidence: all.map(\.startSequence))
        }
        let arrivals = arrivals(input)
        let window = UInt64(withinMilliseconds) * 1_000_000
        let watch = Swift.max(10_000_000_000, 10 * window)
        var watched = 0
        var worst: (count: Int, entries: [JournalEntry], outage: Outage)?
        for outage in ended {
            let end = outage.end!
            let next = all.first(where: { $0.start > end })?.start ?? UInt64.max
            let after = arrivals.filter { $0.receivedAtMonotonicNanos >= end && $0.receivedAtMonotonicNanos < Swift.min(next, end + watch) }
            watched += after.count
            var first = 0
            for last in after.indices {
                while after[last].receivedAtMonotonicNanos - after[first].receivedAtMonotonicNanos >= window { first += 1 }
                let count = last - first + 1
                if count > (worst?.count ?? 0) { worst = (count, Array(after[first...last]), outage) }
            }
        }
        guard watched > 0, let worst else {
            return .inconclusive(rule: rule, explanation: "\(ended.count) outage(s) ended, but the client sent nothing after: "
                + "nothing to judge", evidence: ended.compactMap(\.endSequence))
        }
        let span = Double(worst.entries.last!.receivedAtMonotonicNanos - worst.entries.first!.receivedAtMonotonicNanos) / 1_000_000
        let delay = Double(worst.entries.first!.receivedAtMonotonicNanos - worst.outage.end!) / 1_000_000
        guard worst.count <= max else {
            return Verdict(
                rule: rule, passed: false,
                explanation: "a storm after the outage that ended with #\(worst.outage.endSequence!): \(worst.count) requests and "
                    + "connection attempts within \(Int(span.rounded())) ms, \(Int(delay.rounded())) ms after it ended "
                    + "(at most \(max) within \(withinMilliseconds) ms expected): clients coming back in step",
                evidence: [worst.outage.endSequence!] + worst.entries.map(\.sequence))
        }
        return Verdict(
            rule: rule, passed: true,
            explanation: "after \(ended.count) outage(s), at most \(worst.count) requests and attempts within "
                + "\(withinMilliseconds) ms (\(max) allowed)", evidence: [])
    }

    /// How `backsOffDuringOutage` judges (ARCHITECTURE §3b).
    package enum OutageBackoffRule {
        /// Gaps before attempts 1 and 2 of an outage are its early level; every later gap is its late level.
        package static let earlyAttempts = 2
        /// The median late gap over the median early gap must reach this.
        package static let minimumGrowth = 1.5
    }

    /// During outages, the connection attempts (and requests) the server can see come at growing intervals. In each
    /// outage the gap before attempt k is a point (k, gap); the gaps before attempts 1 and 2 (across every outage) are
    /// the early level, the later ones the late level, and the median late gap must be at least ×1.5 the median early
    /// one (gaps under 20 ms count as 20: scheduling noise is not growth). A level comparison, not a fit of every
    /// gap: a capped backoff waits the same at its cap for as long as an outage lasts, and full jitter (a wait drawn
    /// from 0 up to the doubling bound) scatters single gaps by a factor of ten, yet both lift the level of the later
    /// gaps well above the first; a client that retries at a fixed interval or at once does not. At least 2 early
    /// and 2 late gaps are needed. `refuse` and `blackhole` hide attempts from the server (the kernel answers them),
    /// so only `reset-on-accept`, `stall` and outages of conditions (`offline`, a freeze) give evidence.
    static func backsOffDuringOutage(_ input: VerdictInput) -> Verdict {
        let rule = "backsOffDuringOutage"
        let all = outages(input.network)
        guard !all.isEmpty else {
            return .inconclusive(rule: rule, explanation: "no outage in the journal: nothing to judge", evidence: [])
        }
        let arrivals = arrivals(input)
        var points: [(index: Int, gap: Double)] = []
        var evidence: [Int] = []
        for outage in all {
            let end = outage.end ?? UInt64.max
            let during = arrivals.filter { $0.receivedAtMonotonicNanos >= outage.start && $0.receivedAtMonotonicNanos < end }
            for (index, (earlier, later)) in zip(during, during.dropFirst()).enumerated() {
                points.append((index + 1, Double(later.receivedAtMonotonicNanos - earlier.receivedAtMonotonicNanos) / 1_000_000))
            }
            evidence += during.map(\.sequence)
        }
        let floor = Verdicts.BackoffRule.floorMilliseconds
        let early = points.filter { $0.index <= OutageBackoffRule.earlyAttempts }.map { Swift.max(floor, $0.gap) }
        let late = points.filter { $0.index > OutageBackoffRule.earlyAttempts }.map { Swift.max(floor, $0.gap) }
        guard early.count >= 2, late.count >= 2 else {
            return .inconclusive(
                rule: rule,
                explanation: "\(points.count) interval(s) between attempts seen during \(all.count) outage(s): at least 4 "
                    + "(2 before the third attempt, 2 after) are needed (refuse and blackhole hide attempts from the server: "
                    + "use reset-on-accept or stall)",
                evidence: evidence)
        }
        let earlyLevel = Verdicts.quantile(early.sorted(), 0.5)
        let lateLevel = Verdicts.quantile(late.sorted(), 0.5)
        let growth = lateLevel / earlyLevel
        let gaps = points.prefix(8).map { "\(Int($0.gap.rounded())) ms" }.joined(separator: ", ")
        let summary = "intervals between attempts during the outage \(gaps)\(points.count > 8 ? ", …" : ""): the later "
            + "ones' median \(Int(lateLevel.rounded())) ms is ×\(decimalText(growth, places: 2)) the first two's "
            + "\(Int(earlyLevel.rounded())) ms"
        guard growth >= OutageBackoffRule.minimumGrowth else {
            return Verdict(rule: rule, passed: false,
                           explanation: "no backoff while the network was away: \(summary), at least "
                            + "×\(decimalText(OutageBackoffRule.minimumGrowth, places: 2)) expected", evidence: evidence)
        }
        return Verdict(rule: rule, passed: true, explanation: summary, evidence: [])
    }
}
