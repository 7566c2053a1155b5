import CLibevent
import FaultlineCore

#if canImport(Glibc)
import Glibc
#endif

/// One request on a connection, from the moment it is parsed until its response ends. Responses go out in
/// the order requests arrived (pipelining, RFC 9112 §9.3.2), so exchanges wait in a queue.
final class Exchange {
    /// Journal sequence number; nil for admin calls, which are not journaled.
    let sequence: Int?
    /// Nil until known: an admin long-poll fills it in later.
    var plan: ResponsePlan?
    var bytesWritten = 0
    /// Run once the response has been handed to the kernel (e.g. stop the server after `POST /shutdown`).
    var afterCompletion: (() -> Void)?
    /// What the engine wants to hear when this exchange ends, whatever its outcome.
    var engineCompletion: ExchangeCompletion?
    private(set) var ended = false

    /// Marks the exchange ended, once; true the first time.
    func end() -> Bool {
        defer { ended = true }
        return !ended
    }

    init(sequence: Int?, plan: ResponsePlan?) {
        self.sequence = sequence
        self.plan = plan
    }
}

/// A client connection: reads and parses requests, journals them, and executes each response plan's wire
/// actions in order with loop timers. Loop thread only.
///
/// Every state change goes through `transition(to:)`; the state says what the connection is doing with
/// its *writing* side. Reading continues in every state but `closed`, so a client's close is noticed
/// whatever we are doing (and requests sent after a half-close are still journaled).
final class Connection {
    enum State: Equatable {
        /// No response in progress; waiting for a complete request.
        case idle
        /// Executing the actions of the exchange at the head of the queue.
        case responding
        /// Waiting for the output buffer to drain before carrying out this close, reset or shutdown.
        case draining(WireAction)
        /// A `hang`: writing nothing until the client closes or the server stops.
        case hanging
        /// Our writing side is shut down (`half-close` fault); still reading and journaling.
        case halfClosed
        /// Closing: FIN sent, discarding whatever the client still sends until it closes or a short timer
        /// fires. Closing with unread input would make the kernel send RST, which could destroy the
        /// response (a 413 or 431) before the client reads it (the "lingering close" of RFC 9112 §9.6).
        case lingering
        /// The socket is closed and the bufferevent freed.
        case closed
    }

    let id: Int
    let clientAddress: String
    /// The client's address without its port: what a per-client rate limit counts.
    let clientHost: String
    /// Monotonic ms at accept: a request on a connection opened after a 429 went out is a follow-up of it.
    let openedAtMilliseconds = Clock.monotonicNanos() / 1_000_000
    private unowned let server: ServerCore
    private var bufferEvent: OpaquePointer?
    /// Reading is ours, not the bufferevent's: one `recv` straight into the loop's scratch buffer per readable
    /// event, instead of libevent's FIONREAD ioctl, readv into an evbuffer and a copy out of it (three
    /// syscalls become one on the hot path). Writing stays with the bufferevent.
    private var readEvent: OpaquePointer?
    private let socket: Int32
    private var parser: HTTPRequestParser
    private var exchanges: [Exchange] = []
    private var actionIndex = 0
    private(set) var state: State = .idle
    private var waitTimer: LoopTimer?
    private var headerTimer: LoopTimer?
    /// The connection policy's idle close (stale keep-alive race), armed when a response leaves it idle.
    private var idleTimer: LoopTimer?
    private var requestCount = 0
    private var readEOF = false
    /// Close once everything queued has been written (after the client's EOF, or after a final response).
    private var closeWhenDrained = false
    private var readingPaused = false
    /// Exchanges whose bytes are all queued; they complete when the output buffer drains.
    private var awaitingDrain: [Exchange] = []
    private var headArrival: (wall: Double, monotonic: UInt64)?
    /// Counts `parseAvailable` passes; `headArrivalPass` is the pass that read the clocks for `headArrival`.
    /// A request complete in that same pass is decided at its arrival time, without reading the clocks again.
    private var parsePass = 0
    private var headArrivalPass = -1

    /// Stop reading when this many responses are queued or this much output is unsent (a client pipelining
    /// without reading must not make us buffer without bound).
    private static let maxQueuedExchanges = 128
    private static let maxPendingOutput = 4 * 1024 * 1024

    init(id: Int, fd: Int32, clientAddress: String, server: ServerCore) {
        self.id = id
        self.clientAddress = clientAddress
        clientHost = clientAddress.lastIndex(of: ":").map { String(clientAddress[..<$0]) } ?? clientAddress
        self.server = server
        socket = fd
        parser = HTTPRequestParser(limits: server.configuration.parserLimits)
        var one: Int32 = 1
        // Responses are often tiny and drips are deliberately small: send each write at once.
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        bufferEvent = bufferevent_socket_new(server.loop.base, fd, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bufferEvent, nil, { _, context in
            Connection.recover(context).drained()
        }, { _, events, context in
            Connection.recover(context).event(events)
        }, context)
        readEvent = event_new(server.loop.base, fd, Int16(EV_READ | EV_PERSIST), { _, _, context in
            Connection.recover(context).readable()
        }, context)
        event_add(readEvent, nil)
    }

    /// The connection behind a libevent callback's context. The server's connection table keeps it alive
    /// until `teardown()`, which frees the bufferevent first, so no callback can outlive it.
    private static func recover(_ context: UnsafeMutableRawPointer?) -> Connection {
        Unmanaged<Connection>.fromOpaque(context!).takeUnretainedValue()
    }

    private func transition(to next: State) {
        switch (state, next) {
        case (.closed, _):
            assertionFailure("connection \(id): transition from closed to \(next)")
        default:
            state = next
        }
    }

    // MARK: - Reading

    private func readable() {
        guard let readEvent else { return }
        let count = server.readScratch.withUnsafeMutableBytes { buffer in
            recv(socket, buffer.baseAddress, buffer.count, 0)
        }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return }
        guard count > 0 else {
            // End of input (0) or an error (ECONNRESET): stop reading, as a bufferevent would, and say which.
            event_del(readEvent)
            readingPaused = true
            event(Int16(BEV_EVENT_READING) | Int16(count == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR))
            return
        }
        idleTimer?.cancel()
        idleTimer = nil
        if state == .lingering { return }
        server.readScratch.withUnsafeBytes { buffer in
            parser.append(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
        parseAvailable()
    }

    private func parseAvailable() {
        parsePass &+= 1
        while state != .closed && state != .lingering, let event = parser.next() {
            switch event {
            case .head(let head):
                noteHeadArrival()
                // RFC 9110 §10.1.1: answer 100 at once, unless an earlier response is still being written
                // (interleaving it would corrupt that response; the client then sends its body after its
                // own short wait).
                // When body bytes came with the head, the client is not waiting: 100 may be omitted.
                if head.expectsContinue && exchanges.isEmpty && state == .idle && parser.bufferedByteCount == 0 {
                    write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
                }
            case .request(let request):
                noteHeadArrival()
                received(request)
            case .failure(let error):
                noteHeadArrival()
                rejected(error)
            }
        }
        guard state != .closed && state != .lingering else { return }
        updateHeaderTimer()
        updateReadInterest()
    }

    private func noteHeadArrival() {
        if headArrival == nil {
            headArrival = (Clock.wallSeconds(), Clock.monotonicNanos())
            headArrivalPass = parsePass
        }
    }

    /// 408 when a request's header section is not complete within the header timeout (RFC 9110 §15.5.9).
    /// Armed when the first byte of a head arrives, not re-armed per byte, so a slowloris client cannot keep
    /// a connection by trickling.
    private func updateHeaderTimer() {
        let inHead = parser.hasPartialRequest && !parser.isReadingBody
        if !inHead {
            headerTimer?.cancel()
            headerTimer = nil
        } else if headerTimer == nil {
            headerTimer = LoopTimer(loop: server.loop, milliseconds: server.configuration.headerTimeoutMilliseconds) {
                [unowned self] in
                headerTimer = nil
                headerTimedOut()
            }
        }
    }

    private func headerTimedOut() {
        guard state != .closed else { return }
        let error = HTTPParseError(
            status: 408, reason: "request header section not complete within "
                + "\(server.configuration.headerTimeoutMilliseconds) ms",
            head: nil, requestLinePrefix: parser.partialRequestLine)
        noteHeadArrival()
        parser = HTTPRequestParser(limits: server.configuration.parserLimits)
        rejected(error)
    }

    private func received(_ request: HTTPRequest) {
        clientSaidClose = !request.head.clientWantsKeepAlive
        let arrival = headArrival ?? (Clock.wallSeconds(), Clock.monotonicNanos())
        let arrivedNow = headArrival != nil && headArrivalPass == parsePass
        headArrival = nil
        let index = requestCount
        requestCount += 1
        if AdminAPI.isAdminTarget(request.target) {
            let exchange = Exchange(sequence: nil, plan: nil)
            exchanges.append(exchange)
            server.admin.handle(request, connection: self) { [weak self, exchange] plan, after in
                guard let self, self.state != .closed else { return }
                exchange.plan = plan
                exchange.afterCompletion = after
                self.startNextIfIdle()
            }
            startNextIfIdle()
            return
        }
        var entry = JournalEntry(
            receivedAtWall: arrival.wall, receivedAtMonotonicNanos: arrival.monotonic, connectionID: id,
            indexOnConnection: index, clientAddress: clientAddress, head: request.head,
            body: request.body, bodySize: request.body.count)
        let decision = server.engine.decide(
            request, requestID: server.journal.nextSequence, connectionRequestIndex: index, client: clientHost,
            now: arrivedNow
                ? EngineInstant(monotonicMilliseconds: arrival.monotonic / 1_000_000, wallSeconds: arrival.wall)
                : server.now(),
            connection: id, connectionOpenedAt: openedAtMilliseconds)
        entry.scenario = decision.scenario
        entry.scenarioVersion = decision.scenarioVersion
        entry.route = decision.route
        entry.step = decision.step
        entry.unmatched = decision.unmatched
        entry.status = decision.plan.status
        entry.fault = decision.plan.fault
        entry.chaos = decision.chaos
        entry.notes = decision.notes
        let sequence = server.record(consume entry)
        let exchange = Exchange(sequence: sequence, plan: decision.plan)
        exchange.engineCompletion = decision.completion
        exchanges.append(exchange)
        startNextIfIdle()
    }

    /// A request that is not valid HTTP: journal it as malformed, answer with its status and close
    /// (after the responses queued before it, to keep their order).
    private func rejected(_ error: HTTPParseError) {
        let arrival = headArrival ?? (Clock.wallSeconds(), Clock.monotonicNanos())
        headArrival = nil
        let index = requestCount
        requestCount += 1
        var entry = JournalEntry(
            receivedAtWall: arrival.wall, receivedAtMonotonicNanos: arrival.monotonic, connectionID: id,
            indexOnConnection: index, clientAddress: clientAddress, head: error.head,
            rawRequestLine: error.requestLinePrefix, malformed: error.reason)
        entry.status = error.status
        let sequence = server.record(consume entry)
        let body: JSONValue = .object([
            ("error", .string(HTTPStatus.reasonPhrase(error.status))),
            ("status", .int(error.status)),
            ("reason", .string(error.reason)),
        ])
        let response = HTTPResponse.json(error.status, body)
        let plan = ResponsePlan(actions: [.write(response.serialized(close: true)), .close], status: error.status, keepAlive: false)
        exchanges.append(Exchange(sequence: sequence, plan: plan))
        startNextIfIdle()
    }

    private func updateReadInterest() {
        guard bufferEvent != nil, let readEvent, !readEOF else { return }
        let output = pendingOutput
        let shouldPause = exchanges.count >= Connection.maxQueuedExchanges || output >= Connection.maxPendingOutput
        if shouldPause && !readingPaused {
            event_del(readEvent)
            readingPaused = true
        } else if !shouldPause && readingPaused {
            event_add(readEvent, nil)
            readingPaused = false
            // Bytes may have arrived and been parsed while paused; requests may be waiting in the parser.
            parseAvailable()
        }
    }

    // MARK: - Writing

    private func startNextIfIdle() {
        guard state == .idle, let exchange = exchanges.first, exchange.plan != nil else { return }
        actionIndex = 0
        transition(to: .responding)
        runActions()
    }

    /// Writes straight to the socket when nothing is queued (most responses: no epoll changes, no extra
    /// loop turn); whatever the kernel does not take at once is queued on the bufferevent, which keeps the
    /// order and reports errors through `event(_:)`.
    /// Set when a write found the client gone (EPIPE, ECONNRESET); the connection is torn down after the
    /// current action instead of queueing bytes nobody will read.
    private var clientGone = false
    private var writeEnabled = false

    private func write(_ bytes: [UInt8]) {
        guard let bufferEvent, !bytes.isEmpty, !clientGone else { return }
        bytes.withUnsafeBytes { buffer in
            var sent = 0
            if pendingOutput == 0 {
                let n = send(socket, buffer.baseAddress, buffer.count,
                             Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                if n > 0 { sent = n }
                if n < 0 && (errno == EPIPE || errno == ECONNRESET) { clientGone = true }
            }
            if sent < buffer.count && !clientGone {
                // Writing through the bufferevent only from here on: enabling EV_WRITE earlier would cost two
                // epoll changes per connection (armed at once, disarmed on the first empty write callback).
                if !writeEnabled {
                    bufferevent_enable(bufferEvent, Int16(EV_WRITE))
                    writeEnabled = true
                }
                _ = bufferevent_write(bufferEvent, buffer.baseAddress! + sent, buffer.count - sent)
            }
        }
    }

    /// Carries out the current exchange's actions from `actionIndex` until one has to wait.
    private func runActions() {
        guard state == .responding, let exchange = exchanges.first, let plan = exchange.plan else { return }
        while actionIndex < plan.actions.count {
            let action = plan.actions[actionIndex]
            actionIndex += 1
            switch action {
            case .write(let bytes):
                write(bytes)
                if clientGone {
                    teardown(outcomeForQueued: .clientClosed)
                    return
                }
                exchange.bytesWritten += bytes.count
            case .wait(let milliseconds):
                waitTimer = LoopTimer(loop: server.loop, milliseconds: milliseconds) { [unowned self] in
                    waitTimer = nil
                    runActions()
                }
                return
            case .shutdownWrite, .reset, .close:
                if pendingOutput > 0 {
                    transition(to: .draining(action))
                } else {
                    perform(action)
                }
                return
            case .hang:
                transition(to: .hanging)
                return
            }
        }
        finishExchange()
    }

    /// Bytes queued on the bufferevent, not yet sent. None before a write first had to queue (`writeEnabled`):
    /// the common case costs no libevent call.
    private var pendingOutput: Int {
        guard writeEnabled, let bufferEvent else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bufferEvent))
    }

    /// Every action of the head exchange has run: it completes when its bytes have drained.
    private func finishExchange() {
        let exchange = exchanges.removeFirst()
        awaitingDrain.append(exchange)
        exchange.afterCompletion.map { after in
            // Run once the bytes are out, e.g. stop the server after answering `POST /shutdown`.
            drainActions.append(after)
        }
        transition(to: .idle)
        if pendingOutput == 0 { drained() }
        guard state == .idle else { return }
        if exchange.plan?.keepAlive == false {
            closeWhenDrained = true
            if pendingOutput == 0 { linger() }
            return
        }
        if readEOF && exchanges.isEmpty {
            settleAfterClientFIN()
            return
        }
        startNextIfIdle()
        updateReadInterest()
        if state == .idle, exchanges.isEmpty, !parser.hasPartialRequest,
           let idle = exchange.plan?.idleCloseMilliseconds {
            idleTimer = LoopTimer(loop: server.loop, milliseconds: idle) { [unowned self] in
                idleTimer = nil
                // A plain close, no lingering: exactly what a server's keep-alive timeout does.
                if state == .idle && exchanges.isEmpty { teardown(outcomeForQueued: .cancelled) }
            }
        }
    }

    private var drainActions: [() -> Void] = []

    private func drained() {
        // After the client's FIN the outcome is not known yet: see `settleAfterClientFIN()`.
        if !awaitingDrain.isEmpty && !readEOF {
            completeAwaitingDrain(.completed)
        }
        if !drainActions.isEmpty {
            let actions = drainActions
            drainActions.removeAll()
            actions.forEach { $0() }
        }
        guard state != .closed else { return }
        if case .draining(let action) = state {
            perform(action)
            return
        }
        if closeWhenDrained && state == .idle {
            linger()
            return
        }
        updateReadInterest()
    }

    private func completeAwaitingDrain(_ outcome: ExchangeOutcome) {
        // Swapped out first, so completing may queue more; the buffer goes back for reuse (no allocation per request).
        var drained: [Exchange] = []
        swap(&drained, &awaitingDrain)
        for exchange in drained { complete(exchange, outcome) }
        if awaitingDrain.isEmpty {
            drained.removeAll(keepingCapacity: true)
            awaitingDrain = drained
        }
    }

    /// How long to wait for the client's RST after answering a client that had already sent FIN.
    private static let settleMilliseconds = 25

    /// The client sent FIN before its response was complete. Either it half-closed and is still reading
    /// (the response arrives: `completed`), or it closed the socket — typically a client-side timeout — and
    /// its kernel answers our bytes with RST (`client-closed`). FIN alone cannot tell the two apart; the RST
    /// can, and on loopback it is back within microseconds. So wait briefly, look, then close.
    private func settleAfterClientFIN() {
        guard let bufferEvent, state != .closed, !settling else { return }
        settling = true
        let fd = bufferevent_getfd(bufferEvent)
        waitTimer = LoopTimer(loop: server.loop, milliseconds: Self.settleMilliseconds) { [unowned self] in
            waitTimer = nil
            // After an RST the socket has a pending error and TCP has left CLOSE_WAIT for CLOSE. (recv would
            // only report the FIN it already saw.)
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            var info = tcp_info()
            var infoLength = socklen_t(MemoryLayout<tcp_info>.size)
            let closed = getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &infoLength) == 0
                && info.tcpi_state == UInt8(TCP_CLOSE)
            let reset = error == ECONNRESET || error == EPIPE || closed
            completeAwaitingDrain(reset || pendingOutput > 0 ? .clientClosed : .completed)
            teardown(outcomeForQueued: .cancelled)
        }
    }

    private var settling = false

    /// A close, reset or shutdown, with the output already drained.
    private func perform(_ action: WireAction) {
        guard let exchange = exchanges.first, let bufferEvent else { return }
        let fault = exchange.plan?.fault != nil
        switch action {
        case .reset:
            // Deliberate RST: SO_LINGER {on, 0 s} makes close() abort the connection (RFC 9293 §3.10.7.1).
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(bufferevent_getfd(bufferEvent), SOL_SOCKET, SO_LINGER, &linger,
                       socklen_t(MemoryLayout<Glibc.linger>.size))
            complete(exchange, .resetSent)
            exchanges.removeFirst()
            teardown(outcomeForQueued: .cancelled)
        case .close:
            complete(exchange, fault ? .closedByFault : .completed)
            exchanges.removeFirst()
            linger()
        case .shutdownWrite:
            shutdown(bufferevent_getfd(bufferEvent), Int32(SHUT_WR))
            complete(exchange, .halfClosed)
            exchanges.removeFirst()
            // Requests that arrive from now on are journaled but can never be answered.
            transition(to: .halfClosed)
            if readEOF { teardown(outcomeForQueued: .cancelled) }
        default:
            assertionFailure("connection \(id): perform(\(action)) is not a closing action")
        }
    }

    /// How long a closing connection keeps discarding the client's input before closing anyway.
    private static let lingerMilliseconds = 2000

    /// The latest request said it was the last (`Connection: close`, or HTTP/1.0 without keep-alive).
    private var clientSaidClose = false

    /// Whether the kernel holds bytes from the client that nobody has read (closing now would send RST).
    private var unreadInput: Bool {
        var available: Int32 = 0
        return ioctl(socket, UInt(FIONREAD), &available) != 0 || available > 0
    }

    /// Sends FIN and discards input until the client closes (or the linger timer fires), then closes.
    /// Exchanges still queued behind a closing response are never answered: journaled as cancelled.
    private func linger() {
        guard bufferEvent != nil, state != .lingering else { return }
        for exchange in exchanges { complete(exchange, .cancelled) }
        exchanges.removeAll()
        if readEOF {
            if awaitingDrain.isEmpty { teardown(outcomeForQueued: .cancelled) } else { settleAfterClientFIN() }
            return
        }
        // The client said this was its last request: a plain close sends FIN after our bytes, and there is
        // nothing a lingering close would protect. The close (FIN, socket teardown: as costly as the send) waits
        // in the server's close queue until no timer or socket is ready (at most 250 ms), so a burst of delays
        // expiring together sends every response before closing any connection. Input that arrives meanwhile is
        // read and dropped, as in any lingering close; `closeFromQueue` looks for input the kernel still holds.
        if clientSaidClose && awaitingDrain.isEmpty && pendingOutput == 0 && parser.bufferedByteCount == 0 {
            headerTimer?.cancel()
            headerTimer = nil
            transition(to: .lingering)
            server.closeSoon(self)
            return
        }
        transition(to: .lingering)
        lingerAfterShutdown()
    }

    /// The server's close queue reached this connection (`linger`). Closing with unread input would make the
    /// kernel answer RST, which can destroy the response at the client: then it lingers after all.
    func closeFromQueue() {
        guard state == .lingering, waitTimer == nil else { return }
        if unreadInput { lingerAfterShutdown() } else { teardown(outcomeForQueued: .cancelled) }
    }

    /// FIN, then drop the client's input until it closes or the linger timer fires.
    private func lingerAfterShutdown() {
        guard let bufferEvent else { return }
        shutdown(bufferevent_getfd(bufferEvent), Int32(SHUT_WR))
        headerTimer?.cancel()
        headerTimer = nil
        if readingPaused, let readEvent {
            event_add(readEvent, nil)
            readingPaused = false
        }
        waitTimer = LoopTimer(loop: server.loop, milliseconds: Self.lingerMilliseconds) { [unowned self] in
            waitTimer = nil
            teardown(outcomeForQueued: .cancelled)
        }
    }

    private func complete(_ exchange: Exchange, _ outcome: ExchangeOutcome) {
        guard exchange.end() else { return }
        if let completion = exchange.engineCompletion { server.engine.finish(completion, now: server.now()) }
        guard let sequence = exchange.sequence else { return }
        let now = Clock.monotonicNanos()
        let bytes = exchange.bytesWritten
        server.updateEntry(sequence) {
            $0.outcome = outcome
            $0.bytesWritten = bytes
            $0.finishedAtMonotonicNanos = now
            // The journal's status is the status line sent: none when not a byte went out.
            if bytes == 0 { $0.status = nil }
        }
    }

    // MARK: - Connection events

    private func event(_ events: Int16) {
        if events & Int16(BEV_EVENT_EOF) != 0 {
            clientFinishedSending()
        } else if events & Int16(BEV_EVENT_ERROR) != 0 {
            // ECONNRESET, EPIPE: the client is gone. Whatever was in progress ends here.
            teardown(outcomeForQueued: .clientClosed)
        }
    }

    /// The client shut down its sending side. It may still be reading (a half-close after sending), so
    /// queued responses go on; once they are done, we close.
    private func clientFinishedSending() {
        readEOF = true
        if parser.hasPartialRequest {
            let error = HTTPParseError(
                status: 400, reason: "connection closed by the client in the middle of a request",
                head: nil, requestLinePrefix: parser.partialRequestLine)
            journalAbandoned(error)
        }
        headerTimer?.cancel()
        headerTimer = nil
        switch state {
        case .hanging:
            if let exchange = exchanges.first { complete(exchange, .hangReleased); exchanges.removeFirst() }
            teardown(outcomeForQueued: .clientClosed)
        case .halfClosed, .lingering:
            teardown(outcomeForQueued: .clientClosed)
        case .idle where exchanges.isEmpty:
            if awaitingDrain.isEmpty && pendingOutput == 0 {
                teardown(outcomeForQueued: .cancelled)
            } else {
                settleAfterClientFIN()
            }
        default:
            break
        }
    }

    /// A request cut short by the client: no response is possible, but the journal must show it.
    private func journalAbandoned(_ error: HTTPParseError) {
        let arrival = headArrival ?? (Clock.wallSeconds(), Clock.monotonicNanos())
        var entry = JournalEntry(
            receivedAtWall: arrival.wall, receivedAtMonotonicNanos: arrival.monotonic, connectionID: id,
            indexOnConnection: requestCount, clientAddress: clientAddress, head: nil,
            rawRequestLine: error.requestLinePrefix, malformed: error.reason)
        entry.outcome = .rejected
        entry.finishedAtMonotonicNanos = Clock.monotonicNanos()
        requestCount += 1
        server.record(entry)
    }

    /// Closes the socket and forgets the connection. Exchanges not yet answered get `outcomeForQueued`
    /// (the head one `clientClosed`/`hangReleased` as appropriate).
    func teardown(outcomeForQueued outcome: ExchangeOutcome) {
        guard state != .closed else { return }
        // A hang that ends because the client left was "released"; everything else gets `outcome`.
        if state == .hanging, let head = exchanges.first {
            complete(head, outcome == .clientClosed ? .hangReleased : outcome)
            exchanges.removeFirst()
        }
        for exchange in exchanges { complete(exchange, outcome) }
        exchanges.removeAll()
        // Fully written responses whose bytes were still queued, or whose client is gone, may not have arrived.
        if !awaitingDrain.isEmpty {
            completeAwaitingDrain(pendingOutput > 0 || outcome == .clientClosed ? .clientClosed : .completed)
        }
        waitTimer?.cancel()
        waitTimer = nil
        headerTimer?.cancel()
        headerTimer = nil
        idleTimer?.cancel()
        idleTimer = nil
        state = .closed
        if let readEvent { event_free(readEvent) }
        readEvent = nil
        if let bufferEvent { bufferevent_free(bufferEvent) }
        bufferEvent = nil
        let after = drainActions
        drainActions.removeAll()
        server.connectionClosed(self)
        after.forEach { $0() }
    }

    /// The connection is busy with a response that a scenario reset must not let leak into the next test.
    var hasPendingScriptedResponse: Bool {
        switch state {
        case .responding: return waitTimer != nil
        case .hanging, .draining: return true
        default: return false
        }
    }
}
