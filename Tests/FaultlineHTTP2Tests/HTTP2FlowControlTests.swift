import FaultlineCore
import FaultlineHTTP2
import Testing

/// The server's DATA under the client's flow control (RFC 9113 §6.9), and the transport's backpressure
/// (`maxPendingOutput`): a client that does not read.
@Suite("HTTP/2 flow control and backpressure")
struct HTTP2FlowControlTests {
    @Test("a client window of 0: no DATA until its WINDOW_UPDATE, then exactly the window's worth, then the rest")
    func zeroClientWindow() {
        let client = NGHTTP2TestClient(
            settings: [SettingsEntry(SettingsEntry.initialWindowSize, 0)], autoWindowUpdate: false)
        let h2 = H2Fixture(client: client, scripts: ["/big": Scripts.bytes(50_000)])
        let stream = client.request("GET", "/big")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS"], "HEADERS are not flow-controlled, DATA is")
        #expect(h2.outcome("/big") == nil)
        client.windowUpdate(stream, 1000)
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA 1000"])
        client.windowUpdate(stream, 100_000)
        h2.pump()
        let data = h2.wire.filter { $0.type == WireFrame.data && $0.stream == UInt32(stream) }
        #expect(data.map(\.length) == [1000, 16_384, 16_384, 16_232])
        #expect(data.last?.isEndStream == true)
        #expect(client.body(stream).count == 50_000)
        #expect(h2.outcome("/big") == .completed)
    }

    @Test("the connection window bounds every stream together: 65,535 bytes until the client's connection update")
    func connectionWindow() {
        let client = NGHTTP2TestClient(
            settings: [SettingsEntry(SettingsEntry.initialWindowSize, 1 << 20)], autoWindowUpdate: false)
        let h2 = H2Fixture(client: client, scripts: ["/a": Scripts.bytes(50_000), "/b": Scripts.bytes(50_000, 0x62)])
        let a = client.request("GET", "/a"), b = client.request("GET", "/b")
        h2.pump()
        #expect(client.body(a).count + client.body(b).count == 65_535)
        #expect(h2.outcome("/a") == nil || h2.outcome("/b") == nil)
        client.windowUpdate(0, 100_000)
        h2.pump()
        #expect(client.body(a).count == 50_000 && client.body(b).count == 50_000)
        #expect(h2.outcome("/a") == .completed && h2.outcome("/b") == .completed)
    }

    @Test("a client that does not read: over maxPendingOutput reading stops; drained resumes it and the flush goes on")
    func outputBackpressure() {
        var settings = HTTP2ConnectionSettings()
        settings.maxPendingOutput = 64 * 1024
        let client = NGHTTP2TestClient(settings: [SettingsEntry(SettingsEntry.initialWindowSize, 1 << 24)])
        let h2 = H2Fixture(settings: settings, client: client, scripts: ["/big": Scripts.bytes(400_000)])
        client.windowUpdate(0, 1 << 24)
        h2.pump()
        h2.io.queuesWrites = true  // from now on nothing the server writes leaves the machine by itself
        let stream = client.request("GET", "/big")
        h2.pump()
        #expect(h2.io.readingEnabled == false)
        #expect(h2.io.events.contains(.reading(false)))
        let first = client.body(stream).count
        #expect(first > 0 && first < 400_000, "the flush stopped at the limit: \(first)")
        #expect(h2.io.pending > settings.maxPendingOutput)
        #expect(h2.outcome("/big") == nil)
        // The client still pings, but the transport does not read it while paused.
        client.ping()
        h2.pump()
        #expect(!h2.wire.contains { $0.type == WireFrame.ping }, "not read while reading is paused")
        // Drained only down to more than half the limit: still paused, nothing more is asked of nghttp2.
        h2.io.pending = 40 * 1024
        h2.connection.drained()
        h2.pump()
        #expect(h2.io.readingEnabled == false)
        // Drained: reading resumes, the flush goes on.
        var rounds = 0
        while h2.outcome("/big") == nil && rounds < 100 {
            rounds += 1
            h2.io.pending = 0
            h2.connection.drained()
            h2.pump()
        }
        #expect(rounds > 1, "the body took several drains")
        #expect(client.body(stream).count == 400_000)
        #expect(h2.outcome("/big") == .completed)
        #expect(h2.io.events.contains(.reading(true)))
        h2.io.pending = 0
        h2.connection.drained()
        h2.pump()
        #expect(h2.io.readingEnabled == true)
        #expect(h2.wire.contains { $0.type == WireFrame.ping && $0.isAck }, "the held PING was read and answered")
    }
}
