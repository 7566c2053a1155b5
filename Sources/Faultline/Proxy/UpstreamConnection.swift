import CLibevent
import FaultlineTLS
import FaultlineCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How long the parts of one forwarded exchange took, for the journal's `proxy` record.
struct UpstreamTiming {
    /// TCP connect (and TLS handshake); nil on a reused connection.
    var connectMilliseconds: Double?
    var firstByteMilliseconds: Double?
    var totalMilliseconds: Double = 0
    var reused = false
}

/// Who hears how a forwarded request went (`ProxyService`'s `ForwardedRequest`): one object per request rather
/// than a closure per event, since every proxied request makes one. `upstreamFinished` runs once, with the response
/// read whole or why there is none. When `mayStream`, a body that does not come with its head goes out as it
/// arrives (ARCHITECTURE §4d): `upstreamHead` once, with the body bytes read so far and the connection (to pause
/// and resume its reading, or abandon it), then `upstreamBody` per read, and `upstreamFinished` gets the last bytes
/// or the failure that cut the body short.
protocol UpstreamReceiver: AnyObject {
    var mayStream: Bool { get }
    /// Asked once, with the head (and the body read with it), before streaming: false reads the body whole.
    func shouldStream(_ head: UpstreamResponse) -> Bool
    func upstreamHead(_ response: UpstreamResponse, _ timing: UpstreamTiming, _ connection: UpstreamConnection)
    func upstreamBody(_ bytes: [UInt8])
    func upstreamFinished(_ result: Result<UpstreamResponse, UpstreamError>, _ timing: UpstreamTiming)
}

/// What names a pool of interchangeable upstream connections: the origin and how TLS is checked.
struct UpstreamKey: Hashable {
    var secure: Bool
    var host: String
    var port: Int
    var caFile: String?
    var verify: Bool
}

/// One connection to an upstream, carrying one request at a time (HTTP/1.1 keep-alive, no pipelining): a
/// non-blocking connect with a timeout, a TLS handshake over memory BIOs for https, the request written, the
/// response read by `HTTPResponseParser` under a timeout, then back to its pool or closed. Loop thread only.
final class UpstreamConnection: TransportDelegate {
    private enum State: Equatable {
        /// Waiting for the non-blocking connect.
        case connecting
        /// TCP is up; the TLS handshake runs.
        case handshaking
        /// A request is out (or waiting for the connection to be ready); its response is being read.
        case busy
        /// In the pool, waiting for the next request.
        case idle
        case closed
    }

    let key: UpstreamKey
    private unowned(unsafe) let pool: UpstreamPool
    @exclusivity(unchecked) private var state = State.connecting
    @exclusivity(unchecked) private var fd: Int32 = -1
    @exclusivity(unchecked) private var connectEvent: OpaquePointer?
    @exclusivity(unchecked) private var transport: TCPTransport?
    @exclusivity(unchecked) private var tls: UpstreamTLSSession?
    /// One libevent timer for the connection's lifetime, re-armed per request (a `LoopTimer` per request cost an
    /// allocation and an event_new/event_free each): the handshake deadline, then each response's.
    @exclusivity(unchecked) private var deadline: OpaquePointer?
    @exclusivity(unchecked) private var deadlineIsResponse = false
    /// The request being carried and what to tell when it ends.
    @exclusivity(unchecked) private var request: [UInt8] = []
    @exclusivity(unchecked) private var method = "GET"
    @exclusivity(unchecked) private var parser: HTTPResponseParser?
    @exclusivity(unchecked) private var receiver: UpstreamReceiver?
    /// The body is being streamed (the head went to `upstreamHead`).
    @exclusivity(unchecked) private var streamStarted = false
    /// The receiver chose to read this body whole (`shouldStream`).
    @exclusivity(unchecked) private var keptWhole = false
    /// Reading stopped because the client is slower than the upstream (`pause`).
    @exclusivity(unchecked) private var paused = false
    @exclusivity(unchecked) private var responseTimeout = 0
    @exclusivity(unchecked) private var limits = UpstreamLimits()
    @exclusivity(unchecked) private var timing = UpstreamTiming()
    @exclusivity(unchecked) private var startedAt: UInt64 = 0
    @exclusivity(unchecked) private var sentAt: UInt64 = 0
    /// Requests this connection has carried (a stale kept-alive connection is retried once on a fresh one).
    @exclusivity(unchecked) private(set) var served = 0

    init(key: UpstreamKey, pool: UpstreamPool) {
        self.key = key
        self.pool = pool
    }

    var isIdle: Bool { state == .idle }

    private static func milliseconds(since start: UInt64) -> Double {
        Double(Clock.monotonicNanos() &- start) / 1_000_000
    }

    // MARK: - Connecting

    /// Addresses of the upstream not tried yet: a connect that fails at once or is refused goes on to the next
    /// (an AAAA record whose address is unreachable, then the A record's), as curl and browsers do. A connect that
    /// times out does not: its deadline is the whole connect's.
    @exclusivity(unchecked) private var untried: ArraySlice<UpstreamAddress> = []
    @exclusivity(unchecked) private var addressCount = 1

    /// Starts connecting to the first of `addresses` (resolved, in order); `send` may be called at once (the
    /// request waits for the connection).
    func connect(_ addresses: [UpstreamAddress], timeoutMilliseconds: Int) {
        untried = addresses.dropFirst()
        addressCount = addresses.count
        guard let first = addresses.first else {
            return fail(UpstreamError(.resolve, "\(key.host) resolved to no address"))
        }
        connect(first, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// The next address after a failed connect; false when none is left.
    private func tryNextAddress(timeoutMilliseconds: Int) -> Bool {
        guard let next = untried.popFirst() else { return false }
        freeConnectEvent()
        if fd >= 0 { Posix.close(fd) }
        fd = -1
        connect(next, timeoutMilliseconds: timeoutMilliseconds)
        return true
    }

    private var addressesNote: String { addressCount > 1 ? " (each of its \(addressCount) addresses)" : "" }

    private func connect(_ address: UpstreamAddress, timeoutMilliseconds: Int) {
        let connectStart = Clock.monotonicNanos()
        timing.connectMilliseconds = nil
        switch UpstreamSocket.connect(address) {
        case .failed(let reason):
            if tryNextAddress(timeoutMilliseconds: timeoutMilliseconds) { return }
            fail(UpstreamError(.refused, "cannot connect to \(key.host):\(key.port)\(addressesNote): \(reason)"))
        case .connected(let fd):
            self.fd = fd
            connected(since: connectStart)
        case .inProgress(let fd):
            self.fd = fd
            connectStartedAt = connectStart
            let context = Unmanaged.passUnretained(self).toOpaque()
            connectEvent = event_new(pool.loop.base, fd, Int16(EV_WRITE), { _, what, context in
                let connection = Unmanaged<UpstreamConnection>.fromOpaque(context!).takeUnretainedValue()
                connection.connectEventFired(timedOut: what & Int16(EV_TIMEOUT) != 0)
            }, context)
            var timeout = timeval(milliseconds: timeoutMilliseconds)
            event_add(connectEvent, &timeout)
        }
    }

    @exclusivity(unchecked) private var connectStartedAt: UInt64 = 0
    @exclusivity(unchecked) private var connectTimeout = 0

    private func connectEventFired(timedOut: Bool) {
        freeConnectEvent()
        guard state == .connecting else { return }
        if timedOut {
            fail(UpstreamError(.timeout, "connecting to \(key.host):\(key.port) took longer than \(connectTimeout) ms"))
            return
        }
        if let error = UpstreamSocket.pendingError(fd) {
            if tryNextAddress(timeoutMilliseconds: connectTimeout) { return }
            fail(UpstreamError(.refused, "cannot connect to \(key.host):\(key.port)\(addressesNote): \(error)"))
            return
        }
        connected(since: connectStartedAt)
    }

    private func freeConnectEvent() {
        if let connectEvent {
            event_del(connectEvent)
            event_free(connectEvent)
        }
        connectEvent = nil
    }

    private func connected(since connectStart: UInt64) {
        let tcp = TCPTransport(fd: fd, peerAddress: "\(key.host):\(key.port)", loop: pool.loop, scratch: pool.readScratch)
        tcp.delegate = self
        transport = tcp
        connectStartedAt = connectStart
        guard key.secure else {
            timing.connectMilliseconds = Self.milliseconds(since: connectStart)
            ready()
            return
        }
        switch pool.tlsContext(for: key) {
        case .failure(let error):
            fail(error)
        case .success(let context):
            state = .handshaking
            tls = UpstreamTLSSession(context: context, host: key.host)
            handshakeStep()
        }
    }

    private func handshakeStep() {
        guard let tls else { return }
        switch tls.handshake() {
        case .completed:
            guard flushTLS() else { return }
            timing.connectMilliseconds = Self.milliseconds(since: connectStartedAt)
            ready()
            readTLS()
        case .wantMore:
            _ = flushTLS()
        case .failed(let reason):
            _ = flushTLS()
            fail(UpstreamError(.tls, "TLS handshake with \(key.host):\(key.port) failed: \(reason)"))
        }
    }

    /// Connected (and TLS done): write the request waiting, if any.
    private func ready() {
        state = .busy
        if receiver != nil { writeRequest() }
    }

    // MARK: - One request

    /// Carries `request` (the whole message, `ProxyHeaders.upstreamRequest`); `receiver` hears how it went.
    func send(
        _ request: [UInt8], method: String, limits: UpstreamLimits, reused: Bool, startedAt: UInt64,
        receiver: UpstreamReceiver
    ) {
        self.request = request
        self.method = method
        self.receiver = receiver
        streamStarted = false
        keptWhole = false
        paused = false
        self.limits = limits
        responseTimeout = limits.responseTimeout
        connectTimeout = limits.connectTimeout
        self.startedAt = startedAt
        timing = UpstreamTiming(reused: reused)
        parser = HTTPResponseParser(
            requestMethod: method, maxBodyBytes: limits.maxResponseBytes, mayStream: receiver.mayStream)
        served += 1
        switch state {
        case .idle:
            state = .busy
            writeRequest()
        case .connecting, .handshaking:
            // The connect (and handshake) deadline.
            arm(connectTimeout, response: false)
        case .busy, .closed:
            break
        }
    }

    private func writeRequest() {
        sentAt = Clock.monotonicNanos()
        arm(responseTimeout, response: true)
        let sent = request.withUnsafeBytes { bytes -> Bool in
            if let tls {
                guard tls.write(bytes) else { return false }
                return flushTLS()
            }
            return transport?.write(bytes) ?? false
        }
        if !sent, state != .closed { upstreamClosed(reset: true) }
    }

    // MARK: - TransportDelegate

    func transportReceived(_ bytes: UnsafeRawBufferPointer) {
        if let tls {
            tls.feed(bytes)
            if state == .handshaking { handshakeStep() } else { readTLS() }
            return
        }
        plaintext(bytes)
    }

    private func readTLS() {
        guard let tls else { return }
        while (state == .busy && !paused) || state == .idle {
            switch pool.tlsScratch.withBytes({ tls.read(into: $0) }) {
            case .bytes(let count):
                pool.tlsScratch.withBytes { plaintext(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            case .wantMore:
                _ = flushTLS()
                return
            case .closed:
                upstreamClosed(reset: false)
                return
            case .failed:
                upstreamClosed(reset: true)
                return
            }
        }
    }

    private func plaintext(_ bytes: UnsafeRawBufferPointer) {
        guard state == .busy, parser != nil else {
            // Bytes nobody asked for (on an idle connection): it cannot be trusted with another request.
            if state == .idle { close() }
            return
        }
        if timing.firstByteMilliseconds == nil, !bytes.isEmpty {
            timing.firstByteMilliseconds = Self.milliseconds(since: sentAt)
        }
        switch parser!.feed(bytes) {
        case .needMore: if !keptWhole, receiver?.mayStream == true { streamProgress() }
        case .complete(let response, let extra): succeed(response, reusable: response.reusable && !extra)
        case .failed(let reason): fail(UpstreamError(reason.contains("limit") ? .tooLarge : .badResponse, reason))
        }
    }

    // MARK: - Streaming a body

    /// After a read that left the response unfinished: a body that did not come with its head starts streaming
    /// (the head, with what came of the body, goes out at once), and a streaming body's new bytes go on. While
    /// streaming, the response deadline is the longest silence between two reads, not the whole body's time.
    private func streamProgress() {
        guard let receiver, var parser, parser.inBody else { return }
        if !streamStarted {
            guard receiver.shouldStream(parser.headSoFar) else {
                keptWhole = true
                if let tooLarge = parser.keepWhole() { return fail(UpstreamError(.tooLarge, tooLarge)) }
                return
            }
            streamStarted = true
            let head = parser.startStreaming()
            self.parser = parser
            receiver.upstreamHead(head, timing, self)
        } else {
            let bytes = parser.takeBody()
            self.parser = parser
            if !bytes.isEmpty { receiver.upstreamBody(bytes) }
        }
        if state == .busy && !paused { arm(responseTimeout, response: true) }
    }

    /// The client is slower than the upstream: stop reading (TCP's window then slows the upstream down). Its
    /// silence meanwhile is not the upstream's fault: the deadline waits too.
    func pause() {
        guard state == .busy, streamStarted, !paused else { return }
        paused = true
        disarm()
        transport?.setReading(false)
    }

    /// The client caught up: read again (what TLS holds already first).
    func resume() {
        guard state == .busy, paused else { return }
        paused = false
        arm(responseTimeout, response: true)
        transport?.setReading(true)
        if tls != nil { readTLS() }
    }

    /// The client went away mid-body: the rest is not wanted, and the connection cannot be reused with a body
    /// unread. Nothing more is told.
    func abandon() {
        receiver = nil
        close(abortive: true)
    }

    func transportPeerFinished() { upstreamClosed(reset: false) }

    func transportFailed() { upstreamClosed(reset: true) }

    func transportDrained() {}

    /// The upstream closed (FIN, or RST when `reset`): the end of a close-delimited body, a stale kept-alive
    /// connection (its request is retried once on a fresh one when that is safe), or a failure.
    private func upstreamClosed(reset: Bool) {
        switch state {
        case .idle:
            close()
        case .connecting, .handshaking:
            fail(UpstreamError(state == .handshaking ? .tls : .refused,
                "\(key.host):\(key.port) closed the connection during the \(state == .handshaking ? "TLS handshake" : "connect")"))
        case .busy:
            guard var parser else { return }
            if timing.reused, !parser.receivedAny, Self.retriable(method), let receiver {
                // RFC 9112 §9.3.1: a request on a kept-alive connection the server closed meanwhile may be retried
                // when it is idempotent (RFC 9110 §9.2.2): once, on a fresh connection.
                let (pool, key, request, method, limits, startedAt) = (pool, key, request, method, limits, startedAt)
                self.receiver = nil
                close()
                pool.forward(key, request, method: method, limits: limits, startedAt: startedAt, fresh: true, receiver)
                return
            }
            if !reset, case .complete(let response, _) = parser.finish() {
                self.parser = parser
                succeed(response, reusable: false)
                return
            }
            let reason: String
            if reset && streamStarted {
                reason = "\(key.host):\(key.port) reset the connection after \(parser.bodyBytes) body bytes"
            } else if reset {
                reason = parser.receivedAny ? "\(key.host):\(key.port) reset the connection in the middle of the response"
                    : "\(key.host):\(key.port) reset the connection without answering"
            } else if case .failed(let why) = parser.finish() {
                reason = why
            } else {
                reason = "the upstream closed the connection"
            }
            fail(UpstreamError(.reset, reason))
        case .closed:
            break
        }
    }

    private static func retriable(_ method: String) -> Bool {
        ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"].contains(method)
    }

    // MARK: - Endings

    private func succeed(_ response: UpstreamResponse, reusable: Bool) {
        disarm()
        timing.totalMilliseconds = Self.milliseconds(since: startedAt)
        let done = receiver
        receiver = nil
        parser = nil
        request = []
        if reusable, transport != nil {
            state = .idle
            pool.release(self)
        } else {
            close()
        }
        done?.upstreamFinished(.success(response), timing)
    }

    func fail(_ error: UpstreamError) {
        timing.totalMilliseconds = Self.milliseconds(since: startedAt)
        let done = receiver
        receiver = nil
        close(abortive: true)
        done?.upstreamFinished(.failure(error), timing)
    }

    /// Closes the connection; a request still on it is not answered (the pool is stopping).
    func close(abortive: Bool = false) {
        guard state != .closed else { return }
        state = .closed
        if let deadline {
            event_del(deadline)
            event_free(deadline)
        }
        deadline = nil
        freeConnectEvent()
        tls?.release()
        tls = nil
        if let transport {
            transport.close(abortive: abortive)
        } else if fd >= 0 {
            Posix.close(fd)
        }
        transport = nil
        fd = -1
        pool.closed(self)
    }

    // MARK: - The deadline

    private func arm(_ milliseconds: Int, response: Bool) {
        if deadline == nil {
            deadline = event_new(pool.loop.base, -1, 0, { _, _, context in
                Unmanaged<UpstreamConnection>.fromOpaque(context!).takeUnretainedValue().deadlinePassed()
            }, Unmanaged.passUnretained(self).toOpaque())
        }
        deadlineIsResponse = response
        var timeout = timeval(milliseconds: milliseconds)
        // Measured from now, not from the start of this loop turn (as LoopTimer does).
        event_base_update_cache_time(pool.loop.base)
        event_add(deadline, &timeout)
    }

    private func disarm() {
        if let deadline { event_del(deadline) }
    }

    private func deadlinePassed() {
        if deadlineIsResponse {
            guard state == .busy else { return }
            if streamStarted {
                fail(UpstreamError(.timeout, "\(key.host):\(key.port) sent nothing for \(responseTimeout) ms after "
                    + "\(parser?.bodyBytes ?? 0) body bytes"))
                return
            }
            let what = parser?.status == nil ? "no response" : "no complete response"
            fail(UpstreamError(.timeout, "\(what) from \(key.host):\(key.port) within \(responseTimeout) ms"))
        } else if state == .handshaking {
            fail(UpstreamError(.timeout, "the TLS handshake with \(key.host):\(key.port) took longer than \(connectTimeout) ms"))
        }
    }

    /// Moves OpenSSL's records to the TCP transport; false when the write failed (the connection is closing).
    private func flushTLS() -> Bool {
        guard let tls, let transport else { return false }
        return tls.takeOutput { transport.write($0) }
    }
}
