import FaultlineCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The parts of the Swift API a test asserts with: waiting for requests, the policy state, the verdicts.
extension FaultlineServer {
    /// `waitForRequests` gave up: the condition did not hold in time (the same type `FaultlineRemote` throws).
    public typealias WaitTimeout = FaultlineWaitTimeout

    /// Starts a server on 127.0.0.1, port 0, serving the scenario files or folders at `paths`.
    /// Throws `ServerError.scenarios` when the files do not load, like every initialiser here: one typed error.
    public convenience init(scenarioPaths paths: [String]) throws(ServerError) {
        let scenarios: [Scenario]
        do {
            scenarios = try ScenarioLoader.load(paths: paths)
        } catch {
            throw .scenarios(error)
        }
        var configuration = Configuration(scenarios: scenarios)
        configuration.scenarioPaths = paths
        try self.init(configuration: configuration)
    }

    /// The server the `.faultline(…)` Swift Testing trait (product `FaultlineTesting`) started for the running test.
    @TaskLocal public static var current: FaultlineServer?

    /// Runs `body` with a server on 127.0.0.1, port 0, serving the scenario files or folders at `paths`, and
    /// always awaits the server's shutdown, whether `body` returns or throws. Relative paths are resolved against
    /// the folder of the source file that calls (`#filePath`), not the working directory, which under Xcode is
    /// not the package root:
    ///
    ///     try await FaultlineServer.with(scenarioFiles: ["scenarios/orders.json"]) { server in … }
    public static func with<Result>(
        scenarioFiles paths: [String], relativeTo sourceFile: String = #filePath,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (FaultlineServer) async throws -> Result
    ) async throws -> Result {
        let server = try FaultlineServer(scenarioPaths: paths.map { resolve($0, relativeTo: sourceFile) })
        return try await server.scoped(body)
    }

    /// Runs `body` with a server started from `configuration` and always awaits its shutdown.
    public static func with<Result>(
        configuration: Configuration, isolation: isolated (any Actor)? = #isolation,
        _ body: (FaultlineServer) async throws -> Result
    ) async throws -> Result {
        let server = try FaultlineServer(configuration: configuration)
        return try await server.scoped(body)
    }

    private func scoped<Result>(
        isolation: isolated (any Actor)? = #isolation, _ body: (FaultlineServer) async throws -> Result
    ) async throws -> Result {
        let result: Result
        do {
            result = try await body(self)
        } catch {
            await stop()
            throw error
        }
        await stop()
        return result
    }

    /// `path` as it is when absolute, else against the folder of `sourceFile`.
    package static func resolve(_ path: String, relativeTo sourceFile: String) -> String {
        guard !path.hasPrefix("/"), let slash = sourceFile.lastIndex(of: "/") else { return path }
        return String(sourceFile[..<slash]) + "/" + path
    }

    /// Returns as soon as `count` journal entries match `filter` (with `completed: true` in the filter, once
    /// their exchanges have ended), or throws `WaitTimeout` after `timeout`. No polling: the loop answers
    /// when the journal changes.
    public func waitForRequests(
        count: Int, matching filter: JournalFilter = JournalFilter(), timeout: Duration = .seconds(5)
    ) async throws -> [JournalEntry] {
        let milliseconds = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let result: (satisfied: Bool, entries: [JournalEntry]) = await withCheckedContinuation { continuation in
            loop.post { [core] in
                let answer = Once(continuation)
                core.journalWaits.wait(filter, count: count, timeoutMilliseconds: milliseconds, owner: nil) {
                    [unowned core] satisfied in
                    answer.resume((satisfied, core.journal.query(filter)))
                }
            }
        }
        guard result.satisfied else { throw WaitTimeout(wanted: count, seen: result.entries) }
        return result.entries
    }

    /// `GET /__faultline/state`, typed: tokens, refresh counts, buckets, Retry-After judgements, idempotency
    /// records, side effects.
    public func state() async throws -> PolicyState {
        try PolicyState(json: await stateJSON())
    }

    /// `GET /__faultline/state` as the admin API sends it.
    public func stateJSON() async -> JSONValue {
        await loop.submit { [core] in core.engine.stateJSON(now: core.now()) }
    }

    /// Every resource and its instances, as `GET /__faultline/resources` lists them.
    public func resources() async -> JSONValue {
        await loop.submit { [core] in core.engine.resources.json() }
    }

    /// A new version of resource `id` behind the client's back, as `POST /__faultline/resources/change` makes it:
    /// every instance, or the one at `path`; with `body`, that instance's new bytes; with `delete`, no
    /// representation. False when no resource has that id.
    @discardableResult
    public func changeResource(
        _ id: String, path: String? = nil, body: [UInt8]? = nil, contentType: String? = nil, delete: Bool = false
    ) async -> Bool {
        await loop.submit { [core] in
            core.engine.changeResource(
                id, path: path, body: body, contentType: contentType, delete: delete, now: core.now())
        }
    }

    /// The network as `GET /__faultline/network` shows it: the listener's state, the conditions, a freeze, the
    /// timeline's progress (ARCHITECTURE §3b).
    public func network() async -> JSONValue {
        await loop.submit { [core] in core.network.json() }
    }

    /// Changes the network as `POST /__faultline/network` does (journaled with source `api`): the listener's state,
    /// an action on the open connections, the conditions. With `restoringAfter` (ms), the listener comes back up and
    /// the conditions are cleared after that long. Connections whose latest request was an admin call are left
    /// alone. Returns the journal's record of the change; its `error` says when a port could not be bound again.
    @discardableResult
    public func changeNetwork(_ change: NetworkChange, restoringAfter milliseconds: Int? = nil) async -> NetworkRecord {
        await loop.submit { [core] in core.network.apply(change, source: "api", restoreAfterMilliseconds: milliseconds) }
    }

    /// How many journal entries match `filter`, as `GET /__faultline/requests/count` counts them.
    public func count(_ filter: JournalFilter = JournalFilter()) async -> Int {
        await loop.submit { [core] in core.journal.count(filter) }
    }

    /// The verdicts of every loaded scenario's `expect`, as `GET /__faultline/report` gives them.
    public func report() async -> Report {
        let json = await loop.submit { [core] in core.engine.report(journal: core.journal.entries) }
        return Report(json)
    }

    /// The counters of the journal: exact even after eviction.
    public func journalCounters() async -> JSONValue {
        await loop.submit { [core] in core.journal.countersJSON() }
    }
}

/// Resumes a continuation once, however many times the answer is given.
/// Loop thread only.
private final class Once<Value: Sendable>: @unchecked Sendable {
    private var continuation: CheckedContinuation<Value, Never>?

    init(_ continuation: CheckedContinuation<Value, Never>) {
        self.continuation = continuation
    }

    func resume(_ value: Value) {
        continuation?.resume(returning: value)
        continuation = nil
    }
}
