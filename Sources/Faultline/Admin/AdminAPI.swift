import FaultlineCore

/// The admin API under `/__faultline/` (ARCHITECTURE §7): the journal, scenarios, health and shutdown, JSON in
/// and out, on the same port as the stubs. Loop thread only.
final class AdminAPI {
    static let prefix = "/__faultline/"

    /// Whether a request-target is under the admin prefix; a byte comparison, run for every request.
    static func isAdminTarget(_ target: String) -> Bool {
        target.utf8.starts(with: prefix.utf8)
    }

    /// Hands a finished response script to the exchange, with an optional action for after it is sent.
    typealias Reply = (ResponseScript, (() -> Void)?) -> Void

    private unowned let core: ServerCore

    init(core: ServerCore) {
        self.core = core
    }

    static let endpoints: [(method: String, path: String, summary: String)] = [
        ("GET", "/__faultline/", "the dashboard in a browser (Accept: text/html); otherwise this index as JSON"),
        ("GET", "/__faultline/health", "liveness, version, counters"),
        ("GET", "/__faultline/events", "long-poll for journal entries recorded or changed since ?cursor=C, and whether state changed (the dashboard's feed)"),
        ("GET", "/__faultline/requests", "journal entries; filters: route, method, path, status, since, matched, malformed, completed, connection, outcome, limit; an unknown parameter or route is a 400"),
        ("GET", "/__faultline/requests.har", "the journal as an HTTP Archive (HAR 1.2); the same filters as /requests"),
        ("GET", "/__faultline/requests/count", "number of journal entries matching the same filters"),
        ("GET", "/__faultline/requests/wait", "long-poll until count=N entries match the filters, or timeoutMs passes"),
        ("DELETE", "/__faultline/requests", "forget the journal's entries (sequence numbers and counters go on)"),
        ("GET", "/__faultline/scenarios", "the loaded scenarios and their routes"),
        ("POST", "/__faultline/scenarios", "load scenarios (a scenario object, an array of them, or {\"paths\": [...]}); ?mode=add keeps the others"),
        ("POST", "/__faultline/scenarios/reset", "rewind every script; ?journal=true also clears the journal"),
        ("POST", "/__faultline/scenarios/reload", "read the scenario files again (as SIGHUP and --watch do)"),
        ("GET", "/__faultline/report", "verdicts: each scenario's expect rules judged against the journal, with evidence; ?scenario=NAME judges one"),
        ("GET", "/__faultline/state", "tokens, refresh counts, rate-limit buckets, Retry-After judgements, idempotency records, side effects"),
        ("POST", "/__faultline/auth/expire", "expire the current access token now"),
        ("GET", "/__faultline/resources", "every resource's instances: version, ETag, Last-Modified, size"),
        ("POST", "/__faultline/resources/change", "a new version of a resource (or one instance, or delete it) behind the client's back"),
        ("GET", "/__faultline/network", "the listener's state, the conditions on connections, the timeline's progress"),
        ("POST", "/__faultline/network", "change the network: {listener, connections, conditions, forMs}"),
        ("POST", "/__faultline/shutdown", "stop the server after answering"),
        ("POST", "/__faultline/record/stop", "faultline record: write the recording now, then stop"),
        ("GET", "/__faultline/openapi.json", "this API described in OpenAPI 3.1 (docs/openapi.json)"),
        ("GET", "/__faultline/ui/{asset}", "the dashboard's script, style sheet and icon"),
    ]

    /// The journal filters (`JournalFilter`), in the order openapi.json lists them.
    static let filterParameters = [
        "route", "method", "path", "status", "since", "matched", "malformed", "completed", "connection", "outcome",
    ]

    /// The query parameters each endpoint takes, by `METHOD path` (HEAD takes GET's): the one place they are named.
    /// A name not listed is a 400 with the nearest known one; an endpoint not listed takes none and ignores them.
    /// `OpenAPISpecTests` checks this table against openapi.json's parameters, both ways.
    static let queryParameters: [String: [String]] = [
        "GET events": ["cursor", "timeoutMs"],
        "GET requests": filterParameters + ["limit"],
        "GET requests.har": filterParameters + ["limit"],
        "GET requests/count": filterParameters,
        "GET requests/wait": ["count", "timeoutMs"] + filterParameters,
        "POST scenarios": ["mode"],
        "POST scenarios/reset": ["journal"],
        "GET report": ["scenario"],
    ]

    /// The 400 message for the first query parameter `known` does not list, or nil when every one is known.
    static func unknownParameter(in query: [(name: String, value: String)], known: [String]) -> String? {
        guard let unknown = query.first(where: { !known.contains($0.name) }) else { return nil }
        return "unknown query parameter \(ScenarioLoader.quoted(unknown.name))"
            + ScenarioLoader.hint(for: unknown.name, among: known, listName: "this endpoint takes")
    }

    /// The 400 message for a `route=` filter that names nothing the journal could hold, or nil when it is fine: a
    /// loaded scenario's route id, the route of a kept entry (its scenario may since have gone), or one of the policy
    /// layer's own answers (`auth:token`, `rate-limit:ID`, `resource:ID`), or the server's own `connection-limit`.
    func unknownRoute(_ route: String) -> String? {
        // The common case first: a loaded route or a policy's name, known without reading the journal (a test that
        // polls `?route=ID` should not walk 10,000 entries per poll).
        if route == DecisionSource.tokenEndpoint.description || route == DecisionSource.connectionLimit.description
            || route.hasPrefix("rate-limit:") || route.hasPrefix("resource:")
            || core.engine.scenarios.contains(where: { $0.routes.contains(where: { $0.id == route }) }) {
            return nil
        }
        var candidates: [String] = []
        var seen = Set<String>()
        for scenario in core.engine.scenarios {
            for id in scenario.routes.map(\.id) where seen.insert(id).inserted { candidates.append(id) }
        }
        for entry in core.journal.entries {
            if let text = entry.route?.description, seen.insert(text).inserted { candidates.append(text) }
        }
        if seen.contains(route) { return nil }   // the route of a kept entry, from scenarios loaded before
        let message = "no loaded route is \(ScenarioLoader.quoted(route))"
        if let match = ScenarioLoader.suggestion(for: route, among: candidates) {
            return message + "; did you mean \(ScenarioLoader.quoted(match))?"
        }
        let unmatched = ["unmatched", "none", "null", "nil", "-", ""].contains(route.lowercased())
            ? "; for the requests no route took, use matched=false" : ""
        guard !candidates.isEmpty else { return message + unmatched + "; no scenario is loaded" }
        return message + unmatched + "; loaded: " + ScenarioLoader.quotedList(candidates, conjunction: "or")
    }

    func handle(_ request: HTTPRequest, connectionID: Int, reply: @escaping Reply) {
        let path = String(request.path.dropFirst(Self.prefix.count))
        let query = PercentDecoding.queryParameters(request.query)
        func param(_ name: String) -> String? { query.first(where: { $0.name == name })?.value }
        func respond(_ status: Int, _ body: JSONValue, after: (() -> Void)? = nil) {
            reply(ResponseScript.simple(for: request, response: .json(status, body)), after)
        }
        let methods: [String]
        switch path {
        case "", "health": methods = ["GET"]
        case "requests": methods = ["GET", "DELETE"]
        case "requests/count", "requests/wait", "requests.har": methods = ["GET"]
        case "scenarios": methods = ["GET", "POST"]
        case "scenarios/reset", "scenarios/reload", "shutdown", "auth/expire": methods = ["POST"]
        case "state", "report", "openapi.json", "resources": methods = ["GET"]
        case "resources/change", "record/stop": methods = ["POST"]
        case "network": methods = ["GET", "POST"]
        case "events": methods = ["GET"]
        case _ where path.hasPrefix("ui/") && DashboardPage.asset(String(path.dropFirst(3))) != nil: methods = ["GET"]
        default:
            respond(404, .object([
                ("error", .string("no admin endpoint \(request.path)")),
                ("endpoints", .array(Self.endpoints.map { .string("\($0.method) \($0.path) — \($0.summary)") })),
            ]))
            return
        }
        guard methods.contains(request.method) || (request.method == "HEAD" && methods.contains("GET")) else {
            var response = HTTPResponse.json(405, .object([
                ("error", .string("\(request.method) is not allowed on \(request.path)")),
                ("allowed", .array(methods.map(JSONValue.string))),
            ]))
            response.headers.append(name: "Allow", value: methods.joined(separator: ", "))
            reply(ResponseScript.simple(for: request, response: response), nil)
            return
        }

        if let known = Self.queryParameters["\(request.method == "HEAD" ? "GET" : request.method) \(path)"],
            let problem = Self.unknownParameter(in: query, known: known) {
            respond(400, .object([("error", .string(problem))]))
            return
        }
        let filter: JournalFilter
        let limit: Int?
        do {
            filter = try Self.filter(from: param)
            limit = try Self.limit(from: param)
        } catch {
            respond(400, .object([("error", .string(error.message))]))
            return
        }
        if path.hasPrefix("requests"), request.method != "DELETE", let route = filter.route,
            let problem = unknownRoute(route) {
            respond(400, .object([("error", .string(problem))]))
            return
        }
        switch (request.method, path) {
        case ("GET", ""), ("HEAD", ""):
            if DashboardPage.wantsHTML(request.headers["accept"]) {
                reply(ResponseScript.simple(for: request, response: Self.page(DashboardPage.served, "text/html; charset=utf-8")), nil)
            } else {
                respond(200, Self.index())
            }
        case (_, _) where path.hasPrefix("ui/"):
            let asset = DashboardPage.asset(String(path.dropFirst(3)))!
            reply(ResponseScript.simple(for: request, response: Self.page(asset.bytes, asset.contentType)), nil)
        case ("GET", "events"), ("HEAD", "events"):
            var cursor: Int?
            if let text = param("cursor") {
                guard let value = Int(text), value >= 0 else {
                    respond(400, .object([("error", .string("cursor must be a non-negative integer from an earlier answer, got \"\(text)\"; omit it to start"))]))
                    return
                }
                cursor = value
            }
            let timeout = param("timeoutMs").map { Int($0) ?? -1 } ?? 25_000
            guard timeout >= 0 && timeout <= 60_000 else {
                respond(400, .object([("error", .string("timeoutMs must be an integer between 0 and 60000"))]))
                return
            }
            core.events.poll(cursor: cursor, timeoutMilliseconds: request.method == "HEAD" ? 0 : timeout, owner: connectionID) {
                answer in reply(ResponseScript.simple(for: request, response: .json(200, answer)), nil)
            }
        case ("GET", "health"), ("HEAD", "health"):
            respond(200, .object([
                ("status", .string("ok")),
                ("version", .string(Faultline.version)),
                ("port", .int(core.port)),
                ("uptimeMs", .int(Int((Clock.monotonicNanos() - core.startedAtMonotonic) / 1_000_000))),
                ("startedAtMonotonicMs", .double(Double(core.startedAtMonotonic) / 1_000_000)),
                ("instance", .string(core.events.instance)),
                ("connections", .int(core.connectionCount)),
                ("scenarios", .array(core.engine.scenarios.map { .string($0.name) })),
                ("journal", core.journal.countersJSON()),
            ]))
        case ("GET", "requests"), ("HEAD", "requests"):
            let entries = core.journal.query(filter, limit: limit)
            respond(200, .object([
                ("requests", .array(entries.map { $0.json() })),
                ("counters", core.journal.countersJSON()),
            ]))
        case ("GET", "requests.har"), ("HEAD", "requests.har"):
            respond(200, HAR.document(core.journal.query(filter, limit: limit), creatorVersion: Faultline.version))
        case ("DELETE", "requests"):
            let cleared = core.journal.retainedCount
            core.clearJournal()
            respond(200, .object([("cleared", .int(cleared)), ("counters", core.journal.countersJSON())]))
        case ("GET", "requests/count"), ("HEAD", "requests/count"):
            respond(200, .object([("count", .int(core.journal.count(filter))), ("counters", core.journal.countersJSON())]))
        case ("GET", "requests/wait"), ("HEAD", "requests/wait"):
            guard let count = param("count").flatMap(Int.init), count >= 0 else {
                respond(400, .object([("error", .string("requests/wait needs count=N (a non-negative integer)"))]))
                return
            }
            // Not an integer maps to -1, so it is refused with the range rather than replaced by the default.
            let timeout = param("timeoutMs").map { Int($0) ?? -1 } ?? 5000
            guard timeout >= 0 && timeout <= 600_000 else {
                respond(400, .object([("error", .string("timeoutMs must be an integer between 0 and 600000"))]))
                return
            }
            wait(request, connectionID: connectionID, filter: filter, count: count, timeout: timeout, reply: reply)
        case ("GET", "scenarios"), ("HEAD", "scenarios"):
            let engine = core.engine
            let cursors = engine.routeCursors()
            respond(200, .object([("scenarios", .array(zip(engine.scenarios, engine.versions).enumerated().map { index, loaded in
                Self.describe(loaded.0, version: loaded.1, cursors: cursors[index] ?? [:])
            }))]))
        case ("POST", "scenarios"):
            // A misspelt mode must not silently replace every loaded scenario.
            let mode = param("mode") ?? "replace"
            guard mode == "add" || mode == "replace" else {
                respond(400, .object([("error", .string("mode must be add or replace, got \"\(mode)\""))]))
                return
            }
            loadScenarios(request.body, add: mode == "add", respond: { respond($0, $1) })
        case ("POST", "scenarios/reload"):
            let reload = core.reloadScenarioFiles(trigger: .admin)
            if reload.errors.isEmpty {
                respond(200, .object([
                    ("reloaded", .bool(reload.applied)),
                    ("changed", .array(reload.changed.map(Self.describe))),
                    ("removed", .array(reload.removed.map(JSONValue.string))),
                    ("scenarios", .array(reload.serving.map(Self.describe))),
                ]))
            } else {
                respond(core.configuration.scenarioPaths.isEmpty ? 409 : 400, .object([
                    ("error", .string("scenario files rejected; the scenarios already loaded keep serving")),
                    ("errors", .array(reload.errors.map(Self.describe))),
                ]))
            }
        case ("POST", "scenarios/reset"):
            let clearJournal: Bool?
            do {
                clearJournal = try Self.flag("journal", from: param)
            } catch {
                respond(400, .object([("error", .string(error.message))]))
                return
            }
            core.resetScenarios()
            var cleared = 0
            if clearJournal == true {
                cleared = core.journal.retainedCount
                core.clearJournal()
            }
            respond(200, .object([("reset", .bool(true)), ("journalCleared", .int(cleared))]))
        case ("GET", "report"), ("HEAD", "report"):
            let scenario = param("scenario")
            if let scenario, let problem = core.engine.unknownScenario(scenario) {
                respond(404, .object([("error", .string(problem))]))
                return
            }
            respond(200, core.engine.report(journal: core.journal.entries, scenario: scenario))
        case ("GET", "state"), ("HEAD", "state"):
            respond(200, core.engine.stateJSON(now: core.now()))
        case ("POST", "auth/expire"):
            if core.engine.expireToken() {
                core.events.stateChanged()
                respond(200, .object([("expired", .bool(true))]))
            } else {
                respond(409, .object([("error", .string("no loaded scenario declares auth"))]))
            }
        case ("GET", "resources"), ("HEAD", "resources"):
            respond(200, .object([("resources", core.engine.resources.json())]))
        case ("POST", "resources/change"):
            let answer = core.engine.resourceChange(request.body, now: core.now())
            core.events.stateChanged()
            respond(answer.status, answer.body)
        case ("GET", "network"), ("HEAD", "network"):
            respond(200, core.network.json())
        case ("POST", "network"):
            let answer = networkChange(request.body)
            core.events.stateChanged()
            respond(answer.status, answer.body)
        case ("GET", "openapi.json"), ("HEAD", "openapi.json"):
            // The bytes of docs/openapi.json as they are, not re-serialized JSON.
            let document = HTTPResponse(
                status: 200, headers: HTTPHeaders([("Content-Type", "application/json")]),
                body: PackageResources.openapi_json)
            reply(ResponseScript.simple(for: request, response: document), nil)
        case ("POST", "shutdown"):
            respond(202, .object([("stopping", .bool(true))]), after: { [core] in core.stop(afterClosing: connectionID) })
        case ("POST", "record/stop"):
            switch core.proxy.writeRecording() {
            case nil:
                respond(409, .object([
                    ("error", .string("this server is not recording")),
                    ("hint", .string("start it with faultline record --upstream URL --output DIR")),
                ]))
            case .failure(let failure)?:
                respond(500, .object([("error", .string(failure.description))]))
            case .success(let summary)?:
                respond(200, summary.json(), after: { [core] in core.stop(afterClosing: connectionID) })
            }
        default:
            respond(405, .object([("error", .string("\(request.method) is not allowed on \(request.path)"))]))
        }
    }

    // MARK: - The dashboard

    /// `GET /__faultline/` for anything but a browser: what the admin API offers.
    static func index() -> JSONValue {
        .object([
            ("name", .string("faultline admin API")),
            ("version", .string(Faultline.version)),
            ("dashboard", .string("open /__faultline/ in a browser (Accept: text/html)")),
            ("openapi", .string("/__faultline/openapi.json")),
            ("endpoints", .array(endpoints.map { endpoint in
                .object([("method", .string(endpoint.method)), ("path", .string(endpoint.path)), ("summary", .string(endpoint.summary))])
            })),
        ])
    }

    /// The dashboard's page or one of its assets, with the served policy; `Vary: Accept` since `/__faultline/`
    /// answers JSON to anything but a browser, and revalidated each time (a new binary brings new assets).
    private static func page(_ bytes: [UInt8], _ contentType: String) -> HTTPResponse {
        HTTPResponse(status: 200, headers: HTTPHeaders([
            ("Content-Type", contentType),
            ("Content-Security-Policy", DashboardPage.servedPolicy),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("Cache-Control", "no-cache"),
            ("Vary", "Accept"),
        ]), body: bytes)
    }

    // MARK: - Network

    /// `POST /network`: `{"listener", "connections", "conditions"}` as a timeline phase takes them, and `forMs`: put
    /// the network back (listener up, no conditions) after that long, since a client of this API cannot reach a
    /// refusing port to do it.
    private func networkChange(_ body: [UInt8]) -> (status: Int, body: JSONValue) {
        func failure(_ message: String) -> (status: Int, body: JSONValue) {
            (400, .object([("error", .string(message))]))
        }
        guard let document = try? JSONValue.parse(body), case .object(let members) = document else {
            return failure("the body must be a JSON object: {\"listener\", \"connections\", \"conditions\", \"forMs\"}")
        }
        var restoreAfter: Int?
        if let value = members.first(where: { $0.key == "forMs" })?.value {
            guard let ms = value.intValue, ms >= 1, ms <= ScenarioLoader.maxDelayMilliseconds else {
                return failure("forMs: expected an integer between 1 and \(ScenarioLoader.maxDelayMilliseconds)")
            }
            restoreAfter = ms
        }
        let change: NetworkChange
        switch ScenarioLoader.networkChange(.object(members.filter { $0.key != "forMs" })) {
        case .failure(let error):
            return (400, .object([
                ("error", .string("invalid network change")),
                ("problems", .array(error.errors.map { .string(($0.jsonPath.isEmpty ? "" : "\($0.jsonPath): ") + $0.message) })),
            ]))
        case .success(let parsed):
            change = parsed
        }
        guard !change.isEmpty else { return failure("the change changes nothing: give \"listener\", \"connections\" or \"conditions\"") }
        let record = core.network.apply(change, source: "admin", restoreAfterMilliseconds: restoreAfter)
        var answer = core.network.json()
        if case .object(var fields) = answer {
            fields.append(("change", record.json()))
            answer = .object(fields)
        }
        return (record.error == nil ? 200 : 409, answer)
    }

    // MARK: - Long-poll

    private func wait(
        _ request: HTTPRequest, connectionID: Int, filter: JournalFilter, count: Int, timeout: Int,
        reply: @escaping Reply
    ) {
        core.journalWaits.wait(filter, count: count, timeoutMilliseconds: timeout, owner: connectionID) {
            [unowned core] satisfied in
            reply(Self.waitAnswer(request, core.journal, filter, count, satisfied: satisfied), nil)
        }
    }

    /// 200 either way; `satisfied` says whether the condition held, and the entries show what was seen.
    private static func waitAnswer(
        _ request: HTTPRequest, _ journal: Journal, _ filter: JournalFilter, _ count: Int, satisfied: Bool
    ) -> ResponseScript {
        let entries = journal.query(filter)
        return ResponseScript.simple(for: request, response: .json(200, .object([
            ("satisfied", .bool(satisfied)),
            ("wanted", .int(count)),
            ("count", .int(entries.count)),
            ("requests", .array(entries.map { $0.json() })),
        ])))
    }

    // MARK: - Scenarios

    private func loadScenarios(_ body: [UInt8], add: Bool, respond: (Int, JSONValue) -> Void) {
        let loaded: [Scenario]
        do {
            loaded = try Self.parseUpload(body)
        } catch {
            respond(400, .object([
                ("error", .string("scenario rejected; the scenarios already loaded keep serving")),
                ("errors", .array(error.errors.map(Self.describe))),
            ]))
            return
        }
        core.load(add ? core.engine.scenarios + loaded : loaded)
        respond(200, .object([
            ("loaded", .array(loaded.map { .string($0.name) })),
            ("scenarios", .array(core.engine.scenarios.map { .string($0.name) })),
        ]))
    }

    /// A scenario object, an array of scenario objects, or `{"paths": [files or folders]}`.
    static func parseUpload(_ body: [UInt8]) throws(ScenarioLoadError) -> [Scenario] {
        let label = "<admin upload>"
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch {
            throw ScenarioLoadError(errors: [ScenarioError(file: label, jsonPath: "", message: error.description)])
        }
        switch value {
        case .object(let members) where members.count == 1 && members[0].key == "paths":
            guard case .array(let items) = members[0].value else {
                throw ScenarioLoadError(errors: [ScenarioError(file: label, jsonPath: "paths", message: "expected an array of file or folder paths")])
            }
            var paths: [String] = []
            for (index, item) in items.enumerated() {
                guard case .string(let path) = item else {
                    throw ScenarioLoadError(errors: [ScenarioError(file: label, jsonPath: "paths[\(index)]", message: "expected a string")])
                }
                paths.append(path)
            }
            return try ScenarioLoader.load(paths: paths)
        case .array(let items):
            var scenarios: [Scenario] = []
            var errors: [ScenarioError] = []
            for (index, item) in items.enumerated() {
                var bytes: [UInt8] = []
                item.serialize(into: &bytes)
                do {
                    scenarios.append(try ScenarioLoader.load(bytes: bytes, file: "\(label)[\(index)]", directory: nil))
                } catch {
                    errors += error.errors
                }
            }
            if !errors.isEmpty { throw ScenarioLoadError(errors: errors) }
            return scenarios
        default:
            return [try ScenarioLoader.load(bytes: body, file: label, directory: nil)]
        }
    }

    private static func describe(_ error: ScenarioError) -> JSONValue {
        .object([
            ("file", .string(error.file)), ("path", .string(error.jsonPath)), ("message", .string(error.message)),
            ("description", .string(error.description)),
        ])
    }

    private static func describe(_ scenario: ScenarioReload.Version) -> JSONValue {
        .object([("name", .string(scenario.name)), ("version", .int(scenario.version)), ("source", .string(scenario.source))])
    }

    private static func describe(
        _ scenario: Scenario, version: Int, cursors: [String: (cursors: [JSONValue], partitions: Int)]
    ) -> JSONValue {
        .object([
            ("name", .string(scenario.name)),
            ("version", .int(version)),
            ("description", scenario.description.map(JSONValue.string) ?? .null),
            ("source", .string(scenario.sourceFile)),
            ("seed", .number(String(scenario.seed))),
            ("routes", .array(scenario.routes.map { route in
                .object([
                    ("id", .string(route.id)),
                    ("methods", .array(route.match.methods.map(JSONValue.string))),
                    ("path", route.match.path.map { .string($0.source) } ?? .null),
                    ("prefix", .bool(route.match.path?.isPrefix ?? false)),
                    ("steps", .int(route.responses.count)),
                    ("afterLast", .string(route.afterLast.rawValue)),
                    ("script", .array(route.responses.map(Self.describe))),
                    ("cursors", .array(cursors[route.id]?.cursors ?? [])),
                    ("partitions", .int(cursors[route.id]?.partitions ?? 0)),
                ])
            })),
        ])
    }

    /// A step as written, in short: what the dashboard shows beside an entry that it answered (the journal keeps
    /// the request, not the response's header section). Header values and bodies are the templates, not their
    /// expansions.
    private static func describe(_ step: ResponseStep) -> JSONValue {
        let kind: String
        switch step.kind {
        case .plain: kind = "plain"
        case .resource: kind = "resource"
        case .websocket: kind = "websocket"
        case .proxy: kind = "proxy"
        }
        let delay: JSONValue
        switch step.delay {
        case nil: delay = .null
        case .fixed(let ms)?: delay = .string("\(ms) ms")
        case .uniform(let low, let high)?: delay = .string("\(low)–\(high) ms, uniform")
        case .logNormal(let median, let sigma)?: delay = .string("log-normal, median \(median) ms, σ \(sigma)")
        }
        return .object([
            ("kind", .string(kind)),
            ("status", .int(step.status)),
            ("headers", .array(step.headers.map { .array([.string($0.name), .string($0.value)]) })),
            ("times", .int(step.times)),
            ("fault", step.fault.map { .string($0.name.rawValue) } ?? .null),
            ("delay", delay),
            ("drip", step.drip.map { .string("\($0.size) bytes every \($0.intervalMilliseconds) ms") } ?? .null),
            ("closeConnection", .bool(step.closeConnection)),
        ])
    }

    // MARK: - Filters

    struct BadFilter: Error {
        var message: String
    }

    static func filter(from param: (String) -> String?) throws(BadFilter) -> JournalFilter {
        func int(_ name: String) throws(BadFilter) -> Int? {
            guard let text = param(name) else { return nil }
            guard let value = Int(text) else { throw BadFilter(message: "\(name) must be an integer, got \"\(text)\"") }
            return value
        }
        func bool(_ name: String) throws(BadFilter) -> Bool? { try flag(name, from: param) }
        var filter = JournalFilter(
            route: param("route"), method: param("method"), path: param("path"), status: try int("status"),
            since: try int("since"), matched: try bool("matched"), malformed: try bool("malformed"),
            completed: try bool("completed"))
        filter.connection = try bool("connection")
        if let text = param("outcome") {
            guard let outcome = ExchangeOutcome(rawValue: text) else {
                throw BadFilter(message: "unknown outcome \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: ExchangeOutcome.allCases.map(\.rawValue)))
            }
            filter.outcome = outcome
        }
        return filter
    }

    /// A boolean query parameter: `true`/`1` or `false`/`0`; nil when absent.
    static func flag(_ name: String, from param: (String) -> String?) throws(BadFilter) -> Bool? {
        guard let text = param(name) else { return nil }
        switch text {
        case "true", "1": return true
        case "false", "0": return false
        default: throw BadFilter(message: "\(name) must be true or false, got \"\(text)\"")
        }
    }

    /// `limit`, the newest N entries (none when N ≤ 0); nil when absent. Not an integer is an error, not "no limit".
    static func limit(from param: (String) -> String?) throws(BadFilter) -> Int? {
        guard let text = param("limit") else { return nil }
        guard let value = Int(text) else { throw BadFilter(message: "limit must be an integer, got \"\(text)\"") }
        return max(value, 0)
    }
}
