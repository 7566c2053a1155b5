import Foundation

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

    /// During outages, the connection attempts (and requests) the server can see come at growing intervals: in each
    /// outage the gap before attempt k is a point (k, gap); a log-linear fit across every point, as `backoff` fits its
    /// envelopes, must grow at least ×1.15 per attempt. At least 4 gaps over 3 indices are needed. `refuse` and
    /// `blackhole` hide attempts from the server (the kernel answers them), so only `reset-on-accept`, `stall` and
    /// outages of conditions (`offline`, a freeze) give evidence.
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
        let indices = Set(points.map(\.index))
        guard points.count >= 4, indices.count >= 3 else {
            return .inconclusive(
                rule: rule,
                explanation: "\(points.count) interval(s) between attempts seen during \(all.count) outage(s): at least 4 over "
                    + "3 attempts are needed (refuse and blackhole hide attempts from the server: use reset-on-accept or stall)",
                evidence: evidence)
        }
        let floor = Verdicts.BackoffRule.floorMilliseconds
        let fit = Verdicts.fitLine(points.map { Double($0.index) }, points.map { log(Swift.max(floor, $0.gap)) },
                                   weights: Array(repeating: 1, count: points.count))
        let growth = exp(fit.slope)
        let gaps = points.prefix(8).map { "\(Int($0.gap.rounded())) ms" }.joined(separator: ", ")
        let summary = "intervals between attempts during the outage \(gaps)\(points.count > 8 ? ", …" : "") grow "
            + "×\(String(format: "%.2f", growth)) per attempt"
        guard growth >= Verdicts.BackoffRule.minimumGrowth else {
            return Verdict(rule: rule, passed: false,
                           explanation: "no backoff while the network was away: \(summary), at least "
                            + "×\(String(format: "%.2f", Verdicts.BackoffRule.minimumGrowth)) expected", evidence: evidence)
        }
        return Verdict(rule: rule, passed: true, explanation: summary, evidence: [])
    }
}
