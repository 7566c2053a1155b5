/// Why a forwarded request got no usable response: the journal's `proxy.failure` and the 502/504's reason.
package enum UpstreamFailureKind: String, Sendable, Equatable {
    /// The connection was refused or could not be made (ECONNREFUSED, no route, …).
    case refused
    /// The upstream reset or closed the connection before the response was complete.
    case reset
    /// The upstream's bytes are not an HTTP/1.1 response.
    case badResponse = "bad-response"
    /// The TLS handshake failed (certificate not trusted, wrong host name, protocol error).
    case tls
    /// Connecting, or the response, took longer than the configured timeout: 504.
    case timeout
    /// The response is larger than `maxResponseBytes`.
    case tooLarge = "too-large"
    /// The upstream's host name could not be resolved.
    case resolve
    /// No upstream is configured for the request (a proxy step with no `upstream` anywhere).
    case noUpstream = "no-upstream"

    /// 504 for a timeout (RFC 9110 §15.6.5), 502 for everything else (§15.6.3).
    package var status: Int { self == .timeout ? 504 : 502 }
}

/// An idempotency key admitted for a forwarded request: in flight until the upstream answers.
package struct ProxyIdempotency: Sendable {
    package var scope: String
    package var key: String
    package var config: IdempotencyConfig
    /// The engine's generation when it was admitted (a reset or reload since then makes it moot).
    package var generation: Int
}

/// The engine's decision to forward a request (ARCHITECTURE §4d): "forward, then apply this step's delay, drip,
/// headers and fault to whatever comes back". The Dispatcher sends `requestBytes` upstream through the pool and,
/// when the response is read whole, asks `script(for:)` for the script — built by the same `ResponsePlanner`
/// code a scripted step uses. Loop thread only.
package final class ProxyPlan {
    /// The resolved settings: the route's over its scenario's over the command line's.
    package let config: ProxyConfig
    /// The `proxy` step; nil for a request no route took (forwarded as it is).
    package let step: ResponseStep?
    package let request: HTTPRequest
    @exclusivity(unchecked) private var random: SeededRandom
    private let extraHeaders: [(name: String, value: String)]
    /// The connection policy's verdict on this response (`Engine.decide`).
    @exclusivity(unchecked) package var policyClose: PolicyClose?
    @exclusivity(unchecked) package var idleCloseMilliseconds: Int?
    /// The route's idempotency key for this request, if it has one (`settlement(for:)`).
    @exclusivity(unchecked) package var idempotency: ProxyIdempotency?
    /// The response `script(for:)` made from the upstream's, as the client is sent it (before any fault).
    @exclusivity(unchecked) private var answered: HTTPResponse?

    package init(
        config: ProxyConfig, step: ResponseStep?, request: HTTPRequest, seed: UInt64,
        extraHeaders: [(name: String, value: String)]
    ) {
        self.config = config
        self.step = step
        self.request = request
        random = SeededRandom(seed: seed)
        self.extraHeaders = extraHeaders
    }

    /// The URL the request goes to, for the journal and the error bodies; made once.
    package private(set) lazy var upstreamURL: String = {
        guard let upstream = config.upstream else { return "(no upstream)" }
        // Joined as bytes, one allocation: every forwarded request's journal entry carries it.
        let target = request.target
        var url: [UInt8] = []
        url.reserveCapacity(upstream.origin.utf8.count + upstream.basePath.utf8.count + target.utf8.count + 1)
        url.appendUTF8(upstream.origin)
        url.appendUTF8(upstream.basePath)
        if target.utf8.first != UInt8(ascii: "/") { url.append(UInt8(ascii: "/")) }
        url.appendUTF8(target)
        return String(decoding: url, as: UTF8.self)
    }()

    /// The request as the upstream receives it (`ProxyHeaders.upstreamRequest`).
    package func requestBytes(client: String, clientTLS: Bool) -> [UInt8] {
        guard let upstream = config.upstream else { return [] }
        return ProxyHeaders.upstreamRequest(
            request, upstream: upstream, host: config.host ?? .upstream, client: client, clientTLS: clientTLS)
    }

    /// The script for the upstream's `response`: its status, its end-to-end fields (the step's headers replace
    /// fields of the same name) and its body, sent after the step's delay, dripped or broken as the step says.
    /// `record` learns what that changed.
    package func script(for response: UpstreamResponse, record: inout ProxyRecord) -> ResponseScript {
        record.upstreamStatus = response.status
        record.upstreamBytes = response.body.count
        if let plain = plainScript(for: response, record: &record) { return plain }
        var step = self.step ?? ResponseStep()
        step.status = response.status
        var http = HTTPResponse(
            status: response.status, headers: ProxyHeaders.clientResponse(response, requestMethod: request.method),
            body: response.body)
        stepHeaders(step, over: &http.headers, &record)
        noDate(step, &http.headers, &record)
        let waits = delaySteps(step.delay, &record)
        var script = ResponsePlanner.respond(
            http, step: step, after: waits, for: request, random: &random, extraHeaders: extraHeaders,
            keepResponse: idempotency != nil)
        answered = script.response
        script.response = nil
        if let drip = step.drip {
            record.changed.append("chunked: \(drip.size) bytes every \(drip.intervalMilliseconds) ms")
        }
        if let fault = step.fault {
            var sent = 0
            for case .body(let bytes) in script.steps { sent += bytes.count }
            var words = "\(fault.name.rawValue): "
            if let status = script.status, status != response.status {
                words += "status \(response.status) replaced with \(status), "
            } else if script.status == nil {
                words += "no head sent, "
            }
            words += sent == response.body.count ? "\(sent) body bytes sent" : "\(sent) of \(response.body.count) body bytes sent"
            record.changed.append(words)
        }
        applyConnectionPolicy(&script, record: &record)
        return script
    }

    /// The step's headers over the upstream's fields of the same name; `record` says which were set.
    private func stepHeaders(_ step: ResponseStep, over headers: inout HTTPHeaders, _ record: inout ProxyRecord) {
        guard !step.headers.isEmpty else { return }
        for field in step.headers { headers.set(name: field.name, value: field.value) }
        record.changed.append("headers set: " + step.headers.map(\.name).joined(separator: ", "))
    }

    /// `"date": false` on the step: the upstream's Date goes too, so the client gets none at all (the planner adds
    /// none either); `record` says so when there was one.
    private func noDate(_ step: ResponseStep, _ headers: inout HTTPHeaders, _ record: inout ProxyRecord) {
        guard !step.date, headers["date"] != nil else { return }
        headers.remove(name: "Date")
        record.changed.append("Date removed")
    }

    /// The step's delay as the script's first steps, drawn from the plan's stream; `record` says it was added.
    private func delaySteps(_ delay: DelaySpec?, _ record: inout ProxyRecord) -> [ScriptStep] {
        let waits = ResponsePlanner.waitSteps(delay, &random)
        if case .wait(let waited)? = waits.first { record.changed.append("delay \(waited) ms") }
        return waits
    }

    // MARK: - Streaming (ARCHITECTURE §4d)

    /// Whether the upstream's body may go to the client as it arrives rather than read whole first: no drip (it
    /// needs the whole body), no idempotency key waiting to store the answer, a client that can take a body of
    /// unknown length (HTTP/1.1 chunked, HTTP/2 frames; an HTTP/1.0 client cannot), and either no fault or one that
    /// sends the head and a prefix of the body, then breaks (`cutsStream`). Headers, delay and the connection
    /// policy apply to a streamed body as to a whole one; a recording keeps a copy as it passes.
    package func canStream() -> Bool {
        guard step?.drip == nil, idempotency == nil, request.head.version != .http1_0,
              request.method != "HEAD" else { return false }
        guard let fault = step?.fault else { return true }
        return Self.cutsStream(fault)
    }

    /// The faults that need no more of the body than a prefix (`FaultName.bodyCut`): the head, up to N bytes, then
    /// the break. A body can be cut as it streams — a real download cut at byte N for a resume test, whatever its
    /// size.
    package static func cutsStream(_ fault: FaultSpec) -> Bool { fault.bodyCut != nil }

    /// Whether the upstream's head `response` (its body not all there) is streamed: always without a fault; with a
    /// cutting fault only when `Content-Length` gives the length, which the fault's head announces (as the whole
    /// path's does) and its cut is counted from. Otherwise the body is read whole.
    package func streams(_ response: UpstreamResponse) -> Bool {
        step?.fault == nil || response.declaredLength != nil
    }

    /// The beginning of a streamed response's script — the step's delay and the head —, the steps that end it,
    /// and, for a cutting fault, how many body bytes go out before those (nil: all of them). The head is the one
    /// the whole path would send (the upstream's end-to-end fields, the step's headers over them, the extra ones),
    /// framed by the upstream's `Content-Length` when it gave one, else chunked (HTTP/2 sends DATA frames either
    /// way). `response.body`, what came with the head, is not in the script: it goes through the same count as the
    /// rest.
    package func streamOpening(
        _ response: UpstreamResponse, record: inout ProxyRecord
    ) -> (script: ResponseScript, closing: [ScriptStep], keep: Int?) {
        record.upstreamStatus = response.status
        record.streamed = true
        let step = self.step ?? ResponseStep()
        var headers = ProxyHeaders.clientResponse(response, requestMethod: request.method)
        stepHeaders(step, over: &headers, &record)
        noDate(step, &headers, &record)
        for field in extraHeaders { headers.append(name: field.name, value: field.value) }
        var keepAlive = request.head.clientWantsKeepAlive && !step.closeConnection
        let length = response.declaredLength
        if length == nil { headers.append(name: "Transfer-Encoding", value: "chunked") }
        var steps = delaySteps(step.delay, &record)
        var closing: [ScriptStep] = [.end]
        var keep: Int?
        var closeAfterHead = !keepAlive
        if let fault = step.fault, let length {
            if let cut = fault.bodyCut {
                // What `ResponsePlanner.faultSteps` sends for the same fault, counted instead of sliced.
                keep = fault.sentBeforeCut(cut, ofBodyLength: length)
                closing = [cut.ending]
                closeAfterHead = closeAfterHead || cut.headCloses
            }
            keepAlive = keepAlive && fault.name.keepsConnection
            record.changed.append("\(fault.name.rawValue): \(keep ?? length) of \(length) body bytes sent")
        }
        steps.append(.head(ResponseHead(
            status: response.status, headers: headers, bodyLength: length ?? 0, close: closeAfterHead,
            date: step.date)))
        var script = ResponseScript(
            steps: steps, status: response.status, fault: step.fault?.name.rawValue, keepAlive: keepAlive)
        if keep == nil && !keepAlive { closing.append(.endConnection(.connectionClose)) }
        applyConnectionPolicy(&script, record: &record)
        if case .endConnection? = script.steps.last, script.steps.count > steps.count {
            closing.append(script.steps.removeLast())
        }
        return (script, closing, keep)
    }

    /// The common case without the planner: no fault, drip, step headers, `"date": false` or extra headers, no key
    /// to store, an HTTP/1.1 or HTTP/2 client, a response with a body by definition — the upstream's answer as it is,
    /// after the step's delay, its head made in one pass (`ProxyHeaders.clientHead`). The same script `respond` would
    /// make (tested side by side); nil when any of that does not hold.
    private func plainScript(for response: UpstreamResponse, record: inout ProxyRecord) -> ResponseScript? {
        guard idempotency == nil, extraHeaders.isEmpty, request.head.version != .http1_0, request.method != "HEAD",
              response.status >= 200, response.status != 204, response.status != 304 else { return nil }
        if let step, step.fault != nil || step.drip != nil || !step.headers.isEmpty || !step.date { return nil }
        let keepAlive = request.head.clientWantsKeepAlive && !(step?.closeConnection ?? false)
        var steps = delaySteps(step?.delay, &record)
        steps.reserveCapacity(steps.count + 4)
        steps.append(.head(ProxyHeaders.clientHead(response, bodyLength: response.body.count, close: !keepAlive)))
        if !response.body.isEmpty { steps.append(.body(response.body)) }
        steps.append(.end)
        if !keepAlive { steps.append(.endConnection(.connectionClose)) }
        var script = ResponseScript(steps: steps, status: response.status, keepAlive: keepAlive)
        applyConnectionPolicy(&script, record: &record)
        return script
    }

    /// What becomes of the idempotency key once `script(for:)` has made the answer (nil without a key): the
    /// response to store, or nil to free the key, and whether the upstream's work counts as a side effect. As on a
    /// scripted step: a fault other than `commit-then-*` broke the exchange before the client could learn the
    /// outcome, so the key is freed (the upstream still did the work: that is the side effect a retry then
    /// duplicates, which `noDuplicateSideEffects` is there to catch); a status the route does not store (429, 5xx
    /// by default) frees it too.
    package func settlement(upstreamStatus: Int) -> (stored: StoredResponse?, sideEffect: Bool)? {
        guard let idempotency else { return nil }
        let fault = step?.fault?.name
        let sideEffect = upstreamStatus < 400
        guard fault == nil || fault!.commits, idempotency.config.stores(upstreamStatus), let answered else {
            return (nil, sideEffect)
        }
        return (StoredResponse(status: answered.status, headers: answered.headers.fields, body: answered.body), sideEffect)
    }

    /// 502 (504 for a timeout) with a JSON body saying why: what a gateway answers when its upstream fails.
    package func failureScript(_ kind: UpstreamFailureKind, _ reason: String, record: inout ProxyRecord) -> ResponseScript {
        record.failure = kind.rawValue
        record.error = reason
        let status = kind.status
        let body: JSONValue = .object([
            ("error", .string(HTTPStatus.reasonPhrase(status))),
            ("status", .int(status)),
            ("upstream", .string(upstreamURL)),
            ("failure", .string(kind.rawValue)),
            ("reason", .string(reason)),
        ])
        var script = ResponseScript.simple(for: request, response: .json(status, body))
        applyConnectionPolicy(&script, record: &record)
        return script
    }

    private func applyConnectionPolicy(_ script: inout ResponseScript, record: inout ProxyRecord) {
        guard script.keepAlive else { return }
        if policyClose == .maxRequests {
            script.steps.append(.endConnection(.maxRequests))
            script.keepAlive = false
            script.policyClose = .maxRequests
        } else {
            script.idleCloseMilliseconds = idleCloseMilliseconds
        }
    }
}
