/// A route step that accepts a WebSocket (ARCHITECTURE §4c): the opening handshake checked (RFC 6455 §4.2.1) and
/// answered with 101, then `ScriptStep.upgrade` hands the connection to the session.
extension Engine {
    func webSocketScript(
        _ spec: WebSocketSpec, step: ResponseStep, _ request: HTTPRequest, context: inout TemplateContext,
        random: inout SeededRandom
    ) -> ResponseScript {
        let headers = request.headers
        func refuse(_ status: Int, _ detail: String, _ extra: [(String, String)] = []) -> ResponseScript {
            var response = HTTPResponse.json(status, .object([
                ("type", .string("about:blank")), ("title", .string(HTTPStatus.reasonPhrase(status))),
                ("status", .int(status)), ("detail", .string(detail)),
            ]))
            response.headers = HTTPHeaders([("Content-Type", "application/problem+json")] + extra.map { (name: $0.0, value: $0.1) })
            response.date = step.date
            return ResponseScript.simple(for: request, response: response)
        }
        guard request.head.asksForWebSocket else {
            return refuse(426, "this route is a WebSocket: send Upgrade: websocket and Connection: Upgrade",
                          [("Upgrade", "websocket"), ("Connection", "Upgrade")])
        }
        guard headers["sec-websocket-version"]?.trimmingASCIIWhitespace == "13" else {
            return refuse(426, "Sec-WebSocket-Version must be 13 (RFC 6455 §4.2.2)", [("Sec-WebSocket-Version", "13")])
        }
        guard request.method == "GET", request.head.version == .http1_1,
              let key = headers["sec-websocket-key"]?.trimmingASCIIWhitespace, WebSocketHandshake.isValidKey(key)
        else {
            return refuse(400, "a WebSocket opening handshake is an HTTP/1.1 GET with a Sec-WebSocket-Key of 16 bytes, base64")
        }
        let offered = headers.values("sec-websocket-protocol").flatMap { $0.split(separator: ",") }
            .map { String($0).trimmingASCIIWhitespace }
        var subprotocol = spec.subprotocols.first(where: offered.contains)
        var fields: [(name: String, value: String)] = [("Upgrade", "websocket"), ("Connection", "Upgrade")]
        switch spec.upgradeFault {
        case .wrongAccept?:
            // Deliberately wrong: the accept value of another key.
            fields.append(("Sec-WebSocket-Accept", WebSocketHandshake.accept(key: "faultline" + key)))
        case .unrequestedSubprotocol?:
            fields.append(("Sec-WebSocket-Accept", WebSocketHandshake.accept(key: key)))
            subprotocol = "faultline-unrequested"
        case nil:
            fields.append(("Sec-WebSocket-Accept", WebSocketHandshake.accept(key: key)))
        }
        if let subprotocol { fields.append(("Sec-WebSocket-Protocol", subprotocol)) }
        var resourceID: Int?
        for field in spec.headers { fields.append((field.name, Template.render(field.value, context, resourceID: &resourceID))) }
        let script = spec.script.map { step -> WebSocketStep in
            guard case .send(.text(let text), let every, let times) = step else { return step }
            return .send(.text(Template.render(text, context, resourceID: &resourceID)), everyMilliseconds: every, times: times)
        }
        let plan = WebSocketSessionPlan(
            script: script, maxMessageBytes: spec.maxMessageBytes, ignorePings: spec.ignorePings, seed: random.next(),
            subprotocol: subprotocol)
        var steps = ResponsePlanner.waitSteps(step.delay, &random)
        steps.append(.head(ResponseHead(
            status: 101, headers: HTTPHeaders(fields), bodyLength: 0, close: false, date: step.date)))
        steps.append(.upgrade(plan))
        return ResponseScript(steps: steps, status: 101, keepAlive: true)
    }
}
