import COpenSSL
import FaultlineTLS
import FaultlineCore

/// How a server serves HTTPS beside plain HTTP (`FaultlineServer.Configuration.tls`, `serve --tls-port`).
public struct TLSOptions: Sendable, Equatable {
    /// 0 picks a free port; read it back from `FaultlineServer.tlsPort`.
    public var port: Int = 0
    /// The certificate authority's state folder; nil for `~/.cache/faultline/tls` (Linux; `~/Library/Caches`
    /// on macOS), or `$XDG_CACHE_HOME/faultline/tls`.
    public var directory: String?
    /// The catalogue certificate served unless a scenario's `tls` section or the server name says otherwise.
    public var certificate: TLSCertificateName = .valid
    /// A certificate (PEM: the leaf, then its chain) and key of your own, served instead of `certificate`.
    public var certificateFile: String?
    public var keyFile: String?
    /// The application protocols offered by ALPN, in the server's order of preference: `h2` (HTTP/2) and
    /// `http/1.1` by default; `["http/1.1"]` keeps every client on HTTP/1.1, `["h2"]` refuses the others with
    /// `no_application_protocol` (RFC 7301 §3.2).
    public var alpn: [String] = TLSOptions.defaultALPN
    public static let defaultALPN = ["h2", "http/1.1"]

    public init(
        port: Int = 0, directory: String? = nil, certificate: TLSCertificateName = .valid,
        certificateFile: String? = nil, keyFile: String? = nil, alpn: [String] = TLSOptions.defaultALPN
    ) {
        self.alpn = alpn
        self.port = port
        self.directory = directory
        self.certificate = certificate
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }
}

/// Builds a TLS listener's context from its options: the authority (loaded or created), the default
/// certificate, and the engine as the judge of every ClientHello.
enum TLSEndpoint {
    static func context(for options: TLSOptions, core: ServerCore) throws(TLSSetupError) -> TLSServerContext {
        let authority = try CertificateAuthority(directory: options.directory ?? CertificateAuthority.defaultDirectory())
        let defaultIdentity: ServerIdentity
        let defaultName: TLSCertificateName?
        switch (options.certificateFile, options.keyFile) {
        case let (certificate?, key?):
            defaultIdentity = try CertificateAuthority.loadIdentity(certificateFile: certificate, keyFile: key)
            defaultName = nil
        case (nil, nil):
            defaultIdentity = try authority.identity(options.certificate)
            defaultName = options.certificate
        default:
            throw TLSSetupError("a certificate of your own needs both its certificate file and its key file")
        }
        return try TLSServerContext(
            defaultIdentity: defaultIdentity, defaultCertificate: defaultName, clientCA: authority.clientCA,
            alpn: options.alpn,
            catalogue: { try? authority.identity($0) },
            decide: { [unowned core] serverName, alpnOffered in
                core.engine.decideHandshake(serverName: serverName, alpnOffered: alpnOffered, now: core.now())
            })
    }
}
