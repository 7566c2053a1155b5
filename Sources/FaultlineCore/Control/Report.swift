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

    package init(_ json: JSONValue) {
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
