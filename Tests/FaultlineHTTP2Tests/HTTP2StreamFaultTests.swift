import FaultlineCore
import FaultlineHTTP2
import Testing

/// The HTTP/2 faults that break one stream or announce the connection's end, with the scripts the engine builds
/// for them: the frames on the wire and how each exchange is journaled.
@Suite("HTTP/2 faults on a stream")
struct HTTP2StreamFaultTests {
    static let text = "0123456789abcdefghij"

    @Test("rst-stream after N bytes: DATA of N bytes, then RST_STREAM with the code; stream-reset",
          arguments: [(HTTP2ErrorCode.internalError, 7), (.cancel, 1), (.enhanceYourCalm, 19)])
    func rstStreamAfterBytes(code: HTTP2ErrorCode, sent: Int) {
        let h2 = H2Fixture(scripts: ["/r": Scripts.rstStream(after: sent, of: Self.text, code: code)])
        let stream = h2.client.request("GET", "/r")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA \(sent)", "RST_STREAM \(code.name)"])
        #expect(h2.client.text(stream) == String(Self.text.prefix(sent)))
        #expect(h2.client.headers(stream).contains { $0 == ("content-length", "20") }, "the head announced all of it")
        #expect(h2.client.closed[stream] == code.rawValue)
        #expect(h2.outcome("/r") == .streamReset)
        #expect(h2.io.closedAt == nil, "only the stream ends")
        #expect(h2.io.problems.isEmpty)
    }

    @Test("rst-stream REFUSED_STREAM after the headers is journaled not-processed")
    func rstStreamRefused() {
        let h2 = H2Fixture(scripts: ["/r": Scripts.rstStreamAfterHeaders(.refusedStream)])
        let stream = h2.client.request("POST", "/r", body: Array("x".utf8))
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "RST_STREAM REFUSED_STREAM"])
        #expect(h2.outcome("/r") == .notProcessed)
        #expect(h2.client.closed[stream] == HTTP2ErrorCode.refusedStream.rawValue)
    }

    @Test("rst-stream before anything: RST_STREAM alone, no HEADERS")
    func rstStreamBeforeHeaders() {
        let script = ResponseScript(
            steps: [.http2(.resetStream(code: HTTP2ErrorCode.protocolError.rawValue))], status: nil,
            fault: "rst-stream", keepAlive: true)
        let h2 = H2Fixture(scripts: ["/r": script])
        let stream = h2.client.request("GET", "/r")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["RST_STREAM PROTOCOL_ERROR"])
        #expect(h2.outcome("/r") == .streamReset)
    }

    @Test("truncate-body: the bytes rendered, then RST_STREAM INTERNAL_ERROR, never END_STREAM; closed-by-fault")
    func truncatedBody() {
        let h2 = H2Fixture(scripts: ["/t": Scripts.truncated(after: 12, of: Self.text)])
        let stream = h2.client.request("GET", "/t")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA 12", "RST_STREAM INTERNAL_ERROR"])
        #expect(h2.client.text(stream) == String(Self.text.prefix(12)))
        #expect(h2.outcome("/t") == .closedByFault)
        #expect(h2.io.closedAt == nil, "HTTP/2 cuts the stream, not the connection")
        // The connection goes on serving.
        let next = h2.client.request("GET", "/after")
        h2.pump()
        #expect(h2.client.text(next) == "ok" && h2.outcome("/after") == .completed)
    }

    @Test("goaway current: GOAWAY naming this stream first, it is answered; a later stream is not processed")
    func goawayCurrent() {
        let h2 = H2Fixture(scripts: ["/a": Scripts.delayed(100, "first"), "/go": Scripts.goaway(.current),
                                     "/c": Scripts.ok("never")])
        let a = h2.client.request("GET", "/a"), go = h2.client.request("GET", "/go"), c = h2.client.request("GET", "/c")
        h2.pump()
        #expect(h2.wire.map(H2Fixture.short).prefix(3) == ["SETTINGS", "SETTINGS ACK", "GOAWAY NO_ERROR last 3"])
        #expect(h2.summary(UInt32(go)) == ["HEADERS", "DATA 12 END_STREAM"])
        #expect(h2.client.text(go) == "after goaway" && h2.outcome("/go") == .completed)
        #expect(h2.summary(UInt32(c)).isEmpty, "above the last stream id: never answered")
        #expect(h2.outcome("/c") == .notProcessed)
        #expect(h2.client.closed[c] == HTTP2ErrorCode.refusedStream.rawValue, "the client may retry it")
        #expect(h2.io.closedAt == nil, "stream \(a), below the last stream id, is still under way")
        h2.advance(100)
        #expect(h2.client.text(a) == "first" && h2.outcome("/a") == .completed)
        #expect(h2.io.closedAt == "FIN", "closed once every stream at or below it is done")
        #expect(h2.io.problems.isEmpty)
    }

    @Test("goaway previous: the last stream id is the one before, so this stream is not processed either")
    func goawayPrevious() {
        let h2 = H2Fixture(scripts: ["/a": Scripts.delayed(100, "first"),
                                     "/go": Scripts.goaway(.previous, code: .enhanceYourCalm)])
        let a = h2.client.request("GET", "/a"), go = h2.client.request("GET", "/go")
        h2.pump()
        #expect(h2.wire.map(H2Fixture.short).contains("GOAWAY ENHANCE_YOUR_CALM last 1"))
        #expect(h2.summary(UInt32(go)).isEmpty)
        #expect(h2.outcome("/go") == .notProcessed)
        #expect(h2.outcome("/a") == nil)
        h2.advance(100)
        #expect(h2.client.text(a) == "first" && h2.outcome("/a") == .completed)
        #expect(h2.io.closedAt == "FIN")
    }

    @Test("goaway graceful: the shutdown notice (last 2^31-1) first, the final GOAWAY 50 ms later")
    func goawayGraceful() {
        let h2 = H2Fixture(scripts: ["/go": Scripts.goaway(.current, graceful: true),
                                     "/late": Scripts.delayed(100, "late")])
        let go = h2.client.request("GET", "/go"), late = h2.client.request("GET", "/late")
        h2.pump()
        let goaways = h2.wire.filter { $0.type == WireFrame.goaway }
        #expect(goaways.map(H2Fixture.short) == ["GOAWAY NO_ERROR last 2147483647"])
        let notice = h2.wire.firstIndex { $0.type == WireFrame.goaway }
        let headers = h2.wire.firstIndex { $0.type == WireFrame.headers && $0.stream == UInt32(go) }
        #expect(notice != nil && headers != nil && notice! < headers!, "the notice comes before the answer")
        #expect(h2.client.text(go) == "after goaway" && h2.outcome("/go") == .completed)
        h2.advance(49)
        #expect(h2.wire.filter { $0.type == WireFrame.goaway }.count == 1)
        h2.advance(1)
        #expect(h2.wire.filter { $0.type == WireFrame.goaway }.map(H2Fixture.short)
            == ["GOAWAY NO_ERROR last 2147483647", "GOAWAY NO_ERROR last 1"])
        #expect(h2.outcome("/late") == .notProcessed, "above the final GOAWAY's last stream")
        #expect(h2.summary(UInt32(late)).isEmpty)
        #expect(h2.io.closedAt == "FIN")
        h2.advance(100)
        #expect(h2.summary(UInt32(late)).isEmpty, "its wait does not answer it later")
        #expect(h2.io.problems.isEmpty)
    }

    /// The GOAWAY code nghttp2 as a client answers each preset with.
    static let presetAnswers: [(HTTP2FramePreset, HTTP2ErrorCode)] = [
        (.badHPACK, .compressionError), (.dataOnStreamZero, .protocolError), (.badSettings, .frameSizeError),
    ]

    @Test("raw-frames: the preset's bytes go out verbatim; the client's GOAWAY is journaled on the entry",
          arguments: presetAnswers)
    func rawFrames(preset: HTTP2FramePreset, answer: HTTP2ErrorCode) {
        let h2 = H2Fixture(scripts: ["/raw": Scripts.rawFrames(preset)])
        let stream = h2.client.request("GET", "/raw")
        h2.pump()
        let expected = preset.frames.flatMap { frame in
            Array(repeating: WireFrame.parse(frame.bytes(stream: Int(stream)))[0], count: frame.count)
        }
        #expect(Array(h2.wire.dropFirst(2)) == expected, "after our SETTINGS and the ACK, the frames as they are")
        #expect(h2.wire.prefix(2).map(H2Fixture.short) == ["SETTINGS", "SETTINGS ACK"])
        let goaway = h2.io.clientFrames[h2.sequence("/raw")!]?.goaway
        #expect(goaway?.errorCode == answer.rawValue, "the client found the frames broken: \(h2.client.receiveErrors)")
        #expect(h2.outcome("/raw") == nil, "the script hangs after the frames")
        h2.connection.peerFinished()
        #expect(h2.outcome("/raw") == .hangReleased)
    }

    @Test("raw-frames continuation-flood: HEADERS without END_HEADERS, then 640 CONTINUATION frames of 16 KiB")
    func continuationFlood() {
        let h2 = H2Fixture(scripts: ["/raw": Scripts.rawFrames(.continuationFlood)])
        let stream = h2.client.request("GET", "/raw")
        h2.pump()
        let frames = Array(h2.wire.dropFirst(2))
        #expect(frames.count == 641)
        #expect(frames.first == WireFrame(type: WireFrame.headers, flags: 0, stream: UInt32(stream),
                                          payload: [0x00, 0x7f, 0xff, 0xff, 0x03]))
        #expect(frames.dropFirst().allSatisfy {
            $0.type == WireFrame.continuation && $0.flags == 0 && $0.length == 16_384 && $0.stream == UInt32(stream)
        })
        #expect(h2.io.exchanges[0].bytesWritten == 9 + 5 + 640 * (9 + 16_384))
        #expect(h2.outcome("/raw") == nil)
    }

    @Test("stall-after-headers: HEADERS, then nothing however long; the client's RST releases it")
    func hangAfterHeaders() {
        let h2 = H2Fixture(scripts: ["/stall": Scripts.stallAfterHeaders()])
        let stream = h2.client.request("GET", "/stall")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS"])
        h2.advance(600_000)
        #expect(h2.summary(UInt32(stream)) == ["HEADERS"])
        #expect(h2.outcome("/stall") == nil)
        h2.client.reset(stream, .cancel)
        h2.pump()
        #expect(h2.outcome("/stall") == .hangReleased)
        #expect(h2.io.clientFrames[h2.sequence("/stall")!]?.reset?.errorCode == HTTP2ErrorCode.cancel.rawValue)
        #expect(h2.io.closedAt == nil)
    }

    @Test("hang: no frame at all on the stream; a client that leaves releases it")
    func hang() {
        let h2 = H2Fixture(scripts: ["/hang": Scripts.hang])
        let stream = h2.client.request("GET", "/hang")
        h2.pump()
        h2.advance(60_000)
        #expect(h2.summary(UInt32(stream)).isEmpty)
        h2.connection.peerFailed()
        #expect(h2.outcome("/hang") == .hangReleased)
        #expect(h2.io.closedAt == "abortive")
    }
}
