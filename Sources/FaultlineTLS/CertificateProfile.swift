#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What one certificate says, before it is signed: its subject, its validity, and its X.509 v3 extensions in
/// OpenSSL's configuration syntax (the `x509v3_config` manual page), which is also how `openssl x509 -text`
/// prints them back.
package struct CertificateProfile: Sendable {
    /// The subject's commonName; the organization is always `Faultline`.
    package var commonName: String
    /// Seconds since the epoch.
    package var notBefore: time_t
    /// Seconds since the epoch.
    package var notAfter: time_t
    /// e.g. `critical,CA:TRUE,pathlen:0` (RFC 5280 §4.2.1.9).
    package var basicConstraints: String
    /// e.g. `critical,digitalSignature` (RFC 5280 §4.2.1.3).
    package var keyUsage: String
    /// e.g. `serverAuth`; nil for none (RFC 5280 §4.2.1.12).
    package var extendedKeyUsage: String?
    /// e.g. `DNS:localhost,IP:127.0.0.1`; nil for none (RFC 5280 §4.2.1.6).
    package var subjectAltName: String?

    package static let hour: time_t = 3600
    package static let day: time_t = 86400

    /// A certificate authority valid for ten years from an hour ago (the hour absorbs clock skew between the
    /// machine that made it and the client).
    package static func authority(commonName: String, now: time_t, pathLength: Int? = nil) -> CertificateProfile {
        CertificateProfile(
            commonName: commonName, notBefore: now - hour, notAfter: now + 3650 * day,
            basicConstraints: "critical,CA:TRUE" + (pathLength.map { ",pathlen:\($0)" } ?? ""),
            keyUsage: "critical,keyCertSign,cRLSign", extendedKeyUsage: nil, subjectAltName: nil)
    }

    /// A server certificate for `localhost` and the loopback addresses, valid from an hour ago for 90 days. An
    /// RSA key also allows keyEncipherment (RSA key exchange in TLS 1.2 and earlier).
    package static func server(now: time_t, rsa: Bool) -> CertificateProfile {
        CertificateProfile(
            commonName: "localhost", notBefore: now - hour, notAfter: now + 90 * day,
            basicConstraints: "critical,CA:FALSE",
            keyUsage: rsa ? "critical,digitalSignature,keyEncipherment" : "critical,digitalSignature",
            extendedKeyUsage: "serverAuth",
            subjectAltName: "DNS:localhost,DNS:*.localhost,IP:127.0.0.1,IP:::1")
    }

    /// A client certificate (TLS client authentication) for `commonName`, valid from an hour ago for a year.
    package static func client(commonName: String, now: time_t) -> CertificateProfile {
        CertificateProfile(
            commonName: commonName, notBefore: now - hour, notAfter: now + 365 * day,
            basicConstraints: "critical,CA:FALSE", keyUsage: "critical,digitalSignature",
            extendedKeyUsage: "clientAuth", subjectAltName: nil)
    }
}
