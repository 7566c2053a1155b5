/// The protocols an exchange can be carried by, each with its codec: `HTTP1Connection`, and the server's
/// `HTTP2Connection` (ARCHITECTURE §4, §4a). A fault declares the ones it can be rendered on (`FaultName.protocols`).
public enum ExchangeProtocol: String, Sendable, CaseIterable {
    case http1 = "http/1.1"
    case http2 = "h2"
}

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
