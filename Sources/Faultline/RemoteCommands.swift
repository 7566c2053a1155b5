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
    /// The report's verdicts, one line each, and a summary; exit 1 when any failed. An inconclusive verdict (too
    /// few samples) is named and does not fail the run.
    package static func verify(url: String) async -> CommandOutcome {
        guard let reportURL = endpoint(url, "/__faultline/report") else {
            return .failure("verify: \(url) is not an http URL", 64)
        }
        let report: JSONValue
        do {
            let (data, response) = try await URLSession.shared.data(from: reportURL)
            guard (response as? HTTPURLResponse)?.statusCode == 200, let parsed = try? JSONValue.parse(Array(data)),
                  case .array? = parsed["verdicts"]
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
        outcome.stdout += "\(verdicts.count - failed) of \(verdicts.count) verdicts passed"
            + (inconclusive > 0 ? " (\(inconclusive) inconclusive)" : "") + "\n"
        outcome.exitCode = failed == 0 ? 0 : 1
        return outcome
    }

    /// The journal as HAR (the server's document, indented) or NDJSON (byte for byte the entries of
    /// `/__faultline/requests`), written to `options.output` or returned as stdout.
    package static func export(_ options: ExportOptions) async -> CommandOutcome {
        let path = options.format == .har ? "/__faultline/requests.har" : "/__faultline/requests"
        guard let exportURL = endpoint(options.url, path) else {
            return .failure("export: \(options.url) is not an http URL", 64)
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
