/// What the journal keeps of an HTTP/2 connection that pinged (ARCHITECTURE §4a): journaled as a connection
/// entry when the connection ends, if the scenario's `http2.pingEveryMs` sent PINGs or the client sent any.
public struct HTTP2ConnectionSummary: Sendable, Equatable {
    /// PINGs the server sent (`pingEveryMs`).
    public var pingsSent = 0
    /// The round trip of each PING the client acknowledged, in milliseconds, in the order sent.
    public var pingRoundTripsMilliseconds: [Double] = []
    /// PINGs the client sent (a client that uses them to notice a dead connection), and whether they were
    /// acknowledged (`ackPings`).
    public var pingsReceived = 0
    public var pingsAcknowledged = true
    /// Streams the client opened on the connection.
    public var streams = 0

    package init() {}

    package func json() -> JSONValue {
        .object([
            ("streams", .int(streams)),
            ("pingsSent", .int(pingsSent)),
            ("pingsAnswered", .int(pingRoundTripsMilliseconds.count)),
            ("pingRoundTripsMs", .array(pingRoundTripsMilliseconds.map { .double(($0 * 1000).rounded() / 1000) })),
            ("pingsReceived", .int(pingsReceived)),
            ("pingsAcknowledged", .bool(pingsAcknowledged)),
        ])
    }
}
