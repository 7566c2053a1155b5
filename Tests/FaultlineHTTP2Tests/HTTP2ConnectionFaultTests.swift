import FaultlineCore
import FaultlineHTTP2
import Testing

/// The faults that end the whole connection under HTTP/2 (reset, empty-reply, no-close-notify, half-close): what
/// reaches the wire before the transport is closed, and how the streams are journaled.
@Suite("HTTP/2 faults on the connection")
struct HTTP2ConnectionFaultTests {
    @Test("reset: RST at once, nothing of the stream written; every stream reset-sent")
    func reset() {
        let h2 = H2Fixture(scripts: ["/slow": Scripts.delayed(100, "slow"), "/reset": Scripts.reset])
        _ = h2.client.request("GET", "/slow")
        let stream = h2.client.request("GET", "/reset")
        h2.pump()
        #expect(h2.io.closedAt == "abortive" && h2.io.closeCount == 1)
        #expect(h2.summary(UInt32(stream)).isEmpty)
        #expect(!h2.wire.contains { $0.type == WireFrame.goaway }, "an RST says nothing more")
        #expect(h2.outcome("/reset") == .resetSent)
        #expect(h2.outcome("/slow") == .resetSent, "the other stream is cut by the same RST")
        h2.io.advance(milliseconds: 100)
        #expect(h2.io.problems.isEmpty, "no timer of a closed connection reaches the transport")
    }

    @Test("empty-reply: FIN after the server's SETTINGS and ACK, no GOAWAY; closed-by-fault")
    func emptyReply() {
        let h2 = H2Fixture(scripts: ["/empty": Scripts.emptyReply])
        _ = h2.client.request("GET", "/empty")
        h2.pump()
        #expect(h2.wire.map(H2Fixture.short) == ["SETTINGS", "SETTINGS ACK"])
        #expect(h2.io.closedAt == "FIN")
        #expect(h2.io.events.last == .close(abortive: false))
        #expect(h2.outcome("/empty") == .closedByFault)
        #expect(h2.io.problems.isEmpty)
    }

    @Test("no-close-notify: HEADERS without content-length and the DATA, then FIN, never END_STREAM")
    func noCloseNotify() {
        let h2 = H2Fixture(scripts: ["/unframed": Scripts.noCloseNotify("the whole body")])
        let stream = h2.client.request("GET", "/unframed")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA 14"])
        #expect(h2.client.text(stream) == "the whole body")
        #expect(!h2.client.headers(stream).contains { $0.name == "content-length" })
        #expect(h2.io.closedAt == "FIN")
        #expect(h2.outcome("/unframed") == .closedByFault)
        #expect(h2.io.problems.isEmpty)
    }

    @Test("half-close: HEADERS and N bytes, then the write side shuts; the client's later frames are still read")
    func halfClose() {
        let h2 = H2Fixture(scripts: ["/half": Scripts.halfClose(after: 4, of: "abcdefgh")])
        let stream = h2.client.request("GET", "/half")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA 4"])
        #expect(h2.io.shutDown && h2.io.closedAt == nil)
        #expect(h2.outcome("/half") == .halfClosed)
        guard let shut = h2.io.events.firstIndex(of: .shutdownWrite) else {
            Issue.record("no shutdownWrite: \(h2.io.events)")
            return
        }
        #expect(!h2.io.events[..<shut].isEmpty && h2.io.events[..<shut].allSatisfy {
            if case .write = $0 { true } else { false }
        })
        // A request after the half-close reaches the server and is journaled, but nothing is written.
        let later = h2.client.request("GET", "/later")
        h2.pump()
        #expect(h2.io.requests.map(\.request.path) == ["/half", "/later"])
        #expect(!h2.io.events[(shut + 1)...].contains { if case .write = $0 { true } else { false } })
        #expect(h2.summary(UInt32(later)).isEmpty)
        h2.connection.peerFinished()
        #expect(h2.io.closedAt == "FIN")
        #expect(h2.outcome("/later") == .clientClosed)
        #expect(h2.io.problems.isEmpty)
    }

    @Test("maxRequests: the connection policy's last response, then a graceful GOAWAY naming every stream so far")
    func maxRequestsEndsWithGoaway() {
        // As the engine scripts it: the answer, then `.endConnection(.maxRequests)` after its `end`.
        var last = Scripts.ok("last")
        last.steps.append(.endConnection(.maxRequests))
        last.policyClose = .maxRequests
        let h2 = H2Fixture(scripts: ["/first": Scripts.ok("first"), "/last": last])
        _ = h2.client.request("GET", "/first")
        h2.pump()
        let stream = h2.client.request("GET", "/last")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA 4 END_STREAM"])
        // After the response's END_STREAM: some clients (python-h2) take no DATA after a GOAWAY, even on a stream
        // it names.
        #expect(h2.wire.map(H2Fixture.short).suffix(3) == ["HEADERS", "DATA 4 END_STREAM", "GOAWAY NO_ERROR last 3"],
                "\(h2.wire.map(H2Fixture.short))")
        #expect(h2.outcome("/first") == .completed && h2.outcome("/last") == .completed)
        #expect(h2.io.closedAt == "FIN", "closed once every stream is done")
        #expect(h2.io.problems.isEmpty)
    }

    @Test("Connection: close means nothing over HTTP/2: the connection stays open")
    func connectionCloseIsIgnored() {
        var answer = Scripts.ok("bye")
        answer.steps.append(.endConnection(.connectionClose))
        let h2 = H2Fixture(scripts: ["/bye": answer])
        let stream = h2.client.request("GET", "/bye")
        h2.pump()
        #expect(h2.summary(UInt32(stream)) == ["HEADERS", "DATA 3 END_STREAM"])
        #expect(!h2.wire.contains { $0.type == WireFrame.goaway })
        #expect(h2.io.closedAt == nil && h2.outcome("/bye") == .completed)
    }
}
