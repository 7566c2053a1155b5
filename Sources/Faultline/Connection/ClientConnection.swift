import FaultlineCore
import FaultlineHTTP2

/// The codec a client connection speaks, decided once from ALPN or its first bytes and switched on once per
/// event (`ClientConnection`). Hummingbird spells the same as `NIONegotiatedHTTPVersion`.
enum ConnectionCodec {
    /// No byte has said yet whether this is HTTP/2's preface (h2c with prior knowledge, or h2 over TLS without
    /// ALPN): `prefaceSoFar` holds the bytes of a preface not yet complete. The HTTP/1.1 machine's timers run.
    case sniffing(prefaceSoFar: [UInt8])
    /// HTTP/1.1 (`HTTP1Connection` in FaultlineCore, the connection's `machine`).
    case http1
    /// HTTP/2 (`HTTP2Connection` in FaultlineHTTP2); the HTTP/1.1 machine is idle.
    case http2(HTTP2Connection)
    /// A WebSocket session after a 101; the HTTP/1.1 machine is done.
    case websocket(WebSocketChannel)
}

/// One client's connection to the server: a transport and the codec that runs on it — the HTTP/1.1 connection
/// machine, the HTTP/2 codec when ALPN chose `h2` or the first bytes are HTTP/2's preface, a WebSocket session
/// after an upgrade (`ConnectionCodec`). It only wires the codec to the transport, loop timers and the Dispatcher
/// (ARCHITECTURE §3, §4a). Loop thread only.
final class ClientConnection: HTTP1ConnectionIO, HTTP2ConnectionIO, TransportDelegate {
    /// Changes once, when a TLS handshake completes (`info.tls`).
    @exclusivity(unchecked) private(set) var info: ConnectionInfo
    var id: Int { info.id }
    private let transport: Transport
    /// The TCP transport under `transport` (itself, on the plain port): where network conditions act.
    let tcp: TCPTransport
    /// The TLS transport, on the TLS port: whether its handshake produced a request decides whether the journal
    /// gets a connection entry for it.
    private let tls: TLSTransport?
    /// Its latest request was an admin call: network drops, freezes and conditions leave it alone, so a test can
    /// still talk to the server it is cutting off.
    @exclusivity(unchecked) private(set) var servesAdmin = false
    /// Requests (and attempts at one) this connection put in the journal.
    @exclusivity(unchecked) private var requestsJournaled = 0
    private let acceptedAt: Arrival
    /// The server outlives its connections (it tears them down before it goes); unowned(unsafe) skips the
    /// reference counting a checked reference costs per request.
    private unowned(unsafe) let server: ServerCore
    /// The HTTP/1.1 machine: made with the connection, it serves until the codec says otherwise.
    @exclusivity(unchecked) private var machine: HTTP1Connection!
    @exclusivity(unchecked) private var timers: [LoopTimer?] = Array(repeating: nil, count: HTTP1Timer.allCases.count)
    @exclusivity(unchecked) private var codec = ConnectionCodec.sniffing(prefaceSoFar: [])
    /// When the connection turned out to speak HTTP/2: its connection entry's time.
    @exclusivity(unchecked) private var http2StartedAt: Arrival?

    init(info: ConnectionInfo, transport: Transport, tcp: TCPTransport, tls: TLSTransport?, server: ServerCore) {
        self.info = info
        self.transport = transport
        self.tcp = tcp
        servesAdmin = info.adminOnly
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
            if tls.summary.alpn == "h2" { startHTTP2() }
        } else {
            server.dispatcher.journalConnection(info, tls.summary, acceptedAt: acceptedAt)
            requestsJournaled += 1
        }
    }

    // MARK: - From the server

    /// The server's close queue reached this connection (`closeSoon`).
    func closeFromQueue() { machine.closeFromQueue() }

    /// Ends the connection; exchanges not yet answered are journaled with `outcome`.
    func teardown(_ outcome: ExchangeOutcome) {
        switch codec {
        case .sniffing, .http1: machine.teardown(outcome)
        case .http2(let http2): http2.teardown(outcome)
        case .websocket(let websocket): websocket.session.teardown()
        }
    }

    /// The network dropped the connection (ARCHITECTURE §3b): RST or FIN at once, nothing more written (not even
    /// HTTP/2's GOAWAY or a WebSocket close), and exchanges not yet answered journaled as cut by it.
    func dropByNetwork(abortive: Bool) {
        tcp.close(abortive: abortive)
        if case .websocket(let websocket) = codec {
            websocket.session.dropped(abortive: abortive)
        } else {
            teardown(abortive ? .resetSent : .closedByFault)
        }
    }

    /// A scenario reset: a scripted response in progress must not leak into the next test. HTTP/1.1 can only
    /// close the connection; HTTP/2 cancels the streams (RST_STREAM CANCEL) and keeps it.
    func cancelPendingResponses() {
        switch codec {
        case .sniffing, .http1: machine.teardown(.cancelled)
        case .http2(let http2): http2.cancelPending(.cancelled)
        case .websocket(let websocket): websocket.session.teardown()
        }
    }

    /// The connection is busy with a response that a scenario reset must not let leak into the next test.
    var hasPendingScriptedResponse: Bool {
        switch codec {
        case .sniffing, .http1: machine.hasPendingScriptedResponse
        case .http2(let http2): http2.hasPendingScriptedResponse
        case .websocket: true
        }
    }

    // MARK: - TransportDelegate

    func transportReceived(_ bytes: UnsafeRawBufferPointer) {
        switch codec {
        case .http1: machine.received(bytes)
        case .sniffing(let prefaceSoFar): firstBytes(bytes, after: prefaceSoFar)
        case .http2(let http2): http2.received(bytes)
        case .websocket(let websocket): websocket.session.received(bytes)
        }
    }

    func transportPeerFinished() {
        switch codec {
        case .sniffing, .http1: machine.peerFinished()
        case .http2(let http2): http2.peerFinished()
        case .websocket(let websocket): websocket.session.peerFinished()
        }
    }

    func transportFailed() {
        switch codec {
        case .sniffing, .http1: machine.peerFailed()
        case .http2(let http2): http2.peerFailed()
        case .websocket(let websocket): websocket.session.peerFailed()
        }
    }

    func transportDrained() {
        switch codec {
        case .sniffing, .http1: machine.drained()
        case .http2(let http2): http2.drained()
        case .websocket(let websocket): websocket.drained()
        }
    }

    // MARK: - Which protocol

    /// RFC 9113 §3.4: an HTTP/2 client with prior knowledge starts with this preface.
    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// The connection's first bytes: HTTP/2's preface (h2c, or h2 over TLS without ALPN) or HTTP/1.1. A request
    /// line parts from the preface at its first or second byte, so HTTP/1.1 pays one comparison.
    private func firstBytes(_ bytes: UnsafeRawBufferPointer, after prefaceSoFar: [UInt8]) {
        let preface = Self.preface
        var matched = prefaceSoFar.count
        for byte in bytes {
            guard matched < preface.count else { break }
            guard byte == preface[matched] else {
                codec = .http1
                if prefaceSoFar.isEmpty {
                    machine.received(bytes)
                } else {
                    (prefaceSoFar + Array(bytes)).withUnsafeBytes { machine.received($0) }
                }
                return
            }
            matched += 1
        }
        if matched < preface.count {
            codec = .sniffing(prefaceSoFar: prefaceSoFar + Array(bytes))
            return
        }
        let http2 = startHTTP2()
        (prefaceSoFar + Array(bytes)).withUnsafeBytes { http2.received($0) }
    }

    @discardableResult
    private func startHTTP2() -> HTTP2Connection {
        info.exchangeProtocol = .http2
        http2StartedAt = now()
        let http2 = HTTP2Connection(io: self, settings: server.http2Settings.applying(server.engine.http2Plan))
        codec = .http2(http2)
        return http2
    }

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

    func upgrade(_ exchange: Exchange, _ plan: WebSocketSessionPlan, early: [UInt8]) {
        let channel = WebSocketChannel(transport: transport, server: server, exchange: exchange, plan: plan) {
            [unowned self] abortive in close(abortive: abortive)
        }
        codec = .websocket(channel)
        channel.session.start(early: early)
    }

    func startTimer(_ timer: HTTP1Timer, milliseconds: Int) {
        // A script's wait is counted where the close queue looks before it closes a slice (`StepDeadlines`).
        let counted = timer == .step ? server.stepDeadlines : nil
        timers[timer.rawValue] = LoopTimer(loop: server.loop, milliseconds: milliseconds, counted: counted) {
            [unowned self] in
            timers[timer.rawValue] = nil
            machine.timerFired(timer)
        }
    }

    func cancelTimer(_ timer: HTTP1Timer) {
        timers[timer.rawValue]?.cancel()
        timers[timer.rawValue] = nil
    }

    func now() -> Arrival { Arrival(wall: Clock.wallSeconds(), monotonicNanos: Clock.monotonicNanos()) }

    /// One clock read per head; the text is the engine's, formatted once per second (`HTTPDateCache`).
    func dateLine() -> [UInt8] { server.engine.dates.line(atWall: Clock.wallSeconds()) }

    // MARK: - HTTP2ConnectionIO

    func schedule(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer {
        LoopTimer(loop: server.loop, milliseconds: milliseconds, action)
    }

    func scheduleStep(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer {
        LoopTimer(loop: server.loop, milliseconds: milliseconds, counted: server.stepDeadlines, action)
    }

    func journalHTTP2(_ summary: HTTP2ConnectionSummary?, clientGoaway: HTTP2ClientGoaway?) {
        requestsJournaled &+= 1
        server.dispatcher.journalHTTP2Connection(
            info, summary, clientGoaway: clientGoaway, acceptedAt: http2StartedAt ?? now())
    }

    func journalUnanswered(
        _ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext, _ outcome: ExchangeOutcome,
        client: HTTP2ClientFrames
    ) {
        requestsJournaled &+= 1
        server.dispatcher.journalUnanswered(request, error, context, on: info, outcome, client: client)
    }

    func journalIgnoredStream(_ context: RequestContext, afterGoaway lastStream: Int32) {
        requestsJournaled &+= 1
        server.dispatcher.journalIgnoredStream(context, on: info, afterGoaway: Int(lastStream))
    }

    func clientSent(_ frames: HTTP2ClientFrames, onEntry sequence: Int) {
        server.dispatcher.clientSent(frames, onEntry: sequence)
    }

    func connectionError(_ reason: String) {
        requestsJournaled &+= 1
        server.dispatcher.journalProtocolError(info, reason, acceptedAt: now())
    }

    // MARK: - Both

    func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange {
        requestsJournaled &+= 1
        return server.dispatcher.reject(error, context, on: info, body: body)
    }

    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange {
        requestsJournaled &+= 1
        servesAdmin = info.adminOnly || AdminAPI.isAdminTarget(request.target)
        return server.dispatcher.dispatch(request, context, on: info)
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
