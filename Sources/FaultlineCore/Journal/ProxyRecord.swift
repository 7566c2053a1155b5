/// What the proxy did for a request (the journal's `proxy`): where it went, what came back, how long each part
/// took, whether a pooled connection carried it, why it failed, and what the step's fault and delay changed.
public struct ProxyRecord: Sendable, Equatable {
    /// The URL the request was forwarded to (the upstream's origin, base path and the request's target).
    public var upstream: String
    /// The upstream's status; nil when no response came.
    public var upstreamStatus: Int?
    /// Connecting (TCP and, for https, TLS) took this long; nil on a reused connection.
    public var connectMilliseconds: Double?
    /// From the request written to the response's first byte.
    public var firstByteMilliseconds: Double?
    /// From the forwarding decision to the response read whole (or the failure).
    public var totalMilliseconds: Double?
    /// A kept-alive pooled connection carried the request.
    public var reused = false
    /// The upstream's body size, as read (framing removed).
    public var upstreamBytes: Int?
    /// The body was streamed to the client as it arrived, not read whole first (ARCHITECTURE §4d).
    public var streamed = false
    /// Why no usable response came: `refused`, `reset`, `bad-response`, `tls`, `timeout`, `too-large`, `resolve`,
    /// `no-upstream`; nil on success.
    public var failure: String?
    /// The failure in words (the 502/504 body's `reason`).
    public var error: String?
    /// What Faultline changed on the way back, in words (`delay 200 ms`, `truncate-body: 10 of 40 body bytes sent`).
    public var changed: [String] = []

    package init(upstream: String) {
        self.upstream = upstream
    }

    package func json() -> JSONValue {
        func number(_ value: Double?) -> JSONValue {
            value.map { .double(($0 * 1000).rounded() / 1000) } ?? .null
        }
        return .object([
            ("upstream", .string(upstream)),
            ("upstreamStatus", upstreamStatus.map(JSONValue.int) ?? .null),
            ("connectMs", number(connectMilliseconds)),
            ("firstByteMs", number(firstByteMilliseconds)),
            ("totalMs", number(totalMilliseconds)),
            ("reused", .bool(reused)),
            ("upstreamBytes", upstreamBytes.map(JSONValue.int) ?? .null),
            ("streamed", .bool(streamed)),
            ("failure", failure.map(JSONValue.string) ?? .null),
            ("error", error.map(JSONValue.string) ?? .null),
            ("changed", .array(changed.map(JSONValue.string))),
        ])
    }

    package init?(json: JSONValue) {
        guard case .string(let upstream)? = json["upstream"] else { return nil }
        self.init(upstream: upstream)
        func double(_ value: JSONValue?) -> Double? { if case .number(let text)? = value { Double(text) } else { nil } }
        func string(_ value: JSONValue?) -> String? { if case .string(let text)? = value { text } else { nil } }
        upstreamStatus = json["upstreamStatus"]?.intValue
        connectMilliseconds = double(json["connectMs"])
        firstByteMilliseconds = double(json["firstByteMs"])
        totalMilliseconds = double(json["totalMs"])
        reused = json["reused"] == .bool(true)
        upstreamBytes = json["upstreamBytes"]?.intValue
        streamed = json["streamed"] == .bool(true)
        failure = string(json["failure"])
        error = string(json["error"])
        if case .array(let items)? = json["changed"] { changed = items.compactMap(string) }
    }
}
