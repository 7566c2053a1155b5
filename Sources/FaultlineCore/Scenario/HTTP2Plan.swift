/// A scenario's `http2` section: what the server announces on every HTTP/2 connection while the scenario is
/// loaded, and the connection-level faults (ARCHITECTURE §4a). The first loaded scenario with a section decides
/// (`Engine.http2Plan`); without one, nghttp2's defaults and 100 concurrent streams.
package struct HTTP2Plan: Sendable, Equatable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: 1 makes a client queue its requests.
    package var maxConcurrentStreams: UInt32?
    /// SETTINGS_INITIAL_WINDOW_SIZE: 0 stalls the client's uploads until `windowUpdateAfterMs`.
    package var initialWindowSize: UInt32?
    /// With a small `initialWindowSize`: open every stream's window this long after it starts (never when nil).
    package var windowUpdateAfterMilliseconds: Int?
    /// SETTINGS_MAX_FRAME_SIZE (16384 to 16777215, RFC 9113 §6.5.2).
    package var maxFrameSize: UInt32?
    /// SETTINGS_HEADER_TABLE_SIZE: 0 turns the client's HPACK dynamic table off.
    package var headerTableSize: UInt32?
    /// GOAWAY (NO_ERROR) naming the N-th stream once the connection has opened N: the stale-connection race a
    /// client must survive by retrying the refused streams.
    package var goawayAfterStreams: Int?
    /// False: the client's PINGs are never acknowledged (a client that uses PING to detect a dead connection
    /// should give up on it).
    package var ackPings = true
    /// Send a PING this often and journal the client's round trips (a connection entry with `http2` when the
    /// connection ends).
    package var pingEveryMilliseconds: Int?

    package init() {}
}
