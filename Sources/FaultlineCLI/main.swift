import Faultline
import FaultlineCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The CLI is thin: parse, then call the library. Exit codes: 0 ok, 1 invalid scenarios (or a failed verdict,
// or an export that cannot be written), 2 cannot start or cannot reach the server, 64 bad command line (EX_USAGE).

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("faultline: \(message)\n".utf8))
    exit(code)
}

let request: CommandLineRequest
do {
    request = try FaultlineCommandLine.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    fail("\(error.message)\n(see faultline --help)", code: 64)
}

switch request {
case .help:
    print(FaultlineCommandLine.usage)
case .version:
    print("faultline \(Faultline.version)")
case .validate(let paths):
    do {
        let scenarios = try ScenarioLoader.load(paths: paths)
        let routes = scenarios.reduce(0) { $0 + $1.routes.count }
        print("ok: \(scenarios.count) scenario(s), \(routes) route(s)")
    } catch {
        for problem in error.errors { FileHandle.standardError.write(Data("\(problem)\n".utf8)) }
        FileHandle.standardError.write(Data("faultline: \(error.errors.count) problem(s) found\n".utf8))
        exit(1)
    }
case .verify(let url):
    var base = url
    while base.hasSuffix("/") { base.removeLast() }
    guard let reportURL = URL(string: base + "/__faultline/report"), reportURL.host != nil else {
        fail("verify: \(url) is not an http URL", code: 64)
    }
    let report: [String: Any]
    do {
        let (data, response) = try await URLSession.shared.data(from: reportURL)
        guard (response as? HTTPURLResponse)?.statusCode == 200,
              let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { fail("verify: \(reportURL) did not answer with a report", code: 2) }
        report = object
    } catch {
        fail("verify: cannot reach \(reportURL): \(error.localizedDescription)", code: 2)
    }
    let verdicts = report["verdicts"] as? [[String: Any]] ?? []
    for verdict in verdicts {
        let passed = verdict["passed"] as? Bool ?? false
        let label = verdict["outcome"] as? String == "inconclusive" ? "INCONCLUSIVE" : passed ? "PASS" : "FAIL"
        let rule = verdict["rule"] as? String ?? "?"
        let scenario = verdict["scenario"] as? String ?? ""
        let explanation = verdict["explanation"] as? String ?? ""
        let evidence = (verdict["evidence"] as? [Int] ?? []).map { "#\($0)" }.joined(separator: " ")
        print("\(label)  \(scenario)/\(rule): \(explanation)" + (passed || evidence.isEmpty ? "" : "  [\(evidence)]"))
    }
    let failed = verdicts.filter { ($0["passed"] as? Bool) != true }.count
    // An inconclusive verdict (too few samples) is counted as passed, named, and does not fail the run.
    let inconclusive = verdicts.filter { $0["outcome"] as? String == "inconclusive" }.count
    print("\(verdicts.count - failed) of \(verdicts.count) verdicts passed"
          + (inconclusive > 0 ? " (\(inconclusive) inconclusive)" : ""))
    exit(failed == 0 ? 0 : 1)
case .export(let options):
    var base = options.url
    while base.hasSuffix("/") { base.removeLast() }
    let endpoint = options.format == .har ? "/__faultline/requests.har" : "/__faultline/requests"
    guard let exportURL = URL(string: base + endpoint), exportURL.host != nil else {
        fail("export: \(options.url) is not an http URL", code: 64)
    }
    let document: JSONValue
    do {
        let (data, response) = try await URLSession.shared.data(from: exportURL)
        guard (response as? HTTPURLResponse)?.statusCode == 200, let parsed = try? JSONValue.parse(Array(data)) else {
            fail("export: \(exportURL) did not answer with the journal", code: 2)
        }
        document = parsed
    } catch {
        fail("export: cannot reach \(exportURL): \(error.localizedDescription)", code: 2)
    }
    // Parsed with Faultline's own JSON reader, which keeps key order and number text, so NDJSON lines are
    // byte for byte the entries of /__faultline/requests and the HAR is the server's document, indented.
    let text: String
    switch options.format {
    case .har:
        text = document.prettySerialized() + "\n"
    case .ndjson:
        guard case .array(let entries)? = document["requests"] else {
            fail("export: \(exportURL) did not answer with the journal", code: 2)
        }
        text = entries.map { $0.serialized() + "\n" }.joined()
    }
    if let output = options.output {
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
        } catch {
            fail("export: cannot write \(output): \(error.localizedDescription)", code: 1)
        }
    } else {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
    exit(0)
case .serve(let options):
    let paths = options.paths.isEmpty ? ["scenarios"] : options.paths
    let scenarios: [Scenario]
    do {
        scenarios = try ScenarioLoader.load(paths: paths)
    } catch {
        for problem in error.errors { FileHandle.standardError.write(Data("\(problem)\n".utf8)) }
        fail("not serving: \(error.errors.count) problem(s) in the scenario files", code: 1)
    }
    var configuration = FaultlineServer.Configuration(host: options.host, port: options.port, scenarios: scenarios)
    configuration.journalCapacity = options.journalCapacity
    configuration.parserLimits.maxBodyBytes = options.maxBodyBytes
    configuration.headerTimeoutMilliseconds = options.headerTimeoutMilliseconds
    configuration.journalFile = options.journalFile
    configuration.requestLog = options.requestLog
    configuration.scenarioPaths = paths
    configuration.onReload = { reload in
        FileHandle.standardError.write(Data("faultline: \(reload)\n".utf8))
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
    if let portFile = options.portFile {
        // Write then rename, so a test polling for the file never reads half of it.
        let temporary = portFile + ".tmp-\(getpid())"
        do {
            try Data("\(server.port)\n".utf8).write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, portFile) == 0 else { throw CocoaError(.fileWriteUnknown) }
        } catch {
            fail("cannot write port file \(portFile)", code: 2)
        }
    }
    print("listening on \(server.baseURL.absoluteString)")
    // stdout is a pipe when a test suite starts us: flush so the first line arrives now, not at exit.
    fflush(nil)
    let routes = scenarios.reduce(0) { $0 + $1.routes.count }
    FileHandle.standardError.write(Data(
        "faultline: \(scenarios.count) scenario(s), \(routes) route(s); admin API at \(server.baseURL.absoluteString)/__faultline/\n".utf8))
    if let watching {
        FileHandle.standardError.write(Data("faultline: watching the scenario files (\(watching))\n".utf8))
    }
    await server.waitUntilStopped()
    exit(0)
}
