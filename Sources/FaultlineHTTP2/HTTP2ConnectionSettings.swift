import FaultlineCore

/// Per-connection HTTP/2 settings the server announces (RFC 9113 §6.5.2) and the connection faults, from the
/// scenario's `http2` section.
package struct HTTP2ConnectionSettings {
    package init() {}

    /// The server's defaults with a scenario's `http2` section on top.
    package func applying(_ plan: HTTP2Plan?) -> HTTP2ConnectionSettings {
        guard let plan else { return self }
        var settings = self
        if let value = plan.maxConcurrentStreams { settings.maxConcurrentStreams = value }
        if let value = plan.initialWindowSize { settings.initialWindowSize = value }
        if let value = plan.maxFrameSize { settings.maxFrameSize = value }
        if let value = plan.headerTableSize { settings.headerTableSize = value }
        settings.windowUpdateAfterMilliseconds = plan.windowUpdateAfterMilliseconds
        settings.goawayAfterStreams = plan.goawayAfterStreams
        settings.ackPings = plan.ackPings
        settings.pingEveryMilliseconds = plan.pingEveryMilliseconds
        return settings
    }

    package var maxConcurrentStreams: UInt32 = 100
    package var initialWindowSize: UInt32 = 65_535
    package var maxFrameSize: UInt32 = 16_384
    package var headerTableSize: UInt32 = 4096
    package var parserLimits = HTTPParserLimits()
    package var windowUpdateAfterMilliseconds: Int?
    package var goawayAfterStreams: Int?
    /// A stream whose request is not complete this long after its HEADERS is answered 408 (the server's
    /// header timeout, as for HTTP/1.1).
    package var requestTimeoutMilliseconds = 10_000
    package var ackPings = true
    package var pingEveryMilliseconds: Int?
    /// Ask nghttp2 for no more frames while this much output waits for the kernel, and stop reading. nghttp2
    /// produces DATA only when asked, so this bounds a connection's queue without slowing a download (the
    /// socket's own buffer is larger); control frames a client provokes without reading (SETTINGS and PING
    /// acknowledgements) pile up inside nghttp2 instead, where its flood limit ends the connection.
    package var maxPendingOutput = 256 * 1024
}
