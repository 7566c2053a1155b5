#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the loop thread spent, for finding where a latency tail comes from (issue 30; docs/benchmarks.md, "Where
/// the tail comes from"). Off unless `FAULTLINE_LOOP_STATS=1` is in the environment: then the loop runs one turn
/// at a time (`event_base_loop(EVLOOP_ONCE)`, which returns once the turn's active events are done) and reads the
/// thread's CPU clock around each, and every exchange that ends adds its time in the server, from the moment its
/// request was read whole to the moment its last byte was written (`Dispatcher.finished`). When the loop ends the
/// two histograms are printed on stderr, one line each: turns, CPU per turn at p50/p99/p99.9/max, how many ran
/// past 1, 5 and 20 ms; requests, time in the server at the same percentiles.
///
/// A turn is what EVLOOP_ONCE runs: from the end of a wait until no event is active — one pass over the ready
/// events while the loop keeps up, several back to back when callbacks keep making events active (the close queue
/// under a connection-per-request load). So a turn's length is an upper bound on the longest pass in it.
///
/// CPU time, not wall time, for a turn: the turn's wait in `epoll_wait` costs none, so what the clock shows is the
/// turn's work (and the kernel's share of its sends); a turn preempted by another process looks no longer. A
/// request's time is wall time: it includes the turns it waited behind. The turn that stops the server (it closes
/// every connection at once) is not counted. Two clock reads per turn are a system call
/// each on Linux, which is why this is not on by default. Loop thread only.
final class LoopStats {
    /// Read once, when a server starts.
    static func fromEnvironment() -> LoopStats? {
        guard let value = getenv("FAULTLINE_LOOP_STATS"), String(cString: value) == "1" else { return nil }
        return LoopStats()
    }

    private(set) var turns = LogHistogram()
    private(set) var requests = LogHistogram()

    func turnEnded(cpuNanos: UInt64) { turns.record(cpuNanos) }

    func requestFinished(nanos: UInt64) { requests.record(nanos) }

    /// The thread's CPU clock (user and system time), in nanoseconds.
    static func threadCPUNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Two lines for stderr.
    var report: String {
        func ms(_ nanos: UInt64) -> String {
            let value = Double(nanos) / 1e6
            return value < 0.1 ? format3(value * 1000) + " µs" : format3(value) + " ms"
        }
        func summary(_ histogram: LogHistogram) -> String {
            [0.5, 0.99, 0.999].map { "p\(formatPercent($0)) \(ms(histogram.percentile($0)))" }.joined(separator: ", ")
                + ", max \(ms(histogram.max))"
        }
        let over = [1, 5, 20].map { "\(turns.count(atLeast: UInt64($0) * 1_000_000)) over \($0) ms" }
        return "faultline: loop stats: \(turns.count) turns, CPU per turn \(summary(turns)); "
            + over.joined(separator: ", ") + "\n"
            + "faultline: loop stats: \(requests.count) exchanges, read whole to last byte written \(summary(requests))\n"
    }

    private func formatPercent(_ fraction: Double) -> String {
        let percent = fraction * 100
        return percent == percent.rounded() ? String(Int(percent)) : format3(percent)
    }
}

/// Three significant figures at most, without Foundation.
private func format3(_ value: Double) -> String {
    guard value > 0 else { return "0" }
    let decimals = value >= 100 ? 0 : value >= 10 ? 1 : 2
    let scale = [1.0, 10.0, 100.0][decimals]
    let rounded = (value * scale).rounded() / scale
    var text = String(rounded)
    if text.hasSuffix(".0") { text.removeLast(2) }
    return text
}

/// A histogram of nanosecond values in buckets 1/8 of a power of two wide (under 9 % apart), from 1 ns to
/// 2^40 ns (18 minutes); fixed size, one increment a value.
struct LogHistogram {
    private static let subBuckets = 8
    private static let octaves = 41
    private var buckets = [UInt64](repeating: 0, count: LogHistogram.subBuckets * LogHistogram.octaves)
    private(set) var count: UInt64 = 0
    private(set) var max: UInt64 = 0

    mutating func record(_ value: UInt64) {
        count += 1
        if value > max { max = value }
        buckets[Self.bucket(value)] += 1
    }

    /// The bucket of `value`: its power of two, then which eighth of that octave.
    static func bucket(_ value: UInt64) -> Int {
        guard value >= 8 else { return Int(value) }
        let octave = 63 - value.leadingZeroBitCount  // 3 or more
        let eighth = Int((value >> UInt64(octave - 3)) & 7)
        return Swift.min((octave - 2) * subBuckets + eighth, subBuckets * octaves - 1)
    }

    /// The upper end of a bucket (what a percentile reports: never less than the values in it).
    static func upperBound(_ bucket: Int) -> UInt64 {
        guard bucket >= subBuckets else { return UInt64(bucket) }
        let octave = bucket / subBuckets + 2
        let eighth = UInt64(bucket % subBuckets)
        return ((8 + eighth + 1) << UInt64(octave - 3)) - 1
    }

    /// The smallest bucket bound at or above `fraction` of the values (0 when there are none), capped by `max`.
    func percentile(_ fraction: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        let rank = Swift.max(1, UInt64((Double(count) * fraction).rounded(.up)))
        var seen: UInt64 = 0
        for (index, bucketCount) in buckets.enumerated() where bucketCount > 0 {
            seen += bucketCount
            if seen >= rank { return Swift.min(Self.upperBound(index), max) }
        }
        return max
    }

    /// How many values were at least `threshold` (counted by bucket: within a bucket's width of exact).
    func count(atLeast threshold: UInt64) -> UInt64 {
        let first = Self.bucket(threshold)
        return buckets[first...].reduce(0, +)
    }
}
