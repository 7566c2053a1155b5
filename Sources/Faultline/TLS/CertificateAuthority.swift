import COpenSSL
import FaultlineTLS
import FaultlineCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Faultline's local certificate authority: the CA a user trusts once (`faultline ca --export`), and the
/// catalogue of server certificates (`TLSCertificateName`) each of which fails a client for one reason.
///
/// The folder keeps what must outlive a run: the root "Faultline Local CA" (`ca.pem`, `ca-key.pem`), the
/// "Faultline Intermediate CA" it signed (`intermediate.pem`, `intermediate-key.pem`), a second root that is never
/// exported (`untrusted-ca.pem`, `untrusted-ca-key.pem`), the "Faultline Client CA" that signs client
/// certificates (`client-ca.pem`, `client-ca-key.pem`), and one key per catalogue name (`keys/NAME-key.pem`), so
/// that pins stay the same from run to run. The leaf certificates themselves are issued in memory on first use,
/// with dates relative to now, so `expired` is always expired and `valid` never is.
///
/// Shared between threads: everything is fixed at initialisation except the cache of issued identities, which a
/// mutex guards.
package final class CertificateAuthority: @unchecked Sendable {
    /// The state folder.
    package let directory: String
    /// The root CA certificate in PEM: what clients are to trust.
    package let caCertificatePEM: String
    /// The client CA certificate in PEM: what a server verifying client certificates trusts.
    package let clientCACertificatePEM: String

    private let root: Authority
    private let intermediate: Authority
    private let untrustedRoot: Authority
    private let clientAuthority: Authority
    private let leafKeys: [TLSCertificateName: PrivateKey]
    private let issued = Mutex(Issued())

    /// A CA certificate with its private key.
    private struct Authority: Sendable {
        let certificate: X509Certificate
        let key: PrivateKey
    }

    /// What is issued on first use and then reused for the life of the authority.
    private struct Issued: Sendable {
        var identities: [TLSCertificateName: ServerIdentity] = [:]
        /// The intermediate behind `expired-intermediate`, with a key of its own that is never persisted.
        var expiredIntermediate: Authority?
    }

    /// Where the authority lives unless told otherwise: `faultline/tls` in the user's cache folder
    /// (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS).
    package static func defaultDirectory() -> String {
        Platform.userCacheDirectory() + "/faultline/tls"
    }

    /// Loads the authority kept in `directory`, creating whatever is missing; the folder (and missing parents) is
    /// created with mode 0700. Throws when the folder is not private to the current user, when a file cannot be
    /// read or written, or when the files do not belong together (a certificate that does not match its key, an
    /// intermediate the root did not sign). Processes that start at once on a fresh folder wait for each other
    /// and end up with the same authority.
    package init(directory: String) throws(TLSSetupError) {
        self.directory = directory
        let folder = try CAStateFolder(path: directory)
        let loaded = try folder.withLock { () throws(TLSSetupError) -> Loaded in try Self.loadOrCreate(folder) }
        root = loaded.root
        intermediate = loaded.intermediate
        untrustedRoot = loaded.untrustedRoot
        clientAuthority = loaded.clientAuthority
        leafKeys = loaded.leafKeys
        caCertificatePEM = try root.certificate.pem()
        clientCACertificatePEM = try clientAuthority.certificate.pem()
    }

    /// The client CA's `X509 *`, for a server that verifies client certificates; valid while the authority lives.
    package var clientCA: OpaquePointer { clientAuthority.certificate.pointer }

    /// The catalogue certificate `name` with its key and chain, issued on the first call and the same object on
    /// every later one. Its dates are relative to the first call (valid from an hour before, for 90 days).
    package func identity(_ name: TLSCertificateName) throws(TLSSetupError) -> ServerIdentity {
        try issued.withLock { (state: inout Issued) throws(TLSSetupError) -> ServerIdentity in
            if let identity = state.identities[name] { return identity }
            let identity = try issue(name, expiredIntermediate: &state.expiredIntermediate)
            state.identities[name] = identity
            return identity
        }
    }

    /// The pin of every catalogue name's key, in catalogue order: base64 SHA-256 of the DER SubjectPublicKeyInfo
    /// (RFC 7469 §2.4). The keys are persisted, so the pins hold across runs.
    package func pins() throws(TLSSetupError) -> [(name: TLSCertificateName, sha256: String)] {
        var pins: [(name: TLSCertificateName, sha256: String)] = []
        for name in TLSCertificateName.allCases {
            pins.append((name, try leafKey(name).spkiSHA256Base64()))
        }
        return pins
    }

    /// A new client certificate for `commonName` (extendedKeyUsage clientAuth, valid for a year) with a fresh
    /// P-256 key, signed by the client CA; both in PEM.
    package func issueClientCertificate(
        commonName: String
    ) throws(TLSSetupError) -> (certificatePEM: String, keyPEM: String) {
        guard !commonName.isEmpty else { throw TLSSetupError("a client certificate needs a non-empty name") }
        let key = try PrivateKey.generate(.p256)
        let certificate = try X509Certificate.issue(
            .client(commonName: commonName, now: time(nil)), subjectKey: key,
            issuer: (clientAuthority.certificate, clientAuthority.key))
        return (try certificate.pem(), try key.pem())
    }

    /// A server identity brought by the user: `certificateFile` holds PEM certificates, the server's own first and
    /// then any intermediates to send after it; `keyFile` holds the server certificate's private key in PEM
    /// (unencrypted). Throws, naming the file, when either does not read or the key is not the certificate's.
    package static func loadIdentity(certificateFile: String, keyFile: String) throws(TLSSetupError) -> ServerIdentity {
        guard let certificateBytes = try CAStateFolder.readFile(certificateFile) else {
            throw TLSSetupError("the certificate file \(certificateFile) does not exist")
        }
        let certificates = try X509Certificate.all(pem: certificateBytes, source: certificateFile)
        guard let keyBytes = try CAStateFolder.readFile(keyFile) else {
            throw TLSSetupError("the key file \(keyFile) does not exist")
        }
        let key = try PrivateKey(pem: keyBytes, source: keyFile)
        guard certificates[0].matches(key) else {
            throw TLSSetupError(
                "the private key in \(keyFile) does not belong to the first certificate in \(certificateFile) "
                    + "(the server's own certificate must come first, then its chain)")
        }
        return try ServerIdentity(leaf: certificates[0], key: key, chain: Array(certificates.dropFirst()))
    }

    // MARK: - Issuing the catalogue

    private func leafKey(_ name: TLSCertificateName) throws(TLSSetupError) -> PrivateKey {
        guard let key = leafKeys[name] else { throw TLSSetupError("no key for \(name.rawValue) in \(directory)/keys") }
        return key
    }

    /// Issues the catalogue certificate `name` as `TLSCertificateName` describes it.
    private func issue(
        _ name: TLSCertificateName, expiredIntermediate: inout Authority?
    ) throws(TLSSetupError) -> ServerIdentity {
        let key = try leafKey(name)
        let now = time(nil)
        let day = CertificateProfile.day
        var profile = CertificateProfile.server(now: now, rsa: key.isRSA)
        // OpenSSL-based clients (curl, Python) match `*.localhost` only against names with two labels before it,
        // so the name that selects the certificate (`expired.localhost`) is in it explicitly.
        profile.subjectAltName = profile.subjectAltName.map { $0 + ",DNS:\(name.rawValue).localhost" }
        var issuer: Authority? = intermediate
        var chain = [intermediate.certificate]
        switch name {
        case .valid, .rotated, .weakKey:
            break
        case .expired:
            profile.notBefore = now - 30 * day
            profile.notAfter = now - day
        case .notYetValid:
            profile.notBefore = now + day
            profile.notAfter = now + 91 * day
        case .wrongHost:
            profile.commonName = "wrong-host.invalid"
            profile.subjectAltName = "DNS:wrong-host.invalid"
        case .selfSigned:
            issuer = nil
            chain = []
        case .untrustedRoot:
            issuer = untrustedRoot
            chain = []
        case .incompleteChain:
            chain = []
        case .expiredIntermediate:
            let expired: Authority
            if let existing = expiredIntermediate {
                expired = existing
            } else {
                expired = try makeExpiredIntermediate(now: now)
                expiredIntermediate = expired
            }
            issuer = expired
            chain = [expired.certificate]
        case .cnOnly:
            profile.subjectAltName = nil
        case .noServerAuthEKU:
            profile.extendedKeyUsage = "clientAuth"
        case .tooLongValidity:
            profile.notAfter = profile.notBefore + 826 * day
        }
        let certificate = try X509Certificate.issue(
            profile, subjectKey: key, issuer: issuer.map { ($0.certificate, $0.key) })
        return try ServerIdentity(leaf: certificate, key: key, chain: chain)
    }

    /// "Faultline Expired Intermediate CA", signed by the root, valid from 30 days ago until yesterday. Its name
    /// and key differ from the good intermediate's, so no client can build a path through that one instead.
    private func makeExpiredIntermediate(now: time_t) throws(TLSSetupError) -> Authority {
        let key = try PrivateKey.generate(.p256)
        var profile = CertificateProfile.authority(
            commonName: "Faultline Expired Intermediate CA", now: now, pathLength: 0)
        profile.notBefore = now - 30 * CertificateProfile.day
        profile.notAfter = now - CertificateProfile.day
        let certificate = try X509Certificate.issue(profile, subjectKey: key, issuer: (root.certificate, root.key))
        return Authority(certificate: certificate, key: key)
    }

    // MARK: - The folder

    /// Everything the folder keeps, loaded.
    private struct Loaded {
        let root: Authority
        let intermediate: Authority
        let untrustedRoot: Authority
        let clientAuthority: Authority
        let leafKeys: [TLSCertificateName: PrivateKey]
    }

    /// Reads every file of the authority, creating those that are missing. The caller holds the folder's lock.
    private static func loadOrCreate(_ folder: CAStateFolder) throws(TLSSetupError) -> Loaded {
        let now = time(nil)
        let root = try authority(
            folder, "ca", .authority(commonName: "Faultline Local CA", now: now), issuer: nil)
        let intermediate = try authority(
            folder, "intermediate", .authority(commonName: "Faultline Intermediate CA", now: now, pathLength: 0),
            issuer: root)
        let untrustedRoot = try authority(
            folder, "untrusted-ca", .authority(commonName: "Faultline Untrusted CA", now: now), issuer: nil)
        let clientAuthority = try authority(
            folder, "client-ca", .authority(commonName: "Faultline Client CA", now: now), issuer: nil)
        var leafKeys: [TLSCertificateName: PrivateKey] = [:]
        for name in TLSCertificateName.allCases {
            let algorithm: PrivateKey.Algorithm = name == .weakKey ? .rsa(bits: 1024) : .p256
            leafKeys[name] = try key(folder, "keys/\(name.rawValue)-key.pem", algorithm)
        }
        return Loaded(
            root: root, intermediate: intermediate, untrustedRoot: untrustedRoot, clientAuthority: clientAuthority,
            leafKeys: leafKeys)
    }

    /// The key in `file`, or a new one of `algorithm` written there with mode 0600.
    private static func key(
        _ folder: CAStateFolder, _ file: String, _ algorithm: PrivateKey.Algorithm
    ) throws(TLSSetupError) -> PrivateKey {
        if let bytes = try folder.read(file) { return try PrivateKey(pem: bytes, source: folder.path + "/" + file) }
        let key = try PrivateKey.generate(algorithm)
        try folder.write(try key.pem(), to: file, mode: 0o600)
        return key
    }

    /// The CA `BASE.pem` with its key `BASE-key.pem`; whichever is missing is made (the key first, so a
    /// certificate is never written for a key that is not on disk), the certificate signed by `issuer` or by
    /// itself.
    private static func authority(
        _ folder: CAStateFolder, _ base: String, _ profile: CertificateProfile, issuer: Authority?
    ) throws(TLSSetupError) -> Authority {
        let keyFile = "\(base)-key.pem"
        let certificateFile = "\(base).pem"
        let key = try key(folder, keyFile, .p256)
        let certificatePath = folder.path + "/" + certificateFile
        guard let bytes = try folder.read(certificateFile) else {
            let certificate = try X509Certificate.issue(
                profile, subjectKey: key, issuer: issuer.map { ($0.certificate, $0.key) })
            try folder.write(try certificate.pem(), to: certificateFile, mode: 0o644)
            return Authority(certificate: certificate, key: key)
        }
        let certificate = try X509Certificate.all(pem: bytes, source: certificatePath)[0]
        let remedy = "; remove the folder \(folder.path) to start a new authority (and trust its new ca.pem)"
        guard certificate.matches(key) else {
            throw TLSSetupError("\(certificatePath) does not match the key in \(folder.path)/\(keyFile)" + remedy)
        }
        if let issuer, !certificate.isSigned(by: issuer.key) {
            throw TLSSetupError("\(certificatePath) is not signed by the CA in \(folder.path)/ca.pem" + remedy)
        }
        return Authority(certificate: certificate, key: key)
    }
}
