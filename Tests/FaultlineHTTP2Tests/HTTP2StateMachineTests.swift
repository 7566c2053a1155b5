import Testing
@testable import FaultlineHTTP2

/// The legality tables the codec checks every change against in debug builds (`HTTP2Stream.enter`,
/// `HTTP2Connection.enter`).
@Suite("HTTP/2 state machines")
struct HTTP2StateMachineTests {
    typealias Phase = HTTP2StreamState.Phase

    @Test("stream: a request is dispatched or journaled unanswered; scripts pause and resume; ended is final")
    func streamTransitions() {
        let legal: [(Phase, Phase)] = [
            (.receiving, .running), (.receiving, .unanswered), (.receiving, .receiving), (.running, .waiting),
            (.waiting, .running), (.running, .awaitingScript), (.awaitingScript, .running), (.running, .awaitingRoom),
            (.awaitingRoom, .running), (.running, .hanging), (.hanging, .ended), (.hanging, .done), (.done, .done),
            (.done, .ended), (.waiting, .ended), (.ended, .ended),
        ]
        let illegal: [(Phase, Phase)] = [
            (.unanswered, .running), (.ended, .running), (.done, .running), (.hanging, .running),
            (.receiving, .waiting), (.receiving, .ended), (.unanswered, .ended), (.running, .receiving),
            (.ended, .done), (.waiting, .hanging),
        ]
        for (from, to) in legal { #expect(HTTP2StreamState.isLegal(from: from, to: to), "\(from) → \(to)") }
        for (from, to) in illegal { #expect(!HTTP2StreamState.isLegal(from: from, to: to), "\(from) → \(to)") }
        for phase in Phase.allCases {
            #expect(HTTP2StreamState.isLegal(from: .ended, to: phase) == (phase == .ended), "ended → \(phase)")
            #expect(!HTTP2StreamState.isLegal(from: .unanswered, to: phase), "unanswered → \(phase)")
        }
    }

    @Test("stream: only `running` pulls the script, and only receiving and waiting carry a timer")
    func streamStateFacts() {
        #expect(HTTP2StreamState.running.isPulling)
        #expect(!HTTP2StreamState.hanging.isPulling && !HTTP2StreamState.done.isPulling)
        #expect(HTTP2StreamState.receiving(timer: nil).timer == nil)
        let timer = FakeTimer(deadline: 0, order: 0) {}
        #expect(HTTP2StreamState.waiting(timer: timer).timer === timer)
        #expect(HTTP2StreamState.receiving(timer: timer).phase == .receiving)
    }

    @Test("connection: GOAWAY may follow GOAWAY, the write side shuts once, anything may close, closed is final")
    func connectionTransitions() {
        let legal: [(HTTP2ConnectionState, HTTP2ConnectionState)] = [
            (.open, .goingAway(lastStream: 3)), (.goingAway(lastStream: 0x7fff_ffff), .goingAway(lastStream: 3)),
            (.open, .writeShut(lastStream: nil)), (.goingAway(lastStream: 5), .writeShut(lastStream: 5)),
            (.writeShut(lastStream: nil), .writeShut(lastStream: 7)), (.open, .closed),
            (.goingAway(lastStream: 1), .closed), (.writeShut(lastStream: nil), .closed),
        ]
        let illegal: [(HTTP2ConnectionState, HTTP2ConnectionState)] = [
            (.closed, .open), (.closed, .closed), (.closed, .goingAway(lastStream: 1)), (.goingAway(lastStream: 1), .open),
            (.writeShut(lastStream: nil), .goingAway(lastStream: 1)), (.writeShut(lastStream: 1), .open),
            (.open, .open),
        ]
        for (from, to) in legal { #expect(HTTP2ConnectionState.isLegal(from: from, to: to), "\(from) → \(to)") }
        for (from, to) in illegal { #expect(!HTTP2ConnectionState.isLegal(from: from, to: to), "\(from) → \(to)") }
        #expect(HTTP2ConnectionState.goingAway(lastStream: 9).goawayLastStream == 9)
        #expect(HTTP2ConnectionState.writeShut(lastStream: nil).goawayLastStream == nil)
        #expect(HTTP2ConnectionState.open.goawayLastStream == nil && HTTP2ConnectionState.closed.isClosed)
    }

    @Test("a connection's life on the wire walks the table: GOAWAY, then the final GOAWAY, then closed")
    func connectionStatesDuringAGracefulGoaway() {
        let h2 = H2Fixture(scripts: ["/go": Scripts.goaway(.current, graceful: true), "/slow": Scripts.delayed(100, "s")])
        #expect(h2.connection.state == .open)
        _ = h2.client.request("GET", "/slow")
        _ = h2.client.request("GET", "/go")
        h2.pump()
        #expect(h2.connection.state == .open, "the shutdown notice alone changes nothing")
        h2.advance(50)
        #expect(h2.connection.state == .goingAway(lastStream: 3))
        #expect(h2.io.closedAt == nil, "stream 1 is still under way")
        h2.advance(50)
        #expect(h2.connection.state == .closed && h2.io.closedAt == "FIN")
        #expect(h2.outcome("/slow") == .completed)
    }
}
