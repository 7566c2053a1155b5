import FaultlineCore
import FaultlineHTTP2
import Testing

/// One read that begins many streams is given to nghttp2 over several loop turns (`streamsPerTurn`), with
/// reading off in between, so a rapid-reset burst cannot hold the loop; nothing it carried is lost.
@Suite("HTTP/2: a read's work is bounded per loop turn")
struct HTTP2TurnBudgetTests {
    /// The client preface, an empty SETTINGS, then `count` pairs of HEADERS (GET /r, END_STREAM) and RST_STREAM
    /// CANCEL: a rapid-reset burst as one read.
    static func rapidReset(_ count: Int) -> [UInt8] {
        func frame(_ type: UInt8, _ flags: UInt8, _ stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
            let length = UInt32(payload.count)
            return [UInt8(length >> 16), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags,
                    UInt8(stream >> 24), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
                + payload
        }
        // HPACK: :method GET, :scheme http, :path literal "/r", :authority literal "x".
        let block: [UInt8] = [0x82, 0x86, 0x44, 0x02] + Array("/r".utf8) + [0x41, 0x01] + Array("x".utf8)
        var bytes = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + frame(0x4, 0, 0, [])
        for index in 0..<count {
            let stream = UInt32(2 * index + 1)
            bytes += frame(0x1, 0x5, stream, block) + frame(0x3, 0, stream, [0, 0, 0, 8])
        }
        return bytes
    }

    static func handled(_ io: FakeHTTP2IO) -> Int { io.requests.count + io.unanswered.count }

    @Test("500 streams in one read: about streamsPerTurn a turn, reading off until the last; all journaled in order")
    func aRapidResetBurstIsSpreadOverTurns() {
        let h2 = H2Fixture(scripts: ["/r": Scripts.delayed(60_000, "late")])
        let burst = Self.rapidReset(500)
        #expect(burst.count < 65_536, "one read of the loop's scratch buffer")
        burst.withUnsafeBytes { h2.connection.received($0) }
        var turns = [Self.handled(h2.io)]
        #expect(!h2.io.readingEnabled)
        while h2.io.timers.contains(where: { $0.action != nil && $0.deadline <= h2.io.clock }) {
            _ = h2.io.fireNext()
            turns.append(Self.handled(h2.io) - turns.reduce(0, +))
        }
        #expect(turns.reduce(0, +) == 500, "\(turns)")
        #expect(turns.count >= 500 / (HTTP2Connection.streamsPerTurn * 2), "\(turns)")
        #expect(turns.allSatisfy { $0 <= HTTP2Connection.streamsPerTurn * 2 }, "\(turns)")
        #expect(h2.io.readingEnabled, "reading is back once the backlog is gone")
        let streams = h2.io.requests.map { $0.context.stream ?? 0 }
        #expect(streams == streams.sorted() && streams.count == 500, "in the order they were sent")
        #expect(h2.io.requests.indices.allSatisfy { h2.io.outcomes[h2.io.exchanges[$0].sequence!] == .clientClosed })
        #expect(h2.io.problems.isEmpty, "\(h2.io.problems)")
    }

    @Test("the client leaves with a backlog: every stream it sent is still journaled before the close")
    func aBacklogIsJournaledWhenTheClientLeaves() {
        let h2 = H2Fixture(scripts: ["/r": Scripts.delayed(60_000, "late")])
        Self.rapidReset(300).withUnsafeBytes { h2.connection.received($0) }
        #expect(Self.handled(h2.io) < 300)
        h2.connection.peerFailed()
        #expect(Self.handled(h2.io) == 300)
        #expect(h2.io.closedAt == "abortive")
        #expect(h2.io.problems.isEmpty, "\(h2.io.problems)")
    }

    @Test("a read that begins few streams is given to nghttp2 at once: no timer, reading stays on")
    func anOrdinaryReadIsNotSliced() {
        let h2 = H2Fixture()
        Self.rapidReset(20).withUnsafeBytes { h2.connection.received($0) }
        #expect(Self.handled(h2.io) == 20)
        #expect(h2.io.readingEnabled)
    }
}
