/// The timers an HTTP/1.1 connection runs, each for one purpose.
package enum HTTP1Timer: Int, Sendable, CaseIterable {
    /// 408 when a request's header section is not complete in time (RFC 9110 §15.5.9).
    case header
    /// 408 when a request's body is not complete in time after its header section (a body dripped forever).
    case body
    /// A script's `wait` step: a delay or a drip's gap.
    case step
    /// The connection policy's idle close of a kept-alive connection.
    case idle
    /// After the client's FIN: time for its RST to arrive, if it closed instead of half-closing.
    case settle
    /// A lingering close: how long to read and drop the client's input before closing anyway.
    case linger
    /// The rest of a read of pipelined requests, after a slice of them (`HTTP1Settings.requestsPerSlice`): 0 ms, so
    /// that other connections' events run between slices.
    case slice
    /// The rest of a streamed body, after `HTTP1Settings.streamBytesPerTurn` of it went out in one turn: 0 ms, so
    /// other connections' requests and bodies go between.
    case stream
}

/// What an HTTP/1.1 connection machine needs from the world: a transport to write to, timers, and the
/// Dispatcher. Calls on it are the machine's actions; `FakeHTTP1IO` in the tests records them on a fake clock.
/// (Calls rather than a returned list of actions: the request path then allocates nothing per event.)
package protocol HTTP1ConnectionIO: AnyObject {
    /// Writes bytes, or queues what the kernel does not take at once. False when the client is gone.
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// Bytes queued and not yet taken by the kernel.
    var pendingOutput: Int { get }
    /// Whether the kernel holds bytes from the client that nobody has read (closing now would send RST).
    var hasUnreadInput: Bool { get }
    /// Whether the client answered with RST (its socket is closed, not just half-closed).
    var peerHasReset: Bool { get }
    /// Sends the client something its application never sees, so that a closed socket answers RST.
    func probePeer()
    /// FIN; keep reading.
    func shutdownWrite()
    /// The connection's closes send no TLS close_notify from now on (`no-close-notify`); nothing on plain TCP.
    func omitCloseNotify()
    /// Closes the transport now: with RST when `abortive`, else FIN. The machine makes no call after it.
    func close(abortive: Bool)
    /// Asks the server to call `closeFromQueue()` once nothing more urgent is ready.
    func closeSoon()
    func setReading(_ enabled: Bool)
    func startTimer(_ timer: HTTP1Timer, milliseconds: Int)
    func cancelTimer(_ timer: HTTP1Timer)
    /// The clocks, read when a request's first byte arrives.
    func now() -> Arrival
    /// The `Date` field line (`Date: …` CRLF, RFC 9110 §6.6.1) for a head written now, asked as each head that adds
    /// one is rendered: the server's comes from the engine's per-second `HTTPDateCache`, so it costs no formatting.
    func dateLine() -> [UInt8]
    /// Hands a complete request to the Dispatcher; the exchange may not have its script yet.
    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange
    /// Journals a request that is not valid HTTP; the exchange carries the error response.
    /// `body`: what arrived of a request cut short (a body timeout), for the journal.
    func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange
    /// The exchange's 101 is written: the connection switches to a WebSocket session playing `plan`; `early` are the
    /// bytes the client sent after its request. The session finishes the exchange when it ends.
    func upgrade(_ exchange: Exchange, _ plan: WebSocketSessionPlan, early: [UInt8])
    /// Journals a request that reached the server but will never be answered, with how it ended.
    func journalUnanswered(_ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext,
                           _ outcome: ExchangeOutcome)
    /// An exchange has ended; `at` is when, when it was earlier than now (monotonic nanoseconds).
    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?)
    /// A policy close happened after `exchange`'s response (`idle-close` comes after the response ended).
    func policyClosed(after sequence: Int, _ reason: PolicyClose)
}

/// The limits and timings of the HTTP/1.1 connection rules.
package struct HTTP1Settings: Sendable {
    package var parserLimits: HTTPParserLimits
    package var headerTimeoutMilliseconds: Int
    /// A request's body must be complete this long after its header section, else 408 and the connection closes;
    /// 0: no limit. Armed once per body, not per byte, so a body dripped forever cannot keep the connection.
    package var bodyTimeoutMilliseconds = 60_000
    /// Stop reading when this many responses are queued or this much output is unsent (a client pipelining
    /// without reading must not make us buffer without bound).
    package var maxQueuedExchanges = 128
    package var maxPendingOutput = 4 * 1024 * 1024
    /// Requests one parse pass dispatches, or how long it may run, before the rest of the read waits for the next
    /// loop turn with reading off (`HTTP1Timer.slice`). One 64 KiB read holds ~2,000 pipelined GETs: answered in one
    /// turn, they held every other connection for tens of milliseconds (HTTP/2's `streamsPerTurn` is the same rule).
    package var requestsPerSlice = 64
    package var sliceBudgetNanos: UInt64 = 2_000_000
    /// Bytes of a streamed body (a resource, a generated download) one connection writes in a loop turn while the
    /// kernel takes them, before the rest waits for the next turn (`HTTP1Timer.stream`). Without a bound one 1 MiB
    /// download went out whole in one turn (~0.5 ms of copying), and ten connections' requests queued behind each
    /// other's whole bodies.
    package var streamBytesPerTurn = 256 * 1024
    /// How long to wait for the client's RST after its FIN (loopback answers in microseconds).
    package var settleMilliseconds = 25
    /// How long a closing connection keeps reading the client's input before closing anyway.
    package var lingerMilliseconds = 2000

    package init(parserLimits: HTTPParserLimits, headerTimeoutMilliseconds: Int) {
        self.parserLimits = parserLimits
        self.headerTimeoutMilliseconds = headerTimeoutMilliseconds
    }
}

/// The HTTP/1.1 connection rules (RFC 9112 §9), as a pure state machine: events in (`received`,
/// `peerFinished`, `peerFailed`, `drained`, `timerFired`, `closeFromQueue`), actions out through
/// `HTTP1ConnectionIO`. No socket, no clock of its own: the tests drive it on a fake clock.
///
/// Responses go out in the order requests arrived (pipelining, RFC 9112 §9.3.2), so exchanges wait in a queue;
/// the head one's script is carried out step by step. Every change of `state` goes through `transition(to:)`.
/// The reading side is a separate, smaller machine (`ReadSide`): reading goes on while responding, so a
/// client's close is noticed whatever the writing side is doing.
package final class HTTP1Connection {
    /// What the connection is doing with its writing side.
    package enum State: Equatable, Sendable {
        /// No response in progress: waiting for a complete request, or for the head exchange's script.
        case idle
        /// Carrying out the head exchange's steps.
        case responding
        /// A `wait` step: the step timer runs and the next step comes when it fires.
        case waiting
        /// A `stream` step: its bytes go out piece by piece, the next piece when the output has drained, so a
        /// large body is never queued whole.
        case streaming
        /// Waiting for the output to drain before carrying out this abort.
        case draining(ConnectionAbort)
        /// A `hang`: writing nothing until the client closes or the server stops.
        case hanging
        /// Our writing side is shut down (`half-close`); still reading and journaling, never answering.
        case halfClosed
        /// The connection's last response is written; closing once it has drained.
        case closingWhenDrained
        /// The client sent FIN before its responses were complete: waiting `settleMilliseconds` to learn
        /// whether it closed (its kernel answers RST) or only half-closed (it still reads).
        case settling
        /// A plain close, waiting in the server's close queue (`closeFromQueue`).
        case closeQueued
        /// FIN sent; reading the client's input until it closes or the linger timer fires. Closing with unread
        /// input would make the kernel send RST, which could destroy the response before the client reads it
        /// (the "lingering close" of RFC 9112 §9.6). Complete requests that arrive now are journaled as never
        /// answered when the close was the connection policy's (`readsLateRequests`).
        case lingering(readsLateRequests: Bool)
        /// Closed; the machine makes no more calls.
        case closed
        /// Switched to WebSocket after a 101 (`ScriptStep.upgrade`): the connection belongs to the session now; the
        /// machine makes no more calls.
        case upgraded
    }

    /// What the connection is doing with its reading side.
    package enum ReadSide: Equatable, Sendable {
        case open
        /// Not reading: too many responses queued or too much output unsent.
        case paused
        /// The client sent FIN (or its input failed) at this monotonic time.
        case finished(at: UInt64)
    }

    @exclusivity(unchecked) package private(set) var state: State = .idle
    @exclusivity(unchecked) package private(set) var readSide: ReadSide = .open
    /// unowned(unsafe): the IO owns this machine and outlives it; a checked unowned reference would cost
    /// atomic reference counting on every action.
    private unowned(unsafe) let io: HTTP1ConnectionIO
    private let settings: HTTP1Settings
    @exclusivity(unchecked) private var parser: HTTPRequestParser
    @exclusivity(unchecked) private var renderer = HTTP1Renderer()
    /// Bytes rendered since the last write: a script's consecutive byte steps go out in one write.
    @exclusivity(unchecked) private var output = OutputBuffer()
    /// Past this many bytes queued for the client, a growing script's next steps are not pulled until the
    /// output drains.
    static let growingQueueLimit = 256 * 1024

    /// What a `stream` step has still to write (`pumpStream`).
    @exclusivity(unchecked) private var streamLeft: BodySlice?
    /// Where generated bytes are made, one piece at a time; allocated by the first stream that needs it.
    @exclusivity(unchecked) private var streamScratch: UnsafeMutableRawBufferPointer?
    /// The bytes a stream step writes at once: a send per 64 KiB, and at most that much queued past the kernel.
    static let streamPiece = 64 * 1024
    @exclusivity(unchecked) private var exchanges: [Exchange] = []
    /// Exchanges whose bytes are all queued; they complete when the output drains.
    @exclusivity(unchecked) private var awaitingDrain: [Exchange] = []
    /// The timers running, one bit each (`HTTP1Timer.rawValue`): a set that costs no hashing per request.
    @exclusivity(unchecked) private var armed: UInt8 = 0
    @exclusivity(unchecked) private var requestCount = 0
    @exclusivity(unchecked) private var headArrival: Arrival?
    /// Counts read events; `headArrivalPass` is the one that read the clocks for `headArrival`.
    @exclusivity(unchecked) private var parsePass = 0
    @exclusivity(unchecked) private var headArrivalPass = -1
    /// The last journaled response of a kept-alive connection, for marking an idle close on it.
    @exclusivity(unchecked) private var lastSequence: Int?

    deinit { streamScratch?.deallocate() }

    package init(io: HTTP1ConnectionIO, settings: HTTP1Settings) {
        self.io = io
        self.settings = settings
        parser = HTTPRequestParser(limits: settings.parserLimits)
    }

    /// Every change of `state` but the one to `closed` (`teardown`, legal from anywhere) comes through here; an
    /// illegal transition traps in debug builds.
    private func transition(to next: State) {
        assert(Self.isLegal(from: state, to: next), "HTTP/1.1 connection: illegal transition \(state) → \(next)")
        state = next
    }

    /// The transitions the connection rules allow.
    static func isLegal(from: State, to next: State) -> Bool {
        switch (from, next) {
        case (.idle, .responding), (.responding, .idle), (.responding, .waiting), (.waiting, .responding),
             (.responding, .streaming), (.streaming, .responding),
             (.responding, .draining), (.responding, .hanging), (.responding, .halfClosed),
             (.draining, .halfClosed), (.idle, .closingWhenDrained), (.lingering(true), .lingering(false)):
            return true
        case (.idle, .settling), (.responding, .settling), (.draining, .settling), (.closingWhenDrained, .settling):
            // The client's FIN came before the last response drained.
            return true
        case (.idle, .closeQueued), (.responding, .closeQueued), (.draining, .closeQueued),
             (.closingWhenDrained, .closeQueued):
            return true
        case (.idle, .lingering), (.responding, .lingering), (.draining, .lingering), (.closingWhenDrained, .lingering),
             (.closeQueued, .lingering):
            return true
        default:
            return false
        }
    }

    /// Whether a scripted response is in progress that a scenario reset must not let leak into the next test.
    package var hasPendingScriptedResponse: Bool {
        switch state {
        case .waiting, .streaming, .hanging, .draining: return true
        default: return false
        }
    }

    private var isClosing: Bool {
        switch state {
        case .closed, .lingering, .closeQueued, .upgraded: return true
        default: return false
        }
    }

    // MARK: - Timers

    private func start(_ timer: HTTP1Timer, _ milliseconds: Int) {
        if isArmed(timer) { io.cancelTimer(timer) }
        armed |= 1 << timer.rawValue
        io.startTimer(timer, milliseconds: milliseconds)
    }

    private func cancel(_ timer: HTTP1Timer) {
        guard isArmed(timer) else { return }
        armed &= ~(1 << timer.rawValue)
        io.cancelTimer(timer)
    }

    private func isArmed(_ timer: HTTP1Timer) -> Bool { armed & (1 << timer.rawValue) != 0 }

    package func timerFired(_ timer: HTTP1Timer) {
        guard isArmed(timer), state != .closed else { return }
        armed &= ~(1 << timer.rawValue)
        switch timer {
        case .header: headerTimedOut()
        case .body: bodyTimedOut()
        case .step:
            if state == .waiting {
                transition(to: .responding)
                run()
            }
        case .idle:
            // A plain close, no lingering: exactly what a server's keep-alive timeout does.
            if state == .idle && exchanges.isEmpty {
                if let lastSequence { io.policyClosed(after: lastSequence, .idleClose) }
                teardown(.cancelled)
            }
        case .settle: settled()
        case .linger: teardown(.cancelled)
        case .slice:
            sliceWaiting = false
            parseAvailable()
        case .stream:
            if state == .streaming, pumpStream() { run() }
        }
    }

    // MARK: - Reading

    /// Bytes from the client.
    package func received(_ bytes: UnsafeRawBufferPointer) {
        cancel(.idle)
        switch state {
        case .closed, .upgraded: return
        case .closeQueued:
            // Kept for the lingering close `closeFromQueue` then chooses, which journals them.
            parser.append(bytes)
            return
        case .lingering(let readsLateRequests):
            guard readsLateRequests else { return }
            parser.append(bytes)
            journalLateRequests()
            return
        default:
            parser.append(bytes)
            parseAvailable()
        }
    }

    private func parseAvailable() {
        parsePass &+= 1
        // The limits are looked at before each request, not once per read: one 64 KiB read of pipelined GETs is
        // ~2,000 requests, whose responses would all be queued at once whatever `maxPendingOutput` says. What is
        // left in the parser waits for the output to drain (`updateReadInterest` parses it on resuming), or, after
        // a slice of requests, for the next loop turn (`HTTP1Timer.slice`).
        var dispatched = 0
        var sliceStart: UInt64 = 0
        while !isClosing, !awaitingUpgrade, !sliceWaiting, !outputFull, let event = parser.next() {
            if case .head = event {} else {
                if dispatched == 0 { sliceStart = io.now().monotonicNanos }
                dispatched += 1
                if dispatched >= settings.requestsPerSlice
                    || (dispatched & 7 == 0 && io.now().monotonicNanos &- sliceStart >= settings.sliceBudgetNanos) {
                    sliceWaiting = true
                    start(.slice, 0)
                }
            }
            switch event {
            case .head(let head):
                noteHeadArrival()
                // RFC 9110 §10.1.1: answer 100 at once, unless an earlier response is still being written
                // (interleaving it would corrupt that response; the client then sends its body after its own
                // short wait). When body bytes came with the head, the client is not waiting: 100 may be omitted.
                if head.expectsContinue && exchanges.isEmpty && state == .idle && parser.bufferedByteCount == 0 {
                    let ok = Self.continueLine.withUnsafeBytes { io.write($0) }
                    if !ok { teardown(.clientClosed); return }
                }
            case .request(let request):
                noteHeadArrival()
                // The body (if any) is complete: the next request's body, if one began, gets a full timeout.
                cancel(.body)
                received(request)
            case .failure(let error):
                noteHeadArrival()
                rejected(error)
            }
        }
        guard !isClosing else { return }
        updateRequestTimers()
        updateReadInterest()
    }

    private static let continueLine = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    private func noteHeadArrival() {
        if headArrival == nil {
            headArrival = io.now()
            headArrivalPass = parsePass
        }
    }

    private func nextContext() -> RequestContext {
        let arrival = headArrival ?? io.now()
        let context = RequestContext(
            arrival: arrival, arrivedNow: headArrival != nil && headArrivalPass == parsePass,
            indexOnConnection: requestCount)
        headArrival = nil
        requestCount += 1
        return context
    }

    /// 408 when a request's header section is not complete within the header timeout. Armed when the first
    /// byte of a head arrives, not re-armed per byte, so a slowloris client cannot keep a connection by trickling.
    /// And 408 when its body is not complete within the body timeout of the header section's end.
    private func updateRequestTimers() {
        if sliceWaiting || outputFull {
            // Not reading: requests wait in the parser for the server, not for the client. The deadlines start
            // again when reading does.
            cancel(.header)
            cancel(.body)
            return
        }
        if !parser.hasPartialRequest || parser.isReadingBody {
            cancel(.header)
        } else if !isArmed(.header) {
            start(.header, settings.headerTimeoutMilliseconds)
        }
        if !parser.isReadingBody {
            cancel(.body)
        } else if settings.bodyTimeoutMilliseconds > 0 && !isArmed(.body) {
            start(.body, settings.bodyTimeoutMilliseconds)
        }
    }

    private func bodyTimedOut() {
        let error = HTTPParseError(
            status: 408, reason: "request body not complete within \(settings.bodyTimeoutMilliseconds) ms of its header section",
            head: parser.partialHead, requestLinePrefix: parser.partialRequestLine)
        let body = parser.partialBody
        parser = HTTPRequestParser(limits: settings.parserLimits)
        rejected(error, body: body)
    }

    private func headerTimedOut() {
        let error = HTTPParseError(
            status: 408, reason: "request header section not complete within \(settings.headerTimeoutMilliseconds) ms",
            head: nil, requestLinePrefix: parser.partialRequestLine)
        noteHeadArrival()
        parser = HTTPRequestParser(limits: settings.parserLimits)
        rejected(error)
    }

    private func received(_ request: HTTPRequest) {
        let exchange = io.dispatch(request, nextContext())
        // What follows an upgrade request may be the new protocol's bytes: parse no further until its answer says.
        if request.head.asksForWebSocket { awaitingUpgrade = true }
        enqueue(exchange)
    }

    /// A WebSocket upgrade request is waiting for its answer (`received`): a 101 hands the bytes after it to the
    /// session, anything else lets parsing go on.
    @exclusivity(unchecked) private var awaitingUpgrade = false

    /// A request that is not valid HTTP: the Dispatcher journals it and answers with its status and a close
    /// (after the responses queued before it, to keep their order).
    private func rejected(_ error: HTTPParseError, body: [UInt8] = []) {
        // What follows a malformed request cannot be framed: the lingering close reads and drops it.
        framingLost = true
        enqueue(io.reject(error, nextContext(), body: body))
    }

    /// A malformed request was answered: the bytes after it are not requests (`linger`, `journalBuffered`).
    @exclusivity(unchecked) private var framingLost = false

    private func enqueue(_ exchange: Exchange) {
        // After a half-close nothing can be answered: the exchange waits, journaled, until the client goes.
        exchanges.append(exchange)
        startNextIfIdle()
    }

    /// Requests that arrive on a connection the server is closing — by its connection policy, after a response that
    /// closed it (`Connection: close`, a fault), or pipelined behind either: journaled `connection-closing`, never
    /// answered (RFC 9112 §9.6: a server does not process requests after it closes).
    private func journalLateRequests() {
        while case .lingering(true) = state, let event = parser.next() {
            switch event {
            case .head: noteHeadArrival()
            case .request(let request):
                noteHeadArrival()
                io.journalUnanswered(request, nil, nextContext(), .connectionClosing)
            case .failure:
                // Not worth answering on a closing connection; stop parsing what follows.
                transition(to: .lingering(readsLateRequests: false))
            }
        }
    }

    /// A slice of a read's requests was dispatched; the rest wait for `HTTP1Timer.slice`.
    @exclusivity(unchecked) private var sliceWaiting = false

    private var outputFull: Bool {
        exchanges.count >= settings.maxQueuedExchanges || io.pendingOutput >= settings.maxPendingOutput
    }

    private func updateReadInterest() {
        switch readSide {
        case .finished: return
        case .open, .paused:
            let shouldPause = outputFull || sliceWaiting
            if shouldPause && readSide == .open {
                readSide = .paused
                io.setReading(false)
            } else if !shouldPause && readSide == .paused {
                readSide = .open
                io.setReading(true)
                // Requests may be waiting in the parser from before the pause.
                parseAvailable()
            }
        }
    }

    // MARK: - Writing

    private func startNextIfIdle() {
        guard state == .idle, let exchange = exchanges.first else { return }
        guard exchange.hasScript else {
            exchange.whenScriptArrives = { [weak self] in self?.startNextIfIdle() }
            return
        }
        transition(to: .responding)
        run()
    }

    /// Writes what has been rendered. False when the client is gone: the connection has been torn down.
    private func flush() -> Bool {
        guard !output.isEmpty else { return true }
        let ok = output.withBytes { io.write($0) }
        if let exchange = exchanges.first { exchange.bytesWritten += output.count }
        output.reset()
        if !ok { teardown(.clientClosed) }
        return ok
    }

    /// Carries out the head exchange's steps until one has to wait.
    private func run() {
        guard state == .responding, let exchange = exchanges.first else { return }
        while true {
            if exchange.isGrowing, output.count + io.pendingOutput >= Self.growingQueueLimit {
                // A growing script (a proxied body) is pulled only as fast as the client takes it: its producer
                // sees the bytes left in the exchange and slows down.
                guard flush() else { return }
                if io.pendingOutput >= Self.growingQueueLimit {
                    transition(to: .streaming)
                    return
                }
            }
            switch exchange.next() {
            case .notYet:
                // A growing script's next steps come later: what is rendered goes out meanwhile.
                guard exchange.hasScript, flush() else { return }
                exchange.whenScriptArrives = { [weak self] in
                    guard let self, state == .responding, exchanges.first === exchange else { return }
                    run()
                }
                return
            case .finished:
                guard flush() else { return }
                finishExchange()
                return
            case .step(let step):
                switch step {
                case .head(let head):
                    // The date is asked for only by a head that adds one: one clock read per response.
                    renderer.render(head: head, dateLine: head.addsDate ? io.dateLine() : [], into: &output)
                case .body, .end, .raw:
                    renderer.render(step, into: &output, date: { [] })
                case .stream(let slice):
                    guard flush() else { return }
                    streamLeft = slice
                    transition(to: .streaming)
                    guard pumpStream() else { return }
                case .wait(let milliseconds):
                    guard flush() else { return }
                    transition(to: .waiting)
                    start(.step, milliseconds)
                    return
                case .abortExchange:
                    // HTTP/1.1 cannot abandon one response and keep the connection: close after what was written.
                    guard flush() else { return }
                    abort(.close)
                    return
                case .abortConnection(let abort):
                    guard flush() else { return }
                    self.abort(abort)
                    return
                case .endConnection:
                    // A planned end after a complete response: FIN once it has drained, then a lingering close (the
                    // close queue when the client asked for the close; late requests journaled when the connection
                    // policy ended it: `closeGracefully`).
                    guard flush() else { return }
                    abort(.close)
                    return
                case .hang:
                    guard flush() else { return }
                    transition(to: .hanging)
                    return
                case .http2:
                    // Frame actions exist only on HTTP/2; the loader refuses them on HTTP/1.1 routes.
                    assertionFailure("an HTTP/2 frame step on an HTTP/1.1 connection")
                case .upgrade(let plan):
                    // The 101 is out: the connection is the session's from here, with what the client sent after
                    // its request.
                    guard flush() else { return }
                    let exchange = removeHead()
                    for timer in HTTP1Timer.allCases where isArmed(timer) { io.cancelTimer(timer) }
                    armed = 0
                    state = .upgraded
                    io.upgrade(exchange, plan, early: parser.takeBuffered())
                    return
                }
            }
        }
    }

    /// The stream step's pieces, written while the transport takes them at once (the kernel's buffer has room);
    /// true once all are written and the script goes on, false when the rest waits for `drained` or the
    /// client is gone.
    private func pumpStream() -> Bool {
        guard state == .streaming, let exchange = exchanges.first else { return false }
        guard let slice = streamLeft else {
            // A growing script waited for the output to drain (`run`): it goes on.
            transition(to: .responding)
            return true
        }
        if streamScratch == nil, case .generated = slice.source.storage {
            streamScratch = .allocate(byteCount: Self.streamPiece, alignment: 16)
        }
        var sent = 0
        var gone = false
        let chunked = renderer.isChunked
        slice.source.forEachPiece(
            of: slice.range, piece: Self.streamPiece,
            scratch: streamScratch ?? UnsafeMutableRawBufferPointer(start: nil, count: 0)
        ) { piece in
            if chunked {
                let size = Array((String(piece.count, radix: 16) + "\r\n").utf8)
                gone = !size.withUnsafeBytes { io.write($0) } || !io.write(piece) || ![13, 10].withUnsafeBytes { io.write($0) }
            } else {
                gone = !io.write(piece)
            }
            guard !gone else { return false }
            sent += piece.count
            return io.pendingOutput == 0 && sent < settings.streamBytesPerTurn
        }
        exchange.bytesWritten += sent
        if gone {
            teardown(.clientClosed)
            return false
        }
        if sent < slice.count {
            streamLeft = BodySlice(slice.source, (slice.range.lowerBound + sent)..<slice.range.upperBound)
            // The kernel took all of it: the rest goes on the next turn, after the other connections' events
            // (when it did not, `drained` goes on).
            if io.pendingOutput == 0 { start(.stream, 0) }
            return false
        }
        streamLeft = nil
        transition(to: .responding)
        return true
    }

    private func abort(_ abort: ConnectionAbort) {
        if io.pendingOutput > 0 {
            transition(to: .draining(abort))
        } else {
            perform(abort)
        }
    }

    /// Every step of the head exchange has run: it completes when its bytes have drained.
    private func finishExchange() {
        let exchange = removeHead()
        awaitingDrain.append(exchange)
        // The upgrade was refused (a 401, a 503 with Retry-After): what follows is HTTP again (parsed below).
        let resumeParsing = awaitingUpgrade && exchanges.isEmpty
        if resumeParsing { awaitingUpgrade = false }
        transition(to: .idle)
        if io.pendingOutput == 0 { drained() }
        guard state == .idle else { return }
        if !exchange.keepAlive {
            transition(to: .closingWhenDrained)
            if io.pendingOutput == 0 { closeGracefully(after: exchange) }
            return
        }
        if resumeParsing && parser.bufferedByteCount > 0 { parseAvailable() }
        if case .finished = readSide, exchanges.isEmpty {
            settle()
            return
        }
        startNextIfIdle()
        updateReadInterest()
        if state == .idle, exchanges.isEmpty, !parser.hasPartialRequest,
           let idle = exchange.idleCloseMilliseconds {
            lastSequence = exchange.sequence
            start(.idle, idle)
        }
    }

    /// Takes the head exchange off the queue; the common single-exchange queue keeps its storage.
    @discardableResult
    private func removeHead() -> Exchange {
        if exchanges.count == 1 {
            let exchange = exchanges[0]
            exchanges.removeLast()
            return exchange
        }
        return exchanges.removeFirst()
    }

    /// The output buffer is empty.
    package func drained() {
        // After the client's FIN the outcome is not known yet: see `settle()`.
        if !awaitingDrain.isEmpty, readSide.isFinished == false {
            completeAwaitingDrain(.completed)
        }
        switch state {
        case .closed: return
        case .streaming: if pumpStream() { run() }
        case .draining(let abort): perform(abort)
        case .closingWhenDrained: closeGracefully(after: nil)
        default: updateReadInterest()
        }
    }

    private func completeAwaitingDrain(_ outcome: ExchangeOutcome) {
        // Swapped out first, so completing may queue more; the buffer goes back for reuse.
        var drained: [Exchange] = []
        swap(&drained, &awaitingDrain)
        for exchange in drained { complete(exchange, outcome) }
        if awaitingDrain.isEmpty {
            drained.removeAll(keepingCapacity: true)
            awaitingDrain = drained
        }
    }

    /// The client sent FIN before its responses were complete. Either it half-closed and is still reading
    /// (the responses arrive: `completed`), or it closed the socket, typically a client-side timeout, and its
    /// kernel answers our bytes with RST (`client-closed`). FIN alone cannot tell the two apart; the RST can,
    /// and on loopback it is back within microseconds. So wait briefly, look, then close.
    private func settle() {
        guard state != .closed, state != .settling else { return }
        transition(to: .settling)
        start(.settle, settings.settleMilliseconds)
    }

    private func settled() {
        switch state {
        case .settling:
            completeAwaitingDrain(io.peerHasReset || io.pendingOutput > 0 ? .clientClosed : .completed)
            teardown(.cancelled)
        case .waiting:
            // A FIN during a wait step: the probe tells a client that left from one that half-closed.
            guard io.peerHasReset, case .finished(let at) = readSide else { return }
            if let exchange = exchanges.first, exchange.bytesWritten == 0 {
                removeHead()
                complete(exchange, .clientClosed, at: at)
            }
            teardown(.clientClosed)
        default:
            break
        }
    }

    /// A close, reset or shutdown, with the output already drained.
    private func perform(_ abort: ConnectionAbort) {
        guard !exchanges.isEmpty else { return }
        // Off the queue before it completes, and nothing more once a completion closed the connection: completing
        // may stop the server (`POST /__faultline/shutdown` with `Connection: close`), which tears every
        // connection down, this one included.
        let exchange = removeHead()
        // For the journal only: FIN carries out a fault's close, a planned end (`endConnection`) and an exchange
        // abandoned without a fault (a proxied body whose upstream failed) alike; the outcome says whether the
        // script was a fault's.
        let byFault = exchange.isFault
        switch abort {
        case .reset:
            complete(exchange, .resetSent)
            // The requests pipelined behind it reached the server: journaled before the RST ends the connection.
            journalBuffered(.connectionClosing)
            teardown(.cancelled, abortive: true)
        case .close, .closeWithoutNotify:
            if abort == .closeWithoutNotify { io.omitCloseNotify() }
            complete(exchange, byFault ? .closedByFault : .completed)
            guard state != .closed else { return }
            closeGracefully(after: exchange)
        case .shutdownWrite:
            io.shutdownWrite()
            complete(exchange, .halfClosed)
            guard state != .closed else { return }
            // Requests that arrive from now on are journaled but can never be answered.
            transition(to: .halfClosed)
            if case .finished = readSide { teardown(.cancelled) }
        }
    }

    /// Sends FIN and reads the client's input until it closes (or the linger timer fires), then closes.
    /// Exchanges still queued behind a closing response are never answered: journaled as cancelled.
    /// `last` is the response that closes the connection, when known.
    private func closeGracefully(after last: Exchange?) {
        guard !isClosing else { return }
        for exchange in exchanges { complete(exchange, .cancelled) }
        exchanges.removeAll()
        if case .finished = readSide {
            if awaitingDrain.isEmpty { teardown(.cancelled) } else { settle() }
            return
        }
        // The client said this was its last request: a plain close sends FIN after our bytes, and there is
        // nothing a lingering close would protect. The close (FIN, socket teardown: as costly as the send) waits
        // in the server's close queue until no timer or socket is ready, so a burst of delays expiring together
        // sends every response before closing any connection. `closeFromQueue` looks for unread input.
        if last?.clientWantsClose == true && awaitingDrain.isEmpty && io.pendingOutput == 0
            && parser.bufferedByteCount == 0 {
            cancel(.header)
            transition(to: .closeQueued)
            io.closeSoon()
            return
        }
        // Requests pipelined behind the close, or arriving during the linger, are journaled `connection-closing`.
        linger(readsLateRequests: !framingLost)
    }

    /// The server's close queue reached this connection. Closing with unread input would make the kernel
    /// answer RST, which can destroy the response at the client: then it lingers after all.
    package func closeFromQueue() {
        guard state == .closeQueued else { return }
        if io.hasUnreadInput || parser.bufferedByteCount > 0 {
            linger(readsLateRequests: !framingLost)
        } else {
            teardown(.cancelled)
        }
    }

    /// FIN, then read the client's input until it closes or the linger timer fires.
    private func linger(readsLateRequests: Bool) {
        transition(to: .lingering(readsLateRequests: readsLateRequests))
        io.shutdownWrite()
        cancel(.header)
        if readSide == .paused {
            readSide = .open
            io.setReading(true)
        }
        start(.linger, settings.lingerMilliseconds)
        if readsLateRequests { journalLateRequests() }
    }

    private func complete(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64? = nil) {
        guard exchange.end() else { return }
        io.finished(exchange, outcome, at: at)
    }

    // MARK: - Connection events

    /// The client shut down its sending side. It may still be reading (a half-close after sending), so
    /// queued responses go on; once they are done, we close.
    package func peerFinished() {
        guard state != .closed, !readSide.isFinished else { return }
        let now = io.now().monotonicNanos
        readSide = .finished(at: now)
        if parser.hasPartialRequest {
            let error = HTTPParseError(
                status: 400, reason: "connection closed by the client in the middle of a request",
                head: parser.partialHead, requestLinePrefix: parser.partialRequestLine)
            // A cut body: its head and what arrived of it are the evidence.
            let request = error.head.map { HTTPRequest(head: $0, body: parser.partialBody) }
            io.journalUnanswered(request, error, nextContext(), .rejected)
            // Journaled: nothing may journal it again (`journalBuffered` at the teardown).
            parser = HTTPRequestParser(limits: settings.parserLimits)
        }
        // The cut request is journaled: neither deadline may fire for it later.
        cancel(.header)
        cancel(.body)
        switch state {
        case .hanging:
            if !exchanges.isEmpty { complete(removeHead(), .hangReleased) }
            teardown(.clientClosed)
        case .halfClosed, .lingering, .closeQueued:
            teardown(.clientClosed)
        case .idle where exchanges.isEmpty:
            if awaitingDrain.isEmpty && io.pendingOutput == 0 { teardown(.cancelled) } else { settle() }
        case .waiting:
            // Did the client leave, or only half-close? Ask its kernel: a closed socket answers RST.
            io.probePeer()
            start(.settle, settings.settleMilliseconds)
        default:
            break
        }
    }

    /// Requests that reached the server and will never be dispatched: the complete ones still in the parser, each
    /// journaled with `outcome`, then one cut short (its head and what arrived of its body, as a client's FIN cutting
    /// it journals it) — a network drop, the server stopping, a reset behind them. After a malformed request the
    /// parser has failed and the framing of what follows is lost: nothing more is journaled.
    private func journalBuffered(_ outcome: ExchangeOutcome) {
        // After an upgrade request, what follows may be the new protocol's bytes, not requests.
        guard !awaitingUpgrade, !framingLost else { return }
        while let event = parser.next() {
            switch event {
            case .head:
                noteHeadArrival()
            case .request(let request):
                noteHeadArrival()
                io.journalUnanswered(request, nil, nextContext(), outcome)
            case .failure:
                return
            }
        }
        guard parser.hasPartialRequest else { return }
        noteHeadArrival()
        let error = HTTPParseError(
            status: 400, reason: "the connection ended in the middle of a request",
            head: parser.partialHead, requestLinePrefix: parser.partialRequestLine)
        let request = error.head.map { HTTPRequest(head: $0, body: parser.partialBody) }
        io.journalUnanswered(request, error, nextContext(), outcome == .connectionClosing ? .cancelled : outcome)
        parser = HTTPRequestParser(limits: settings.parserLimits)
    }

    /// The client's input failed (ECONNRESET): it is gone. Whatever was in progress ends here.
    package func peerFailed() {
        if !readSide.isFinished { readSide = .finished(at: io.now().monotonicNanos) }
        teardown(.clientClosed)
    }

    /// Ends the connection. Exchanges not yet answered get `outcome` (the head one `hang-released` when a hang
    /// ends because the client left).
    package func teardown(_ outcome: ExchangeOutcome, abortive: Bool = false) {
        guard state != .closed, state != .upgraded else { return }
        // What reached the server and was never dispatched (a slice waiting, the output full, a close) goes in the
        // journal with how the connection ended: `connection-closing` on a connection the server was closing.
        switch state {
        case .lingering, .closeQueued, .halfClosed: journalBuffered(.connectionClosing)
        default: journalBuffered(outcome == .cancelled ? .connectionClosing : outcome)
        }
        let wasHanging = state == .hanging
        // Closed before anything is completed: a completion may stop the server, which tears every connection
        // down, this one included; that call must find it closed.
        state = .closed
        for timer in HTTP1Timer.allCases where isArmed(timer) { io.cancelTimer(timer) }
        armed = 0
        var queued: [Exchange] = []
        swap(&queued, &exchanges)
        if wasHanging, let head = queued.first {
            complete(head, outcome == .clientClosed ? .hangReleased : outcome)
            queued.removeFirst()
        }
        for exchange in queued { complete(exchange, outcome) }
        // Fully written responses whose bytes were still queued, or whose client is gone, may not have arrived.
        if !awaitingDrain.isEmpty {
            completeAwaitingDrain(io.pendingOutput > 0 || outcome == .clientClosed ? .clientClosed : .completed)
        }
        io.close(abortive: abortive)
    }
}

extension HTTP1Connection.ReadSide {
    var isFinished: Bool {
        if case .finished = self { return true }
        return false
    }
}
