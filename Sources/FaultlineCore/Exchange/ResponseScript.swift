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
    /// The fields (HTTP/2 sends them; HTTP/1.1 sends `http1`). A forwarded response's are made only when read
    /// (`ProxyHeaders.clientHead`): an HTTP/1.1 client never needs them as strings.
    package var headers: HTTPHeaders { givenHeaders ?? deferredHeaders?() ?? HTTPHeaders() }
    private let givenHeaders: HTTPHeaders?
    private let deferredHeaders: (@Sendable () -> HTTPHeaders)?
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
        givenHeaders = headers
        deferredHeaders = nil
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
    /// (`ProxyHeaders.clientHead`): `http1` must be what the other initializer would make of `headers`, and
    /// `addsDate` what it would decide. `headers` is called each time they are read, and only then.
    package init(
        status: Int, headers: @escaping @Sendable () -> HTTPHeaders, http1: [UInt8], statusLineLength: Int,
        contentLength: Int?, chunked: Bool, addsDate: Bool
    ) {
        self.status = status
        givenHeaders = nil
        deferredHeaders = headers
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
    /// A frame-level action only HTTP/2 has: RST_STREAM with a code, GOAWAY (`HTTP2Steps.swift`).
    case http2(HTTP2Action)
    /// After a 101: the connection switches to WebSocket (RFC 6455) and plays this session. HTTP/1.1 only.
    case upgrade(WebSocketSessionPlan)
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
