/// Requests served by resources: by a resource's own path, or by a route step that names one (ARCHITECTURE §4b).
extension Engine {
    /// A request no route took whose path is a resource's.
    func resourceDecision(_ input: MatchInput, now: EngineInstant, extraHeaders: [(name: String, value: String)]) -> Decision? {
        guard let (resource, key) = resources.matching(input) else { return nil }
        let answer = resources.respond(input.request, resource, key: key, now: now)
        var random = SeededRandom(seed: 0)
        let (script, record) = Self.resourceScript(
            answer, step: nil, for: input.request, random: &random, extraHeaders: extraHeaders)
        let decision = Decision(
            scenario: resource.scenarioName, route: .resource(resource.spec.id), step: nil, unmatched: nil, script: script)
        decision.scenarioIndex = resource.scenarioIndex
        decision.scenarioVersion = versions[resource.scenarioIndex]
        decision.resource = record
        return decision
    }

    /// A route step `{"resource": "ID", …}`: the resource's answer with the step's delay, headers and fault.
    func resourceStep(
        _ reference: ResourceReference, _ step: ResponseStep, scenarioIndex: Int, _ input: MatchInput,
        _ parameters: [String: String], now: EngineInstant, random: inout SeededRandom,
        extraHeaders: [(name: String, value: String)]
    ) -> (ResponseScript, ResourceRecord)? {
        guard let resource = resources.resource(reference.id, scenario: scenarioIndex) else { return nil }
        let key = resources.instanceKey(resource, parameters)
        let answer = resources.respond(input.request, resource, key: key, deviations: reference.deviations, now: now)
        return Self.resourceScript(answer, step: step, for: input.request, random: &random, extraHeaders: extraHeaders)
    }

    /// The script for a resource's answer: a plain response, or the step's fault breaking it. A body that a fault
    /// cuts is recorded with where the cut fell in the representation (`cutAt`), for the resume verdict.
    static func resourceScript(
        _ answer: ResourceAnswer, step: ResponseStep?, for request: HTTPRequest, random: inout SeededRandom,
        extraHeaders: [(name: String, value: String)]
    ) -> (ResponseScript, ResourceRecord) {
        var steps = ResponsePlanner.waitSteps(step?.delay, &random)
        let keepAlive = request.head.clientWantsKeepAlive && !(step?.closeConnection ?? false)
        var headers = answer.headers
        for field in step?.headers ?? [] { headers.set(name: field.name, value: field.value) }
        for field in extraHeaders { headers.append(name: field.name, value: field.value) }
        if keepAlive && request.head.version == .http1_0 { headers.append(name: "Connection", value: "keep-alive") }
        var record = answer.record
        let isHead = request.method == "HEAD"
        let date = answer.date && step?.date != false
        guard let fault = step?.fault else {
            steps.append(.head(ResponseHead(
                status: answer.status, headers: headers, bodyLength: answer.bodyLength, close: !keepAlive, date: date)))
            steps += answer.body.steps
            steps.append(.end)
            if !keepAlive { steps.append(.endConnection(.connectionClose)) }
            return (ResponseScript(steps: steps, status: answer.status, keepAlive: keepAlive), record)
        }
        var response = HTTPResponse(status: answer.status, headers: headers)
        response.date = date
        let script = ResponsePlanner.faultScript(
            fault, response, body: answer.body, headOnly: isHead, after: steps, keepAlive: keepAlive, &random)
        // Only a body that is one stretch of the representation (not multipart) has an offset to cut at.
        if !isHead, [200, 206].contains(answer.status), answer.record.ranges.count <= 1, fault.name.sendsHead(fault.after),
           !script.steps.contains(.end) {
            let sent = script.steps.reduce(0) { total, step in
                switch step {
                case .body(let bytes): return total + bytes.count
                case .stream(let slice): return total + slice.count
                default: return total
                }
            }
            record.cutAt = answer.offset + sent
        }
        return (script, record)
    }

    /// `change-resource:ID` and `delete-resource:ID`, and the admin API's changes.
    package func changeResource(_ id: String, path: String? = nil, body: [UInt8]? = nil, contentType: String? = nil,
                                delete: Bool, scenario: Int? = nil, now: EngineInstant) -> Bool {
        guard let resource = resources.resource(id, scenario: scenario) else { return false }
        // A new body is for one instance: the one named, or the only one.
        if body != nil && path == nil && resource.spec.path.hasParameters { return false }
        if let path = path ?? (body != nil ? resource.spec.path.source : nil) {
            resources.change(resource, path, body: body, contentType: contentType, delete: delete, now: now)
        } else {
            resources.changeAll(resource, delete: delete, now: now)
        }
        return true
    }
}

extension Engine {
    /// `POST /__faultline/resources/change`: `{"id": …, "path"?: …, "json"|"text"|"base64"?: …, "contentType"?: …,
    /// "delete"?: true}`. Without `path`, every instance changes; without a body, the validators change (and a
    /// generated body is generated anew). Answers the status and the resource as `GET /__faultline/resources`
    /// lists it.
    package func resourceChange(_ body: [UInt8], now: EngineInstant) -> (status: Int, body: JSONValue) {
        func refuse(_ status: Int, _ message: String) -> (Int, JSONValue) { (status, .object([("error", .string(message))])) }
        guard let document = try? JSONValue.parse(body), case .object(let members) = document else {
            return refuse(400, "expected a JSON object: {\"id\": …, \"path\"?: …, \"json\"|\"text\"|\"base64\"?: …, \"delete\"?: true}")
        }
        let known = ["id", "path", "json", "text", "base64", "contentType", "delete"]
        if let unknown = members.first(where: { !known.contains($0.key) }) {
            return refuse(400, "unknown key \"\(unknown.key)\"; expected \(known.joined(separator: ", "))")
        }
        guard case .string(let id)? = document["id"] else { return refuse(400, "\"id\" (a resource id) is required") }
        guard let resource = resources.resource(id) else {
            return refuse(404, "no resource \"\(id)\"; loaded: \(resources.resources.map(\.spec.id).joined(separator: ", "))")
        }
        var path: String?
        if let value = document["path"] {
            guard case .string(let text) = value, case .matched(let parameters) = RouteMatcher.match(
                resource.match, MatchInput(request: HTTPRequest(head: HTTPRequestHead(
                    method: "GET", target: text, version: .http1_1, headers: HTTPHeaders()))),
                explain: false)
            else { return refuse(400, "\"path\" must be a path of resource \(id) (\(resource.spec.path.source))") }
            // The instance as requests name it, however the caller encoded the path.
            path = resources.instanceKey(resource, parameters)
        }
        let delete = document["delete"] == .bool(true)
        var newBody: [UInt8]?
        var contentType: String?
        if case .string(let text)? = document["contentType"] { contentType = text }
        switch (document["json"], document["text"], document["base64"]) {
        case (let json?, nil, nil):
            var bytes: [UInt8] = []
            json.serialize(into: &bytes)
            newBody = bytes
            contentType = contentType ?? "application/json"
        case (nil, .string(let text)?, nil):
            newBody = Array(text.utf8)
            contentType = contentType ?? "text/plain; charset=utf-8"
        case (nil, nil, .string(let text)?):
            guard let bytes = Base64.decode(text) else { return refuse(400, "\"base64\" is not valid base64") }
            newBody = bytes
        case (nil, nil, nil):
            break
        default:
            return refuse(400, "give at most one of \"json\", \"text\" (a string) and \"base64\" (a string)")
        }
        guard changeResource(
            id, path: path, body: newBody, contentType: contentType, delete: delete, scenario: resource.scenarioIndex,
            now: now)
        else { return refuse(400, "a new body is for one instance: give \"path\"") }
        guard case .array(let listed) = resources.json() else { return (200, .null) }
        return (200, .object([("resource", listed.first { $0["id"] == .string(id) } ?? .null)]))
    }
}
