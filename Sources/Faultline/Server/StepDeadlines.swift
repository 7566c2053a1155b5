/// When the scripted waits still pending fall due, to the millisecond: what lets the close queue
/// (`ServerCore.closeNextSlice`) stand aside while delayed responses are falling due (issue 30).
///
/// Why: a `Connection: close` response's close waits in the queue until nothing is *ready*, then goes in slices of
/// up to 64 (~1 ms). A timer due 10 µs later is not ready, so a slice ran in front of it and the response went out
/// late. Measured with 3,000 requests delayed 50 ms arriving over 90 ms (their closes and their timers interleave):
/// server-side lateness p99 0.7–1.4 ms, max 1.1–1.9 ms before; p99 0.13–0.25 ms, max 0.25–0.55 ms with this (the
/// FINs come later instead, after the burst, within the queue's 250 ms maximum). It does not explain the tail of
/// 10,000 delays of 1 s: there the closes already waited for the whole burst, and the lateness is the kernel's
/// cost per send (docs/benchmarks.md, "Where the tail comes from").
///
/// Counts per millisecond (several timers share one), the earliest cached and found again only when its
/// millisecond empties: arming and firing are a dictionary update each, and only scripted waits (`.step` timers)
/// are counted. Pure: no clock, no loop; the caller passes the milliseconds. Loop thread only.
final class StepDeadlines {
    private var counts: [Int64: Int32] = [:]
    /// The earliest millisecond with a pending wait; nil when none is, or when it must be found again.
    private var earliestCache: Int64?
    private var earliestValid = true

    /// How many waits are pending.
    private(set) var pending = 0

    func add(_ milliseconds: Int64) {
        counts[milliseconds, default: 0] += 1
        pending += 1
        if earliestValid, earliestCache.map({ milliseconds < $0 }) ?? true { earliestCache = milliseconds }
    }

    /// A wait that fired or was cancelled (each `add` is removed once).
    func remove(_ milliseconds: Int64) {
        guard let count = counts[milliseconds] else { return }
        pending -= 1
        if count > 1 {
            counts[milliseconds] = count - 1
            return
        }
        counts[milliseconds] = nil
        if milliseconds == earliestCache { earliestValid = false }
    }

    /// The earliest millisecond a pending wait falls due at (it may be past: a timer the loop has not run yet).
    var earliest: Int64? {
        if !earliestValid {
            earliestCache = counts.keys.min()
            earliestValid = true
        }
        return earliestCache
    }

    /// Whether a pending wait falls due before `now + window` (or is overdue).
    func anyDue(now: Int64, within window: Int64) -> Bool {
        guard pending > 0, let earliest else { return false }
        return earliest < now + window
    }
}
