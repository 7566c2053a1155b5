import FaultlineCore

/// What must hold for any bytes a client sends after a WebSocket upgrade: the contract checks of the `websocket`
/// fuzzer (Fuzz/entries/websocket/WebSocketFuzzer.swift), which compiles this file, and of FuzzRegressionTests. The first input byte
/// picks how the rest is cut into reads and whether the clock moves between them; the session plays a script
/// with every kind of step but faults, so its output must be well-formed server frames.
///
/// No `import Testing` here: the fuzzer is built by swiftc alone, without the test libraries.
enum WebSocketFuzzCheck {
    final class IO: WebSocketSessionIO {
        var written: [UInt8] = []
        var timers: [WebSocketTimer: Int] = [:]
        var clock = 0
        var frames: [WebSocketFrameRecord] = []
        var ends = 0
        var closes = 0
        var callsAfterClose = 0
        var pendingOutput = 0
        weak var session: WebSocketSession?

        func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
            if closes > 0 { callsAfterClose += 1 }
            written += bytes
            return true
        }
        func close(abortive: Bool) { closes += 1 }
        func startTimer(_ timer: WebSocketTimer, milliseconds: Int) {
            if closes > 0 { callsAfterClose += 1 }
            timers[timer] = clock + milliseconds
        }
        func cancelTimer(_ timer: WebSocketTimer) { timers[timer] = nil }
        func nowNanos() -> UInt64 { UInt64(clock) * 1_000_000 }
        func journal(_ frame: WebSocketFrameRecord) { frames.append(frame) }
        func ended(_ end: WebSocketEnd) { ends += 1 }
        func faultStarted(_ name: String) {}

        func advance(_ milliseconds: Int) {
            let end = clock + milliseconds
            while let (timer, due) = timers.filter({ $0.value <= end }).min(by: { $0.value < $1.value }) {
                clock = due
                timers[timer] = nil
                session?.timerFired(timer)
            }
            clock = end
        }
    }

    static let script: [WebSocketStep] = [
        .send(.text("hello"), everyMilliseconds: nil, times: 1), .receive(.contains("sub"), timeoutMilliseconds: 5000),
        .echo(count: nil), .ping(Array("hb".utf8)), .send(.generated(size: 300), everyMilliseconds: 100, times: 3),
        .wait(milliseconds: 200), .close(code: 1000, reason: "done"),
    ]

    static func violations(in input: [UInt8]) -> [String] {
        guard let control = input.first else { return [] }
        let bytes = Array(input.dropFirst())
        let io = IO()
        let plan = WebSocketSessionPlan(script: script, maxMessageBytes: 512, ignorePings: control & 0x40 != 0, seed: 7, subprotocol: nil)
        let session = WebSocketSession(io: io, plan: plan)
        io.session = session
        session.start(early: [])
        let piece = Int(control & 0x0F) + 1
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + piece, bytes.count)
            Array(bytes[offset..<end]).withUnsafeBytes { session.received($0) }
            if control & 0x20 != 0 { io.advance(60) }
            offset = end
        }
        if control & 0x80 != 0 { session.peerFinished() }
        io.advance(10_000)
        var problems: [String] = []
        if io.ends > 1 { problems.append("the session ended \(io.ends) times") }
        if io.closes > 1 { problems.append("the transport was closed \(io.closes) times") }
        if (io.ends == 1) != (io.closes == 1) { problems.append("ended \(io.ends) time(s) but closed \(io.closes) time(s)") }
        if io.callsAfterClose > 0 { problems.append("\(io.callsAfterClose) write(s) or timer(s) after the close") }
        problems += outputViolations(io.written)
        let out = io.frames.filter { $0.direction == .toClient }.count
        let parsedOut = serverFrames(io.written)?.count ?? -1
        if parsedOut != out { problems.append("\(out) frames journaled as sent but \(parsedOut) written") }
        return problems
    }

    /// The server frames in `bytes`, or nil when they do not parse as whole frames.
    static func serverFrames(_ bytes: [UInt8]) -> [(opcode: UInt8, fin: Bool, payload: [UInt8])]? {
        var frames: [(UInt8, Bool, [UInt8])] = []
        var index = 0
        while index < bytes.count {
            guard index + 2 <= bytes.count else { return nil }
            let first = bytes[index], second = bytes[index + 1]
            var length = Int(second & 0x7F)
            var header = 2
            if length == 126 {
                guard index + 4 <= bytes.count else { return nil }
                length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
                header = 4
            } else if length == 127 {
                guard index + 10 <= bytes.count else { return nil }
                length = (2..<10).reduce(0) { $0 << 8 | Int(bytes[index + $1]) }
                header = 10
            }
            guard second & 0x80 == 0, index + header + length <= bytes.count else { return nil }
            frames.append((first & 0x0F, first & 0x80 != 0, Array(bytes[(index + header)..<(index + header + length)])))
            index += header + length
        }
        return frames
    }

    /// Whole, unmasked frames with known opcodes; control frames final and at most 125 bytes; nothing after a
    /// close frame; a close frame's code one that may be sent.
    private static func outputViolations(_ bytes: [UInt8]) -> [String] {
        guard let frames = serverFrames(bytes) else { return ["the server's output is not whole unmasked frames"] }
        var problems: [String] = []
        var closed = false
        for frame in frames {
            if closed { problems.append("a frame after the close frame") }
            guard [0x1, 0x2, 0x8, 0x9, 0xA].contains(frame.opcode) else {
                problems.append("opcode \(frame.opcode) sent")
                continue
            }
            if frame.opcode >= 0x8 && (frame.payload.count > 125 || !frame.fin) { problems.append("a bad control frame") }
            if frame.opcode == 0x8 {
                closed = true
                if frame.payload.count == 1 { problems.append("a one-byte close payload") }
                if frame.payload.count >= 2 {
                    let code = Int(frame.payload[0]) << 8 | Int(frame.payload[1])
                    if !WebSocketFrameParser.isValidCloseCode(code) { problems.append("close code \(code) sent") }
                }
            }
        }
        return problems
    }
}
