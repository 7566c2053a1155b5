import FaultlineCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
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
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
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
            var allowed = CharacterSet.urlQueryAllowed
            allowed.remove(charactersIn: "&=+#")
            path += "?scenario=" + (scenario.addingPercentEncoding(withAllowedCharacters: allowed) ?? scenario)
        }
        guard let reportURL = endpoint(url, path) else {
            return .failure("verify: \(url) is not an http URL", 64)
        }
        let report: JSONValue
        do {
            let (data, response) = try await URLSession.shared.data(from: reportURL)
            let status = (response as? HTTPURLResponse)?.statusCode
            if status == 404, options.scenario != nil, let answer = try? JSONValue.parse(Array(data)),
               case .string(let problem)? = answer["error"] {
                return .failure("verify: \(problem)", 64)
            }
            guard status == 200, let parsed = try? JSONValue.parse(Array(data)), case .array? = parsed["verdicts"]
            else { return .failure("verify: \(reportURL) did not answer with a report", 2) }
            report = parsed
        } catch {
            return .failure("verify: cannot reach \(reportURL): \(error.localizedDescription)", 2)
        }
        guard case .array(let verdicts)? = report["verdicts"] else { return .failure("verify: no verdicts", 2) }
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
        let path = options.format == .har ? "/__faultline/requests.har" : "/__faultline/requests"
        guard let exportURL = endpoint(url, path) else {
            return .failure("export: \(url) is not an http URL", 64)
        }
        let document: JSONValue
        do {
            let (data, response) = try await URLSession.shared.data(from: exportURL)
            guard (response as? HTTPURLResponse)?.statusCode == 200, let parsed = try? JSONValue.parse(Array(data)) else {
                return .failure("export: \(exportURL) did not answer with the journal", 2)
            }
            document = parsed
        } catch {
            return .failure("export: cannot reach \(exportURL): \(error.localizedDescription)", 2)
        }
        // Parsed with Faultline's own JSON reader, which keeps key order and number text.
        let text: String
        switch options.format {
        case .har:
            text = document.prettySerialized() + "\n"
        case .ndjson:
            guard case .array(let entries)? = document["requests"] else {
                return .failure("export: \(exportURL) did not answer with the journal", 2)
            }
            text = entries.map { $0.serialized() + "\n" }.joined()
        }
        guard let output = options.output else { return CommandOutcome(stdout: text) }
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
        } catch {
            return .failure("export: cannot write \(output): \(error.localizedDescription)", 1)
        }
        return CommandOutcome()
    }

    /// `base` (an http URL, trailing slashes dropped) with `path`; nil when `base` is not an http URL.
    static func endpoint(_ base: String, _ path: String) -> URL? {
        var base = base
        while base.hasSuffix("/") { base.removeLast() }
        guard let url = URL(string: base + path), let scheme = url.scheme?.lowercased(),
              scheme == "http" || scheme == "https", url.host != nil else { return nil }
        return url
    }

    private static func text(_ value: JSONValue?) -> String {
        if case .string(let text)? = value { return text }
        return ""
    }
}
