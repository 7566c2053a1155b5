import COpenSSL
import FaultlineTLS
import FaultlineCore

/// TLS over a `TCPTransport` (ARCHITECTURE §3a). OpenSSL never sees the socket: it reads the client's bytes
/// from one memory BIO and writes its own into another, and this class moves bytes between those BIOs and the
/// TCP transport. So the faults that act below TLS — RST, FIN without close_notify, a hang, a handshake sent a
/// few bytes at a time — are the TCP transport's own calls, and `make fuzz` drives the same accept path
/// through memory BIOs alone.
///
/// The handshake is decided in OpenSSL's ClientHello callback (`TLSServerContext`): `decide` gets the
/// ClientHello's server name and ALPN list and answers with a `TLSHandshakeDecision` — the certificate, a
/// version range, client certificates, or a fault. The HTTP connection above sees nothing until the handshake
/// completes; a connection whose handshake fails, or that closes before a request, is reported through
/// `onHandshakeOnly` so the journal still has an entry for it. Loop thread only.
final class TLSTransport: Transport, TransportDelegate, TLSSessionParty {
    /// The protocol above (the HTTP/1.1 connection); told nothing before the handshake completes.
    @exclusivity(unchecked) var delegate: TransportDelegate?
    var peerAddress: String { tcp.peerAddress }
    /// What the journal keeps of this connection's TLS; final once the handshake ends.
    @exclusivity(unchecked) private(set) var summary = TLSSummary()
    /// How the handshake was decided; nil until the ClientHello arrived.
    @exclusivity(unchecked) private(set) var decision: TLSHandshakeDecision?
    var alpn: [String]? { decision?.alpn }

    /// Told once when the handshake completes (the connection above starts reading), or when the connection
    /// ends before it did.
    @exclusivity(unchecked) var onHandshakeEnd: ((TLSTransport) -> Void)?

    private let tcp: TCPTransport
    /// The listener's context: its ClientHello callback finds it here.
    let context: TLSServerContext
    /// The first byte the client sent: a TLS handshake record starts with 22.
    @exclusivity(unchecked) private var firstByte: UInt8?
    private let loop: EventLoop
    private let plaintext: ScratchBuffer
    /// OpenSSL's side: the SSL object and its two memory BIOs.
    private let session: TLSSession
    private var ssl: OpaquePointer? { session.ssl }
    @exclusivity(unchecked) private var phase = Phase.handshaking
    /// The protocol above asked to stop reading (a response in progress): decrypted bytes wait in OpenSSL.
    @exclusivity(unchecked) private var readingWanted = true
    /// Inside `pump`: a close from a delegate call frees OpenSSL's objects only once the pump is out.
    @exclusivity(unchecked) private var pumping = false
    @exclusivity(unchecked) private var closeRequested = false
    @exclusivity(unchecked) private var closeNotifySent = false
    @exclusivity(unchecked) private var resumeTimer: LoopTimer?
    @exclusivity(unchecked) private var handshakeTimer: LoopTimer?
    /// A slow handshake: the server's flight, sent `drip.size` bytes per tick.
    @exclusivity(unchecked) private var dripQueue: [UInt8] = []
    @exclusivity(unchecked) private var dripTimer: LoopTimer?
    private let acceptedAtNanos = Clock.monotonicNanos()
    private let handshakeTimeoutMilliseconds: Int

    private enum Phase: Equatable {
        case handshaking
        /// The ClientHello callback held the handshake (`hang`, `handshake-reset`): nothing more is answered.
        case held
        case established
        /// The handshake ended with our alert: FIN sent after it, the client's bytes read and dropped until it
        /// closes (or `lingerMilliseconds`), so that closing with unread input does not turn into an RST that
        /// destroys the alert before the client reads it (TLS 1.3 clients send their request right after their
        /// Finished, before the server's verdict on their certificate arrives).
        case lingering
        case closed
    }

    init(
        tcp: TCPTransport, context: TLSServerContext, loop: EventLoop, plaintext: ScratchBuffer,
        handshakeTimeoutMilliseconds: Int
    ) {
        self.tcp = tcp
        self.context = context
        self.loop = loop
        self.plaintext = plaintext
        self.handshakeTimeoutMilliseconds = handshakeTimeoutMilliseconds
        session = TLSSession(context: context)
        session.party = self
        tcp.delegate = self
        handshakeTimer = LoopTimer(loop: loop, milliseconds: handshakeTimeoutMilliseconds) { [unowned self] in
            handshakeTimer = nil
            handshakeTimedOut()
        }
    }

    // MARK: - From OpenSSL's callbacks (TLSServerContext)

    /// The ClientHello arrived: the engine decides the handshake.
    func decide(serverName: String?, alpnOffered: [String]) -> TLSHandshakeDecision {
        summary.serverName = serverName
        summary.alpnOffered = alpnOffered
        let decision = context.decide(serverName, alpnOffered)
        self.decision = decision
        summary.fault = decision.fault?.name
        summary.scenario = decision.scenario
        summary.step = decision.step
        summary.certificate = decision.certificate?.rawValue ?? context.defaultCertificateName
        switch decision.fault {
        case .hang?, .slow?:
            // Never answered, or as slowly as the scenario asked: only the client's patience ends it.
            handshakeTimer?.cancel()
            handshakeTimer = nil
        case .alert?, .reset?, nil:
            break
        }
        return decision
    }

    /// Something OpenSSL or the catalogue refused while deciding (the journal's `tls.error`).
    func noteError(_ message: String) { summary.error = message }

    func alert(sent: Bool, code: UInt8) {
        let name = TLSAlertNames.name(code)
        // close_notify is the end of a connection, not of a handshake.
        guard code != 0 else { return }
        if sent { summary.alertSent = summary.alertSent ?? name } else { summary.alertReceived = summary.alertReceived ?? name }
    }

    // MARK: - TransportDelegate (from TCP)

    func transportReceived(_ bytes: UnsafeRawBufferPointer) {
        guard phase != .closed, ssl != nil else { return }
        if phase == .held || phase == .lingering {
            // A hang reads and forgets: the client's retransmissions and alerts change nothing.
            return
        }
        if firstByte == nil, let byte = bytes.first { firstByte = byte }
        session.feed(bytes)
        pump()
    }

    func transportPeerFinished() {
        switch phase {
        case .established: delegate?.transportPeerFinished()
        case .handshaking, .held: endHandshake(phase == .held ? .hangReleased : .clientClosed, close: true)
        case .lingering: finishLinger()
        case .closed: break
        }
    }

    func transportFailed() {
        switch phase {
        case .established: delegate?.transportFailed()
        case .handshaking, .held: endHandshake(phase == .held ? .hangReleased : .clientClosed, close: true)
        case .lingering: finishLinger()
        case .closed: break
        }
    }

    func transportDrained() {
        if phase == .established { delegate?.transportDrained() }
    }

    // MARK: - The pump

    /// Runs OpenSSL over what arrived: the handshake first, then records to plaintext for the protocol above.
    private func pump() {
        guard !pumping else { return }
        pumping = true
        defer {
            pumping = false
            if closeRequested { release() }
        }
        if phase == .handshaking {
            switch session.handshake() {
            case .completed:
                flushOutput()
                handshakeCompleted()
            case .wantMore:
                flushOutput()
                return
            case .held:
                heldByDecision()
                return
            case .failed:
                handshakeFailed()
                return
            case .released:
                return
            }
        }
        guard phase == .established else { return }
        readPlaintext()
    }

    /// Decrypts what OpenSSL holds and hands it up, while the protocol above wants to read.
    private func readPlaintext() {
        while phase == .established, readingWanted, !closeRequested {
            switch plaintext.withBytes({ session.read(into: $0) }) {
            case .bytes(let count):
                plaintext.withBytes { buffer in
                    delegate?.transportReceived(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                }
                continue
            case .wantMore:
                // A TLS 1.3 key update or ticket may have produced bytes to send.
                flushOutput()
                return
            case .closed:
                // close_notify: the client will send no more.
                flushOutput()
                tcp.setReading(false)
                delegate?.transportPeerFinished()
                return
            case .failed:
                tcp.setReading(false)
                delegate?.transportFailed()
                return
            case .released:
                return
            }
        }
    }

    /// Moves what OpenSSL wrote into its output BIO to the TCP transport (or the drip queue).
    @discardableResult
    private func flushOutput() -> Bool {
        var drip = false
        let written = session.takeOutput { bytes in
            if phase == .handshaking, case .slow = decision?.fault {
                dripQueue.append(contentsOf: bytes)
                drip = true
                return true
            }
            if !dripQueue.isEmpty {
                // The handshake ended with bytes still queued (TLS 1.3's session tickets, written as the client's
                // Finished is read): they go first, at once, or the records after them arrive out of order and
                // the client fails with bad record mac.
                dripTimer?.cancel()
                dripTimer = nil
                let queued = dripQueue
                dripQueue.removeAll()
                guard queued.withUnsafeBytes({ tcp.write($0) }) else { return false }
            }
            return tcp.write(bytes)
        }
        if drip { startDrip() }
        return written
    }

    private func startDrip() {
        guard dripTimer == nil, case .slow(let drip)? = decision?.fault else { return }
        dripTimer = LoopTimer(loop: loop, milliseconds: 0) { [unowned self] in
            dripTimer = nil
            guard phase != .closed, !dripQueue.isEmpty else { return }
            let count = min(drip.size, dripQueue.count)
            _ = dripQueue.withUnsafeBytes { tcp.write(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            dripQueue.removeFirst(count)
            if !dripQueue.isEmpty {
                dripTimer = LoopTimer(loop: loop, milliseconds: drip.intervalMilliseconds) { [unowned self] in
                    dripTimer = nil
                    startDrip()
                }
            }
        }
    }

    // MARK: - Handshake endings

    private func handshakeCompleted() {
        guard let ssl else { return }
        handshakeTimer?.cancel()
        handshakeTimer = nil
        phase = .established
        summary.handshake = .completed
        // TLSVersion's journal name (OpenSSL says `TLSv1` for 1.0).
        let negotiated = SSL_version(ssl)
        summary.version = TLSVersion.allCases.first { $0.openSSL == negotiated }?.journalName
            ?? String(cString: SSL_get_version(ssl))
        if let cipher = SSL_get_current_cipher(ssl) { summary.cipher = String(cString: SSL_CIPHER_get_name(cipher)) }
        var alpn: UnsafePointer<UInt8>?
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpn, &alpnLength)
        if let alpn, alpnLength > 0 {
            summary.alpn = String(decoding: UnsafeBufferPointer(start: alpn, count: Int(alpnLength)), as: UTF8.self)
        }
        if let peer = SSL_get0_peer_certificate(ssl) { summary.clientCertificate = TLSServerContext.subject(of: peer) }
        summary.resumed = SSL_session_reused(ssl) == 1
        summary.handshakeMilliseconds = elapsedMilliseconds()
        if decision?.closeNotify == false { closeNotifySent = true }
        let told = onHandshakeEnd
        onHandshakeEnd = nil
        told?(self)
    }

    /// The ClientHello callback held the handshake: a hang waits for the client, a reset answers RST.
    private func heldByDecision() {
        phase = .held
        if case .reset = decision?.fault {
            endHandshake(.resetSent, close: true, abortive: true)
        }
    }

    private func handshakeFailed() {
        let reason = OpenSSLErrorQueue.drainLine(.reason)
        if summary.error == nil { summary.error = reason }
        flushOutput()
        let end: TLSHandshakeEnd
        if summary.alertReceived != nil {
            end = .clientAlert
        } else if firstByte != 22 {
            end = .notTLS
            answerPlainHTTP(reason)
        } else if summary.alertSent != nil {
            endHandshake(.alertSent, close: false)
            beginLinger()
            return
        } else if reason.contains("unexpected eof") {
            end = .clientClosed
        } else {
            end = .failed
        }
        endHandshake(end, close: true)
    }

    /// Plain HTTP on the TLS port: answered in plain HTTP, as nginx does, so a human with curl sees why.
    private func answerPlainHTTP(_ reason: String) {
        guard reason == "http request" else { return }
        let body = "faultline: this port speaks TLS; use https://\n"
        let response = "HTTP/1.1 400 Bad Request\r\nDate: \(HTTPDate.format(unixSeconds: Clock.wallSeconds()))\r\n"
            + "Content-Type: text/plain; charset=utf-8\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        var bytes = Array(response.utf8)
        _ = bytes.withUnsafeMutableBytes { tcp.write(UnsafeRawBufferPointer($0)) }
    }

    /// How long a connection whose handshake we refused with an alert goes on reading before it closes anyway.
    static let lingerMilliseconds = 500
    @exclusivity(unchecked) private var lingerTimer: LoopTimer?

    private func beginLinger() {
        guard phase == .handshaking || phase == .held else { return }
        phase = .lingering
        tcp.shutdownWrite()
        lingerTimer = LoopTimer(loop: loop, milliseconds: Self.lingerMilliseconds) { [unowned self] in
            lingerTimer = nil
            finishLinger()
        }
    }

    /// The client closed after our alert, or the linger ran out: the connection above hears that it failed.
    private func finishLinger() {
        guard phase == .lingering else { return }
        let above = delegate
        close(abortive: false)
        above?.transportFailed()
    }

    private func handshakeTimedOut() {
        guard phase == .handshaking || phase == .held else { return }
        endHandshake(.timedOut, close: true)
    }

    /// The handshake ended without completing: the journal hears of it (`onHandshakeEnd`), the TCP connection
    /// closes (RST when `abortive`), and the connection above, which never saw a byte, tears down.
    private func endHandshake(_ end: TLSHandshakeEnd, close: Bool, abortive: Bool = false) {
        guard phase != .closed, phase != .established else { return }
        summary.handshake = end
        summary.handshakeMilliseconds = elapsedMilliseconds()
        // No close_notify: there is no session to close.
        closeNotifySent = true
        let told = onHandshakeEnd
        onHandshakeEnd = nil
        told?(self)
        guard close else { return }
        let above = delegate
        self.close(abortive: abortive)
        above?.transportFailed()
    }

    private func elapsedMilliseconds() -> Double {
        Double(Clock.monotonicNanos() &- acceptedAtNanos) / 1_000_000
    }

    // MARK: - Transport (from the protocol above)

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard phase == .established, ssl != nil, !closeRequested else { return false }
        guard !bytes.isEmpty else { return true }
        // A memory BIO never pushes back: SSL_write takes everything at once.
        guard session.write(bytes) else { return false }
        return flushOutput()
    }

    var pendingOutput: Int { tcp.pendingOutput + dripQueue.count }

    var hasUnreadInput: Bool {
        session.hasPendingInput || tcp.hasUnreadInput
    }

    var peerHasReset: Bool { tcp.peerHasReset }

    func probePeer() { tcp.probePeer() }

    /// close_notify, then FIN; reading goes on (RFC 8446 §6.1 lets either side close its half).
    func shutdownWrite() {
        sendCloseNotify()
        tcp.shutdownWrite()
    }

    /// The next close skips close_notify: the client sees TCP's FIN alone (the `no-close-notify` fault).
    func omitCloseNotify() { closeNotifySent = true }

    func setReading(_ enabled: Bool) {
        guard enabled != readingWanted else { return }
        readingWanted = enabled
        tcp.setReading(enabled)
        // Records OpenSSL already decrypted (or holds whole) raise no socket event: read them on the next turn.
        if enabled, phase == .established, resumeTimer == nil {
            resumeTimer = LoopTimer(loop: loop, milliseconds: 0) { [unowned self] in
                resumeTimer = nil
                guard phase == .established, readingWanted else { return }
                pump()
            }
        }
    }

    func close(abortive: Bool) {
        guard phase != .closed else { return }
        if phase != .established, let told = onHandshakeEnd {
            // The protocol above closes before the handshake ended: a server stop or a scenario reset.
            onHandshakeEnd = nil
            summary.handshake = .clientClosed
            summary.handshakeMilliseconds = elapsedMilliseconds()
            closeNotifySent = true
            told(self)
        }
        if !abortive { sendCloseNotify() }
        phase = .closed
        resumeTimer?.cancel()
        resumeTimer = nil
        handshakeTimer?.cancel()
        handshakeTimer = nil
        lingerTimer?.cancel()
        lingerTimer = nil
        dripTimer?.cancel()
        dripTimer = nil
        tcp.close(abortive: abortive)
        delegate = nil
        closeRequested = true
        if !pumping { release() }
    }

    private func sendCloseNotify() {
        guard !closeNotifySent, phase == .established, ssl != nil else { return }
        closeNotifySent = true
        session.shutdown()
        flushOutput()
    }

    /// Frees OpenSSL's objects (the BIOs go with the SSL).
    private func release() {
        guard ssl != nil else { return }
        session.release()
        onHandshakeEnd = nil
    }
}
