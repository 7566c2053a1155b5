import CNghttp2
import FaultlineCore
import Testing
@testable import FaultlineHTTP2

/// The HTTP/2 codec driven in-process by a real nghttp2 client on memory, on a fake transport and clock: how a
/// connection starts, and plain answers (ARCHITECTURE §4a).
@Suite("HTTP/2 connection: start and plain answers")
struct HTTP2ConnectionTests {
    static let date = "Tue, 14 Nov 2023 22:13:20 GMT"

    /// The server's local setting as nghttp2 applies it (once the client has acknowledged our SETTINGS).
    static func local(_ connection: HTTP2Connection, _ id: nghttp2_settings_id) -> UInt32 {
        nghttp2_session_get_local_settings(connection.session, id)
    }

    @Test("prior knowledge: the server's SETTINGS come first, with the values it announces; the client's are acknowledged")
    func priorKnowledgeStart() {
        var settings = HTTP2ConnectionSettings()
        settings.maxConcurrentStreams = 7
        settings.initialWindowSize = 1000
        settings.maxFrameSize = 20_000
        settings.headerTableSize = 2048
        let h2 = H2Fixture(
            settings: settings, client: NGHTTP2TestClient(settings: [SettingsEntry(SettingsEntry.maxConcurrentStreams, 50)]))
        #expect(h2.io.output.isEmpty, "nothing is written before the client speaks")
        h2.pump()
        #expect(h2.wire.map(H2Fixture.short) == ["SETTINGS", "SETTINGS ACK"])
        let first = h2.wire.first
        #expect(first?.type == WireFrame.settings && first?.flags == 0 && first?.stream == 0)
        #expect(first?.settingsEntries == [
            SettingsEntry(SettingsEntry.maxConcurrentStreams, 7), SettingsEntry(SettingsEntry.initialWindowSize, 1000),
            SettingsEntry(SettingsEntry.maxFrameSize, 20_000), SettingsEntry(SettingsEntry.headerTableSize, 2048),
        ])
        #expect(h2.client.serverSettings == first?.settingsEntries, "nghttp2 as client read the same")
        // The client acknowledged ours (nghttp2 acks on receipt), so the server now applies them.
        #expect(Self.local(h2.connection, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE) == 1000)
        #expect(Self.local(h2.connection, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS) == 7)
        #expect(h2.io.requests.isEmpty && h2.io.connectionErrors.isEmpty && h2.io.closedAt == nil)
        #expect(h2.io.problems.isEmpty)
    }

    @Test("ALPN start: a preface split across TLS records gets the server's SETTINGS at its first piece")
    func alpnStart() {
        // Over TLS with ALPN h2 the codec is given the same bytes, as the records decrypt: here the preface in
        // two pieces, then the client's SETTINGS.
        let io = FakeHTTP2IO { _, _ in (Scripts.ok("ok"), nil) }
        let connection = HTTP2Connection(io: io, settings: HTTP2ConnectionSettings())
        #expect(io.output.isEmpty)
        Array(WireFrame.preface.prefix(10)).withUnsafeBytes { connection.received($0) }
        let first = WireFrame.parse(io.output)
        #expect(first.map(H2Fixture.short) == ["SETTINGS"], "our SETTINGS before the client's preface is complete")
        #expect(first.first?.settingsEntries.map(\.id) == [3, 4, 5, 1])
        io.output = []
        (Array(WireFrame.preface.dropFirst(10)) + WireFrame.settings().bytes).withUnsafeBytes { connection.received($0) }
        #expect(WireFrame.parse(io.output).map(H2Fixture.short) == ["SETTINGS ACK"])
        #expect(io.connectionErrors.isEmpty && io.closedAt == nil && io.problems.isEmpty)
    }

    @Test("a bad preface is answered with SETTINGS and GOAWAY PROTOCOL_ERROR, journaled as a connection error")
    func badPreface() {
        let io = FakeHTTP2IO { _, _ in (Scripts.ok("ok"), nil) }
        let connection = HTTP2Connection(io: io, settings: HTTP2ConnectionSettings())
        Array("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n".utf8).withUnsafeBytes { connection.received($0) }
        let frames = WireFrame.parse(io.output)
        #expect(frames.map(H2Fixture.short) == ["SETTINGS", "GOAWAY PROTOCOL_ERROR last 0"])
        #expect(io.connectionErrors.count == 1)
        #expect(io.connectionErrors.first?.hasPrefix("PROTOCOL_ERROR") == true, "\(io.connectionErrors)")
        #expect(io.closedAt == "FIN" && io.closeCount == 1)
        #expect(io.problems.isEmpty)
    }

    @Test("a GET is answered 200: :status, date, lower-case names, content-length, no connection fields; completed")
    func plainGet() {
        let script = Scripts.ok(
            "hello", headers: [("Content-Type", "text/plain"), ("X-Trace-ID", "abc"), ("Connection", "keep-alive"),
                               ("Keep-Alive", "timeout=5"), ("Upgrade", "h2c"), ("Proxy-Connection", "x")])
        let h2 = H2Fixture(scripts: ["/hello": script])
        let stream = h2.client.request("GET", "/hello", headers: [("accept", "text/plain")])
        h2.pump()
        let fields = h2.client.headers(stream).map { "\($0.name): \($0.value)" }
        #expect(fields == [":status: 200", "date: \(Self.date)", "content-type: text/plain", "x-trace-id: abc",
                           "content-length: 5"])
        #expect(h2.client.text(stream) == "hello")
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA 5 END_STREAM"])
        #expect(h2.client.closed[stream] == 0)
        #expect(h2.outcome("/hello") == .completed)
        // What the Dispatcher was given: the request as it arrived, with its stream.
        let (request, context) = h2.io.requests[0]
        #expect(request.method == "GET" && request.path == "/hello" && request.head.version == .http2)
        #expect(request.head.headers["accept"] == "text/plain" && request.head.headers[":authority"] == "localhost")
        #expect(context.stream == Int(stream) && context.indexOnConnection == 0)
        // The exchange counts its frames' bytes, headers included.
        let sent = h2.wire.filter { $0.stream == UInt32(stream) }.reduce(0) { $0 + 9 + $1.length }
        #expect(h2.io.exchanges[0].bytesWritten == sent)
        #expect(h2.io.problems.isEmpty && h2.io.closedAt == nil)
    }

    @Test("a 204 without body is one HEADERS frame with END_STREAM and no content-length")
    func noContent() {
        let h2 = H2Fixture(scripts: ["/none": Scripts.ok("", status: 204)])
        let stream = h2.client.request("DELETE", "/none")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS END_STREAM"])
        #expect(h2.client.headers(stream).map(\.name) == [":status", "date", "content-type"])
        #expect(h2.outcome("/none") == .completed)
    }

    @Test("a POST's body reaches the Dispatcher whole, in several DATA frames")
    func postBody() {
        let h2 = H2Fixture()
        let upload = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        let stream = h2.client.request("POST", "/up", headers: [("content-type", "application/octet-stream")],
                                       body: upload)
        h2.pump()
        #expect(h2.io.requests.count == 1)
        #expect(h2.io.requests.first?.request.body == upload)
        #expect(h2.io.requests.first?.request.method == "POST")
        #expect(h2.client.text(stream) == "ok" && h2.outcome("/up") == .completed)
    }

    @Test("five streams in one write: the one that waits holds up none of the others")
    func concurrentStreams() {
        let h2 = H2Fixture(scripts: ["/slow": Scripts.delayed(100, "slow")])
        let ids = ["/a", "/slow", "/b", "/c", "/d"].map { h2.client.request("GET", $0) }
        h2.pump()
        #expect(h2.io.requests.count == 5)
        for (index, id) in ids.enumerated() where index != 1 {
            #expect(h2.client.text(id) == "ok", "stream \(id)")
            #expect(h2.client.ended(id))
        }
        #expect(["/a", "/b", "/c", "/d"].map(h2.outcome) == [.completed, .completed, .completed, .completed])
        #expect(h2.summary(UInt32(ids[1])).isEmpty, "the waiting stream has sent nothing yet")
        #expect(h2.outcome("/slow") == nil)
        h2.advance(99)
        #expect(h2.summary(UInt32(ids[1])).isEmpty)
        h2.advance(1)
        #expect(h2.client.text(ids[1]) == "slow")
        #expect(h2.summary(UInt32(ids[1])) == ["HEADERS", "DATA 4 END_STREAM"])
        #expect(h2.outcome("/slow") == .completed)
        #expect(h2.io.problems.isEmpty)
    }
}
