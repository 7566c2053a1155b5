import Testing
@testable import FaultlineCore

/// The bandwidth cap's token bucket (ARCHITECTURE §3b): 20 ms of burst, and a late wake-up made up for when bytes
/// waited for the budget (a loaded machine wakes timers late; without it, every late wake-up was lost and a 1 MiB
/// download at 256 KiB/s took 4.5 s instead of 4.0 on a busy 2-core box).
@Suite struct ByteBudgetTests {
    static let ms: UInt64 = 1_000_000

    @Test func aBurstIsTwentyMillisecondsWorthAndIdleTimeSavesNoMore() {
        var budget = ByteBudget(bytesPerSecond: 100_000, nowNanos: 0)
        #expect(budget.capacity == 2000 && budget.catchUp == 25_000)
        #expect(budget.available(nowNanos: 0) == 2000)
        budget.spend(2000, nowNanos: 0)
        #expect(budget.available(nowNanos: 1000 * Self.ms) == 2000, "an idle second saves up only the burst")
        #expect(budget.millisecondsUntil(2000) == 0)
    }

    @Test func aLateWakeUpIsMadeUpForWhenBytesWaited() {
        var budget = ByteBudget(bytesPerSecond: 100_000, nowNanos: 0)
        budget.spend(budget.available(nowNanos: 0), nowNanos: 0)
        #expect(budget.available(nowNanos: 0) == 0)
        #expect(budget.millisecondsUntil(2000) == 20)
        // The timer meant for 20 ms fires at 50 ms: 50 ms were earned, not 20.
        #expect(budget.available(nowNanos: 50 * Self.ms, waited: true) == 5000)
        budget.spend(3000, nowNanos: 50 * Self.ms)
        #expect(budget.available(nowNanos: 50 * Self.ms) == 2000, "what was made up is not taken back")
        budget.spend(2000, nowNanos: 50 * Self.ms)
        // Made up for at most 250 ms worth.
        #expect(budget.available(nowNanos: 2050 * Self.ms, waited: true) == 25_000)
    }

    @Test func theAverageRateHoldsWhateverTheLateness() {
        // Timers asked for every 20 ms that fire 3–9 ms late: 1 MiB at 256 KiB/s still takes 4 s less the burst.
        var budget = ByteBudget(bytesPerSecond: 256 * 1024, nowNanos: 0)
        var now: UInt64 = 0
        var sent = 0
        var waited = false
        var lateness: UInt64 = 3
        while sent < 1 << 20 {
            let available = budget.available(nowNanos: now, waited: waited)
            if available > 0 {
                let count = min(available, (1 << 20) - sent)
                budget.spend(count, nowNanos: now)
                sent += count
                waited = false
                continue
            }
            waited = true
            now += UInt64(budget.millisecondsUntil(65_536)) * Self.ms + lateness * Self.ms
            lateness = lateness == 9 ? 3 : lateness + 1
        }
        let seconds = Double(now) / 1e9
        #expect(seconds > 3.95 && seconds < 4.01, "\(seconds) s")
    }
}
