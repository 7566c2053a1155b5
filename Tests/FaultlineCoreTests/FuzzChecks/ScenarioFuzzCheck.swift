import FaultlineCore

/// What must hold for any bytes given to the JSON parser and the scenario loader: the contract checks of the
/// `scenario` fuzzer (Fuzz/entries/scenario/ScenarioFuzzer.swift), which compiles this file, and of FuzzRegressionTests, which
/// runs the saved inputs through it. Returns the broken rules; [] when all hold. The input is the file's bytes
/// as they are; scenarios load without a folder, so `file` bodies are errors and nothing touches the disk.
///
/// No `import Testing` here: the fuzzer is built by swiftc alone, without the test libraries.
enum ScenarioFuzzCheck {
    static let file = "fuzz.json"

    static func violations(in input: [UInt8]) -> [String] {
        let document: JSONValue?
        var problems: [String] = []
        do throws(JSONSyntaxError) {
            let value = try JSONValue.parse(input)
            document = value
            problems += roundTripViolations(value)
        } catch {
            document = nil
            let lines = input.count(where: { $0 == UInt8(ascii: "\n") }) + 1
            if error.line < 1 || error.line > lines || error.column < 1 || error.message.isEmpty {
                problems.append("JSON syntax error \(error) is outside the input's \(lines) lines or says nothing")
            }
        }

        let outcome = load(input)
        switch outcome {
        case .success(let scenario):
            problems += scenarioViolations(scenario)
        case .failure(let failure):
            problems += errorViolations(failure.errors, document: document)
        }
        // The compact text of the same document is the same scenario, or the same problems at the same paths.
        if let document {
            var compact: [UInt8] = []
            document.serialize(into: &compact)
            if load(compact) != outcome {
                problems.append("loading the compact form of the document gives a different outcome")
            }
        }
        return problems
    }

    // MARK: Rules

    /// Compact and pretty text both read back as the same value, and the compact text is stable.
    private static func roundTripViolations(_ value: JSONValue) -> [String] {
        var compact: [UInt8] = []
        value.serialize(into: &compact)
        for (form, text) in [("compact", compact), ("pretty", Array(value.prettySerialized().utf8))] {
            guard let again = try? JSONValue.parse(text) else {
                let shown = String(decoding: text.prefix(200), as: UTF8.self)
                return ["the \(form) serialization does not parse: \(shown)"]
            }
            var compactAgain: [UInt8] = []
            again.serialize(into: &compactAgain)
            if again != value || compactAgain != compact {
                return ["the \(form) serialization parses to a different value"]
            }
        }
        return []
    }

    private static func scenarioViolations(_ scenario: Scenario) -> [String] {
        var problems: [String] = []
        if scenario.name.isEmpty { problems.append("a scenario loaded with an empty name") }
        if scenario.sourceFile != file || scenario.directory != nil {
            problems.append("a scenario loaded with source \(scenario.sourceFile) in \(scenario.directory ?? "nil")")
        }
        var ids: Set<String> = []
        for route in scenario.routes {
            if !ids.insert(route.id).inserted { problems.append("route id \(route.id.debugDescription) loaded twice") }
            if route.responses.isEmpty { problems.append("route \(route.id.debugDescription) loaded without steps") }
            for step in route.responses {
                if !(100 ... 599).contains(step.status) || step.times < 1 {
                    problems.append("route \(route.id.debugDescription) has status \(step.status), times \(step.times)")
                }
                if step.headers.contains(where: { $0.value.utf8.contains(where: { [0, 0x0A, 0x0D].contains($0) }) }) {
                    problems.append("route \(route.id.debugDescription) has a header value with CR, LF or NUL")
                }
                exerciseTemplates(step.body)
            }
        }
        return problems
    }

    /// Every problem names this file, says something, and points at a value that exists in the document
    /// (ScenarioError: the path is empty for the document as a whole and for JSON syntax errors).
    private static func errorViolations(_ errors: [ScenarioError], document: JSONValue?) -> [String] {
        guard !errors.isEmpty else { return ["the load failed without naming a problem"] }
        var problems: [String] = []
        for error in errors {
            if error.file != file || error.message.isEmpty {
                problems.append("problem \(error) does not name \(file) or says nothing")
            }
            guard let document else {
                if errors.count != 1 || !error.jsonPath.isEmpty {
                    problems.append("a JSON syntax error reported as \(errors)")
                }
                continue
            }
            if JSONPathResolver.value(at: error.jsonPath, in: document) == nil {
                problems.append("problem \(error) names a path that is not in the document")
            }
        }
        return problems
    }

    /// Renders templated bodies against a fixed request, as the server does for each response.
    private static func exerciseTemplates(_ body: StepBody) {
        let text: String
        switch body {
        case .text(let value): text = value
        case .json(let value): text = value.serialized()
        default: return
        }
        guard Template.hasPlaceholders(text) else { return }
        let head = HTTPRequestHead(
            method: "GET", target: "/a/b?x=1&y=%20", version: .http1_1,
            headers: HTTPHeaders([(name: "Host", value: "h"), (name: "X-Id", value: "7")])
        )
        let context = TemplateContext(
            pathParameters: ["id": "42"], input: MatchInput(request: HTTPRequest(head: head)), requestID: 1,
            wallSeconds: 1_700_000_000, dates: HTTPDateCache(), resourceID: { 9 }
        )
        var resourceID: Int?
        _ = Template.render(text, context, resourceID: &resourceID)
        if case .json(let value) = body {
            _ = Template.render(value, context, resourceID: &resourceID)
        }
    }

    // MARK: Helpers

    private static func load(_ bytes: [UInt8]) -> Result<Scenario, ScenarioLoadError> {
        do throws(ScenarioLoadError) {
            return .success(try ScenarioLoader.load(bytes: bytes, file: file, directory: nil))
        } catch {
            return .failure(error)
        }
    }
}

/// Follows a scenario error's JSON path (`routes[2].match.headers["X Y"]`, the form `ScenarioLoader.path`
/// writes) through a document. Keys compare by their UTF-8 bytes, as the parser's duplicate check does.
enum JSONPathResolver {
    /// The value the path names, or nil when the path does not parse or names nothing.
    static func value(at path: String, in document: JSONValue) -> JSONValue? {
        let bytes = Array(path.utf8)
        var node = document
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "[") {
                index += 1
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: "\"") {
                    // A JSON string literal: find its closing quote, skipping escapes, and let the parser decode it.
                    var end = index + 1
                    while end < bytes.count && bytes[end] != UInt8(ascii: "\"") {
                        end += bytes[end] == UInt8(ascii: "\\") ? 2 : 1
                    }
                    guard end < bytes.count, case .string(let key)? = try? JSONValue.parse(Array(bytes[index ... end]))
                    else { return nil }
                    guard let child = member(key, of: node) else { return nil }
                    node = child
                    index = end + 1
                } else {
                    var number = 0
                    let start = index
                    while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39, index - start < 9 {
                        number = number * 10 + Int(bytes[index] - 0x30)
                        index += 1
                    }
                    guard index > start, case .array(let elements) = node, number < elements.count else { return nil }
                    node = elements[number]
                }
                guard index < bytes.count, bytes[index] == UInt8(ascii: "]") else { return nil }
                index += 1
            } else {
                if index > 0 {
                    guard bytes[index] == UInt8(ascii: ".") else { return nil }
                    index += 1
                }
                let start = index
                while index < bytes.count, isPlainKeyByte(bytes[index]) { index += 1 }
                let key = String(decoding: bytes[start ..< index], as: UTF8.self)
                guard index > start, let child = member(key, of: node) else { return nil }
                node = child
            }
        }
        return node
    }

    private static func member(_ key: String, of node: JSONValue) -> JSONValue? {
        guard case .object(let members) = node else { return nil }
        return members.first(where: { $0.key.utf8.elementsEqual(key.utf8) })?.value
    }

    /// The bytes `ScenarioLoader.path` writes without quoting: ASCII letters, digits, `_`, `-` and `$`.
    private static func isPlainKeyByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "A") ... UInt8(ascii: "Z"),
             UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "$"):
            return true
        default:
            return false
        }
    }
}
