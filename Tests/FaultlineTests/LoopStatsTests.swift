@testable import Faultline
import Testing

/// `LogHistogram` and `LoopStats.report`, on values chosen by hand (no clock). The server end to end, with
/// `FAULTLINE_LOOP_STATS=1`, is Tests/Python/test_loop_turns.py.
@Suite struct LoopStatsTests {
    @Test func everyValueFallsInABucketWhoseBoundHoldsIt() {
        var previous = -1
        for value: UInt64 in [0, 1, 7, 8, 9, 15, 16, 17, 100, 1_000, 999_999, 1_000_000, 123_456_789, 1 << 40] {
            let bucket = LogHistogram.bucket(value)
            #expect(bucket >= previous, "buckets grow with values")
            previous = bucket
            #expect(LogHistogram.upperBound(bucket) >= value, "\(value) in bucket \(bucket)")
            // A bucket is at most 1/8 of its octave wide: its bound is within 12.5 % of any value in it.
            #expect(Double(LogHistogram.upperBound(bucket)) <= Double(value) * 1.125 + 1, "\(value)")
        }
    }

    @Test func percentilesAreBucketBoundsCappedByTheMaximum() {
        var histogram = LogHistogram()
        #expect(histogram.percentile(0.99) == 0 && histogram.count == 0)
        // 990 turns of 10 µs, 9 of 2 ms, one of 30 ms.
        for _ in 0..<990 { histogram.record(10_000) }
        for _ in 0..<9 { histogram.record(2_000_000) }
        histogram.record(30_000_000)
        #expect(histogram.count == 1000 && histogram.max == 30_000_000)
        let p50 = histogram.percentile(0.5)
        #expect(p50 >= 10_000 && p50 < 11_250)
        let p999 = histogram.percentile(0.999)
        #expect(p999 >= 2_000_000 && p999 < 2_250_000)
        #expect(histogram.percentile(1.0) == 30_000_000)
        #expect(histogram.count(atLeast: 1_000_000) == 10)
        #expect(histogram.count(atLeast: 20_000_000) == 1)
    }

    @Test func theReportNamesTurnsAndExchanges() {
        let stats = LoopStats()
        for _ in 0..<99 { stats.turnEnded(cpuNanos: 20_000) }
        stats.turnEnded(cpuNanos: 6_000_000)
        stats.requestFinished(nanos: 150_000)
        let lines = stats.report.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("faultline: loop stats: 100 turns, CPU per turn p50 2"))
        #expect(lines[0].contains(" µs, p99 ") && lines[0].contains("max 6 ms; 1 over 1 ms, 1 over 5 ms, 0 over 20 ms"))
        #expect(lines[1].hasPrefix("faultline: loop stats: 1 exchanges, read whole to last byte written p50 0.15 ms"))
    }
}
