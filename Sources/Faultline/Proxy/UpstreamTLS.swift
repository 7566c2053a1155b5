import COpenSSL
import FaultlineTLS
import FaultlineCore

/// The OpenSSL client context of https upstreams: TLS 1.2 or later, ALPN `http/1.1`, the system's CA store or a
/// `caFile`, certificate verification on unless the scenario turned it off. One per (CA file, verify) and loop,
/// made on first use.
final class UpstreamTLSContext {
    let context: OpaquePointer
    let verify: Bool

    /// The context, or why it cannot be made (a CA file OpenSSL cannot read).
    static func make(caFile: String?, verify: Bool) -> Result<UpstreamTLSContext, UpstreamError> {
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            return .failure(UpstreamError(.tls, "SSL_CTX_new: " + OpenSSLErrorQueue.drainLine(.reason)))
        }
        _ = faultline_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION)
        _ = faultline_SSL_CTX_set_mode(context, Int(SSL_MODE_RELEASE_BUFFERS))
        let alpn: [UInt8] = [8] + Array("http/1.1".utf8)
        _ = SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count))
        if let caFile {
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                SSL_CTX_free(context)
                return .failure(UpstreamError(.tls, "cannot load the CA file \(caFile): " + OpenSSLErrorQueue.drainLine(.reason)))
            }
        } else {
            _ = SSL_CTX_set_default_verify_paths(context)
        }
        SSL_CTX_set_verify(context, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
        return .success(UpstreamTLSContext(context: context, verify: verify))
    }

    private init(context: OpaquePointer, verify: Bool) {
        self.context = context
        self.verify = verify
    }

    deinit { SSL_CTX_free(context) }
}

/// One client-side TLS connection over memory BIOs (as the server side, ARCHITECTURE §3a): the upstream's bytes
/// go in with `feed`, OpenSSL's records come out through `takeOutput`, and the connection moves them to and from
/// its TCP transport. SNI and the host-name check are the upstream's host (an IP address is checked as one).
final class UpstreamTLSSession {
    private var ssl: OpaquePointer?
    private var input: OpaquePointer?
    private var output: OpaquePointer?
    private let verify: Bool

    init(context: UpstreamTLSContext, host: String) {
        verify = context.verify
        ssl = SSL_new(context.context)
        input = BIO_new(BIO_s_mem())
        output = BIO_new(BIO_s_mem())
        _ = faultline_BIO_set_mem_eof_return(input, -1)
        SSL_set_bio(ssl, input, output)
        SSL_set_connect_state(ssl)
        if UpstreamAddress(literal: host, port: 0) != nil {
            _ = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
        } else {
            _ = faultline_SSL_set_tlsext_host_name(ssl, host)
            if context.verify { _ = SSL_set1_host(ssl, host) }
        }
    }

    deinit { release() }

    enum Step: Equatable {
        case completed
        case wantMore
        /// The handshake failed: why, in words (the verification error when there is one).
        case failed(String)
    }

    func handshake() -> Step {
        guard let ssl else { return .failed("released") }
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .completed }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE {
            ERR_clear_error()
            return .wantMore
        }
        var reason = OpenSSLErrorQueue.drainLine(.reason)
        let verdict = SSL_get_verify_result(ssl)
        if verify && verdict != X509_V_OK {
            reason = "certificate verify failed: " + String(cString: X509_verify_cert_error_string(verdict))
        }
        return .failed(reason.isEmpty ? "TLS handshake failed" : reason)
    }

    func feed(_ bytes: UnsafeRawBufferPointer) {
        guard let input, !bytes.isEmpty else { return }
        _ = BIO_write(input, bytes.baseAddress, Int32(bytes.count))
    }

    enum ReadResult: Equatable {
        case bytes(Int)
        case wantMore
        case closed
        case failed
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        guard let ssl else { return .failed }
        let count = SSL_read(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        if count > 0 { return .bytes(Int(count)) }
        let error = SSL_get_error(ssl, count)
        ERR_clear_error()
        switch error {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .wantMore
        case SSL_ERROR_ZERO_RETURN: return .closed
        default: return .failed
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let ssl else { return false }
        guard !bytes.isEmpty else { return true }
        let written = SSL_write(ssl, bytes.baseAddress, Int32(bytes.count))
        if written <= 0 { ERR_clear_error() }
        return written > 0
    }

    /// Hands OpenSSL's pending records to `body`, then empties the output BIO.
    func takeOutput(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        guard let output else { return false }
        var data: UnsafeMutablePointer<CChar>?
        let length = faultline_BIO_get_mem_data(output, &data)
        guard length > 0, let data else { return true }
        let result = body(UnsafeRawBufferPointer(start: data, count: length))
        _ = faultline_BIO_reset(output)
        return result
    }

    func release() {
        guard let ssl else { return }
        SSL_free(ssl)
        self.ssl = nil
        input = nil
        output = nil
    }
}
