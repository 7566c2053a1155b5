import FaultlineCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Faultline's version, as `--version` and `/__faultline/health` report it.
public enum Faultline {
    public static let version = "0.1.0"
}

/// What a server served, told when it stops (`Configuration.onStop`), taken on the loop thread.
package struct StopSummary: Sendable {
    /// Every request ever journaled, evicted and cleared ones too, by outcome (`Journal.requestOutcomes`).
    package var outcomes: [(outcome: ExchangeOutcome, count: Int)]
    /// The verdicts of the loaded scenarios' `expect`, judged on the entries still kept, as `GET /report` does.
    package var report: Report

    package init(outcomes: [(outcome: ExchangeOutcome, count: Int)], report: Report) {
        self.outcomes = outcomes
        self.report = report
    }

    package var requests: Int { outcomes.reduce(0) { $0 + $1.count } }
}

/// A running Faultline server: a libevent loop on its own thread, serving the scripted routes and the admin
/// API on one port. Start one per test (port 0 picks a free port); every method is safe from any thread and
/// is carried out on the loop thread.
///
/// ```swift
/// let server = try FaultlineServer(configuration: .init(scenarios: ScenarioLoader.load(paths: ["scenarios"])))
/// defer { Task { await server.stop() } }
/// let (data, _) = try await URLSession.shared.data(from: server.baseURL.appending(path: "v1/products/1"))
/// ```
public final class FaultlineServer: Sendable {
    /// How to run the server. The command line (`faultline serve` and `record`, parsed in the executable:
    /// Sources/FaultlineCLI) fills one of these in; the parsing stays out of the library every app links. What the
    /// options turn into stays here, because a Configuration holds it and a Swift test sets the same knobs:
    /// `RequestLogFormat`, `TLSOptions`, `ProxyConfig`, `LinkShape`, `ScenarioReload`, and the `package`
    /// `RecordingConfiguration`, which only `record` sets but the server carries out.
    public struct Configuration: Sendable {
        /// Interface to bind. Loopback unless told otherwise: a stub server has no business on a network.
        public var host: String = "127.0.0.1"
        /// 0 picks a free port; read it back from `port`.
        public var port: Int = 0
        public var scenarios: [Scenario] = []
        /// Journal entries kept; older ones are evicted, counters stay exact.
        public var journalCapacity: Int = 10_000
        /// Request body bytes kept per journal entry.
        public var journalBodyBytes: Int = 64 * 1024
        public var parserLimits = HTTPParserLimits()
        /// A request's header section must be complete this long after its first byte, or it gets 408.
        public var headerTimeoutMilliseconds: Int = 10_000
        /// Over HTTP/1.1, a request's body must be complete this long after its header section, or it gets 408 and
        /// the connection closes; 0 for no limit. (HTTP/2's whole request has `headerTimeoutMilliseconds`.)
        public var bodyTimeoutMilliseconds: Int = 60_000
        /// Client connections open at once on the stub ports (plain and TLS; not `adminPort`'s). Past it, a request
        /// gets 503 with `Retry-After` and its connection closes (admin API calls are still served); past it by
        /// `ConnectionLimit.overflow`, a new connection is closed at once. Each is journaled. nil: the descriptor
        /// limit (RLIMIT_NOFILE) less `ConnectionLimit.reserve`, so that the journal file, upstream connections
        /// and the admin API keep descriptors to work with.
        public var maxConnections: Int?
        /// Append every journal entry to this file as one line of JSON (NDJSON) when its exchange ends; nil for
        /// none. The file is opened (created if needed) when the server starts.
        public var journalFile: String?
        /// Log one line per finished request on stderr (nil: no log, the default for in-process servers).
        public var requestLog: RequestLogFormat?
        /// The scenario files and folders `scenarios` came from: what a reload (`reloadScenarioFiles()`, SIGHUP,
        /// `--watch`, `POST /__faultline/scenarios/reload`) reads again. Empty: the scenarios were given in code.
        public var scenarioPaths: [String] = []
        /// Told about every reload, on the loop thread (the CLI prints it on stderr).
        public var onReload: (@Sendable (ScenarioReload) -> Void)?
        /// Serve HTTPS too, on a port of its own; nil for plain HTTP only.
        public var tls: TLSOptions?
        /// `serve --proxy URL`: forward to this upstream whatever no route takes, and the `proxy` steps of
        /// scenarios that name no upstream of their own (ARCHITECTURE §4d).
        public var proxy: ProxyConfig?
        /// `faultline record`: keep every proxied exchange and write them as a scenario when the server stops
        /// (or on `POST /__faultline/record/stop`).
        package var recording: RecordingConfiguration?
        /// Also serve the admin API alone on this port (0: a free one), out of reach of network conditions: a
        /// test can still call it while the listener refuses or every connection is frozen (ARCHITECTURE §3b).
        public var adminPort: Int?
        /// Network conditions every connection gets from the start (`serve --conditions`); a reset keeps them.
        public var conditions: LinkShape?
        /// Told once when the server stops, on the loop thread, after every connection was cut (their pending
        /// exchanges journaled `cancelled`): what it served and the verdicts. The CLI prints it as one line.
        package var onStop: (@Sendable (StopSummary) -> Void)?

        public init(
            host: String = "127.0.0.1", port: Int = 0, scenarios: [Scenario] = [], journalCapacity: Int = 10_000,
            journalBodyBytes: Int = 64 * 1024, parserLimits: HTTPParserLimits = HTTPParserLimits(),
            headerTimeoutMilliseconds: Int = 10_000, journalFile: String? = nil
        ) {
            self.host = host
            self.port = port
            self.scenarios = scenarios
            self.journalCapacity = journalCapacity
            self.journalBodyBytes = journalBodyBytes
            self.parserLimits = parserLimits
            self.headerTimeoutMilliseconds = headerTimeoutMilliseconds
            self.journalFile = journalFile
        }
    }

    let loop: EventLoop
    /// Touched only on the loop thread (and, before the loop starts, in `init`).
    let core: ServerCore
    private let stopped = Mutex(false)

    /// The port actually bound.
    public let port: Int
    public let host: String

    /// The TLS port actually bound; nil without `Configuration.tls`.
    public let tlsPort: Int?
    /// The admin-only port (`Configuration.adminPort`); nil without one.
    public let adminPort: Int?

    /// `http://HOST:PORT` for pointing a client at the stubs.
    public var baseURL: URL {
        URL(string: "http://\(host.contains(":") ? "[\(host)]" : host):\(port)")!
    }

    /// `https://HOST:PORT` of the TLS port; nil without `Configuration.tls`.
    public var httpsURL: URL? {
        tlsPort.map { URL(string: "https://\(host.contains(":") ? "[\(host)]" : host):\($0)")! }
    }

    /// Opens the journal file if one is configured, binds, then starts the loop thread. Throws when the file
    /// cannot be opened or the address cannot be bound.
    public init(configuration: Configuration) throws(ServerError) {
        loop = try EventLoop()
        loop.stats = LoopStats.fromEnvironment()
        core = ServerCore(loop: loop, configuration: configuration)
        if let path = configuration.journalFile { core.journalFile = try JournalFile(path: path) }
        if let format = configuration.requestLog {
            core.requestLog = RequestLog(format: format, loop: loop, deadlines: core.stepDeadlines)
        }
        try core.listen()
        // The scenario's timeline starts now (before the loop runs, so touching libevent is safe).
        core.network.restart(source: "load")
        port = core.port
        tlsPort = core.tlsPort
        adminPort = core.adminPort
        host = configuration.host
        loop.start()
    }

    /// A server dropped without `stop()` still stops: its loop thread must not outlive every reference.
    deinit {
        loop.post { [core] in core.stop() }
    }

    /// Stops on SIGINT and SIGTERM (for the CLI). Returns once the handlers are installed, so a caller that
    /// then announces itself cannot be killed by a signal sent in between. `onSignal` runs on the loop thread.
    public func stopOnSignals(_ onSignal: @escaping @Sendable (Int32) -> Void = { _ in }) async {
        await loop.submit { [core] in core.stopOnSignals(onSignal) }
    }

    /// Stops accepting, cuts every connection (pending exchanges are journaled as cancelled) and ends the
    /// loop thread. Returns when the thread has finished. Calling it twice is harmless.
    public func stop() async {
        loop.post { [core] in core.stop() }
        await loop.waitUntilFinished()
    }

    /// Returns when the server has stopped, whoever stopped it (`stop()`, a signal, `POST /shutdown`).
    public func waitUntilStopped() async {
        await loop.waitUntilFinished()
    }

    /// Replaces the loaded scenarios; every script starts from the beginning.
    public func load(_ scenarios: [Scenario]) async {
        await loop.submit { [core] in core.load(scenarios) }
    }

    /// Reads the files in `Configuration.scenarioPaths` again and serves them if they load and differ from what
    /// is serving (see `ScenarioReload`). Responses in flight finish as planned.
    @discardableResult
    public func reloadScenarioFiles() async -> ScenarioReload {
        await loop.submit { [core] in core.reloadScenarioFiles(trigger: .api) }
    }

    /// Reloads the scenario files on SIGHUP (for the CLI).
    public func reloadOnHangup() async {
        await loop.submit { [core] in core.reloadOnHangup() }
    }

    /// Watches `Configuration.scenarioPaths` and reloads about 50 ms after a scenario file is written, renamed
    /// into place, or removed (inotify on Linux; elsewhere, or with `FAULTLINE_PORTABLE=1`, polling every 200 ms).
    /// Returns how it watches: "inotify" or "polling". Throws when the files cannot be watched.
    @discardableResult
    public func watchScenarioFiles() async throws(ServerError) -> String {
        let result: Result<String, ServerError> = await loop.submit { [core] in
            do throws(ServerError) {
                return .success(try core.watchScenarioFiles())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Rewinds every script and reseeds randomness; the scenarios stay loaded.
    public func resetScenarios() async {
        await loop.submit { [core] in core.resetScenarios() }
    }

    /// Journal entries matching `filter`, oldest first.
    public func requests(_ filter: JournalFilter = JournalFilter(), limit: Int? = nil) async -> [JournalEntry] {
        await loop.submit { [core] in core.journal.query(filter, limit: limit) }
    }

    /// Forgets the journal's entries; sequence numbers and counters go on.
    public func clearJournal() async {
        await loop.submit { [core] in core.clearJournal() }
    }
}
