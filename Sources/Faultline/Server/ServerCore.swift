import CLibevent
import FaultlineTLS
import FaultlineCore
import FaultlineHTTP2

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Everything the running server owns, confined to the loop thread: the listener, the connections, the
/// engine and the journal. `FaultlineServer` is its thread-safe front. `@unchecked Sendable` only so that
/// closures posted to the loop can carry it there; it is never used from another thread.
final class ServerCore: @unchecked Sendable {
    let loop: EventLoop
    let configuration: FaultlineServer.Configuration
    let engine: Engine
    @exclusivity(unchecked) var journal: Journal
    private(set) lazy var admin = AdminAPI(core: self)
    private(set) lazy var dispatcher = Dispatcher(core: self)
    /// The upstream connections and the forwarding of proxied requests (ARCHITECTURE §4d).
    private(set) lazy var proxy = ProxyService(core: self)
    /// The HTTP/1.1 connection rules' limits and timings, from the configuration.
    let http1Settings: HTTP1Settings
    /// What an HTTP/2 connection announces and its limits (the parser limits apply to its requests too).
    let http2Settings: HTTP2ConnectionSettings
    var listener: OpaquePointer?
    var tlsListener: OpaquePointer?
    /// The TLS listener's OpenSSL context and certificate authority; nil without TLS.
    private(set) var tlsContext: TLSServerContext?
    /// The bound TLS port; nil without TLS.
    private(set) var tlsPort: Int?
    /// The admin-only listener and its port (`Configuration.adminPort`).
    private var adminListener: OpaquePointer?
    private(set) var adminPort: Int?
    /// Where TLS transports put decrypted bytes; one per loop, reused by every read.
    private(set) lazy var tlsScratch = ScratchBuffer()
    private var signalEvents: [OpaquePointer] = []
    @exclusivity(unchecked) private(set) var connections: [Int: ClientConnection] = [:]
    @exclusivity(unchecked) private var nextConnectionID = 1
    /// Where transports copy bytes out of the kernel before parsing; one per loop, reused by every read.
    let readScratch = ScratchBuffer()
    private(set) var port = 0
    /// Listener states, conditions on connections and the scenario's timeline (ARCHITECTURE §3b).
    private(set) lazy var network = NetworkControl(core: self)
    private(set) var isStopping = false
    let startedAtMonotonic = Clock.monotonicNanos()
    /// Long-polls on the journal (the admin API's and the Swift API's), re-checked whenever it changes.
    private(set) lazy var journalWaits = JournalWaits(core: self)
    /// The dashboard's change feed (`GET /__faultline/events`), and whether anybody watches it: while nobody
    /// does, a journal change costs this one test.
    private(set) lazy var events = EventFeed(core: self)
    @exclusivity(unchecked) var feedActive = false
    /// `serve --journal F`: finished entries appended as NDJSON. Set before the loop starts.
    @exclusivity(unchecked) var journalFile: JournalFile?

    var connectionCount: Int { connections.count }
    /// `--max-connections` (`ConnectionLimit`): what a new connection on a stub port gets.
    let connectionLimit: ConnectionLimit
    /// Connections open on the stub ports (plain and TLS), which the limit counts: `connections` less the admin
    /// port's.
    @exclusivity(unchecked) private(set) var openStubConnections = 0
    /// A descriptor kept open to be given up when accept fails for want of descriptors (`acceptFailed`).
    private var spareDescriptor: Int32 = -1

    init(loop: EventLoop, configuration: FaultlineServer.Configuration) {
        self.loop = loop
        self.configuration = configuration
        engine = Engine(
            scenarios: configuration.scenarios,
            now: EngineInstant(monotonicNanos: Clock.monotonicNanos(), wallSeconds: Clock.wallSeconds()))
        journal = Journal(capacity: configuration.journalCapacity, maxBodyBytes: configuration.journalBodyBytes)
        engine.defaultProxy = configuration.proxy
        var http1 = HTTP1Settings(
            parserLimits: configuration.parserLimits, headerTimeoutMilliseconds: configuration.headerTimeoutMilliseconds)
        http1.bodyTimeoutMilliseconds = configuration.bodyTimeoutMilliseconds
        http1Settings = http1
        var http2 = HTTP2ConnectionSettings()
        http2.parserLimits = configuration.parserLimits
        http2.requestTimeoutMilliseconds = configuration.headerTimeoutMilliseconds
        http2Settings = http2
        connectionLimit = ConnectionLimit(configured: configuration.maxConnections, descriptorLimit: Posix.descriptorLimit())
    }

    /// Binds and listens: the plain port, and the TLS port when TLS is configured. Runs before the loop thread
    /// starts, so touching libevent here is safe.
    func listen() throws(ServerError) {
        (listener, port) = try bind(port: configuration.port, Self.acceptPlain)
        spareDescriptor = Self.openSpare()
        if let requested = configuration.adminPort {
            (adminListener, adminPort) = try bind(port: requested) { _, fd, address, length, context in
                let core = Unmanaged<ServerCore>.fromOpaque(context!).takeUnretainedValue()
                core.accepted(fd: fd, address: address, length: length, tls: false, adminOnly: true)
            }
        }
        guard let tls = configuration.tls else { return }
        do throws(TLSSetupError) {
            tlsContext = try TLSEndpoint.context(for: tls, core: self)
        } catch {
            throw .tls(error.message)
        }
        (tlsListener, tlsPort) = try bind(port: tls.port, Self.acceptTLS)
    }

    private static let acceptPlain: evconnlistener_cb = { _, fd, address, length, context in
        let core = Unmanaged<ServerCore>.fromOpaque(context!).takeUnretainedValue()
        core.accepted(fd: fd, address: address, length: length, tls: false)
    }

    private static let acceptTLS: evconnlistener_cb = { _, fd, address, length, context in
        let core = Unmanaged<ServerCore>.fromOpaque(context!).takeUnretainedValue()
        core.accepted(fd: fd, address: address, length: length, tls: true)
    }

    // MARK: - Listener states (ARCHITECTURE §3b)

    /// The listening sockets there are now, with their ports.
    var listeners: [(pointer: OpaquePointer, port: Int, tls: Bool)] {
        var all: [(pointer: OpaquePointer, port: Int, tls: Bool)] = []
        if let listener { all.append((listener, port, false)) }
        if let tlsListener, let tlsPort { all.append((tlsListener, tlsPort, true)) }
        return all
    }

    /// The listeners stopped listening but still hold their ports (`closeListeners` on Linux).
    private var listenersHeld = false

    /// `refuse`: nothing listens any more (the kernel answers RST). On Linux the sockets stop listening but keep
    /// their ports (`SocketOptions.stopListening`), so no other socket — another test's server binding port 0, say —
    /// can take one meanwhile; elsewhere they are closed, and `rebindListeners` binds the same ports again.
    func closeListeners() {
        let all = [listener, tlsListener].compactMap { $0 }
        for listener in all { evconnlistener_disable(listener) }
        if !all.isEmpty, all.allSatisfy({ SocketOptions.stopListening(evconnlistener_get_fd($0)) }) {
            listenersHeld = true
            return
        }
        freeListeners()
    }

    private func freeListeners() {
        if let listener { evconnlistener_free(listener) }
        listener = nil
        if let tlsListener { evconnlistener_free(tlsListener) }
        tlsListener = nil
    }

    /// Listens again after `refuse` (the caller enables accepting); the error when a port cannot be bound again
    /// (closed listeners only: another process took it).
    func rebindListeners() -> String? {
        if listenersHeld {
            listenersHeld = false
            for held in [listener, tlsListener].compactMap({ $0 })
            where !SocketOptions.resumeListening(evconnlistener_get_fd(held)) {
                // Cannot happen to a bound socket in CLOSE; if it does, start over with new sockets.
                freeListeners()
                break
            }
            if listener != nil { return nil }
        }
        do throws(ServerError) {
            if listener == nil { (listener, _) = try bind(port: port, Self.acceptPlain) }
            if tlsListener == nil, let tlsPort { (tlsListener, _) = try bind(port: tlsPort, Self.acceptTLS) }
            return nil
        } catch {
            return "\(error)"
        }
    }

    func enableListeners(_ enabled: Bool) {
        for listener in [listener, tlsListener].compactMap({ $0 }) {
            if enabled { evconnlistener_enable(listener) } else { evconnlistener_disable(listener) }
        }
    }

    /// One listening socket on the configured host.
    func bind(port requested: Int, _ callback: evconnlistener_cb) throws(ServerError) -> (OpaquePointer, Int) {
        var storage = sockaddr_storage()
        var length: Int32
        let port = UInt16(clamping: requested)
        if configuration.host.contains(":") {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, configuration.host, &address.sin6_addr) == 1 else {
                throw .cannotListen(host: configuration.host, port: requested, reason: "not a numeric IPv6 address")
            }
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee = address }
            }
            length = Int32(MemoryLayout<sockaddr_in6>.size)
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            guard inet_pton(AF_INET, configuration.host, &address.sin_addr) == 1 else {
                throw .cannotListen(host: configuration.host, port: requested, reason: "not a numeric IPv4 address")
            }
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee = address }
            }
            length = Int32(MemoryLayout<sockaddr_in>.size)
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        let flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                evconnlistener_new_bind(loop.base, callback, context, flags, 1024, address, length)
            }
        }
        guard let bound else {
            throw .cannotListen(host: configuration.host, port: requested, reason: String(cString: strerror(errno)))
        }
        evconnlistener_set_error_cb(bound) { listener, context in
            let code = errno
            let core = Unmanaged<ServerCore>.fromOpaque(context!).takeUnretainedValue()
            core.acceptFailed(listener, errno: code)
        }
        var address = sockaddr_storage()
        var addressLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                _ = getsockname(evconnlistener_get_fd(bound), $0, &addressLength)
            }
        }
        let boundPort = Int(address.ss_family == sa_family_t(AF_INET6)
            ? withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) } }
            : withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) } })
        return (bound, boundPort)
    }

    private var acceptPause: LoopTimer?

    private static func openSpare() -> Int32 {
        open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    /// accept failed. Out of descriptors (EMFILE, ENFILE): the spare is given up for the connection that waits,
    /// which is journaled and closed (`ConnectionLimit`); libevent calls again while more wait. Otherwise, or when
    /// even that fails: accepting pauses for 100 ms instead of spinning on the error.
    private func acceptFailed(_ failing: OpaquePointer?, errno code: Int32) {
        if code == EMFILE || code == ENFILE, let failing, spareDescriptor >= 0 {
            Posix.close(spareDescriptor)
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(evconnlistener_get_fd(failing), $0, &length)
                }
            }
            if fd >= 0 {
                let id = nextConnectionID
                nextConnectionID += 1
                let peer = withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Self.describe($0) }
                }
                Posix.close(fd)
                dispatcher.journalRefusedConnection(
                    id: id, clientAddress: peer, tls: failing == tlsListener,
                    reason: "out of file descriptors (\(code == EMFILE ? "EMFILE" : "ENFILE"): ulimit -n "
                        + "\(Posix.descriptorLimit().map(String.init) ?? "unlimited"), \(connections.count) connections open)")
            }
            spareDescriptor = Self.openSpare()
            if fd >= 0 && spareDescriptor >= 0 { return }
        }
        guard acceptPause == nil else { return }
        enableListeners(false)
        acceptPause = LoopTimer(loop: loop, milliseconds: 100) { [unowned self] in
            acceptPause = nil
            if listenersMayResume { enableListeners(true) }
        }
    }

    /// Whether a pause of accepting (`acceptFailed`, `countAccept`) may start the listeners again when it ends:
    /// not while the server stops or the network says `refuse` or `blackhole`, which stopped them for good.
    private var listenersMayResume: Bool {
        !isStopping && network.state.listener != .blackhole && network.state.listener != .refuse
    }

    /// Accepts on the stub ports between two pauses of one loop turn (ARCHITECTURE §11). libevent's listener
    /// accepts until the backlog is empty, so 300 clients connecting at once were 300 accepts, each with its
    /// transport, TLS session and timer, in one turn, and a kept-alive client's ready request waited behind them
    /// (10–26 ms, `scripts/h2-abuse-compare.py`'s half-open row; nginx, which accepts one per event, 2–4 ms). After
    /// this many the listeners stop for a turn: the backlog waits in the kernel while what is ready runs, and the
    /// ClientHellos of the connections just accepted come in the turns after, a few at a time.
    static let acceptsPerTurn = 8
    @exclusivity(unchecked) private var acceptsSincePause = 0
    @exclusivity(unchecked) private var acceptTurnPause: LoopTimer?

    /// Counts an accept on a stub port; the `acceptsPerTurn`-th stops the listeners until a 0 ms timer, which
    /// fires after the next turn's ready sockets, starts them again (unless something else stopped them meanwhile:
    /// `refuse`, `blackhole`, an EMFILE pause, the server stopping).
    private func countAccept() {
        acceptsSincePause += 1
        guard acceptsSincePause >= Self.acceptsPerTurn, acceptTurnPause == nil else { return }
        enableListeners(false)
        acceptTurnPause = LoopTimer(loop: loop, milliseconds: 0) { [unowned self] in
            acceptTurnPause = nil
            acceptsSincePause = 0
            if listenersMayResume, acceptPause == nil { enableListeners(true) }
        }
    }

    func accepted(fd: Int32, address: UnsafeMutablePointer<sockaddr>?, length: Int32, tls: Bool, adminOnly: Bool = false) {
        if !adminOnly { countAccept() }
        let id = nextConnectionID
        nextConnectionID += 1
        let admission = adminOnly ? .within : connectionLimit.admit(open: openStubConnections)
        if admission == .refused {
            Posix.close(fd)
            dispatcher.journalRefusedConnection(
                id: id, clientAddress: Self.describe(address), tls: tls,
                reason: "\(openStubConnections) connections open, \(ConnectionLimit.overflow) past --max-connections "
                    + "\(connectionLimit.limit)")
            return
        }
        let tcp = TCPTransport(fd: fd, peerAddress: Self.describe(address), loop: loop, scratch: readScratch)
        // Under network conditions the listener's state answers first (reset-on-accept closes it here).
        if !network.isQuiet, !adminOnly, !network.admit(tcp, id: id) { return }
        // The journal's client address is the transport's peer: one source, whatever the transport.
        var info = ConnectionInfo(id: id, clientAddress: tcp.peerAddress)
        info.adminOnly = adminOnly
        if admission == .pastLimit { info.pastLimit = connectionLimit.limit }
        if !adminOnly { openStubConnections += 1 }
        if tls, let tlsContext {
            let transport = TLSTransport(
                tcp: tcp, context: tlsContext, loop: loop, plaintext: tlsScratch,
                handshakeTimeoutMilliseconds: configuration.headerTimeoutMilliseconds)
            connections[id] = ClientConnection(info: info, transport: transport, tcp: tcp, tls: transport, server: self)
        } else {
            connections[id] = ClientConnection(info: info, transport: tcp, tcp: tcp, tls: nil, server: self)
        }
    }

    /// Connections to close once nothing more urgent is ready (`HTTP1Connection.closeGracefully`, `LoopPriority`).
    @exclusivity(unchecked) private var closeQueue: [ClientConnection] = []
    @exclusivity(unchecked) private var closeQueueStart = 0
    /// Closes per slice: a close costs about as much as a send, so a long queue is worked off in slices, and
    /// timers and sockets that become ready meanwhile go between slices instead of waiting for the whole queue.
    private static let closeSlice = 64
    /// When timers and sockets keep the loop busy for this long (a burst of expiring delays is over long before),
    /// the queue moves on anyway, a slice every 5 ms while the loop stays busy: a flood of one-request
    /// connections cannot pile up descriptors, and no timer waits behind more than one slice.
    private static let closeMaxWaitMilliseconds = 250
    private lazy var closeTask = TurnEndAction(
        loop: loop, maxWaitMilliseconds: Self.closeMaxWaitMilliseconds, starvedIntervalMilliseconds: 5
    ) { [unowned self] in closeNextSlice() }

    /// The scripted waits pending on every connection (`StepDeadlines`), counted by their loop timers.
    let stepDeadlines = StepDeadlines()
    /// A slice of closes stands aside while a scripted wait falls due (`DeadlineYield.windowMilliseconds`): a close
    /// costs about what the response it follows cost, so closing in front of a burst of falling-due delays makes each
    /// later one late. Past `closeMaxWaitMilliseconds` a slice runs even with waits due (descriptors must not pile up
    /// behind an endless drip).
    private lazy var closeYield = DeadlineYield(
        loop: loop, deadlines: stepDeadlines, maxWaitMilliseconds: Int64(Self.closeMaxWaitMilliseconds)
    ) { [unowned self] in closeTask.schedule() }

    private func closeNextSlice() {
        guard closeYield.mayRun() else { return }
        let end = min(closeQueueStart + Self.closeSlice, closeQueue.count)
        let closing = closeQueue[closeQueueStart..<end]
        closeQueueStart = end
        if closeQueueStart == closeQueue.count {
            closeQueue.removeAll(keepingCapacity: true)
            closeQueueStart = 0
        } else {
            closeTask.schedule()
        }
        for connection in closing { connection.closeFromQueue() }
    }

    /// Closes `connection` once no timer is due and no socket is ready (`LoopPriority.housekeeping`), or after
    /// `closeMaxWaitMilliseconds`: every timer that expired with this one, or while closes were waiting, fires
    /// (and sends) first.
    func closeSoon(_ connection: ClientConnection) {
        if closeQueue.count == closeQueueStart { closeYield.queueStarted() }
        closeQueue.append(connection)
        closeTask.schedule()
    }

    func connectionClosed(_ connection: ClientConnection) {
        connections[connection.id] = nil
        if !connection.info.adminOnly { openStubConnections -= 1 }
        journalWaits.ownerGone(connection.id)
        if feedActive { events.ownerGone(connection.id) }
        if stopWhenClosed?.connection == connection.id { stop() }
    }

    /// Stops on SIGINT and SIGTERM, through the loop (libevent's signal events), so shutdown runs on the
    /// loop thread like everything else.
    func stopOnSignals(_ onSignal: @escaping (Int32) -> Void) {
        signalHandler = onSignal
        let context = Unmanaged.passUnretained(self).toOpaque()
        for signal in [SIGINT, SIGTERM] {
            if let event = event_new(loop.base, signal, Int16(EV_SIGNAL | EV_PERSIST), { signal, _, context in
                let core = Unmanaged<ServerCore>.fromOpaque(context!).takeUnretainedValue()
                core.signalHandler?(signal)
                core.stop()
            }, context) {
                event_add(event, nil)
                signalEvents.append(event)
            }
        }
    }

    private var signalHandler: ((Int32) -> Void)?

    // MARK: - Journal

    /// One stderr line per finished request, when the CLI asked for it.
    @exclusivity(unchecked) var requestLog: RequestLog?

    @discardableResult
    func record(_ entry: consuming JournalEntry) -> Int {
        let finished = entry.outcome != .pending
        let sequence = journal.record(consume entry)
        if let journalFile, let stored = journal.entry(sequence) { journalFile.recorded(stored) }
        if let requestLog, finished, let stored = journal.entry(sequence) { requestLog.finished(stored) }
        notifyJournalObservers()
        if feedActive { events.entryChanged(sequence) }
        return sequence
    }

    func updateEntry(_ sequence: Int, _ change: (inout JournalEntry) -> Void) {
        let wasPending = requestLog != nil && journal.entry(sequence)?.outcome == .pending
        journal.update(sequence, change)
        if wasPending, let stored = journal.entry(sequence), stored.outcome != .pending { requestLog?.finished(stored) }
        journalFile?.update(sequence, change)
        notifyJournalObservers()
        if feedActive { events.entryChanged(sequence) }
    }

    /// Forgets the journal's entries (counters and sequence numbers go on); the dashboard starts again.
    func clearJournal() {
        journal.clear()
        events.journalCleared()
    }

    private func notifyJournalObservers() {
        if !journalWaits.isEmpty { journalWaits.journalChanged() }
    }

    // MARK: - Scenarios

    /// Replaces the loaded scenarios. Responses still pending from the old ones are cut off, so nothing from
    /// one test's script can reach the next.
    func load(_ scenarios: [Scenario]) {
        cancelPendingResponses()
        engine.load(scenarios, now: now())
        network.restart(source: "load")
        events.stateChanged()
    }

    /// Re-reads the scenario files and folders the server was started with and, when they load cleanly and
    /// differ from what is serving, serves them instead: every script starts from the beginning. All or nothing:
    /// one broken file rejects the reload and the previous scenarios keep serving. Unlike `load`, responses in
    /// flight are not cut: they finish as planned by the old scripts, and their completions are ignored
    /// (`Engine.generation`). Reads the files on the loop thread: scenario files are small local files.
    @discardableResult
    func reloadScenarioFiles(trigger: ScenarioReload.Trigger) -> ScenarioReload {
        var result = ScenarioReload(trigger: trigger)
        defer { configuration.onReload?(result) }
        guard !configuration.scenarioPaths.isEmpty else {
            result.errors = [ScenarioError(
                file: "", jsonPath: "", message: "no scenario files to reload: this server's scenarios were given in code")]
            result.serving = servingVersions()
            return result
        }
        let loaded: [Scenario]
        do {
            loaded = try ScenarioLoader.load(paths: configuration.scenarioPaths)
        } catch {
            result.errors = error.errors
            result.serving = servingVersions()
            return result
        }
        if loaded != engine.scenarios {
            let before = Dictionary(servingVersions().map { ($0.name, $0.version) }, uniquingKeysWith: { first, _ in first })
            engine.load(loaded, now: now())
            network.restart(source: "load")
            events.stateChanged()
            result.changed = servingVersions().filter { before[$0.name] != $0.version }
            let names = Set(loaded.map(\.name))
            result.removed = before.keys.filter { !names.contains($0) }.sorted()
        }
        result.serving = servingVersions()
        return result
    }

    func servingVersions() -> [ScenarioReload.Version] {
        zip(engine.scenarios, engine.versions).map {
            ScenarioReload.Version(name: $0.name, version: $1, source: $0.sourceFile)
        }
    }

    /// SIGHUP reloads the scenario files (the CLI's `serve`).
    func reloadOnHangup() {
        let context = Unmanaged.passUnretained(self).toOpaque()
        if let event = event_new(loop.base, SIGHUP, Int16(EV_SIGNAL | EV_PERSIST), { _, _, context in
            Unmanaged<ServerCore>.fromOpaque(context!).takeUnretainedValue().reloadScenarioFiles(trigger: .signal)
        }, context) {
            event_add(event, nil)
            signalEvents.append(event)
        }
    }

    /// `serve --watch`: reload when a scenario file changes.
    var watcher: ScenarioWatcher?

    func watchScenarioFiles() throws(ServerError) -> String {
        if let watcher { return watcher.mechanism }
        let watcher = try ScenarioWatcher(loop: loop, paths: configuration.scenarioPaths) { [unowned self] in
            reloadScenarioFiles(trigger: .watch)
        }
        self.watcher = watcher
        return watcher.mechanism
    }

    func resetScenarios() {
        cancelPendingResponses()
        engine.reset(now: now())
        network.restart(source: "reset")
        events.stateChanged()
    }

    /// The engine's clock: monotonic for durations and expiry, wall time for HTTP-dates.
    func now() -> EngineInstant {
        EngineInstant(monotonicNanos: Clock.monotonicNanos(), wallSeconds: Clock.wallSeconds())
    }

    private func cancelPendingResponses() {
        for connection in connections.values where connection.hasPendingScriptedResponse {
            connection.cancelPendingResponses()
        }
    }

    // MARK: - Stopping

    /// How long `stop(afterClosing:)` waits for the asking connection to close.
    static let stopAfterAnswerMilliseconds = 250
    private var stopWhenClosed: (connection: Int, timer: LoopTimer)?

    /// Stops once the connection that asked (`POST /shutdown`, `/record/stop`) has closed, or after
    /// `stopAfterAnswerMilliseconds`: its answer is complete but may still sit in the socket's buffers, and an
    /// HTTP/2 client answers it with frames of its own (WINDOW_UPDATE, a SETTINGS ack, GOAWAY); closing a socket
    /// with unread input sends RST, which can destroy the answer at the client before it reads it.
    func stop(afterClosing connection: Int) {
        guard !isStopping, stopWhenClosed == nil else { return }
        guard connections[connection] != nil else { return stop() }
        let timer = LoopTimer(loop: loop, milliseconds: Self.stopAfterAnswerMilliseconds) { [unowned self] in stop() }
        stopWhenClosed = (connection, timer)
    }

    /// Stops accepting, closes every connection (pending exchanges are journaled as cancelled) and ends the
    /// loop. Loop thread only.
    func stop() {
        guard !isStopping else { return }
        isStopping = true
        stopWhenClosed?.timer.cancel()
        stopWhenClosed = nil
        network.stop()
        if let listener { evconnlistener_free(listener) }
        listener = nil
        if let tlsListener { evconnlistener_free(tlsListener) }
        tlsListener = nil
        if let adminListener { evconnlistener_free(adminListener) }
        adminListener = nil
        acceptPause?.cancel()
        acceptTurnPause?.cancel()
        acceptTurnPause = nil
        if spareDescriptor >= 0 { Posix.close(spareDescriptor) }
        spareDescriptor = -1
        for event in signalEvents {
            event_del(event)
            event_free(event)
        }
        signalEvents = []
        watcher?.stop()
        journalWaits.stop()
        if feedActive { events.stop() }
        for connection in Array(connections.values) { connection.teardown(.cancelled) }
        proxy.stop()
        closeQueue.removeAll()
        closeQueueStart = 0
        closeYield.cancel()
        closeTask.close()
        journalFile?.close()
        requestLog?.close()
        if let onStop = configuration.onStop {
            onStop(StopSummary(outcomes: journal.requestOutcomes(), report: Report(engine.report(journal: journal.entries))))
        }
        loop.breakLoop()
    }

    private static func describe(_ address: UnsafeMutablePointer<sockaddr>?) -> String {
        guard let address else { return "unknown" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let length = socklen_t(address.pointee.sa_family == sa_family_t(AF_INET6)
            ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        guard getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                          NI_NUMERICHOST | NI_NUMERICSERV) == 0 else { return "unknown" }
        let hostText = String(decoding: host.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let serviceText = String(decoding: service.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return address.pointee.sa_family == sa_family_t(AF_INET6) ? "[\(hostText)]:\(serviceText)" : "\(hostText):\(serviceText)"
    }
}
