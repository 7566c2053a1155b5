import Faultline
import FaultlineCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The CLI is thin: parse, then call the library. Exit codes: 0 ok, 1 invalid scenarios (or a failed verdict,
// or an export, --junit or --html file that cannot be written), 2 cannot start or cannot reach the server, 64 bad
// command line (EX_USAGE).

func fail(_ message: String, code: Int32) -> Never {
    writeStandardError("faultline: \(message)\n")
    exit(code)
}

/// Writes then renames, so a test polling for the file never reads half of it.
func writePortFile(_ portFile: String, _ port: Int) {
    let temporary = portFile + ".tmp-\(getpid())"
    do {
        try Data("\(port)\n".utf8).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, portFile) == 0 else { throw CocoaError(.fileWriteUnknown) }
    } catch {
        fail("cannot write port file \(portFile)", code: 2)
    }
}

/// `text` on standard error or output, whole (no Foundation `FileHandle`: FoundationEssentials has none). What
/// `print` buffered goes first, so the two never interleave out of order.
func writeStandardError(_ text: String) { writeWhole(text, to: 2) }

func writeStandardOutput(_ text: String) { writeWhole(text, to: 1) }

private func writeWhole(_ text: String, to descriptor: Int32) {
    fflush(nil)
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return }
        bytes = bytes.dropFirst(written)
    }
}

/// Prints what a command printed and exits with its code.
func finish(_ outcome: CommandOutcome) -> Never {
    writeStandardOutput(outcome.stdout)
    writeStandardError(outcome.stderr)
    exit(outcome.exitCode)
}

let request: CommandLineRequest
do {
    request = try FaultlineCommandLine.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    // "serve: …" points at serve's own help.
    let command = error.message.split(separator: ":", maxSplits: 1).first.map(String.init)
    let help = command.flatMap { FaultlineCommandLine.commandNames.contains($0) ? "faultline \($0) --help" : nil }
    fail("\(error.message)\n(see \(help ?? "faultline --help"))", code: 64)
}

switch request {
case .help(let topic):
    print(topic.flatMap(FaultlineCommandLine.help(for:)) ?? FaultlineCommandLine.usage)
case .version:
    print("faultline \(Faultline.version)")
case .completions(let shell):
    writeStandardOutput(Completions.script(shell))
case .validate(let paths):
    do {
        var skipped: [String] = []
        let scenarios = try ScenarioLoader.load(paths: paths, skippedSchemas: &skipped)
        for path in skipped { writeStandardError("faultline: skipped \(path): a JSON Schema (*.schema.json), not a scenario\n") }
        for shadowed in RouteShadowing.shadowedRoutes(in: scenarios) { writeStandardError("faultline: \(shadowed)\n") }
        let routes = scenarios.reduce(0) { $0 + $1.routes.count }
        let resources = scenarios.reduce(0) { $0 + $1.resources.count }
        print("ok: \(scenarios.count) scenario(s), \(routes) route(s)" + (resources > 0 ? ", \(resources) resource(s)" : ""))
    } catch {
        for problem in error.errors { writeStandardError("\(problem)\n") }
        writeStandardError("faultline: \(error.errors.count) problem(s) found\n")
        exit(1)
    }
case .verify(let options):
    finish(await RemoteCommands.verify(options, environment: ProcessInfo.processInfo.environment))
case .export(let options):
    finish(await RemoteCommands.export(options, environment: ProcessInfo.processInfo.environment))
case .ca(let options):
    finish(CACommand.run(options))
case .initialize(let options):
    finish(InitCommand.run(options))
case .record(let options):
    var configuration = FaultlineServer.Configuration(host: options.host, port: options.port, scenarios: [])
    configuration.requestLog = options.requestLog
    if options.requestLog != nil {
        configuration.onStop = { summary in writeStandardError(ServeSummary.line(summary, verdicts: false) + "\n") }
    }
    var proxy = ProxyConfig(upstream: options.upstream, unmatched: .forward, caFile: options.caFile)
    proxy.verify = true
    configuration.proxy = proxy
    var recording = RecordingConfiguration(directory: options.output)
    recording.options.name = options.name
    recording.options.upstream = options.upstream.description
    recording.options.delays = options.delays
    recording.options.redactHeaders = options.redactHeaders
    recording.options.redactFields = options.redactFields
    recording.onWritten = { result in
        switch result {
        case .success(let summary):
            writeStandardError(("faultline: recorded \(summary.exchanges) exchange(s) as "
                + "\(summary.routes) route(s) in \(summary.file)"
                + (summary.dropped > 0 ? " (\(summary.dropped) left out: the recording's memory bound)" : "") + "\n"))
        case .failure(let failure):
            writeStandardError("faultline: \(failure)\n")
        }
    }
    configuration.recording = recording
    let server: FaultlineServer
    do {
        server = try FaultlineServer(configuration: configuration)
    } catch {
        fail(error.description, code: 2)
    }
    await server.stopOnSignals()
    if let portFile = options.portFile { writePortFile(portFile, server.port) }
    print("listening on \(server.baseURL.absoluteString)")
    fflush(nil)
    writeStandardError(
        "faultline: recording \(options.upstream) into \(options.output); stop with Ctrl-C or POST /__faultline/record/stop\n")
    await server.waitUntilStopped()
    exit(0)
case .serve(let options):
    let paths = options.empty ? [] : options.paths.isEmpty ? ["scenarios"] : options.paths
    let startHint = "write a starter folder with `faultline init`, name scenario files or folders "
        + "(faultline serve PATHS…), or start with none: `faultline serve --empty`, then POST /__faultline/scenarios"
    if options.paths.isEmpty, !options.empty, access("scenarios", F_OK) != 0 {
        fail("not serving: no scenarios: no PATHS given, and there is no ./scenarios folder to serve by default\n"
            + "faultline: \(startHint)", code: 1)
    }
    let scenarios: [Scenario]
    do {
        scenarios = try ScenarioLoader.load(paths: paths)
    } catch {
        // Folders with no scenario in them, and nothing else wrong: say what was looked for, and how to start.
        let emptyFolders = error.errors.filter { $0.jsonPath.isEmpty && $0.message == "no scenario files (*.json) in this folder" }
        if emptyFolders.count == error.errors.count {
            fail("not serving: found no *.json scenario in "
                + emptyFolders.map { $0.file == "scenarios" && options.paths.isEmpty ? "./scenarios (the default)" : $0.file }
                    .joined(separator: ", ")
                + " (*.schema.json files are not scenarios)\nfaultline: \(startHint)", code: 1)
        }
        for problem in error.errors { writeStandardError("\(problem)\n") }
        fail("not serving: \(error.errors.count) problem(s) in the scenario files", code: 1)
    }
    for shadowed in RouteShadowing.shadowedRoutes(in: scenarios) { writeStandardError("faultline: \(shadowed)\n") }
    var configuration = FaultlineServer.Configuration(host: options.host, port: options.port, scenarios: scenarios)
    configuration.journalCapacity = options.journalCapacity
    configuration.parserLimits.maxBodyBytes = options.maxBodyBytes
    configuration.headerTimeoutMilliseconds = options.headerTimeoutMilliseconds
    configuration.bodyTimeoutMilliseconds = options.bodyTimeoutMilliseconds
    configuration.maxConnections = options.maxConnections
    if let warning = ConnectionLimit.warning(configured: options.maxConnections) {
        writeStandardError("faultline: \(warning)\n")
    }
    configuration.journalFile = options.journalFile
    configuration.requestLog = options.requestLog
    configuration.scenarioPaths = paths
    configuration.tls = options.tls
    configuration.proxy = options.proxy
    configuration.adminPort = options.adminPort
    configuration.conditions = options.conditions
    if options.requestLog != nil {
        configuration.onStop = { summary in writeStandardError(ServeSummary.line(summary) + "\n") }
    }
    configuration.onReload = { reload in
        writeStandardError("faultline: \(reload)\n")
    }
    let server: FaultlineServer
    do {
        server = try FaultlineServer(configuration: configuration)
    } catch {
        fail(error.description, code: 2)
    }
    await server.stopOnSignals()
    await server.reloadOnHangup()
    var watching: String?
    if options.watch {
        do {
            watching = try await server.watchScenarioFiles()
        } catch {
            fail("cannot watch the scenario files: \(error)", code: 2)
        }
    }
    if let portFile = options.portFile { writePortFile(portFile, server.port) }
    if let portFile = options.tlsPortFile, let port = server.tlsPort { writePortFile(portFile, port) }
    print("listening on \(server.baseURL.absoluteString)")
    if let httpsURL = server.httpsURL { print("listening on \(httpsURL.absoluteString)") }
    if let adminPort = server.adminPort {
        print("admin on http://\(options.host.contains(":") ? "[\(options.host)]" : options.host):\(adminPort)")
    }
    // stdout is a pipe when a test suite starts us: flush so the first line arrives now, not at exit.
    fflush(nil)
    let routes = scenarios.reduce(0) { $0 + $1.routes.count }
    if options.empty {
        writeStandardError("faultline: no scenarios (--empty): load them with POST \(server.baseURL.absoluteString)"
            + "/__faultline/scenarios; admin API at \(server.baseURL.absoluteString)/__faultline/\n")
    } else {
        writeStandardError(
            "faultline: \(scenarios.count) scenario(s), \(routes) route(s); admin API at \(server.baseURL.absoluteString)/__faultline/\n")
    }
    if let watching {
        writeStandardError("faultline: watching the scenario files (\(watching))\n")
    }
    await server.waitUntilStopped()
    exit(0)
}
