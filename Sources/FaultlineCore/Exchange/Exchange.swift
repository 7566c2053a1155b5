/// One request and its response, from the moment the request is complete until the response ends: a
/// request on an HTTP/1.1 connection, a stream on an HTTP/2 one (ARCHITECTURE §4). The Dispatcher creates it;
/// the codec pulls its script's steps one at a time and says how it ended.
///
/// Loop thread only.
package final class Exchange {
    /// Journal sequence number; nil for admin calls, which are not journaled.
    package let sequence: Int?
    /// The request asked for the connection to close after its response (`Connection: close`, HTTP/1.0).
    package let clientWantsClose: Bool
    /// False until the script is known: an admin long-poll answers later (`respond`).
    @exclusivity(unchecked) package private(set) var hasScript = false
    /// The script's steps and the facts the codec needs about it, kept as fields so that reading one does not
    /// copy the whole script.
    @exclusivity(unchecked) private var steps: [ScriptStep] = []
    @exclusivity(unchecked) private var cursor = 0
    /// Whether the connection stays open after this response (`ResponseScript.keepAlive`).
    @exclusivity(unchecked) package private(set) var keepAlive = true
    @exclusivity(unchecked) package private(set) var idleCloseMilliseconds: Int?
    @exclusivity(unchecked) package private(set) var policyClose: PolicyClose?
    /// The script is a fault's: the journal's outcome of a close is `closed-by-fault`, not `completed`.
    @exclusivity(unchecked) package private(set) var isFault = false
    @exclusivity(unchecked) package var bytesWritten = 0
    /// Run once the response has been handed to the kernel (e.g. stop the server after `POST /shutdown`).
    @exclusivity(unchecked) package var afterCompletion: (() -> Void)?
    /// What the engine wants to hear when this exchange ends, whatever its outcome.
    @exclusivity(unchecked) package var engineCompletion: ExchangeCompletion?
    @exclusivity(unchecked) package private(set) var ended = false
    /// The codec, waiting for a script that was not there when it pulled (`Pull.notYet`).
    @exclusivity(unchecked) package var whenScriptArrives: (() -> Void)?

    package init(sequence: Int?, script: ResponseScript?, clientWantsClose: Bool = false) {
        self.sequence = sequence
        self.clientWantsClose = clientWantsClose
        if let script { take(script) }
    }

    private func take(_ script: ResponseScript) {
        hasScript = true
        steps = script.steps
        keepAlive = script.keepAlive
        idleCloseMilliseconds = script.idleCloseMilliseconds
        policyClose = script.policyClose
        isFault = script.fault != nil
    }

    /// Gives a deferred exchange its script (an admin long-poll's answer, an upstream's) and wakes the codec if it
    /// waits. `growing`: more steps follow (`append`, then `finish`), as a proxied body arrives from its upstream.
    package func respond(_ script: ResponseScript, growing: Bool = false) {
        guard !hasScript else { return }
        take(script)
        isGrowing = growing
        if growing { for step in steps { if case .body(let bytes) = step { unpulledBytes += bytes.count } } }
        wake()
    }

    // MARK: - A growing script (ARCHITECTURE §4d: a proxied body streamed as it arrives)

    /// More steps may follow the ones there: the codec pulls `.notYet` at their end and is woken by `append`.
    /// A codec that sees it paces its pulls by its own output queue, so that a fast producer and a slow client
    /// leave the bytes here, where `unpulledBytes` tells the producer to slow down.
    @exclusivity(unchecked) package private(set) var isGrowing = false
    /// Body bytes appended and not yet pulled by the codec: the producer's backpressure.
    @exclusivity(unchecked) package private(set) var unpulledBytes = 0
    /// Run (once) when a pull leaves `unpulledBytes` at or under `roomMark`: the producer may go on.
    @exclusivity(unchecked) package var whenRoom: (() -> Void)?
    @exclusivity(unchecked) package var roomMark = 0
    /// Run (once) when the exchange ends, however: a producer stops producing for a client that is gone.
    @exclusivity(unchecked) package var whenEnded: (() -> Void)?

    /// Adds steps to a growing script and wakes the codec if it waits for them.
    package func append(_ more: [ScriptStep]) {
        guard isGrowing, !ended else { return }
        add(more)
        wake()
    }

    /// The script is complete with `last` (`.end`, an abort): the codec pulls `.finished` after them.
    package func finish(_ last: [ScriptStep]) {
        guard isGrowing else { return }
        if !ended { add(last) }
        isGrowing = false
        wake()
    }

    private func add(_ more: [ScriptStep]) {
        if cursor == steps.count {
            // Everything before was pulled: the array is reused rather than kept growing for a long body.
            steps.removeAll(keepingCapacity: true)
            cursor = 0
        }
        for step in more {
            if case .body(let bytes) = step { unpulledBytes += bytes.count }
            steps.append(step)
        }
    }

    private func wake() {
        let wake = whenScriptArrives
        whenScriptArrives = nil
        wake?()
    }

    /// What `next()` gives the codec.
    package enum Pull: Equatable {
        case step(ScriptStep)
        /// No script yet; `whenScriptArrives` runs when one comes.
        case notYet
        /// Every step has been pulled.
        case finished
    }

    /// The next step of the script. The codec pulls a step only when the previous one has been carried out.
    package func next() -> Pull {
        guard cursor < steps.count else { return hasScript && !isGrowing ? .finished : .notYet }
        let step = steps[cursor]
        cursor += 1
        if case .body(let bytes) = step, unpulledBytes > 0 {
            unpulledBytes -= bytes.count
            if unpulledBytes <= roomMark, let room = whenRoom {
                whenRoom = nil
                room()
            }
        }
        return .step(step)
    }

    /// Marks the exchange ended, once; true the first time.
    package func end() -> Bool {
        guard !ended else { return false }
        ended = true
        whenRoom = nil
        if let producer = whenEnded {
            whenEnded = nil
            producer()
        }
        return true
    }
}

/// Where rendered bytes go: an array (tests, tools) or a connection's reusable `OutputBuffer`.
package protocol ByteSink: ~Copyable {
    mutating func append(bytes: [UInt8])
    mutating func append(raw: UnsafeRawBufferPointer)
}

extension Array: ByteSink where Element == UInt8 {
    package mutating func append(bytes: [UInt8]) { append(contentsOf: bytes) }
    package mutating func append(raw: UnsafeRawBufferPointer) { append(contentsOf: raw) }
}

/// A growable byte buffer that is emptied by resetting a count: no reference counting and no per-use
/// allocation, for the bytes a connection renders between two writes. Not copyable: one owner frees it.
package struct OutputBuffer: ByteSink, ~Copyable {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    package private(set) var count = 0

    package init(capacity: Int = 4096) {
        self.capacity = max(capacity, 64)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    package var isEmpty: Bool { count == 0 }

    package mutating func append(bytes: [UInt8]) {
        bytes.withUnsafeBytes { append(raw: $0) }
    }

    package mutating func append(raw source: UnsafeRawBufferPointer) {
        let needed = count + source.count
        if needed > capacity {
            var grown = capacity * 2
            while grown < needed { grown *= 2 }
            let bigger = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 16)
            bigger.copyMemory(from: base, byteCount: count)
            base.deallocate()
            base = bigger
            capacity = grown
        }
        if let from = source.baseAddress { (base + count).copyMemory(from: from, byteCount: source.count) }
        count = needed
    }

    /// The bytes appended since the last `reset`.
    package func withBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        body(UnsafeRawBufferPointer(start: base, count: count))
    }

    package mutating func reset() { count = 0 }
}

/// Renders script steps as HTTP/1.1 bytes: the writing half of the HTTP/1.1 codec. Keeps the one fact a
/// response's framing needs across steps: whether its head declared chunked.
package struct HTTP1Renderer: Sendable {
    private var chunked = false

    package init() {}

    /// Whether the head rendered last declared chunked framing: body bytes written past the renderer (a
    /// `stream` step's pieces) must be chunks too.
    package var isChunked: Bool { chunked }

    private static let crlf: [UInt8] = [13, 10]
    private static let lastChunk = Array("0\r\n\r\n".utf8)

    /// Appends the bytes `step` puts on the wire to `out`. Steps that are not bytes (waits, aborts, hang)
    /// append nothing; the connection carries them out. `date` gives the `Date` field line (`Date: …` CRLF) for a
    /// head that adds one (`ResponseHead.addsDate`), asked only then.
    package mutating func render<Sink: ByteSink & ~Copyable>(
        _ step: ScriptStep, into out: inout Sink, date: () -> [UInt8]
    ) {
        switch step {
        case .head(let head):
            render(head: head, dateLine: head.addsDate ? date() : [], into: &out)
        case .body(let bytes):
            guard chunked else {
                out.append(bytes: bytes)
                return
            }
            guard !bytes.isEmpty else { return }  // a zero-size chunk would end the body
            out.append(bytes: Array(String(bytes.count, radix: 16).utf8))
            out.append(bytes: Self.crlf)
            out.append(bytes: bytes)
            out.append(bytes: Self.crlf)
        case .stream(let slice):
            render(.body(slice.source.bytes(slice.range)), into: &out, date: date)
        case .end:
            if chunked { out.append(bytes: Self.lastChunk) }
            chunked = false
        case .raw(let bytes):
            out.append(bytes: bytes)
        case .wait, .abortExchange, .abortConnection, .endConnection, .hang, .http2, .upgrade:
            break
        }
    }

    /// Appends a head: its HTTP/1.1 bytes as they were built (for a plain step, once, at load), with `dateLine` —
    /// the `Date` field line, when the head adds one — right after the status line. The shared bytes are written
    /// around the date, not rebuilt with it.
    package mutating func render<Sink: ByteSink & ~Copyable>(
        head: ResponseHead, dateLine: [UInt8], into out: inout Sink
    ) {
        chunked = head.chunked
        guard head.addsDate, !dateLine.isEmpty else {
            out.append(bytes: head.http1)
            return
        }
        let split = head.statusLineLength
        head.http1.withUnsafeBytes { http1 in
            out.append(raw: UnsafeRawBufferPointer(rebasing: http1[..<split]))
            out.append(bytes: dateLine)
            out.append(raw: UnsafeRawBufferPointer(rebasing: http1[split...]))
        }
    }

    /// Every byte a script puts on an HTTP/1.1 wire, waits ignored: for tests and for reading a script. `dateLine`
    /// is the `Date` field line its heads get (`HTTPDateCache.line(atWall:)`); none by default, so a test reads the
    /// bytes the script itself decides.
    package static func bytes(_ script: ResponseScript, dateLine: [UInt8] = []) -> [UInt8] {
        var renderer = HTTP1Renderer()
        var out: [UInt8] = []
        for step in script.steps { renderer.render(step, into: &out, date: { dateLine }) }
        return out
    }
}
