import CNghttp2
import FaultlineCore

/// libFuzzer's entry point for the `h2-frames` fuzzer: the server's HTTP/2 codec (`HTTP2Connection`, compiled
/// into this module by scripts/fuzz.sh) over a fake `HTTP2ConnectionIO`: writes go to memory, timers wait in a
/// list until the fuzzer fires them, and `dispatch` answers each request with an `Exchange` whose script the
/// input chooses (a plain response, a wait then a response, a hang, a body cut by `abortExchange`, RST_STREAM
/// with a code, GOAWAY naming this stream or the one before, gracefully or not, a deferred exchange answered
/// later, as an admin long-poll is, and the connection faults: close, reset, half-close).
///
/// One input: byte 0 chooses the preface (bits 0-1: 3 breaks it) and seeds the piece sizes; the rest is a list of
/// operations, each an opcode byte and its operands:
///   0-2  a frame: type, flags, stream id (small, odd or even), length byte, then that many payload bytes
///   3    a request: HEADERS (HPACK literals without indexing: GET /, scheme, authority, a field), END_STREAM from
///        a bit, on the next client stream id; the following byte chooses its script
///   4    raw bytes: a length byte, then that many bytes
///   5    deliver what was built so far, cut into pieces of random size (1 to 64 bytes, sometimes up to 512)
///   6    fire the earliest pending timer
///   7    drained(); the operand byte sets the transport's pending output (sometimes over the pause threshold)
///   8    answer the oldest deferred exchange (`respond`)
///   9    the transport refuses further writes (the client is gone)
/// At the end: deliver the rest, then peerFinished, peerFailed or teardown (from the last byte); afterwards fire
/// every timer and answer every deferred exchange, which must reach the closed connection's IO no more.
/// A broken rule is a crash, so libFuzzer saves the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2Frames(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let violations = HTTP2FramesFuzzCheck.violations(in: Array(UnsafeBufferPointer(start: data, count: size)))
    guard violations.isEmpty else {
        fatalError("h2-frames: broken rules:\n  " + violations.joined(separator: "\n  "))
    }
    return 0
}

/// The rules one input must keep.
enum HTTP2FramesFuzzCheck {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// A timer of the fake loop.
    final class FakeTimer: CancellableTimer {
        let deadline: Int
        let order: Int
        var action: (() -> Void)?
        init(deadline: Int, order: Int, action: @escaping () -> Void) {
            self.deadline = deadline
            self.order = order
            self.action = action
        }
        func cancel() { action = nil }
    }

    /// The fake transport, loop and Dispatcher.
    final class FakeIO: HTTP2ConnectionIO {
        var output: [UInt8] = []
        var pending = 0
        var refuseWrites = false
        var closedAt: String?
        var closeCount = 0
        var problems: [String] = []
        var timers: [FakeTimer] = []
        var timerOrder = 0
        var clock = 0
        /// Script choices, from the request operations, in order.
        var choices: [UInt8] = []
        var choiceSeed: UInt8 = 0
        var exchanges: [Exchange] = []
        var finishedCount: [ObjectIdentifier: Int] = [:]
        var deferred: [(Exchange, ResponseScript)] = []
        var readingEnabled = true

        private func called(_ name: String) {
            if let closedAt { problems.append("\(name) called after close (\(closedAt))") }
        }

        func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
            called("write")
            output.append(contentsOf: bytes)
            return !refuseWrites
        }
        var pendingOutput: Int {
            called("pendingOutput")
            return pending
        }
        var shutDown = false
        func shutdownWrite() {
            called("shutdownWrite")
            // A half-close comes from a script, after a request, so the server's SETTINGS (queued from the start)
            // and whatever nghttp2 queued before it are on the wire before the FIN.
            if !shutDown && output.isEmpty { problems.append("shutdownWrite before anything was written") }
            shutDown = true
        }
        func close(abortive: Bool) {
            called("close")
            closeCount += 1
            closedAt = abortive ? "abortive" : "FIN"
        }
        func setReading(_ enabled: Bool) {
            called("setReading")
            readingEnabled = enabled
        }
        func schedule(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer {
            called("schedule")
            timerOrder += 1
            let timer = FakeTimer(deadline: clock + max(0, milliseconds), order: timerOrder, action: action)
            timers.append(timer)
            return timer
        }
        func now() -> Arrival {
            called("now")
            return Arrival(wall: 1_700_000_000 + Double(clock) / 1000, monotonicNanos: UInt64(clock) * 1_000_000)
        }
        let dates = HTTPDateCache()
        func dateLine() -> [UInt8] {
            called("dateLine")
            return dates.line(atWall: 1_700_000_000 + Double(clock) / 1000)
        }
        func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange {
            called("dispatch")
            if context.stream == nil { problems.append("a request without its stream") }
            let choice: UInt8
            if choices.isEmpty {
                choiceSeed = choiceSeed &* 37 &+ 11
                choice = choiceSeed
            } else {
                choice = choices.removeFirst()
            }
            let (script, later) = HTTP2FramesFuzzCheck.script(choice, isHead: request.head.method == "HEAD")
            let exchange = Exchange(sequence: exchanges.count, script: script)
            if let later { deferred.append((exchange, later)) }
            exchanges.append(exchange)
            return exchange
        }
        func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange {
            called("reject")
            let head = ResponseHead(status: error.status, headers: HTTPHeaders(), bodyLength: 0, close: false)
            let exchange = Exchange(
                sequence: exchanges.count,
                script: ResponseScript(steps: [.head(head), .end], status: error.status, keepAlive: true))
            exchanges.append(exchange)
            return exchange
        }
        func journalUnanswered(
            _ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext, _ outcome: ExchangeOutcome,
            client: HTTP2ClientFrames
        ) {
            called("journalUnanswered")
        }
        func clientSent(_ frames: HTTP2ClientFrames, onEntry sequence: Int) {
            called("clientSent")
            if frames.isEmpty { problems.append("journaled an empty record of the client's frames") }
            if !exchanges.indices.contains(sequence) { problems.append("the client's frames on an unknown entry") }
        }
        func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?) {
            called("finished")
            let id = ObjectIdentifier(exchange)
            if !exchanges.contains(where: { $0 === exchange }) { problems.append("finished an unknown exchange") }
            finishedCount[id, default: 0] += 1
            if finishedCount[id]! > 1 {
                problems.append("exchange \(exchange.sequence ?? -1) finished \(finishedCount[id]!) times (\(outcome))")
            }
        }
        func connectionError(_ reason: String) { called("connectionError") }
        func journalHTTP2(_ summary: HTTP2ConnectionSummary?, clientGoaway: HTTP2ClientGoaway?) {
            called("journalHTTP2")
        }

        /// Fires the earliest timer that was not cancelled; false when none is left.
        func fireNext() -> Bool {
            timers.removeAll { $0.action == nil }
            guard let next = timers.min(by: { ($0.deadline, $0.order) < ($1.deadline, $1.order) }) else { return false }
            timers.removeAll { $0 === next }
            clock = max(clock, next.deadline)
            let action = next.action
            next.action = nil
            action?()
            return true
        }
    }

    /// The script `choice` picks, and for a deferred exchange the script it is answered with later.
    static func script(_ choice: UInt8, isHead: Bool) -> (ResponseScript?, ResponseScript?) {
        let body = Array(#"{"id":"1","name":"widget"}"#.utf8)
        var headers = HTTPHeaders()
        headers.append(name: "Content-Type", value: "application/json")
        let head = ResponseHead(status: 200, headers: headers, bodyLength: body.count, close: false)
        let plain: [ScriptStep] = [.head(head), .body(body), .end]
        let code = UInt32(choice >> 4) % 14
        switch choice % 15 {
        case 0: return (ResponseScript(steps: plain, status: 200, keepAlive: true), nil)
        case 1: return (ResponseScript(steps: [.wait(milliseconds: Int(choice >> 4))] + plain, status: 200, keepAlive: true), nil)
        case 2: return (ResponseScript(steps: [.head(head), .hang], status: 200, fault: "hang", keepAlive: true), nil)
        case 3:
            return (ResponseScript(
                steps: [.head(head), .body(Array(body[0..<10])), .abortExchange], status: 200, fault: "truncated-body",
                keepAlive: true), nil)
        case 4:
            return (ResponseScript(
                steps: [.head(head), .http2(.resetStream(code: code))], status: 200, fault: "rst-stream",
                keepAlive: true), nil)
        case 5, 6:
            let graceful = choice & 0x10 != 0
            let last: GoawayLastStream = choice % 12 == 5 ? .current : .previous
            return (ResponseScript(
                steps: [.head(head), .body(body), .http2(.goaway(last: last, code: code >> 1, graceful: graceful)), .end],
                status: 200, fault: "goaway", keepAlive: true), nil)
        case 7:
            // An admin long-poll: no script until `respond`.
            return (nil, ResponseScript(steps: plain, status: 200, keepAlive: true))
        case 8:
            // A drip: DATA, wait, DATA, end.
            return (ResponseScript(
                steps: [.head(head), .body(Array(body[0..<5])), .wait(milliseconds: 2), .body(Array(body[5...])),
                        .end], status: 200, keepAlive: true), nil)
        case 9:
            return (ResponseScript(
                steps: [.wait(milliseconds: 1), .head(head), .body(Array(body[0..<4])), .wait(milliseconds: 3),
                        .abortExchange], status: 200, fault: "truncated-body", keepAlive: true), nil)
        case 10:
            let noBody = ResponseHead(status: 204, headers: HTTPHeaders(), bodyLength: 0, close: false)
            return (ResponseScript(steps: [.head(noBody), .end], status: 204, keepAlive: true), nil)
        case 12, 13, 14:
            // The connection faults: FIN after what was written, RST, half-close.
            let abort: ConnectionAbort = choice % 15 == 12 ? .close : choice % 15 == 13 ? .reset : .shutdownWrite
            return (ResponseScript(
                steps: [.head(head), .body(Array(body[0..<6])), .abortConnection(abort)], status: 200,
                fault: "connection", keepAlive: false), nil)
        default:
            // A bigger body, in several DATA frames past the default window.
            let big = ResponseHead(status: 200, headers: HTTPHeaders(), bodyLength: 70_000, close: false)
            return (ResponseScript(
                steps: [.head(big), .body([UInt8](repeating: 0x61, count: 40_000)),
                        .body([UInt8](repeating: 0x62, count: 30_000)), .end], status: 200, keepAlive: true), nil)
        }
    }

    /// A frame header: 24-bit length, type, flags, 31-bit stream id.
    static func frameHeader(length: Int, type: UInt8, flags: UInt8, stream: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length),
         type, flags, UInt8(truncatingIfNeeded: stream >> 24) & 0x7f, UInt8(truncatingIfNeeded: stream >> 16),
         UInt8(truncatingIfNeeded: stream >> 8), UInt8(truncatingIfNeeded: stream)]
    }

    /// An HPACK literal header field without indexing, new name (RFC 7541 §6.2.2), for short strings.
    static func literal(_ name: String, _ value: String) -> [UInt8] {
        let name = Array(name.utf8), value = Array(value.utf8)
        return [0x00, UInt8(name.count)] + name + [UInt8(value.count)] + value
    }

    /// A GET's header block; `variant` changes its method and path.
    static func requestBlock(_ variant: UInt8) -> [UInt8] {
        let methods = ["GET", "POST", "HEAD", "DELETE"]
        let paths = ["/", "/item", "/a?b=c", "*"]
        return literal(":method", methods[Int(variant & 3)]) + literal(":scheme", "http")
            + literal(":path", paths[Int(variant >> 2 & 3)]) + literal(":authority", "localhost")
            + (variant & 0x10 != 0 ? literal("x-fuzz", "1") : [])
    }

    static func violations(in input: [UInt8]) -> [String] {
        guard input.count >= 2 else { return [] }
        let io = FakeIO()
        var settings = HTTP2ConnectionSettings()
        settings.maxPendingOutput = 64 * 1024
        var connection: HTTP2Connection? = HTTP2Connection(io: io, settings: settings)
        io.choiceSeed = input[1]
        var random = UInt64(input[0]) &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(input[1])
        func nextRandom() -> UInt64 {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return random >> 33
        }

        var wire: [UInt8] = []
        switch input[0] & 3 {
        case 3:
            var broken = preface
            broken[Int(input[1]) % broken.count] ^= 0x20
            wire += broken
        default:
            wire += preface
        }
        // The client's SETTINGS, unless the preface is all there is (nghttp2 wants SETTINGS first).
        if input[0] & 3 != 2 { wire += frameHeader(length: 0, type: 4, flags: 0, stream: 0) }

        var nextStream: UInt32 = 1
        let open = { io.closedAt == nil }
        func deliver() {
            var offset = 0
            while offset < wire.count, open() {
                let limit = nextRandom() % 8 == 0 ? 512 : 64
                let length = min(wire.count - offset, 1 + Int(nextRandom() % UInt64(limit)))
                wire[offset..<offset + length].withUnsafeBytes { connection?.received($0) }
                offset += length
            }
            wire = []
        }
        var problems: [String] = []
        func checkExchanges(_ when: String) {
            for exchange in io.exchanges {
                let count = io.finishedCount[ObjectIdentifier(exchange), default: 0]
                if !open() && count != 1 {
                    problems.append("\(when): exchange \(exchange.sequence ?? -1) finished \(count) times, the connection closed")
                }
            }
        }

        var index = 2
        func byte() -> UInt8? {
            guard index < input.count else { return nil }
            defer { index += 1 }
            return input[index]
        }
        var operations = 0
        while let opcode = byte(), open() {
            operations += 1
            switch opcode % 10 {
            case 0, 1, 2:
                guard let type = byte(), let flags = byte(), let streamByte = byte(), let lengthByte = byte() else { break }
                let length = min(Int(lengthByte), input.count - index)
                let payload = Array(input[index..<index + length])
                index += length
                // Mostly the frame types RFC 9113 defines; sometimes an unknown one.
                let frameType = type < 240 ? type % 10 : type
                let stream = streamByte & 0x80 != 0 ? UInt32(streamByte & 0x7f) : UInt32(streamByte % 8)
                wire += frameHeader(length: length, type: frameType, flags: flags, stream: stream) + payload
            case 3:
                guard let variant = byte() else { break }
                if let choice = byte() { io.choices.append(choice) }
                let block = requestBlock(variant)
                let endStream: UInt8 = variant & 0x20 != 0 ? 0 : 0x1
                wire += frameHeader(length: block.count, type: 1, flags: 0x4 | endStream, stream: nextStream) + block
                if endStream == 0 {
                    // A body in one DATA frame that ends the stream.
                    let body = Array("{\"a\":1}".utf8)
                    wire += frameHeader(length: body.count, type: 0, flags: 0x1, stream: nextStream) + body
                }
                nextStream += 2
            case 4:
                guard let lengthByte = byte() else { break }
                let length = min(Int(lengthByte), input.count - index)
                wire += input[index..<index + length]
                index += length
            case 5:
                deliver()
            case 6:
                deliver()
                _ = io.fireNext()
            case 7:
                let level = byte() ?? 0
                io.pending = level & 0x80 != 0 ? 100 * 1024 : Int(level) * 16
                if open() { connection?.drained() }
            case 8:
                if !io.deferred.isEmpty {
                    let (exchange, script) = io.deferred.removeFirst()
                    exchange.respond(script)
                }
            default:
                io.refuseWrites = true
            }
            if operations > 4096 { break }
            checkExchanges("after operation \(operations)")
        }
        deliver()
        // A few timers, as the loop would fire them while the connection is open.
        for _ in 0..<4 where open() { _ = io.fireNext() }
        if open() {
            io.pending = 0
            connection?.drained()
        }
        if open() {
            switch input.last! % 3 {
            case 0: connection?.peerFinished()
            case 1: connection?.peerFailed()
            default: connection?.teardown(.cancelled)
            }
        }
        if open() { problems.append("the connection is open after the end of its input") }
        checkExchanges("at the end")
        if io.closeCount != 1 { problems.append("close called \(io.closeCount) times") }
        // After the close: what the loop and the Dispatcher may still do must not reach the IO.
        for (exchange, script) in io.deferred { exchange.respond(script) }
        var fired = 0
        while io.fireNext(), fired < 1000 { fired += 1 }
        connection = nil
        while io.fireNext(), fired < 2000 { fired += 1 }
        checkExchanges("after the timers")
        problems += io.problems

        // The output: frames from the server's SETTINGS on (no raw steps are scripted here).
        let out = io.output
        if !out.isEmpty {
            if out.count < 9 || out[3] != 4 || out[4] & 1 != 0 || out[5..<9] != [0, 0, 0, 0]
                || (Int(out[0]) << 16 | Int(out[1]) << 8 | Int(out[2])) % 6 != 0 {
                problems.append("the output does not start with the server's SETTINGS: \(Array(out.prefix(9)))")
            }
            var offset = 0
            while offset + 9 <= out.count {
                offset += 9 + (Int(out[offset]) << 16 | Int(out[offset + 1]) << 8 | Int(out[offset + 2]))
            }
            if offset != out.count { problems.append("the output ends inside a frame (\(offset) of \(out.count))") }
        }
        return problems
    }
}
