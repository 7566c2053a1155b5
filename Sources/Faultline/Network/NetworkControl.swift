import CLibevent
import FaultlineCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The network around the server (ARCHITECTURE §3b): the listeners' state, what is done to open connections, the
/// conditions that shape them, and the scenario's timeline that changes all three. Every change is journaled as an
/// entry of kind `network`. Loop thread only.
final class NetworkControl {
    private unowned let core: ServerCore
    private(set) var state = NetworkState()
    /// Nothing beyond "up, unshaped, not frozen" is in force: accepting takes the fast path.
    private(set) var isQuiet = true
    private var timeline: NetworkTimeline?
    /// The scenario whose timeline runs.
    private(set) var timelineScenario: String?
    private var timelineTimer: LoopTimer?
    private var countedRoutes: Set<String> = []
    /// `forMs` of an admin or Swift change: puts the network back.
    private var restoreTimer: LoopTimer?
    /// The filled accept queues of a `blackhole` listener: plain, TLS.
    private var blackholes: [AcceptQueue] = []
    /// Connections a `stall` listener accepted: thawed when it comes back up.
    private var stalled: Set<Int> = []

    init(core: ServerCore) {
        self.core = core
    }

    /// Whether `Dispatcher.finished` should report answered requests (a phase waits for a count).
    var countsRequests: Bool { !countedRoutes.isEmpty }

    /// The conditions' label for request entries, while conditions apply.
    var shapedLabel: String? { state.conditions?.label }

    // MARK: - Changes

    /// Carries out `change` and journals it. Returns the journal's record of it (with an error when the port could
    /// not be bound again).
    @discardableResult
    func apply(
        _ change: NetworkChange, source: String, phase: String? = nil, restoreAfterMilliseconds: Int? = nil
    ) -> NetworkRecord {
        let now = Clock.monotonicNanos() / 1_000_000
        restoreTimer?.cancel()
        restoreTimer = nil
        if let restoreAfterMilliseconds {
            restoreTimer = LoopTimer(loop: core.loop, milliseconds: restoreAfterMilliseconds) { [unowned self] in
                restoreTimer = nil
                apply(NetworkChange(listener: .up, connections: .thaw, conditions: .some(core.configuration.conditions)), source: source,
                      phase: "after \(restoreAfterMilliseconds) ms")
            }
        }
        var record = NetworkRecord(event: .change)
        record.source = source
        record.phase = phase
        if let listener = change.listener, listener != state.listener {
            if let error = setListener(listener) { record.error = error } else { state.listener = listener }
        }
        if let conditions = change.conditions {
            state.conditions = conditions
            for connection in core.connections.values where !connection.servesAdmin { connection.tcp.applyShape(conditions) }
        }
        switch change.connections {
        case .drop?, .dropFin?:
            let abortive = change.connections == .drop
            for connection in Array(core.connections.values) where !connection.servesAdmin {
                connection.dropByNetwork(abortive: abortive)
            }
        case .freeze(let milliseconds)?:
            state.apply(change, nowMilliseconds: now)
            record.freezeMilliseconds = milliseconds
            for connection in core.connections.values where !connection.servesAdmin {
                connection.tcp.freeze(milliseconds: milliseconds)
            }
        case .thaw?:
            state.apply(change, nowMilliseconds: now)
            for connection in core.connections.values { connection.tcp.thaw() }
        case nil:
            break
        }
        record.listener = state.listener
        record.connections = change.connections?.label
        record.conditions = state.conditions?.label
        record.outage = state.isOutage
        updateQuiet(now: now)
        journal(record)
        return record
    }

    /// Back to up, unshaped, not frozen (no entry when it already was), and the timeline from its start: a
    /// scenario load or reset.
    func restart(source: String) {
        let now = Clock.monotonicNanos() / 1_000_000
        let baseline = core.configuration.conditions
        if state.listener != .up || state.conditions != baseline || (state.frozenUntilMilliseconds ?? 0) > now {
            apply(NetworkChange(listener: .up, connections: .thaw, conditions: .some(baseline)), source: source)
        }
        state = NetworkState()
        state.conditions = core.configuration.conditions
        if let baseline = state.conditions {
            for connection in core.connections.values where !connection.servesAdmin { connection.tcp.applyShape(baseline) }
        }
        restoreTimer?.cancel()
        restoreTimer = nil
        deferredTimer?.cancel()
        deferredTimer = nil
        deferred = []
        let owner = core.engine.scenarios.first(where: { !$0.timeline.isEmpty })
        timelineScenario = owner?.name
        timeline = owner.map { NetworkTimeline(phases: $0.timeline, nowMilliseconds: now) }
        countedRoutes = timeline?.countedRoutes ?? []
        updateQuiet(now: now)
        advanceTimeline()
    }

    /// A request to `route` was answered (`Dispatcher.finished`).
    func requestAnswered(route: String) {
        guard countedRoutes.contains(route), var timeline else { return }
        let begun = timeline.requestAnswered(route: route, nowMilliseconds: Clock.monotonicNanos() / 1_000_000)
        self.timeline = timeline
        guard !begun.isEmpty else { return }
        // On the next loop turn: this runs inside the codec's completion of that request, and a phase may drop the
        // very connection that is completing. At the urgent level: libevent activates the sockets that became
        // readable before the timers that fell due, so a kept-alive client's next request, sent as soon as it had
        // this response, would otherwise be read and served first, in the same turn, without the phase.
        deferred += begun
        guard deferredTimer == nil else { return }
        deferredTimer = LoopTimer(loop: core.loop, milliseconds: 0, priority: LoopPriority.urgent) { [unowned self] in
            deferredTimer = nil
            let phases = deferred
            deferred = []
            begin(phases)
        }
    }

    /// Phases a request began, waiting for the next loop turn.
    private var deferred: [(index: Int, phase: TimelinePhase)] = []
    private var deferredTimer: LoopTimer?

    private func advanceTimeline() {
        timelineTimer?.cancel()
        timelineTimer = nil
        guard var timeline else { return }
        let now = Clock.monotonicNanos() / 1_000_000
        let begun = timeline.due(nowMilliseconds: now)
        self.timeline = timeline
        begin(begun)
        if let deadline = self.timeline?.nextDeadline {
            timelineTimer = LoopTimer(loop: core.loop, milliseconds: Int(deadline &- min(deadline, now))) { [unowned self] in
                timelineTimer = nil
                advanceTimeline()
            }
        }
    }

    private func begin(_ phases: [(index: Int, phase: TimelinePhase)]) {
        guard !phases.isEmpty else { return }
        for (index, phase) in phases {
            apply(phase.change, source: "timeline", phase: phase.name ?? "phase \(index + 1)")
        }
        if phases.count > 0 { advanceTimeline() }
    }

    private func updateQuiet(now: UInt64) {
        isQuiet = state.listener == .up && state.conditions == nil
    }

    private func journal(_ record: NetworkRecord) {
        let arrival = Arrival(wall: Clock.wallSeconds(), monotonicNanos: Clock.monotonicNanos())
        var entry = JournalEntry(
            receivedAtWall: arrival.wall, receivedAtMonotonicNanos: arrival.monotonicNanos, connectionID: 0,
            indexOnConnection: 0, clientAddress: "", head: nil, rawRequestLine: record.summary)
        entry.network = record
        entry.outcome = .completed
        entry.scenario = record.source == "timeline" ? timelineScenario : nil
        entry.finishedAtMonotonicNanos = arrival.monotonicNanos
        core.record(entry)
    }

    // MARK: - Listener

    /// Moves the listeners from `state.listener` to `target`; the error when a port could not be bound again.
    private func setListener(_ target: ListenerState) -> String? {
        switch state.listener {
        case .refuse:
            if let error = core.rebindListeners() { return error }
        case .blackhole:
            var queued: [(fd: Int32, address: sockaddr_storage, tls: Bool)] = []
            for (index, listener) in core.listeners.enumerated() {
                guard index < blackholes.count else { break }
                let fd = evconnlistener_get_fd(listener.pointer)
                queued += blackholes[index].drain(listener: fd).map { ($0.fd, $0.address, listener.tls) }
            }
            blackholes = []
            // Clients that waited in the queue are served by the new state, as a network that comes back would.
            state.listener = target
            updateQuiet(now: Clock.monotonicNanos() / 1_000_000)
            for client in queued {
                // A refusing listener would have reset the connections in its queue as it closed.
                if target == .refuse {
                    SocketOptions.abortOnClose(client.fd)
                    Posix.close(client.fd)
                    continue
                }
                var address = client.address
                withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        core.accepted(fd: client.fd, address: $0, length: 0, tls: client.tls)
                    }
                }
            }
        case .stall:
            for id in stalled { core.connections[id]?.tcp.thaw() }
            stalled = []
        case .up, .resetOnAccept:
            break
        }
        switch target {
        case .refuse:
            core.closeListeners()
        case .blackhole:
            core.enableListeners(false)
            blackholes = core.listeners.map { listener in
                var queue = AcceptQueue()
                _ = queue.fill(
                    listener: evconnlistener_get_fd(listener.pointer), host: core.configuration.host, port: listener.port)
                return queue
            }
        case .up, .resetOnAccept, .stall:
            core.enableListeners(true)
        }
        return nil
    }

    // MARK: - Accepting

    /// A new connection while something is in force (`isQuiet` false): answered by the listener's state, shaped by
    /// the conditions, frozen for what is left of a freeze. False when it was refused (closed already).
    func admit(_ tcp: TCPTransport, id: Int) -> Bool {
        let listener = state.listener
        // An attempt during an outage (refuse and blackhole never get here: the kernel answers them).
        if state.isOutage {
            var record = NetworkRecord(event: .attempt)
            record.listener = listener
            record.conditions = state.conditions?.label
            var entry = JournalEntry(
                receivedAtWall: Clock.wallSeconds(), receivedAtMonotonicNanos: Clock.monotonicNanos(), connectionID: id,
                indexOnConnection: 0, clientAddress: tcp.peerAddress, head: nil,
                rawRequestLine: listener == .resetOnAccept ? "(a connection, reset on accept: network reset-on-accept)"
                    : listener == .stall ? "(a connection, stalled: network stall)" : "(a connection, frozen: network offline)")
            entry.isConnectionEntry = true
            entry.network = record
            entry.outcome = listener == .resetOnAccept ? .resetSent : .completed
            entry.finishedAtMonotonicNanos = entry.receivedAtMonotonicNanos
            core.record(entry)
        }
        if listener == .resetOnAccept {
            tcp.close(abortive: true)
            return false
        }
        if let conditions = state.conditions { tcp.applyShape(conditions) }
        if listener == .stall {
            // Thawed when the listener is up again; a day is "until then".
            tcp.freeze(milliseconds: 86_400_000)
            stalled.insert(id)
        }
        return true
    }

    /// The server stops: the fillers of a blackhole are closed, the timers cancelled.
    func stop() {
        for (index, listener) in core.listeners.enumerated() where index < blackholes.count {
            for client in blackholes[index].drain(listener: evconnlistener_get_fd(listener.pointer)) { Posix.close(client.fd) }
        }
        blackholes = []
        timelineTimer?.cancel()
        restoreTimer?.cancel()
        deferredTimer?.cancel()
        timeline = nil
    }

    // MARK: - Admin

    func json() -> JSONValue {
        let now = Clock.monotonicNanos() / 1_000_000
        return .object([
            ("listener", .string(state.listener.rawValue)),
            ("conditions", state.conditions?.json() ?? .null),
            ("frozenForMs", state.frozenUntilMilliseconds.flatMap { $0 > now ? .int(Int($0 - now)) : nil } ?? .null),
            ("outage", .bool(state.isOutage)),
            ("timeline", timeline.map { timeline in
                .object([
                    ("scenario", timelineScenario.map(JSONValue.string) ?? .null),
                    ("phases", .int(timeline.phases.count)),
                    ("begun", .int(timeline.next)),
                ])
            } ?? .null),
        ])
    }
}
