import FaultlineCore

/// A connection after its 101: the WebSocket session (`WebSocketSession` in FaultlineCore) wired to the
/// connection's transport, loop timers and the journal entry of its upgrade request (ARCHITECTURE §4c). The
/// session finishes that entry's exchange when it ends. Loop thread only.
final class WebSocketChannel: WebSocketSessionIO {
    private let transport: Transport
    private unowned(unsafe) let server: ServerCore
    private let exchange: Exchange
    private var timers: [LoopTimer?] = Array(repeating: nil, count: WebSocketTimer.allCases.count)
    private(set) var session: WebSocketSession!
    /// Called once the transport is closed (the connection is done).
    private let onClose: (Bool) -> Void

    init(transport: Transport, server: ServerCore, exchange: Exchange, plan: WebSocketSessionPlan,
         onClose: @escaping (Bool) -> Void) {
        self.transport = transport
        self.server = server
        self.exchange = exchange
        self.onClose = onClose
        if let sequence = exchange.sequence {
            server.updateEntry(sequence) { $0.websocket = WebSocketRecord(subprotocol: plan.subprotocol) }
        }
        session = WebSocketSession(io: self, plan: plan)
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        exchange.bytesWritten += bytes.count
        return transport.write(bytes)
    }

    var pendingOutput: Int { transport.pendingOutput }

    /// Set once the session ended with output still queued: the transport closes when it has drained.
    private var closeWhenDrained: LoopTimer?
    private var closed = false

    func close(abortive: Bool) {
        for index in timers.indices {
            timers[index]?.cancel()
            timers[index] = nil
        }
        // The server stopping closes at once: its loop ends, and no timer would close this later.
        guard abortive || transport.pendingOutput == 0 || server.isStopping else {
            // Closing now would drop what the kernel has not taken yet — the close frame last of all.
            transport.setReading(false)
            closeWhenDrained = LoopTimer(loop: server.loop, milliseconds: WebSocketSession.closingMilliseconds) {
                [unowned self] in closeNow(abortive: false)
            }
            return
        }
        closeNow(abortive: abortive)
    }

    private func closeNow(abortive: Bool) {
        guard !closed else { return }
        closed = true
        closeWhenDrained?.cancel()
        closeWhenDrained = nil
        onClose(abortive)
    }

    /// The output drained: a close that waited for it happens now, else the session hears of it.
    func drained() {
        if closeWhenDrained != nil { return closeNow(abortive: false) }
        session.drained()
    }

    func setReading(_ enabled: Bool) { transport.setReading(enabled) }

    func startTimer(_ timer: WebSocketTimer, milliseconds: Int) {
        timers[timer.rawValue]?.cancel()
        timers[timer.rawValue] = LoopTimer(loop: server.loop, milliseconds: milliseconds) { [unowned self] in
            timers[timer.rawValue] = nil
            session.timerFired(timer)
        }
    }

    func cancelTimer(_ timer: WebSocketTimer) {
        timers[timer.rawValue]?.cancel()
        timers[timer.rawValue] = nil
    }

    func nowNanos() -> UInt64 { Clock.monotonicNanos() }

    func journal(_ frame: WebSocketFrameRecord) {
        guard let sequence = exchange.sequence else { return }
        server.updateEntry(sequence) { $0.websocket?.add(frame) }
    }

    func faultStarted(_ name: String) {
        guard let sequence = exchange.sequence else { return }
        let now = Clock.monotonicNanos()
        server.updateEntry(sequence) { $0.websocket?.faultStarted = (name, now) }
    }

    func ended(_ end: WebSocketEnd) {
        if let sequence = exchange.sequence { server.updateEntry(sequence) { $0.websocket?.end = end } }
        let outcome: ExchangeOutcome = if let reset = end.droppedWithReset {
            reset ? .resetSent : .closedByFault
        } else if end.fault != nil {
            .closedByFault
        } else {
            end.by == .client && end.code == nil ? .clientClosed : .completed
        }
        server.dispatcher.finished(exchange, outcome, at: end.atMonotonicNanos)
    }
}
