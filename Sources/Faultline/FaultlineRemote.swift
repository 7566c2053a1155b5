import FaultlineCore
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a test needs from a Faultline server, whether it runs in-process (`FaultlineServer`) or in another
/// process (`FaultlineRemote`, over the admin API), so the same test code works with either.
public protocol FaultlineControl: Sendable {
    var baseURL: URL { get }
    func requests(_ filter: JournalFilter, limit: Int?) async throws -> [JournalEntry]
    func waitForRequests(count: Int, matching filter: JournalFilter, timeout: Duration) async throws -> [JournalEntry]
    func report() async throws -> Report
    func state() async throws -> JSONValue
    func resetScenarios() async throws
    func clearJournal() async throws
}

extension FaultlineServer: FaultlineControl {}

/// A Faultline server in another process (`faultline serve`), driven through `/__faultline/`.
public struct FaultlineRemote: FaultlineControl {
    public let baseURL: URL
    private let session: URLSession

    /// Why a call to the admin API failed.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public init(baseURL: URL) {
        self.baseURL = baseURL
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 620
        session = URLSession(configuration: configuration)
    }

    public func requests(_ filter: JournalFilter = JournalFilter(), limit: Int? = nil) async throws -> [JournalEntry] {
        var query = Self.query(filter)
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        return try Self.entries(try await call("GET", "requests", query)["requests"])
    }

    public func waitForRequests(
        count: Int, matching filter: JournalFilter = JournalFilter(), timeout: Duration = .seconds(5)
    ) async throws -> [JournalEntry] {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        let answer = try await call("GET", "requests/wait", Self.query(filter) + [
            URLQueryItem(name: "count", value: String(count)), URLQueryItem(name: "timeoutMs", value: String(milliseconds)),
        ])
        let entries = try Self.entries(answer["requests"])
        guard answer["satisfied"] == .bool(true) else {
            throw FaultlineServer.WaitTimeout(wanted: count, seen: entries)
        }
        return entries
    }

    public func report() async throws -> Report { Report(try await call("GET", "report")) }
    public func state() async throws -> JSONValue { try await call("GET", "state") }
    public func resetScenarios() async throws { _ = try await call("POST", "scenarios/reset") }
    public func clearJournal() async throws { _ = try await call("DELETE", "requests") }

    private func call(_ method: String, _ path: String, _ query: [URLQueryItem] = []) async throws -> JSONValue {
        var components = URLComponents(url: baseURL.appendingPathComponent("__faultline/" + path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query }
        var request = URLRequest(url: components.url!)
        request.httpMethod = method
        let (data, response) = try await session.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            throw Failure(description: "\(method) /__faultline/\(path): \(status) \(String(decoding: data, as: UTF8.self))")
        }
        return try JSONValue.parse(Array(data))
    }

    private static func query(_ filter: JournalFilter) -> [URLQueryItem] {
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
        return items
    }

    private static func entries(_ value: JSONValue?) throws -> [JournalEntry] {
        guard case .array(let items)? = value else { throw Failure(description: "the answer has no requests") }
        return items.compactMap(JournalEntry.init(json:))
    }
}
