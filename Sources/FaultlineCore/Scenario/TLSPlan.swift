/// The certificates Faultline's authority can serve (ARCHITECTURE §3a). Every leaf except `wrong-host` and
/// `cn-only` names `localhost`, `*.localhost`, its own `NAME.localhost` (OpenSSL clients match no `*.localhost`),
/// `127.0.0.1` and `::1`, so each one fails a client for exactly one reason.
public enum TLSCertificateName: String, Sendable, CaseIterable, Hashable {
    /// Signed by the exported CA through its intermediate; the chain is sent. Every client that trusts the CA
    /// accepts it.
    case valid
    /// Expired yesterday.
    case expired
    /// Valid from tomorrow.
    case notYetValid = "not-yet-valid"
    /// Names only `wrong-host.invalid`.
    case wrongHost = "wrong-host"
    /// Signed by its own key.
    case selfSigned = "self-signed"
    /// Signed by a second CA that is never exported.
    case untrustedRoot = "untrusted-root"
    /// The leaf alone, without the intermediate that signed it.
    case incompleteChain = "incomplete-chain"
    /// Signed by an intermediate that expired yesterday (the chain is sent).
    case expiredIntermediate = "expired-intermediate"
    /// `CN=localhost` and no subjectAltName: trusted by nobody modern (RFC 6125, Apple since iOS 13).
    case cnOnly = "cn-only"
    /// extendedKeyUsage is clientAuth only.
    case noServerAuthEKU = "no-server-auth-eku"
    /// 826 days of validity: Apple's policy refuses more than 825.
    case tooLongValidity = "too-long-validity"
    /// RSA 1024: Apple's policy (and OpenSSL at security level 2) refuses under 2048.
    case weakKey = "weak-key"
    /// The `valid` certificate's names and issuer with a different key: a client pinned to `valid`'s key refuses
    /// it, one pinned to both accepts it.
    case rotated
}

/// The TLS alerts a handshake step can answer a ClientHello with (RFC 8446 §6).
package enum TLSAlert: String, Sendable, CaseIterable, Hashable {
    case handshakeFailure = "handshake_failure"
    case protocolVersion = "protocol_version"
    case unrecognizedName = "unrecognized_name"
    case badCertificate = "bad_certificate"
    case internalError = "internal_error"

    /// The alert's code on the wire.
    package var code: UInt8 {
        switch self {
        case .handshakeFailure: return 40
        case .badCertificate: return 42
        case .protocolVersion: return 70
        case .internalError: return 80
        case .unrecognizedName: return 112
        }
    }
}

/// A TLS protocol version, as scenarios and the journal spell it.
package enum TLSVersion: String, Sendable, CaseIterable, Hashable, Comparable {
    case tls1_0 = "1.0"
    case tls1_1 = "1.1"
    case tls1_2 = "1.2"
    case tls1_3 = "1.3"

    package static func < (lhs: TLSVersion, rhs: TLSVersion) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The journal's name: `TLSv1.2`, as OpenSSL and Wireshark say it.
    package var journalName: String { "TLSv\(rawValue)" }
}

/// What a handshake step does instead of completing normally.
package enum TLSHandshakeFault: Sendable, Equatable {
    /// Read the ClientHello and never answer it: the client's handshake timeout is all that ends it.
    case hang
    /// Send the server's flight `size` bytes every `intervalMilliseconds`, below TLS.
    case slow(DripSpec)
    /// Answer the ClientHello with this fatal alert.
    case alert(TLSAlert)
    /// Read the ClientHello, then RST.
    case reset

    /// The fault's name in scenarios and the journal.
    package var name: String {
        switch self {
        case .hang: return "handshake-hang"
        case .slow: return "slow-handshake"
        case .alert: return "alert"
        case .reset: return "handshake-reset"
        }
    }
}

/// Whether the server asks for a client certificate (mutual TLS).
package enum ClientCertificateMode: String, Sendable, CaseIterable, Equatable {
    /// Not asked for.
    case none
    /// Asked for; the handshake goes on without one. One that does not verify against the client CA fails.
    case optional
    /// Asked for; the handshake fails without one that verifies against the client CA.
    case required
}

/// How one TLS handshake goes: the engine's answer to a ClientHello (`Engine.decideHandshake`), made before
/// the server's first byte.
package struct TLSHandshakeDecision: Sendable, Equatable {
    /// The catalogue certificate to serve; nil serves the listener's own (`--tls-certificate`, or a certificate
    /// the user brought).
    package var certificate: TLSCertificateName?
    package var fault: TLSHandshakeFault?
    /// Versions outside this range are refused (a client that cannot go below the minimum gets
    /// `protocol_version`). Nil: 1.2 and 1.3.
    package var minVersion: TLSVersion?
    package var maxVersion: TLSVersion?
    package var clientCertificate: ClientCertificateMode
    /// Session tickets and the session cache; off keeps a client's cached session from skipping a certificate.
    package var resumption: Bool
    /// Closes send close_notify first; false closes the TCP connection without it (a truncation the client
    /// can only notice by its absence).
    package var closeNotify: Bool
    /// The protocols ALPN offers, in order; nil: the listener's (`TLSOptions.alpn`).
    package var alpn: [String]?
    /// The scenario whose `tls` section decided, and which of its handshake steps (0-based); nil for the
    /// listener's default.
    package var scenario: String?
    package var step: Int?

    package init(
        certificate: TLSCertificateName? = nil, fault: TLSHandshakeFault? = nil, minVersion: TLSVersion? = nil,
        maxVersion: TLSVersion? = nil, clientCertificate: ClientCertificateMode = .none, resumption: Bool = true,
        closeNotify: Bool = true, scenario: String? = nil, step: Int? = nil
    ) {
        self.certificate = certificate
        self.fault = fault
        self.minVersion = minVersion
        self.maxVersion = maxVersion
        self.clientCertificate = clientCertificate
        self.resumption = resumption
        self.closeNotify = closeNotify
        self.scenario = scenario
        self.step = step
    }
}

/// The names of TLS alerts (RFC 8446 §6, RFC 5246 §7.2), as the journal writes them.
package enum TLSAlertNames {
    package static func name(_ code: UInt8) -> String {
        switch code {
        case 0: return "close_notify"
        case 10: return "unexpected_message"
        case 20: return "bad_record_mac"
        case 22: return "record_overflow"
        case 40: return "handshake_failure"
        case 42: return "bad_certificate"
        case 43: return "unsupported_certificate"
        case 44: return "certificate_revoked"
        case 45: return "certificate_expired"
        case 46: return "certificate_unknown"
        case 47: return "illegal_parameter"
        case 48: return "unknown_ca"
        case 49: return "access_denied"
        case 50: return "decode_error"
        case 51: return "decrypt_error"
        case 70: return "protocol_version"
        case 71: return "insufficient_security"
        case 80: return "internal_error"
        case 86: return "inappropriate_fallback"
        case 90: return "user_canceled"
        case 100: return "no_renegotiation"
        case 109: return "missing_extension"
        case 110: return "unsupported_extension"
        case 112: return "unrecognized_name"
        case 113: return "bad_certificate_status_response"
        case 115: return "unknown_psk_identity"
        case 116: return "certificate_required"
        case 120: return "no_application_protocol"
        default: return "alert_\(code)"
        }
    }
}

/// A scenario's `tls` section: how the handshakes it decides go, one step per handshake, like a route's
/// responses (ARCHITECTURE §3a).
package struct TLSSection: Sendable, Equatable {
    /// The server names (exact, or `*.suffix`) whose handshakes this section decides. Empty: every handshake
    /// that no other scenario's names claim.
    package var serverNames: [String] = []
    /// Each step answers `times` handshakes, in order.
    package var handshakes: [TLSHandshakeStep] = [TLSHandshakeStep()]
    /// After the last step: repeat it, or cycle.
    package var afterLast: AfterLast = .repeatLast
    package var resumption = true
    package var closeNotify = true
    /// The protocols ALPN offers for the handshakes this section decides, in order; nil: the listener's.
    /// `["http/1.1"]` keeps those clients on HTTP/1.1, `["h2"]` refuses the ones without HTTP/2.
    package var alpn: [String]?

    package init() {}

    /// Whether `serverName` is one of this section's names.
    package func claims(_ serverName: String?) -> Bool {
        guard let serverName = serverName?.lowercased() else { return false }
        return serverNames.contains { pattern in
            pattern.hasPrefix("*.") ? serverName.hasSuffix(pattern.dropFirst(1)) : pattern == serverName
        }
    }
}

/// One step of a `tls` section's handshake script.
package struct TLSHandshakeStep: Sendable, Equatable {
    package var certificate: TLSCertificateName?
    package var fault: TLSHandshakeFault?
    package var minVersion: TLSVersion?
    package var maxVersion: TLSVersion?
    package var clientCertificate: ClientCertificateMode?
    package var times = 1

    package init() {}
}
