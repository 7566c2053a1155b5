import FaultlineCore

/// One client connection: a transport and the HTTP/1.1 connection machine that runs on it. The machine holds
/// the rules (`HTTP1Connection` in FaultlineCore); this class only wires it to the transport, loop timers and
/// the Dispatcher (ARCHITECTURE §3). Loop thread only.
final class Connection: HTTP1ConnectionIO, TransportDelegate {
    /// Changes once, when a TLS handshake completes (`info.tls`).
    @exclusivity(unchecked) private(set) var info: ConnectionInfo
    var id: Int { info.id }
    private let transport: Transport
    /// The TLS transport, on the TLS port: whether its handshake produced a request decides whether the journal
    /// gets a connection entry for it.
    private let tls: TLSTransport?
    /// Requests (and attempts at one) this connection put in the journal.
    @exclusivity(unchecked) private var requestsJournaled = 0
    private let acceptedAt: Arrival
    /// The server outlives its connections (it tears them down before it goes); unowned(unsafe) skips the
    /// reference counting a checked reference costs per request.
    private unowned(unsafe) let server: ServerCore
    @exclusivity(unchecked) private var machine: HTTP1Connection!
    @exclusivity(unchecked) private var timers: [LoopTimer?] = Array(repeating: nil, count: HTTP1Timer.allCases.count)

    init(info: ConnectionInfo, transport: Transport, tls: TLSTransport?, server: ServerCore) {
        self.info = info
        self.transport = transport
        self.tls = tls
        self.server = server
        acceptedAt = tls == nil
            ? Arrival(wall: 0, monotonicNanos: 0) : Arrival(wall: Clock.wallSeconds(), monotonicNanos: Clock.monotonicNanos())
        machine = HTTP1Connection(io: self, settings: server.http1Settings)
        transport.delegate = self
        tls?.onHandshakeEnd = { [unowned self] tls in handshakeEnded(tls) }
    }

    /// The TLS handshake completed (every request's journal entry carries its summary from now on) or ended
    /// without completing (a connection entry says how).
    private func handshakeEnded(_ tls: TLSTransport) {
        if tls.summary.handshake == .completed {
            info.tls = tls.summary
        } else {
            server.dispatcher.journalConnection(info, tls.summary, acceptedAt: acceptedAt)
            requestsJournaled += 1
        }
    }

    // MARK: - From the server

    /// The server's close queue reached this connection (`closeSoon`).
    func closeFromQueue() { machine.closeFromQueue() }

    /// Ends the connection; exchanges not yet answered are journaled with `outcome`.
    func teardown(_ outcome: ExchangeOutcome) { machine.teardown(outcome) }

    /// The connection is busy with a response that a scenario reset must not let leak into the next test.
    var hasPendingScriptedResponse: Bool { machine.hasPendingScriptedResponse }

    // MARK: - TransportDelegate

    func transportReceived(_ bytes: UnsafeRawBufferPointer) { machine.received(bytes) }
    func transportPeerFinished() { machine.peerFinished() }
    func transportFailed() { machine.peerFailed() }
    func transportDrained() { machine.drained() }

    // MARK: - HTTP1ConnectionIO

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool { transport.write(bytes) }
    var pendingOutput: Int { transport.pendingOutput }
    var hasUnreadInput: Bool { transport.hasUnreadInput }
    var peerHasReset: Bool { transport.peerHasReset }
    func probePeer() { transport.probePeer() }
    func shutdownWrite() { transport.shutdownWrite() }
    func omitCloseNotify() { tls?.omitCloseNotify() }
    func setReading(_ enabled: Bool) { transport.setReading(enabled) }

    func close(abortive: Bool) {
        if let tls, requestsJournaled == 0, tls.summary.handshake == .completed {
            // A handshake that was never followed by a request is still a journal entry.
            requestsJournaled += 1
            server.dispatcher.journalConnection(info, tls.summary, acceptedAt: acceptedAt)
        }
        for index in timers.indices {
            timers[index]?.cancel()
            timers[index] = nil
        }
        transport.close(abortive: abortive)
        server.connectionClosed(self)
    }

    func closeSoon() { server.closeSoon(self) }

    func startTimer(_ timer: HTTP1Timer, milliseconds: Int) {
        timers[timer.rawValue] = LoopTimer(loop: server.loop, milliseconds: milliseconds) { [unowned self] in
            timers[timer.rawValue] = nil
            machine.timerFired(timer)
        }
    }

    func cancelTimer(_ timer: HTTP1Timer) {
        timers[timer.rawValue]?.cancel()
        timers[timer.rawValue] = nil
    }

    func now() -> Arrival { Arrival(wall: Clock.wallSeconds(), monotonicNanos: Clock.monotonicNanos()) }

    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange {
        requestsJournaled &+= 1
        return server.dispatcher.dispatch(request, context, on: info)
    }

    func reject(_ error: HTTPParseError, _ context: RequestContext) -> Exchange {
        requestsJournaled &+= 1
        return server.dispatcher.reject(error, context, on: info)
    }

    func journalUnanswered(
        _ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext, _ outcome: ExchangeOutcome
    ) {
        requestsJournaled &+= 1
        server.dispatcher.journalUnanswered(request, error, context, on: info, outcome)
    }

    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?) {
        server.dispatcher.finished(exchange, outcome, at: at)
    }

    func policyClosed(after sequence: Int, _ reason: PolicyClose) {
        server.dispatcher.policyClosed(after: sequence, reason)
    }
}
