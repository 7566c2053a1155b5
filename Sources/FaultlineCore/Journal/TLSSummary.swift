/// How a connection's TLS handshake ended, as the journal reports it.
public enum TLSHandshakeEnd: String, Sendable, Equatable {
    /// Still in progress (a slow handshake, a hang the client has not given up on).
    case pending
    case completed
    /// The server sent a fatal alert (`alertSent` names it): a scripted `alert`, a version it refuses, a
    /// client certificate it requires or rejects.
    case alertSent = "alert-sent"
    /// The client sent a fatal alert (`alertReceived` names it): typically it refused the certificate.
    case clientAlert = "client-alert"
    /// The client closed or reset the connection without an alert.
    case clientClosed = "client-closed"
    /// The handshake did not finish within the header timeout.
    case timedOut = "timed-out"
    /// The server sent RST on purpose (`handshake-reset`).
    case resetSent = "reset-sent"
    /// A `handshake-hang` ended because the client gave up.
    case hangReleased = "hang-released"
    /// The bytes were not a TLS ClientHello (`error` says what OpenSSL made of them: "http request" for plain
    /// HTTP on the TLS port).
    case notTLS = "not-tls"
    /// Anything else OpenSSL refused (`error`).
    case failed
}

/// What the journal keeps of a TLS connection (ARCHITECTURE §3a): every entry of the connection carries it.
public struct TLSSummary: Sendable, Equatable {
    /// `TLSv1.3`; nil until the handshake completes.
    public var version: String?
    public var cipher: String?
    /// The ClientHello's server_name.
    public var serverName: String?
    public var alpnOffered: [String] = []
    public var alpn: String?
    /// The client certificate's subject (RFC 2253), when one was sent and verified.
    public var clientCertificate: String?
    /// The certificate served: a catalogue name, or `custom` for one the user brought.
    public var certificate: String?
    /// The client resumed a session: no certificate was sent.
    public var resumed = false
    public var handshake: TLSHandshakeEnd = .pending
    public var alertSent: String?
    public var alertReceived: String?
    /// OpenSSL's reason, when the handshake failed.
    public var error: String?
    /// Accept to handshake end.
    public var handshakeMilliseconds: Double?
    /// The handshake fault, when one was scripted (`TLSHandshakeFault.name`).
    public var fault: String?
    /// The scenario and handshake step that decided (`TLSHandshakeDecision`).
    public var scenario: String?
    public var step: Int?

    package init() {}

    package func json() -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("version", version.map(JSONValue.string) ?? .null),
            ("cipher", cipher.map(JSONValue.string) ?? .null),
            ("serverName", serverName.map(JSONValue.string) ?? .null),
            ("alpnOffered", .array(alpnOffered.map(JSONValue.string))),
            ("alpn", alpn.map(JSONValue.string) ?? .null),
            ("clientCertificate", clientCertificate.map(JSONValue.string) ?? .null),
            ("certificate", certificate.map(JSONValue.string) ?? .null),
            ("resumed", .bool(resumed)),
            ("handshake", .string(handshake.rawValue)),
        ]
        if let alertSent { members.append(("alertSent", .string(alertSent))) }
        if let alertReceived { members.append(("alertReceived", .string(alertReceived))) }
        if let error { members.append(("error", .string(error))) }
        if let handshakeMilliseconds {
            members.append(("handshakeMs", .double((handshakeMilliseconds * 1000).rounded() / 1000)))
        }
        if let fault { members.append(("fault", .string(fault))) }
        if let scenario { members.append(("scenario", .string(scenario))) }
        if let step { members.append(("step", .int(step))) }
        return .object(members)
    }
}
