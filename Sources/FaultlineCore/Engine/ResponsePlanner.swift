/// A step with what can be worked out once, at load time. A class, immutable: the request path passes it
/// around by reference instead of copying the step's fields.
final class PreparedStep {
    let step: ResponseStep
    /// The body bytes when no placeholder appears in it; nil when it must be rendered per request.
    let staticBody: [UInt8]?
    /// Whether any header value holds a placeholder.
    let templatedHeaders: Bool
    /// The steps of the complete keep-alive response, for the common case of a plain step with nothing to
    /// render: its head is built once, here, and shared by every request it answers.
    let cachedKeepAliveSteps: [ScriptStep]?
    /// The whole script for that response when the step has no delay: shared by every request it answers.
    let cachedKeepAliveScript: ResponseScript?
    /// The same response to a client that asked to close (`Connection: close`, HTTP/1.0 without keep-alive): its
    /// head says `Connection: close` and the script ends the connection after it. No delay, as the one above.
    let cachedCloseScript: ResponseScript?
    /// The step's `Retry-After` value as written, for the Retry-After judgements.
    let retryAfter: String?

    init(_ step: ResponseStep) {
        self.step = step
        retryAfter = step.headers.first(where: { $0.name.caseInsensitiveEquals("retry-after") })?.value
        templatedHeaders = step.headers.contains { Template.hasPlaceholders($0.value) }
        switch step.body {
        case .empty: staticBody = []
        case .bytes(let bytes), .file(_, let bytes): staticBody = bytes
        case .text(let text): staticBody = Template.hasPlaceholders(text) ? nil : Array(text.utf8)
        case .json(let value):
            if Template.hasPlaceholders(value) {
                staticBody = nil
            } else {
                var bytes: [UInt8] = []
                value.serialize(into: &bytes)
                staticBody = bytes
            }
        }
        if let body = staticBody, !templatedHeaders, step.fault == nil, step.drip == nil, !step.closeConnection {
            // Built once and shared: the codec adds each response's Date as it writes the head.
            let head = ResponseHead(
                status: step.status, headers: Self.headers(step, rendered: nil), bodyLength: body.count, close: false,
                date: step.date)
            func steps(_ head: ResponseHead) -> [ScriptStep] {
                body.isEmpty ? [.head(head), .end] : [.head(head), .body(body), .end]
            }
            cachedKeepAliveSteps = steps(head)
            let closing = ResponseHead(
                status: step.status, headers: head.headers, bodyLength: body.count, close: true, date: step.date)
            cachedCloseScript = step.delay == nil ? ResponseScript(
                steps: steps(closing) + [.endConnection(.connectionClose)], status: step.status, keepAlive: false) : nil
        } else {
            cachedKeepAliveSteps = nil
            cachedCloseScript = nil
        }
        cachedKeepAliveScript = step.delay == nil ? cachedKeepAliveSteps.map {
            ResponseScript(steps: $0, status: step.status, keepAlive: true)
        } : nil
    }

    /// The step's headers, rendered when a context is given, with a default `Content-Type` for its body kind
    /// unless the step sets one.
    static func headers(_ step: ResponseStep, rendered: ((String) -> String)?) -> HTTPHeaders {
        var headers = HTTPHeaders()
        var hasContentType = false
        for field in step.headers {
            if field.name.caseInsensitiveEquals("content-type") { hasContentType = true }
            headers.append(name: field.name, value: rendered?(field.value) ?? field.value)
        }
        if !hasContentType {
            switch step.body {
            case .empty: break
            case .json: headers.append(name: "Content-Type", value: "application/json")
            case .text: headers.append(name: "Content-Type", value: "text/plain; charset=utf-8")
            case .bytes, .file: headers.append(name: "Content-Type", value: "application/octet-stream")
            }
        }
        return headers
    }
}

/// Builds the response script for a step (ARCHITECTURE §4): a normal response, a slow one, or a named fault.
/// Every fault is a small function from the step's response to a list of protocol-neutral `ScriptStep`s.
enum ResponsePlanner {
    /// `extraHeaders` (RateLimit fields) are added to the response; `keepResponse` puts the well-formed
    /// response in the script, for idempotent replay.
    static func plan(
        _ prepared: PreparedStep, for request: HTTPRequest, context: inout TemplateContext,
        random: inout SeededRandom, extraHeaders: [(name: String, value: String)] = [], keepResponse: Bool = false
    ) -> ResponseScript {
        cachedPlan(prepared, for: request, random: &random, extraHeaders: extraHeaders, keepResponse: keepResponse)
            ?? renderedPlan(
                prepared, for: request, context: &context, random: &random, extraHeaders: extraHeaders,
                keepResponse: keepResponse)
    }

    /// The script built for this request: rendered, with faults, drips and extra headers. `plan` without the
    /// fast path, for a caller that tried `cachedPlan` already.
    static func renderedPlan(
        _ prepared: PreparedStep, for request: HTTPRequest, context: inout TemplateContext,
        random: inout SeededRandom, extraHeaders: [(name: String, value: String)], keepResponse: Bool
    ) -> ResponseScript {
        let step = prepared.step
        let waits = waitSteps(step.delay, &random)

        var resourceID: Int?
        let body = prepared.staticBody ?? renderBody(step.body, &context, &resourceID)
        let headers: HTTPHeaders
        if prepared.templatedHeaders {
            let snapshot = context
            var id = resourceID
            headers = PreparedStep.headers(step, rendered: { Template.render($0, snapshot, resourceID: &id) })
            resourceID = id
        } else {
            headers = PreparedStep.headers(step, rendered: nil)
        }
        return respond(
            HTTPResponse(status: step.status, headers: headers, body: body), step: step, after: waits, for: request,
            random: &random, extraHeaders: extraHeaders, keepResponse: keepResponse)
    }

    /// The script that sends `response` as `step` says — after `waits`, with its drip, or broken by its fault —
    /// whoever made the response: a scripted step's rendering, or an upstream's answer to a `proxy` step
    /// (`ProxyPlan`, ARCHITECTURE §4d).
    static func respond(
        _ response: HTTPResponse, step: ResponseStep, after waits: [ScriptStep], for request: HTTPRequest,
        random: inout SeededRandom, extraHeaders: [(name: String, value: String)], keepResponse: Bool
    ) -> ResponseScript {
        var steps = waits
        let isHead = request.method == "HEAD"
        let keepAlive = request.head.clientWantsKeepAlive && !step.closeConnection
        var response = response
        response.date = response.date && step.date
        for field in extraHeaders { response.headers.append(name: field.name, value: field.value) }
        let nominal = keepResponse ? response : nil
        if keepAlive && request.head.version == .http1_0 {
            response.headers.append(name: "Connection", value: "keep-alive")
        }
        if let fault = step.fault {
            var script = faultScript(
                fault, response, body: nil, headOnly: isHead, after: steps, keepAlive: keepAlive, &random)
            script.response = nominal
            return script
        }
        let head = ResponseHead(
            status: response.status, headers: response.headers, bodyLength: response.body.count, close: !keepAlive,
            date: response.date)
        if let drip = step.drip, !isHead {
            steps += dripSteps(head: head, body: response.body, drip)
        } else {
            steps.append(.head(head))
            if !isHead && !response.body.isEmpty { steps.append(.body(response.body)) }
            steps.append(.end)
        }
        if !keepAlive { steps.append(.endConnection(.connectionClose)) }
        var script = ResponseScript(steps: steps, status: response.status, keepAlive: keepAlive)
        script.response = nominal
        return script
    }

    /// The fast path: a plain step (nothing to render, no fault, no drip) for an HTTP/1.1 keep-alive client or
    /// an HTTP/2 stream is the steps prepared at load time, after its delay if it has one (`respond` would build
    /// the same: HTTP/2 has no per-request close); for a client that asked to close, the prepared closing script
    /// when the step has no delay. Sharing the head also lets the HTTP/2 codec reuse the fields it made of it
    /// (`HTTP2Connection.submit`). Nil when it does not apply; then no random number was drawn, so `plan` draws
    /// the delay as usual.
    static func cachedPlan(
        _ prepared: PreparedStep, for request: HTTPRequest, random: inout SeededRandom,
        extraHeaders: [(name: String, value: String)], keepResponse: Bool
    ) -> ResponseScript? {
        guard let cached = prepared.cachedKeepAliveSteps, extraHeaders.isEmpty, !keepResponse, request.method != "HEAD"
        else { return nil }
        // A client that asks to close gets the prepared closing script (HTTP/1.x; `respond` would build the same:
        // `Connection: close`, then the end of the connection). HTTP/1.0 keep-alive is not prepared: it adds a field.
        guard request.head.clientWantsKeepAlive else { return prepared.cachedCloseScript }
        guard request.head.version == .http1_1 || request.head.version.major == 2 else { return nil }
        if let script = prepared.cachedKeepAliveScript { return script }
        let steps = waitSteps(prepared.step.delay, &random) + cached
        return ResponseScript(steps: steps, status: prepared.step.status, keepAlive: true)
    }

    private static func renderBody(_ body: StepBody, _ context: inout TemplateContext, _ id: inout Int?) -> [UInt8] {
        switch body {
        case .empty: return []
        case .bytes(let bytes), .file(_, let bytes): return bytes
        case .text(let text): return Array(Template.render(text, context, resourceID: &id).utf8)
        case .json(let value):
            var bytes: [UInt8] = []
            Template.render(value, context, resourceID: &id).serialize(into: &bytes)
            return bytes
        }
    }

    /// The body in `drip.size` pieces with `drip.intervalMilliseconds` between them. When the step declares
    /// `Transfer-Encoding: chunked`, the HTTP/1.1 codec sends each piece as one chunk; otherwise `Content-Length`
    /// frames the whole body.
    private static func dripSteps(head: ResponseHead, body: [UInt8], _ drip: DripSpec) -> [ScriptStep] {
        var steps: [ScriptStep] = [.head(head)]
        var offset = 0
        while offset < body.count {
            let end = min(offset + max(drip.size, 1), body.count)
            if offset > 0 && drip.intervalMilliseconds > 0 { steps.append(.wait(milliseconds: drip.intervalMilliseconds)) }
            steps.append(.body(Array(body[offset..<end])))
            offset = end
        }
        steps.append(.end)
        return steps
    }

    // MARK: - Faults

    /// A body for faults that need bytes to break when the step scripted none.
    private static let placeholderBody = Array(#"{"id":"faultline","message":"this body is broken on purpose"}"#.utf8)

    /// The wait a step's delay asks for (drawn from `random` for a distribution); none for no delay or 0 ms.
    static func waitSteps(_ delay: DelaySpec?, _ random: inout SeededRandom) -> [ScriptStep] {
        guard let delay else { return [] }
        let ms = delay.milliseconds(using: &random)
        return ms > 0 ? [.wait(milliseconds: ms)] : []
    }

    /// The script of `response` broken by `fault`, after `steps` (a delay): the status the head carries (none
    /// when the fault sends no head; 502 for an error page over a success), and a connection kept only when the
    /// client wants it and the fault leaves it usable.
    static func faultScript(
        _ fault: FaultSpec, _ response: HTTPResponse, body: BodyPieces?, headOnly: Bool, after steps: [ScriptStep],
        keepAlive: Bool, _ random: inout SeededRandom
    ) -> ResponseScript {
        let broken = faultSteps(fault, response, body: body, headOnly: headOnly, &random)
        var status = fault.name.sendsHead(fault.after) ? response.status : nil
        if fault.name == .htmlErrorPage, let code = status, code < 400 { status = 502 }
        return ResponseScript(
            steps: steps + broken, status: status, fault: fault.name.rawValue,
            keepAlive: keepAlive && fault.name.keepsConnection)
    }

    /// `headOnly`: the request was HEAD, so the well-framed body faults send their header section only (RFC 9110
    /// §9.3.2); the connection-breaking faults break the connection the same way either way. `body` is the body to
    /// break when it is not `response.body` (a resource's representation, which is never copied whole: the faults
    /// that cut it send slices of it).
    private static func faultSteps(
        _ fault: FaultSpec, _ response: HTTPResponse, body: BodyPieces?, headOnly: Bool,
        _ random: inout SeededRandom
    ) -> [ScriptStep] {
        var pieces = body ?? BodyPieces([.bytes(response.body)])
        if pieces.isEmpty && fault.name.needsBody { pieces = BodyPieces([.bytes(placeholderBody)]) }
        let steps = faultSteps(fault, response, pieces, &random)
        guard headOnly, fault.name.keepsConnection else { return steps }
        return steps.filter { step in
            if case .body = step { return false }
            if case .stream = step { return false }
            return true
        }
    }

    /// The head of `response` as a fault sends it: `bodyLength` is what it announces, whatever follows.
    private static func head(_ response: HTTPResponse, close: Bool, bodyLength: Int) -> ResponseHead {
        ResponseHead(
            status: response.status, headers: response.headers, bodyLength: bodyLength, close: close,
            date: response.date)
    }

    /// A well-framed response on a connection that stays usable.
    private static func whole(_ response: HTTPResponse) -> [ScriptStep] {
        let head = head(response, close: false, bodyLength: response.body.count)
        return response.body.isEmpty ? [.head(head), .end] : [.head(head), .body(response.body), .end]
    }

    private static func faultSteps(
        _ fault: FaultSpec, _ response: HTTPResponse, _ pieces: BodyPieces, _ random: inout SeededRandom
    ) -> [ScriptStep] {
        var response = response
        let length = pieces.count
        /// The faults that rewrite the body's bytes work on a copy of them.
        var body: [UInt8] { pieces.materialized() }
        /// The head announcing the whole body.
        func announced(close: Bool) -> ResponseHead { head(response, close: close, bodyLength: length) }
        switch fault.name {
        case .reset, .commitThenReset:
            // commit-then-*: the engine has already applied the side effect and stored the response.
            return [.abortConnection(.reset)]
        case .commitThenHang, .hang:
            return [.hang]
        case .emptyReply:
            return [.abortConnection(.close)]
        case .halfClose:
            // FIN from our side after the chosen prefix, then keep reading: whatever the client still sends
            // is journaled.
            switch fault.after {
            case .nothing:
                return [.abortConnection(.shutdownWrite), .hang]
            case .headers:
                return [.head(announced(close: false)), .abortConnection(.shutdownWrite), .hang]
            case .body:
                let sent = min(fault.bytes ?? length / 2, length)
                return [.head(announced(close: false))] + pieces.prefix(sent).steps
                    + [.abortConnection(.shutdownWrite), .hang]
            }
        case .noCloseNotify:
            // The body is delimited by the close alone, so only TLS's close_notify could tell a client it is whole.
            let sent = min(fault.bytes ?? length, length)
            let head = ResponseHead(
                status: response.status, headers: response.headers, bodyLength: 0, close: true, date: response.date,
                framed: false)
            return [.head(head)] + pieces.prefix(sent).steps + [.abortConnection(.closeWithoutNotify)]
        case .closeAfterHeaders, .stallAfterHeaders, .truncateBody, .rstStream:
            // The head, a prefix of the body, then the break (`FaultName.bodyCut`: a streamed proxy body is cut by
            // the same definition). truncate-body is deliberately wrong: Content-Length promises the whole body, we
            // send part of it and abandon it. rst-stream before the head resets the stream alone.
            guard let cut = fault.bodyCut else {
                return [.http2(.resetStream(code: (fault.code ?? .internalError).rawValue))]
            }
            let sent = fault.sentBeforeCut(cut, ofBodyLength: length)
            return [.head(announced(close: cut.headCloses))] + pieces.prefix(sent).steps + [cut.ending]
        case .overlongBody:
            // Deliberately wrong: more bytes than Content-Length declares. A client that reuses the
            // connection would read the excess as the start of the next response, so we close.
            let pattern = Array("FAULTLINE-OVERLONG-BODY-EXCESS-BYTES\r\n".utf8)
            let excess = (0..<(fault.bytes ?? pattern.count)).map { pattern[$0 % pattern.count] }
            return [.head(announced(close: true))] + pieces.steps + [.raw(excess), .abortExchange]
        case .malformedChunk:
            var headers = response.headers
            headers.append(name: "Transfer-Encoding", value: "chunked")
            let head = ResponseHead(
                status: response.status, headers: headers, bodyLength: 0, close: true, date: response.date)
            let size = Array(String(length, radix: 16).utf8)
            let crlf = Array("\r\n".utf8)
            switch fault.chunkBreak {
            case .badSize:
                // Deliberately wrong: the chunk size is not hexadecimal.
                return [.head(head), .raw(Array("zz".utf8) + crlf + body + crlf), .abortExchange]
            case .missingCRLF:
                // Deliberately wrong: the chunk's data runs straight into the next chunk-size line.
                return [.head(head), .raw(size + crlf + body + Array("0\r\n\r\n".utf8)), .abortExchange]
            case .missingTerminator:
                // Deliberately wrong: a valid chunk, then the connection ends without the zero-size chunk.
                return [.head(head), .raw(size + crlf + body + crlf), .abortExchange]
            }
        case .goaway:
            // The GOAWAY first; the stream is answered only when the GOAWAY's last stream id covers it.
            let action = HTTP2Action.goaway(
                last: fault.lastStream, code: (fault.code ?? .noError).rawValue, graceful: fault.graceful)
            let head = announced(close: false)
            return [.http2(action), .head(head)] + pieces.steps + [.end]
        case .rawFrames:
            let raw: ScriptStep = fault.frames.isEmpty ? .raw(fault.rawBytes) : .http2(.frames(fault.frames))
            return [raw, .hang]
        case .garbage:
            let count = fault.bytes ?? 64 + Int(random.next() % 449)
            return [.raw((0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }), .abortConnection(.close)]
        case .corruptJSON:
            // A raw control byte is invalid anywhere in JSON (RFC 8259 §7), inside a string or out of one.
            var broken = body
            let at = 1 + Int(random.next() % UInt64(max(broken.count - 1, 1)))
            broken.insert(contentsOf: [0x01, 0x7D], at: min(at, broken.count))
            response.body = broken
            return whole(response)
        case .truncatedJSON:
            // Framed correctly (Content-Length is the cut length), but the JSON text stops mid-value.
            let cut = max(1, Int(random.next() % UInt64(max(length - 1, 1))))
            response.body = Array(body.prefix(cut))
            return whole(response)
        case .wrongContentType:
            response.headers = HTTPHeaders(response.headers.fields.filter { !$0.name.caseInsensitiveEquals("content-type") })
            response.headers.append(name: "Content-Type", value: "text/html; charset=utf-8")
            return [.head(announced(close: false))] + pieces.steps + [.end]
        case .htmlErrorPage:
            let status = response.status < 400 ? 502 : response.status
            let reason = HTTPStatus.reasonPhrase(status)
            let page = "<html>\r\n<head><title>\(status) \(reason)</title></head>\r\n<body>\r\n"
                + "<center><h1>\(status) \(reason)</h1></center>\r\n<hr><center>gateway</center>\r\n</body>\r\n</html>\r\n"
            var error = HTTPResponse(
                status: status, headers: HTTPHeaders([("Content-Type", "text/html")]), body: Array(page.utf8))
            error.date = response.date
            return whole(error)
        case .badGzip:
            response.headers.append(name: "Content-Encoding", value: "gzip")
            // Not gzip: the first byte is never the 0x1f magic.
            response.body = [0x00] + (0..<63).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            return whole(response)
        }
    }

    // MARK: - Answers the server gives on its own

    /// 404 for a request no route took, naming the nearest route and why it missed.
    static func notFound(_ request: HTTPRequest, _ info: UnmatchedInfo) -> ResponseScript {
        var nearest: JSONValue = .null
        if let route = info.nearestRoute {
            nearest = .object([
                ("scenario", info.nearestScenario.map(JSONValue.string) ?? .null),
                ("route", .string(route)),
                ("reason", .string(info.reason)),
            ])
        }
        let body: JSONValue = .object([
            ("error", .string("no route matched")),
            ("method", .string(request.method)),
            ("path", .string(request.path)),
            ("nearest", nearest),
            ("hint", .string(info.nearestRoute == nil ? info.reason : "the nearest route missed because " + info.reason)),
        ])
        return ResponseScript.simple(for: request, response: .json(404, body))
    }

    /// 500 for a route whose script ran out with `afterLast: "fail"`.
    static func scriptExhausted(_ request: HTTPRequest, routeID: String, played: Int) -> ResponseScript {
        let body: JSONValue = .object([
            ("error", .string("script exhausted")),
            ("route", .string(routeID)),
            ("message", .string("route \(routeID) played all \(played) scripted responses and its afterLast is \"fail\"")),
        ])
        return ResponseScript.simple(for: request, response: .json(500, body))
    }

}
