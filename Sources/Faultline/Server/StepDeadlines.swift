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

/// Housekeeping that stands aside while scripted waits fall due: the close queue (`ServerCore.closeNextSlice`) and
/// the request log's lines (`RequestLog`). Work that can wait — a close, formatting a log line — done in front of a
/// timer due a millisecond later makes that delayed response late, and a burst of them later still.
///
/// The job asks `mayRun()` before each slice. False: a scripted wait falls due within `windowMilliseconds`, so the job
/// waits; one retry is set just after the earliest wait falls due (or when the job has waited `maxWait`), which
/// calls `retry` (the job schedules its slice again). True: run a slice now. Past `maxWait` a slice runs even with
/// waits due, and the next one counts as having waited almost as long, so under an endless drip of delays the
/// job still moves a slice at a time (its backstop's starved interval paces it). Loop thread only.
final class DeadlineYield {
    private let loop: EventLoop
    private let deadlines: StepDeadlines
    /// How close a scripted wait's deadline makes the job stand aside: a timer due within it is not *ready* yet, and a
    /// slice run in front of it (about a millisecond) would make it late.
    static let windowMilliseconds: Int64 = 2
    private let maxWait: Int64
    private let retry: () -> Void
    /// Since when the job's oldest queued work has waited (monotonic ms).
    private var waitingSince: Int64 = 0
    /// The one retry pending while the job stands aside.
    private var retryTimer: LoopTimer?

    init(loop: EventLoop, deadlines: StepDeadlines, maxWaitMilliseconds: Int64, retry: @escaping () -> Void) {
        self.loop = loop
        self.deadlines = deadlines
        maxWait = maxWaitMilliseconds
        self.retry = retry
    }

    /// The job's queue was empty and now holds work: its wait starts now.
    func queueStarted() { waitingSince = Clock.monotonicMilliseconds() }

    func mayRun() -> Bool {
        let now = Clock.monotonicMilliseconds()
        let waited = now - waitingSince
        if waited < maxWait, deadlines.anyDue(now: now, within: Self.windowMilliseconds) {
            guard retryTimer == nil else { return false }
            let due = deadlines.earliest ?? now
            let after = max(1, min(due + 1 - now, maxWait - waited))
            retryTimer = LoopTimer(loop: loop, milliseconds: Int(after)) { [unowned self] in
                retryTimer = nil
                retry()
            }
            return false
        }
        // The rest of the queue waits from now — or, when this slice was forced, gets the next one as soon as the
        // job's backstop allows.
        waitingSince = waited >= maxWait ? now - maxWait + 5 : now
        return true
    }

    /// The server stops: no retry fires after it.
    func cancel() {
        retryTimer?.cancel()
        retryTimer = nil
    }
}
