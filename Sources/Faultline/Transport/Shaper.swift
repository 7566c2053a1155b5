import FaultlineCore

/// Network conditions on one TCP connection, in user space (ARCHITECTURE §3b): a `LinkShape` (latency, bandwidth
/// each way, slicing) and freezes. A `TCPTransport` has one only while conditions apply to it, so an unshaped
/// connection pays one nil check per write and per read.
///
/// Writing: the transport hands every write here; the bytes wait in `outgoing` until their latency has passed,
/// the bandwidth budget allows them and the slice interval is over, and go to the socket only while the kernel
/// takes them (`TCPTransport.sendNow` queued nothing), so `pendingOutput` counts them and the codec above waits
/// for `transportDrained` as for a slow client. Reading: the transport asks `readAllowance` before each `recv`;
/// what comes in waits in `incoming` for the uplink latency. A freeze holds both directions. Loop thread only.
final class Shaper {
    private unowned let transport: TCPTransport
    private let loop: EventLoop
    private(set) var shape: LinkShape?
    private var downlink: ByteBudget?
    private var uplink: ByteBudget?
    /// The last `pump` (read) stopped for the downlink (uplink) budget: the wake-up's lateness is made up for.
    private var downlinkWaited = false
    private var uplinkWaited = false
    /// Frozen until this monotonic nanosecond (`freeze`); `shape.frozen` freezes until the shape changes.
    private var frozenUntilNanos: UInt64 = 0
    private var thawTimer: LoopTimer?

    private struct Chunk {
        var bytes: [UInt8]
        var offset = 0
        var readyAtNanos: UInt64
    }
    private var outgoing: [Chunk] = []
    private var outgoingHead = 0
    private(set) var queuedBytes = 0
    private var writeTimer: LoopTimer?
    private var nextSliceAtNanos: UInt64 = 0
    /// A write was held: the codec waits for `transportDrained`.
    private var owesDrained = false
    /// `shutdownWrite` came while bytes were held: FIN once they are out.
    private var shutdownPending = false

    /// What the client sent, waiting for the uplink latency; nil bytes: its FIN.
    private var incoming: [(bytes: [UInt8]?, readyAtNanos: UInt64)] = []
    private var incomingBytes = 0
    /// Delivers `incoming` when its latency has passed.
    private var readTimer: LoopTimer?
    /// Resumes reading when the uplink budget allows more.
    private var budgetTimer: LoopTimer?
    /// Past this, reading stops until the codec has taken what waits.
    private static let maxIncomingBytes = 256 * 1024

    init(transport: TCPTransport, loop: EventLoop) {
        self.transport = transport
        self.loop = loop
    }

    var isFrozen: Bool { (shape?.frozen ?? false) || frozenUntilNanos > Clock.monotonicNanos() }

    /// Nothing is shaped, frozen or held: the transport can drop this shaper.
    var isIdle: Bool { shape == nil && frozenUntilNanos == 0 && queuedBytes == 0 && incoming.isEmpty && !shutdownPending }

    /// New conditions, from now on; bytes already held go by the new ones.
    func setShape(_ shape: LinkShape?) {
        self.shape = shape
        let now = Clock.monotonicNanos()
        downlink = shape?.downlinkBytesPerSecond.map { ByteBudget(bytesPerSecond: $0, nowNanos: now) }
        uplink = shape?.uplinkBytesPerSecond.map { ByteBudget(bytesPerSecond: $0, nowNanos: now) }
        resume()
    }

    /// No byte either way for `milliseconds` (a Wi-Fi handover). A longer freeze already running wins.
    func freeze(milliseconds: Int) {
        let until = Clock.monotonicNanos() + UInt64(milliseconds) * 1_000_000
        guard until > frozenUntilNanos else { return }
        frozenUntilNanos = until
        writeTimer?.cancel()
        readTimer?.cancel()
        transport.updateReadInterest()
        thawTimer = LoopTimer(loop: loop, milliseconds: milliseconds) { [weak self] in
            guard let self else { return }
            thawTimer = nil
            frozenUntilNanos = 0
            keepingTransport { resume() }
        }
    }

    /// Ends a freeze early (the listener came back up for a stalled connection).
    func thaw() {
        thawTimer?.cancel()
        thawTimer = nil
        frozenUntilNanos = 0
        resume()
    }

    /// After a change or a freeze's end: budgets restart empty (nothing was saved up), held bytes move on.
    private func resume() {
        guard !isFrozen else {
            transport.updateReadInterest()
            return
        }
        let now = Clock.monotonicNanos()
        downlink?.restart(nowNanos: now)
        uplink?.restart(nowNanos: now)
        pump()
        finishIfEmpty()
        deliver()
        guard !transport.isClosed else { return }
        transport.updateReadInterest()
        detachIfIdle()
    }

    // MARK: - Writing

    /// Holds `bytes` until the conditions let them go. Sends at once what they already allow.
    func enqueue(_ bytes: UnsafeRawBufferPointer) {
        let latency = UInt64(shape?.downlinkLatencyMilliseconds ?? 0) * 1_000_000
        outgoing.append(Chunk(bytes: Array(bytes), readyAtNanos: Clock.monotonicNanos() + latency))
        queuedBytes += bytes.count
        pump()
        if queuedBytes > 0 { owesDrained = true }
    }

    func shutdownWriteWhenSent() -> Bool {
        guard queuedBytes > 0 else { return false }
        shutdownPending = true
        return true
    }

    /// The socket took everything handed to it: more may go.
    func socketDrained() {
        pump()
        finishIfEmpty()
    }

    /// Sends what the latency, budget and slicing allow while the kernel takes it; sets a timer for the rest.
    private func pump() {
        writeTimer?.cancel()
        writeTimer = nil
        var waited = downlinkWaited
        downlinkWaited = false
        guard !isFrozen else { return }
        while outgoingHead < outgoing.count, transport.socketPendingOutput == 0 {
            let now = Clock.monotonicNanos()
            var chunk = outgoing[outgoingHead]
            if chunk.readyAtNanos > now { return wake(afterNanos: chunk.readyAtNanos - now) }
            if nextSliceAtNanos > now { return wake(afterNanos: nextSliceAtNanos - now) }
            var count = chunk.bytes.count - chunk.offset
            if let slice = shape?.sliceBytes { count = min(count, slice) }
            if var budget = downlink {
                let available = budget.available(nowNanos: now, waited: waited)
                waited = false
                guard available > 0 else {
                    downlink = budget
                    downlinkWaited = true
                    return wakeMilliseconds(budget.millisecondsUntil(count))
                }
                count = min(count, available)
                budget.spend(count, nowNanos: now)
                downlink = budget
            }
            let sent = chunk.bytes.withUnsafeBytes {
                transport.sendNow(UnsafeRawBufferPointer(rebasing: $0[chunk.offset..<chunk.offset + count]))
            }
            guard sent else {
                // The peer is gone: nothing held is for anybody.
                outgoing = []
                outgoingHead = 0
                queuedBytes = 0
                return
            }
            chunk.offset += count
            queuedBytes -= count
            if let interval = shape?.sliceIntervalMilliseconds, shape?.sliceBytes != nil, interval > 0 {
                nextSliceAtNanos = now + UInt64(interval) * 1_000_000
            }
            if chunk.offset == chunk.bytes.count {
                outgoingHead += 1
                if outgoingHead == outgoing.count {
                    outgoing.removeAll(keepingCapacity: true)
                    outgoingHead = 0
                }
            } else {
                outgoing[outgoingHead] = chunk
            }
        }
    }

    private func wake(afterNanos nanos: UInt64) {
        wakeMilliseconds(max(1, Int((nanos + 999_999) / 1_000_000)))
    }

    private func wakeMilliseconds(_ milliseconds: Int) {
        writeTimer = LoopTimer(loop: loop, milliseconds: milliseconds) { [weak self] in
            guard let self else { return }
            writeTimer = nil
            keepingTransport {
                pump()
                finishIfEmpty()
            }
        }
    }

    /// Everything held is out: the FIN that waited, then `transportDrained` for the codec that waited.
    private func finishIfEmpty() {
        guard queuedBytes == 0, transport.socketPendingOutput == 0 else { return }
        if shutdownPending {
            shutdownPending = false
            transport.shutdownNow()
        }
        if owesDrained {
            owesDrained = false
            transport.delegate?.transportDrained()
        }
        detachIfIdle()
    }

    // MARK: - Reading

    /// How many bytes the next `recv` may take (0: none now; reading stops until the budget or a freeze allows).
    func readAllowance(_ scratch: Int) -> Int {
        guard !isFrozen, incomingBytes < Self.maxIncomingBytes else { return 0 }
        guard var budget = uplink else { return scratch }
        let available = budget.available(nowNanos: Clock.monotonicNanos(), waited: uplinkWaited)
        uplink = budget
        uplinkWaited = available == 0
        if available == 0 {
            budgetTimer?.cancel()
            budgetTimer = LoopTimer(loop: loop, milliseconds: budget.millisecondsUntil(1460)) { [weak self] in
                guard let self else { return }
                budgetTimer = nil
                keepingTransport { transport.updateReadInterest() }
            }
        }
        return min(scratch, available)
    }

    /// Whether the transport should watch the socket for input now.
    var allowsReading: Bool {
        !isFrozen && incomingBytes < Self.maxIncomingBytes && budgetTimer == nil
    }

    /// Bytes (nil: the FIN) the transport read: to the codec now, or after the uplink latency.
    func received(_ bytes: UnsafeRawBufferPointer?) {
        let now = Clock.monotonicNanos()
        if let bytes { uplink?.spend(bytes.count, nowNanos: now) }
        let latency = UInt64(shape?.uplinkLatencyMilliseconds ?? 0) * 1_000_000
        if latency == 0 && incoming.isEmpty && !isFrozen {
            if let bytes { transport.delegate?.transportReceived(bytes) } else { transport.delegate?.transportPeerFinished() }
            return
        }
        incoming.append((bytes.map { Array($0) }, now + latency))
        incomingBytes += bytes?.count ?? 0
        deliver()
    }

    /// Hands the codec what has waited long enough.
    private func deliver() {
        readTimer?.cancel()
        readTimer = nil
        guard !isFrozen else { return }
        while let first = incoming.first {
            let now = Clock.monotonicNanos()
            guard first.readyAtNanos <= now else {
                readTimer = LoopTimer(loop: loop, milliseconds: max(1, Int((first.readyAtNanos - now + 999_999) / 1_000_000))) {
                    [weak self] in
                    guard let self else { return }
                    readTimer = nil
                    keepingTransport {
                        deliver()
                        if !transport.isClosed { transport.updateReadInterest() }
                    }
                }
                return
            }
            incoming.removeFirst()
            incomingBytes -= first.bytes?.count ?? 0
            if let bytes = first.bytes {
                bytes.withUnsafeBytes { transport.delegate?.transportReceived($0) }
            } else {
                transport.delegate?.transportPeerFinished()
            }
            // The codec may have closed the connection.
            if transport.isClosed { return }
        }
    }

    // MARK: - Lifetime

    /// Runs a timer's work with the transport kept alive: the codec it calls may close the connection, and the
    /// server then lets go of the connection and its transport.
    private func keepingTransport(_ work: () -> Void) {
        withExtendedLifetime(transport) { work() }
    }

    private func detachIfIdle() {
        if isIdle, !transport.isClosed { transport.detachShaper() }
    }

    /// The connection is closing: nothing held goes anywhere.
    func close() {
        writeTimer?.cancel()
        readTimer?.cancel()
        budgetTimer?.cancel()
        thawTimer?.cancel()
        writeTimer = nil
        readTimer = nil
        budgetTimer = nil
        thawTimer = nil
        outgoing = []
        incoming = []
        queuedBytes = 0
        incomingBytes = 0
    }
}
