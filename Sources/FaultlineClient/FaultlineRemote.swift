// FaultlineCore's journal, JSON and control types are this module's vocabulary (`JournalFilter`, `JournalEntry`,
// `JSONValue`, `FaultlineControl`, `Report`, `PolicyState`): a test bundle that imports FaultlineClient alone can
// name them.
@_exported import FaultlineCore
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A Faultline server in another process (`faultline serve`), driven through `/__faultline/`: every operation of
/// the admin API has a method here (`operations`). Foundation only, no libevent: an iOS simulator test bundle can
/// link it to drive a `faultline serve` on the Mac host.
public struct FaultlineRemote: FaultlineControl {
    public let baseURL: URL
    private let session: URLSession

    /// Why a call to the admin API failed: a status outside 2xx (with the server's answer), or an answer that is
    /// not what the operation sends.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        /// The HTTP status, when the server answered.
        public var status: Int?
    }

    /// Every operation of the admin API (`Sources/Faultline/Resources/openapi.json`, HEAD left out) and the method
    /// that calls it. The parity test fails when the two disagree, either way.
    public static let operations: [(method: String, path: String, swiftMethod: String)] = [
        ("GET", "/__faultline/health", "health()"),
        ("GET", "/__faultline/requests", "requests(_:limit:)"),
        ("DELETE", "/__faultline/requests", "clearJournal()"),
        ("GET", "/__faultline/requests.har", "har(_:limit:)"),
        ("GET", "/__faultline/requests/count", "count(_:)"),
        ("GET", "/__faultline/requests/wait", "waitForRequests(count:matching:timeout:)"),
        ("GET", "/__faultline/scenarios", "scenarios()"),
        ("POST", "/__faultline/scenarios", "loadScenarios(_:add:)"),
        ("POST", "/__faultline/scenarios/reset", "resetScenarios(journal:)"),
        ("POST", "/__faultline/scenarios/reload", "reloadScenarioFiles()"),
        ("GET", "/__faultline/report", "report()"),
        ("GET", "/__faultline/state", "state()"),
        ("POST", "/__faultline/auth/expire", "expireToken()"),
        ("GET", "/__faultline/resources", "resources()"),
        ("POST", "/__faultline/resources/change", "changeResource(_:)"),
        ("POST", "/__faultline/record/stop", "stopRecording()"),
        ("GET", "/__faultline/network", "network()"),
        ("POST", "/__faultline/network", "changeNetwork(_:)"),
        ("POST", "/__faultline/shutdown", "shutdown()"),
        ("GET", "/__faultline/openapi.json", "openAPIDocument()"),
        ("GET", "/__faultline/", "index()"),
        ("GET", "/__faultline/events", "events(cursor:timeout:)"),
        ("GET", "/__faultline/ui/{asset}", "dashboardAsset(_:)"),
    ]

    /// `waitForRequests` gave up (the same type `FaultlineServer.WaitTimeout` names).
    public typealias WaitTimeout = FaultlineWaitTimeout

    public init(baseURL: URL) {
        self.baseURL = baseURL
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 620  // a long-poll waits up to 600 s
        session = URLSession(configuration: configuration)
    }

    // MARK: - Health

    /// `GET /__faultline/health`: liveness, version, port, uptime, connections, scenarios, journal counters.
    public func health() async throws -> Health { try await decode(Health.self, "GET", "health") }

    // MARK: - The journal

    /// `GET /__faultline/requests`: the entries matching `filter`; with `limit`, the newest `limit` of them.
    public func requests(_ filter: JournalFilter = JournalFilter(), limit: Int? = nil) async throws -> [JournalEntry] {
        try Self.entries(try await call("GET", "requests", Self.query(filter, limit: limit))["requests"])
    }

    /// `GET /__faultline/requests/count`: how many entries match `filter`.
    public func count(_ filter: JournalFilter = JournalFilter()) async throws -> Int {
        guard case .number(let text)? = try await call("GET", "requests/count", Self.query(filter))["count"], let count = Int(text) else {
            throw Failure(description: "GET /__faultline/requests/count: the answer has no count")
        }
        return count
    }

    /// The journal's counters (exact even after eviction), from `GET /__faultline/requests/count`.
    public func journalCounters() async throws -> JSONValue {
        guard let counters = try await call("GET", "requests/count")["counters"] else {
            throw Failure(description: "GET /__faultline/requests/count: the answer has no counters")
        }
        return counters
    }

    /// `GET /__faultline/requests/wait`: returns as soon as `count` entries match `filter` (with `completed: true`,
    /// once their exchanges have ended), or throws `WaitTimeout` with what it saw after `timeout` (at most 600 s).
    public func waitForRequests(
        count: Int, matching filter: JournalFilter = JournalFilter(), timeout: Duration = .seconds(5)
    ) async throws -> [JournalEntry] {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        let answer = try await call("GET", "requests/wait", Self.query(filter) + [
            URLQueryItem(name: "count", value: String(count)), URLQueryItem(name: "timeoutMs", value: String(milliseconds)),
        ])
        let entries = try Self.entries(answer["requests"])
        guard answer["satisfied"] == .bool(true) else {
            throw WaitTimeout(wanted: count, seen: entries)
        }
        return entries
    }

    /// `DELETE /__faultline/requests`: forgets the journal's entries (sequence numbers and counters go on).
    public func clearJournal() async throws { _ = try await call("DELETE", "requests") }

    /// `GET /__faultline/requests.har`: the matching entries as an HTTP Archive (HAR 1.2), the server's bytes.
    public func har(_ filter: JournalFilter = JournalFilter(), limit: Int? = nil) async throws -> Data {
        try await send("GET", "requests.har", Self.query(filter, limit: limit))
    }

    /// The HAR document of `har(_:limit:)`, parsed (key order and number text kept).
    public func harDocument(_ filter: JournalFilter = JournalFilter(), limit: Int? = nil) async throws -> JSONValue {
        try Self.parse(try await har(filter, limit: limit), "GET /__faultline/requests.har")
    }

    /// The matching entries as NDJSON: one line of JSON per entry, each exactly as `GET /__faultline/requests`
    /// sends it (what `faultline export --format ndjson` writes).
    public func ndjson(_ filter: JournalFilter = JournalFilter(), limit: Int? = nil) async throws -> Data {
        guard case .array(let entries)? = try await call("GET", "requests", Self.query(filter, limit: limit))["requests"] else {
            throw Failure(description: "GET /__faultline/requests: the answer has no requests")
        }
        return Data(entries.map { $0.serialized() + "\n" }.joined().utf8)
    }

    // MARK: - Scenarios

    /// `GET /__faultline/scenarios`: the loaded scenarios, their versions and routes (schema `ScenarioList`).
    public func scenarios() async throws -> JSONValue { try await call("GET", "scenarios") }

    /// `POST /__faultline/scenarios`: loads `document` (a scenario object, an array of them, or
    /// `{"paths": [...]}` naming files or folders on the server's machine). They replace the loaded scenarios, or
    /// with `add`, join them. Returns the names loaded; a rejected document throws `Failure` with the errors.
    @discardableResult
    public func loadScenarios(_ document: Data, add: Bool = false) async throws -> [String] {
        let answer = try Self.parse(
            try await send("POST", "scenarios", add ? [URLQueryItem(name: "mode", value: "add")] : [], body: document),
            "POST /__faultline/scenarios")
        guard case .array(let names)? = answer["loaded"] else {
            throw Failure(description: "POST /__faultline/scenarios: the answer has no loaded names")
        }
        return names.compactMap { if case .string(let name) = $0 { return name }; return nil }
    }

    /// `loadScenarios(_:add:)` with the document as JSON text.
    @discardableResult
    public func loadScenarios(json: String, add: Bool = false) async throws -> [String] {
        try await loadScenarios(Data(json.utf8), add: add)
    }

    /// `POST /__faultline/scenarios/reset`: rewinds every script.
    public func resetScenarios() async throws { _ = try await call("POST", "scenarios/reset") }

    /// `POST /__faultline/scenarios/reset?journal=true`: rewinds every script and, with `journal`, also clears the
    /// journal. Returns how many journal entries were cleared.
    @discardableResult
    public func resetScenarios(journal: Bool) async throws -> Int {
        let answer = try await call("POST", "scenarios/reset", [URLQueryItem(name: "journal", value: String(journal))])
        guard case .number(let text)? = answer["journalCleared"], let cleared = Int(text) else { return 0 }
        return cleared
    }

    /// `POST /__faultline/scenarios/reload`: reads the scenario files again (as SIGHUP and `--watch` do). Returns
    /// the answer (schema `ReloadResult`); rejected files throw `Failure`, and the loaded scenarios keep serving.
    @discardableResult
    public func reloadScenarioFiles() async throws -> JSONValue { try await call("POST", "scenarios/reload") }

    // MARK: - Verdicts and policies

    /// `GET /__faultline/report`: every scenario's `expect` rules judged against the journal.
    public func report() async throws -> Report { Report(try await call("GET", "report")) }

    /// `GET /__faultline/state`, typed.
    public func state() async throws -> PolicyState { try await decode(PolicyState.self, "GET", "state") }

    /// `GET /__faultline/state` as the server sends it.
    public func stateJSON() async throws -> JSONValue { try await call("GET", "state") }

    /// `POST /__faultline/auth/expire`: expires the current access token now. Throws `Failure` (status 409) when no
    /// loaded scenario declares `auth`.
    public func expireToken() async throws { _ = try await call("POST", "auth/expire") }

    // MARK: - Resources

    /// `GET /__faultline/resources`: every resource and its instances (version, ETag, Last-Modified, size).
    public func resources() async throws -> JSONValue { try await call("GET", "resources") }

    /// `POST /__faultline/resources/change`: `change` is `{"id": …, "path"?: …, "json"|"text"|"base64"?: …,
    /// "delete"?: true}`. Returns the resource as `resources()` lists it.
    @discardableResult
    public func changeResource(_ change: JSONValue) async throws -> JSONValue {
        var body: [UInt8] = []
        change.serialize(into: &body)
        return try Self.parse(try await send("POST", "resources/change", body: Data(body)), "POST /__faultline/resources/change")
    }

    // MARK: - Network

    /// `GET /__faultline/network`: the listener's state, the conditions, a freeze, the timeline's progress.
    public func network() async throws -> JSONValue { try await call("GET", "network") }

    /// `POST /__faultline/network`: `change` is `{"listener"?, "connections"?, "conditions"?, "forMs"?}` (a timeline
    /// phase's fields; `forMs` puts the network back after that long, since this client cannot reach a refusing port
    /// to do it). Returns the state after it, with the journal's record of the change under `change`.
    @discardableResult
    public func changeNetwork(_ change: JSONValue) async throws -> JSONValue {
        var body: [UInt8] = []
        change.serialize(into: &body)
        return try Self.parse(try await send("POST", "network", body: Data(body)), "POST /__faultline/network")
    }

    // MARK: - The server

    /// `POST /__faultline/record/stop` (`faultline record`): writes the recording, answers with where it went
    /// (`file`, `routes`, `exchanges`, `dropped`), then the server stops.
    public func stopRecording() async throws -> JSONValue { try await call("POST", "record/stop") }

    /// `POST /__faultline/shutdown`: the server stops after answering.
    public func shutdown() async throws { _ = try await call("POST", "shutdown") }

    /// `GET /__faultline/openapi.json`: the admin API described in OpenAPI 3.1, the server's bytes.
    public func openAPIDocument() async throws -> Data { try await send("GET", "openapi.json") }

    // MARK: - The dashboard

    /// `GET /__faultline/` asked for JSON: the index of the admin endpoints (a browser gets the dashboard there).
    public func index() async throws -> JSONValue { try await call("GET", "") }

    /// `GET /__faultline/events`, the dashboard's feed: `{"instance", "cursor", "reset", "state", "skipped",
    /// "entries"}`. Without `cursor` it answers at once with `reset: true` and a cursor; with one, as soon as an
    /// entry was recorded or changed since it (or state outside the journal changed), or after `timeout` (at most
    /// 60 s) with no entries and the same cursor.
    public func events(cursor: Int? = nil, timeout: Duration = .seconds(25)) async throws -> JSONValue {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        var query = [URLQueryItem(name: "timeoutMs", value: String(milliseconds))]
        if let cursor { query.append(URLQueryItem(name: "cursor", value: String(cursor))) }
        return try await call("GET", "events", query)
    }

    /// `GET /__faultline/ui/NAME`: one of the dashboard's assets as served (`dashboard.js`, `dashboard.css`,
    /// `favicon.svg`).
    public func dashboardAsset(_ name: String) async throws -> Data { try await send("GET", "ui/" + name) }

    // MARK: - Plumbing

    private func send(_ method: String, _ path: String, _ query: [URLQueryItem] = [], body: Data? = nil) async throws -> Data {
        var components = URLComponents(url: baseURL.appendingPathComponent("__faultline/" + path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query }
        var request = URLRequest(url: components.url!)
        request.httpMethod = method
        // JSON, never the dashboard's page (`GET /__faultline/` answers a browser's Accept with HTML).
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await session.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            throw Failure(description: "\(method) /__faultline/\(path): \(status) \(String(decoding: data, as: UTF8.self))",
                          status: status)
        }
        return data
    }

    private func call(_ method: String, _ path: String, _ query: [URLQueryItem] = []) async throws -> JSONValue {
        try Self.parse(try await send(method, path, query), "\(method) /__faultline/\(path)")
    }

    private func decode<Value: Decodable>(_ type: Value.Type, _ method: String, _ path: String) async throws -> Value {
        let data = try await send(method, path)
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw Failure(description: "\(method) /__faultline/\(path): the answer is not a \(type): \(error)")
        }
    }

    private static func parse(_ data: Data, _ what: String) throws -> JSONValue {
        do {
            return try JSONValue.parse(Array(data))
        } catch {
            throw Failure(description: "\(what): the answer is not JSON: \(error)")
        }
    }

    private static func query(_ filter: JournalFilter, limit: Int? = nil) -> [URLQueryItem] {
        var items: [URLQueryItem] = []
        func add(_ name: String, _ value: String?) { if let value { items.append(URLQueryItem(name: name, value: value)) } }
        add("route", filter.route)
        add("method", filter.method)
        add("path", filter.path)
        add("status", filter.status.map(String.init))
        add("since", filter.since.map(String.init))
        add("matched", filter.matched.map(String.init))
        add("malformed", filter.malformed.map(String.init))
        add("completed", filter.completed.map(String.init))
        add("connection", filter.connection.map(String.init))
        add("outcome", filter.outcome?.rawValue)
        add("limit", limit.map(String.init))
        return items
    }

    private static func entries(_ value: JSONValue?) throws -> [JournalEntry] {
        guard case .array(let items)? = value else { throw Failure(description: "the answer has no requests") }
        return items.compactMap(JournalEntry.init(json:))
    }
}
