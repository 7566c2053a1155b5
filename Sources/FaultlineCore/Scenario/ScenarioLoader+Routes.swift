#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ScenarioLoader.Reader {
    /// The scenario in `document`, or nil when anything in it was reported.
    mutating func scenario(from document: JSONValue) -> Scenario? {
        guard let fields = fields(
            document, at: "",
            known: ["name", "description", "seed", "routes", "connections", "auth", "rateLimits", "expect", "tls",
                    "http2", "resources", "proxy", "timeline"],
            ignored: ["$schema"]
        ) else { return nil }

        if let schema = fields["$schema"] {
            _ = string(schema, at: fields.path("$schema"))
        }
        let name = required(fields, "name").flatMap { nonEmptyString($0, at: fields.path("name")) }
        let description = fields["description"].flatMap { string($0, at: fields.path("description")) }
        let seed = fields["seed"].flatMap { unsignedInteger($0, at: fields.path("seed")) } ?? 0

        if let value = fields["resources"] {
            resources = resourceSection(value, at: fields.path("resources"))
        }
        var routes: [Route] = []
        // A scenario of resources alone needs no routes.
        let routesValue = fields["resources"] == nil ? required(fields, "routes") : fields["routes"]
        if let value = routesValue, let elements = array(value, at: fields.path("routes")) {
            var indexByID: [String: Int] = [:]
            for (index, element) in elements.enumerated() {
                if let route = route(element, index: index, indexByID: &indexByID) {
                    routes.append(route)
                }
            }
        }

        let connections = fields["connections"].flatMap { connectionPolicy($0, at: fields.path("connections")) }
        let auth = fields["auth"].flatMap { authConfig($0, at: fields.path("auth")) }
        let limits = fields["rateLimits"].map { rateLimits($0, at: fields.path("rateLimits")) } ?? []
        let expect = fields["expect"].flatMap { expectations($0, at: fields.path("expect")) }
        let tls = fields["tls"].flatMap { tlsSection($0, at: fields.path("tls")) }
        let http2 = fields["http2"].flatMap { http2Section($0, at: fields.path("http2")) }
        let proxy = fields["proxy"].flatMap { proxySection($0, at: fields.path("proxy"), scenarioLevel: true) }
        let timeline = fields["timeline"].map {
            self.timeline($0, at: fields.path("timeline"), routeIDs: Set(routes.map(\.id)))
        } ?? []

        guard errors.isEmpty, let name else { return nil }
        var scenario = Scenario(
            name: name, description: description, seed: seed, routes: routes, sourceFile: file, directory: directory,
            connections: connections)
        scenario.auth = auth
        scenario.rateLimits = limits
        scenario.expect = expect
        scenario.tls = tls
        scenario.http2 = http2
        scenario.resources = resources
        scenario.proxy = proxy
        scenario.timeline = timeline
        return scenario
    }

    /// Route `index`; `indexByID` holds the index of the first route with each id, to name both in a duplicate.
    private mutating func route(_ value: JSONValue, index: Int, indexByID: inout [String: Int]) -> Route? {
        let path = "routes[\(index)]"
        let errorCount = errors.count
        guard let fields = fields(
            value, at: path,
            known: ["id", "match", "protocols", "responses", "afterLast", "sequenceBy", "chaos", "idempotency", "proxy"]
        ) else { return nil }
        let routeProxy = fields["proxy"].flatMap { proxySection($0, at: fields.path("proxy"), scenarioLevel: false) }

        var id: String?
        if let value = required(fields, "id"), let text = nonEmptyString(value, at: fields.path("id")) {
            if let first = indexByID[text] {
                let quotedID = ScenarioLoader.quoted(text)
                report(fields.path("id"), "duplicate route id \(quotedID); routes[\(first)] has it too")
            } else {
                indexByID[text] = index
            }
            id = text
        }

        var match: RouteMatch?
        var pathParameters: [String]?
        if let value = required(fields, "match") {
            (match, pathParameters) = routeMatch(value, at: fields.path("match"))
        }

        var responses: [ResponseStep] = []
        if fields["responses"] == nil && fields["proxy"] != nil {
            // A route with a proxy and no script forwards every request it takes.
            var step = ResponseStep()
            step.kind = .proxy
            responses = [step]
        } else if let value = required(fields, "responses"), let elements = array(value, at: fields.path("responses")) {
            if elements.isEmpty {
                report(fields.path("responses"), "needs at least one response step")
            }
            for (stepIndex, element) in elements.enumerated() {
                if let step = responseStep(element, at: "\(fields.path("responses"))[\(stepIndex)]") {
                    responses.append(step)
                }
            }
        }

        var afterLast = AfterLast.repeatLast
        if let value = fields["afterLast"], let text = string(value, at: fields.path("afterLast")) {
            if let parsed = AfterLast(rawValue: text) {
                afterLast = parsed
            } else {
                let names = ["repeat-last", "cycle", "fail"]
                report(fields.path("afterLast"), "unknown afterLast \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: names, listName: "expected"))
            }
        }

        var sequenceBy: SequenceKey?
        if let value = fields["sequenceBy"], let text = string(value, at: fields.path("sequenceBy")) {
            sequenceBy = sequenceKey(text, at: fields.path("sequenceBy"), pathParameters: pathParameters)
        }

        let chaos = fields["chaos"].flatMap { chaosSpec($0, at: fields.path("chaos")) }
        let idempotency = fields["idempotency"].flatMap { idempotencyConfig($0, at: fields.path("idempotency")) }

        var protocols: Set<ExchangeProtocol>?
        if let value = fields["protocols"] {
            protocols = routeProtocols(value, at: fields.path("protocols"))
        }
        if errors.count == errorCount {
            checkProtocols(protocols, responses: responses, chaos: chaos, route: fields.path("protocols"), at: path)
            checkResourceSteps(responses, pathParameters: pathParameters ?? [], at: fields.path("responses"))
        }

        guard errors.count == errorCount, let id, let match else { return nil }
        var route = Route(
            id: id, match: match, responses: responses, afterLast: afterLast, sequenceBy: sequenceBy, chaos: chaos)
        route.idempotency = idempotency
        route.protocols = protocols
        route.proxy = routeProxy
        return route
    }

    /// `["http/1.1", "h2"]`: the protocols a route serves (`h2c` is `h2` without TLS, the same codec).
    private mutating func routeProtocols(_ value: JSONValue, at path: String) -> Set<ExchangeProtocol>? {
        guard let elements = array(value, at: path) else { return nil }
        if elements.isEmpty { report(path, "needs at least one protocol (\"http/1.1\", \"h2\")") }
        var protocols: Set<ExchangeProtocol> = []
        for (index, element) in elements.enumerated() {
            guard let text = string(element, at: "\(path)[\(index)]") else { continue }
            if let known = ExchangeProtocol(rawValue: text) ?? (text == "h2c" ? .http2 : nil) {
                protocols.insert(known)
            } else {
                report("\(path)[\(index)]", "unknown protocol \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: ["http/1.1", "h2", "h2c"], listName: "expected"))
            }
        }
        return protocols
    }

    /// A fault exists on the protocols its codec can render (`FaultName.protocols`): a route that names its
    /// protocols must not ask for a fault one of them cannot carry, and a route that names none must not mix
    /// faults that exist on different protocols only (it could serve no protocol at all).
    private mutating func checkProtocols(
        _ declared: Set<ExchangeProtocol>?, responses: [ResponseStep], chaos: ChaosSpec?, route protocolsPath: String,
        at path: String
    ) {
        var uses: [(fault: FaultName, path: String)] = []
        for (index, step) in responses.enumerated() {
            if let fault = step.fault { uses.append((fault.name, "\(path).responses[\(index)].fault")) }
        }
        for (index, outcome) in (chaos?.outcomes ?? []).enumerated() {
            if case .fault(let spec) = outcome { uses.append((spec.name, "\(path).chaos.faults[\(index)]")) }
        }
        func names(_ set: Set<ExchangeProtocol>) -> String {
            ExchangeProtocol.allCases.filter(set.contains).map(\.rawValue).joined(separator: " and ")
        }
        if let declared {
            for use in uses where !declared.isSubset(of: use.fault.protocols) {
                let missing = declared.subtracting(use.fault.protocols)
                report(use.path, "fault \(ScenarioLoader.quoted(use.fault.rawValue)) exists only on "
                    + "\(names(use.fault.protocols)), but the route serves \(names(missing)) too "
                    + "(\(protocolsPath)); take \(names(missing)) out of its protocols or move the fault to a route of its own")
            }
            return
        }
        var served = Set(ExchangeProtocol.allCases)
        for use in uses {
            let narrowed = served.intersection(use.fault.protocols)
            if narrowed.isEmpty {
                let first = uses.first { !$0.fault.protocols.contains(where: use.fault.protocols.contains) }
                report(use.path, "fault \(ScenarioLoader.quoted(use.fault.rawValue)) exists only on "
                    + "\(names(use.fault.protocols)), and \(ScenarioLoader.quoted(first?.fault.rawValue ?? "?")) "
                    + "(\(first?.path ?? "?")) only on \(names(served)): one route cannot serve both; split it in two")
                return
            }
            served = narrowed
        }
    }

    /// `{"maxRequests": n ≥ 1, "idleCloseMs": ms ≥ 1}`, at least one of them.
    private mutating func connectionPolicy(_ value: JSONValue, at path: String) -> ConnectionPolicy? {
        let errorCount = errors.count
        guard let fields = fields(value, at: path, known: ["maxRequests", "idleCloseMs"]) else { return nil }
        // An unknown key ("maxRequest") already has its did-you-mean: no second error saying the key is missing.
        let unknownKeys = errors.count > errorCount
        var policy = ConnectionPolicy()
        policy.maxRequests = fields["maxRequests"].flatMap { integer($0, at: fields.path("maxRequests"), in: 1...Int.max) }
        policy.idleCloseMilliseconds = fields["idleCloseMs"].flatMap {
            integer($0, at: fields.path("idleCloseMs"), in: 1...ScenarioLoader.maxDelayMilliseconds)
        }
        if fields["maxRequests"] == nil && fields["idleCloseMs"] == nil && !unknownKeys {
            report(path, "give \"maxRequests\", \"idleCloseMs\" or both")
        }
        return policy
    }

    /// `{"rate": 0…1, "faults": ["reset", "status:503", {"type": …}]}`.
    private mutating func chaosSpec(_ value: JSONValue, at path: String) -> ChaosSpec? {
        let errorCount = errors.count
        guard let fields = fields(value, at: path, known: ["rate", "faults"]) else { return nil }
        var rate: Double?
        if let value = required(fields, "rate"), let number = number(value, at: fields.path("rate")) {
            if (0...1).contains(number) {
                rate = number
            } else {
                report(fields.path("rate"), "must be between 0 and 1, found \(ScenarioLoader.numberText(number))")
            }
        }
        var outcomes: [ChaosOutcome] = []
        if let value = required(fields, "faults"), let elements = array(value, at: fields.path("faults")) {
            if elements.isEmpty { report(fields.path("faults"), "needs at least one fault") }
            for (index, element) in elements.enumerated() {
                let elementPath = "\(fields.path("faults"))[\(index)]"
                if case .string(let text) = element, text.hasPrefix("status:") {
                    let code = Int(text.dropFirst("status:".count))
                    if let code, (100...599).contains(code) {
                        outcomes.append(.status(code))
                    } else {
                        report(elementPath, "\(ScenarioLoader.quoted(text)) is not \"status:\" followed by an HTTP status (100–599)")
                    }
                } else if let spec = faultSpec(element, at: elementPath) {
                    outcomes.append(.fault(spec))
                }
            }
        }
        guard errors.count == errorCount, let rate else { return nil }
        return ChaosSpec(rate: rate, outcomes: outcomes)
    }

    /// `header:NAME`, `query:NAME` or `path:PARAM`. `pathParameters` are the route's path parameters, or nil
    /// when its path could not be read (then a `path:` key is not checked, to avoid a second error for one typo).
    private mutating func sequenceKey(_ text: String, at path: String, pathParameters: [String]?) -> SequenceKey? {
        let expected = #"expected "header:NAME", "query:NAME" or "path:PARAM", found "#
            + ScenarioLoader.quoted(text)
        guard let colon = text.firstIndex(of: ":") else {
            report(path, expected)
            return nil
        }
        let kind = text[..<colon]
        let name = String(text[text.index(after: colon)...])
        switch kind {
        case "header":
            guard ScenarioLoader.isToken(name) else {
                report(path, "\(ScenarioLoader.quoted(name)) is not a valid header name")
                return nil
            }
            return .header(name)
        case "query":
            guard !name.isEmpty else {
                report(path, "\"query:\" needs a parameter name, as in \"query:session\"")
                return nil
            }
            return .query(name)
        case "path":
            guard let pathParameters else { return nil }
            guard pathParameters.contains(name) else {
                let available = pathParameters.isEmpty
                    ? "this route's path has no {param} segments"
                    : "its path parameters are " + pathParameters.map { "{\($0)}" }.joined(separator: ", ")
                report(path, "\(ScenarioLoader.quoted(text)) names no {\(name)} parameter of this route's path; "
                    + available)
                return nil
            }
            return .pathParameter(name)
        default:
            report(path, expected)
            return nil
        }
    }

    // MARK: Match

    /// The route's match conditions, and the names of its path parameters (nil when the path was invalid).
    private mutating func routeMatch(_ value: JSONValue, at path: String) -> (RouteMatch?, [String]?) {
        let errorCount = errors.count
        guard let fields = fields(
            value, at: path, known: ["method", "path", "pathPrefix", "query", "headers", "body"]
        ) else { return (nil, nil) }
        var match = RouteMatch()

        if let value = fields["method"] {
            match.methods = methods(value, at: fields.path("method"))
        }

        var pathParameters: [String]? = []
        switch (fields["path"], fields["pathPrefix"]) {
        case (.some, .some):
            report(path, "use either \"path\" or \"pathPrefix\", not both")
            pathParameters = nil
        case (let value?, nil), (nil, let value?):
            let isPrefix = fields["path"] == nil
            let key = isPrefix ? "pathPrefix" : "path"
            if let text = string(value, at: fields.path(key)),
               let pattern = pathPattern(text, isPrefix: isPrefix, at: fields.path(key)) {
                match.path = pattern
                pathParameters = pattern.segments.compactMap {
                    if case .parameter(let name) = $0 { return name }
                    return nil
                }
            } else {
                pathParameters = nil
            }
        case (nil, nil):
            break
        }

        if let value = fields["query"], let members = namedMembers(value, at: fields.path("query")) {
            for member in members {
                let memberPath = ScenarioLoader.path(fields.path("query"), key: member.key)
                if member.key.isEmpty {
                    report(memberPath, "a query parameter name must not be empty")
                }
                if let matcher = valueMatcher(member.value, at: memberPath) {
                    match.query.append((name: member.key, matcher: matcher))
                }
            }
        }

        if let value = fields["headers"], let members = namedMembers(value, at: fields.path("headers")) {
            for member in members {
                let memberPath = ScenarioLoader.path(fields.path("headers"), key: member.key)
                if !ScenarioLoader.isToken(member.key) {
                    report(memberPath, "\(ScenarioLoader.quoted(member.key)) is not a valid header name")
                }
                if let matcher = valueMatcher(member.value, at: memberPath) {
                    match.headers.append((name: member.key, matcher: matcher))
                }
            }
        }

        if let value = fields["body"] {
            match.body = bodyMatcher(value, at: fields.path("body"))
        }

        return (errors.count == errorCount ? match : nil, pathParameters)
    }

    /// Upper-cased method tokens; empty (any method) for `"*"` or a list containing it.
    private mutating func methods(_ value: JSONValue, at path: String) -> [String] {
        let names: [(name: String, path: String)]
        switch value {
        case .string(let name):
            names = [(name, path)]
        case .array(let elements):
            var collected: [(name: String, path: String)] = []
            for (index, element) in elements.enumerated() {
                if case .string(let name) = element {
                    collected.append((name, "\(path)[\(index)]"))
                } else {
                    report("\(path)[\(index)]", "expected a string, found \(ScenarioLoader.describe(element))")
                }
            }
            if elements.isEmpty {
                report(path, "an empty list matches no method; use \"*\" for any method")
            }
            names = collected
        default:
            report(path, "expected a string or an array of strings, found \(ScenarioLoader.describe(value))")
            return []
        }
        var methods: [String] = []
        var matchesAny = false
        for (name, namePath) in names {
            if name == "*" {
                matchesAny = true
            } else if !ScenarioLoader.isToken(name) {
                report(namePath, "\(ScenarioLoader.quoted(name)) is not a valid HTTP method")
            } else if !methods.contains(name.uppercased()) {
                methods.append(name.uppercased())
            }
        }
        return matchesAny ? [] : methods
    }

    /// A path template: `/` then segments split on `/`; a segment `{name}` is a parameter.
    mutating func pathPattern(_ text: String, isPrefix: Bool, at path: String) -> PathPattern? {
        let quotedText = ScenarioLoader.quoted(text)
        guard text.hasPrefix("/") else {
            report(path, "\(quotedText) must start with \"/\"")
            return nil
        }
        if text.contains("?") {
            report(path, "\(quotedText) has a query part; match query parameters with \"query\" instead")
            return nil
        }
        if text.contains("#") {
            report(path, "\(quotedText) has a fragment (#…), which clients never send")
            return nil
        }
        if text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
            report(path, "\(quotedText) contains a space or control character; percent-encode it (%20)")
            return nil
        }
        // Split the way the matcher splits request paths: "/" is one empty segment, "/a/" is "a" then "".
        let rawSegments = text.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        var segments: [PathPattern.Segment] = []
        var parameterNames: [String] = []
        let errorCount = errors.count
        for raw in rawSegments {
            if raw.hasPrefix("{") && raw.hasSuffix("}") && raw.count >= 2 {
                let name = String(raw.dropFirst().dropLast())
                if !ScenarioLoader.isIdentifier(name) {
                    report(path, "in \(quotedText), \"{\(name)}\": a parameter name must be an identifier "
                        + "(letters, digits and _, not starting with a digit)")
                } else if parameterNames.contains(name) {
                    report(path, "in \(quotedText), the parameter {\(name)} appears twice")
                } else {
                    parameterNames.append(name)
                    segments.append(.parameter(name))
                }
            } else if raw.contains("{") || raw.contains("}") {
                report(path, "in \(quotedText), \(ScenarioLoader.quoted(String(raw))): a {param} must be a whole "
                    + "segment, as in /orders/{id}")
            } else {
                segments.append(.literal(String(raw)))
            }
        }
        guard errors.count == errorCount else { return nil }
        return PathPattern(segments: segments, isPrefix: isPrefix, source: text)
    }

    /// A string (equals) or an object with exactly one of `equals`, `contains`, `matches`, `present`, `absent`.
    private mutating func valueMatcher(_ value: JSONValue, at path: String) -> ValueMatcher? {
        if case .string(let text) = value {
            return .equals(text)
        }
        guard case .object = value else {
            report(path, "expected a string or an object, found \(ScenarioLoader.describe(value))")
            return nil
        }
        let kinds = ["equals", "contains", "matches", "present", "absent"]
        guard let fields = fields(value, at: path, known: kinds),
              let kind = exactlyOne(of: kinds, in: fields) else { return nil }
        let kindPath = fields.path(kind)
        let value = fields[kind]!
        switch kind {
        case "equals":
            return string(value, at: kindPath).map { .equals($0) }
        case "contains":
            return string(value, at: kindPath).map { .contains($0) }
        case "matches":
            guard let pattern = string(value, at: kindPath) else { return nil }
            do {
                return .regex(try CompiledRegex(pattern))
            } catch {
                report(kindPath, "the regular expression \(ScenarioLoader.quoted(pattern)) does not compile")
                return nil
            }
        default:
            guard let flag = bool(value, at: kindPath) else { return nil }
            guard flag else {
                let other = kind == "present" ? "absent" : "present"
                report(kindPath, "only true is allowed; to require the opposite, use \"\(other)\": true")
                return nil
            }
            return kind == "present" ? .present : .absent
        }
    }

    /// An object with exactly one of `equals` (string), `contains` (string) or `json` (any value).
    mutating func bodyMatcher(_ value: JSONValue, at path: String) -> BodyMatcher? {
        let kinds = ["equals", "contains", "json"]
        guard let fields = fields(value, at: path, known: kinds),
              let kind = exactlyOne(of: kinds, in: fields) else { return nil }
        switch kind {
        case "equals": return string(fields[kind]!, at: fields.path(kind)).map { .equals($0) }
        case "contains": return string(fields[kind]!, at: fields.path(kind)).map { .contains($0) }
        default: return .jsonSubset(fields[kind]!)
        }
    }

    /// The one key of `kinds` that the object has; reports none or several.
    mutating func exactlyOne(of kinds: [String], in fields: ScenarioLoader.Fields) -> String? {
        let present = fields.present(kinds)
        switch present.count {
        case 1:
            return present[0]
        case 0:
            // An unknown key was already reported (with its did-you-mean); one error per mistake is enough.
            if fields.members.isEmpty {
                report(fields.path, "expected exactly one of \(ScenarioLoader.quotedList(kinds, conjunction: "or"))")
            }
        default:
            report(fields.path, "use only one of \(ScenarioLoader.quotedList(present)), not several")
        }
        return nil
    }
}
