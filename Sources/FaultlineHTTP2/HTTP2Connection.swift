import CNghttp2
import FaultlineCore

/// An HTTP/2 connection (RFC 9113) on nghttp2, server side (ARCHITECTURE §4a). nghttp2 keeps the framing, HPACK,
/// flow control and stream states; this class assembles each stream's request, hands it to the Dispatcher as an
/// `Exchange`, and carries out the exchange's script as frames: a `head` becomes HEADERS, `body` DATA, `end`
/// END_STREAM, `wait` a per-stream timer (streams never wait for each other), `abortExchange` RST_STREAM, and the
/// `http2` steps GOAWAY, RST_STREAM with a code, or raw frames. nghttp2 writes into memory (`mem_send`), and what
/// it writes goes to the transport, so TLS and plain TCP carry the same frames.
package final class HTTP2Connection {
    unowned(unsafe) let io: HTTP2ConnectionIO
    let settings: HTTP2ConnectionSettings
    @exclusivity(unchecked) var session: OpaquePointer?
    @exclusivity(unchecked) var streams: [Int32: HTTP2Stream] = [:]
    @exclusivity(unchecked) var requestCount = 0
    @exclusivity(unchecked) private(set) var state = HTTP2ConnectionState.open
    /// The highest stream id the client opened.
    @exclusivity(unchecked) package internal(set) var highestStream: Int32 = 0
    /// The graceful GOAWAY's timer: the final GOAWAY goes out when it fires.
    @exclusivity(unchecked) var gracefulTimer: CancellableTimer?
    /// GOAWAYs a script or the server submitted and nghttp2 has not sent yet (any other is nghttp2's own).
    @exclusivity(unchecked) var ourGoaways = 0
    /// A GOAWAY of the server's has gone out (ours or nghttp2's): new client streams are ignored from now on.
    @exclusivity(unchecked) var goawayWentOut = false
    /// How the streams ended when the connection began to close (the first `endAllStreams`).
    @exclusivity(unchecked) var closingOutcome: ExchangeOutcome?
    /// The connection error journaled for this connection (at most one).
    @exclusivity(unchecked) var reportedError: String?
    /// nghttp2's last message about what the client got wrong (its error callback).
    @exclusivity(unchecked) var lastLibraryError: String?

    // Session I/O (HTTP2Connection+Output.swift: the re-entrancy rule is written there).
    /// Inside nghttp2 (`mem_recv`, `mem_send`): nothing may call it, so work waits in `deferred` / `readyToRun`.
    @exclusivity(unchecked) var inLibrary = false
    /// Another `mem_send` pass is due before `flush` returns.
    @exclusivity(unchecked) var flushWanted = false
    /// Frames `flush` has taken from nghttp2 and not yet written; up to 16 KB of capacity is kept between flushes.
    @exclusivity(unchecked) var gathered: [UInt8] = []
    /// Whether any frame went out yet: the first must be the server's SETTINGS.
    @exclusivity(unchecked) var wroteAnything = false
    /// `gathered` is being handed to the transport (a write may call back: an admin exchange's completion).
    @exclusivity(unchecked) var writingGathered = false
    /// Reading is paused while the transport's queue is over `maxPendingOutput`.
    @exclusivity(unchecked) var readingPaused = false
    /// Work that had to wait until nghttp2 returned, run between two `mem_send` passes (`runDeferred`).
    @exclusivity(unchecked) var deferred: [HTTP2DeferredWork] = []
    /// Streams whose request completed inside nghttp2: their scripts run once it has returned. A list of
    /// streams, not work items: nothing to allocate per request.
    @exclusivity(unchecked) var readyToRun: [HTTP2Stream] = []
    /// The batch of `readyToRun` being run now: a stream's `run` leaves the flush to the batch's end.
    @exclusivity(unchecked) var running: [HTTP2Stream] = []
    @exclusivity(unchecked) var runningReady = false
    /// Bytes read but not yet given to nghttp2: a turn's share ended (`feed`); `backlogTimer` resumes them.
    @exclusivity(unchecked) var backlog: [UInt8] = []
    @exclusivity(unchecked) var backlogTimer: CancellableTimer?
    /// Streams begun in the current read, whose request may still be arriving when it ends.
    @exclusivity(unchecked) var begunThisRead: [HTTP2Stream] = []
    /// The last head submitted and its fields (HTTP2Fields): the next stream with the same head reuses them.
    @exclusivity(unchecked) var lastHead: ResponseHead?
    @exclusivity(unchecked) var lastFields = HTTP2Fields()
    /// The date line `lastFields` carries (empty when its head adds none).
    @exclusivity(unchecked) var lastDate: [UInt8] = []

    // PINGs and what the client sent (HTTP2Connection+Peer.swift).
    @exclusivity(unchecked) var summary = HTTP2ConnectionSummary()
    @exclusivity(unchecked) var pingTimer: CancellableTimer?
    /// Each PING in flight: its opaque data (a counter) and when it went out (monotonic nanoseconds).
    @exclusivity(unchecked) var pingsInFlight: [UInt64: UInt64] = [:]
    @exclusivity(unchecked) var pingCounter: UInt64 = 0
    /// The client's last GOAWAY (RFC 9113 §6.8), with how many it sent.
    @exclusivity(unchecked) var clientGoaway: HTTP2ClientGoaway?

    var closed: Bool { state == .closed }

    /// Moves the connection to `next` (checked against `HTTP2ConnectionState.isLegal` in debug builds).
    func enter(_ next: HTTP2ConnectionState) {
        assert(HTTP2ConnectionState.isLegal(from: state, to: next), "HTTP/2 connection: \(state) → \(next) is not legal")
        state = next
    }

    package init(io: HTTP2ConnectionIO, settings: HTTP2ConnectionSettings) {
        self.io = io
        self.settings = settings
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        Self.install(callbacks)
        var options: OpaquePointer?
        nghttp2_option_new(&options)
        defer { nghttp2_option_del(options) }
        // The connection preface is checked by nghttp2 (a bad one is a connection error, answered with GOAWAY).
        nghttp2_option_set_no_recv_client_magic(options, 0)
        nghttp2_option_set_max_outbound_ack(options, 1000)
        nghttp2_option_set_max_settings(options, 32)
        if !settings.ackPings { nghttp2_option_set_no_auto_ping_ack(options, 1) }
        var created: OpaquePointer?
        nghttp2_session_server_new2(&created, callbacks, Unmanaged.passUnretained(self).toOpaque(), options)
        session = created
        // No SETTINGS_MAX_HEADER_LIST_SIZE: nghttp2 would refuse a larger header section with REFUSED_STREAM,
        // which tells the client to retry it; the parser limit answers 431 instead, as over HTTP/1.1.
        var entries = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: settings.maxConcurrentStreams),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.initialWindowSize),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_FRAME_SIZE.rawValue), value: settings.maxFrameSize),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_HEADER_TABLE_SIZE.rawValue), value: settings.headerTableSize),
        ]
        nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        summary.pingsAcknowledged = settings.ackPings
        schedulePing()
    }

    deinit {
        nghttp2_session_del(session)
    }

    // MARK: - Events from the transport

    /// At most about this many streams begin in one loop turn. A read is given to nghttp2 in slices of
    /// `sliceBytes`; once a slice has begun this many streams, the rest of the read waits in `backlog` for a 0 ms
    /// timer, with reading off, so other connections are served in between. One 64 KiB read of HEADERS and
    /// RST_STREAM pairs (a rapid-reset attack, CVE-2023-44487) begins about 2,000 streams, each journaled,
    /// matched and answered: done in one turn, that held the loop for 150–220 ms in a debug build while a
    /// well-behaved client on another connection waited.
    package static let streamsPerTurn = 64
    /// A read's turn also ends once it has taken this long (frames that begin no stream but cost nghttp2 work:
    /// 64 KiB of PRIORITY frames for idle streams is some 4,700 changes to its priority tree).
    package static let turnBudgetNanos: UInt64 = 2_000_000
    /// The slices a large read is given to nghttp2 in: at most ~60 tiny streams each, so a turn ends near
    /// `streamsPerTurn`.
    static let sliceBytes = 2048

    package func received(_ bytes: UnsafeRawBufferPointer) {
        guard !closed, session != nil else { return }
        // Bytes behind a backlog wait behind it: nghttp2 must see them in order.
        if !backlog.isEmpty { return backlog.append(contentsOf: bytes) }
        feed(bytes)
    }

    /// Gives `bytes` to nghttp2, slice by slice, until they are used up or (when `bounded`) this turn has begun
    /// `streamsPerTurn` streams or run `turnBudgetNanos` (the rest goes to `backlog`); then flushes.
    private func feed(_ bytes: UnsafeRawBufferPointer, bounded: Bool = true) {
        var begun = 0
        var offset = 0
        let started = bounded && bytes.count > Self.sliceBytes * 2 ? io.now().monotonicNanos : 0
        while offset < bytes.count {
            let end = bytes.count - offset <= Self.sliceBytes * 2 ? bytes.count : offset + Self.sliceBytes
            guard let streams = receiveSlice(UnsafeRawBufferPointer(rebasing: bytes[offset..<end])) else { return }
            begun += streams
            offset = end
            // No flush between slices: acknowledgements a flood asks for pile up inside nghttp2 within a turn, as
            // they did before reads were sliced, where its flood limit (1,000) ends the connection.
            guard offset < bytes.count, bounded else { continue }
            if begun >= Self.streamsPerTurn || io.now().monotonicNanos &- started >= Self.turnBudgetNanos {
                backlog = Array(bytes[offset...])
                io.setReading(false)
                backlogTimer = schedule(milliseconds: 0) { [weak self] in self?.resumeBacklog() }
                break
            }
        }
        flush()
    }

    /// The next turn's share of `backlog`; reading comes back once it is empty (unless output holds it off).
    private func resumeBacklog() {
        backlogTimer = nil
        guard !closed, !backlog.isEmpty else { return }
        let pending = backlog
        backlog = []
        pending.withUnsafeBytes { feed($0) }
        if !closed && backlog.isEmpty && !readingPaused { io.setReading(true) }
    }

    /// Everything in `backlog` at once, before the connection ends: those requests reached the server, so they
    /// are journaled whatever comes next.
    func drainBacklog() {
        backlogTimer?.cancel()
        backlogTimer = nil
        guard !closed, !backlog.isEmpty else { return }
        let pending = backlog
        backlog = []
        pending.withUnsafeBytes { feed($0, bounded: false) }
    }

    /// One `mem_recv`: how many streams it began, or nil when the connection closed (a script's connection
    /// fault, or a fatal error answered with GOAWAY here).
    private func receiveSlice(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard let session else { return nil }
        inLibrary = true
        let result = nghttp2_session_mem_recv(session, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
        inLibrary = false
        // A script closed the connection (a connection fault) and the callbacks stopped nghttp2: nothing more.
        if closed { return nil }
        let begun = begunThisRead.count
        if begun > 0 { startRequestTimers() }
        if result < 0 {
            // A fatal error leaves nghttp2 unusable: the GOAWAY that names it is written by hand (RFC 9113 §5.4.1).
            let error = Int32(truncatingIfNeeded: result)
            let code: HTTP2ErrorCode = switch error {
            case NGHTTP2_ERR_FLOODED.rawValue: .enhanceYourCalm
            case NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue: .protocolError
            default: .internalError
            }
            reportConnectionError("\(code.name): \(Self.describe(error))")
            let goaway = HTTP2RawFrame(
                type: 0x7, flags: 0, onStream: false,
                payload: Self.bigEndian(UInt32(bitPattern: highestStream)) + Self.bigEndian(code.rawValue))
            // The server's preface (a SETTINGS frame) comes first, whatever follows (RFC 9113 §3.4).
            let preface = wroteAnything ? [] : HTTP2RawFrame(type: 0x4, flags: 0, onStream: false, payload: []).bytes(stream: 0)
            (preface + goaway.bytes(stream: 0)).withUnsafeBytes { _ = io.write($0) }
            finishClosing(abortive: false)
            return nil
        }
        return begun
    }

    /// An HTTP/2 client that half-closes is gone for our purposes: nothing it could send will come. Its streams
    /// end `client-closed` (`finishClosing`).
    package func peerFinished() {
        drainBacklog()
        finishClosing(abortive: false)
    }

    package func peerFailed() {
        drainBacklog()
        finishClosing(abortive: true)
    }

    package func drained() {
        guard !closed else { return }
        if readingPaused && io.pendingOutput <= settings.maxPendingOutput / 2 {
            readingPaused = false
            if backlog.isEmpty { io.setReading(true) }
        }
        flush()
    }

    /// The server stops or the scenarios were reset: every stream ends with `outcome`, the connection closes.
    package func teardown(_ outcome: ExchangeOutcome) {
        guard !closed else { return }
        drainBacklog()
        guard !closed else { return }
        endAllStreams(outcome)
        if let session {
            ourGoaways += 1
            nghttp2_submit_goaway(session, 0, highestStream, UInt32(NGHTTP2_NO_ERROR.rawValue), nil, 0)
        }
        flush()
        finishClosing(abortive: false)
    }

    /// Cancels every stream that has not ended (a scenario reset: its scripted response must not leak).
    package func cancelPending(_ outcome: ExchangeOutcome) {
        for stream in streams.values where stream.exchange.map({ !$0.ended }) ?? false {
            end(stream, outcome)
            if let session {
                nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, UInt32(NGHTTP2_CANCEL.rawValue))
            }
        }
        flush()
    }

    func schedule(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer? {
        closed ? nil : io.schedule(milliseconds: milliseconds, action)
    }

    func scheduleStep(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer? {
        closed ? nil : io.scheduleStep(milliseconds: milliseconds, action)
    }

    func finishClosing(abortive: Bool) {
        guard !closed else { return }
        // Frames gathered before the close go out before the FIN, as they did when each was written at once.
        if !abortive && !gathered.isEmpty && !writingGathered { _ = sendGathered() }
        gathered.removeAll()
        enter(.closed)
        gracefulTimer?.cancel()
        gracefulTimer = nil
        pingTimer?.cancel()
        pingTimer = nil
        backlogTimer?.cancel()
        backlogTimer = nil
        backlog = []
        begunThisRead.removeAll()
        readyToRun.removeAll()
        if settings.pingEveryMilliseconds != nil || !settings.ackPings {
            summary.streams = requestCount
            io.journalHTTP2(summary, clientGoaway: clientGoaway)
        } else if let clientGoaway, requestCount == 0, reportedError == nil {
            // The client opened no stream and sent GOAWAY: no other entry would show the connection or what it
            // said (over TLS this entry takes the place of the handshake's).
            io.journalHTTP2(nil, clientGoaway: clientGoaway)
        }
        endAllStreams(.clientClosed)
        io.close(abortive: abortive)
    }

    func reportConnectionError(_ reason: String) {
        guard reportedError == nil else { return }
        reportedError = reason
        io.connectionError(reason)
    }

    func endAllStreams(_ outcome: ExchangeOutcome) {
        if closingOutcome == nil { closingOutcome = outcome }
        for stream in Array(streams.values) {
            stream.cancelTimers()
            if stream.exchange != nil {
                end(stream, outcome)
            } else if !stream.isJournaled {
                journalIncomplete(stream, outcome)
            }
        }
    }

    /// A stream that ended before its request was complete: journaled with what arrived.
    func journalIncomplete(
        _ stream: HTTP2Stream, _ outcome: ExchangeOutcome,
        reason: String = "the stream ended before its request was complete (no END_STREAM)"
    ) {
        stream.enter(.unanswered)
        guard !stream.request.method.isEmpty else { return }
        let error = HTTPParseError(
            status: 400, reason: reason,
            head: stream.request.head, requestLinePrefix: stream.request.requestLine)
        io.journalUnanswered(nil, error, stream.requestContext, outcome, client: stream.client)
    }

    /// The stream's exchange ends with `outcome` (once: later calls change nothing).
    func end(_ stream: HTTP2Stream, _ outcome: ExchangeOutcome) {
        guard let exchange = stream.exchange else { return }
        guard exchange.end() else {
            stream.enter(.ended)
            return
        }
        // A hang the client gave up on was released, as over HTTP/1.1.
        var outcome = outcome
        if case .hanging = stream.state, outcome == .clientClosed { outcome = .hangReleased }
        stream.cancelTimers()
        stream.enter(.ended)
        // An admin exchange's completion runs once its bytes are out (it may stop the server): the frames that
        // ended it reach the transport first. Others wait for the rest of the flush (one write for all).
        if exchange.afterCompletion != nil && !gathered.isEmpty && !writingGathered && !closed { _ = sendGathered() }
        io.finished(exchange, outcome, at: nil)
    }
}
