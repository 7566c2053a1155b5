/// A step with everything that does not depend on the request worked out once, at load time.
/// A step with what can be worked out once, at load time. A class, immutable: the request path passes it
/// around by reference instead of copying the step's fields.
final class PreparedStep {
    let step: ResponseStep
    /// The body bytes when no placeholder appears in it; nil when it must be rendered per request.
    let staticBody: [UInt8]?
    /// Whether any header value holds a placeholder.
    let templatedHeaders: Bool
    /// The complete HTTP/1.1 keep-alive response, for the common case of a plain step with nothing to
    /// render: serving it is a single write of cached bytes.
    let cachedKeepAliveResponse: [UInt8]?
    /// The whole plan for that response when the step has no delay: shared by every request it answers.
    let cachedKeepAlivePlan: ResponsePlan?
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
            let response = HTTPResponse(status: step.status, headers: Self.headers(step, rendered: nil), body: body)
            cachedKeepAliveResponse = response.serialized(close: false)
        } else {
            cachedKeepAliveResponse = nil
        }
        cachedKeepAlivePlan = step.delay == nil ? cachedKeepAliveResponse.map {
            ResponsePlan(actions: [.write($0)], status: step.status, keepAlive: true)
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

/// Builds the wire actions for a step (DESIGN §3): a normal response, a slow one, or a named fault.
/// Every fault is a small function from the step's response to a list of `WireAction`s.
enum ResponsePlanner {
    /// `extraHeaders` (RateLimit fields) are added to the response; `keepResponse` puts the well-formed
    /// response in the plan, for idempotent replay.
    static func plan(
        _ prepared: PreparedStep, for request: HTTPRequest, context: inout TemplateContext,
        random: inout SeededRandom, extraHeaders: [(name: String, value: String)] = [], keepResponse: Bool = false
    ) -> ResponsePlan {
        cachedPlan(prepared, for: request, random: &random, extraHeaders: extraHeaders, keepResponse: keepResponse)
            ?? renderedPlan(
                prepared, for: request, context: &context, random: &random, extraHeaders: extraHeaders,
                keepResponse: keepResponse)
    }

    /// The plan built for this request: rendered, with faults, drips and extra headers. `plan` without the
    /// fast path, for a caller that tried `cachedPlan` already.
    static func renderedPlan(
        _ prepared: PreparedStep, for request: HTTPRequest, context: inout TemplateContext,
        random: inout SeededRandom, extraHeaders: [(name: String, value: String)], keepResponse: Bool
    ) -> ResponsePlan {
        let step = prepared.step
        var actions: [WireAction] = []
        if let delay = step.delay {
            let ms = delay.milliseconds(using: &random)
            if ms > 0 { actions.append(.wait(milliseconds: ms)) }
        }
        let isHead = request.method == "HEAD"
        let keepAlive = request.head.clientWantsKeepAlive && !step.closeConnection

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
        var response = HTTPResponse(status: step.status, headers: headers, body: body)
        for field in extraHeaders { response.headers.append(name: field.name, value: field.value) }
        let nominal = keepResponse ? response : nil
        if keepAlive && request.head.version == .http1_0 {
            response.headers.append(name: "Connection", value: "keep-alive")
        }
        if let fault = step.fault {
            actions += faultActions(fault, response, headOnly: isHead, &random)
            let noStatusLine: [FaultName] = [.reset, .emptyReply, .garbage, .hang, .commitThenReset, .commitThenHang]
            let sendsStatus = !noStatusLine.contains(fault.name) && !(fault.name == .halfClose && fault.after == .nothing)
            var status = sendsStatus ? response.status : nil
            if fault.name == .htmlErrorPage, let code = status, code < 400 { status = 502 }
            var plan = ResponsePlan(
                actions: actions, status: status, fault: fault.name.rawValue,
                keepAlive: keepAlive && fault.name.keepsConnection)
            plan.response = nominal
            return plan
        }
        let head = response.serializedHead(close: !keepAlive)
        if let drip = step.drip, !isHead {
            actions += dripActions(head: head, response: response, drip)
        } else {
            actions.append(.write(isHead ? head : head + response.body))
        }
        if !keepAlive { actions.append(.close) }
        var plan = ResponsePlan(actions: actions, status: response.status, keepAlive: keepAlive)
        plan.response = nominal
        return plan
    }

    /// The fast path: a plain step (nothing to render, no fault, no drip) for an HTTP/1.1 keep-alive client is
    /// one write of the bytes prepared at load time, after its delay if it has one. Nil when it does not apply;
    /// then no random number was drawn, so `plan` draws the delay as usual.
    static func cachedPlan(
        _ prepared: PreparedStep, for request: HTTPRequest, random: inout SeededRandom,
        extraHeaders: [(name: String, value: String)], keepResponse: Bool
    ) -> ResponsePlan? {
        guard let cached = prepared.cachedKeepAliveResponse, extraHeaders.isEmpty, !keepResponse,
              request.head.version == .http1_1, request.method != "HEAD", request.head.clientWantsKeepAlive
        else { return nil }
        if let plan = prepared.cachedKeepAlivePlan { return plan }
        var actions: [WireAction] = []
        if let delay = prepared.step.delay {
            let ms = delay.milliseconds(using: &random)
            if ms > 0 { actions.append(.wait(milliseconds: ms)) }
        }
        actions.append(.write(cached))
        return ResponsePlan(actions: actions, status: prepared.step.status, keepAlive: true)
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
    /// `Transfer-Encoding: chunked`, each piece is one chunk; otherwise `Content-Length` frames the whole body.
    private static func dripActions(head: [UInt8], response: HTTPResponse, _ drip: DripSpec) -> [WireAction] {
        let chunked = response.headers["transfer-encoding"]?.lowercased().contains("chunked") ?? false
        var actions: [WireAction] = [.write(head)]
        var offset = 0
        let body = response.body
        while offset < body.count {
            let end = min(offset + max(drip.size, 1), body.count)
            if offset > 0 && drip.intervalMilliseconds > 0 { actions.append(.wait(milliseconds: drip.intervalMilliseconds)) }
            let piece = Array(body[offset..<end])
            actions.append(.write(chunked ? Array("\(String(piece.count, radix: 16))\r\n".utf8) + piece + [13, 10] : piece))
            offset = end
        }
        if chunked { actions.append(.write(Array("0\r\n\r\n".utf8))) }
        return actions
    }

    // MARK: - Faults

    /// A body for faults that need bytes to break when the step scripted none.
    private static let placeholderBody = Array(#"{"id":"faultline","message":"this body is broken on purpose"}"#.utf8)

    /// `headOnly`: the request was HEAD, so the well-framed body faults send their header section only (RFC 9110
    /// §9.3.2); the connection-breaking faults break the connection the same way either way.
    private static func faultActions(
        _ fault: FaultSpec, _ response: HTTPResponse, headOnly: Bool, _ random: inout SeededRandom
    ) -> [WireAction] {
        let actions = faultActions(fault, response, &random)
        guard headOnly, fault.name.keepsConnection, case .write(let bytes)? = actions.first, actions.count == 1 else {
            return actions
        }
        let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)).map(\.upperBound) ?? bytes.count
        return [.write(Array(bytes[..<end]))]
    }

    private static func faultActions(
        _ fault: FaultSpec, _ response: HTTPResponse, _ random: inout SeededRandom
    ) -> [WireAction] {
        var response = response
        if response.body.isEmpty && fault.name.needsBody {
            response.body = placeholderBody
        }
        let body = response.body
        switch fault.name {
        case .reset, .commitThenReset:
            // commit-then-*: the engine has already applied the side effect and stored the response.
            return [.reset]
        case .commitThenHang:
            return [.hang]
        case .emptyReply:
            return [.close]
        case .halfClose:
            // FIN from our side after the chosen prefix, then keep reading: whatever the client still sends
            // is journaled.
            switch fault.after {
            case .nothing:
                return [.shutdownWrite, .hang]
            case .headers:
                return [.write(response.serializedHead(close: false)), .shutdownWrite, .hang]
            case .body:
                let sent = min(fault.bytes ?? body.count / 2, body.count)
                return [.write(response.serializedHead(close: false) + body.prefix(sent)), .shutdownWrite, .hang]
            }
        case .hang:
            return [.hang]
        case .closeAfterHeaders:
            return [.write(response.serializedHead(close: false)), .close]
        case .stallAfterHeaders:
            return [.write(response.serializedHead(close: false)), .hang]
        case .truncateBody:
            // Deliberately wrong: Content-Length promises the whole body, we send part of it and close.
            let sent = min(fault.bytes ?? body.count / 2, max(body.count - 1, 0))
            return [.write(response.serializedHead(close: true) + body.prefix(sent)), .close]
        case .overlongBody:
            // Deliberately wrong: more bytes than Content-Length declares. A client that reuses the
            // connection would read the excess as the start of the next response, so we close.
            let pattern = Array("FAULTLINE-OVERLONG-BODY-EXCESS-BYTES\r\n".utf8)
            let excess = (0..<(fault.bytes ?? pattern.count)).map { pattern[$0 % pattern.count] }
            return [.write(response.serializedHead(close: true) + body + excess), .close]
        case .malformedChunk:
            var headers = response.headers
            headers.append(name: "Transfer-Encoding", value: "chunked")
            let head = HTTPResponse(status: response.status, headers: headers).serializedHead(close: true)
            let size = Array(String(body.count, radix: 16).utf8)
            let crlf = Array("\r\n".utf8)
            switch fault.chunkBreak {
            case .badSize:
                // Deliberately wrong: the chunk size is not hexadecimal.
                return [.write(head + Array("zz".utf8) + crlf + body + crlf), .close]
            case .missingCRLF:
                // Deliberately wrong: the chunk's data runs straight into the next chunk-size line.
                return [.write(head + size + crlf + body + Array("0\r\n\r\n".utf8)), .close]
            case .missingTerminator:
                // Deliberately wrong: a valid chunk, then the connection ends without the zero-size chunk.
                return [.write(head + size + crlf + body + crlf), .close]
            }
        case .garbage:
            let count = fault.bytes ?? 64 + Int(random.next() % 449)
            return [.write((0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }), .close]
        case .corruptJSON:
            // A raw control byte is invalid anywhere in JSON (RFC 8259 §7), inside a string or out of one.
            var broken = body
            let at = 1 + Int(random.next() % UInt64(max(body.count - 1, 1)))
            broken.insert(contentsOf: [0x01, 0x7D], at: min(at, broken.count))
            response.body = broken
            return [.write(response.serialized(close: false))]
        case .truncatedJSON:
            // Framed correctly (Content-Length is the cut length), but the JSON text stops mid-value.
            let cut = max(1, Int(random.next() % UInt64(max(body.count - 1, 1))))
            response.body = Array(body.prefix(cut))
            return [.write(response.serialized(close: false))]
        case .wrongContentType:
            response.headers = HTTPHeaders(response.headers.fields.filter { !$0.name.caseInsensitiveEquals("content-type") })
            response.headers.append(name: "Content-Type", value: "text/html; charset=utf-8")
            return [.write(response.serialized(close: false))]
        case .htmlErrorPage:
            let status = response.status < 400 ? 502 : response.status
            let reason = HTTPStatus.reasonPhrase(status)
            let page = "<html>\r\n<head><title>\(status) \(reason)</title></head>\r\n<body>\r\n"
                + "<center><h1>\(status) \(reason)</h1></center>\r\n<hr><center>gateway</center>\r\n</body>\r\n</html>\r\n"
            let html = HTTPResponse(
                status: status, headers: HTTPHeaders([("Content-Type", "text/html")]), body: Array(page.utf8))
            return [.write(html.serialized(close: false))]
        case .badGzip:
            response.headers.append(name: "Content-Encoding", value: "gzip")
            // Not gzip: the first byte is never the 0x1f magic.
            response.body = [0x00] + (0..<63).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            return [.write(response.serialized(close: false))]
        }
    }

    // MARK: - Answers the server gives on its own

    /// 404 for a request no route took, naming the nearest route and why it missed.
    static func notFound(_ request: HTTPRequest, _ info: UnmatchedInfo) -> ResponsePlan {
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
        return ResponsePlan.simple(for: request, response: .json(404, body))
    }

    /// 500 for a route whose script ran out with `afterLast: "fail"`.
    static func scriptExhausted(_ request: HTTPRequest, routeID: String, played: Int) -> ResponsePlan {
        let body: JSONValue = .object([
            ("error", .string("script exhausted")),
            ("route", .string(routeID)),
            ("message", .string("route \(routeID) played all \(played) scripted responses and its afterLast is \"fail\"")),
        ])
        return ResponsePlan.simple(for: request, response: .json(500, body))
    }

}

extension ResponsePlan {
    /// A plain response that honours the client's keep-alive wish (RFC 9112 §9.3) and HEAD (no body).
    public static func simple(for request: HTTPRequest, response: HTTPResponse) -> ResponsePlan {
        var response = response
        let keepAlive = request.head.clientWantsKeepAlive
        if keepAlive && request.head.version == .http1_0 {
            response.headers.append(name: "Connection", value: "keep-alive")
        }
        let head = response.serializedHead(close: !keepAlive)
        var actions: [WireAction] = [.write(request.method == "HEAD" ? head : head + response.body)]
        if !keepAlive { actions.append(.close) }
        return ResponsePlan(actions: actions, status: response.status, keepAlive: keepAlive)
    }
}

extension FaultName {
    /// Faults that break a body need one to break.
    var needsBody: Bool {
        switch self {
        case .truncateBody, .overlongBody, .malformedChunk, .corruptJSON, .truncatedJSON, .closeAfterHeaders,
             .stallAfterHeaders:
            return true
        default:
            return false
        }
    }

    /// Faults after which the connection is still usable for the next request.
    var keepsConnection: Bool {
        switch self {
        case .corruptJSON, .truncatedJSON, .wrongContentType, .htmlErrorPage, .badGzip: return true
        default: return false
        }
    }
}
