import COpenSSL
import FaultlineCore

/// What OpenSSL's callbacks tell about one connection (`TLSServerContext`): the ClientHello to decide, the
/// alerts that went by, what the catalogue could not serve. `TLSTransport` in the server, the `tls-accept` fuzzer
/// in `Fuzz/`.
package protocol TLSSessionParty: AnyObject {
    /// The ClientHello arrived: the engine decides the handshake.
    func decide(serverName: String?, alpnOffered: [String]) -> TLSHandshakeDecision
    /// Something OpenSSL or the catalogue refused while deciding (the journal's `tls.error`).
    func noteError(_ message: String)
    /// An alert was sent (`sent`) or received; `code` is its description.
    func alert(sent: Bool, code: UInt8)
    /// The ALPN list the decision names for this handshake (a scenario's `tls.alpn`); nil: the listener's.
    var alpn: [String]? { get }
}

/// The OpenSSL half of one server-side TLS connection, with no socket and no event loop: an SSL object reading
/// the client's bytes from one memory BIO (`feed`) and writing its own into another (`takeOutput`). The TLS
/// transport moves bytes between it and TCP; the `tls-accept` fuzzer drives the same object with bytes alone.
/// One thread at a time.
package final class TLSSession {
    /// The listener's context: its ClientHello callback finds the party through the SSL's app data.
    package let context: TLSServerContext
    /// Told what OpenSSL's callbacks learn; not retained (the party owns the session).
    package weak var party: TLSSessionParty?
    /// Nil once released.
    @exclusivity(unchecked) package private(set) var ssl: OpaquePointer?
    @exclusivity(unchecked) private var input: OpaquePointer?
    @exclusivity(unchecked) private var output: OpaquePointer?

    /// Where a handshake step left the connection.
    package enum HandshakeStep: Equatable {
        case completed
        /// OpenSSL waits for more of the client's bytes (it may have written some of its own).
        case wantMore
        /// The ClientHello callback held the handshake (a hang or a reset decision).
        case held
        /// The handshake failed; OpenSSL's reasons are still queued (`OpenSSLErrorQueue.drainLine`).
        case failed
        /// The session was released.
        case released
    }

    /// What one read of application data gave.
    package enum ReadResult: Equatable {
        /// This many plaintext bytes, at the start of the buffer.
        case bytes(Int)
        /// Nothing decrypted yet: more bytes are needed (OpenSSL may have written some, a ticket or key update).
        case wantMore
        /// close_notify: the client will send no more.
        case closed
        case failed
        case released
    }

    package init(context: TLSServerContext) {
        self.context = context
        ssl = SSL_new(context.context)
        input = BIO_new(BIO_s_mem())
        output = BIO_new(BIO_s_mem())
        // An empty input BIO means "more to come", not end of file.
        _ = faultline_BIO_set_mem_eof_return(input, -1)
        SSL_set_bio(ssl, input, output)
        SSL_set_accept_state(ssl)
        _ = faultline_SSL_set_app_data(ssl, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { release() }

    /// The client's bytes, for OpenSSL to read.
    package func feed(_ bytes: UnsafeRawBufferPointer) {
        guard let input else { return }
        _ = BIO_write(input, bytes.baseAddress, Int32(bytes.count))
    }

    /// One step of the handshake over what was fed.
    package func handshake() -> HandshakeStep {
        guard let ssl else { return .released }
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .completed }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            ERR_clear_error()
            return .wantMore
        case SSL_ERROR_WANT_CLIENT_HELLO_CB:
            ERR_clear_error()
            return .held
        default:
            return .failed
        }
    }

    /// Decrypts application data into `buffer`. OpenSSL's error queue is left empty.
    package func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        guard let ssl else { return .released }
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

    /// Encrypts `bytes` into the output (a memory BIO never pushes back: all of it at once). False when OpenSSL
    /// refused or the session was released.
    package func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let ssl else { return false }
        let written = SSL_write(ssl, bytes.baseAddress, Int32(bytes.count))
        guard written > 0 else {
            ERR_clear_error()
            return false
        }
        return true
    }

    /// Sends close_notify (into the output).
    package func shutdown() {
        guard let ssl else { return }
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// Hands what OpenSSL wrote so far to `body`, then empties the output. True when there was nothing to take;
    /// false when released; else what `body` answered.
    package func takeOutput(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        guard let output else { return false }
        var data: UnsafeMutablePointer<CChar>?
        let length = faultline_BIO_get_mem_data(output, &data)
        guard length > 0, let data else { return true }
        let result = body(UnsafeRawBufferPointer(start: data, count: length))
        if let output = self.output { _ = faultline_BIO_reset(output) }
        return result
    }

    /// Whether OpenSSL holds decrypted bytes, or client bytes it has not read yet.
    package var hasPendingInput: Bool {
        guard let ssl else { return false }
        return SSL_pending(ssl) > 0 || (input.map { BIO_ctrl_pending($0) > 0 } ?? false)
    }

    /// Frees OpenSSL's objects (the BIOs go with the SSL); every call after answers `released`.
    package func release() {
        guard let ssl else { return }
        _ = faultline_SSL_set_app_data(ssl, nil)
        SSL_free(ssl)
        self.ssl = nil
        input = nil
        output = nil
    }
}

extension TLSSessionParty {
    package var alpn: [String]? { nil }
}
