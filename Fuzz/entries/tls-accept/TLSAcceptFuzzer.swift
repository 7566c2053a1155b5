import COpenSSL
import FaultlineCore
import FaultlineTLS

/// libFuzzer's entry point for the `tls-accept` fuzzer: the server's TLS accept path without sockets. Linked
/// with the server's own FaultlineTLS module, built with coverage by scripts/fuzz.sh: `TLSSession`,
/// `TLSServerContext` (the SSL_CTX settings, the ClientHello callback with its server name and ALPN parsing, the
/// ALPN selection, the alert callback) and the certificate code they need, so what runs is what `faultline serve --tls-port` runs,
/// minus the event loop.
///
/// One input: byte 0 chooses the engine's decision for the ClientHello (default, an alert, a hang, a reset, a
/// version range, a client certificate, resumption off, a catalogue certificate that cannot be served) in its low
/// six bits and a mode in its top two; byte 1 seeds how the rest is cut into pieces, each fed to the memory BIO
/// and followed by a handshake step (then reads, once established), as TCP segments would. Modes:
///   0, 3  the rest is the client's byte stream from the first byte: a ClientHello and whatever follows
///   1     a real client (OpenSSL over memory BIOs) does the handshake first; the rest are raw bytes after it
///   2     the same handshake; the rest is application data the client encrypts piece by piece, then
///         close_notify — the server must read back exactly those bytes
/// (Replayed bytes cannot finish a handshake, as the server's random differs every time: modes 1 and 2 reach
/// the established side.) A broken rule is a crash, so libFuzzer saves the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTLSAccept(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let violations = TLSAcceptFuzzCheck.violations(in: Array(UnsafeBufferPointer(start: data, count: size)))
    guard violations.isEmpty else {
        fatalError("tls-accept: broken rules:\n  " + violations.joined(separator: "\n  "))
    }
    return 0
}

/// The rules one input must keep.
enum TLSAcceptFuzzCheck {
    /// The decisions byte 0 chooses from (modulo the count).
    static let decisions: [TLSHandshakeDecision] = [
        TLSHandshakeDecision(),
        TLSHandshakeDecision(fault: .alert(.handshakeFailure)),
        TLSHandshakeDecision(fault: .alert(.unrecognizedName)),
        TLSHandshakeDecision(fault: .hang),
        TLSHandshakeDecision(fault: .reset),
        TLSHandshakeDecision(minVersion: .tls1_3),
        TLSHandshakeDecision(maxVersion: .tls1_2),
        TLSHandshakeDecision(minVersion: .tls1_0, maxVersion: .tls1_1),
        TLSHandshakeDecision(clientCertificate: .optional),
        TLSHandshakeDecision(clientCertificate: .required),
        TLSHandshakeDecision(resumption: false, closeNotify: false),
        // Not in the fuzzer's catalogue: the callback's "cannot serve" path (internal_error).
        TLSHandshakeDecision(certificate: .expired),
        TLSHandshakeDecision(fault: .slow(DripSpec(size: 1, intervalMilliseconds: 1))),
    ]

    /// The listener's context, as the server builds it, with one self-signed P-256 certificate made at start-up
    /// (also the client CA for mutual TLS). The catalogue serves nothing.
    nonisolated(unsafe) static let context: TLSServerContext = {
        do {
            let key = try PrivateKey.generate(.p256)
            let certificate = try X509Certificate.issue(
                .server(now: time(nil), rsa: false), subjectKey: key, issuer: nil)
            let identity = try ServerIdentity(leaf: certificate, key: key, chain: [])
            return try TLSServerContext(
                defaultIdentity: identity, defaultCertificate: .valid, clientCA: certificate.pointer,
                catalogue: { _ in nil }, decide: { _, _ in current })
        } catch {
            fatalError("tls-accept: cannot set up the TLS context: \(error)")
        }
    }()
    nonisolated(unsafe) static var current = TLSHandshakeDecision()

    /// The client side of modes 1 and 2: verifies nothing, defaults otherwise (TLS 1.2 and 1.3).
    nonisolated(unsafe) static let clientContext: OpaquePointer = {
        guard let context = SSL_CTX_new(TLS_client_method()) else { fatalError("tls-accept: SSL_CTX_new (client)") }
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        return context
    }()

    /// A client SSL over two memory BIOs.
    final class Client {
        let ssl: OpaquePointer
        let input: OpaquePointer
        let output: OpaquePointer

        init() {
            ssl = SSL_new(TLSAcceptFuzzCheck.clientContext)!
            input = BIO_new(BIO_s_mem())!
            output = BIO_new(BIO_s_mem())!
            _ = faultline_BIO_set_mem_eof_return(input, -1)
            SSL_set_bio(ssl, input, output)
            SSL_set_connect_state(ssl)
        }

        deinit { SSL_free(ssl) }

        /// What the client wrote, to the server's session.
        func send(to session: TLSSession) {
            var data: UnsafeMutablePointer<CChar>?
            let length = faultline_BIO_get_mem_data(output, &data)
            guard length > 0, let data else { return }
            session.feed(UnsafeRawBufferPointer(start: data, count: length))
            _ = faultline_BIO_reset(output)
        }

        /// What the server wrote, to the client.
        func receive(_ bytes: UnsafeRawBufferPointer) {
            _ = BIO_write(input, bytes.baseAddress, Int32(bytes.count))
        }

        /// Runs the handshake between the client and `session` to its end; the server's last step.
        func handshake(with session: TLSSession, output: inout Int) -> TLSSession.HandshakeStep {
            var step = TLSSession.HandshakeStep.wantMore
            for _ in 0..<8 {
                _ = SSL_do_handshake(ssl)
                ERR_clear_error()
                send(to: session)
                step = session.handshake()
                if step == .failed { _ = OpenSSLErrorQueue.drainLine(.reason) }
                _ = session.takeOutput { bytes in
                    output += bytes.count
                    receive(bytes)
                    return true
                }
                if step != .wantMore, step != .completed { return step }
                if step == .completed, SSL_is_init_finished(ssl) == 1 {
                    // The tickets the server wrote at the end.
                    var sink = [UInt8](repeating: 0, count: 256)
                    _ = SSL_read(ssl, &sink, Int32(sink.count))
                    ERR_clear_error()
                    return step
                }
            }
            return step
        }
    }

    /// What the callbacks told, for one input.
    final class Party: TLSSessionParty {
        var decided = 0
        var serverNames: [String?] = []
        var alpnOffered: [[String]] = []
        var errors: [String] = []
        var alertsSent: [UInt8] = []
        var alertsReceived: [UInt8] = []

        func decide(serverName: String?, alpnOffered offered: [String]) -> TLSHandshakeDecision {
            decided += 1
            serverNames.append(serverName)
            alpnOffered.append(offered)
            return TLSAcceptFuzzCheck.context.decide(serverName, offered)
        }

        func noteError(_ message: String) { errors.append(message) }

        func alert(sent: Bool, code: UInt8) {
            if sent { alertsSent.append(code) } else { alertsReceived.append(code) }
        }
    }

    static func violations(in input: [UInt8]) -> [String] {
        guard input.count >= 2 else { return [] }
        let decision = decisions[Int(input[0] & 0x3f) % decisions.count]
        current = decision
        var random = UInt64(input[1]) &+ 0x9E37_79B9_7F4A_7C15
        let stream = input[2...]
        var problems: [String] = []

        let party = Party()
        let session = TLSSession(context: context)
        session.party = party
        defer { session.release() }
        guard session.ssl != nil else { return ["SSL_new failed"] }

        var output = 0
        var plaintext = 0
        var received: [UInt8] = []
        /// The client's close_notify arrived: nothing more is read (the transport tells the connection above).
        var peerClosed = false
        var state = TLSSession.HandshakeStep.wantMore
        let mode = input[0] >> 6
        // A default client meets every decision that refuses nothing it offers.
        var refuses = decision.clientCertificate == .required || decision.certificate != nil
            || decision.minVersion.map { $0 < .tls1_2 } == true
        if let fault = decision.fault, fault.name != "slow-handshake" { refuses = true }
        var client: Client?
        if mode == 1 || mode == 2 {
            let connected = Client()
            client = connected
            state = connected.handshake(with: session, output: &output)
            if state == .wantMore { problems.append("a real client's handshake did not end") }
            if !refuses, state != .completed { problems.append("a real client's handshake ended \(state)") }
        }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        let take = {
            _ = session.takeOutput { bytes in
                output += bytes.count
                return true
            }
        }
        var offset = stream.startIndex
        while offset < stream.endIndex, state == .wantMore || state == .completed, !peerClosed {
            // Pieces of 1 to 512 bytes, mostly small.
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let length = min(stream.endIndex - offset, 1 + Int((random >> 33) % (random >> 62 == 0 ? 512 : 16)))
            stream.withUnsafeBytes { bytes in
                let start = offset - stream.startIndex
                let piece = UnsafeRawBufferPointer(rebasing: bytes[start..<start + length])
                if mode == 2, let client {
                    if SSL_write(client.ssl, piece.baseAddress, Int32(piece.count)) <= 0 {
                        problems.append("the client could not write")
                    }
                    ERR_clear_error()
                    client.send(to: session)
                } else {
                    session.feed(piece)
                }
            }
            offset += length
            if offset == stream.endIndex, mode == 2, let client {
                _ = SSL_shutdown(client.ssl)
                ERR_clear_error()
                client.send(to: session)
            }
            if state == .wantMore {
                state = session.handshake()
                if state == .failed { _ = OpenSSLErrorQueue.drainLine(.reason) }
                take()
            }
            if state == .completed {
                // Everything decrypted so far; a bounded number of reads (each one takes at least a byte).
                var reads = 0
                reading: while reads <= input.count {
                    reads += 1
                    switch buffer.withUnsafeMutableBytes({ session.read(into: $0) }) {
                    case .bytes(let count):
                        plaintext += count
                        if count > buffer.count { problems.append("read \(count) bytes into \(buffer.count)") }
                        received += buffer[0..<min(count, buffer.count)]
                    case .wantMore:
                        break reading
                    case .closed:
                        peerClosed = true
                        break reading
                    case .failed, .released:
                        state = .failed
                        break reading
                    }
                }
                if reads > input.count { problems.append("reads did not stop") }
                take()
            }
        }
        if state == .completed {
            // A response, then close_notify: what the transport does once a request came.
            let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
            // After the client's close_notify, OpenSSL may refuse to write; before it, never.
            if !response.withUnsafeBytes({ session.write($0) }), !peerClosed { problems.append("SSL_write refused") }
            if mode == 2, !stream.isEmpty {
                if !peerClosed { problems.append("the client's close_notify was not read") }
                if received != Array(stream) {
                    problems.append("read back \(received.count) bytes, not the \(stream.count) the client wrote")
                }
            }
            session.shutdown()
            take()
        }

        // Application data from a real client never fails to decrypt.
        if mode == 2, !refuses, state != .completed { problems.append("a real client's data ended \(state)") }
        // The state the transport would end in.
        switch state {
        case .completed:
            if party.decided == 0 { problems.append("a handshake completed without a decision") }
            guard let ssl = session.ssl else { break }
            let version = String(cString: SSL_get_version(ssl))
            let allowed = decision.minVersion.map { $0 < .tls1_2 } == true
                ? ["TLSv1", "TLSv1.1"] : decision.minVersion == .tls1_3 ? ["TLSv1.3"]
                : decision.maxVersion == .tls1_2 ? ["TLSv1.2"] : ["TLSv1.2", "TLSv1.3"]
            if !allowed.contains(version) { problems.append("negotiated \(version) outside \(allowed)") }
            switch decision.fault {
            case .alert?, .hang?, .reset?: problems.append("completed despite the fault \(decision.fault!.name)")
            case .slow?, nil: break
            }
            if decision.certificate == .expired { problems.append("completed with a certificate it cannot serve") }
            if decision.clientCertificate == .required, SSL_get0_peer_certificate(ssl) == nil {
                problems.append("completed without the required client certificate")
            }
        case .held:
            switch decision.fault {
            case .hang?, .reset?: break
            default: problems.append("held without a hang or reset decision")
            }
        case .failed, .wantMore, .released:
            break
        }
        if party.decided > 0 {
            switch decision.fault {
            case .hang?, .reset?:
                if state != .held { problems.append("a \(decision.fault!.name) decision left the handshake \(state)") }
            case .alert(let alert)?:
                if state != .failed { problems.append("an alert decision left the handshake \(state)") }
                if party.alertsSent.first != alert.code {
                    problems.append("alert decision \(alert.code), sent \(party.alertsSent)")
                }
            case .slow?, nil:
                break
            }
            if decision.certificate == .expired, party.errors.isEmpty {
                problems.append("an unservable certificate noted no error")
            }
        }
        // A ClientHello after a HelloRetryRequest asks again; nothing asks a third time.
        if party.decided > 2 { problems.append("decided \(party.decided) times") }
        // The server's flight is a few KB (one certificate); records it answers are bounded by what came in.
        if output > 16_384 + 2 * input.count { problems.append("\(output) bytes out for \(input.count) in") }
        if plaintext > input.count { problems.append("\(plaintext) plaintext bytes from \(input.count) in") }
        if ERR_peek_error() != 0 {
            problems.append("OpenSSL errors left queued: \(OpenSSLErrorQueue.drainLine(.reason))")
        }
        return problems
    }
}
