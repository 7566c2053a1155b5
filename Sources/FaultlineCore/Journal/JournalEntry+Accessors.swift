/// What a test usually asks of an entry, without digging through the head and the clocks.
extension JournalEntry {
    /// Milliseconds from the request's arrival to the end of its exchange; nil while it is pending.
    public var durationMs: Double? {
        finishedAtMonotonicNanos.map { Double($0 &- receivedAtMonotonicNanos) / 1_000_000 }
    }

    /// A request header's value (the name matched without regard to case); nil when absent or not parsed.
    public func header(_ name: String) -> String? {
        head?.headers[name]
    }

    /// The request's `Idempotency-Key`, read as the server reads it: an sf-string (`"8e03…"`) or the bare form
    /// Stripe-style clients send; nil when absent or not a key.
    public var idempotencyKey: String? {
        header("Idempotency-Key").flatMap(IdempotencyStore.parseKey)
    }
}

/// JSON text, so a `JSONValue` in an `#expect` failure or a log reads as the JSON it is.
extension JSONValue: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { serialized() }
    public var debugDescription: String { serialized() }
}
