import FaultlineCore

/// Where a stream is, from its HEADERS to its end (ARCHITECTURE §4a). nghttp2 keeps the protocol's own stream
/// states (RFC 9113 §5.1); this is the server's side of one: assembling the request, then carrying out the
/// exchange's script. Every change goes through `HTTP2Stream.enter`, which checks it against `isLegal` in debug
/// builds and cancels the timer the state it leaves carries.
///
/// What goes out after the body rendered so far (END_STREAM, or RST_STREAM for a body cut short) is the body
/// queue's `HTTP2BodyEnd`, not a state of its own: nghttp2 pulls the body when flow control lets it, while the
/// script may already have moved on (a `hang` after a partial body, say).
enum HTTP2StreamState {
    /// HEADERS came; the request's fields and DATA are still arriving. `timer` answers 408 if END_STREAM does
    /// not come in time (started only when the read that began the stream did not also end its request).
    case receiving(timer: CancellableTimer?)
    /// Journaled without an exchange — above our GOAWAY's last stream, refused, or ended before END_STREAM — and
    /// never answered: only nghttp2's close is left.
    case unanswered
    /// The exchange's script is pulled, step after step.
    case running
    /// A `wait` step: the script is pulled again when `timer` fires.
    case waiting(timer: CancellableTimer)
    /// The script is not all there yet (a proxied answer, an admin long-poll): pulled again when it arrives.
    case awaitingScript
    /// A growing script has `HTTP2Connection.growingQueueLimit` body bytes pending: pulled again once nghttp2 has
    /// taken half of them.
    case awaitingRoom
    /// A `hang`: nothing more is sent, released when the client gives up or the server stops.
    case hanging
    /// No more steps: the script ended (`end`, a reset, a connection step) or the connection stopped the stream;
    /// what the body queue holds still goes out.
    case done
    /// The exchange ended (completed, reset, cut, not processed): journaled as such; nghttp2 closes the stream.
    case ended

    /// The state's name without its data: what `isLegal` compares.
    enum Phase: CaseIterable { case receiving, unanswered, running, waiting, awaitingScript, awaitingRoom, hanging, done, ended }

    var phase: Phase {
        switch self {
        case .receiving: .receiving
        case .unanswered: .unanswered
        case .running: .running
        case .waiting: .waiting
        case .awaitingScript: .awaitingScript
        case .awaitingRoom: .awaitingRoom
        case .hanging: .hanging
        case .done: .done
        case .ended: .ended
        }
    }

    /// The transitions a stream may make. A request is dispatched (`running`) or journaled unanswered; the
    /// script pauses and resumes; anything with an exchange may end at any time (the client resets, the server
    /// stops, a GOAWAY names a lower stream). `done` and `ended` are entered again harmlessly (a connection step
    /// stops every stream, including ones that had stopped already).
    static func isLegal(from: Phase, to: Phase) -> Bool {
        switch (from, to) {
        case (.receiving, .receiving), (.receiving, .running), (.receiving, .unanswered):
            true
        case (.running, .waiting), (.running, .awaitingScript), (.running, .awaitingRoom), (.running, .hanging):
            true
        case (.waiting, .running), (.awaitingScript, .running), (.awaitingRoom, .running):
            true
        case (.running, .done), (.waiting, .done), (.awaitingScript, .done), (.awaitingRoom, .done),
             (.hanging, .done), (.done, .done):
            true
        case (.running, .ended), (.waiting, .ended), (.awaitingScript, .ended), (.awaitingRoom, .ended),
             (.hanging, .ended), (.done, .ended), (.ended, .ended):
            true
        default:
            false
        }
    }

    /// Whether the script is pulled now (`HTTP2Connection.run` loops while it is).
    var isPulling: Bool { if case .running = self { true } else { false } }

    /// The timer this state carries, cancelled when the stream leaves it.
    var timer: CancellableTimer? {
        switch self {
        case .receiving(let timer): timer
        case .waiting(let timer): timer
        default: nil
        }
    }
}

/// What follows a stream's pending body bytes once nghttp2 has taken them all.
enum HTTP2BodyEnd {
    /// More may come (the script goes on): nghttp2 is told to wait (`NGHTTP2_ERR_DEFERRED`).
    case open
    /// END_STREAM with the last DATA (the script's `end`), and `then` once it is out.
    case endStream(then: HTTP2AfterEnd)
    /// END_STREAM went to nghttp2 (the EOF flag on the last DATA, or HEADERS alone); `then` once it is out.
    case endStreamSent(then: HTTP2AfterEnd)
    /// RST_STREAM `code` after the last pending byte: a body cut short, or a reset step (nghttp2 would send a
    /// RST_STREAM submitted now before DATA it has queued). `outcome` is how the exchange is journaled.
    case reset(code: UInt32, outcome: ExchangeOutcome)
    /// That RST_STREAM waits in the connection's deferred work, for nghttp2 to return.
    case resetDue(code: UInt32, outcome: ExchangeOutcome)

    /// How the exchange ends if nghttp2 closes the stream before the server did: a reset of ours is journaled
    /// as the script meant it.
    var ourReset: ExchangeOutcome? {
        switch self {
        case .reset(_, let outcome), .resetDue(_, let outcome): outcome
        default: nil
        }
    }
}

/// What the server does once a stream's END_STREAM has gone out.
enum HTTP2AfterEnd {
    case nothing
    /// RST_STREAM NO_ERROR: the 408 to a request still arriving, so the client stops sending (RFC 9113 §8.1).
    case resetStream
    /// The connection policy's end (`maxRequests`): a graceful GOAWAY naming every stream so far, once this last
    /// response is complete — a client may not expect DATA after a GOAWAY, even on a stream it names.
    case goaway
}

/// How a stream's response body is handed to nghttp2 (its data provider).
enum HTTP2BodyProvider {
    /// No HEADERS submitted yet.
    case notSubmitted
    /// HEADERS submitted; nghttp2 reads DATA as flow control allows.
    case reading
    /// nghttp2 asked for bytes when there were none: `nghttp2_session_resume_data` when some come.
    case starved
}

/// A stream's response body on its way to nghttp2: rendered bytes, then slices of large bodies read as nghttp2
/// asks for DATA, then what ends it.
struct HTTP2BodyQueue {
    /// Body bytes rendered and not yet handed to nghttp2; `pendingOffset` of them are taken.
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    /// Slices of large bodies (`ScriptStep.stream`) after `pending`; `sliceOffset` bytes of the first are taken.
    private var slices: [BodySlice] = []
    private var sliceOffset = 0
    var end = HTTP2BodyEnd.open
    var provider = HTTP2BodyProvider.notSubmitted

    var isSubmitted: Bool { if case .notSubmitted = provider { false } else { true } }

    var count: Int {
        pending.count - pendingOffset + (slices.isEmpty ? 0 : slices.reduce(-sliceOffset) { $0 + $1.count })
    }

    mutating func append(_ bytes: [UInt8]) {
        // After a slice, bytes queue behind it (a multipart/byteranges part header) to keep the order.
        if slices.isEmpty {
            pending.append(contentsOf: bytes)
        } else {
            slices.append(BodySlice(BodySource(bytes: bytes)))
        }
    }

    mutating func append(_ slice: BodySlice) { slices.append(slice) }

    /// Copies up to `length` queued bytes into `buffer`; at least one is queued.
    mutating func take(into buffer: UnsafeMutablePointer<UInt8>, length: Int) -> Int {
        if pendingOffset < pending.count {
            let count = min(pending.count - pendingOffset, length)
            pending.withUnsafeBytes { source in
                buffer.update(from: source.bindMemory(to: UInt8.self).baseAddress! + pendingOffset, count: count)
            }
            pendingOffset += count
            if pendingOffset == pending.count {
                pending.removeAll(keepingCapacity: true)
                pendingOffset = 0
            }
            return count
        }
        let slice = slices[0]
        let count = min(slice.count - sliceOffset, length)
        let start = slice.range.lowerBound + sliceOffset
        slice.source.copy(start..<(start + count), into: UnsafeMutableRawPointer(buffer))
        sliceOffset += count
        if sliceOffset == slice.count {
            slices.removeFirst()
            sliceOffset = 0
        }
        return count
    }
}

/// A stream's request as its HEADERS and DATA arrive: pseudo-headers stay among the headers, as received.
struct HTTP2RequestAssembly {
    var method = ""
    var path = ""
    var headers = HTTPHeaders()
    /// The header section's size as RFC 9113 §6.5.2 counts it (32 bytes of overhead a field).
    var headerBytes = 0
    var body: [UInt8] = []
    /// Why the request cannot be served as it is (too large, not complete in time): answered with its status.
    var error: HTTPParseError?

    var head: HTTPRequestHead { HTTPRequestHead(method: method, target: path, version: .http2, headers: headers) }
    /// The journal's request line for a request that could not be served.
    var requestLine: String { "\(method) \(path) HTTP/2" }
    /// The request did not complete in time: its 408 is followed by RST_STREAM NO_ERROR.
    var timedOut: Bool { error?.status == 408 }
}

/// One stream: its request as it arrives, then its exchange's response as it is rendered. Loop-confined, as its
/// connection: no run-time exclusivity checks on its state (each cost a runtime call, several a stream).
final class HTTP2Stream {
    let id: Int32
    let arrival: Arrival
    let index: Int
    @exclusivity(unchecked) var request = HTTP2RequestAssembly()
    /// Set when the request is dispatched (admin exchanges included); nil while it arrives, and for a request
    /// journaled unanswered.
    @exclusivity(unchecked) var exchange: Exchange?
    @exclusivity(unchecked) private(set) var state = HTTP2StreamState.receiving(timer: nil)
    /// The head the script rendered, submitted as HEADERS when the first step that sends anything comes.
    @exclusivity(unchecked) var head: ResponseHead?
    @exclusivity(unchecked) var body = HTTP2BodyQueue()
    /// The `window-update-after` fault: the stream's receive window opens when it fires.
    @exclusivity(unchecked) var windowTimer: CancellableTimer?
    /// What the client sent to end the stream (RST_STREAM) or the connection (GOAWAY) while it was under way.
    @exclusivity(unchecked) var client = HTTP2ClientFrames()

    init(id: Int32, arrival: Arrival, index: Int) {
        self.id = id
        self.arrival = arrival
        self.index = index
    }

    var requestContext: RequestContext {
        RequestContext(arrival: arrival, arrivedNow: false, indexOnConnection: index, stream: Int(id))
    }

    /// Moves to `next`, cancelling the timer of the state left (unless `next` carries the same one).
    func enter(_ next: HTTP2StreamState) {
        assert(
            HTTP2StreamState.isLegal(from: state.phase, to: next.phase),
            "HTTP/2 stream \(id): \(state.phase) → \(next.phase) is not a legal transition")
        if let timer = state.timer, timer !== next.timer { timer.cancel() }
        state = next
    }

    /// Journaled: dispatched, or recorded as unanswered.
    var isJournaled: Bool {
        switch state {
        case .receiving: false
        default: true
        }
    }

    func cancelTimers() {
        if let timer = state.timer {
            timer.cancel()
            if case .receiving = state { state = .receiving(timer: nil) }
        }
        windowTimer?.cancel()
        windowTimer = nil
    }
}

extension HTTP2Stream {
    /// No more steps are pulled (a GOAWAY above it, the script's end); a stream not dispatched yet or already
    /// ended is left as it is.
    func stop() {
        switch state {
        case .running, .waiting, .awaitingScript, .awaitingRoom, .hanging, .done: enter(.done)
        case .receiving, .unanswered, .ended: break
        }
    }
}
