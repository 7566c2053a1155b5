import FaultlineCore

/// The facts about a connection that every exchange on it is journaled with.
struct ConnectionInfo {
    let id: Int
    let clientAddress: String
    /// The connection's TLS once its handshake completed; nil on the plain port.
    var tls: TLSSummary?
    /// HTTP/1.1 until the connection turns out to speak HTTP/2 (ALPN `h2`, or the h2c preface).
    var exchangeProtocol: ExchangeProtocol = .http1
    /// The client's address without its port: what a per-client rate limit counts.
    let clientHost: String
    /// Accepted on the admin-only port (`--admin-port`): it serves the admin API and nothing else.
    var adminOnly = false
    /// Accepted past the connection limit (`ConnectionLimit`), which was this: its requests get 503 and a close,
    /// its admin API calls are served.
    var pastLimit: Int?
    /// Monotonic ns at accept: a request on a connection accepted after an answer ended was sent after it.
    let openedAtNanos: UInt64

    init(id: Int, clientAddress: String) {
        self.id = id
        self.clientAddress = clientAddress
        clientHost = clientAddress.lastIndex(of: ":").map { String(clientAddress[..<$0]) } ?? clientAddress
        openedAtNanos = Clock.monotonicNanos()
    }
}

/// The one entry for every exchange, whatever protocol carried it (ARCHITECTURE §4): the admin API or the
/// engine decides, the journal records. A codec hands it a request and gets an `Exchange` whose script it
/// carries out; it says how the exchange ended through `finished`. The journal entry is built here and only
/// here. Loop thread only.
final class Dispatcher {
    /// The server core owns the Dispatcher (unowned(unsafe): no reference counting per request).
    private unowned(unsafe) let core: ServerCore

    init(core: ServerCore) {
        self.core = core
    }

    /// A complete request: an admin call (answered now or, for a long-poll, later) or a scripted exchange.
    func dispatch(_ request: HTTPRequest, _ context: RequestContext, on connection: ConnectionInfo) -> Exchange {
        let clientWantsClose = !request.head.clientWantsKeepAlive
        if connection.adminOnly, !AdminAPI.isAdminTarget(request.target) {
            let response = HTTPResponse.json(404, .object([
                ("error", .string("this port serves only the admin API (\(AdminAPI.prefix)…); the stubs are on the main port")),
            ]))
            return Exchange(sequence: nil, script: .simple(for: request, response: response), clientWantsClose: clientWantsClose)
        }
        if AdminAPI.isAdminTarget(request.target) {
            let exchange = Exchange(sequence: nil, script: nil, clientWantsClose: clientWantsClose)
            core.admin.handle(request, connectionID: connection.id) { [exchange] script, after in
                exchange.afterCompletion = after
                exchange.respond(script)
            }
            return exchange
        }
        if let limit = connection.pastLimit { return connectionLimited(request, context, connection, limit: limit) }
        let decision = core.engine.decide(
            request, requestID: core.journal.nextSequence, connectionRequestIndex: context.indexOnConnection,
            client: connection.clientHost,
            now: context.arrivedNow
                ? EngineInstant(monotonicNanos: context.arrival.monotonicNanos, wallSeconds: context.arrival.wall)
                : core.now(),
            attempt: Retries.Attempt(
                connection: connection.id, stream: context.stream, connectionOpenedAtNanos: connection.openedAtNanos,
                arrivedAtNanos: context.arrival.monotonicNanos))
        var entry = Self.entry(context, connection, head: request.head, body: request.body)
        entry.record(decision)
        if let shaped = core.network.shapedLabel {
            var record = NetworkRecord(event: .shaped)
            record.conditions = shaped
            entry.network = record
        }
        if let plan = decision.proxy {
            // Forwarded (ARCHITECTURE §4d): the script comes when the upstream has answered.
            entry.proxy = ProxyRecord(upstream: plan.upstreamURL)
            let sequence = core.record(consume entry)
            let exchange = Exchange(sequence: sequence, script: nil, clientWantsClose: clientWantsClose)
            exchange.engineCompletion = decision.completion
            core.proxy.forward(plan, exchange: exchange, sequence: sequence, connection: connection)
            return exchange
        }
        let exchange = Exchange(
            sequence: core.record(consume entry), script: decision.script, clientWantsClose: clientWantsClose)
        exchange.engineCompletion = decision.completion
        return exchange
    }

    /// A request on a connection accepted past the connection limit: 503 with `Retry-After: 1` (RFC 9110 §15.6.4:
    /// the server is overloaded, try again), and over HTTP/1.1 a close, which frees the connection's place. Journaled
    /// under the route `connection-limit`; no scenario, rule or verdict sees it.
    private func connectionLimited(
        _ request: HTTPRequest, _ context: RequestContext, _ connection: ConnectionInfo, limit: Int
    ) -> Exchange {
        var entry = Self.entry(context, connection, head: request.head, body: request.body)
        entry.route = .connectionLimit
        entry.answeredBy = .connectionLimit
        entry.status = 503
        let reason = "\(limit) client connections were open (serve --max-connections \(limit)): this one was "
            + "accepted past the limit, to be told so"
        var response = HTTPResponse.json(503, .object([
            ("error", .string(HTTPStatus.reasonPhrase(503))), ("status", .int(503)), ("reason", .string(reason)),
        ]))
        response.headers.append(name: "Retry-After", value: "1")
        let script: ResponseScript
        if connection.exchangeProtocol == .http1 {
            let head = ResponseHead(status: 503, headers: response.headers, bodyLength: response.body.count, close: true)
            script = ResponseScript(
                steps: [.head(head), .body(response.body), .end, .endConnection(.connectionClose)], status: 503,
                keepAlive: false)
        } else {
            script = .simple(for: request, response: response)
        }
        // The client did not ask for the close: the lingering close protects the answer from an RST.
        return Exchange(sequence: core.record(consume entry), script: script, clientWantsClose: false)
    }

    /// A connection closed as soon as it was accepted (`ConnectionLimit`): a connection entry under the route
    /// `connection-limit` that says why.
    func journalRefusedConnection(id: Int, clientAddress: String, tls: Bool, reason: String) {
        let now = Clock.monotonicNanos()
        var entry = JournalEntry(
            receivedAtWall: Clock.wallSeconds(), receivedAtMonotonicNanos: now, connectionID: id, indexOnConnection: 0,
            clientAddress: clientAddress, head: nil,
            rawRequestLine: "(a connection\(tls ? " on the TLS port" : ""), closed at once: \(reason))")
        entry.isConnectionEntry = true
        entry.route = .connectionLimit
        entry.answeredBy = .connectionLimit
        entry.outcome = .rejected
        entry.finishedAtMonotonicNanos = now
        core.record(entry)
    }

    /// A request that is not valid HTTP: journaled as malformed, answered with its status and a close.
    func reject(
        _ error: HTTPParseError, _ context: RequestContext, on connection: ConnectionInfo, body: [UInt8] = []
    ) -> Exchange {
        // A TLS record (22 = handshake, then major version 3) where HTTP was expected: say so, not "bad method".
        let isTLS = error.requestLinePrefix.utf8.starts(with: [0x16, 0x03])
        var entry = Self.entry(
            context, connection, head: error.head, body: body,
            rawRequestLine: isTLS ? "(a TLS ClientHello)" : error.requestLinePrefix,
            malformed: isTLS && connection.tls == nil
                ? "a TLS handshake on the plain-HTTP port: use the TLS port (serve --tls-port)" : error.reason)
        entry.status = error.status
        let body: JSONValue = .object([
            ("error", .string(HTTPStatus.reasonPhrase(error.status))),
            ("status", .int(error.status)),
            ("reason", .string(error.reason)),
        ])
        let response = HTTPResponse.json(error.status, body)
        let head = ResponseHead(
            status: error.status, headers: response.headers, bodyLength: response.body.count, close: true)
        let script = ResponseScript(
            steps: [.head(head), .body(response.body), .end, .endConnection(.connectionClose)], status: error.status,
            keepAlive: false)
        // The client did not ask for the close: the lingering close protects the answer from an RST.
        return Exchange(sequence: core.record(consume entry), script: script, clientWantsClose: false)
    }

    /// A request that reached the server and will never be answered: cut short by the client (`error`), or
    /// complete on a connection the server is closing (`request`). `client`: what an HTTP/2 client sent to end it.
    func journalUnanswered(
        _ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext, on connection: ConnectionInfo,
        _ outcome: ExchangeOutcome, client: HTTP2ClientFrames = HTTP2ClientFrames()
    ) {
        if let request, AdminAPI.isAdminTarget(request.target) { return }
        var entry = Self.entry(
            context, connection, head: request?.head ?? error?.head, body: request?.body ?? [],
            rawRequestLine: error?.requestLinePrefix, malformed: error?.reason)
        entry.outcome = outcome
        if !client.isEmpty { entry.http2ClientFrames = client }
        entry.finishedAtMonotonicNanos = Clock.monotonicNanos()
        core.record(entry)
    }

    /// An HTTP/2 request begun after the server's GOAWAY went out, which nghttp2 ignored: its fields are not known,
    /// so the entry names the stream and the GOAWAY; `not-processed`, as RFC 9113 §6.8 lets a client retry it.
    func journalIgnoredStream(_ context: RequestContext, on connection: ConnectionInfo, afterGoaway lastStream: Int) {
        var entry = Self.entry(
            context, connection, head: nil,
            rawRequestLine: "(HEADERS on stream \(context.stream ?? 0) after the server's GOAWAY, last stream "
                + "\(lastStream): not processed)")
        entry.outcome = .notProcessed
        entry.finishedAtMonotonicNanos = Clock.monotonicNanos()
        core.record(entry)
    }

    /// An exchange ended: tell the engine (token refresh in flight, idempotent response to store) and the journal.
    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?) {
        // One moment for the journal and the engine: a request that arrived after it follows this exchange (`Retries`).
        let finishedAt = at ?? Clock.monotonicNanos()
        if let completion = exchange.engineCompletion {
            var now = core.now()
            now.monotonicNanos = finishedAt
            core.engine.finish(
                completion, now: now, processed: outcome != .notProcessed, delivered: exchange.bytesWritten > 0)
        }
        if core.network.countsRequests, let sequence = exchange.sequence,
           let route = core.journal.entry(sequence)?.route?.routeID {
            core.network.requestAnswered(route: route)
        }
        if let sequence = exchange.sequence {
            let bytes = exchange.bytesWritten
            let stats = core.loop.stats
            core.updateEntry(sequence) {
                stats?.requestFinished(nanos: finishedAt &- $0.receivedAtMonotonicNanos)
                $0.outcome = outcome
                $0.bytesWritten = bytes
                $0.finishedAtMonotonicNanos = finishedAt
                // The journal's status is the status line sent: none when not a byte went out.
                if bytes == 0 { $0.status = nil }
            }
        }
        // Run once the bytes are out, e.g. stop the server after answering `POST /shutdown`.
        if let after = exchange.afterCompletion {
            exchange.afterCompletion = nil
            after()
        }
    }

    /// What an HTTP/2 client sent to end the stream journaled as `sequence` (RST_STREAM) or its connection
    /// (GOAWAY) while the exchange was under way (RFC 9113 §6.4, §6.8).
    func clientSent(_ frames: HTTP2ClientFrames, onEntry sequence: Int) {
        core.updateEntry(sequence) { $0.http2ClientFrames = frames }
    }

    /// The connection policy closed a connection after the response journaled as `sequence`.
    func policyClosed(after sequence: Int, _ reason: PolicyClose) {
        core.updateEntry(sequence) { $0.policyClose = reason }
    }

    /// The journal entry for a request, built in this one place.
    private static func entry(
        _ context: RequestContext, _ connection: ConnectionInfo, head: HTTPRequestHead?, body: [UInt8] = [],
        rawRequestLine: String? = nil, malformed: String? = nil
    ) -> JournalEntry {
        var entry = JournalEntry(
            receivedAtWall: context.arrival.wall, receivedAtMonotonicNanos: context.arrival.monotonicNanos,
            connectionID: connection.id, indexOnConnection: context.indexOnConnection,
            clientAddress: connection.clientAddress, head: head, rawRequestLine: rawRequestLine, body: body,
            bodySize: body.count, malformed: malformed)
        if let tls = connection.tls { entry.tls = tls }
        entry.connectionOpenedAtMonotonicNanos = connection.openedAtNanos
        if connection.exchangeProtocol != .http1 {
            entry.exchangeProtocol = connection.exchangeProtocol
            entry.stream = context.stream
        }
        return entry
    }

    /// An HTTP/2 connection that broke the protocol as a whole (a bad preface, a flood, a bad HPACK block):
    /// answered with GOAWAY by the codec, journaled here as a connection entry naming the error.
    func journalProtocolError(_ connection: ConnectionInfo, _ reason: String, acceptedAt: Arrival) {
        var entry = Self.connectionEntry(connection, acceptedAt: acceptedAt, malformed: "HTTP/2 connection error: \(reason)")
        entry.exchangeProtocol = .http2
        entry.outcome = .rejected
        core.record(entry)
    }

    /// An HTTP/2 connection ended that gets a connection entry: one whose PINGs the scenario asked about (with
    /// their `summary`), or one on which the client opened no stream and sent GOAWAY (`summary` nil). Either
    /// carries the client's last GOAWAY.
    func journalHTTP2Connection(
        _ connection: ConnectionInfo, _ summary: HTTP2ConnectionSummary?, clientGoaway: HTTP2ClientGoaway?,
        acceptedAt: Arrival
    ) {
        var entry = Self.connectionEntry(connection, acceptedAt: acceptedAt)
        entry.exchangeProtocol = .http2
        entry.http2 = summary
        entry.clientGoaway = clientGoaway
        // A connection that pinged ran its course; one that never asked anything was left by its client.
        entry.outcome = summary == nil ? .clientClosed : .completed
        core.record(entry)
    }

    /// A connection entry (no request): when the connection began and ended, its client and its TLS.
    private static func connectionEntry(
        _ connection: ConnectionInfo, acceptedAt: Arrival, malformed: String? = nil
    ) -> JournalEntry {
        var entry = JournalEntry(
            receivedAtWall: acceptedAt.wall, receivedAtMonotonicNanos: acceptedAt.monotonicNanos,
            connectionID: connection.id, indexOnConnection: 0, clientAddress: connection.clientAddress, head: nil,
            malformed: malformed)
        entry.isConnectionEntry = true
        entry.tls = connection.tls
        entry.finishedAtMonotonicNanos = Clock.monotonicNanos()
        return entry
    }

    /// A TLS connection that produced no request: its handshake failed, hung, timed out, or completed and the
    /// client left without asking anything. "The client tried three times and gave up" is three of these.
    func journalConnection(_ connection: ConnectionInfo, _ tls: TLSSummary, acceptedAt: Arrival) {
        var entry = Self.connectionEntry(connection, acceptedAt: acceptedAt)
        entry.tls = tls
        entry.fault = tls.fault
        entry.scenario = tls.scenario
        entry.outcome = switch tls.handshake {
        case .completed, .clientClosed: .clientClosed
        case .resetSent: .resetSent
        case .hangReleased: .hangReleased
        case .pending: .cancelled
        case .alertSent, .clientAlert, .timedOut, .notTLS, .failed: .rejected
        }
        core.record(entry)
    }
}
