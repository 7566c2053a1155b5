import FaultlineCore
import FaultlineHTTP2
import Testing

/// What the client sends to end a stream or the connection (RST_STREAM, GOAWAY, leaving): journaled on the
/// entries it concerns (`clientSent`), and the outcomes.
@Suite("HTTP/2: the client ends a stream or the connection")
struct HTTP2ClientEndTests {
    @Test("RST_STREAM CANCEL mid-response: journaled on the entry, client-closed, nothing more on the stream")
    func clientCancelsMidResponse() {
        let h2 = H2Fixture(scripts: ["/drip": Scripts.drip("ab", wait: 100, "cd")])
        let stream = h2.client.request("GET", "/drip")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA 2"])
        h2.io.advance(milliseconds: 30)
        h2.client.reset(stream, .cancel)
        h2.pump()
        #expect(h2.outcome("/drip") == .clientClosed)
        let reset = h2.io.clientFrames[h2.sequence("/drip")!]?.reset
        #expect(reset?.errorCode == HTTP2ErrorCode.cancel.rawValue)
        #expect(reset?.receivedAtMonotonicNanos == 30 * 1_000_000)
        h2.advance(100)
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA 2"], "the drip's timer was cancelled")
        #expect(h2.io.timers.allSatisfy { $0.action == nil })
        #expect(h2.io.closedAt == nil)
        // The connection serves the next request.
        let next = h2.client.request("GET", "/next")
        h2.pump()
        #expect(h2.client.text(next) == "ok")
    }

    @Test("RST_STREAM on a request still arriving: journaled unanswered with the client's frame")
    func clientCancelsItsUpload() {
        let h2 = H2Fixture()
        let stream = h2.client.request("POST", "/up", body: Array("partial".utf8), holdBody: true)
        h2.pump()
        h2.client.reset(stream, .cancel)
        h2.pump()
        #expect(h2.io.requests.isEmpty)
        #expect(h2.io.unanswered.count == 1)
        #expect(h2.io.unanswered.first?.outcome == .clientClosed)
        #expect(h2.io.unanswered.first?.error?.status == 400)
        #expect(h2.io.unanswered.first?.client.reset?.errorCode == HTTP2ErrorCode.cancel.rawValue)
    }

    @Test("GOAWAY from the client while a stream waits: journaled on its entry; the answer still goes out")
    func clientGoawayWhileWaiting() {
        let h2 = H2Fixture(scripts: ["/slow": Scripts.delayed(100, "slow")])
        let stream = h2.client.request("GET", "/slow")
        h2.pump()
        h2.client.goaway(.noError, debug: "bye")
        h2.pump()
        let goaway = h2.io.clientFrames[h2.sequence("/slow")!]?.goaway
        #expect(goaway?.errorCode == 0 && goaway?.debugData == Array("bye".utf8) && goaway?.count == 1)
        #expect(goaway?.lastStreamID == 0, "the server opened no stream")
        #expect(h2.outcome("/slow") == nil)
        h2.advance(100)
        #expect(h2.client.text(stream) == "slow" && h2.outcome("/slow") == .completed)
        h2.connection.peerFinished()
        #expect(h2.io.http2Entries.isEmpty, "the stream's entry has it: no connection entry")
    }

    @Test("GOAWAY from a client that opened no stream: the server closes, a connection entry carries it")
    func clientGoawayWithoutStreams() {
        let h2 = H2Fixture()
        h2.pump()
        h2.io.advance(milliseconds: 12)
        h2.client.goaway(.noError, debug: "done")
        h2.pump()
        // nghttp2 wants nothing more once the client said GOAWAY and no stream is open: the server closes.
        #expect(h2.io.closedAt == "FIN")
        #expect(h2.io.http2Entries.count == 1)
        let entry = h2.io.http2Entries.first
        #expect(entry?.summary == nil)
        #expect(entry?.clientGoaway?.errorCode == 0 && entry?.clientGoaway?.debugData == Array("done".utf8))
        #expect(entry?.clientGoaway?.receivedAtMonotonicNanos == 12 * 1_000_000)
        #expect(h2.io.problems.isEmpty)
    }

    @Test("two GOAWAYs from the client during a hang: the entry keeps the last and counts them")
    func twoClientGoaways() {
        let h2 = H2Fixture(scripts: ["/stall": Scripts.stallAfterHeaders()])
        _ = h2.client.request("GET", "/stall")
        h2.pump()
        h2.client.goaway(.noError, debug: "first")
        h2.pump()
        // nghttp2 as client sends one GOAWAY: the second is written by hand.
        WireFrame.goaway(HTTP2ErrorCode.protocolError.rawValue, debug: "second").bytes.withUnsafeBytes {
            h2.connection.received($0)
        }
        let goaway = h2.io.clientFrames[h2.sequence("/stall")!]?.goaway
        #expect(goaway?.errorCode == HTTP2ErrorCode.protocolError.rawValue)
        #expect(goaway?.debugData == Array("second".utf8) && goaway?.count == 2)
        #expect(h2.outcome("/stall") == nil, "a GOAWAY does not end the stream")
    }

    @Test("a client that leaves during a wait: the stream ends client-closed, FIN, its timer cancelled")
    func clientLeavesDuringAWait() {
        let h2 = H2Fixture(scripts: ["/slow": Scripts.delayed(100, "slow")])
        let stream = h2.client.request("GET", "/slow")
        h2.pump()
        h2.connection.peerFinished()
        #expect(h2.outcome("/slow") == .clientClosed)
        #expect(h2.io.closedAt == "FIN")
        h2.io.advance(milliseconds: 100)
        #expect(h2.summary(UInt32(stream)).isEmpty)
        #expect(h2.io.problems.isEmpty)
    }

    @Test("the server stops: every stream under way ends with the teardown's outcome, after a GOAWAY")
    func teardown() {
        let h2 = H2Fixture(scripts: ["/slow": Scripts.delayed(100, "slow"), "/stall": Scripts.stallAfterHeaders()])
        _ = h2.client.request("GET", "/slow")
        _ = h2.client.request("GET", "/stall")
        h2.pump()
        h2.connection.teardown(.cancelled)
        h2.pump()
        #expect(h2.outcome("/slow") == .cancelled && h2.outcome("/stall") == .cancelled)
        #expect(h2.wire.filter { $0.type == WireFrame.goaway }.map(H2Fixture.short) == ["GOAWAY NO_ERROR last 3"])
        #expect(h2.io.closedAt == "FIN")
        #expect(h2.io.problems.isEmpty)
    }

    @Test("a scenario reset cancels the streams under way with RST_STREAM CANCEL and keeps the connection")
    func cancelPending() {
        let h2 = H2Fixture(scripts: ["/slow": Scripts.delayed(100, "slow")])
        let stream = h2.client.request("GET", "/slow")
        h2.pump()
        #expect(h2.connection.hasPendingScriptedResponse)
        h2.connection.cancelPending(.cancelled)
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["RST_STREAM CANCEL"])
        #expect(h2.outcome("/slow") == .cancelled)
        #expect(!h2.connection.hasPendingScriptedResponse && h2.io.closedAt == nil)
        h2.advance(100)
        #expect(h2.summary(UInt32(stream)) == ["RST_STREAM CANCEL"])
    }
}
