import Faultline
import FaultlineCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a command printed and how it exits.
package struct CommandOutcome: Equatable, Sendable {
    package var stdout = ""
    package var stderr = ""
    package var exitCode: Int32 = 0

    static func failure(_ message: String, _ code: Int32) -> CommandOutcome {
        CommandOutcome(stderr: "faultline: \(message)\n", exitCode: code)
    }
}

/// The logic of `faultline verify` and `faultline export`, apart from the process: the executable prints the
/// outcome and exits with its code; the tests call these directly against an in-process server.
/// Exit codes as documented: 0 success, 1 a failed verdict or an output file that cannot be written, 2 the server
/// could not be reached or did not answer as expected, 64 a URL that is not an http URL.
package enum RemoteCommands {
    /// The server's base URL: `--url`, else `http://127.0.0.1:PORT` from `--port-file`, else `FAULTLINE_URL`; or the
    /// failure to print (64: nothing says where the server is, or the port file holds no port).
    static func resolve(_ server: ServerLocation, _ command: String, environment: [String: String]) -> Result<String, CommandFailure> {
        if let url = server.url { return .success(url) }
        if let file = server.portFile {
            guard let data = FileManager.default.contents(atPath: file) else {
                return .failure(CommandFailure(
                    "\(command): cannot read the port file \(file): start `faultline serve --port-file \(file)` first", 2))
            }
            let read = String(decoding: data, as: UTF8.self)
            let text = String(read.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            guard let port = Int(text), (1...65535).contains(port) else {
                return .failure(CommandFailure("\(command): the port file \(file) holds \"\(text.prefix(40))\", not a port", 64))
            }
            return .success("http://127.0.0.1:\(port)")
        }
        if let url = environment["FAULTLINE_URL"], !url.isEmpty { return .success(url) }
        return .failure(CommandFailure(
            "\(command): where is the server? give --url http://HOST:PORT, --port-file F (as written by "
                + "`serve --port-file F`), or set FAULTLINE_URL", 64))
    }

    /// A command that could not run: its message and exit code.
    struct CommandFailure: Error {
        var message: String
        var code: Int32
        init(_ message: String, _ code: Int32) {
            self.message = message
            self.code = code
        }
    }

    /// `verify` with `--url URL` alone (the Swift tests' shorthand).
    package static func verify(url: String, strict: Bool = false, scenario: String? = nil) async -> CommandOutcome {
        await verify(VerifyOptions(server: ServerLocation(url: url), strict: strict, scenario: scenario), environment: [:])
    }

    /// The report's verdicts, one line each, and a summary; exit 1 when any failed. An inconclusive verdict (its
    /// situation never happened, or too few samples) is named and does not fail the run, unless `strict`.
    package static func verify(_ options: VerifyOptions, environment: [String: String]) async -> CommandOutcome {
        let url: String
        switch resolve(options.server, "verify", environment: environment) {
        case .success(let found): url = found
        case .failure(let failure): return .failure(failure.message, failure.code)
        }
        var path = "/__faultline/report"
        if let scenario = options.scenario {
            path += "?scenario=" + percentEncoded(scenario)
        }
        guard let reportURL = endpoint(url, path) else {
            return .failure("verify: \(url) is not an http URL", 64)
        }
        let report: JSONValue
        switch await get(reportURL, "verify") {
        case .failure(let failure): return .failure(failure.message, failure.code)
        case .success(let answer):
            if answer.status == 404, options.scenario != nil, case .string(let problem)? = answer.json?["error"] {
                return .failure("verify: \(problem)", 64)
            }
            guard answer.status == 200, let parsed = answer.json, case .array? = parsed["verdicts"]
            else { return .failure("verify: \(reportURL) did not answer with a report", 2) }
            report = parsed
        }
        guard case .array(let verdicts)? = report["verdicts"] else { return .failure("verify: no verdicts", 2) }
        // What the files need, fetched before anything is written or printed: a server that stops answering
        // half-way leaves no file behind and exits 2, as one that never answered.
        var dashboard: JSONValue?
        var journal: [JSONValue] = []
        if options.html != nil {
            switch await dashboardData(url, "verify", report: report) {
            case .failure(let failure): return .failure(failure.message, failure.code)
            case .success(let data):
                dashboard = data
                if case .array(let entries)? = data["requests"]?["requests"] { journal = entries }
            }
        } else if options.junit != nil {
            switch await getJSON(url, "/__faultline/requests", "verify", answering: "the journal", listing: "requests") {
            case .failure(let failure): return .failure(failure.message, failure.code)
            case .success(let answer): if case .array(let entries)? = answer["requests"] { journal = entries }
            }
        }
        var outcome = CommandOutcome()
        var failed = 0
        var inconclusive = 0
        for verdict in verdicts {
            let passed = verdict["passed"] == .bool(true)
            let isInconclusive = verdict["outcome"] == .string("inconclusive")
            if !passed { failed += 1 }
            if isInconclusive { inconclusive += 1 }
            let label = isInconclusive ? "INCONCLUSIVE" : passed ? "PASS" : "FAIL"
            let evidence: String
            if case .array(let numbers)? = verdict["evidence"] {
                evidence = numbers.compactMap { if case .number(let text) = $0 { return "#" + text } else { return nil } }
                    .joined(separator: " ")
            } else {
                evidence = ""
            }
            outcome.stdout += "\(label)  \(text(verdict["scenario"]))/\(text(verdict["rule"])): "
                + text(verdict["explanation"]) + (passed || evidence.isEmpty ? "" : "  [\(evidence)]") + "\n"
        }
        let strictNote = options.strict && inconclusive > 0 ? "; --strict fails them" : ""
        outcome.stdout += "\(verdicts.count - failed) of \(verdicts.count) verdicts passed"
            + (inconclusive > 0 ? " (\(inconclusive) inconclusive\(strictNote))" : "") + "\n"
        if verdicts.isEmpty {
            outcome.stderr = "faultline: verify: no rule was judged: no loaded scenario"
                + (options.scenario.map { " named \"\($0)\"" } ?? "") + " has an \"expect\" section\n"
        }
        outcome.exitCode = failed == 0 && !(options.strict && (inconclusive > 0 || verdicts.isEmpty)) ? 0 : 1
        // The files are written whatever the verdicts (a failed run is when they matter), and keep the exit code;
        // one that cannot be written makes a passing run exit 1.
        var files: [(path: String, text: String)] = []
        if let junit = options.junit {
            files.append((junit, JUnitReport.xml(
                report: report, journal: journal, server: url, version: Faultline.version,
                timestamp: Date().timeIntervalSince1970, strict: options.strict, scenario: options.scenario)))
        }
        if let html = options.html, let dashboard {
            files.append((html, DashboardPage.selfContained(data: dashboard)))
        }
        for file in files {
            if let problem = write(file.text, to: file.path) {
                outcome.stderr += "faultline: verify: \(problem)\n"
                outcome.exitCode = max(outcome.exitCode, 1)
            }
        }
        return outcome
    }

    /// The journal as HAR (the server's document, indented) or NDJSON (byte for byte the entries of
    /// `/__faultline/requests`), written to `options.output` or returned as stdout.
    package static func export(_ options: ExportOptions, environment: [String: String] = [:]) async -> CommandOutcome {
        let url: String
        switch resolve(options.server, "export", environment: environment) {
        case .success(let found): url = found
        case .failure(let failure): return .failure(failure.message, failure.code)
        }
        guard endpoint(url, "/__faultline/requests") != nil else {
            return .failure("export: \(url) is not an http URL", 64)
        }
        // Parsed with Faultline's own JSON reader, which keeps key order and number text.
        let text: String
        switch options.format {
        case .har:
            switch await getJSON(url, "/__faultline/requests.har", "export", answering: "the journal") {
            case .failure(let failure): return .failure(failure.message, failure.code)
            case .success(let document): text = document.prettySerialized() + "\n"
            }
        case .ndjson:
            switch await getJSON(url, "/__faultline/requests", "export", answering: "the journal", listing: "requests") {
            case .failure(let failure): return .failure(failure.message, failure.code)
            case .success(let document):
                guard case .array(let entries)? = document["requests"] else { return .failure("export: no journal", 2) }
                text = entries.map { $0.serialized() + "\n" }.joined()
            }
        case .html:
            switch await dashboardData(url, "export", report: nil) {
            case .failure(let failure): return .failure(failure.message, failure.code)
            case .success(let data): text = DashboardPage.selfContained(data: data)
            }
        }
        guard let output = options.output else { return CommandOutcome(stdout: text) }
        if let problem = write(text, to: output) { return .failure("export: \(problem)", 1) }
        return CommandOutcome()
    }

    /// The data object the self-contained HTML report embeds (`DashboardPage.selfContained(data:)`):
    /// `{"generatedAt", "server", "health", "requests", "report", "state", "scenarios", "network", "resources"}`, each the
    /// server's parsed answer. `report` is the one verify already fetched (with its `--scenario`), else
    /// `GET /__faultline/report` is asked now. The report comes before the journal, so every evidence number it
    /// names is in the journal embedded (unless evicted).
    static func dashboardData(_ base: String, _ command: String, report: JSONValue?) async -> Result<JSONValue, CommandFailure> {
        var members: [(key: String, value: JSONValue)] = [
            ("generatedAt", .string(JournalEntry.iso8601(Date().timeIntervalSince1970))),
            ("server", .string(base)),
        ]
        var answers: [String: JSONValue] = [:]
        if let report { answers["report"] = report }
        let sources: [(name: String, path: String, what: String, listing: String?)] = [
            ("health", "/__faultline/health", "its health", nil), ("report", "/__faultline/report", "a report", "verdicts"),
            ("requests", "/__faultline/requests", "the journal", "requests"), ("state", "/__faultline/state", "its state", nil),
            ("scenarios", "/__faultline/scenarios", "its scenarios", nil),
            ("network", "/__faultline/network", "its network conditions", nil),
            ("resources", "/__faultline/resources", "its resources", "resources"),
        ]
        for (name, path, what, listing) in sources where answers[name] == nil {
            switch await getJSON(base, path, command, answering: what, listing: listing) {
            case .failure(let failure): return .failure(failure)
            case .success(let answer): answers[name] = answer
            }
        }
        for name in ["health", "requests", "report", "state", "scenarios", "network", "resources"] {
            members.append((name, answers[name] ?? .null))
        }
        return .success(.object(members))
    }

    /// What a GET answered: its status, and its body parsed as JSON when it is JSON.
    struct Answer {
        var status: Int
        var json: JSONValue?
    }

    /// The one place `verify` and `export` talk to the server, over Faultline's own HTTP client (no URLSession:
    /// the binary links no libcurl). Failing means no answer at all: "COMMAND: cannot reach URL: WHY", exit 2.
    static func get(_ url: String, _ command: String) async -> Result<Answer, CommandFailure> {
        guard let target = LoopHTTPClient.Target(url) else {
            return .failure(CommandFailure("\(command): \(url) is not an http URL", 64))
        }
        let client: LoopHTTPClient
        switch sharedClient {
        case .success(let made): client = made
        case .failure(let error): return .failure(CommandFailure("\(command): cannot start an HTTP client: \(error)", 2))
        }
        switch await client.get(target) {
        case .success(let response):
            return .success(Answer(status: response.status, json: try? JSONValue.parse(response.body)))
        case .failure(let failure):
            return .failure(CommandFailure("\(command): cannot reach \(url): \(failure)", 2))
        }
    }

    /// One client (and loop thread) for the process: a command's GETs share its kept-alive connections.
    private static let sharedClient = Result { () throws(ServerError) -> LoopHTTPClient in try LoopHTTPClient() }

    /// `base` + `path` answered with 200 and JSON (an object with an array named `listing`, when given); else
    /// "COMMAND: URL did not answer with WHAT", exit 2 (or 64 for a base that is not an http URL).
    static func getJSON(_ base: String, _ path: String, _ command: String, answering what: String,
                        listing: String? = nil) async -> Result<JSONValue, CommandFailure> {
        guard let url = endpoint(base, path) else { return .failure(CommandFailure("\(command): \(base) is not an http URL", 64)) }
        switch await get(url, command) {
        case .failure(let failure): return .failure(failure)
        case .success(let answer):
            guard answer.status == 200, let json = answer.json,
                  listing.map({ key in if case .array? = json[key] { true } else { false } }) ?? true else {
                return .failure(CommandFailure("\(command): \(url) did not answer with \(what)", 2))
            }
            return .success(json)
        }
    }

    /// Writes `text` to `path` whole or not at all (a temporary file renamed into place); the problem, or nil.
    static func write(_ text: String, to path: String) -> String? {
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
            return nil
        } catch {
            return "cannot write \(path): \(errorText(error))"
        }
    }

    /// `base` (an http URL, trailing slashes dropped) with `path`; nil when `base` is not an http URL.
    static func endpoint(_ base: String, _ path: String) -> String? {
        var base = base
        while base.hasSuffix("/") { base.removeLast() }
        guard LoopHTTPClient.Target(base + path) != nil else { return nil }
        return base + path
    }

    /// `text` with everything but RFC 3986's unreserved characters percent-encoded, for a query value.
    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]], as: UTF8.self)
            }
        }
        return out
    }

    private static func text(_ value: JSONValue?) -> String {
        if case .string(let text)? = value { return text }
        return ""
    }
}
