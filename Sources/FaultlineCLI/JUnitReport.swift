import FaultlineCore

/// `faultline verify --junit FILE`: the verdicts of `GET /__faultline/report` as JUnit XML, the dialect CI systems
/// read (GitHub test reporters, GitLab, Jenkins, Xcode Cloud). A pure function of what the server answered and what
/// the caller passes in (URL, version, time), so the same input always gives the same bytes.
///
/// - One `<testsuite>` per scenario, in the report's order, with `<properties>` naming the server and the version.
/// - One `<testcase classname="faultline.SCENARIO" name="RULE" time="0">` per verdict: a verdict has no duration.
/// - A failed verdict holds `<failure type="verdict" message="SENTENCE">`, its text the evidence, one journal
///   entry a line (`#12 GET /v1/orders → 503 fault reset · reset · 3.1 ms · connection 4 stream 1`).
/// - An inconclusive verdict holds `<skipped message="SENTENCE"/>`, or with `strict`
///   `<failure type="inconclusive">`.
/// - No verdict at all: one suite `faultline` with one testcase `verdicts`, skipped (a failure with `strict`).
/// - A suite's `time` is the span of its evidence, in seconds: from the first evidence entry's arrival to the last
///   one's end (`receivedAtMonotonicMs`, `+ durationMs`), 0 when none of its evidence is in the journal; the
///   `testsuites` element's is the span of all the evidence. So a report's times say how long the situations that
///   were judged took, never how long judging did.
package enum JUnitReport {
    /// The XML document. `report` is `GET /__faultline/report`'s answer, `journal` the entries of
    /// `GET /__faultline/requests`; `timestamp` is Unix seconds; `scenario` the `--scenario` filter, named in the
    /// no-verdict message.
    package static func xml(
        report: JSONValue, journal: [JSONValue], server: String, version: String, timestamp: Double,
        strict: Bool = false, scenario: String? = nil
    ) -> String {
        var entries: [Int: JSONValue] = [:]
        for entry in journal {
            if let sequence = entry["sequence"]?.intValue { entries[sequence] = entry }
        }
        let verdicts: [JSONValue]
        if case .array(let list)? = report["verdicts"] { verdicts = list } else { verdicts = [] }

        var suites: [Suite] = []
        for verdict in verdicts {
            let name = string(verdict["scenario"]) ?? ""
            let testcase = Case(verdict: verdict, entries: entries, strict: strict)
            if let index = suites.firstIndex(where: { $0.name == name }) {
                suites[index].cases.append(testcase)
            } else {
                suites.append(Suite(name: name, cases: [testcase]))
            }
        }
        if suites.isEmpty {
            let message = "no rule was judged: no loaded scenario" + (scenario.map { " named \"\($0)\"" } ?? "")
                + " has an \"expect\" section"
            suites = [Suite(name: "faultline", cases: [Case(
                classname: "faultline", name: "verdicts",
                result: strict ? .failure(type: "inconclusive", message: message, lines: []) : .skipped(message: message),
                span: nil)])]
        }

        let stamp = JournalEntry.iso8601(timestamp)
        let host = hostname(server)
        var out = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
        let all = suites.flatMap(\.cases)
        out += "<testsuites" + attributes([
            ("name", "faultline"), ("tests", "\(all.count)"), ("failures", "\(all.filter(\.isFailure).count)"),
            ("errors", "0"), ("skipped", "\(all.filter(\.isSkipped).count)"),
            ("time", seconds(Span.union(all.map(\.span)))), ("timestamp", stamp),
        ]) + ">\n"
        for suite in suites {
            out += "  <testsuite" + attributes([
                ("name", suite.name), ("tests", "\(suite.cases.count)"),
                ("failures", "\(suite.cases.filter(\.isFailure).count)"), ("errors", "0"),
                ("skipped", "\(suite.cases.filter(\.isSkipped).count)"),
                ("time", seconds(Span.union(suite.cases.map(\.span)))), ("timestamp", stamp), ("hostname", host),
            ]) + ">\n"
            out += "    <properties>\n"
            out += "      <property" + attributes([("name", "faultline.server"), ("value", server)]) + "/>\n"
            out += "      <property" + attributes([("name", "faultline.version"), ("value", version)]) + "/>\n"
            out += "    </properties>\n"
            for testcase in suite.cases {
                let head = "    <testcase" + attributes([
                    ("classname", testcase.classname), ("name", testcase.name), ("time", "0"),
                ])
                switch testcase.result {
                case .pass:
                    out += head + "/>\n"
                case .skipped(let message):
                    out += head + ">\n      <skipped" + attributes([("message", message)]) + "/>\n    </testcase>\n"
                case .failure(let type, let message, let lines):
                    out += head + ">\n      <failure" + attributes([("message", message), ("type", type)])
                    if lines.isEmpty {
                        out += "/>\n"
                    } else {
                        out += ">" + escapeText(lines.joined(separator: "\n")) + "</failure>\n"
                    }
                    out += "    </testcase>\n"
                }
            }
            out += "  </testsuite>\n"
        }
        out += "</testsuites>\n"
        return out
    }

    /// One journal entry in short, for a failure's text: `#12 GET /v1/orders → 503 fault reset · reset · 3.1 ms ·
    /// connection 4 stream 1`; an entry no longer in the journal (evicted by `--max-journal`, or cleared) says so.
    package static func evidenceLine(_ sequence: String, _ entry: JSONValue?) -> String {
        guard let entry else { return "#\(sequence) is no longer in the journal (evicted or cleared)" }
        var line = "#\(sequence) "
        if let method = string(entry["method"]), let target = string(entry["target"]) {
            line += "\(method) \(target)"
        } else {
            line += string(entry["requestLine"]) ?? string(entry["kind"]) ?? "?"
        }
        let response = entry["response"]
        line += " → " + (response?["status"]?.intValue.map(String.init) ?? "-")
        if let fault = string(response?["fault"]) { line += " fault \(fault)" }
        if let outcome = string(response?["outcome"]) { line += " · \(outcome)" }
        if case .number(let text)? = response?["durationMs"], let milliseconds = Double(text) {
            line += " · \(tenths(milliseconds)) ms"
        }
        if let connection = entry["connection"]?["id"]?.intValue {
            line += " · connection \(connection)"
            if let stream = entry["stream"]?.intValue { line += " stream \(stream)" }
        }
        return line
    }

    /// Text for an element's content: `&`, `<` and `>` escaped, CR kept as `&#13;` (a parser would fold it), and
    /// every character XML 1.0 cannot carry (the C0 controls but tab, LF and CR; U+FFFE, U+FFFF), and DEL and the
    /// C1 controls, replaced with U+FFFD.
    package static func escapeText(_ text: String) -> String {
        escape(text, attribute: false)
    }

    /// An attribute's value between double quotes: as for text, plus both quotes, and tab, LF and CR as character
    /// references, since a parser normalises them to spaces otherwise.
    package static func escapeAttribute(_ text: String) -> String {
        escape(text, attribute: true)
    }

    // MARK: - Private

    private enum Result {
        case pass
        case skipped(message: String)
        case failure(type: String, message: String, lines: [String])
    }

    /// Monotonic milliseconds a verdict's evidence covers.
    private struct Span {
        var start: Double
        var end: Double

        static func union(_ spans: [Span?]) -> Span? {
            spans.compactMap { $0 }.reduce(nil) { (sum: Span?, next: Span) in
                guard let sum else { return next }
                return Span(start: min(sum.start, next.start), end: max(sum.end, next.end))
            }
        }
    }

    private struct Case {
        var classname: String
        var name: String
        var result: Result
        var span: Span?

        init(classname: String, name: String, result: Result, span: Span?) {
            self.classname = classname
            self.name = name
            self.result = result
            self.span = span
        }

        init(verdict: JSONValue, entries: [Int: JSONValue], strict: Bool) {
            classname = "faultline." + (JUnitReport.string(verdict["scenario"]) ?? "")
            name = JUnitReport.string(verdict["rule"]) ?? ""
            let sentence = JUnitReport.string(verdict["explanation"]) ?? ""
            var numbers: [String] = []
            if case .array(let evidence)? = verdict["evidence"] {
                numbers = evidence.compactMap { if case .number(let text) = $0 { return text } else { return nil } }
            }
            let found = numbers.compactMap { Int($0).flatMap { entries[$0] } }
            span = Span.union(found.map { entry -> Span? in
                guard case .number(let text)? = entry["receivedAtMonotonicMs"], let start = Double(text) else { return nil }
                var end = start
                if case .number(let duration)? = entry["response"]?["durationMs"], let milliseconds = Double(duration) {
                    end += milliseconds
                }
                return Span(start: start, end: end)
            })
            let lines = numbers.map { JUnitReport.evidenceLine($0, Int($0).flatMap { entries[$0] }) }
            let outcome = JUnitReport.string(verdict["outcome"])
                ?? (verdict["passed"] == .bool(true) ? "pass" : "fail")
            switch outcome {
            case "inconclusive":
                result = strict ? .failure(type: "inconclusive", message: sentence, lines: lines) : .skipped(message: sentence)
            case "pass" where verdict["passed"] != .bool(false):
                result = .pass
            default:
                result = .failure(type: "verdict", message: sentence, lines: lines)
            }
        }

        var isFailure: Bool { if case .failure = result { return true } else { return false } }
        var isSkipped: Bool { if case .skipped = result { return true } else { return false } }
    }

    private struct Suite {
        var name: String
        var cases: [Case]
    }

    private static func attributes(_ pairs: [(String, String)]) -> String {
        pairs.map { " \($0.0)=\"\(escapeAttribute($0.1))\"" }.joined()
    }

    /// A span's length in seconds with millisecond precision (`0.125`), `0` for none.
    private static func seconds(_ span: Span?) -> String {
        guard let span, span.end > span.start else { return "0" }
        let millis = Int((span.end - span.start).rounded())
        let fraction = String(millis % 1000)
        return "\(millis / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// `3.127` → `3.1`.
    private static func tenths(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// The server URL's host, for the suites' `hostname` (`127.0.0.1` for `http://127.0.0.1:8080/`).
    private static func hostname(_ url: String) -> String {
        var rest = Substring(url)
        if let scheme = rest.firstRange(of: "://") { rest = rest[scheme.upperBound...] }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            return String(rest[rest.index(after: rest.startIndex)..<close])
        }
        if let colon = rest.lastIndex(of: ":") { rest = rest[..<colon] }
        return rest.isEmpty ? "localhost" : String(rest)
    }

    private static func string(_ value: JSONValue?) -> String? {
        if case .string(let text)? = value { return text }
        return nil
    }

    private static func escape(_ text: String, attribute: Bool) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"" where attribute: out += "&quot;"
            case "'" where attribute: out += "&apos;"
            case "\t" where attribute: out += "&#9;"
            case "\n" where attribute: out += "&#10;"
            case "\r": out += "&#13;"
            case "\t", "\n": out.unicodeScalars.append(scalar)
            default:
                // XML 1.0 §2.2 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
                // (a Swift string holds no surrogates). DEL and the C1 controls are allowed but discouraged
                // (§2.2's note), and XML 1.1 readers reject them raw: replaced too.
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0xFFFE
                    || scalar.value == 0xFFFF {
                    out.unicodeScalars.append("\u{FFFD}")
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}
