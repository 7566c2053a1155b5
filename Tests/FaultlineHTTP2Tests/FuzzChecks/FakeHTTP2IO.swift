import FaultlineCore
import FaultlineHTTP2

// The fake world of an HTTP/2 connection, shared by the codec's tests (HTTP2ConnectionTests) and the h2-frames
// fuzzer (scripts/fuzz.sh compiles this folder into it): writes go to memory, timers wait in a list until they are
// fired, the clock moves only when told, and `dispatch` answers each request with the script `respond` picks.
// Every call after `close` is a problem recorded in `problems`.

/// A timer of the fake loop.
final class FakeTimer: CancellableTimer {
    let deadline: Int
    let order: Int
    var action: (() -> Void)?
    init(deadline: Int, order: Int, action: @escaping () -> Void) {
        self.deadline = deadline
        self.order = order
        self.action = action
    }
    func cancel() { action = nil }
}

/// What the fake transport was asked to do, in order (the codec's tests read it: frames before the FIN).
enum FakeHTTP2IOEvent: Equatable {
    case write(count: Int)
    case shutdownWrite
    case close(abortive: Bool)
    case reading(Bool)
}

/// The fake transport, loop and Dispatcher.
final class FakeHTTP2IO: HTTP2ConnectionIO {
    var output: [UInt8] = []
    var pending = 0
    /// Writes stay queued (`pending` grows by each write) until the test drains them: a client that does not read.
    var queuesWrites = false
    /// The transport calls, in order.
    var events: [FakeHTTP2IOEvent] = []
    var refuseWrites = false
    var closedAt: String?
    var closeCount = 0
    var problems: [String] = []
    var timers: [FakeTimer] = []
    var timerOrder = 0
    var clock = 0
    /// How a request is answered: its script now, or none now and this one later (`deferred`, answered by the
    /// caller with `Exchange.respond`, as an admin long-poll is).
    var respond: (HTTPRequest, RequestContext) -> (ResponseScript?, ResponseScript?)
    /// Every dispatched request, in order.
    var requests: [(request: HTTPRequest, context: RequestContext)] = []
    var exchanges: [Exchange] = []
    /// How each exchange ended, by sequence (the last `finished` call's outcome).
    var outcomes: [Int: ExchangeOutcome] = [:]
    /// Requests journaled unanswered, with their outcome.
    var unanswered: [(
        request: HTTPRequest?, error: HTTPParseError?, context: RequestContext, outcome: ExchangeOutcome,
        client: HTTP2ClientFrames)] = []
    var rejected: [HTTPParseError] = []
    var connectionErrors: [String] = []
    var clientFrames: [Int: HTTP2ClientFrames] = [:]
    var http2Entries: [(summary: HTTP2ConnectionSummary?, clientGoaway: HTTP2ClientGoaway?)] = []
    var finishedCount: [ObjectIdentifier: Int] = [:]
    var deferred: [(Exchange, ResponseScript)] = []
    var readingEnabled = true

    init(respond: @escaping (HTTPRequest, RequestContext) -> (ResponseScript?, ResponseScript?)) {
        self.respond = respond
    }

    /// Fires every timer due within `milliseconds` from now, in order, and moves the clock there.
    func advance(milliseconds: Int) {
        let until = clock + milliseconds
        while true {
            timers.removeAll { $0.action == nil }
            guard let next = timers.min(by: { ($0.deadline, $0.order) < ($1.deadline, $1.order) }),
                  next.deadline <= until else { break }
            _ = fireNext()
        }
        clock = until
    }

    private func called(_ name: String) {
        if let closedAt { problems.append("\(name) called after close (\(closedAt))") }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        called("write")
        output.append(contentsOf: bytes)
        events.append(.write(count: bytes.count))
        if queuesWrites { pending += bytes.count }
        return !refuseWrites
    }
    var pendingOutput: Int {
        called("pendingOutput")
        return pending
    }
    var shutDown = false
    func shutdownWrite() {
        called("shutdownWrite")
        // A half-close comes from a script, after a request, so the server's SETTINGS (queued from the start)
        // and whatever nghttp2 queued before it are on the wire before the FIN.
        if !shutDown && output.isEmpty { problems.append("shutdownWrite before anything was written") }
        shutDown = true
        events.append(.shutdownWrite)
    }
    func close(abortive: Bool) {
        called("close")
        closeCount += 1
        closedAt = abortive ? "abortive" : "FIN"
        events.append(.close(abortive: abortive))
    }
    func setReading(_ enabled: Bool) {
        called("setReading")
        readingEnabled = enabled
        events.append(.reading(enabled))
    }
    func schedule(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer {
        called("schedule")
        timerOrder += 1
        let timer = FakeTimer(deadline: clock + max(0, milliseconds), order: timerOrder, action: action)
        timers.append(timer)
        return timer
    }
    func now() -> Arrival {
        called("now")
        return Arrival(wall: 1_700_000_000 + Double(clock) / 1000, monotonicNanos: UInt64(clock) * 1_000_000)
    }
    let dates = HTTPDateCache()
    func dateLine() -> [UInt8] {
        called("dateLine")
        return dates.line(atWall: 1_700_000_000 + Double(clock) / 1000)
    }
    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange {
        called("dispatch")
        if context.stream == nil { problems.append("a request without its stream") }
        requests.append((request, context))
        let (script, later) = respond(request, context)
        let exchange = Exchange(sequence: exchanges.count, script: script)
        if let later { deferred.append((exchange, later)) }
        exchanges.append(exchange)
        return exchange
    }
    func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange {
        called("reject")
        rejected.append(error)
        let head = ResponseHead(status: error.status, headers: HTTPHeaders(), bodyLength: 0, close: false)
        let exchange = Exchange(
            sequence: exchanges.count,
            script: ResponseScript(steps: [.head(head), .end], status: error.status, keepAlive: true))
        exchanges.append(exchange)
        return exchange
    }
    /// Streams nghttp2 ignored after our GOAWAY: their contexts and the GOAWAY's last stream id.
    var ignoredStreams: [(context: RequestContext, lastStream: Int32)] = []

    func journalIgnoredStream(_ context: RequestContext, afterGoaway lastStream: Int32) {
        called("journalIgnoredStream")
        ignoredStreams.append((context, lastStream))
    }

    func journalUnanswered(
        _ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext, _ outcome: ExchangeOutcome,
        client: HTTP2ClientFrames
    ) {
        called("journalUnanswered")
        unanswered.append((request, error, context, outcome, client))
    }
    func clientSent(_ frames: HTTP2ClientFrames, onEntry sequence: Int) {
        called("clientSent")
        if frames.isEmpty { problems.append("journaled an empty record of the client's frames") }
        if !exchanges.indices.contains(sequence) { problems.append("the client's frames on an unknown entry") }
        clientFrames[sequence] = frames
    }
    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?) {
        called("finished")
        let id = ObjectIdentifier(exchange)
        if !exchanges.contains(where: { $0 === exchange }) { problems.append("finished an unknown exchange") }
        finishedCount[id, default: 0] += 1
        if let sequence = exchange.sequence { outcomes[sequence] = outcome }
        if finishedCount[id]! > 1 {
            problems.append("exchange \(exchange.sequence ?? -1) finished \(finishedCount[id]!) times (\(outcome))")
        }
    }
    func connectionError(_ reason: String) {
        called("connectionError")
        connectionErrors.append(reason)
    }
    func journalHTTP2(_ summary: HTTP2ConnectionSummary?, clientGoaway: HTTP2ClientGoaway?) {
        called("journalHTTP2")
        http2Entries.append((summary, clientGoaway))
    }

    /// Fires the earliest timer that was not cancelled; false when none is left.
    func fireNext() -> Bool {
        timers.removeAll { $0.action == nil }
        guard let next = timers.min(by: { ($0.deadline, $0.order) < ($1.deadline, $1.order) }) else { return false }
        timers.removeAll { $0 === next }
        clock = max(clock, next.deadline)
        let action = next.action
        next.action = nil
        action?()
        return true
    }
}
