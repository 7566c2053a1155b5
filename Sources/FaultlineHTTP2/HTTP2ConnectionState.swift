/// Where an HTTP/2 connection is in its life, server side (RFC 9113 §6.8, §5.4.1). Every change goes through
/// `HTTP2Connection.enter`, checked against `isLegal` in debug builds.
enum HTTP2ConnectionState: Equatable {
    /// Streams are served.
    case open
    /// Our GOAWAY named `lastStream`: streams above it are not processed (RFC 9113 §6.8), and the connection closes
    /// once every stream at or below it is done. A later GOAWAY may name another last stream.
    case goingAway(lastStream: Int32)
    /// The write side is shut (the `shutdown-write` fault): the client's frames are still read, nothing more is
    /// submitted. `lastStream`: what a GOAWAY of ours named before or after, if any.
    case writeShut(lastStream: Int32?)
    /// Closed: nothing more is read or written, no call on the IO follows, and a receiving callback stops
    /// nghttp2's parsing (`HTTP2Callbacks.stopped`).
    case closed

    /// The last stream id a GOAWAY of ours named.
    var goawayLastStream: Int32? {
        switch self {
        case .goingAway(let last): last
        case .writeShut(let last): last
        case .open, .closed: nil
        }
    }

    var isClosed: Bool { self == .closed }

    /// The transitions a connection may make: any state may close; GOAWAY may follow GOAWAY (a graceful shutdown
    /// notice, then the final one; a policy's after a script's); the write side shuts once; nothing leaves
    /// `closed`.
    static func isLegal(from: HTTP2ConnectionState, to: HTTP2ConnectionState) -> Bool {
        switch (from, to) {
        case (.closed, _): false
        case (_, .closed): true
        case (.open, .goingAway), (.goingAway, .goingAway): true
        case (.open, .writeShut), (.goingAway, .writeShut): true
        case (.writeShut, .writeShut): true
        default: false
        }
    }
}
