import FaultlineCore
import FaultlineHTTP2

// The rules of the h2-frames fuzzer (Fuzz/entries/h2-frames/HTTP2FramesFuzzer.swift has the input format); FuzzRegressionTests
// replays every saved input through them.

/// The rules one input must keep.
enum HTTP2FramesFuzzCheck {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

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
        var choices: [UInt8] = []
        var choiceSeed = input[1]
        let io = FakeHTTP2IO { request, _ in
            let choice: UInt8
            if choices.isEmpty {
                choiceSeed = choiceSeed &* 37 &+ 11
                choice = choiceSeed
            } else {
                choice = choices.removeFirst()
            }
            return HTTP2FramesFuzzCheck.script(choice, isHead: request.head.method == "HEAD")
        }
        var settings = HTTP2ConnectionSettings()
        settings.maxPendingOutput = 64 * 1024
        var connection: HTTP2Connection? = HTTP2Connection(io: io, settings: settings)
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
                if let choice = byte() { choices.append(choice) }
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
