/// One request and its response, from the moment the request is complete until the response ends: a
/// request on an HTTP/1.1 connection, a stream on an HTTP/2 one (ARCHITECTURE §4). The Dispatcher creates it;
/// the codec pulls its script's steps one at a time and says how it ended.
///
/// Loop thread only.
public final class Exchange {
    /// Journal sequence number; nil for admin calls, which are not journaled.
    public let sequence: Int?
    /// The request asked for the connection to close after its response (`Connection: close`, HTTP/1.0).
    public let clientWantsClose: Bool
    /// Nil until known: an admin long-poll answers later (`respond`).
    @exclusivity(unchecked) public private(set) var script: ResponseScript?
    @exclusivity(unchecked) private var cursor = 0
    @exclusivity(unchecked) public var bytesWritten = 0
    /// Run once the response has been handed to the kernel (e.g. stop the server after `POST /shutdown`).
    @exclusivity(unchecked) public var afterCompletion: (() -> Void)?
    /// What the engine wants to hear when this exchange ends, whatever its outcome.
    @exclusivity(unchecked) public var engineCompletion: ExchangeCompletion?
    @exclusivity(unchecked) public private(set) var ended = false
    /// The codec, waiting for a script that was not there when it pulled (`Pull.notYet`).
    @exclusivity(unchecked) var whenScriptArrives: (() -> Void)?

    public init(sequence: Int?, script: ResponseScript?, clientWantsClose: Bool = false) {
        self.sequence = sequence
        self.script = script
        self.clientWantsClose = clientWantsClose
    }

    /// Gives a deferred exchange its script (an admin long-poll's answer) and wakes the codec if it waits.
    public func respond(_ script: ResponseScript) {
        guard self.script == nil else { return }
        self.script = script
        let wake = whenScriptArrives
        whenScriptArrives = nil
        wake?()
    }

    /// What `next()` gives the codec.
    public enum Pull: Equatable {
        case step(ScriptStep)
        /// No script yet; `whenScriptArrives` runs when one comes.
        case notYet
        /// Every step has been pulled.
        case finished
    }

    /// The next step of the script. The codec pulls a step only when the previous one has been carried out.
    public func next() -> Pull {
        guard let script else { return .notYet }
        guard cursor < script.steps.count else { return .finished }
        defer { cursor += 1 }
        return .step(script.steps[cursor])
    }

    /// Marks the exchange ended, once; true the first time.
    func end() -> Bool {
        defer { ended = true }
        return !ended
    }
}

/// Renders script steps as HTTP/1.1 bytes: the writing half of the HTTP/1.1 codec. Keeps the one fact a
/// response's framing needs across steps: whether its head declared chunked.
public struct HTTP1Renderer: Sendable {
    private var chunked = false

    public init() {}

    /// Appends the bytes `step` puts on the wire to `out`. Steps that are not bytes (waits, aborts, hang)
    /// append nothing; the connection carries them out.
    public mutating func render(_ step: ScriptStep, into out: inout [UInt8]) {
        switch step {
        case .head(let head):
            chunked = head.chunked
            out.append(contentsOf: head.http1)
        case .body(let bytes):
            guard chunked else {
                out.append(contentsOf: bytes)
                return
            }
            guard !bytes.isEmpty else { return }  // a zero-size chunk would end the body
            out.append(contentsOf: String(bytes.count, radix: 16).utf8)
            out.append(contentsOf: [13, 10])
            out.append(contentsOf: bytes)
            out.append(contentsOf: [13, 10])
        case .end:
            if chunked { out.append(contentsOf: Array("0\r\n\r\n".utf8)) }
            chunked = false
        case .raw(let bytes):
            out.append(contentsOf: bytes)
        case .wait, .abortExchange, .abortConnection, .hang:
            break
        }
    }

    /// Every byte a script puts on an HTTP/1.1 wire, waits ignored: for tests and for reading a script.
    public static func bytes(_ script: ResponseScript) -> [UInt8] {
        var renderer = HTTP1Renderer()
        var out: [UInt8] = []
        for step in script.steps { renderer.render(step, into: &out) }
        return out
    }
}
