/// The timers a WebSocket session runs, each for one purpose.
package enum WebSocketTimer: Int, Sendable, CaseIterable {
    /// The script's next step: a wait, the next repeated message, the next fragment.
    case script
    /// A `receive` step's timeout.
    case receive
    /// After our close frame: how long to wait for the client's before closing anyway (RFC 6455 §7.1.1).
    case closing
    /// The rest of a read, after a slice of its frames (`WebSocketSession.framesPerSlice`): 0 ms, so that other
    /// connections' events run between slices.
    case slice
}

/// What a WebSocket session needs from the world (ARCHITECTURE §4c). `FakeWebSocketIO` in the tests records the
/// calls on a fake clock.
package protocol WebSocketSessionIO: AnyObject {
    /// Writes bytes; false when the client is gone.
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// Bytes written and not yet taken by the kernel: a large message goes out as it drains (`drained`).
    var pendingOutput: Int { get }
    /// Ends the transport: RST when `abortive`, else FIN once what is queued has gone (or a deadline passed).
    /// No call follows.
    func close(abortive: Bool)
    /// Reading on or off: off while the output is over `WebSocketSession.maxPendingOutput`.
    func setReading(_ enabled: Bool)
    func startTimer(_ timer: WebSocketTimer, milliseconds: Int)
    func cancelTimer(_ timer: WebSocketTimer)
    /// Monotonic nanoseconds.
    func nowNanos() -> UInt64
    /// A frame went out or came in.
    func journal(_ frame: WebSocketFrameRecord)
    /// The session ended; called once.
    func ended(_ end: WebSocketEnd)
    /// A script fault starts now (`silence`, `drop`, …): when the server went quiet, for the heartbeat verdict.
    func faultStarted(_ name: String)
}

extension WebSocketSessionIO {
    /// A transport that cannot stop reading (the tests' fakes) ignores it.
    package func setReading(_ enabled: Bool) {}
}

/// One frame in the journal.
public struct WebSocketFrameRecord: Sendable, Equatable {
    public enum Direction: String, Sendable { case fromClient = "in", toClient = "out" }
    public var direction: Direction
    public var opcode: String
    public var fin: Bool
    public var size: Int
    /// A text frame's text, or a close frame's code and reason, cut to 256 bytes.
    public var text: String?
    public var atMonotonicNanos: UInt64

    package init(direction: Direction, opcode: String, fin: Bool, size: Int, text: String?, atMonotonicNanos: UInt64) {
        self.direction = direction
        self.opcode = opcode
        self.fin = fin
        self.size = size
        self.text = text
        self.atMonotonicNanos = atMonotonicNanos
    }
}

/// How a session ended and who ended it.
public struct WebSocketEnd: Sendable, Equatable {
    public enum Party: String, Sendable { case client, server }
    public var by: Party
    /// The close code sent by whoever closed; nil when the connection ended without a close frame (1006 to the
    /// other side).
    public var code: Int?
    public var reason: String
    /// The closing handshake completed: both close frames, then the TCP close.
    public var clean: Bool
    /// The fault that ended it, if one did.
    public var fault: String?
    public var atMonotonicNanos: UInt64
    /// The network dropped the connection (ARCHITECTURE §3b): with RST (`true`) or FIN (`false`); nil otherwise. The
    /// session's journal outcome follows it (`reset-sent`, `closed-by-fault`), as a cut exchange's does.
    package var droppedWithReset: Bool?

    package init(by: Party, code: Int?, reason: String, clean: Bool, fault: String?, atMonotonicNanos: UInt64) {
        self.by = by
        self.code = code
        self.reason = reason
        self.clean = clean
        self.fault = fault
        self.atMonotonicNanos = atMonotonicNanos
    }
}

/// One WebSocket session after the 101 (RFC 6455), as a pure state machine: events in (`received`,
/// `peerFinished`, `peerFailed`, `timerFired`), actions out through `WebSocketSessionIO`. It reads the client's
/// frames (journaling each, answering pings and closes, refusing what a server must refuse with the close code
/// §7.4.1 names) and plays the plan's script.
package final class WebSocketSession {
    package enum State: Equatable, Sendable {
        case open
        /// Our close frame is out; waiting for the client's.
        case closing
        /// `close-keep-open`: a close frame was sent and nothing more will be, whatever the client does.
        case closeKeptOpen
        /// `silence` or a truncated frame: nothing more is sent, not even pongs.
        case silent
        case closed
    }

    package private(set) var state: State = .open
    private unowned(unsafe) let io: WebSocketSessionIO
    private let plan: WebSocketSessionPlan
    private var parser: WebSocketFrameParser
    private var cursor = 0
    /// A `send` step repeating: messages left and the next one's number.
    private var repeating: (left: Int, number: Int)?
    /// A `fragmented` fault: the fragments left to send after the first, and the wait between two.
    private var fragments: (left: [[UInt8]], gapMilliseconds: Int)?
    private var waitingFor: (matcher: BodyMatcher?, step: Int)?
    private var echoLeft: Int?
    private var echoAll = false
    /// The last fault the script played: every end records it (whoever ended the session, it ended one that
    /// carried a fault), and the exchange's outcome is then `closed-by-fault`.
    private var fault: String?
    /// Our close frame's code and reason, once sent.
    private var closeSent: (code: Int?, reason: String)?
    /// What is left of a large message, and the frames that wait behind it (a frame cannot go out inside another).
    private var streaming: BodySlice?
    private var queued: [WebSocketFrame] = []

    /// How long a server waits for the client's close frame after sending its own.
    package static let closingMilliseconds = 2000
    /// The bytes a large message writes at once; the rest waits for the output to drain.
    static let streamPiece = 64 * 1024
    /// Past this much unsent output (pongs, echoes a client does not read) the session stops reading until it
    /// drains, as HTTP/1.1 does past its own limit.
    package static let maxPendingOutput = 1024 * 1024
    /// Frames waiting behind a large message that is going out (`streaming`): pongs and echoes of a client that
    /// keeps sending while it does not read. Counted with the transport's unsent bytes against `maxPendingOutput`.
    private var queuedBytes = 0
    /// Output the session has made that the kernel has not taken: the transport's unsent bytes and the frames
    /// queued behind a large message.
    package var unsentOutput: Int { io.pendingOutput + queuedBytes }
    private var readingPaused = false

    package init(io: WebSocketSessionIO, plan: WebSocketSessionPlan) {
        self.io = io
        self.plan = plan
        parser = WebSocketFrameParser(maxMessageBytes: plan.maxMessageBytes)
    }

    /// Starts the script; `early` are bytes the client sent right after its upgrade request.
    package func start(early: [UInt8]) {
        advance()
        if !early.isEmpty, state != .closed { early.withUnsafeBytes { received($0) } }
    }

    // MARK: - Reading

    package func received(_ bytes: UnsafeRawBufferPointer) {
        guard state != .closed else { return }
        parser.append(bytes)
        if !sliceWaiting { parseBuffered() }
    }

    /// Frames one pass handles, or how long it may run, before the rest of the read waits for the next loop turn
    /// with reading off (`WebSocketTimer.slice`): a 64 KiB read holds ~9,000 one-byte frames, and echoing them all in
    /// one turn held every other connection for hundreds of milliseconds.
    package static let framesPerSlice = 256
    static let sliceBudgetNanos: UInt64 = 2_000_000
    private var sliceWaiting = false

    private func parseBuffered() {
        let started = io.nowNanos()
        var handled = 0
        while state != .closed {
            let events: [WebSocketFrameParser.Event]
            do throws(WebSocketViolation) {
                guard let next = try parser.next() else { return }
                events = next
            } catch {
                violated(error)
                return
            }
            for event in events where state != .closed {
                switch event {
                case .frame(let frame): handle(frame)
                case .message(let opcode, let bytes): message(opcode, bytes)
                }
            }
            guard state != .closed else { return }
            if !readingPaused, unsentOutput >= Self.maxPendingOutput {
                readingPaused = true
                io.setReading(false)
            }
            handled += 1
            if handled >= Self.framesPerSlice
                || (handled & 15 == 0 && io.nowNanos() &- started >= Self.sliceBudgetNanos) {
                sliceWaiting = true
                io.setReading(false)
                io.startTimer(.slice, milliseconds: 0)
                return
            }
        }
    }

    private func handle(_ frame: WebSocketFrame) {
        io.journal(record(.fromClient, frame))
        switch frame.opcode {
        case .ping:
            if state == .open && !plan.ignorePings { send(WebSocketFrame(opcode: .pong, payload: frame.payload)) }
        case .close:
            let code = frame.payload.count >= 2 ? Int(frame.payload[0]) << 8 | Int(frame.payload[1]) : nil
            let reason = frame.payload.count > 2 ? String(decoding: frame.payload[2...], as: UTF8.self) : ""
            switch state {
            case .closing:
                // The client answered our close: the handshake is complete; the server closes TCP first (§7.1.1).
                finish(WebSocketEnd(by: .server, code: closeSent?.code, reason: closeSent?.reason ?? "", clean: true,
                                    fault: fault, atMonotonicNanos: io.nowNanos()), abortive: false)
            case .open:
                // The client closes: echo its code (§5.5.1), then close TCP.
                send(WebSocketFrame(opcode: .close, payload: WebSocketFrame.closePayload(code: code, reason: "")))
                finish(WebSocketEnd(by: .client, code: code, reason: reason, clean: true, fault: fault,
                                    atMonotonicNanos: io.nowNanos()), abortive: false)
            case .closeKeptOpen, .silent, .closed:
                // Not answered: the client is left waiting for the server's close.
                break
            }
        case .text, .binary, .continuation, .pong:
            break
        }
    }

    private func message(_ opcode: WebSocketOpcode, _ bytes: [UInt8]) {
        guard state == .open else { return }
        if echoAll || (echoLeft ?? 0) > 0 {
            if let left = echoLeft { echoLeft = left - 1 == 0 ? nil : left - 1 }
            send(WebSocketFrame(opcode: opcode, payload: bytes))
        }
        if let waiting = waitingFor, waiting.matcher.map({ RouteMatcher.check($0, bytes) == nil }) ?? true {
            waitingFor = nil
            io.cancelTimer(.receive)
            cursor = waiting.step + 1
            advance()
        }
    }

    /// The client broke the protocol: the close code §7.4.1 names, then FIN.
    private func violated(_ violation: WebSocketViolation) {
        guard state == .open || state == .closing else {
            finish(WebSocketEnd(by: .server, code: nil, reason: violation.reason, clean: false, fault: fault,
                                atMonotonicNanos: io.nowNanos()), abortive: false)
            return
        }
        send(WebSocketFrame(opcode: .close, payload: WebSocketFrame.closePayload(code: violation.code, reason: violation.reason)))
        finish(WebSocketEnd(by: .server, code: violation.code, reason: violation.reason, clean: false, fault: fault,
                            atMonotonicNanos: io.nowNanos()), abortive: false)
    }

    /// The client sent FIN, or its connection failed: the session is over without a closing handshake from it
    /// (unless our close was out: then its FIN ends the handshake).
    package func peerFinished() { peerGone() }
    package func peerFailed() { peerGone() }

    private func peerGone() {
        guard state != .closed else { return }
        let closing = state == .closing
        finish(WebSocketEnd(by: closing ? .server : .client, code: closing ? closeSent?.code : nil,
                            reason: closing ? closeSent?.reason ?? "" : "", clean: false, fault: fault,
                            atMonotonicNanos: io.nowNanos()), abortive: false)
    }

    // MARK: - The script

    package func timerFired(_ timer: WebSocketTimer) {
        guard state != .closed else { return }
        switch timer {
        case .slice:
            sliceWaiting = false
            if !readingPaused { io.setReading(true) }
            parseBuffered()
        case .script:
            if var pending = fragments {
                let next = pending.left.removeFirst()
                fragments = pending.left.isEmpty ? nil : pending
                sendRaw(WebSocketFrame(fin: fragments == nil, opcode: .continuation, payload: next))
                if fragments == nil { cursor += 1; advance() } else { io.startTimer(.script, milliseconds: pending.gapMilliseconds) }
            } else if let again = repeating, case .send(let payload, let every, _) = plan.script[cursor] {
                sendMessage(payload, number: again.number)
                if again.left <= 1 {
                    repeating = nil
                    cursor += 1
                    advance()
                } else {
                    repeating = (again.left - 1, again.number + 1)
                    io.startTimer(.script, milliseconds: every ?? 0)
                }
            } else {
                cursor += 1
                advance()
            }
        case .receive:
            guard let waiting = waitingFor else { return }
            waitingFor = nil
            let reason = "no matching message for script step \(waiting.step)"
            send(WebSocketFrame(opcode: .close, payload: WebSocketFrame.closePayload(code: 1008, reason: reason)))
            closeSent = (1008, reason)
            state = .closing
            io.startTimer(.closing, milliseconds: Self.closingMilliseconds)
        case .closing:
            finish(WebSocketEnd(by: .server, code: closeSent?.code, reason: closeSent?.reason ?? "", clean: false,
                                fault: fault, atMonotonicNanos: io.nowNanos()), abortive: false)
        }
    }

    /// Runs steps until one has to wait.
    private func advance() {
        while state == .open, cursor < plan.script.count {
            switch plan.script[cursor] {
            case .send(let payload, let every, let times):
                sendMessage(payload, number: 1)
                if times > 1 {
                    repeating = (times - 1, 2)
                    io.startTimer(.script, milliseconds: every ?? 0)
                    return
                }
            case .wait(let milliseconds):
                io.startTimer(.script, milliseconds: milliseconds)
                return
            case .receive(let matcher, let timeout):
                waitingFor = (matcher, cursor)
                if let timeout { io.startTimer(.receive, milliseconds: timeout) }
                return
            case .echo(let count):
                if let count { echoLeft = count } else { echoAll = true }
            case .ping(let payload):
                send(WebSocketFrame(opcode: .ping, payload: payload))
            case .close(let code, let reason):
                send(WebSocketFrame(opcode: .close, payload: WebSocketFrame.closePayload(code: code, reason: reason)))
                closeSent = (code, reason)
                state = .closing
                io.startTimer(.closing, milliseconds: Self.closingMilliseconds)
                return
            case .fault(let fault):
                self.fault = fault.name
                io.faultStarted(fault.name)
                if !perform(fault) { return }
            }
            cursor += 1
        }
    }

    /// Carries out a fault; false when the script stops here (for now or for good).
    private func perform(_ fault: WebSocketFault) -> Bool {
        switch fault {
        case .drop(let reset):
            finish(WebSocketEnd(by: .server, code: nil, reason: "", clean: false, fault: fault.name,
                                atMonotonicNanos: io.nowNanos()), abortive: reset)
            return false
        case .closeKeepOpen(let code, let reason):
            send(WebSocketFrame(opcode: .close, payload: WebSocketFrame.closePayload(code: code, reason: reason)))
            closeSent = (code, reason)
            state = .closeKeptOpen
            return false
        case .truncatedFrame(let bytes):
            let header = WebSocketFrame.header(fin: true, opcode: .binary, length: bytes)
            let half = BodySource(.generated(seed: plan.seed, size: bytes / 2)).bytes(0..<(bytes / 2))
            _ = (header + half).withUnsafeBytes { io.write($0) }
            io.journal(WebSocketFrameRecord(direction: .toClient, opcode: "binary", fin: true, size: bytes,
                                            text: "truncated after \(bytes / 2) of \(bytes) bytes", atMonotonicNanos: io.nowNanos()))
            state = .silent
            return false
        case .fragmented(let text, let count, let gapMilliseconds):
            let bytes = Array(text.utf8)
            let size = max(1, (bytes.count + count - 1) / max(count, 1))
            var pieces = stride(from: 0, to: bytes.count, by: size).map { Array(bytes[$0..<min($0 + size, bytes.count)]) }
            if pieces.isEmpty { pieces = [[]] }
            let first = pieces.removeFirst()
            sendRaw(WebSocketFrame(fin: pieces.isEmpty, opcode: .text, payload: first))
            guard !pieces.isEmpty else { return true }
            fragments = (pieces, gapMilliseconds)
            io.startTimer(.script, milliseconds: gapMilliseconds)
            return false
        case .maskedFrame:
            let frame = WebSocketFrame(opcode: .text, payload: Array("masked, which a server must not do".utf8))
            _ = frame.serialized(masked: [0x12, 0x34, 0x56, 0x78]).withUnsafeBytes { io.write($0) }
            io.journal(record(.toClient, frame))
            return true
        case .silence:
            state = .silent
            return false
        }
    }

    private func sendMessage(_ payload: WebSocketPayload, number: Int) {
        switch payload {
        case .text(let text):
            let rendered = text.contains("{{n}}") ? text.replacing("{{n}}", with: String(number)) : text
            send(WebSocketFrame(opcode: .text, payload: Array(rendered.utf8)))
        case .binary(let bytes):
            send(WebSocketFrame(opcode: .binary, payload: bytes))
        case .generated(let size):
            guard state == .open else { return }
            let source = BodySource(.generated(seed: plan.seed &+ UInt64(number), size: size))
            guard streaming == nil, size > Self.streamPiece else {
                send(WebSocketFrame(opcode: .binary, payload: source.bytes(0..<size)))
                return
            }
            // A large message is never made whole: its header, then its bytes as the connection drains.
            let header = WebSocketFrame.header(fin: true, opcode: .binary, length: size)
            guard header.withUnsafeBytes({ io.write($0) }) else { return peerGone() }
            io.journal(WebSocketFrameRecord(direction: .toClient, opcode: "binary", fin: true, size: size, text: nil,
                                            atMonotonicNanos: io.nowNanos()))
            streaming = BodySlice(source)
            pump()
        }
    }

    /// The output drained: the large message goes on.
    package func drained() {
        guard state != .closed else { return }
        if readingPaused {
            readingPaused = false
            if !sliceWaiting { io.setReading(true) }
        }
        guard streaming != nil else { return }
        pump()
    }

    /// Writes a piece of the large message, and more while the kernel takes them at once.
    private func pump() {
        repeat {
            guard let slice = streaming else { break }
            let end = min(slice.range.lowerBound + Self.streamPiece, slice.range.upperBound)
            let piece = slice.source.bytes(slice.range.lowerBound..<end)
            guard piece.withUnsafeBytes({ io.write($0) }) else { return peerGone() }
            streaming = end == slice.range.upperBound ? nil : BodySlice(slice.source, end..<slice.range.upperBound)
        } while io.pendingOutput == 0
        guard streaming == nil else { return }
        let waiting = queued
        queued = []
        queuedBytes = 0
        for frame in waiting where state != .closed { sendRaw(frame) }
    }

    /// Sends a frame while the session may talk.
    private func send(_ frame: WebSocketFrame) {
        guard state == .open || (state == .closing && frame.opcode == .pong) else { return }
        sendRaw(frame)
    }

    private func sendRaw(_ frame: WebSocketFrame) {
        if streaming != nil {
            queued.append(frame)
            queuedBytes += frame.payload.count + 14
            return
        }
        let written = frame.serialized().withUnsafeBytes { io.write($0) }
        io.journal(record(.toClient, frame))
        if !written { peerGone() }
    }

    private func record(_ direction: WebSocketFrameRecord.Direction, _ frame: WebSocketFrame) -> WebSocketFrameRecord {
        var text: String?
        switch frame.opcode {
        case .text, .continuation:
            text = String(decoding: frame.payload.prefix(256), as: UTF8.self)
        case .close where frame.payload.count >= 2:
            let code = Int(frame.payload[0]) << 8 | Int(frame.payload[1])
            text = "\(code) " + String(decoding: frame.payload.dropFirst(2).prefix(250), as: UTF8.self)
        default:
            break
        }
        return WebSocketFrameRecord(direction: direction, opcode: frame.opcode.name, fin: frame.fin,
                                    size: frame.payload.count, text: text, atMonotonicNanos: io.nowNanos())
    }

    private func finish(_ end: WebSocketEnd, abortive: Bool) {
        guard state != .closed else { return }
        state = .closed
        for timer in WebSocketTimer.allCases { io.cancelTimer(timer) }
        io.ended(end)
        io.close(abortive: abortive)
    }

    /// The network dropped the connection (ARCHITECTURE §3b): it is gone already, so no close frame; the journal's
    /// end says so (1006 to the client).
    package func dropped(abortive: Bool) {
        guard state != .closed else { return }
        var end = WebSocketEnd(by: .server, code: nil, reason: abortive ? "network drop (RST)" : "network drop (FIN)",
                               clean: false, fault: fault, atMonotonicNanos: io.nowNanos())
        end.droppedWithReset = abortive
        finish(end, abortive: abortive)
    }

    /// The server stops or a scenario reset: a going-away close frame, then FIN.
    package func teardown() {
        guard state != .closed else { return }
        if state == .open {
            sendRaw(WebSocketFrame(opcode: .close, payload: WebSocketFrame.closePayload(code: 1001, reason: "server stopping")))
        }
        finish(WebSocketEnd(by: .server, code: 1001, reason: "server stopping", clean: false, fault: fault,
                            atMonotonicNanos: io.nowNanos()), abortive: false)
    }
}
