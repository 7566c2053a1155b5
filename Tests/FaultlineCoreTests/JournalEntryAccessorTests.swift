import Testing
@testable import FaultlineCore

@Suite struct JournalEntryAccessorTests {
    /// Every request allocates an entry's storage: past 1,032 bytes it misses glibc's per-thread cache and takes
    /// malloc's slow path (it was 1,216 bytes until the rarely carried records were boxed: 10 % of a forwarded
    /// request's user time). A record added inline that crosses the line fails here.
    @Test func anEntrysStorageFitsMallocsPerThreadCache() {
        #expect(JournalEntry.storageBytes <= 1032, "\(JournalEntry.storageBytes) bytes")
    }

    @Test func durationHeaderAndIdempotencyKey() {
        let head = HTTPRequestHead(
            method: "POST", target: "/orders", version: .http1_1,
            headers: HTTPHeaders([("Host", "x"), ("idempotency-key", "\"k-1\"")]))
        var entry = JournalEntry(
            receivedAtWall: 0, receivedAtMonotonicNanos: 1_000_000, connectionID: 1, indexOnConnection: 0,
            clientAddress: "127.0.0.1:1", head: head)
        #expect(entry.durationMs == nil, "pending")
        entry.finishedAtMonotonicNanos = 3_500_000
        #expect(entry.durationMs == 2.5)
        #expect(entry.header("Idempotency-Key") == "\"k-1\"" && entry.header("X-Missing") == nil)
        #expect(entry.idempotencyKey == "k-1")
    }

    @Test func jsonValuesPrintAsJSON() {
        let value: JSONValue = .object([("a", .int(1)), ("b", .array([.bool(true), .null]))])
        #expect("\(value)" == #"{"a":1,"b":[true,null]}"#)
        #expect(String(reflecting: value) == #"{"a":1,"b":[true,null]}"#)
    }
}
