/// How an exchange ended, as the journal reports it.
public enum ExchangeOutcome: String, Sendable, Equatable, CaseIterable {
    /// Still being answered (a delay, a drip, a hang that has not been released).
    case pending
    /// Every planned byte was written.
    case completed
    /// The client closed the connection before the response was complete.
    case clientClosed = "client-closed"
    /// The server sent RST on purpose (`reset` fault).
    case resetSent = "reset-sent"
    /// The server closed the connection on purpose without a complete response (a fault).
    case closedByFault = "closed-by-fault"
    /// The server shut down its writing side on purpose (`half-close` fault).
    case halfClosed = "half-closed"
    /// A `hang` ended because the client gave up.
    case hangReleased = "hang-released"
    /// The server stopped, or the scenarios were reset, while the exchange was pending.
    case cancelled
    /// The request never completed (malformed, timed out, or abandoned mid-request).
    case rejected
    /// The request arrived on a connection the server was closing — by its connection policy (after
    /// `maxRequests`), after a response that closed it (`Connection: close`, a fault), or pipelined behind one:
    /// read, journaled, never answered (RFC 9112 §9.6). What a keep-alive client that reused the connection in that
    /// moment sees as a reset or "socket hang up".
    case connectionClosing = "connection-closing"
    /// HTTP/2: the server reset the stream on purpose (`rst-stream` with a code other than REFUSED_STREAM).
    case streamReset = "stream-reset"
    /// HTTP/2: the server said the stream was not processed — RST_STREAM with REFUSED_STREAM, or a GOAWAY whose
    /// last stream id is below it (RFC 9113 §8.7). A client may retry it, whatever its method.
    case notProcessed = "not-processed"
}

/// One request as the server saw it and what it did about it (ARCHITECTURE §7).
///
/// A value with copy-on-write storage: the fields live in one heap object, so handing an entry to the journal,
/// the NDJSON file or a query copies a reference, not 350 bytes and a retain per string (the request path did
/// several such copies per request). A change to a shared entry copies the storage first.
public struct JournalEntry: Sendable {
    /// The stored fields. `Storage` holds one value of it, so copying the storage copies this value: a field
    /// added here is carried along without a list to keep in step.
    private struct Fields {
        var sequence: Int = 0
        var receivedAtWall: Double
        var receivedAtMonotonicNanos: UInt64
        var connectionID: Int
        var indexOnConnection: Int
        var clientAddress: String
        var head: HTTPRequestHead?
        var rawRequestLine: String?
        var body: [UInt8]
        var bodySize: Int
        var malformed: String?
        var scenario: String? = nil
        var scenarioVersion: Int? = nil
        var route: DecisionSource? = nil
        var answeredBy: PolicyAnswer? = nil
        var step: Int? = nil
        var unmatched: UnmatchedInfo? = nil
        var status: Int? = nil
        var fault: String? = nil
        var chaos: Bool = false
        var notes: [JournalNote] = []
        var bytesWritten: Int = 0
        var outcome: ExchangeOutcome = .pending
        var finishedAtMonotonicNanos: UInt64? = nil
        var policyClose: PolicyClose? = nil
        // The records few entries carry are boxed (`Rare`): inline they made every entry's storage 1,216 bytes,
        // past the 1,032 bytes glibc's per-thread cache serves, so every request took malloc's slow path.
        var tls: Rare<TLSSummary>? = nil
        var isConnectionEntry = false
        var exchangeProtocol: ExchangeProtocol = .http1
        var stream: Int? = nil
        var connectionOpenedAtMonotonicNanos: UInt64 = 0
        var http2: Rare<HTTP2ConnectionSummary>? = nil
        var http2Client: Rare<HTTP2ClientFrames>? = nil
        var resource: Rare<ResourceRecord>? = nil
        var websocket: Rare<WebSocketRecord>? = nil
        var proxy: ProxyRecord? = nil
        var network: Rare<NetworkRecord>? = nil
    }

    /// A record kept out of line, immutable: entries that share one stay independent (a change boxes anew).
    package final class Rare<Value: Sendable>: @unchecked Sendable {
        package let value: Value
        package init(_ value: Value) { self.value = value }
    }

    /// The bytes one entry's storage object takes (its fields and the object header): kept within what glibc's
    /// per-thread cache serves (1,032 bytes), a test says, since every request allocates one.
    package static var storageBytes: Int { MemoryLayout<Fields>.size + 16 }

    private final class Storage: @unchecked Sendable {
        /// Unchecked: an entry changes its storage only when it alone holds it (`unique`), so no other access
        /// can overlap a change, and the check cost each setter a runtime call.
        @exclusivity(unchecked) var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var storage: Storage

    /// The storage, copied first when another entry shares it.
    private var unique: Storage {
        mutating get {
            if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
            return storage
        }
    }

    /// Records what `decision` says about the request: which scenario, route and step took it (or the nearest
    /// route it missed), who answered, and the status, fault and policy close its script plans. The one place
    /// that says what a decision puts in the journal (the Dispatcher, the hot-path benchmark and the tests use
    /// it). One uniqueness check for all of it, not one a field; the resource's box is shared, not copied.
    package mutating func record(_ decision: Decision) {
        let storage = unique
        storage.fields.scenario = decision.scenario
        storage.fields.scenarioVersion = decision.scenarioVersion
        storage.fields.route = decision.route
        storage.fields.answeredBy = decision.answeredBy
        storage.fields.step = decision.step
        storage.fields.unmatched = decision.unmatched
        storage.fields.status = decision.script.status
        storage.fields.fault = decision.script.fault
        storage.fields.chaos = decision.chaos
        storage.fields.notes = decision.notes
        storage.fields.policyClose = decision.script.policyClose
        storage.fields.resource = decision.resourceBox
    }

    public var sequence: Int {
        get { storage.fields.sequence }
        set { unique.fields.sequence = newValue }
    }
    /// Unix time in seconds.
    public var receivedAtWall: Double {
        get { storage.fields.receivedAtWall }
        set { unique.fields.receivedAtWall = newValue }
    }
    /// Monotonic clock, nanoseconds; differences between entries are exact.
    public var receivedAtMonotonicNanos: UInt64 {
        get { storage.fields.receivedAtMonotonicNanos }
        set { unique.fields.receivedAtMonotonicNanos = newValue }
    }
    public var connectionID: Int {
        get { storage.fields.connectionID }
        set { unique.fields.connectionID = newValue }
    }
    /// Zero for the first request on a connection; a reused connection has an index above zero.
    public var indexOnConnection: Int {
        get { storage.fields.indexOnConnection }
        set { unique.fields.indexOnConnection = newValue }
    }
    public var clientAddress: String {
        get { storage.fields.clientAddress }
        set { unique.fields.clientAddress = newValue }
    }
    /// Nil when the request line itself could not be parsed.
    public var head: HTTPRequestHead? {
        get { storage.fields.head }
        set { unique.fields.head = newValue }
    }
    /// What could be read of the request line when the request was malformed; nil for a well-formed
    /// request, whose line is rebuilt from `head` (so the hot path does not format a string per request).
    public var rawRequestLine: String? {
        get { storage.fields.rawRequestLine }
        set { unique.fields.rawRequestLine = newValue }
    }

    /// The request line as received (for malformed requests, what could be read of it).
    public var requestLine: String {
        if let rawRequestLine { return rawRequestLine }
        guard let head else { return "" }
        return "\(head.method) \(head.target) \(head.version)"
    }
    /// The body, capped at the journal's body limit.
    public var body: [UInt8] {
        get { storage.fields.body }
        set { unique.fields.body = newValue }
    }
    /// The body's full size, even when `body` was capped.
    public var bodySize: Int {
        get { storage.fields.bodySize }
        set { unique.fields.bodySize = newValue }
    }
    /// Why the request was not valid HTTP; nil for a well-formed request.
    public var malformed: String? {
        get { storage.fields.malformed }
        set { unique.fields.malformed = newValue }
    }
    public var scenario: String? {
        get { storage.fields.scenario }
        set { unique.fields.scenario = newValue }
    }
    /// Which version of the scenario served the request (`Engine.versions`); it changes when a hot reload or an
    /// upload brings different content under the same name.
    public var scenarioVersion: Int? {
        get { storage.fields.scenarioVersion }
        set { unique.fields.scenarioVersion = newValue }
    }
    /// What took the request (`Decision.route`): the route it matched, even when auth refused it; nil when no
    /// route matched. Printed with `DecisionSource.description`.
    public var route: DecisionSource? {
        get { storage.fields.route }
        set { unique.fields.route = newValue }
    }
    /// The policy layer that answered instead of the route's script (`Decision.answeredBy`): auth, a rate limit.
    public var answeredBy: PolicyAnswer? {
        get { storage.fields.answeredBy }
        set { unique.fields.answeredBy = newValue }
    }
    public var step: Int? {
        get { storage.fields.step }
        set { unique.fields.step = newValue }
    }
    public var unmatched: UnmatchedInfo? {
        get { storage.fields.unmatched }
        set { unique.fields.unmatched = newValue }
    }
    public var status: Int? {
        get { storage.fields.status }
        set { unique.fields.status = newValue }
    }
    public var fault: String? {
        get { storage.fields.fault }
        set { unique.fields.fault = newValue }
    }
    /// Whether the route's chaos failed this request (instead of its script).
    public var chaos: Bool {
        get { storage.fields.chaos }
        set { unique.fields.chaos = newValue }
    }
    /// What the policy layer did: auth checks, rate limits, idempotency, Retry-After judgements, side effects.
    /// Printed with `JournalNote.description`.
    public var notes: [JournalNote] {
        get { storage.fields.notes }
        set { unique.fields.notes = newValue }
    }
    public var bytesWritten: Int {
        get { storage.fields.bytesWritten }
        set { unique.fields.bytesWritten = newValue }
    }
    /// Set on the last response of a connection that the connection policy closed (`maxRequests`, `idleCloseMs`).
    public var policyClose: PolicyClose? {
        get { storage.fields.policyClose }
        set { unique.fields.policyClose = newValue }
    }
    /// The connection's TLS, for entries that came over the TLS port.
    public var tls: TLSSummary? {
        get { storage.fields.tls?.value }
        set { unique.fields.tls = newValue.map(Rare.init) }
    }
    /// A connection that produced no request: a TLS handshake that failed, hung or was never followed by a
    /// request. `tls` says how the handshake went; `head` is nil.
    public var isConnectionEntry: Bool {
        get { storage.fields.isConnectionEntry }
        set { unique.fields.isConnectionEntry = newValue }
    }
    /// The protocol that carried the request: HTTP/1.1 or HTTP/2 (`h2` over TLS, `h2c` in cleartext).
    public var exchangeProtocol: ExchangeProtocol {
        get { storage.fields.exchangeProtocol }
        set { unique.fields.exchangeProtocol = newValue }
    }
    /// The HTTP/2 stream id; nil over HTTP/1.1.
    public var stream: Int? {
        get { storage.fields.stream }
        set { unique.fields.stream = newValue }
    }
    /// When the server accepted the connection that carried the request (monotonic ns; 0 when unknown): a request on
    /// a connection accepted after an answer ended was sent after it (`Retries.follows`).
    public var connectionOpenedAtMonotonicNanos: UInt64 {
        get { storage.fields.connectionOpenedAtMonotonicNanos }
        set { unique.fields.connectionOpenedAtMonotonicNanos = newValue }
    }
    /// A connection entry's HTTP/2 facts: PINGs sent and their round trips, PINGs received.
    public var http2: HTTP2ConnectionSummary? {
        get { storage.fields.http2?.value }
        set { unique.fields.http2 = newValue.map(Rare.init) }
    }
    /// The GOAWAY the HTTP/2 client sent while this entry's exchange was under way, or on this connection entry's
    /// connection (its last, if it sent several): the client found something wrong, or left.
    public var clientGoaway: HTTP2ClientGoaway? {
        get { storage.fields.http2Client?.value.goaway }
        set { http2ClientFrames.goaway = newValue }
    }
    /// The RST_STREAM the HTTP/2 client sent on this entry's stream.
    public var clientReset: HTTP2ClientReset? {
        get { storage.fields.http2Client?.value.reset }
        set { http2ClientFrames.reset = newValue }
    }
    /// Both of the client's frames, in one box (nil when neither was sent).
    package var http2ClientFrames: HTTP2ClientFrames {
        get { storage.fields.http2Client?.value ?? HTTP2ClientFrames() }
        set { unique.fields.http2Client = newValue.isEmpty ? nil : Rare(newValue) }
    }
    /// A request to a resource: the validators and ranges it carried and what the server decided.
    public var resource: ResourceRecord? {
        get { storage.fields.resource?.value }
        set { unique.fields.resource = newValue.map(Rare.init) }
    }
    /// A WebSocket upgrade that was accepted: the session's frames and how it ended.
    public var websocket: WebSocketRecord? {
        get { storage.fields.websocket?.value }
        set { unique.fields.websocket = newValue.map(Rare.init) }
    }
    /// A request forwarded to the upstream: where, what came back, timings, reuse, failure, what a fault changed.
    public var proxy: ProxyRecord? {
        get { storage.fields.proxy }
        set { unique.fields.proxy = newValue }
    }
    /// The network (ARCHITECTURE §3b): a change (an entry of kind `network`), a connection attempt the listener's
    /// state answered, or the conditions that shaped a request's connection.
    public var network: NetworkRecord? {
        get { storage.fields.network?.value }
        set { unique.fields.network = newValue.map(Rare.init) }
    }
    /// A network change: not a request, no connection.
    public var isNetworkChange: Bool { storage.fields.network?.value.event == .change }
    /// The journal's `protocol`: `http/1.1`, `h2`, `h2c` (HTTP/2 without TLS), or `websocket` (an upgrade that
    /// was accepted).
    public var protocolName: String {
        // An accepted upgrade: the session that followed is the entry's story (RFC 6455 over HTTP/1.1).
        if websocket != nil { return "websocket" }
        switch exchangeProtocol {
        case .http1: return ExchangeProtocol.http1.rawValue
        case .http2: return tls == nil ? "h2c" : ExchangeProtocol.http2.rawValue
        }
    }
    public var outcome: ExchangeOutcome {
        get { storage.fields.outcome }
        set { unique.fields.outcome = newValue }
    }
    public var finishedAtMonotonicNanos: UInt64? {
        get { storage.fields.finishedAtMonotonicNanos }
        set { unique.fields.finishedAtMonotonicNanos = newValue }
    }

    public var connectionReused: Bool { indexOnConnection > 0 }
    public var method: String? { head?.method }
    public var path: String? { head?.path }

    package init(
        sequence: Int = 0, receivedAtWall: Double, receivedAtMonotonicNanos: UInt64, connectionID: Int,
        indexOnConnection: Int, clientAddress: String, head: HTTPRequestHead?, rawRequestLine: String? = nil,
        body: [UInt8] = [], bodySize: Int = 0, malformed: String? = nil
    ) {
        storage = Storage(Fields(
            sequence: sequence, receivedAtWall: receivedAtWall, receivedAtMonotonicNanos: receivedAtMonotonicNanos,
            connectionID: connectionID, indexOnConnection: indexOnConnection, clientAddress: clientAddress, head: head,
            rawRequestLine: rawRequestLine, body: body, bodySize: bodySize, malformed: malformed))
    }
}

extension JournalEntry {
    /// The entry as the admin API shows it. Bodies are text when they are valid UTF-8, base64 otherwise.
    public func json() -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("sequence", .int(sequence)),
            ("kind", .string(isNetworkChange ? "network" : isConnectionEntry ? "connection" : "request")),
            ("receivedAt", .string(Self.iso8601(receivedAtWall))),
            ("receivedAtMonotonicMs", .double(Double(receivedAtMonotonicNanos) / 1_000_000)),
            ("connection", .object([
                ("id", .int(connectionID)),
                ("requestIndex", .int(indexOnConnection)),
                ("reused", .bool(connectionReused)),
                ("client", .string(clientAddress)),
            ])),
            ("method", head.map { .string($0.method) } ?? .null),
            ("target", head.map { .string($0.target) } ?? .null),
            ("path", head.map { .string($0.path) } ?? .null),
            ("httpVersion", head.map { .string($0.version.description) } ?? .null),
            ("requestLine", .string(requestLine)),
            ("protocol", (isConnectionEntry || isNetworkChange) && exchangeProtocol == .http1 ? .null : .string(protocolName)),
            ("stream", stream.map(JSONValue.int) ?? .null),
            ("http2", http2?.json() ?? .null),
            ("tls", tls?.json() ?? .null),
            ("headers", .array((head?.headers.fields ?? []).map { .array([.string($0.name), .string($0.value)]) })),
        ]
        if let text = String(validating: body, as: UTF8.self) {
            members.append(("body", .string(text)))
            members.append(("bodyEncoding", .string("utf8")))
        } else {
            members.append(("body", .string(Base64.encode(body))))
            members.append(("bodyEncoding", .string("base64")))
        }
        members.append(("bodySize", .int(bodySize)))
        members.append(("bodyTruncated", .bool(body.count < bodySize)))
        members.append(("malformed", .bool(malformed != nil)))
        if let malformed { members.append(("error", .string(malformed))) }
        members.append(("scenario", scenario.map(JSONValue.string) ?? .null))
        members.append(("scenarioVersion", scenarioVersion.map(JSONValue.int) ?? .null))
        members.append(("route", route.map { .string($0.description) } ?? .null))
        members.append(("step", step.map(JSONValue.int) ?? .null))
        members.append(("matched", .bool(route != nil)))
        members.append(("answeredBy", answeredBy.map { .string($0.description) } ?? .null))
        members.append(("notes", .array(notes.map { .string($0.description) })))
        if let clientGoaway { members.append(("clientGoaway", clientGoaway.json())) }
        if let clientReset { members.append(("clientReset", clientReset.json())) }
        if let resource { members.append(("resource", resource.json())) }
        if let websocket { members.append(("websocket", websocket.json(since: receivedAtMonotonicNanos))) }
        if let proxy { members.append(("proxy", proxy.json())) }
        if let network { members.append(("network", network.json())) }
        if let unmatched {
            members.append(("nearest", .object([
                ("route", unmatched.nearestRoute.map(JSONValue.string) ?? .null),
                ("reason", .string(unmatched.reason)),
            ])))
        }
        var response: [(key: String, value: JSONValue)] = [
            ("status", status.map(JSONValue.int) ?? .null),
            ("fault", fault.map(JSONValue.string) ?? .null),
            ("chaos", .bool(chaos)),
            ("bytesWritten", .int(bytesWritten)),
            ("outcome", .string(outcome.rawValue)),
        ]
        if let policyClose { response.append(("connectionClosedAfter", .string(policyClose.rawValue))) }
        if let finished = finishedAtMonotonicNanos {
            let elapsed = Double(finished &- receivedAtMonotonicNanos) / 1_000_000
            response.append(("durationMs", .double((elapsed * 1000).rounded() / 1000)))
        }
        members.append(("response", .object(response)))
        return .object(members)
    }

    /// RFC 3339 / ISO 8601 UTC with milliseconds, e.g. `2026-11-29T16:02:11.104Z`.
    package static func iso8601(_ unixSeconds: Double) -> String {
        let millis = Int64((unixSeconds * 1000).rounded(.down))
        var days = millis / 86_400_000
        var rest = millis % 86_400_000
        if rest < 0 { rest += 86_400_000; days -= 1 }
        // No DateFormatter on the loop thread: the same civil-from-days arithmetic as HTTP-dates.
        let date = HTTPDate.civil(fromDays: days)
        let (year, month, day) = (Int64(date.year), Int64(date.month), Int64(date.day))
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(rest / 3_600_000, 2)):"
            + "\(pad(rest / 60000 % 60, 2)):\(pad(rest / 1000 % 60, 2)).\(pad(rest % 1000, 3))Z"
    }
}

/// Standard base64 (RFC 4648 §4) for binary journal bodies.
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    package static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], 61, 61]
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], 61]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
