/// The certificates Faultline's authority can serve (ARCHITECTURE §TLS). Every leaf except `wrong-host` and
/// `cn-only` names `localhost`, `*.localhost`, `127.0.0.1` and `::1`, so each one fails a client for exactly one
/// reason.
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
public enum TLSAlert: String, Sendable, CaseIterable, Hashable {
    case handshakeFailure = "handshake_failure"
    case protocolVersion = "protocol_version"
    case unrecognizedName = "unrecognized_name"
    case badCertificate = "bad_certificate"
    case internalError = "internal_error"

    /// The alert's code on the wire.
    public var code: UInt8 {
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
public enum TLSVersion: String, Sendable, CaseIterable, Hashable, Comparable {
    case tls1_0 = "1.0"
    case tls1_1 = "1.1"
    case tls1_2 = "1.2"
    case tls1_3 = "1.3"

    public static func < (lhs: TLSVersion, rhs: TLSVersion) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The journal's name: `TLSv1.2`, as OpenSSL and Wireshark say it.
    public var journalName: String { "TLSv\(rawValue)" }
}
