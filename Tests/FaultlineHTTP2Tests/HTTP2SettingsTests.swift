import FaultlineCore
import FaultlineHTTP2
import Testing

/// The scenario's `http2` section as connection behaviour: goawayAfterStreams, the stalled upload
/// (initialWindowSize 0 with windowUpdateAfterMs), the request timeout, PINGs unanswered and PINGs sent.
@Suite("HTTP/2 connection settings")
struct HTTP2SettingsTests {
    @Test("goawayAfterStreams 2: GOAWAY naming the second stream; the third is not processed, the connection closes")
    func goawayAfterStreams() {
        var settings = HTTP2ConnectionSettings()
        settings.goawayAfterStreams = 2
        let h2 = H2Fixture(settings: settings)
        let ids = ["/1", "/2", "/3"].map { h2.client.request("GET", $0) }
        h2.pump()
        #expect(h2.wire.filter { $0.type == WireFrame.goaway }.map(H2Fixture.short) == ["GOAWAY NO_ERROR last 3"])
        #expect(h2.client.text(ids[0]) == "ok" && h2.client.text(ids[1]) == "ok")
        #expect(h2.outcome("/1") == .completed && h2.outcome("/2") == .completed)
        #expect(h2.summary(UInt32(ids[2])).isEmpty)
        #expect(h2.io.requests.map(\.request.path) == ["/1", "/2"], "the third is never dispatched")
        #expect(h2.io.unanswered.map(\.outcome) == [.notProcessed])
        #expect(h2.io.unanswered.first?.request?.path == "/3" && h2.io.unanswered.first?.context.stream == 5)
        #expect(h2.client.closed[ids[2]] == HTTP2ErrorCode.refusedStream.rawValue)
        #expect(h2.io.closedAt == "FIN")
        #expect(h2.io.problems.isEmpty)
    }

    @Test("initialWindowSize 0 with windowUpdateAfterMs: the upload stalls until the fake timer opens the window")
    func stalledUpload() {
        var settings = HTTP2ConnectionSettings()
        settings.initialWindowSize = 0
        settings.windowUpdateAfterMilliseconds = 400
        let h2 = H2Fixture(settings: settings, scripts: ["/up": Scripts.ok("got it")])
        h2.pump()  // SETTINGS both ways: the client now has a window of 0 for new streams
        let upload = [UInt8](repeating: 0x75, count: 100_000)
        let stream = h2.client.request("POST", "/up", body: upload)
        h2.pump()
        #expect(h2.client.unsentBody(stream) == 100_000, "not a byte of DATA into a window of 0")
        #expect(h2.io.requests.isEmpty)
        h2.advance(399)
        #expect(h2.client.unsentBody(stream) == 100_000)
        #expect(!h2.wire.contains { $0.type == WireFrame.windowUpdate && $0.stream == UInt32(stream) })
        h2.advance(1)
        #expect(h2.wire.filter { $0.type == WireFrame.windowUpdate && $0.stream == UInt32(stream) }.map(\.increment)
            == [1 << 24])
        #expect(h2.client.unsentBody(stream) == 0)
        #expect(h2.io.requests.first?.request.body.count == 100_000)
        #expect(h2.client.text(stream) == "got it" && h2.outcome("/up") == .completed)
        #expect(!h2.wire.contains { $0.errorCode == HTTP2ErrorCode.flowControlError.rawValue })
    }

    @Test("a request not complete in time: 408 with END_STREAM, then RST_STREAM NO_ERROR so the client stops")
    func requestTimeout() {
        var settings = HTTP2ConnectionSettings()
        settings.requestTimeoutMilliseconds = 500
        let h2 = H2Fixture(settings: settings)
        let stream = h2.client.request("POST", "/slow-upload", body: Array("never sent".utf8), holdBody: true)
        h2.pump()
        #expect(h2.summary(UInt32(stream)).isEmpty)
        h2.advance(499)
        #expect(h2.summary(UInt32(stream)).isEmpty && h2.io.rejected.isEmpty)
        h2.advance(1)
        #expect(h2.summary(UInt32(stream)) == ["HEADERS END_STREAM", "RST_STREAM NO_ERROR"])
        #expect(h2.client.status(stream) == "408")
        #expect(h2.io.rejected.map(\.status) == [408])
        #expect(h2.io.requests.isEmpty, "rejected, not dispatched")
        #expect(h2.io.outcomes[0] == .completed, "the 408 went out whole")
        #expect(h2.io.closedAt == nil)
    }

    @Test("a request that completes in the read that began it starts no timer")
    func noTimerOnTheFastPath() {
        let h2 = H2Fixture()
        h2.pump()
        let before = h2.io.timerOrder
        _ = h2.client.request("GET", "/fast")
        h2.pump()
        #expect(h2.io.timerOrder == before, "no request timer for a request that is already complete")
        #expect(h2.outcome("/fast") == .completed)
    }

    @Test("ackPings false: the client's PING gets no ACK; the connection entry says so")
    func pingsNotAcknowledged() {
        var settings = HTTP2ConnectionSettings()
        settings.ackPings = false
        let h2 = H2Fixture(settings: settings)
        _ = h2.client.request("GET", "/a")
        h2.client.ping()
        h2.pump()
        #expect(!h2.wire.contains { $0.type == WireFrame.ping }, "no PING ACK")
        #expect(h2.client.text(1) == "ok")
        h2.connection.peerFinished()
        #expect(h2.io.http2Entries.count == 1)
        let summary = h2.io.http2Entries.first?.summary
        #expect(summary?.pingsReceived == 1 && summary?.pingsAcknowledged == false && summary?.streams == 1)
        #expect(summary?.pingsSent == 0)
    }

    @Test("the client's PING is acknowledged by default, and no connection entry is made for it")
    func pingsAcknowledged() {
        let h2 = H2Fixture()
        h2.client.ping(0x0102_0304_0506_0708)
        h2.pump()
        let acks = h2.wire.filter { $0.type == WireFrame.ping }
        #expect(acks.map(H2Fixture.short) == ["PING ACK"])
        #expect(acks.first?.payload == [1, 2, 3, 4, 5, 6, 7, 8])
        h2.connection.peerFinished()
        #expect(h2.io.http2Entries.isEmpty)
    }

    @Test("pingEveryMs: a PING each period, its round trip on the fake clock in the connection entry")
    func pingsSent() {
        var settings = HTTP2ConnectionSettings()
        settings.pingEveryMilliseconds = 1000
        let h2 = H2Fixture(settings: settings)
        h2.pump()
        h2.io.advance(milliseconds: 1000)
        let pings = WireFrame.parse(h2.io.output)
        #expect(pings.map(H2Fixture.short) == ["PING"])
        #expect(pings.first?.payload == [0, 0, 0, 0, 0, 0, 0, 1], "the opaque data counts the PINGs")
        h2.io.advance(milliseconds: 7)  // the ACK comes back 7 ms later
        h2.pump()
        h2.io.advance(milliseconds: 993)  // the second PING, never answered
        #expect(WireFrame.parse(h2.io.output).map(H2Fixture.short) == ["PING"])
        h2.connection.peerFinished()
        let summary = h2.io.http2Entries.first?.summary
        #expect(h2.io.http2Entries.count == 1)
        #expect(summary?.pingsSent == 2)
        #expect(summary?.pingRoundTripsMilliseconds == [7])
        #expect(summary?.pingsAcknowledged == true && summary?.streams == 0)
        h2.io.advance(milliseconds: 5000)
        #expect(h2.io.problems.isEmpty, "the PING timer stopped with the connection")
    }
}
