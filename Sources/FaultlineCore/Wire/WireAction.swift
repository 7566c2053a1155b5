/// One primitive the connection layer knows how to carry out (DESIGN §1). Every response and every fault is
/// a list of these; the connection executes them in order with loop timers and knows nothing else.
public enum WireAction: Sendable, Equatable {
    /// Queue these bytes for writing.
    case write([UInt8])
    /// Wait this many milliseconds (a loop timer) before the next action.
    case wait(milliseconds: Int)
    /// Flush, then `shutdown(SHUT_WR)`: the client sees FIN while the server keeps reading (half-close).
    case shutdownWrite
    /// Abort with RST: `SO_LINGER {1, 0}` then close, so the client sees "connection reset".
    case reset
    /// Flush what was written, then close with FIN.
    case close
    /// Send nothing more; release only when the client closes or the server stops.
    case hang
}

/// What the server will do for one request: the wire actions plus the facts the journal records about them.
public struct ResponsePlan: Sendable, Equatable {
    public var actions: [WireAction]
    /// The status line's code, when a status line is sent; nil for faults that send no HTTP response.
    public var status: Int?
    public var fault: String?
    /// Whether the connection stays open for another request once the actions are done.
    public var keepAlive: Bool
    /// Close the kept-alive connection if no request starts within this many milliseconds of the response.
    public var idleCloseMilliseconds: Int?
    /// The well-formed response the step describes (before any fault breaks it), when the engine asked
    /// for it: what an idempotent route stores for replay.
    public var response: HTTPResponse?

    public init(actions: [WireAction], status: Int?, fault: String? = nil, keepAlive: Bool) {
        self.actions = actions
        self.status = status
        self.fault = fault
        self.keepAlive = keepAlive
    }
}
