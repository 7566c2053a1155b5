import FaultlineCore
import Foundation

/// The parts of the Swift API a test asserts with: waiting for requests, the policy state, the verdicts.
extension FaultlineServer {
    /// `waitForRequests` gave up: the condition did not hold in time. `seen` is what matched by then.
    public struct WaitTimeout: Error, CustomStringConvertible {
        public var wanted: Int
        public var seen: [JournalEntry]
        public var description: String {
            "waited for \(wanted) matching request(s), saw \(seen.count)" + (seen.isEmpty ? "" : ": ")
                + seen.map { "#\($0.sequence) \($0.method ?? "?") \($0.path ?? $0.requestLine) → \($0.status.map(String.init) ?? "-")" }
                    .joined(separator: ", ")
        }
    }

    /// Starts a server on 127.0.0.1, port 0, serving the scenario files or folders at `paths`.
    public convenience init(scenarioPaths paths: [String]) throws {
        var configuration = Configuration(scenarios: try ScenarioLoader.load(paths: paths))
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

    /// `GET /__faultline/state`: tokens, refresh counts, buckets, Retry-After judgements, idempotency records.
    public func state() async -> JSONValue {
        await loop.submit { [core] in core.engine.stateJSON(now: core.now()) }
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

/// The verdicts, typed for assertions: `#expect(await server.report().passed)`.
public struct Report: Sendable, CustomStringConvertible {
    public struct Entry: Sendable {
        public var scenario: String
        public var rule: String
        public var passed: Bool
        public var explanation: String
        public var evidence: [Int]
        /// `.inconclusive` when there were too few samples to judge (then `passed` is true).
        public var outcome: Outcome = .pass
    }

    /// A verdict's (or the report's) state: `passed` is false exactly when it is `.fail`.
    public enum Outcome: String, Sendable {
        case pass, fail, inconclusive
    }

    /// True unless a verdict failed; inconclusive verdicts do not fail the report.
    public var passed: Bool
    /// `.fail` if a verdict failed, else `.inconclusive` if one was inconclusive, else `.pass`.
    public var outcome: Outcome
    public var verdicts: [Entry]
    /// The report as the admin API sends it.
    public var json: JSONValue

    init(_ json: JSONValue) {
        self.json = json
        if case .bool(let flag)? = json["passed"] { passed = flag } else { passed = false }
        func state(_ value: JSONValue?, passed: Bool) -> Outcome {
            if case .string(let text)? = value, let outcome = Outcome(rawValue: text) { return outcome }
            return passed ? .pass : .fail
        }
        outcome = state(json["outcome"], passed: passed)
        var entries: [Entry] = []
        if case .array(let items)? = json["verdicts"] {
            for item in items {
                func text(_ key: String) -> String { if case .string(let value)? = item[key] { return value }; return "" }
                var evidence: [Int] = []
                if case .array(let numbers)? = item["evidence"] {
                    evidence = numbers.compactMap { if case .number(let n) = $0 { return Int(n) }; return nil }
                }
                let ok: Bool
                if case .bool(let flag)? = item["passed"] { ok = flag } else { ok = false }
                entries.append(Entry(scenario: text("scenario"), rule: text("rule"), passed: ok,
                                     explanation: text("explanation"), evidence: evidence,
                                     outcome: state(item["outcome"], passed: ok)))
            }
        }
        verdicts = entries
    }

    /// The rules that failed.
    public var failed: [Entry] { verdicts.filter { !$0.passed } }

    /// The rules there were too few samples to judge.
    public var inconclusive: [Entry] { verdicts.filter { $0.outcome == .inconclusive } }

    public var description: String {
        verdicts.map { "\($0.outcome == .inconclusive ? "INCONCLUSIVE" : $0.passed ? "PASS" : "FAIL") \($0.scenario)/\($0.rule): \($0.explanation)" }
            .joined(separator: "\n")
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
