import FaultlineCore

/// What an HTTP/2 connection needs from the world: the transport, loop timers and the Dispatcher. `Connection`
/// implements it over a real transport; the fuzz target and the tests over memory. Loop thread only.
package protocol HTTP2ConnectionIO: AnyObject {
    /// Writes bytes, or queues what the kernel does not take at once. False when the client is gone.
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    var pendingOutput: Int { get }
    func shutdownWrite()
    /// Closes the transport now: RST when `abortive`, else FIN. No call on the connection follows.
    func close(abortive: Bool)
    func setReading(_ enabled: Bool)
    /// Runs `action` once after `milliseconds`, unless the returned timer is cancelled first.
    func schedule(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer
    /// `schedule`, for a script's wait: the server counts these deadlines so that housekeeping (the close queue)
    /// stands aside while they fall due (`StepDeadlines`). Defaults to `schedule`.
    func scheduleStep(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer
    func now() -> Arrival
    /// The `Date` field line (`Date: …` CRLF) for a head submitted now: the engine's per-second cache, as for
    /// HTTP/1.1. Its value goes out as the `date` field (RFC 9110 §6.6.1).
    func dateLine() -> [UInt8]
    /// A complete request (`context.stream` names its stream).
    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange
    /// A request that cannot be served as it is (too large, not complete in time): journaled with what arrived.
    func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange
    /// A stream whose request reached the server and will never be answered (reset by the client, refused), with
    /// what the client sent to end it (`client`: its RST_STREAM, a GOAWAY).
    func journalUnanswered(
        _ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext, _ outcome: ExchangeOutcome,
        client: HTTP2ClientFrames)
    /// A request the client began after our GOAWAY had gone out: nghttp2 reads its header block (HPACK must stay in
    /// step) but hands none of it up, and never processes it (RFC 9113 §6.8). Journaled `not-processed`, with the
    /// stream and the GOAWAY's last stream id, since the request's fields are not known.
    func journalIgnoredStream(_ context: RequestContext, afterGoaway lastStream: Int32)
    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?)
    /// The client sent RST_STREAM on the stream journaled as `sequence`, or GOAWAY while its exchange was under
    /// way: `frames` is all it sent about that entry so far.
    func clientSent(_ frames: HTTP2ClientFrames, onEntry sequence: Int)
    /// The connection broke the protocol as a whole (bad preface, a flood, a bad HPACK block): journaled as a
    /// connection entry naming the error the server answered with.
    func connectionError(_ reason: String)
    /// The connection ended and gets a connection entry: the scenario asked about its PINGs (`summary`:
    /// `pingEveryMs`, `ackPings: false`), or the client opened no stream and sent GOAWAY (`summary` nil).
    /// `clientGoaway` is the client's last GOAWAY on it.
    func journalHTTP2(_ summary: HTTP2ConnectionSummary?, clientGoaway: HTTP2ClientGoaway?)
}

/// A timer that can be stopped before it fires (a `LoopTimer`; a fake one in the fuzz target).
package protocol CancellableTimer: AnyObject {
    func cancel()
}

extension HTTP2ConnectionIO {
    package func scheduleStep(milliseconds: Int, _ action: @escaping () -> Void) -> CancellableTimer {
        schedule(milliseconds: milliseconds, action)
    }
}
