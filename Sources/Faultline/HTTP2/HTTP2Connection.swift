import CNghttp2
import FaultlineCore

/// What an HTTP/2 connection needs from the world: the transport, loop timers and the Dispatcher. `Connection`
/// implements it over a real transport; the fuzz target and the tests over memory. Loop thread only.
protocol HTTP2ConnectionIO: AnyObject {
    /// Writes bytes, or queues what the kernel does not take at once. False when the client is gone.
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    var pendingOutput: Int { get }
    func shutdownWrite()
    /// Closes the transport now: RST when `abortive`, else FIN. No call on the connection follows.
    func close(abortive: Bool)
    func setReading(_ enabled: Bool)
    /// Runs `action` once after `milliseconds`, unless the returned timer is cancelled first.
    func schedule(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer
    func now() -> Arrival
    /// The `Date` field line (`Date: …` CRLF) for a head submitted now: the engine's per-second cache, as for
    /// HTTP/1.1. Its value goes out as the `date` field (RFC 9110 §6.6.1).
    func dateLine() -> [UInt8]
    /// A complete request (`context.stream` names its stream).
    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange
    /// A request that cannot be served as it is (too large, not complete in time): journaled with what arrived.
    func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange
    /// A stream whose request reached the server and will never be answered (reset by the client, refused), with
    /// what the client sent to end it (`client`: its RST_STREAM, a GOAWAY).
    func journalUnanswered(
        _ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext, _ outcome: ExchangeOutcome,
        client: HTTP2ClientFrames)
    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?)
    /// The client sent RST_STREAM on the stream journaled as `sequence`, or GOAWAY while its exchange was under
    /// way: `frames` is all it sent about that entry so far.
    func clientSent(_ frames: HTTP2ClientFrames, onEntry sequence: Int)
    /// The connection broke the protocol as a whole (bad preface, a flood, a bad HPACK block): journaled as a
    /// connection entry naming the error the server answered with.
    func connectionError(_ reason: String)
    /// The connection ended and gets a connection entry: the scenario asked about its PINGs (`summary`:
    /// `pingEveryMs`, `ackPings: false`), or the client opened no stream and sent GOAWAY (`summary` nil).
    /// `clientGoaway` is the client's last GOAWAY on it.
    func journalHTTP2(_ summary: HTTP2ConnectionSummary?, clientGoaway: HTTP2ClientGoaway?)
}

/// A timer that can be stopped before it fires (a `LoopTimer`; a fake one in the fuzz target).
protocol CancellableTimer: AnyObject {
    func cancel()
}

/// Per-connection HTTP/2 settings the server announces (RFC 9113 §6.5.2) and the connection faults, from the
/// scenario's `http2` section.
struct HTTP2ConnectionSettings {
    /// The server's defaults with a scenario's `http2` section on top.
    func applying(_ plan: HTTP2Plan?) -> HTTP2ConnectionSettings {
        guard let plan else { return self }
        var settings = self
        if let value = plan.maxConcurrentStreams { settings.maxConcurrentStreams = value }
        if let value = plan.initialWindowSize { settings.initialWindowSize = value }
        if let value = plan.maxFrameSize { settings.maxFrameSize = value }
        if let value = plan.headerTableSize { settings.headerTableSize = value }
        settings.windowUpdateAfterMilliseconds = plan.windowUpdateAfterMilliseconds
        settings.goawayAfterStreams = plan.goawayAfterStreams
        settings.ackPings = plan.ackPings
        settings.pingEveryMilliseconds = plan.pingEveryMilliseconds
        return settings
    }

    var maxConcurrentStreams: UInt32 = 100
    var initialWindowSize: UInt32 = 65_535
    var maxFrameSize: UInt32 = 16_384
    var headerTableSize: UInt32 = 4096
    var parserLimits = HTTPParserLimits()
    var windowUpdateAfterMilliseconds: Int?
    var goawayAfterStreams: Int?
    /// A stream whose request is not complete this long after its HEADERS is answered 408 (the server's
    /// header timeout, as for HTTP/1.1).
    var requestTimeoutMilliseconds = 10_000
    var ackPings = true
    var pingEveryMilliseconds: Int?
    /// Ask nghttp2 for no more frames while this much output waits for the kernel, and stop reading. nghttp2
    /// produces DATA only when asked, so this bounds a connection's queue without slowing a download (the
    /// socket's own buffer is larger); control frames a client provokes without reading (SETTINGS and PING
    /// acknowledgements) pile up inside nghttp2 instead, where its flood limit ends the connection.
    var maxPendingOutput = 256 * 1024
}

/// An HTTP/2 connection (RFC 9113) on nghttp2, server side (ARCHITECTURE §4a). nghttp2 keeps the framing, HPACK,
/// flow control and stream states; this class assembles each stream's request, hands it to the Dispatcher as an
/// `Exchange`, and carries out the exchange's script as frames: a `head` becomes HEADERS, `body` DATA, `end`
/// END_STREAM, `wait` a per-stream timer (streams never wait for each other), `abortExchange` RST_STREAM, and the
/// `http2` steps GOAWAY, RST_STREAM with a code, or raw frames. nghttp2 writes into memory (`mem_send`), and what
/// it writes goes to the transport, so TLS and plain TCP carry the same frames.
final class HTTP2Connection {
    private unowned(unsafe) let io: HTTP2ConnectionIO
    private let settings: HTTP2ConnectionSettings
    @exclusivity(unchecked) private var session: OpaquePointer?
    @exclusivity(unchecked) private var streams: [Int32: HTTP2Stream] = [:]
    @exclusivity(unchecked) private var requestCount = 0
    /// Inside nghttp2 (`mem_recv`, `mem_send`): actions that would re-enter it wait until it returns.
    @exclusivity(unchecked) private var inLibrary = false
    @exclusivity(unchecked) private var flushWanted = false
    @exclusivity(unchecked) private var closed = false
    /// Reading is paused while the transport's queue is over `maxPendingOutput`.
    @exclusivity(unchecked) private var readingPaused = false
    /// The last stream id a GOAWAY of ours named; streams above it are not processed.
    @exclusivity(unchecked) private var goawayLastStream: Int32?
    /// Close once every stream at or below the GOAWAY's last stream id is done.
    @exclusivity(unchecked) private var closeWhenIdle = false
    @exclusivity(unchecked) private var gracefulTimer: CancellableTimer?
    /// The highest stream id the client opened.
    @exclusivity(unchecked) private(set) var highestStream: Int32 = 0
    @exclusivity(unchecked) private var connectionErrorReported = false
    /// GOAWAYs a script or the server submitted and nghttp2 has not sent yet (any other is nghttp2's own).
    @exclusivity(unchecked) private var ourGoaways = 0
    /// nghttp2's last message about what the client got wrong (its error callback).
    @exclusivity(unchecked) fileprivate var lastLibraryError: String?

    init(io: HTTP2ConnectionIO, settings: HTTP2ConnectionSettings) {
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

    // MARK: - PINGs

    @exclusivity(unchecked) private var summary = HTTP2ConnectionSummary()
    @exclusivity(unchecked) private var pingTimer: CancellableTimer?
    /// Each PING in flight: its opaque data (a counter) and when it went out (monotonic nanoseconds).
    @exclusivity(unchecked) private var pingsInFlight: [UInt64: UInt64] = [:]
    @exclusivity(unchecked) private var pingCounter: UInt64 = 0

    private func schedulePing() {
        guard let every = settings.pingEveryMilliseconds else { return }
        pingTimer = schedule(milliseconds: every) { [weak self] in
            guard let self, let session, !closed else { return }
            pingCounter += 1
            var opaque = pingCounter.bigEndian
            withUnsafeBytes(of: &opaque) { bytes in
                _ = nghttp2_submit_ping(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), bytes.bindMemory(to: UInt8.self).baseAddress)
            }
            pingsInFlight[pingCounter] = io.now().monotonicNanos
            summary.pingsSent += 1
            flush()
            schedulePing()
        }
    }

    /// A PING arrived: the client's own, or the acknowledgement of one of ours (its round trip is journaled).
    fileprivate func pingReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        guard frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 else {
            summary.pingsReceived += 1
            return
        }
        var opaque = frame.pointee.ping.opaque_data
        let counter = withUnsafeBytes(of: &opaque) { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) }
        guard let sentAt = pingsInFlight.removeValue(forKey: counter) else { return }
        summary.pingRoundTripsMilliseconds.append(Double(io.now().monotonicNanos &- sentAt) / 1_000_000)
    }

    // MARK: - What the client sent to end a stream or the connection

    /// The client's last GOAWAY (RFC 9113 §6.8), with how many it sent.
    @exclusivity(unchecked) private var clientGoaway: HTTP2ClientGoaway?

    /// The client sent GOAWAY: it found something wrong with the connection (the code says what: a `raw-frames`
    /// fault answered with COMPRESSION_ERROR) or is leaving. Journaled on the entry of every stream still under
    /// way — a hanging stream's entry is the one a test reads — and of any stream begun after it; on the
    /// connection's entry when it ends (`finishClosing`). Nothing here calls nghttp2 (we are inside its callback).
    fileprivate func goawayReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let goaway = frame.pointee.goaway
        var record = HTTP2ClientGoaway(
            errorCode: goaway.error_code, lastStreamID: Int(goaway.last_stream_id),
            debugData: UnsafeBufferPointer(
                start: UnsafePointer(goaway.opaque_data), count: goaway.opaque_data == nil ? 0 : goaway.opaque_data_len),
            receivedAtMonotonicNanos: io.now().monotonicNanos)
        record.count = (clientGoaway?.count ?? 0) + 1
        clientGoaway = record
        for stream in streams.values where !(stream.exchange?.ended ?? false) {
            stream.client.goaway = record
            journalClientFrames(stream)
        }
    }

    /// The client sent RST_STREAM (RFC 9113 §6.4): CANCEL when it gave up waiting, an error when it found the stream
    /// broken. Journaled on that stream's entry, before nghttp2 closes the stream (`streamClosed` ends it).
    fileprivate func resetReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        guard let stream = streams[frame.pointee.hd.stream_id] else { return }
        stream.client.reset = HTTP2ClientReset(
            errorCode: frame.pointee.rst_stream.error_code, receivedAtMonotonicNanos: io.now().monotonicNanos)
        journalClientFrames(stream)
    }

    /// What the client sent, on the stream's entry once it has one; a stream not journaled yet (its request still
    /// arriving) carries it into its entry (`requestComplete`, `journalIncomplete`). Admin exchanges have none.
    private func journalClientFrames(_ stream: HTTP2Stream) {
        guard let sequence = stream.exchange?.sequence else { return }
        io.clientSent(stream.client, onEntry: sequence)
    }

    deinit {
        nghttp2_session_del(session)
    }

    /// Whether a stream's scripted response is in progress (a scenario reset must not let it leak).
    var hasPendingScriptedResponse: Bool {
        streams.values.contains { $0.exchange.map { !$0.ended && $0.sequence != nil } ?? false }
    }

    // MARK: - Events from the transport

    func received(_ bytes: UnsafeRawBufferPointer) {
        guard !closed, let session else { return }
        inLibrary = true
        let result = nghttp2_session_mem_recv(session, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
        inLibrary = false
        // A script closed the connection (a connection fault) and the callbacks stopped nghttp2: nothing more.
        if closed { return }
        if !begunThisRead.isEmpty { startRequestTimers() }
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
            return
        }
        flush()
    }

    /// An HTTP/2 client that half-closes is gone for our purposes: nothing it could send will come. Its streams
    /// end `client-closed` (`finishClosing`).
    func peerFinished() { finishClosing(abortive: false) }

    func peerFailed() { finishClosing(abortive: true) }

    func drained() {
        guard !closed else { return }
        if readingPaused && io.pendingOutput <= settings.maxPendingOutput / 2 {
            readingPaused = false
            io.setReading(true)
        }
        flush()
    }

    /// The server stops or the scenarios were reset: every stream ends with `outcome`, the connection closes.
    func teardown(_ outcome: ExchangeOutcome) {
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
    func cancelPending(_ outcome: ExchangeOutcome) {
        for stream in streams.values where stream.exchange.map({ !$0.ended }) ?? false {
            end(stream, outcome)
            if let session {
                nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, UInt32(NGHTTP2_CANCEL.rawValue))
            }
        }
        flush()
    }

    // MARK: - Writing

    /// Moves what nghttp2 has queued to the transport, until it has nothing more or the transport is full. The
    /// frames nghttp2 hands out one at a time are gathered and written together (one write, one TLS record, per
    /// flush rather than per frame: two sends per request otherwise).
    private func flush() {
        guard !closed, let session else { return }
        if inLibrary {
            flushWanted = true
            return
        }
        repeat {
            flushWanted = false
            while true {
                var data: UnsafePointer<UInt8>?
                inLibrary = true
                let count = nghttp2_session_mem_send(session, &data)
                inLibrary = false
                // A callback closed the connection (what was gathered went out first: `end`, `finishClosing`).
                if closed { return }
                if count < 0 {
                    reportConnectionError(Self.describe(Int32(truncatingIfNeeded: count)))
                    finishClosing(abortive: true)
                    return
                }
                guard count > 0, let data else { break }
                gathered.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
                if gathered.count >= 64 * 1024, !writeGathered() { return }
            }
            if !writeGathered() { return }
            runDeferred()
        } while flushWanted && !closed
        if !closed && nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            finishClosing(abortive: false)
        }
    }

    /// Frames `flush` has taken from nghttp2 and not yet written; up to 16 KB of capacity is kept between flushes.
    @exclusivity(unchecked) private var gathered: [UInt8] = []
    /// Whether any frame went out yet: the first must be the server's SETTINGS.
    @exclusivity(unchecked) private var wroteAnything = false
    @exclusivity(unchecked) private var writingGathered = false

    /// Hands the gathered frames to the transport; false when the client is gone. Small flushes keep their
    /// buffer; a large body's does not stay with an idle connection.
    private func sendGathered() -> Bool {
        wroteAnything = true
        let written = gathered.withUnsafeBytes { io.write($0) }
        gathered.removeAll(keepingCapacity: gathered.capacity <= 16 * 1024)
        return written
    }

    /// Writes the gathered frames; false when the connection closed (the client is gone) or reading paused.
    private func writeGathered() -> Bool {
        guard !gathered.isEmpty, !writingGathered, !closed else { return !closed }
        writingGathered = true
        let written = sendGathered()
        writingGathered = false
        if !written {
            finishClosing(abortive: true)
            return false
        }
        if io.pendingOutput > settings.maxPendingOutput {
            if !readingPaused {
                readingPaused = true
                io.setReading(false)
            }
            return false
        }
        return true
    }

    /// Work that had to wait until nghttp2 returned (a RST after a stream's last DATA went out).
    @exclusivity(unchecked) private var deferred: [() -> Void] = []
    /// Streams whose request completed inside nghttp2: their scripts run once it has returned. A list of
    /// streams, not closures: nothing to allocate per request.
    @exclusivity(unchecked) private var readyToRun: [HTTP2Stream] = []
    @exclusivity(unchecked) private var lastHead: ResponseHead?
    @exclusivity(unchecked) private var lastFields = HTTP2Fields()
    /// The date line `lastFields` carries (empty when its head adds none).
    @exclusivity(unchecked) private var lastDate: [UInt8] = []
    @exclusivity(unchecked) private var running: [HTTP2Stream] = []
    @exclusivity(unchecked) private var runningReady = false

    /// One batch of waiting work per call, between two `mem_send` passes of `flush`: the deferred actions first
    /// (an RST_STREAM after a stream's last DATA, a close after a GOAWAY), else the streams whose requests
    /// completed. A batch may queue work that must come after the frames it produced (a RST_STREAM after a
    /// stream's HEADERS): the next call, after the next pass, does it.
    private func runDeferred() {
        guard !closed else { return }
        if !deferred.isEmpty {
            let work = deferred
            deferred = []
            for action in work where !closed { action() }
            flushWanted = true
        } else if !readyToRun.isEmpty {
            swap(&running, &readyToRun)
            runningReady = true
            for stream in running where !closed { run(stream) }
            runningReady = false
            running.removeAll(keepingCapacity: true)
            flushWanted = true
        }
    }

    /// A loop timer, unless the connection has closed (a step or a flush may close it on the way).
    private func schedule(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer? {
        closed ? nil : io.schedule(milliseconds: milliseconds, action)
    }

    private func finishClosing(abortive: Bool) {
        guard !closed else { return }
        // Frames gathered before the close go out before the FIN, as they did when each was written at once.
        if !abortive && !gathered.isEmpty && !writingGathered { _ = sendGathered() }
        gathered.removeAll()
        closed = true
        gracefulTimer?.cancel()
        gracefulTimer = nil
        pingTimer?.cancel()
        pingTimer = nil
        begunThisRead.removeAll()
        readyToRun.removeAll()
        if settings.pingEveryMilliseconds != nil || !settings.ackPings {
            summary.streams = requestCount
            io.journalHTTP2(summary, clientGoaway: clientGoaway)
        } else if let clientGoaway, requestCount == 0, !connectionErrorReported {
            // The client opened no stream and sent GOAWAY: no other entry would show the connection or what it
            // said (over TLS this entry takes the place of the handshake's).
            io.journalHTTP2(nil, clientGoaway: clientGoaway)
        }
        endAllStreams(.clientClosed)
        io.close(abortive: abortive)
    }

    private func reportConnectionError(_ reason: String) {
        guard !connectionErrorReported else { return }
        connectionErrorReported = true
        io.connectionError(reason)
    }

    private func endAllStreams(_ outcome: ExchangeOutcome) {
        for stream in Array(streams.values) {
            stream.cancelTimers()
            if stream.exchange != nil {
                end(stream, outcome)
            } else if !stream.journaled {
                stream.journaled = true
                journalIncomplete(stream, outcome)
            }
        }
    }

    // MARK: - Requests

    fileprivate func beginStream(_ id: Int32) {
        highestStream = max(highestStream, id)
        let stream = HTTP2Stream(id: id, arrival: io.now(), index: requestCount)
        requestCount += 1
        streams[id] = stream
        if let clientGoaway { stream.client.goaway = clientGoaway }
        if let delay = settings.windowUpdateAfterMilliseconds {
            // The stalled upload (`initialWindowSize: 0`) goes on once the window opens.
            stream.windowTimer = schedule(milliseconds: delay) { [weak self, weak stream] in
                guard let self, let stream, let session, !closed, streams[stream.id] != nil else { return }
                stream.windowTimer = nil
                nghttp2_submit_window_update(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, 1 << 24)
                flush()
            }
        }
        // The request timer starts only if the read that began the stream did not also end its request (most
        // requests are one HEADERS frame with END_STREAM): no timer per stream on the fast path.
        begunThisRead.append(stream)
        if let limit = settings.goawayAfterStreams, requestCount == limit, goawayLastStream == nil {
            // The connection has served its quota: this stream is the last one processed.
            sendGoaway(id, code: UInt32(NGHTTP2_NO_ERROR.rawValue))
        }
    }

    fileprivate func header(_ id: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        guard let stream = streams[id] else { return true }
        stream.headerBytes += name.count + value.count + 32
        if stream.headerBytes > settings.parserLimits.maxHeaderSectionBytes {
            stream.error = HTTPParseError(
                status: 431,
                reason: "header section larger than \(settings.parserLimits.maxHeaderSectionBytes) bytes (RFC 6585 §5)")
            return true
        }
        let name = String(decoding: name, as: UTF8.self)
        let value = String(decoding: value, as: UTF8.self)
        switch name {
        case ":method": stream.method = value
        case ":path": stream.path = value
        default: break
        }
        stream.headers.append(name: name, value: value)
        return true
    }

    fileprivate func data(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[id] else { return }
        if stream.body.count + bytes.count > settings.parserLimits.maxBodyBytes {
            if stream.error == nil {
                stream.error = HTTPParseError(
                    status: 413, reason: "body larger than \(settings.parserLimits.maxBodyBytes) bytes (RFC 9110 §15.5.14)")
            }
            return
        }
        stream.body.append(contentsOf: bytes)
    }

    /// Streams begun in the current read, whose request may still be arriving when it ends.
    @exclusivity(unchecked) private var begunThisRead: [HTTP2Stream] = []

    private func startRequestTimers() {
        for stream in begunThisRead where stream.exchange == nil && !stream.journaled && streams[stream.id] === stream {
            stream.requestTimer = schedule(milliseconds: settings.requestTimeoutMilliseconds) { [weak self, weak stream] in
                guard let self, let stream, !closed, streams[stream.id] != nil else { return }
                stream.requestTimer = nil
                requestTimedOut(stream)
            }
        }
        begunThisRead.removeAll(keepingCapacity: true)
    }

    /// The request did not complete in time: 408 (RFC 9110 §15.5.9) with what arrived, then RST_STREAM NO_ERROR
    /// once the answer is out, so the client stops sending (RFC 9113 §8.1).
    private func requestTimedOut(_ stream: HTTP2Stream) {
        guard stream.exchange == nil, !stream.journaled else { return }
        stream.error = HTTPParseError(
            status: 408, reason: "the request was not complete within \(settings.requestTimeoutMilliseconds) ms")
        stream.resetWhenAnswered = true
        requestComplete(stream.id)
        flush()
    }

    /// The request is complete (END_STREAM): dispatch it.
    fileprivate func requestComplete(_ id: Int32) {
        guard let stream = streams[id], stream.exchange == nil, !stream.journaled else { return }
        stream.requestTimer?.cancel()
        stream.requestTimer = nil
        let head = stream.requestHead
        let context = stream.requestContext
        if let last = goawayLastStream, id > last {
            // Above our GOAWAY's last stream id: journaled, never processed (RFC 9113 §6.8).
            stream.journaled = true
            io.journalUnanswered(
                HTTPRequest(head: head, body: stream.body), nil, context, .notProcessed, client: stream.client)
            return
        }
        let exchange: Exchange
        if var error = stream.error {
            error.head = head
            error.requestLinePrefix = stream.requestLine
            exchange = io.reject(error, context, body: stream.body)
        } else {
            exchange = io.dispatch(HTTPRequest(head: head, body: stream.body), context)
        }
        stream.exchange = exchange
        stream.body = []
        stream.journaled = true
        // A GOAWAY from the client came while the request was still arriving: its entry has it too.
        if !stream.client.isEmpty { journalClientFrames(stream) }
        if inLibrary {
            // From nghttp2's callback: the script runs once nghttp2 has returned, so that what a step writes or
            // closes comes after the frames already queued.
            readyToRun.append(stream)
            flushWanted = true
        } else {
            run(stream)
        }
    }

    /// nghttp2 refused a request's HEADERS itself (more streams than SETTINGS_MAX_CONCURRENT_STREAMS allows, a
    /// stream id out of order, fields HTTP/2 forbids) and answered with RST_STREAM or GOAWAY: the request reached
    /// the server, so it is journaled — not processed when refused, else rejected — with what was read of it.
    fileprivate func requestRefused(_ id: Int32, libraryError: Int32) {
        // A stream already answering (invalid trailers, say) ends through nghttp2's stream close as usual.
        let stream = streams[id]
        guard stream?.journaled != true, stream?.exchange == nil else { return }
        streams[id] = nil
        stream?.requestTimer?.cancel()
        stream?.windowTimer?.cancel()
        let refused = libraryError == NGHTTP2_ERR_REFUSED_STREAM.rawValue
        let context = stream?.requestContext ?? RequestContext(
            arrival: io.now(), arrivedNow: false, indexOnConnection: requestCount, stream: Int(id))
        let known = stream.flatMap { $0.method.isEmpty ? nil : $0 }
        let error = HTTPParseError(
            status: 400, reason: "HTTP/2 stream \(id) \(refused ? "refused (RST_STREAM REFUSED_STREAM)" : "rejected"): "
                + Self.describe(libraryError), head: known?.requestHead,
            requestLinePrefix: known?.requestLine ?? "(HTTP/2 stream \(id))")
        io.journalUnanswered(
            nil, error, context, refused ? .notProcessed : .rejected, client: stream?.client ?? HTTP2ClientFrames())
    }

    /// nghttp2 closed the stream: its response is complete, or it was reset by either side.
    fileprivate func streamClosed(_ id: Int32, errorCode: UInt32) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.cancelTimers()
        if let exchange = stream.exchange {
            if !exchange.ended {
                let outcome: ExchangeOutcome = errorCode == NGHTTP2_NO_ERROR.rawValue && stream.sentEnd
                    ? .completed : (stream.ourReset ?? .clientClosed)
                end(stream, outcome)
            }
        } else if !stream.journaled {
            stream.journaled = true
            journalIncomplete(stream, stream.ourReset ?? .clientClosed)
        }
        if closeWhenIdle { closeIfIdle() }
    }

    /// A stream that ended before its request was complete: journaled with what arrived.
    private func journalIncomplete(_ stream: HTTP2Stream, _ outcome: ExchangeOutcome) {
        guard !stream.method.isEmpty else { return }
        let error = HTTPParseError(
            status: 400, reason: "the stream ended before its request was complete (no END_STREAM)",
            head: stream.requestHead, requestLinePrefix: stream.requestLine)
        io.journalUnanswered(nil, error, stream.requestContext, outcome, client: stream.client)
    }

    private func end(_ stream: HTTP2Stream, _ outcome: ExchangeOutcome) {
        guard let exchange = stream.exchange, exchange.end() else { return }
        // A hang the client gave up on was released, as over HTTP/1.1.
        let outcome = stream.hanging && outcome == .clientClosed ? .hangReleased : outcome
        stream.cancelTimers()
        // An admin exchange's completion runs once its bytes are out (it may stop the server): the frames that
        // ended it reach the transport first. Others wait for the rest of the flush (one write for all).
        if exchange.afterCompletion != nil && !gathered.isEmpty && !writingGathered && !closed { _ = sendGathered() }
        io.finished(exchange, outcome, at: nil)
    }

    // MARK: - Responses: a script's steps as frames

    /// Past this many body bytes pending on a stream, a growing script's next steps are not pulled until
    /// nghttp2 has taken half of them.
    static let growingQueueLimit = 256 * 1024

    /// Carries out the stream's steps until one has to wait (a timer, a hang, a script not there yet) or the
    /// script ends.
    private func run(_ stream: HTTP2Stream) {
        guard let exchange = stream.exchange, !closed else { return }
        pulling: while !stream.stopped && !stream.waiting {
            if exchange.isGrowing && stream.pendingCount >= Self.growingQueueLimit {
                // A growing script (a proxied body) is pulled as nghttp2 sends it (`readBody` runs this again):
                // its producer sees the bytes left in the exchange and slows down.
                stream.awaitingRoom = true
                submitOrResume(stream)
                break pulling
            }
            switch exchange.next() {
            case .notYet:
                // A growing script's head and body so far go out while the rest is on its way.
                if stream.head != nil { submitOrResume(stream) }
                exchange.whenScriptArrives = { [weak self, weak stream] in
                    guard let self, let stream else { return }
                    run(stream)
                }
                if stream.head != nil { break pulling }
                return
            case .finished:
                stream.stopped = true
            case .step(let step):
                perform(step, on: stream, exchange)
            }
        }
        // The streams of one read run one after another (`runDeferred`): their frames go out in one write.
        if runningReady {
            flushWanted = true
        } else if exchange.isGrowing && io.pendingOutput > settings.maxPendingOutput {
            // A growing script (a proxied body) wakes this for every piece that arrives: while the client is behind,
            // nothing more is asked of nghttp2 until `drained` flushes — else each wake would queue another batch
            // of DATA for a client with a large window that does not read.
        } else {
            flush()
        }
    }

    private func perform(_ step: ScriptStep, on stream: HTTP2Stream, _ exchange: Exchange) {
        switch step {
        case .head(let head):
            stream.head = head
        case .body(let bytes):
            // After a slice, bytes queue behind it (a multipart/byteranges part header) to keep the order.
            if stream.slices.isEmpty {
                stream.pending.append(contentsOf: bytes)
            } else {
                stream.slices.append(BodySlice(BodySource(bytes: bytes)))
            }
            if stream.submitted { resume(stream) }
        case .stream(let slice):
            // Read from the source as nghttp2 asks for DATA (flow control and `maxPendingOutput` pace it).
            stream.slices.append(slice)
            if stream.submitted { resume(stream) }
        case .end:
            stream.eof = true
            submitOrResume(stream)
            stream.stopped = true
        case .wait(let milliseconds):
            submitOrResume(stream)
            stream.waiting = true
            stream.timer = schedule(milliseconds: milliseconds) { [weak self, weak stream] in
                guard let self, let stream else { return }
                stream.timer = nil
                stream.waiting = false
                run(stream)
            }
        case .hang:
            submitOrResume(stream)
            stream.stopped = true
            stream.hanging = true
        case .abortExchange:
            // A body cut short: what was rendered goes out, then RST_STREAM (INTERNAL_ERROR) — END_STREAM never.
            submitOrResume(stream)
            resetAfterPending(stream, code: UInt32(NGHTTP2_INTERNAL_ERROR.rawValue), outcome: .closedByFault)
            stream.stopped = true
        case .abortConnection(let abort):
            stream.stopped = true
            abortConnection(abort, stream: stream, exchange)
        case .endConnection(let end):
            // `maxRequests`: a graceful GOAWAY naming every stream so far, then close once they are done;
            // `Connection: close` means nothing here.
            stream.stopped = true
            submitOrResume(stream)
            if end == .maxRequests { sendGoaway(highestStream, code: UInt32(NGHTTP2_NO_ERROR.rawValue)) }
        case .raw(let bytes):
            // Bytes for the wire as they are (the raw-frame escape hatch): after what nghttp2 has queued.
            flush()
            bytes.withUnsafeBytes { _ = io.write($0) }
            exchange.bytesWritten += bytes.count
        case .http2(let action):
            perform(action, on: stream, exchange)
        case .upgrade:
            // WebSocket routes serve HTTP/1.1 only (`Route.servedProtocols`): never reached over HTTP/2.
            assertionFailure("a WebSocket upgrade on an HTTP/2 stream")
            stream.stopped = true
            resetAfterPending(stream, code: UInt32(NGHTTP2_INTERNAL_ERROR.rawValue), outcome: .closedByFault)
        }
    }

    private func perform(_ action: HTTP2Action, on stream: HTTP2Stream, _ exchange: Exchange) {
        guard let session else { return }
        switch action {
        case .resetStream(let code):
            submitOrResume(stream)
            let outcome: ExchangeOutcome = code == HTTP2ErrorCode.refusedStream.rawValue ? .notProcessed : .streamReset
            resetAfterPending(stream, code: code, outcome: outcome)
            stream.stopped = true
        case .goaway(let last, let code, let graceful):
            let lastStream: Int32 = switch last {
            case .current: stream.id
            case .previous: max(0, stream.id - 2)
            case .stream(let id): Int32(clamping: id)
            }
            submitOrResume(stream)
            if graceful {
                nghttp2_submit_shutdown_notice(session)
                flush()
                gracefulTimer = schedule(milliseconds: 50) { [weak self] in
                    guard let self else { return }
                    gracefulTimer = nil
                    sendGoaway(lastStream, code: code)
                }
            } else {
                sendGoaway(lastStream, code: code)
            }
            if stream.id > lastStream { stream.stopped = true }
        case .frames(let frames):
            // After what nghttp2 has queued, so the hand-made frames land where the script put them.
            flush()
            for frame in frames {
                let bytes = frame.bytes(stream: Int(stream.id))
                for _ in 0..<max(frame.count, 1) {
                    guard !closed else { return }
                    bytes.withUnsafeBytes { _ = io.write($0) }
                    exchange.bytesWritten += bytes.count
                }
            }
        }
    }

    private func sendGoaway(_ lastStream: Int32, code: UInt32) {
        guard let session, !closed else { return }
        goawayLastStream = lastStream
        ourGoaways += 1
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStream, code, nil, 0)
        // Streams above the last stream id were not processed (RFC 9113 §6.8): the client may retry them.
        for stream in streams.values where stream.id > lastStream {
            stream.stopped = true
            if stream.exchange != nil { end(stream, .notProcessed) }
        }
        closeWhenIdle = true
        flush()
        closeIfIdle()
    }

    private func closeIfIdle() {
        guard !closed, let last = goawayLastStream else { return }
        if inLibrary {
            // Inside nghttp2 (a stream closed in mem_send, a GOAWAY from a request in mem_recv): closing now would
            // leave its queued frames (the GOAWAY itself) unsent and let it call back into a closed connection.
            deferred.append { [weak self] in self?.closeIfIdle() }
            flushWanted = true
            return
        }
        let busy = streams.values.contains { $0.id <= last && !($0.exchange?.ended ?? true) }
        if !busy {
            flush()
            finishClosing(abortive: false)
        }
    }

    private func abortConnection(_ abort: ConnectionAbort, stream: HTTP2Stream, _ exchange: Exchange) {
        if abort != .reset && inLibrary {
            // Inside nghttp2 (a request dispatched in mem_recv): what the stream rendered can only go out once it
            // returns, so the FIN waits until then, or the client would get the FIN before the frames.
            submitOrResume(stream)
            deferred.append { [weak self, stream] in
                guard let self, !closed else { return }
                abortConnection(abort, stream: stream, exchange)
            }
            flushWanted = true
            return
        }
        switch abort {
        case .reset:
            end(stream, .resetSent)
            endAllStreams(.resetSent)
            finishClosing(abortive: true)
        case .close, .closeWithoutNotify:
            submitOrResume(stream)
            flush()
            // The flush may have closed the connection already (nghttp2 done, a GOAWAY's close): nothing more.
            guard !closed else { return }
            end(stream, .closedByFault)
            endAllStreams(.closedByFault)
            finishClosing(abortive: false)
        case .shutdownWrite:
            submitOrResume(stream)
            flush()
            guard !closed else { return }
            end(stream, .halfClosed)
            io.shutdownWrite()
            writeShut = true
        }
    }

    @exclusivity(unchecked) private var writeShut = false

    /// RST_STREAM once the stream's rendered body has gone out (nghttp2 sends RST_STREAM before queued DATA).
    private func resetAfterPending(_ stream: HTTP2Stream, code: UInt32, outcome: ExchangeOutcome) {
        stream.ourReset = outcome
        let reset = { [weak self, weak stream] in
            guard let self, let stream, let session, !closed, streams[stream.id] != nil else { return }
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, code)
            end(stream, outcome)
        }
        if stream.submitted && stream.pendingCount > 0 {
            stream.afterPendingSent = reset
        } else {
            deferred.append(reset)
            flushWanted = true
        }
    }

    private func submitOrResume(_ stream: HTTP2Stream) {
        if stream.submitted {
            resume(stream)
        } else {
            submit(stream)
        }
    }

    private func resume(_ stream: HTTP2Stream) {
        guard stream.deferredRead, let session else { return }
        stream.deferredRead = false
        nghttp2_session_resume_data(session, stream.id)
    }

    /// HEADERS for the stream's head, and a data source for its body unless the script already ended with none.
    private func submit(_ stream: HTTP2Stream) {
        guard let head = stream.head, let session, !stream.submitted, !writeShut else { return }
        stream.submitted = true
        let withBody = !(stream.eof && stream.pendingCount == 0)
        // Plain steps share their head: the fields of the last one rendered are kept, and made again when the
        // second changes the date (the same line, the same array, for a whole second: compared by identity first).
        let date = head.addsDate ? io.dateLine() : []
        if head !== lastHead || date != lastDate {
            lastHead = head
            lastDate = date
            lastFields = Self.fields(head, dateLine: date)
        }
        let fields = lastFields
        var provider = nghttp2_data_provider(
            source: nghttp2_data_source(ptr: nil),
            read_callback: { session, streamID, buffer, length, flags, _, user in
                guard let user else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
                let connection = Unmanaged<HTTP2Connection>.fromOpaque(user).takeUnretainedValue()
                return connection.readBody(streamID, buffer, length, flags)
            })
        let result = fields.withNV { nv, count in
            withBody
                ? nghttp2_submit_response(session, stream.id, nv, count, &provider)
                : nghttp2_submit_response(session, stream.id, nv, count, nil)
        }
        if result != 0 {
            stream.submitted = false
        } else if !withBody {
            stream.sentEnd = true
        }
    }

    fileprivate func readBody(
        _ id: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>?
    ) -> Int {
        guard let stream = streams[id], let buffer else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let available = stream.pendingCount
        if available == 0 {
            if stream.eof && stream.afterPendingSent == nil {
                flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                stream.sentEnd = true
                return 0
            }
            if let after = stream.afterPendingSent {
                stream.afterPendingSent = nil
                deferred.append(after)
                flushWanted = true
            }
            stream.deferredRead = true
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        let count: Int
        if stream.pendingOffset < stream.pending.count {
            count = min(stream.pending.count - stream.pendingOffset, length)
            stream.pending.withUnsafeBytes { source in
                buffer.update(from: source.bindMemory(to: UInt8.self).baseAddress! + stream.pendingOffset, count: count)
            }
            stream.pendingOffset += count
            if stream.pendingOffset == stream.pending.count {
                stream.pending.removeAll(keepingCapacity: true)
                stream.pendingOffset = 0
            }
        } else {
            let slice = stream.slices[0]
            count = min(slice.count - stream.sliceOffset, length)
            let start = slice.range.lowerBound + stream.sliceOffset
            slice.source.copy(start..<(start + count), into: UnsafeMutableRawPointer(buffer))
            stream.sliceOffset += count
            if stream.sliceOffset == slice.count {
                stream.slices.removeFirst()
                stream.sliceOffset = 0
            }
        }
        if stream.pendingCount == 0 && stream.eof && stream.afterPendingSent == nil {
            flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            stream.sentEnd = true
        }
        if stream.awaitingRoom && stream.pendingCount < Self.growingQueueLimit / 2 {
            // Outside nghttp2's callback: the growing script is pulled again.
            stream.awaitingRoom = false
            deferred.append { [weak self, weak stream] in
                guard let self, let stream, streams[stream.id] === stream else { return }
                run(stream)
            }
            flushWanted = true
        }
        return count
    }

    /// A frame went out: the frame that ended a stream completes its exchange.
    fileprivate func frameSent(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        if header.type == UInt8(NGHTTP2_GOAWAY.rawValue) {
            let code = frame.pointee.goaway.error_code
            if ourGoaways > 0 {
                ourGoaways -= 1
            } else if code != NGHTTP2_NO_ERROR.rawValue {
                // nghttp2 found the client breaking the protocol and answered with this GOAWAY.
                let name = HTTP2ErrorCode(rawValue: code)?.name ?? "error \(code)"
                reportConnectionError(lastLibraryError.map { "\(name): \($0)" } ?? name)
            }
            return
        }
        guard header.type == UInt8(NGHTTP2_HEADERS.rawValue) || header.type == UInt8(NGHTTP2_DATA.rawValue),
              let stream = streams[header.stream_id] else { return }
        // The exchange's bytes are its frames', headers included (HPACK-compressed as sent).
        stream.exchange?.bytesWritten += 9 + header.length
        if header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
            end(stream, .completed)
            if stream.resetWhenAnswered, let session {
                nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, UInt32(NGHTTP2_NO_ERROR.rawValue))
            }
        }
    }

    /// The response head as HTTP/2 fields: `:status`, `date` from `dateLine` when it is not empty, lower-case
    /// names, and none of the connection-specific fields (RFC 9113 §8.2.2). A chunked head's framing is HTTP/1.1's:
    /// DATA frames carry its body.
    static func fields(_ head: ResponseHead, dateLine: [UInt8] = []) -> HTTP2Fields {
        let fields = HTTP2Fields()
        fields.append(":status", String(head.status))
        if !dateLine.isEmpty {
            fields.append("date", String(decoding: HTTPDateCache.value(ofLine: dateLine), as: UTF8.self))
        }
        for field in head.headers {
            let name = field.name.lowercased()
            switch name {
            case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
                continue
            default:
                fields.append(name, field.value)
            }
        }
        if let length = head.contentLength { fields.append("content-length", String(length)) }
        return fields
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
         UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    static func describe(_ code: Int32) -> String {
        guard let text = nghttp2_strerror(code) else { return "nghttp2 error \(code)" }
        return String(cString: text)
    }

    // MARK: - nghttp2's callbacks

    private static func connection(_ user: UnsafeMutableRawPointer?) -> HTTP2Connection {
        Unmanaged<HTTP2Connection>.fromOpaque(user!).takeUnretainedValue()
    }

    /// A receiving callback's answer once a script closed the connection inside `mem_recv`: stop parsing, so no
    /// later frame in the same read begins or dispatches a stream on the closed connection.
    private static func stopped(_ user: UnsafeMutableRawPointer?) -> Bool { connection(user).closed }
    private static let stop = Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)

    private static func install(_ callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
                  frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
            if HTTP2Connection.stopped(user) { return HTTP2Connection.stop }
            HTTP2Connection.connection(user).beginStream(frame.pointee.hd.stream_id)
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame else { return 0 }
            if HTTP2Connection.stopped(user) { return HTTP2Connection.stop }
            let accepted = HTTP2Connection.connection(user).header(
                frame.pointee.hd.stream_id, name: UnsafeRawBufferPointer(start: name, count: nameLength),
                value: UnsafeRawBufferPointer(start: value, count: valueLength))
            return accepted ? 0 : Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            if HTTP2Connection.stopped(user) { return HTTP2Connection.stop }
            HTTP2Connection.connection(user).data(streamID, UnsafeRawBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            if HTTP2Connection.stopped(user) { return HTTP2Connection.stop }
            let header = frame.pointee.hd
            let type = header.type
            if type == UInt8(NGHTTP2_PING.rawValue) { HTTP2Connection.connection(user).pingReceived(frame) }
            if type == UInt8(NGHTTP2_GOAWAY.rawValue) { HTTP2Connection.connection(user).goawayReceived(frame) }
            if type == UInt8(NGHTTP2_RST_STREAM.rawValue) { HTTP2Connection.connection(user).resetReceived(frame) }
            if (type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue))
                && header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
                HTTP2Connection.connection(user).requestComplete(header.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, frame, libraryError, user in
            guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
                  frame.pointee.hd.stream_id % 2 == 1, !HTTP2Connection.stopped(user) else { return 0 }
            HTTP2Connection.connection(user).requestRefused(frame.pointee.hd.stream_id, libraryError: libraryError)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            HTTP2Connection.connection(user).frameSent(frame)
            return 0
        }
        nghttp2_session_callbacks_set_error_callback2(callbacks) { _, _, message, length, user in
            if let message {
                HTTP2Connection.connection(user).lastLibraryError = String(
                    decoding: UnsafeRawBufferPointer(start: message, count: length), as: UTF8.self)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, user in
            HTTP2Connection.connection(user).streamClosed(streamID, errorCode: errorCode)
            return 0
        }
    }
}

/// One stream: its request as it arrives, then its exchange's response as it is rendered.
final class HTTP2Stream {
    let id: Int32
    let arrival: Arrival
    let index: Int
    var method = ""
    var path = ""
    var headers = HTTPHeaders()
    var headerBytes = 0
    var body: [UInt8] = []
    var error: HTTPParseError?
    var exchange: Exchange?
    /// Journaled (dispatched, or recorded as cut short).
    var journaled = false
    var head: ResponseHead?
    var submitted = false
    /// Body bytes rendered and not yet handed to nghttp2.
    var pending: [UInt8] = []
    var pendingOffset = 0
    /// Slices of large bodies (`ScriptStep.stream`) after `pending`, read as nghttp2 asks for DATA;
    /// `sliceOffset` bytes of the first are sent.
    var slices: [BodySlice] = []
    var sliceOffset = 0
    var pendingCount: Int {
        pending.count - pendingOffset + (slices.isEmpty ? 0 : slices.reduce(-sliceOffset) { $0 + $1.count })
    }
    /// The script reached `end`: END_STREAM after the pending bytes.
    var eof = false
    var sentEnd = false
    /// nghttp2 asked for body bytes when there were none: `resume_data` when some come.
    var deferredRead = false
    var afterPendingSent: (() -> Void)?
    /// A growing script stopped being pulled with this much pending: `readBody` pulls again when it has gone.
    var awaitingRoom = false
    var timer: CancellableTimer?
    var windowTimer: CancellableTimer?
    /// Runs until the request is complete (`requestTimeoutMilliseconds`).
    var requestTimer: CancellableTimer?
    /// The answer is a 408 to a request still arriving: RST_STREAM NO_ERROR once it is out.
    var resetWhenAnswered = false

    /// The request as it arrived so far: pseudo-headers stay among the headers, as received.
    var requestHead: HTTPRequestHead {
        HTTPRequestHead(method: method, target: path, version: .http2, headers: headers)
    }
    var requestContext: RequestContext {
        RequestContext(arrival: arrival, arrivedNow: false, indexOnConnection: index, stream: Int(id))
    }
    /// The journal's request line for a request that could not be served.
    var requestLine: String { "\(method) \(path) HTTP/2" }

    func cancelTimers() {
        timer?.cancel()
        timer = nil
        windowTimer?.cancel()
        windowTimer = nil
        requestTimer?.cancel()
        requestTimer = nil
    }
    /// No more steps are pulled (ended, hanging, reset).
    var stopped = false
    /// A `hang`: released, not cut short, when the client gives up.
    var hanging = false
    /// A `wait` step's timer runs; the next step comes when it fires.
    var waiting = false
    /// The outcome of a reset the server sent on purpose.
    var ourReset: ExchangeOutcome?
    /// What the client sent to end the stream (RST_STREAM) or the connection (GOAWAY) while it was under way.
    var client = HTTP2ClientFrames()

    init(id: Int32, arrival: Arrival, index: Int) {
        self.id = id
        self.arrival = arrival
        self.index = index
    }
}

/// Header fields for nghttp2, laid out in one buffer with their `nghttp2_nv` entries built once: a response
/// head is rendered into one of these when it is first submitted, and the next stream with the same head reuses it
/// (nghttp2 copies the fields when a frame is submitted).
final class HTTP2Fields {
    private var bytes: [UInt8] = []
    private var spans: [(name: Range<Int>, value: Range<Int>)] = []
    private var storage: UnsafeMutablePointer<UInt8>?
    private var entries: [nghttp2_nv] = []

    deinit { storage?.deallocate() }

    func append(_ name: String, _ value: String) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name.utf8)
        let valueStart = bytes.count
        bytes.append(contentsOf: value.utf8)
        spans.append((nameStart..<valueStart, valueStart..<bytes.count))
        entries = []
    }

    func withNV<T>(_ body: (UnsafePointer<nghttp2_nv>, Int) -> T) -> T {
        if entries.isEmpty {
            storage?.deallocate()
            let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
            buffer.initialize(from: bytes, count: bytes.count)
            storage = buffer
            entries = spans.map { span in
                nghttp2_nv(
                    name: buffer + span.name.lowerBound, value: buffer + span.value.lowerBound,
                    namelen: span.name.count, valuelen: span.value.count,
                    flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
        }
        return entries.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
    }
}
