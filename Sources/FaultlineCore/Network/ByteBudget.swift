/// A bandwidth cap as a token bucket (ARCHITECTURE §3b): bytes may go as fast as `bytesPerSecond` allows, with a
/// burst of at most 20 ms of them, so a capped download's duration is its size over the rate (1 MiB at 256 KiB/s:
/// 4.0 s less 20 ms) and a pause (a freeze) does not save up a burst for afterwards. Pure: the caller passes the
/// monotonic clock.
package struct ByteBudget: Sendable, Equatable {
    package let bytesPerSecond: Int
    /// The most bytes that may go at once: 20 ms worth, at least one byte.
    package let capacity: Double
    private var tokens: Double
    private var updatedAtNanos: UInt64

    package init(bytesPerSecond: Int, nowNanos: UInt64) {
        self.bytesPerSecond = max(1, bytesPerSecond)
        capacity = max(1, Double(self.bytesPerSecond) / 50)
        tokens = capacity
        updatedAtNanos = nowNanos
    }

    private mutating func refill(_ nowNanos: UInt64) {
        guard nowNanos > updatedAtNanos else { return }
        tokens = min(capacity, tokens + Double(nowNanos - updatedAtNanos) * Double(bytesPerSecond) / 1e9)
        updatedAtNanos = nowNanos
    }

    /// The bytes that may go now.
    package mutating func available(nowNanos: UInt64) -> Int {
        refill(nowNanos)
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
