import FaultlineCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The limits one forwarded request runs under (`ProxyConfig`).
struct UpstreamLimits {
    var connectTimeout = ProxyConfig.defaultConnectTimeoutMilliseconds
    var responseTimeout = ProxyConfig.defaultResponseTimeoutMilliseconds
    var maxResponseBytes = ProxyConfig.defaultMaxResponseBytes
}

/// The loop's connections to its upstreams (ARCHITECTURE §4d): kept alive between requests, at most
/// `maxIdlePerUpstream` idle ones per upstream (the most recently used is taken first, so the rest can time out
/// on the upstream's side), TLS contexts made once, host names resolved off the loop and remembered for a minute.
/// Loop thread only.
final class UpstreamPool {
    /// Idle kept-alive connections kept per upstream; one more is closed instead (nginx's `keepalive N`).
    static let maxIdlePerUpstream = 64
    /// How long a resolved host name is used before it is resolved again.
    static let resolvedLifetimeNanos: UInt64 = 60_000_000_000

    let loop: EventLoop
    /// Where TCP transports copy bytes out of the kernel (the server's, shared: one loop).
    let readScratch: ScratchBuffer
    /// Where TLS upstreams' plaintext goes before the response parser copies it.
    let tlsScratch = ScratchBuffer()
    @exclusivity(unchecked) private var idle: [UpstreamKey: [UpstreamConnection]] = [:]
    /// Every open connection: the pool owns them (their libevent callbacks hold no reference).
    @exclusivity(unchecked) private var live: [ObjectIdentifier: UpstreamConnection] = [:]
    @exclusivity(unchecked) private var contexts: [TLSContextKey: UpstreamTLSContext] = [:]
    @exclusivity(unchecked) private var resolved: [String: (addresses: [UpstreamAddress], at: UInt64)] = [:]
    @exclusivity(unchecked) private var resolving: [String: [(Result<[UpstreamAddress], UpstreamError>) -> Void]] = [:]
    @exclusivity(unchecked) private var stopped = false

    private struct TLSContextKey: Hashable {
        var caFile: String?
        var verify: Bool
    }

    init(loop: EventLoop, readScratch: ScratchBuffer) {
        self.loop = loop
        self.readScratch = readScratch
    }

    /// Open connections (idle ones included), for tests and health.
    var openConnections: Int { live.count }

    /// Sends `request` to `key`'s upstream on an idle connection (unless `fresh`) or a new one; `receiver` hears,
    /// on the loop, the response (read whole, or streamed when it may be) or why there is none.
    func forward(
        _ key: UpstreamKey, _ request: [UInt8], method: String, limits: UpstreamLimits, startedAt: UInt64,
        fresh: Bool = false, _ receiver: UpstreamReceiver
    ) {
        // popLast in place: copying the array out of the dictionary and back copied it whole (a retain and a
        // release of every idle connection per request).
        if !fresh, let connection = idle[key]?.popLast() {
            connection.send(request, method: method, limits: limits, reused: true, startedAt: startedAt, receiver: receiver)
            return
        }
        let connection = UpstreamConnection(key: key, pool: self)
        live[ObjectIdentifier(connection)] = connection
        connection.send(request, method: method, limits: limits, reused: false, startedAt: startedAt, receiver: receiver)
        addresses(key) { [weak connection] result in
            guard let connection else { return }
            switch result {
            case .success(let addresses): connection.connect(addresses, timeoutMilliseconds: limits.connectTimeout)
            case .failure(let error): connection.fail(error)
            }
        }
    }

    /// A connection whose response was complete and whose upstream keeps it open.
    func release(_ connection: UpstreamConnection) {
        let count = idle[connection.key]?.count ?? 0
        guard !stopped, count < Self.maxIdlePerUpstream else {
            connection.close()
            return
        }
        idle[connection.key, default: []].append(connection)
    }

    /// A connection closed (by either side): forgotten.
    func closed(_ connection: UpstreamConnection) {
        live[ObjectIdentifier(connection)] = nil
        if let index = idle[connection.key]?.firstIndex(where: { $0 === connection }) {
            idle[connection.key]?.remove(at: index)
        }
    }

    func tlsContext(for key: UpstreamKey) -> Result<UpstreamTLSContext, UpstreamError> {
        let contextKey = TLSContextKey(caFile: key.caFile, verify: key.verify)
        if let known = contexts[contextKey] { return .success(known) }
        let made = UpstreamTLSContext.make(caFile: key.caFile, verify: key.verify)
        if case .success(let context) = made { contexts[contextKey] = context }
        return made
    }

    /// Closes every connection; requests in flight are not answered (the server is stopping).
    func stop() {
        stopped = true
        for connection in Array(live.values) { connection.close(abortive: true) }
        idle = [:]
    }

    // MARK: - Names

    /// The upstream's addresses: a literal address at once, `localhost` as 127.0.0.1, a name from the cache or
    /// from `getaddrinfo` on a thread of its own (it blocks; the loop must not), the answer posted back.
    private func addresses(_ key: UpstreamKey, _ then: @escaping (Result<[UpstreamAddress], UpstreamError>) -> Void) {
        if let literal = UpstreamAddress(literal: key.host, port: key.port) {
            return then(.success([literal]))
        }
        if key.host.lowercased() == "localhost" {
            // RFC 6761 §6.3: localhost is loopback; no resolver needed (and none consulted). Both loopbacks, IPv6
            // first as getaddrinfo orders them: an upstream listening on 127.0.0.1 alone is reached on the second.
            return then(.success([
                UpstreamAddress(literal: "::1", port: key.port)!, UpstreamAddress(literal: "127.0.0.1", port: key.port)!,
            ]))
        }
        let name = "\(key.host):\(key.port)"
        if let known = resolved[name], Clock.monotonicNanos() &- known.at < Self.resolvedLifetimeNanos {
            return then(.success(known.addresses))
        }
        if resolving[name] != nil {
            resolving[name]!.append(then)
            return
        }
        resolving[name] = [then]
        ResolveJob(host: key.host, port: key.port, name: name, pool: self).start()
    }

    fileprivate func resolvedName(_ name: String, _ result: Result<[UpstreamAddress], UpstreamError>) {
        if case .success(let addresses) = result { resolved[name] = (addresses, Clock.monotonicNanos()) }
        let waiting = resolving.removeValue(forKey: name) ?? []
        for then in waiting { then(result) }
    }
}

/// One `getaddrinfo` on a detached thread of its own; the answer is posted to the loop.
private final class ResolveJob: @unchecked Sendable {
    let host: String
    let port: Int
    let name: String
    /// Strong: the pool stays until the answer is delivered, even if the server stopped meanwhile.
    let pool: UpstreamPool

    init(host: String, port: Int, name: String, pool: UpstreamPool) {
        self.host = host
        self.port = port
        self.name = name
        self.pool = pool
    }

    func start() {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let created = pthread_create(&thread, nil, { context in
            let job = Unmanaged<ResolveJob>.fromOpaque(context!).takeRetainedValue()
            let result = UpstreamSocket.resolve(job.host, port: job.port)
            job.pool.loop.post { job.pool.resolvedName(job.name, result) }
            return nil
        }, context)
        if created == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<ResolveJob>.fromOpaque(context).release()
            pool.resolvedName(name, .failure(UpstreamError(.resolve, "cannot start a resolver thread (\(created))")))
        }
    }
}
