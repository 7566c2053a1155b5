import CNghttp2
import FaultlineCore
import Testing
@testable import FaultlineHTTP2

/// The case curl sometimes fails (Tests/Python/test_http2.py, the stalled upload): the server announces
/// SETTINGS_INITIAL_WINDOW_SIZE 0, and the client sends 65,535 bytes of request body anyway.
///
/// RFC 9113 §6.9.2 and §6.5.3: the server's new initial window binds the client only once the client has
/// processed the server's SETTINGS (and acknowledged them); before that it may use the default 65,535. So a
/// client that sends its preface, HEADERS and up to 65,535 bytes of DATA before it has read our SETTINGS is
/// compliant and must not get FLOW_CONTROL_ERROR; one that sends them after acknowledging our SETTINGS is not.
/// These tests play both orders with hand-made frames (an nghttp2 client would never send the wrong one), and
/// the right one with nghttp2 as the client.
@Suite("HTTP/2: SETTINGS_INITIAL_WINDOW_SIZE 0 and the 65,535 bytes before the ACK")
struct HTTP2ZeroWindowTests {
    static var stalled: HTTP2ConnectionSettings {
        var settings = HTTP2ConnectionSettings()
        settings.initialWindowSize = 0
        return settings
    }

    /// A raw client: what the server wrote so far, as frames, and the server.
    final class RawClient {
        let io = FakeHTTP2IO { _, _ in (Scripts.ok("got it"), nil) }
        let connection: HTTP2Connection
        var frames: [WireFrame] = []
        init(settings: HTTP2ConnectionSettings) { connection = HTTP2Connection(io: io, settings: settings) }
        /// Sends bytes; the frames the server wrote in answer.
        @discardableResult
        func send(_ bytes: [UInt8]) -> [WireFrame] {
            bytes.withUnsafeBytes { connection.received($0) }
            let answer = WireFrame.parse(io.output)
            io.output = []
            frames += answer
            return answer
        }
        func send(_ frames: [WireFrame]) -> [WireFrame] { send(frames.flatMap(\.bytes)) }
        var flowControlErrors: [WireFrame] {
            frames.filter { $0.errorCode == HTTP2ErrorCode.flowControlError.rawValue }
        }
        /// The server's local SETTINGS_INITIAL_WINDOW_SIZE as nghttp2 applies it now.
        var appliedWindow: UInt32 {
            nghttp2_session_get_local_settings(connection.session, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE)
        }
    }

    static let post = WireFrame.headers(1, WireFrame.requestBlock(method: "POST", path: "/up"), endStream: false)

    @Test("compliant: preface, HEADERS and 65,535 bytes of DATA before our SETTINGS arrive — all taken")
    func bodyBeforeOurSettings() {
        let raw = RawClient(settings: Self.stalled)
        // The client's whole first flight, written before it has read a byte from the server.
        let answer = raw.send(WireFrame.preface + ([WireFrame.settings(), Self.post]
            + WireFrame.body(1, count: 65_535, endStream: true)).flatMap(\.bytes))
        #expect(answer.first.map(H2Fixture.short) == "SETTINGS")
        #expect(answer.first?.settingsEntries.contains(SettingsEntry(SettingsEntry.initialWindowSize, 0)) == true)
        #expect(raw.flowControlErrors.isEmpty, "\(answer)")
        #expect(raw.appliedWindow == 65_535, "not acknowledged yet: the default window still binds")
        #expect(raw.io.requests.first?.request.body.count == 65_535)
        // Under the default window's rules, half of it was handed back before the body ended (nghttp2's auto
        // WINDOW_UPDATE), then the answer.
        #expect(raw.frames.filter { $0.stream == 1 }.map(H2Fixture.short) == ["WINDOW_UPDATE", "HEADERS", "DATA 6 END_STREAM"])
        #expect(raw.frames.first { $0.type == WireFrame.windowUpdate && $0.stream == 1 }?.increment == 32_768)
        // Then it reads our SETTINGS and acknowledges them.
        raw.send(WireFrame.settingsAck.bytes)
        #expect(raw.appliedWindow == 0)
        #expect(raw.flowControlErrors.isEmpty && raw.io.connectionErrors.isEmpty)
        #expect(raw.io.outcomes[0] == .completed)
    }

    @Test("compliant: 65,535 bytes of a larger body before our SETTINGS, the rest once the window opens")
    func largerBodyBeforeOurSettings() {
        var settings = Self.stalled
        settings.windowUpdateAfterMilliseconds = 400
        let raw = RawClient(settings: settings)
        let body = WireFrame.body(1, count: 200_000, endStream: true)
        // 65,535 bytes: three full frames and one of 16,383.
        let first = Array(body.prefix(3)) + [WireFrame.data(1, [UInt8](repeating: 0x75, count: 16_383))]
        raw.send(WireFrame.preface + ([WireFrame.settings(), Self.post] + first).flatMap(\.bytes))
        #expect(raw.flowControlErrors.isEmpty, "\(raw.frames)")
        raw.send(WireFrame.settingsAck.bytes)
        #expect(raw.flowControlErrors.isEmpty, "\(raw.frames)")
        // What the server lets the client send now: its WINDOW_UPDATEs for the stream, less the shrink the ACK made.
        let returned = raw.frames.filter { $0.type == WireFrame.windowUpdate && $0.stream == 1 }
            .reduce(0) { $0 + Int($1.increment!) }
        let window = 65_535 - 65_535 + returned - 65_535
        #expect(window <= 0, "the client may send nothing more before the timer: \(window)")
        raw.io.advance(milliseconds: 400)
        let opened = WireFrame.parse(raw.io.output)
        raw.io.output = []
        raw.frames += opened
        #expect(opened.map(H2Fixture.short) == ["WINDOW_UPDATE"])
        #expect(opened.first?.increment == 1 << 24)
        // The rest of the body, within the window it now has (the connection window too: 65,535 again after the
        // server's connection-level WINDOW_UPDATEs).
        var rest = 200_000 - 65_535
        var sent = 0
        while rest > 0 {
            let connectionWindow = 65_535 + raw.frames.filter { $0.type == WireFrame.windowUpdate && $0.stream == 0 }
                .reduce(0) { $0 + Int($1.increment!) } - (65_535 + sent)
            let size = min(rest, 16_384, connectionWindow)
            guard size > 0 else {
                Issue.record("no connection window left: \(raw.frames)")
                return
            }
            rest -= size
            sent += size
            raw.send(WireFrame.data(1, [UInt8](repeating: 0x75, count: size), endStream: rest == 0).bytes)
        }
        #expect(raw.flowControlErrors.isEmpty, "\(raw.frames)")
        #expect(raw.io.requests.first?.request.body.count == 200_000)
        #expect(raw.io.outcomes[0] == .completed)
    }

    @Test("compliant: nghttp2 as the client, its upload submitted before its first read — no FLOW_CONTROL_ERROR")
    func nghttp2ClientBeforeOurSettings() {
        var settings = Self.stalled
        settings.windowUpdateAfterMilliseconds = 400
        let h2 = H2Fixture(settings: settings, scripts: ["/up": Scripts.ok("got it")])
        let stream = h2.client.request("POST", "/up", body: [UInt8](repeating: 0x75, count: 200_000))
        let flight = h2.client.send()
        let sent = WireFrame.parse(Array(flight.dropFirst(WireFrame.preface.count)))
        #expect(sent.filter { $0.type == WireFrame.data }.reduce(0) { $0 + $1.length } == 65_535,
                "the default window's worth, before our SETTINGS")
        flight.withUnsafeBytes { h2.connection.received($0) }
        h2.pump()
        #expect(!h2.wire.contains { $0.errorCode == HTTP2ErrorCode.flowControlError.rawValue }, "\(h2.wire)")
        #expect(h2.client.unsentBody(stream) > 0, "the rest waits for the window")
        #expect(h2.io.requests.isEmpty)
        h2.advance(400)
        #expect(!h2.wire.contains { $0.errorCode == HTTP2ErrorCode.flowControlError.rawValue }, "\(h2.wire)")
        #expect(h2.io.requests.first?.request.body.count == 200_000)
        #expect(h2.client.text(stream) == "got it" && h2.outcome("/up") == .completed)
    }

    @Test("not compliant (curl's order): our SETTINGS acknowledged, then 65,535 bytes — RST_STREAM FLOW_CONTROL_ERROR")
    func bodyAfterTheAck() {
        let raw = RawClient(settings: Self.stalled)
        raw.send(WireFrame.preface + WireFrame.settings().bytes)
        #expect(raw.frames.map(H2Fixture.short) == ["SETTINGS", "SETTINGS ACK"])
        let answer = raw.send([WireFrame.settingsAck, Self.post] + WireFrame.body(1, count: 65_535, endStream: true))
        #expect(raw.appliedWindow == 0)
        // The first DATA byte overruns the stream's window of 0 (RFC 9113 §6.9.1 lets the server reset the stream);
        // the refused bytes still count on the connection, and its window is handed back.
        #expect(answer.filter { $0.stream == 1 }.map(H2Fixture.short) == ["RST_STREAM FLOW_CONTROL_ERROR"])
        #expect(answer.filter { $0.stream == 0 }.map(\.increment) == [32_768, 32_767])
        #expect(raw.io.requests.isEmpty, "never dispatched")
        #expect(raw.io.unanswered.count == 1)
        #expect(raw.io.unanswered.first?.error?.status == 400)
        #expect(raw.io.connectionErrors.isEmpty && raw.io.closedAt == nil)
        // nghttp2 reset the stream itself: journaled rejected, naming the code, not as the client's doing.
        #expect(raw.io.unanswered.first?.outcome == .rejected)
        #expect(raw.io.unanswered.first?.error?.reason.contains("FLOW_CONTROL_ERROR") == true)
    }

    @Test("not compliant: HEADERS before our SETTINGS, the DATA after acknowledging them — refused the same way")
    func headersBeforeDataAfterTheAck() {
        let raw = RawClient(settings: Self.stalled)
        raw.send(WireFrame.preface + WireFrame.settings().bytes + Self.post.bytes)
        #expect(raw.appliedWindow == 65_535)
        let answer = raw.send([WireFrame.settingsAck] + WireFrame.body(1, count: 65_535, endStream: true))
        // The ACK shrank the open stream's window by 65,535 (RFC 9113 §6.9.2): every byte after it is too many.
        #expect(answer.filter { $0.stream == 1 }.map(H2Fixture.short) == ["RST_STREAM FLOW_CONTROL_ERROR"])
        #expect(raw.io.requests.isEmpty)
    }
}
