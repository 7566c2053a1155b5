import COpenSSL
import FaultlineCore

/// One TLS listener's OpenSSL context (ARCHITECTURE §3a): the settings every handshake starts from, and the
/// ClientHello callback where the engine decides how each handshake goes — which certificate, which versions,
/// whether to ask for a client certificate, or a fault (an alert, a hang, a reset). Loop thread only, like the
/// transports that use it.
package final class TLSServerContext {
    /// The SSL_CTX. It holds the default certificate, so a handshake that serves it installs nothing.
    package let context: OpaquePointer
    /// The certificate served when a decision names none: a catalogue name, or `custom`.
    package let defaultCertificateName: String
    /// The engine's answer to a ClientHello (server name, ALPN protocols offered).
    package let decide: (String?, [String]) -> TLSHandshakeDecision
    private let defaultCertificate: TLSCertificateName?
    private let catalogue: (TLSCertificateName) -> ServerIdentity?

    /// - Parameters:
    ///   - defaultIdentity: the certificate served unless a decision names another.
    ///   - defaultCertificate: its catalogue name, nil for one the user brought.
    ///   - catalogue: a catalogue certificate by name (issued on first use); nil when it cannot be.
    ///   - clientCA: the certificate authority whose certificates are accepted from clients (mutual TLS).
    package init(
        defaultIdentity: ServerIdentity, defaultCertificate: TLSCertificateName?, clientCA: OpaquePointer?,
        alpn: [String] = ["h2", "http/1.1"], catalogue: @escaping (TLSCertificateName) -> ServerIdentity?,
        decide: @escaping (String?, [String]) -> TLSHandshakeDecision
    ) throws(TLSSetupError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw TLSSetupError("cannot create an OpenSSL context: \(OpenSSLErrorQueue.drainLine(.reason))")
        }
        self.context = context
        self.defaultCertificateName = defaultCertificate?.rawValue ?? "custom"
        self.defaultCertificate = defaultCertificate
        self.catalogue = catalogue
        self.decide = decide
        let wire = alpn.flatMap { [UInt8(clamping: $0.utf8.count)] + Array($0.utf8) }
        serverProtocolsLength = wire.count
        serverProtocols = UnsafeMutablePointer<UInt8>.allocate(capacity: max(1, wire.count))
        serverProtocols.initialize(from: wire, count: wire.count)
        onlyHTTP2 = alpn == ["h2"]
        _ = faultline_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION)
        _ = SSL_CTX_set_options(
            context, faultline_SSL_OP_NO_RENEGOTIATION() | faultline_SSL_OP_CIPHER_SERVER_PREFERENCE()
                | faultline_SSL_OP_NO_COMPRESSION())
        // Idle connections give their read and write buffers back: thousands of kept-alive clients stay cheap.
        _ = faultline_SSL_CTX_set_mode(context, Int(SSL_MODE_RELEASE_BUFFERS))
        // Resumption by ticket only (stateless): a decision that turns resumption off refuses tickets, and with
        // no server-side cache there is nothing else a client could resume.
        _ = faultline_SSL_CTX_set_session_cache_mode(context, Int(SSL_SESS_CACHE_OFF))
        let sessionContext = Array("faultline".utf8)
        _ = SSL_CTX_set_session_id_context(context, sessionContext, UInt32(sessionContext.count))
        // RSA 1024 is refused at OpenSSL's default security level 2, as in clientHello below.
        if defaultCertificate == .weakKey { SSL_CTX_set_security_level(context, 0) }
        guard defaultIdentity.install(on: context) else {
            // No SSL_CTX_free here: every stored property is set, so a throw runs deinit, which frees it.
            let reason = OpenSSLErrorQueue.drainLine(.reason)
            throw TLSSetupError("OpenSSL refused the certificate \(defaultCertificateName): \(reason)")
        }
        if let clientCA {
            _ = X509_STORE_add_cert(SSL_CTX_get_cert_store(context), clientCA)
            // The CertificateRequest names the CA, so a client with several certificates picks the right one.
            _ = SSL_CTX_add_client_CA(context, clientCA)
        }
        SSL_CTX_set_client_hello_cb(context, { ssl, alert, _ in
            guard let ssl, let session = TLSServerContext.session(of: ssl), let party = session.party else {
                return SSL_CLIENT_HELLO_ERROR
            }
            return session.context.clientHello(ssl, party, alert)
        }, nil)
        SSL_CTX_set_alpn_select_cb(context, { ssl, out, outLength, offered, offeredLength, argument in
            // The server's first protocol that the client offers: the scenario's list when its `tls` section
            // names one, else the listener's. A client that offers none of them gets no ALPN (RFC 7301 §3.2
            // allows going on without it) and HTTP/1.1 — unless h2 is all there is, which refuses it with
            // no_application_protocol.
            let server = Unmanaged<TLSServerContext>.fromOpaque(argument!).takeUnretainedValue()
            var selected: UnsafeMutablePointer<UInt8>?
            var onlyHTTP2 = server.onlyHTTP2
            var result: Int32
            if let ssl, let alpn = TLSServerContext.session(of: ssl)?.party?.alpn {
                onlyHTTP2 = alpn == ["h2"]
                // The answer must point into memory that outlives this callback: the client's own list.
                result = OPENSSL_NPN_NO_OVERLAP
                for name in alpn {
                    guard let inOffer = TLSServerContext.find(name, in: offered, offeredLength) else { continue }
                    selected = UnsafeMutablePointer(mutating: inOffer + 1)
                    outLength?.pointee = UInt8(name.utf8.count)
                    result = OPENSSL_NPN_NEGOTIATED
                    break
                }
            } else {
                result = SSL_select_next_proto(
                    &selected, outLength, server.serverProtocols, UInt32(server.serverProtocolsLength),
                    offered, offeredLength)
            }
            guard result == OPENSSL_NPN_NEGOTIATED, let selected else {
                return onlyHTTP2 ? SSL_TLSEXT_ERR_ALERT_FATAL : SSL_TLSEXT_ERR_NOACK
            }
            out?.pointee = UnsafePointer(selected)
            return SSL_TLSEXT_ERR_OK
        }, Unmanaged.passUnretained(self).toOpaque())
        SSL_CTX_set_info_callback(context) { ssl, where_, value in
            guard where_ & SSL_CB_ALERT != 0, let ssl,
                  let party = TLSServerContext.session(of: ssl)?.party else { return }
            // `value`: level in the high byte, description in the low one.
            party.alert(sent: where_ & SSL_CB_WRITE != 0, code: UInt8(truncatingIfNeeded: value & 0xff))
        }
    }

    deinit {
        serverProtocols.deallocate()
        SSL_CTX_free(context)
    }

    /// Where `name`'s length byte is in an ALPN list (a length byte, then the name, for each); nil when absent.
    package static func find(_ name: String, in list: UnsafePointer<UInt8>?, _ count: UInt32) -> UnsafePointer<UInt8>? {
        guard let list else { return nil }
        let wanted = Array(name.utf8)
        var at = 0
        while at < Int(count) {
            let length = Int(list[at])
            guard at + 1 + length <= Int(count) else { return nil }
            if length == wanted.count && (0..<length).allSatisfy({ list[at + 1 + $0] == wanted[$0] }) { return list + at }
            at += 1 + length
        }
        return nil
    }

    /// The protocols offered, in ALPN's wire format: a length byte, then the name, for each.
    private let serverProtocolsLength: Int
    private let serverProtocols: UnsafeMutablePointer<UInt8>
    private let onlyHTTP2: Bool

    private static func session(of ssl: OpaquePointer) -> TLSSession? {
        guard let data = faultline_SSL_get_app_data(ssl) else { return nil }
        return Unmanaged<TLSSession>.fromOpaque(data).takeUnretainedValue()
    }

    /// The ClientHello callback: read the server name and ALPN list, ask the engine, apply its decision.
    /// Returning RETRY holds the handshake (a hang or a reset); ERROR sends `alert`.
    private func clientHello(
        _ ssl: OpaquePointer, _ transport: TLSSessionParty, _ alert: UnsafeMutablePointer<Int32>?
    ) -> Int32 {
        let decision = transport.decide(serverName: Self.serverName(ssl), alpnOffered: Self.alpnOffered(ssl))
        switch decision.fault {
        case .hang?, .reset?:
            return SSL_CLIENT_HELLO_RETRY
        case .alert(let chosen)?:
            alert?.pointee = Int32(chosen.code)
            return SSL_CLIENT_HELLO_ERROR
        case .slow?, nil:
            break
        }
        // What is older than TLS 1.2, and RSA 1024, is refused at OpenSSL's default security level.
        if let minimum = decision.minVersion, minimum < .tls1_2 { SSL_set_security_level(ssl, 0) }
        if decision.certificate == .weakKey { SSL_set_security_level(ssl, 0) }
        if let minimum = decision.minVersion { _ = faultline_SSL_set_min_proto_version(ssl, minimum.openSSL) }
        if let maximum = decision.maxVersion { _ = faultline_SSL_set_max_proto_version(ssl, maximum.openSSL) }
        if let name = decision.certificate, name != defaultCertificate {
            guard let identity = catalogue(name), identity.install(onConnection: ssl) else {
                let reason = OpenSSLErrorQueue.drainLine(.reason)
                transport.noteError("cannot serve the \(name.rawValue) certificate: \(reason)")
                alert?.pointee = Int32(TLSAlert.internalError.code)
                return SSL_CLIENT_HELLO_ERROR
            }
        }
        switch decision.clientCertificate {
        case .none: break
        case .optional: SSL_set_verify(ssl, SSL_VERIFY_PEER, nil)
        case .required: SSL_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
        if !decision.resumption {
            _ = SSL_set_options(ssl, faultline_SSL_OP_NO_TICKET())
            _ = SSL_set_num_tickets(ssl, 0)
        }
        return SSL_CLIENT_HELLO_SUCCESS
    }

    /// The server_name extension's host name (RFC 6066 §3).
    private static func serverName(_ ssl: OpaquePointer) -> String? {
        var data: UnsafePointer<UInt8>?
        var length = 0
        guard SSL_client_hello_get0_ext(ssl, UInt32(TLSEXT_TYPE_server_name), &data, &length) == 1, let data,
              length >= 5 else { return nil }
        let bytes = UnsafeBufferPointer(start: data, count: length)
        // A list length, then entries of (type, length, name); type 0 is a host name.
        var index = 2
        while index + 3 <= bytes.count {
            let type = bytes[index]
            let nameLength = Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            let start = index + 3
            guard start + nameLength <= bytes.count else { return nil }
            if type == 0 { return String(decoding: bytes[start..<start + nameLength], as: UTF8.self) }
            index = start + nameLength
        }
        return nil
    }

    /// The protocols of the ALPN extension (RFC 7301 §3.1), in the client's order.
    private static func alpnOffered(_ ssl: OpaquePointer) -> [String] {
        var data: UnsafePointer<UInt8>?
        var length = 0
        guard SSL_client_hello_get0_ext(
            ssl, UInt32(TLSEXT_TYPE_application_layer_protocol_negotiation), &data, &length) == 1,
              let data, length >= 2 else { return [] }
        let bytes = UnsafeBufferPointer(start: data, count: length)
        var names: [String] = []
        var index = 2
        while index < bytes.count {
            let nameLength = Int(bytes[index])
            let start = index + 1
            guard nameLength > 0, start + nameLength <= bytes.count else { break }
            names.append(String(decoding: bytes[start..<start + nameLength], as: UTF8.self))
            index = start + nameLength
        }
        return names
    }

    /// A certificate's subject, RFC 2253 style (`CN=alice,O=Faultline`).
    package static func subject(of certificate: OpaquePointer) -> String? {
        guard let name = X509_get_subject_name(certificate), let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, faultline_XN_FLAG_RFC2253()) >= 0 else { return nil }
        var data: UnsafeMutablePointer<CChar>?
        let length = faultline_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }
}

extension ServerIdentity {
    /// Makes this the context's certificate: every handshake that names no other serves it.
    package func install(on context: OpaquePointer) -> Bool {
        guard SSL_CTX_use_certificate(context, certificate) == 1, SSL_CTX_use_PrivateKey(context, privateKey) == 1
        else { return false }
        return faultline_SSL_CTX_set1_chain(context, chainStack) == 1
    }

    /// Makes this one connection's certificate, and its only one (from the ClientHello callback). The set1 calls
    /// take their own references, so the identity's one chain stack serves every connection.
    package func install(onConnection ssl: OpaquePointer) -> Bool {
        // The connection starts with a copy of the context's certificates, one slot per key type, and OpenSSL
        // serves the first filled slot whose key signs with an algorithm the client offers, ECDSA before RSA.
        // SSL_use_certificate fills only its key's slot, so the default's would stay: the RSA weak-key would go
        // out as the P-256 default, and a P-256 certificate as an RSA default to a client that offers RSA only,
        // while the journal names this one. So every slot (certificate, key and chain) is emptied first.
        SSL_certs_clear(ssl)
        guard SSL_use_certificate(ssl, certificate) == 1, SSL_use_PrivateKey(ssl, privateKey) == 1 else { return false }
        return faultline_SSL_set1_chain(ssl, chainStack) == 1
    }
}

extension TLSVersion {
    /// OpenSSL's constant for the version.
    package var openSSL: Int32 {
        switch self {
        case .tls1_0: return TLS1_VERSION
        case .tls1_1: return TLS1_1_VERSION
        case .tls1_2: return TLS1_2_VERSION
        case .tls1_3: return TLS1_3_VERSION
        }
    }
}
