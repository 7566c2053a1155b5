/// A bandwidth cap as a token bucket (ARCHITECTURE §3b): bytes may go as fast as `bytesPerSecond` allows, with a
/// burst of at most 20 ms of them, so a capped download's duration is its size over the rate (1 MiB at 256 KiB/s:
/// 4.0 s less 20 ms) and a pause (a freeze) does not save up a burst for afterwards. A timer that wakes late (a busy
/// machine) is made up for, up to 250 ms worth, when the caller says bytes waited for the budget meanwhile
/// (`available(nowNanos:waited:)`): otherwise every late wake-up would be lost and a loaded machine would shape
/// slower than the rate. Pure: the caller passes the monotonic clock.
package struct ByteBudget: Sendable, Equatable {
    package let bytesPerSecond: Int
    /// The most bytes that may go at once: 20 ms worth, at least one byte.
    package let capacity: Double
    /// The most a late wake-up is made up for: 250 ms worth, at least `capacity`.
    package let catchUp: Double
    private var tokens: Double
    private var updatedAtNanos: UInt64

    package init(bytesPerSecond: Int, nowNanos: UInt64) {
        self.bytesPerSecond = max(1, bytesPerSecond)
        capacity = max(1, Double(self.bytesPerSecond) / 50)
        catchUp = max(capacity, Double(self.bytesPerSecond) / 4)
        tokens = capacity
        updatedAtNanos = nowNanos
    }

    /// Adds what the time since the last update earned, up to `limit` (never taking away what a catch-up gave).
    private mutating func refill(_ nowNanos: UInt64, limit: Double? = nil) {
        guard nowNanos > updatedAtNanos else { return }
        let earned = tokens + Double(nowNanos - updatedAtNanos) * Double(bytesPerSecond) / 1e9
        tokens = min(max(limit ?? capacity, tokens), earned)
        updatedAtNanos = nowNanos
    }

    /// The bytes that may go now. `waited`: bytes were held for this budget since it was last asked (the caller's
    /// timer for it fired), so the time since then earns up to `catchUp`, not just `capacity`.
    package mutating func available(nowNanos: UInt64, waited: Bool = false) -> Int {
        refill(nowNanos, limit: waited ? catchUp : capacity)
        return Int(tokens)
    }

    package mutating func spend(_ bytes: Int, nowNanos: UInt64) {
        refill(nowNanos)
        tokens -= Double(bytes)
    }

    /// Milliseconds (at least 1) until `bytes` (at most the capacity) may go.
    package func millisecondsUntil(_ bytes: Int) -> Int {
        let wanted = min(Double(max(1, bytes)), capacity)
        guard tokens < wanted else { return 0 }
        return max(1, Int(((wanted - tokens) * 1000 / Double(bytesPerSecond)).rounded(.up)))
    }

    /// Starts counting from now with an empty bucket: after a freeze nothing was saved up.
    package mutating func restart(nowNanos: UInt64) {
        tokens = 0
        updatedAtNanos = nowNanos
    }
}
