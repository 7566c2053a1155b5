/// When and where a request arrived.
package struct Arrival: Sendable, Equatable {
    package var wall: Double
    package var monotonicNanos: UInt64
    package init(wall: Double, monotonicNanos: UInt64) {
        self.wall = wall
        self.monotonicNanos = monotonicNanos
    }
}

/// What the Dispatcher needs to know about a request besides the request itself.
package struct RequestContext: Sendable {
    package var arrival: Arrival
    /// Whether the clocks were read in the same read event that completed the request: then the engine
    /// decides at `arrival` without reading them again.
    package var arrivedNow: Bool
    /// Requests before this one on the same connection.
    package var indexOnConnection: Int
    /// The HTTP/2 stream that carried the request; nil over HTTP/1.1.
    package var stream: Int?

    package init(arrival: Arrival, arrivedNow: Bool, indexOnConnection: Int, stream: Int? = nil) {
        self.arrival = arrival
        self.arrivedNow = arrivedNow
        self.indexOnConnection = indexOnConnection
        self.stream = stream
    }
}
