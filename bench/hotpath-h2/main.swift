import FaultlineCore
import FaultlineHTTP2

/// The CPU work of one HTTP/2 stream without sockets (h2c prior knowledge, as `h2load` opens it): a HEADERS frame
/// for `GET /item` in, nghttp2 and the codec read it, a Dispatcher-like IO decides and journals it against the
/// benchmark's stub (bench/plain-json.json), the codec submits the response (HEADERS, DATA) and nghttp2 writes it,
/// and the exchange completes as the (fake) output drains at once. Run N streams, one after another on one
/// connection, by `scripts/hotpath.sh`, which counts instructions with callgrind.
@main
struct HotPathH2 {
    static func main() throws {
        let arguments = CommandLine.arguments
        guard arguments.count >= 3, let streams = Int(arguments[2]) else {
            print("usage: hotpath-h2 SCENARIO.json STREAMS")
            return
        }
        let io = BenchH2IO(try BenchDispatcher(scenarioPath: arguments[1]))
        let connection = HTTP2Connection(io: io, settings: HTTP2ConnectionSettings())
        // The preface, empty SETTINGS, the ACK of the server's, and the whole connection window opened, so that
        // the responses' DATA never waits for a WINDOW_UPDATE (each stream has its own 65,535 bytes).
        var start = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        start += frame(type: 0x4, flags: 0, stream: 0, payload: [])
        start += frame(type: 0x4, flags: 0x1, stream: 0, payload: [])
        start += frame(type: 0x8, flags: 0, stream: 0, payload: bigEndian32(0x7FFF_FFFF - 65_535))
        start.withUnsafeBytes { connection.received($0) }
        // HPACK without the dynamic table: :method GET and :scheme http indexed (RFC 7541 Appendix A, 2 and 6),
        // :path and :authority as literals with indexed names (4 and 1), never indexed.
        var block: [UInt8] = [0x82, 0x86, 0x04, 5] + Array("/item".utf8)
        block += [0x01, 15] + Array("127.0.0.1:18081".utf8)
        var request = frame(type: 0x1, flags: 0x5, stream: 1, payload: block)  // END_STREAM | END_HEADERS
        for index in 0 ..< streams {
            let id = UInt32(2 * index + 1)
            request[5] = UInt8(id >> 24); request[6] = UInt8(truncatingIfNeeded: id >> 16)
            request[7] = UInt8(truncatingIfNeeded: id >> 8); request[8] = UInt8(truncatingIfNeeded: id)
            request.withUnsafeBytes { connection.received($0) }
        }
        guard io.core.completed == streams, io.problems.isEmpty else {
            fatalError("completed \(io.core.completed) of \(streams) streams; \(io.problems)")
        }
        print("\(streams) streams, \(io.written) bytes written")
    }

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length), type, flags]
            + bigEndian32(stream) + payload
    }

    static func bigEndian32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8),
         UInt8(truncatingIfNeeded: value)]
    }

}

/// A timer the bench never fires (the streams finish at once, so none falls due).
final class BenchTimer: CancellableTimer {
    func cancel() {}
}

/// What the server's Connection and Dispatcher do for the HTTP/2 codec, minus the sockets and timers.
final class BenchH2IO: HTTP2ConnectionIO {
    let core: BenchDispatcher
    // As in the server's connection: loop-confined state, no run-time exclusivity checks.
    @exclusivity(unchecked) var written = 0
    @exclusivity(unchecked) var tick: UInt64 = 0
    @exclusivity(unchecked) var problems: [String] = []

    init(_ core: BenchDispatcher) { self.core = core }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool { written += bytes.count; return true }
    var pendingOutput: Int { 0 }
    func shutdownWrite() { problems.append("shutdownWrite") }
    func close(abortive: Bool) { problems.append("close") }
    func setReading(_ enabled: Bool) {}
    func schedule(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer { BenchTimer() }
    func now() -> Arrival { tick += 1; return Arrival(wall: 0, monotonicNanos: tick * 1_000_000) }
    /// As the server's Connection: the engine's per-second cache (the fake clock moves on a second every 1000 ticks).
    func dateLine() -> [UInt8] { core.engine.dates.line(atWall: Double(tick) / 1000) }
    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange { core.dispatch(request, context) }
    func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange {
        fatalError("rejected: \(error.reason)")
    }
    func journalUnanswered(
        _ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext, _ outcome: ExchangeOutcome,
        client: HTTP2ClientFrames
    ) { problems.append("unanswered: \(outcome)") }
    func journalIgnoredStream(_ context: RequestContext, afterGoaway lastStream: Int32) { problems.append("ignored") }
    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?) {
        if outcome != .completed { problems.append("stream ended \(outcome)") }
        core.finished(exchange, outcome)
    }
    func clientSent(_ frames: HTTP2ClientFrames, onEntry sequence: Int) {}
    func connectionError(_ reason: String) { problems.append("connection error: \(reason)") }
    func journalHTTP2(_ summary: HTTP2ConnectionSummary?, clientGoaway: HTTP2ClientGoaway?) {}
}
