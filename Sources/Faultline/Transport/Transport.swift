import FaultlineCore
import CLibevent

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a transport tells the protocol above it. Loop thread only.
protocol TransportDelegate: AnyObject {
    /// Bytes from the peer, valid only during the call.
    func transportReceived(_ bytes: UnsafeRawBufferPointer)
    /// The peer shut down its sending side (FIN). It may still be reading.
    func transportPeerFinished()
    /// Reading or writing failed (ECONNRESET, EPIPE): the peer is gone.
    func transportFailed()
    /// Everything queued has been handed to the kernel.
    func transportDrained()
}

/// The bytes of one connection (ARCHITECTURE §3): the only layer that touches descriptors, libevent's
/// bufferevents and, for TLS, OpenSSL. The faults that act below HTTP — RST, FIN, half-close, hang, drip,
/// lingering close — are calls on it, so every transport gets them all.
protocol Transport: AnyObject {
    var delegate: TransportDelegate? { get set }
    /// The peer's address as `host:port` (`[v6]:port`).
    var peerAddress: String { get }
    /// Writes what the kernel takes at once and queues the rest. False when the peer is gone.
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// Bytes queued and not yet taken by the kernel.
    var pendingOutput: Int { get }
    /// Bytes the kernel holds from the peer that nobody has read (closing now would send RST).
    var hasUnreadInput: Bool { get }
    /// Whether the peer answered with RST.
    var peerHasReset: Bool { get }
    /// Sends the peer one byte its application never reads (TCP urgent data, which the BSD-semantics stacks
    /// keep out of the stream unless `SO_OOBINLINE` is set): a socket the peer has closed answers RST, one it
    /// only half-closed says nothing.
    func probePeer()
    /// FIN after what is queued; reading goes on.
    func shutdownWrite()
    func setReading(_ enabled: Bool)
    /// Closes now: RST when `abortive`, else FIN. No delegate call follows.
    func close(abortive: Bool)
}

/// Plain TCP. Reading is ours, not a bufferevent's: one `recv` straight into the loop's scratch buffer per
/// readable event (libevent's FIONREAD ioctl, readv into an evbuffer and a copy out of it would be three
/// syscalls). Writing goes straight to the socket while nothing is queued; what the kernel does not take at
/// once is queued on a bufferevent, which keeps the order and reports drain and errors.
final class TCPTransport: Transport {
    /// Strong, not weak: a weak load per event costs more than the send. The cycle with the connection that
    /// owns this transport is broken by `close`, which every connection reaches.
    @exclusivity(unchecked) var delegate: TransportDelegate?
    let peerAddress: String
    private let fd: Int32
    private let loop: EventLoop
    @exclusivity(unchecked) private var readEvent: OpaquePointer?
    @exclusivity(unchecked) private var bufferEvent: OpaquePointer?
    /// Whether the read event is armed now.
    @exclusivity(unchecked) private var reading = true
    /// Whether the codec wants input (`setReading`); a shaper may still hold reading off.
    @exclusivity(unchecked) private var wantsReading = true
    /// Network conditions on this connection (ARCHITECTURE §3b); nil while none apply, the fast path.
    @exclusivity(unchecked) private(set) var shaper: Shaper?
    /// Set once a write had to queue: before that, `pendingOutput` costs no libevent call.
    @exclusivity(unchecked) private var queueing = false
    @exclusivity(unchecked) private var failed = false
    private let scratch: ScratchBuffer

    init(fd: Int32, peerAddress: String, loop: EventLoop, scratch: ScratchBuffer) {
        self.fd = fd
        self.peerAddress = peerAddress
        self.loop = loop
        self.scratch = scratch
        SocketOptions.noDelay(fd)
        SocketOptions.suppressSigpipe(fd)
        // Not BEV_OPT_CLOSE_ON_FREE: libevent frees a bufferevent through a finalizer the loop runs later, so the
        // descriptor would stay open after `close` — for good, when the loop has just stopped (an in-process
        // server's connections kept their sockets, and a client's pooled connection hung). `close` closes it.
        bufferEvent = bufferevent_socket_new(loop.base, fd, 0)
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bufferEvent, nil, { _, context in
            let transport = TCPTransport.recover(context)
            if let shaper = transport.shaper { shaper.socketDrained() } else { transport.delegate?.transportDrained() }
        }, { _, events, context in
            let transport = TCPTransport.recover(context)
            if events & Int16(BEV_EVENT_ERROR) != 0 || events & Int16(BEV_EVENT_EOF) != 0 {
                transport.failed = true
                transport.delegate?.transportFailed()
            }
        }, context)
        readEvent = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), { _, _, context in
            TCPTransport.recover(context).readable()
        }, context)
        event_add(readEvent, nil)
    }

    /// The transport behind a libevent callback's context. Its connection keeps it alive until `close`, which
    /// frees the events first, so no callback can outlive it.
    private static func recover(_ context: UnsafeMutableRawPointer?) -> TCPTransport {
        Unmanaged<TCPTransport>.fromOpaque(context!).takeUnretainedValue()
    }

    private func readable() {
        if let shaper { return shapedReadable(shaper) }
        guard let count = receive(limit: Int.max) else { return }
        if count == 0 {
            delegate?.transportPeerFinished()
            return
        }
        scratch.withBytes { buffer in
            delegate?.transportReceived(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
    }

    /// `readable` under network conditions: at most what the uplink budget allows, handed to the shaper.
    private func shapedReadable(_ shaper: Shaper) {
        let allowance = scratch.withBytes { shaper.readAllowance($0.count) }
        guard allowance > 0 else { return updateReadInterest() }
        guard let count = receive(limit: allowance) else { return }
        if count == 0 { return shaper.received(nil) }
        scratch.withBytes { buffer in shaper.received(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) }
        if !isClosed { updateReadInterest() }
    }

    /// One `recv` of at most `limit` bytes into the scratch buffer: the count (0: the peer's FIN; reading stops), or
    /// nil when there was nothing after all or the peer failed (reported to the delegate: ECONNRESET and friends stop
    /// reading, as a bufferevent would).
    @inline(__always)
    private func receive(limit: Int) -> Int? {
        let result: IOResult<Int>
        do {
            result = try syscall("recv") { scratch.withBytes { recv(fd, $0.baseAddress, min(limit, $0.count), 0) } }
        } catch {
            stopReading()
            failed = true
            delegate?.transportFailed()
            return nil
        }
        guard case .processed(let count) = result else { return nil }
        if count == 0 { stopReading() }
        return count
    }

    private func stopReading() {
        if let readEvent { event_del(readEvent) }
        reading = false
        wantsReading = false
    }

    /// Arms or disarms the read event: the codec's wish, unless the shaper holds reading off.
    func updateReadInterest() {
        guard let readEvent else { return }
        let armed = wantsReading && (shaper?.allowsReading ?? true)
        guard armed != reading else { return }
        if armed { event_add(readEvent, nil) } else { event_del(readEvent) }
        reading = armed
    }

    var isClosed: Bool { bufferEvent == nil && readEvent == nil }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if let shaper {
            guard bufferEvent != nil, !failed else { return false }
            if !bytes.isEmpty { shaper.enqueue(bytes) }
            return true
        }
        return sendNow(bytes)
    }

    /// Writes to the socket now, queueing on the bufferevent what the kernel does not take.
    func sendNow(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let bufferEvent, !failed else { return false }
        guard !bytes.isEmpty else { return true }
        var sent = 0
        if pendingOutput == 0 {
            do {
                if case .processed(let count) = try syscall("send", {
                    send(fd, bytes.baseAddress, bytes.count, SocketOptions.noSignalFlag | Int32(MSG_DONTWAIT))
                }) {
                    sent = count
                }
            } catch {
                // EPIPE, ECONNRESET: the peer is gone; nothing is queued for nobody.
                failed = true
                return false
            }
        }
        if sent < bytes.count {
            // Through the bufferevent only from here on: enabling EV_WRITE earlier would cost two epoll changes
            // per connection (armed at once, disarmed on the first empty write callback).
            if !queueing {
                bufferevent_enable(bufferEvent, Int16(EV_WRITE))
                queueing = true
            }
            _ = bufferevent_write(bufferEvent, bytes.baseAddress! + sent, bytes.count - sent)
        }
        return true
    }

    var pendingOutput: Int {
        guard let shaper else { return socketPendingOutput }
        return socketPendingOutput + shaper.queuedBytes
    }

    /// Bytes the bufferevent holds because the kernel did not take them.
    var socketPendingOutput: Int {
        guard queueing, let bufferEvent else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bufferEvent))
    }

    var hasUnreadInput: Bool { SocketOptions.hasUnreadInput(fd) }

    var peerHasReset: Bool { SocketOptions.peerHasReset(fd) }

    func probePeer() {
        var byte: UInt8 = 0
        _ = try? syscall("send") { send(fd, &byte, 1, SocketOptions.noSignalFlag | Int32(MSG_OOB | MSG_DONTWAIT)) }
    }

    func shutdownWrite() {
        if let shaper, shaper.shutdownWriteWhenSent() { return }
        shutdownNow()
    }

    func shutdownNow() {
        _ = try? syscall("shutdown", blocking: true) { shutdown(fd, Int32(SHUT_WR)) }
    }

    func setReading(_ enabled: Bool) {
        if shaper == nil {
            guard let readEvent, enabled != reading else { return }
            if enabled { event_add(readEvent, nil) } else { event_del(readEvent) }
            reading = enabled
            wantsReading = enabled
            return
        }
        wantsReading = enabled
        updateReadInterest()
    }

    // MARK: - Network conditions

    /// Shapes this connection from now on (nil: no more shaping; what is held still goes).
    func applyShape(_ shape: LinkShape?) {
        guard !isClosed else { return }
        if shape == nil, shaper == nil { return }
        ensureShaper().setShape(shape)
    }

    /// No byte either way for `milliseconds`.
    func freeze(milliseconds: Int) {
        guard !isClosed else { return }
        ensureShaper().freeze(milliseconds: milliseconds)
    }

    /// Ends a freeze now.
    func thaw() { shaper?.thaw() }

    private func ensureShaper() -> Shaper {
        if let shaper { return shaper }
        let created = Shaper(transport: self, loop: loop)
        shaper = created
        return created
    }

    /// The shaper has nothing more to do: back to the fast path.
    func detachShaper() {
        shaper = nil
        updateReadInterest()
    }

    func close(abortive: Bool) {
        if abortive { SocketOptions.abortOnClose(fd) }
        guard bufferEvent != nil || readEvent != nil else { return }
        shaper?.close()
        shaper = nil
        if let readEvent { event_free(readEvent) }
        readEvent = nil
        // bufferevent_free deletes its events now (its memory goes in a finalizer later), so the descriptor can
        // close now: FIN (or RST) at once, whether or not the loop turns again.
        if let bufferEvent { bufferevent_free(bufferEvent) }
        bufferEvent = nil
        Posix.close(fd)
        delegate = nil
    }
}

/// Where transports copy bytes out of the kernel before parsing: one per loop, reused by every read.
final class ScratchBuffer {
    @exclusivity(unchecked) private var bytes = [UInt8](repeating: 0, count: 64 * 1024)

    func withBytes<T>(_ body: (UnsafeMutableRawBufferPointer) -> T) -> T {
        bytes.withUnsafeMutableBytes(body)
    }
}
