import FaultlineCore

/// What must hold for a WebSocket session whatever the client sends and whatever the network does meanwhile: the
/// contract checks of the `websocket-network` fuzzer (Fuzz/entries/websocket-network/WebSocketNetworkFuzzer.swift),
/// which compiles this file, and of FuzzRegressionTests. The soak cannot reach these interleavings: a client's
/// bytes cut anywhere, output that backs up and drains at any moment (a frozen or shaped network, a client that
/// does not read), and the connection dropped, finished or torn down between any two of them.
///
/// The input is a program. Its first byte: bit 0 ignore pings, bit 1 a script that streams a large message. Then
/// ops, one byte each (`op << 5 | argument`):
/// - 0–2: the client sends the next argument × 8 + 1 bytes of the input (held, as a kernel would, while the
///   session has reading off; delivered when it turns it on);
/// - 3: the clock moves argument × 20 ms;
/// - 4: the network stops taking output (a freeze, a slow link, a client that does not read);
/// - 5: the output drains: the kernel takes it all, and the session hears `drained`;
/// - 6: the network drops the connection (RST when the argument is odd);
/// - 7: the client's FIN (argument even), its connection failing (odd), or the server's teardown (31).
/// At the end the output drains and the clock runs on 10 s.
///
/// No `import Testing` here: the fuzzer is built by swiftc alone, without the test libraries.
enum WebSocketNetworkFuzzCheck {
    final class IO: WebSocketSessionIO {
        /// What the session wrote: taken by the "kernel", and not yet.
        var taken: [UInt8] = []
        var unsent: [UInt8] = []
        var congested = false
        var reading = true
        var timers: [WebSocketTimer: Int] = [:]
        var clock = 0
        var journaledOut = 0
        var ends = 0
        var closes = 0
        var callsAfterClose = 0
        var peakUnsent = 0
        weak var session: WebSocketSession?

        var pendingOutput: Int { unsent.count }

        func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
            if closes > 0 { callsAfterClose += 1 }
            if congested || !unsent.isEmpty { unsent += bytes } else { taken += bytes }
            peakUnsent = max(peakUnsent, (session?.unsentOutput ?? unsent.count))
            return true
        }
        func close(abortive: Bool) { closes += 1 }
        func setReading(_ enabled: Bool) { reading = enabled }
        func startTimer(_ timer: WebSocketTimer, milliseconds: Int) {
            if closes > 0 { callsAfterClose += 1 }
            timers[timer] = clock + milliseconds
        }
        func cancelTimer(_ timer: WebSocketTimer) { timers[timer] = nil }
        func nowNanos() -> UInt64 { UInt64(clock) * 1_000_000 }
        func journal(_ frame: WebSocketFrameRecord) { if frame.direction == .toClient { journaledOut += 1 } }
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

        func drain() {
            congested = false
            guard !unsent.isEmpty else { return }
            taken += unsent
            unsent = []
            if closes == 0 { session?.drained() }
        }
    }

    static let echoScript: [WebSocketStep] = [
        .send(.text("hello"), everyMilliseconds: nil, times: 1), .echo(count: nil),
    ]
    static let streamingScript: [WebSocketStep] = [
        .send(.generated(size: 100_000), everyMilliseconds: 50, times: 3), .echo(count: nil),
    ]

    /// One read a client's op delivers: at most 32 × 8 + 1 bytes.
    static let maxRead = 257

    static func violations(in input: [UInt8]) -> [String] {
        guard let control = input.first else { return [] }
        let io = IO()
        let plan = WebSocketSessionPlan(
            script: control & 0x02 != 0 ? streamingScript : echoScript, maxMessageBytes: 4096,
            ignorePings: control & 0x01 != 0, seed: 7, subprotocol: nil)
        let session = WebSocketSession(io: io, plan: plan)
        io.session = session
        session.start(early: [])
        var held: [UInt8] = []  // sent by the client, not yet read (reading off)
        var index = 1
        var gone = false  // the network dropped it, or it ended
        var writesAfterDrop = 0
        func deliver() {
            while io.reading, io.closes == 0, !held.isEmpty {
                let count = min(held.count, maxRead)
                let read = Array(held.prefix(count))
                held.removeFirst(count)
                read.withUnsafeBytes { session.received($0) }
            }
        }
        while index < input.count {
            let op = input[index] >> 5, argument = Int(input[index] & 0x1F)
            index += 1
            let before = io.taken.count + io.unsent.count
            switch op {
            case 0, 1, 2:
                let count = min(argument * 8 + 1, input.count - index)
                held += input[index..<(index + count)]
                index += count
                if !gone { deliver() }
            case 3: io.advance(argument * 20)
            case 4: io.congested = true
            case 5:
                io.drain()
                if !gone { deliver() }
            case 6:
                if !gone { session.dropped(abortive: argument & 1 != 0) }
                gone = true
            default:
                if argument == 31 { session.teardown() } else if argument & 1 == 0 { session.peerFinished() } else { session.peerFailed() }
            }
            if gone && op != 6 && io.taken.count + io.unsent.count > before { writesAfterDrop += 1 }
            if io.closes > 0 { gone = true }
        }
        // The network recovers: output drains and the clock runs until the session has read what it was sent.
        for _ in 0..<10_000 {
            io.drain()
            if !gone { deliver() }
            io.advance(100)
            if io.closes > 0 { gone = true }
            if gone || (held.isEmpty && io.timers[.slice] == nil && io.unsent.isEmpty) { break }
        }
        io.advance(10_000)
        io.drain()

        var problems: [String] = []
        if io.ends > 1 { problems.append("the session ended \(io.ends) times") }
        if io.closes > 1 { problems.append("the transport was closed \(io.closes) times") }
        if (io.ends == 1) != (io.closes == 1) { problems.append("ended \(io.ends) time(s) but closed \(io.closes) time(s)") }
        if io.callsAfterClose > 0 { problems.append("\(io.callsAfterClose) write(s) or timer(s) after the close") }
        if writesAfterDrop > 0 { problems.append("\(writesAfterDrop) op(s) wrote after the connection was gone") }
        // Bounded: past maxPendingOutput the session stops reading, so what it holds unsent is at most the limit,
        // one read's answers (a pong or an echo per frame: no more than the read plus a header per frame), one
        // piece of a large message and a close frame.
        let bound = WebSocketSession.maxPendingOutput + maxRead * 15 + 64 * 1024 + 256 + 4096 + 14
        if io.peakUnsent > bound { problems.append("\(io.peakUnsent) bytes unsent at once, over \(bound)") }
        // Live: once the output has drained and the clock has run on, a session still open reads again.
        if io.closes == 0 && !io.reading { problems.append("reading left off with the output drained") }
        if io.closes == 0 && !held.isEmpty { problems.append("\(held.count) client bytes never read") }
        // Whole unmasked frames, one per journaled frame; only a connection's end may cut the last (a large
        // message going out when it was dropped).
        switch frameCount(io.taken + io.unsent) {
        case nil:
            problems.append("the server's output is not unmasked frames")
        case let (count, cut)?:
            if cut && io.closes == 0 { problems.append("a frame cut short on a connection still open") }
            if count != io.journaledOut { problems.append("\(io.journaledOut) frames journaled as sent but \(count) written") }
        }
        return problems
    }

    /// How many server frames `bytes` hold, the last maybe cut short; nil when a header is masked.
    static func frameCount(_ bytes: [UInt8]) -> (count: Int, cut: Bool)? {
        var index = 0, count = 0
        while index < bytes.count {
            guard index + 2 <= bytes.count else { return (count + 1, true) }
            let second = bytes[index + 1]
            guard second & 0x80 == 0 else { return nil }
            var length = Int(second & 0x7F), header = 2
            if length == 126 {
                guard index + 4 <= bytes.count else { return (count + 1, true) }
                length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
                header = 4
            } else if length == 127 {
                guard index + 10 <= bytes.count else { return (count + 1, true) }
                length = (2..<10).reduce(0) { $0 << 8 | Int(bytes[index + $1]) }
                header = 10
            }
            count += 1
            if index + header + length > bytes.count { return (count, true) }
            index += header + length
        }
        return (count, false)
    }
}
