/// The protocols an exchange can be carried by. A fault declares the ones it can be rendered on
/// (`FaultName.protocols`); the HTTP/1.1 codec is the only one today (ARCHITECTURE §4).
public enum ExchangeProtocol: String, Sendable, CaseIterable {
    case http1 = "http/1.1"
    case http2 = "h2"
}

/// How a script ends a connection on purpose. Every one is carried out by the transport, below HTTP, so it
/// works the same under TLS.
package enum ConnectionAbort: Sendable, Equatable {
    /// RST: `SO_LINGER {1, 0}` then close. The client sees "connection reset".
    case reset
    /// Flush what was written, then FIN (a lingering close: the client's late bytes are read, not answered).
    case close
    /// Flush, then `shutdown(SHUT_WR)`: the client sees FIN while the server keeps reading (half-close).
    case shutdownWrite
    /// Like `close`, but a TLS transport sends no close_notify first: FIN alone (`no-close-notify`).
    case closeWithoutNotify
}

/// Why a complete response is the connection's last (`ScriptStep.endConnection`): a planned end, not a fault.
package enum EndOfConnection: Sendable, Equatable {
    /// The response says `Connection: close`: the client asked for it (or spoke HTTP/1.0 without keep-alive), the
    /// step said `"close": true`, or the server ends the connection after an error. HTTP/1.1: FIN after the
    /// response, with a lingering close (a plain close from the close queue when the client asked). HTTP/2: nothing,
    /// the connection goes on (RFC 9113 §8.2.2: no connection-specific fields).
    case connectionClose
    /// The connection policy's `maxRequests`: this was the connection's last request, and nothing announces it.
    /// HTTP/1.1: FIN after the response, then a lingering close that journals the requests arriving meanwhile as
    /// `connection-closing`. HTTP/2: a graceful GOAWAY naming every stream opened so far.
    case maxRequests
}

/// The status line and header section of a response, protocol-neutral. An immutable class: the engine builds
/// the heads of plain steps once, at load, and every request they answer shares them.
///
/// `http1` is the head already serialized for HTTP/1.1 (RFC 9112 §4): the HTTP/1.1 codec writes it as it is.
/// An HTTP/2 codec reads `status` and `headers` and skips the connection-specific fields (RFC 9113 §8.2.2).
///
/// `Date` is not in it (RFC 9110 §6.6.1): it changes every second while the head is shared, so the codec adds it
/// when it writes the head (`addsDate`), from the engine's per-second `HTTPDateCache` — right after the status line
/// over HTTP/1.1 (`statusLineLength` says where), after `:status` over HTTP/2.
package final class ResponseHead: Sendable, Equatable {
    package let status: Int
    package let headers: HTTPHeaders
    /// The body is sent with chunked framing: each `body` step is one chunk, `end` writes the last chunk.
    package let chunked: Bool
    package let http1: [UInt8]
    /// The `Content-Length` HTTP/1.1's head announces when the fields do not frame the body themselves: an
    /// HTTP/2 head sends it too (RFC 9113 §8.1.1 allows it, and clients use it for progress).
    package let contentLength: Int?
    /// The codec adds `Date` when it writes this head: the fields carry none and the step did not ask for none
    /// (`"date": false`, the `no-date` resource deviation).
    package let addsDate: Bool
    /// The bytes of `http1`'s status line, CRLF included: where the codec inserts `Date`.
    package let statusLineLength: Int

    /// `bodyLength` is what `Content-Length` announces when the headers do not frame the body themselves;
    /// `close` adds `Connection: close` (HTTP/1.1 only). `date: false` sends no `Date` (nor does a head whose
    /// fields set one: that one goes out as it is). `framed: false` announces no length at all: the body ends with
    /// the connection (RFC 9112 §6.3 item 8; `no-close-notify`).
    package init(
        status: Int, headers: HTTPHeaders, bodyLength: Int, close: Bool, date: Bool = true, framed: Bool = true
    ) {
        self.status = status
        self.headers = headers
        // One pass over the fields: every response that is not prepared at load builds its head here.
        var chunked = false
        var framedByFields = false
        var hasDate = false
        for field in headers.fields {
            if field.name.caseInsensitiveEquals("transfer-encoding") {
                framedByFields = true
                if !chunked { chunked = field.value.lowercased().contains("chunked") }
            } else if field.name.caseInsensitiveEquals("content-length") {
                framedByFields = true
            } else if field.name.caseInsensitiveEquals("date") {
                hasDate = true
            }
        }
        self.chunked = chunked && framed
        addsDate = date && !hasDate
        let bodyless = status < 200 || status == 204 || status == 304
        contentLength = bodyless || framedByFields || !framed ? nil : bodyLength
        let http1 = HTTPResponse(status: status, headers: headers)
            .serializedHead(close: close, bodyLength: bodyLength, framed: framed)
        self.http1 = http1
        statusLineLength = (http1.firstIndex(of: 0x0A) ?? http1.count - 1) + 1
    }

    /// A head whose HTTP/1.1 bytes were serialized by the caller, in the same pass that chose its fields
    /// (`ProxyHeaders.clientHead`): `http1` must be what the other initializer would make of them, and
    /// `addsDate` what it would decide.
    package init(
        status: Int, headers: HTTPHeaders, http1: [UInt8], statusLineLength: Int, contentLength: Int?, chunked: Bool,
        addsDate: Bool
    ) {
        self.status = status
        self.headers = headers
        self.http1 = http1
        self.statusLineLength = statusLineLength
        self.contentLength = contentLength
        self.chunked = chunked
        self.addsDate = addsDate
    }

    package static func == (lhs: ResponseHead, rhs: ResponseHead) -> Bool {
        lhs === rhs || (lhs.status == rhs.status && lhs.headers == rhs.headers && lhs.http1 == rhs.http1
            && lhs.addsDate == rhs.addsDate)
    }
}

/// One protocol-neutral step of a response (ARCHITECTURE §4). The engine builds a script of these; the
/// exchange's codec renders each: bytes for HTTP/1.1 (`HTTP1Renderer`), frames for HTTP/2.
package enum ScriptStep: Sendable, Equatable {
    /// The status and header section. HTTP/1.1: the status line and fields; HTTP/2: a HEADERS frame.
    case head(ResponseHead)
    /// Body bytes. HTTP/1.1: as they are, or as one chunk when the head is chunked; HTTP/2: DATA.
    case body([UInt8])
    /// Body bytes read from a shared source piece by piece as the connection drains (a resource's
    /// representation): never copied whole. Rendered like `body`.
    case stream(BodySlice)
    /// Wait this many milliseconds (a loop timer) before the next step.
    case wait(milliseconds: Int)
    /// The response is complete. HTTP/1.1: the last chunk when chunked; HTTP/2: END_STREAM.
    case end
    /// Bytes for the connection as they are, framed by no codec: the faults that break HTTP/1.1's own syntax
    /// (`garbage`, `malformed-chunk`, `overlong-body`). Only HTTP/1.1 can carry them.
    case raw([UInt8])
    /// Abandon this exchange mid-response. HTTP/1.1 has no other way than closing the connection (FIN after
    /// what was written); HTTP/2 resets the stream.
    case abortExchange
    /// End the whole connection now, after what was written: a fault's break (RST, FIN, half-close).
    case abortConnection(ConnectionAbort)
    /// The connection ends after this response on purpose, with no fault: the response is complete, and `why`
    /// says who planned the end, which decides how each protocol carries it out.
    case endConnection(EndOfConnection)
    /// Send nothing more; released only when the client closes or the server stops.
    case hang
    /// A frame-level action only HTTP/2 has: RST_STREAM with a code, GOAWAY.
    case http2(HTTP2Action)
    /// After a 101: the connection switches to WebSocket (RFC 6455) and plays this session. HTTP/1.1 only.
    case upgrade(WebSocketSessionPlan)
}

/// HTTP/2's own ways to end a stream or a connection (RFC 9113 §6.4, §6.8), as script steps.
package enum HTTP2Action: Sendable, Equatable {
    /// RST_STREAM with this error code, after what the stream has rendered.
    case resetStream(code: UInt32)
    /// GOAWAY naming `last` as the last stream processed, with an error code; `graceful` sends the shutdown
    /// notice (a GOAWAY naming 2^31-1) first, then the final one.
    case goaway(last: GoawayLastStream, code: UInt32, graceful: Bool)
    /// Frames written as they are, after what nghttp2 has queued: the frames nghttp2 would never send.
    case frames([HTTP2RawFrame])
}

/// One hand-made HTTP/2 frame (RFC 9113 §4.1), written `count` times.
package struct HTTP2RawFrame: Sendable, Equatable {
    package var type: UInt8
    package var flags: UInt8
    /// On the exchange's own stream; false: stream 0.
    package var onStream: Bool
    package var payload: [UInt8]
    package var count: Int

    package init(type: UInt8, flags: UInt8, onStream: Bool, payload: [UInt8], count: Int = 1) {
        self.type = type
        self.flags = flags
        self.onStream = onStream
        self.payload = payload
        self.count = count
    }

    /// The frame's bytes: the 9-byte header (length, type, flags, stream id), then the payload.
    package func bytes(stream: Int) -> [UInt8] {
        let length = payload.count
        let id = onStream ? UInt32(truncatingIfNeeded: stream) & 0x7fff_ffff : 0
        var out: [UInt8] = [
            UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
            UInt8(truncatingIfNeeded: length), type, flags,
            UInt8(truncatingIfNeeded: id >> 24), UInt8(truncatingIfNeeded: id >> 16),
            UInt8(truncatingIfNeeded: id >> 8), UInt8(truncatingIfNeeded: id),
        ]
        out.append(contentsOf: payload)
        return out
    }
}

/// The `raw-frames` fault's ready-made breakages.
public enum HTTP2FramePreset: String, Sendable, CaseIterable {
    /// HEADERS whose HPACK block cannot be decoded (an integer that overflows): COMPRESSION_ERROR (RFC 9113 §4.3).
    case badHPACK = "bad-hpack"
    /// HEADERS without END_HEADERS, then CONTINUATION frames that never end the block: a client must cap what it
    /// buffers (the 2024 "CONTINUATION flood").
    case continuationFlood = "continuation-flood"
    /// DATA on stream 0, which RFC 9113 §6.1 makes a connection error (PROTOCOL_ERROR).
    case dataOnStreamZero = "data-on-stream-0"
    /// A SETTINGS frame whose length is not a multiple of 6: FRAME_SIZE_ERROR (RFC 9113 §6.5).
    case badSettings = "bad-settings"

    package var frames: [HTTP2RawFrame] {
        switch self {
        case .badHPACK:
            // An indexed field whose index never ends (0xFF, then continuation bytes).
            return [HTTP2RawFrame(type: 0x1, flags: 0x4 | 0x1, onStream: true, payload: [0xff, 0xff, 0xff, 0xff, 0xff, 0xff])]
        case .continuationFlood:
            // A literal field with a new name whose length is long, then name bytes, 16 KiB per CONTINUATION.
            let filler = [UInt8](repeating: 0x61, count: 16_384)
            return [HTTP2RawFrame(type: 0x1, flags: 0, onStream: true, payload: [0x00, 0x7f, 0xff, 0xff, 0x03]),
                    HTTP2RawFrame(type: 0x9, flags: 0, onStream: true, payload: filler, count: 640)]
        case .dataOnStreamZero:
            return [HTTP2RawFrame(type: 0x0, flags: 0, onStream: false, payload: Array("faultline".utf8))]
        case .badSettings:
            return [HTTP2RawFrame(type: 0x4, flags: 0, onStream: false, payload: [0, 3, 0, 0])]
        }
    }
}

/// Which stream a GOAWAY names as the last one processed.
package enum GoawayLastStream: Sendable, Equatable {
    /// The stream whose script sends the GOAWAY: it is processed, any later one is not.
    case current
    /// The stream before it (id − 2): this one and every later one are not processed.
    case previous
    case stream(Int)
}

/// HTTP/2 error codes (RFC 9113 §7), by the names scenarios use.
public enum HTTP2ErrorCode: UInt32, Sendable, CaseIterable {
    case noError = 0x0
    case protocolError = 0x1
    case internalError = 0x2
    case flowControlError = 0x3
    case settingsTimeout = 0x4
    case streamClosed = 0x5
    case frameSizeError = 0x6
    case refusedStream = 0x7
    case cancel = 0x8
    case compressionError = 0x9
    case connectError = 0xa
    case enhanceYourCalm = 0xb
    case inadequateSecurity = 0xc
    case http11Required = 0xd

    /// The RFC's name, e.g. `REFUSED_STREAM`.
    public var name: String {
        switch self {
        case .noError: "NO_ERROR"
        case .protocolError: "PROTOCOL_ERROR"
        case .internalError: "INTERNAL_ERROR"
        case .flowControlError: "FLOW_CONTROL_ERROR"
        case .settingsTimeout: "SETTINGS_TIMEOUT"
        case .streamClosed: "STREAM_CLOSED"
        case .frameSizeError: "FRAME_SIZE_ERROR"
        case .refusedStream: "REFUSED_STREAM"
        case .cancel: "CANCEL"
        case .compressionError: "COMPRESSION_ERROR"
        case .connectError: "CONNECT_ERROR"
        case .enhanceYourCalm: "ENHANCE_YOUR_CALM"
        case .inadequateSecurity: "INADEQUATE_SECURITY"
        case .http11Required: "HTTP_1_1_REQUIRED"
        }
    }

    /// The code a scenario names, e.g. `REFUSED_STREAM` (any case).
    public init?(name: String) {
        guard let code = Self.allCases.first(where: { $0.name == name.uppercased() }) else { return nil }
        self = code
    }
}


/// Why the server closed a connection on its own, after a complete response: the connection policy. Marked
/// on the response that was the connection's last, so a test can prove the stale keep-alive race.
public enum PolicyClose: String, Sendable, Equatable {
    /// `connections.maxRequests`: the connection served its last request.
    case maxRequests = "max-requests"
    /// `connections.idleCloseMs`: the kept-alive connection sat idle too long.
    case idleClose = "idle-close"
}

/// What the server will do for one request: the steps plus the facts the journal records about them.
package struct ResponseScript: Sendable, Equatable {
    package var steps: [ScriptStep]
    /// The status the head carries; nil for scripts that send no head (`reset`, `garbage`, …).
    package var status: Int?
    package var fault: String?
    /// Whether the connection stays open for another request once the steps are done.
    package var keepAlive: Bool
    /// Close the kept-alive connection if no request starts within this many milliseconds of the response.
    package var idleCloseMilliseconds: Int?
    /// Set when the connection policy ends the connection after this response (`maxRequests`).
    package var policyClose: PolicyClose?
    /// The well-formed response the step describes (before any fault breaks it), when the engine asked
    /// for it: what an idempotent route stores for replay.
    package var response: HTTPResponse?

    package init(steps: [ScriptStep], status: Int?, fault: String? = nil, keepAlive: Bool) {
        self.steps = steps
        self.status = status
        self.fault = fault
        self.keepAlive = keepAlive
    }

    /// A plain response that honours the client's keep-alive wish (RFC 9112 §9.3) and HEAD (no body).
    package static func simple(for request: HTTPRequest, response: HTTPResponse) -> ResponseScript {
        var response = response
        let keepAlive = request.head.clientWantsKeepAlive
        if keepAlive && request.head.version == .http1_0 {
            response.headers.append(name: "Connection", value: "keep-alive")
        }
        let head = ResponseHead(
            status: response.status, headers: response.headers, bodyLength: response.body.count, close: !keepAlive,
            date: response.date)
        var steps: [ScriptStep] = [.head(head)]
        if request.method != "HEAD" && !response.body.isEmpty { steps.append(.body(response.body)) }
        steps.append(.end)
        if !keepAlive { steps.append(.endConnection(.connectionClose)) }
        return ResponseScript(steps: steps, status: response.status, keepAlive: keepAlive)
    }
}
