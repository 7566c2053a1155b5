@testable import Faultline
import Foundation
import Testing

/// `StepDeadlines`, the count of pending scripted waits the close queue looks at, on milliseconds chosen by hand
/// (no clock, no loop). The server end to end: bench_timing's 10,000 delays (docs/benchmarks.md).
@Suite struct StepDeadlinesTests {
    @Test func anEmptyCountHasNothingDue() {
        let deadlines = StepDeadlines()
        #expect(deadlines.earliest == nil && deadlines.pending == 0)
        #expect(!deadlines.anyDue(now: 0, within: 1_000_000))
    }

    @Test func theEarliestIsTheSmallestPendingMillisecond() {
        let deadlines = StepDeadlines()
        for due: Int64 in [1_050, 1_000, 1_200, 1_000, 1_100] { deadlines.add(due) }
        #expect(deadlines.pending == 5 && deadlines.earliest == 1_000)
        #expect(deadlines.anyDue(now: 999, within: 2), "due at 1,000 < 999 + 2")
        #expect(!deadlines.anyDue(now: 997, within: 2), "due at 1,000, not before 999")
        #expect(deadlines.anyDue(now: 1_500, within: 2), "overdue: the loop has not run it yet")
        // Two share 1,000: it stays the earliest until both are gone.
        deadlines.remove(1_000)
        #expect(deadlines.earliest == 1_000 && deadlines.pending == 4)
        deadlines.remove(1_000)
        #expect(deadlines.earliest == 1_050 && deadlines.pending == 3)
        deadlines.remove(1_100)
        #expect(deadlines.earliest == 1_050)
        deadlines.add(900)
        #expect(deadlines.earliest == 900)
        for due: Int64 in [900, 1_050, 1_200] { deadlines.remove(due) }
        #expect(deadlines.pending == 0 && deadlines.earliest == nil)
        #expect(!deadlines.anyDue(now: 1_200, within: 2))
    }

    @Test func removingWhatWasNeverAddedChangesNothing() {
        let deadlines = StepDeadlines()
        deadlines.add(10)
        deadlines.remove(11)
        #expect(deadlines.pending == 1 && deadlines.earliest == 10)
    }

    @Test func anAddWhileTheEarliestIsBeingFoundAgainIsNotLost() {
        let deadlines = StepDeadlines()
        deadlines.add(5)
        deadlines.add(20)
        deadlines.remove(5)  // the earliest must be found again…
        deadlines.add(7)  // …and an add meanwhile is among what it is found from
        #expect(deadlines.earliest == 7)
    }

    /// A wait counts while it is pending, and stops counting however it ends: fired, or with its connection gone
    /// (a count left behind would hold every later close back for the queue's whole maximum wait).
    @Test func aServersWaitsAreCountedUntilTheyFireOrTheirConnectionGoes() async throws {
        let scenario = #"{"name": "w", "routes": [ { "id": "long", "match": { "path": "/long" }, "responses": [ { "delayMs": 20000, "text": "late" } ] }, { "id": "short", "match": { "path": "/short" }, "responses": [ { "delayMs": 50, "text": "soon" } ] } ]}"#
        let server = try TestSupport.server([scenario])
        defer { Task { await server.stop() } }
        let pending = { await server.loop.submit { [core = server.core] in core.stepDeadlines.pending } }
        #expect(await pending() == 0)
        var gone: RawClient? = try RawClient(port: server.port)
        try gone?.send("GET /long HTTP/1.1\r\nHost: x\r\n\r\n")
        let waiting = try RawClient(port: server.port)
        try waiting.send("GET /short HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let seen = try TestSupport.admin(server, "requests/wait?count=2&timeoutMs=5000")
        #expect(seen["satisfied"] as? Bool == true)
        #expect(await pending() == 2)
        // The short wait fires and its response comes (and the connection closes: the close queue was not held).
        let answered = waiting.readUntilClose(seconds: 10)
        #expect(answered.closed && String(decoding: answered.bytes, as: UTF8.self).hasSuffix("soon"))
        #expect(await pending() == 1)
        // The client waiting on the long one leaves: its connection goes, and its wait with it.
        gone = nil  // closes the socket: the server's probe of the FIN meets an RST
        let deadline = Date().addingTimeInterval(10)
        while await pending() != 0, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(await pending() == 0)
    }
}
