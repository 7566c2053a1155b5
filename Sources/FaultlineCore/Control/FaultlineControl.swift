#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a test needs from a Faultline server, whether it runs in-process (`FaultlineServer`) or in another
/// process (`FaultlineRemote`, over the admin API), so the same test code works with either.
public protocol FaultlineControl: Sendable {
    var baseURL: URL { get }
    func requests(_ filter: JournalFilter, limit: Int?) async throws -> [JournalEntry]
    /// How many journal entries match `filter` (`GET /__faultline/requests/count`).
    func count(_ filter: JournalFilter) async throws -> Int
    func waitForRequests(count: Int, matching filter: JournalFilter, timeout: Duration) async throws -> [JournalEntry]
    func report() async throws -> Report
    /// The policies' state, typed.
    func state() async throws -> PolicyState
    /// The policies' state as the admin API sends it.
    func stateJSON() async throws -> JSONValue
    /// The journal's counters (exact even after eviction), as the admin API sends them.
    func journalCounters() async throws -> JSONValue
    func resetScenarios() async throws
    func clearJournal() async throws
}

/// `waitForRequests` gave up: the condition did not hold in time. `seen` is what matched by then. Thrown by
/// `FaultlineServer` and `FaultlineRemote` alike (each names it `WaitTimeout`).
public struct FaultlineWaitTimeout: Error, CustomStringConvertible {
    public var wanted: Int
    public var seen: [JournalEntry]

    package init(wanted: Int, seen: [JournalEntry]) {
        self.wanted = wanted
        self.seen = seen
    }

    public var description: String {
        "waited for \(wanted) matching request(s), saw \(seen.count)" + (seen.isEmpty ? "" : ": ")
            + seen.map { "#\($0.sequence) \($0.method ?? "?") \($0.path ?? $0.requestLine) → \($0.status.map(String.init) ?? "-")" }
                .joined(separator: ", ")
    }
}
