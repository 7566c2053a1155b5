extension ScenarioLoader {
    /// Walks one parsed scenario document, building model values and recording every problem on the way, so a
    /// single load reports all of a file's mistakes. Each builder returns nil when its part had a problem; the
    /// scenario is built only when nothing was reported.
    struct Reader {
        let file: String
        let directory: String?
        private(set) var errors: [ScenarioError] = []
        /// The scenario's resources, read before its routes so that steps can name them.
        var resources: [ResourceSpec] = []

        init(file: String, directory: String?) {
            self.file = file
            self.directory = directory
        }

        mutating func report(_ path: String, _ message: String) {
            errors.append(ScenarioError(file: file, jsonPath: path, message: message))
        }
    }

    /// An object's members together with the JSON path that names the object.
    struct Fields {
        let path: String
        let members: [(key: String, value: JSONValue)]

        subscript(key: String) -> JSONValue? {
            members.first(where: { $0.key == key })?.value
        }

        /// The JSON path of the member `key`.
        func path(_ key: String) -> String {
            ScenarioLoader.path(path, key: key)
        }

        /// The keys among `keys` that are present, in the order of `keys`.
        func present(_ keys: [String]) -> [String] {
            keys.filter { self[$0] != nil }
        }
    }
}

// MARK: - Paths and wording

extension ScenarioLoader {
    /// `base.key`, or `base["key"]` when the key is not a plain name.
    static func path(_ base: String, key: String) -> String {
        let isPlain = !key.isEmpty && key.utf8.allSatisfy { byte in
            isASCIILetter(byte) || isASCIIDigit(byte) || "_-$".utf8.contains(byte)
        }
        if !isPlain {
            return "\(base)[\(quoted(key))]"
        }
        return base.isEmpty ? key : "\(base).\(key)"
    }

    /// `text` as a JSON string literal, for quoting user input in messages.
    package static func quoted(_ text: String) -> String {
        JSONValue.string(text).serialized()
    }

    /// `"a"`, `"a" and "b"`, `"a", "b" and "c"`.
    package static func quotedList(_ items: [String], conjunction: String = "and") -> String {
        let quotedItems = items.map(quoted)
        guard quotedItems.count > 1 else { return quotedItems.first ?? "" }
        return quotedItems.dropLast().joined(separator: ", ") + " \(conjunction) " + quotedItems.last!
    }

    /// What a value is, for "expected …, found …" messages.
    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// The candidate closest to `word` if it is close enough to be a likely typo: optimal string alignment
    /// distance (an edit or a swap of neighbours each count 1), ignoring case, of at most a third of the
    /// candidate's length and at least 1.
    package static func suggestion(for word: String, among candidates: [String]) -> String? {
        let target = Array(word.lowercased())
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(target, Array(candidate.lowercased()))
            if distance <= max(1, candidate.count / 3), distance < (best?.distance ?? .max) {
                best = (candidate, distance)
            }
        }
        return best?.candidate
    }

    /// Optimal string alignment distance between `a` and `b`.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        // Three rows suffice: the transposition rule looks back two rows.
        var previousPrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], previousPrevious[j - 2] + 1)
                }
            }
            (previousPrevious, previous, current) = (previous, current, previousPrevious)
        }
        return previous[b.count]
    }

    /// `; did you mean "status"?` or, with no close candidate, `; expected one of "a", "b" or "c"`.
    package static func hint(for word: String, among candidates: [String], listName: String = "expected one of") -> String {
        if let match = suggestion(for: word, among: candidates) {
            return "; did you mean \(quoted(match))?"
        }
        return "; \(listName) \(quotedList(candidates, conjunction: "or"))"
    }

    /// Whether `text` is an HTTP token (RFC 9110 §5.6.2), as method and field names must be.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    /// Whether `text` is an identifier: an ASCII letter or `_`, then letters, digits or `_`.
    static func isIdentifier(_ text: String) -> Bool {
        guard let first = text.utf8.first, first == UInt8(ascii: "_") || isASCIILetter(first) else { return false }
        return text.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || isASCIILetter(byte) || isASCIIDigit(byte)
        }
    }

    private static func isASCIIDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func isASCIILetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }
}

// MARK: - Typed access

extension ScenarioLoader.Reader {
    /// The object's members, after reporting keys it may not have: keys of later versions of Faultline get
    /// a "not supported yet" error, anything else an "unknown key" error with a did-you-mean. Keys in `ignored`
    /// are allowed and skipped. Reports and returns nil when `value` is not an object.
    mutating func fields(
        _ value: JSONValue, at path: String, known: [String], unsupported: [String] = [], ignored: [String] = []
    ) -> ScenarioLoader.Fields? {
        guard case .object(let members) = value else {
            report(path, "expected an object, found \(ScenarioLoader.describe(value))")
            return nil
        }
        for member in members where !known.contains(member.key) && !ignored.contains(member.key) {
            let key = ScenarioLoader.quoted(member.key)
            if unsupported.contains(member.key) {
                report(path, "\(key) is not supported yet by this version of Faultline")
            } else {
                report(path, "unknown key \(key)" + ScenarioLoader.hint(for: member.key, among: known))
            }
        }
        return ScenarioLoader.Fields(path: path, members: members)
    }

    /// The members of an object whose keys are names chosen by the user (headers, query parameters).
    mutating func namedMembers(_ value: JSONValue, at path: String) -> [(key: String, value: JSONValue)]? {
        guard case .object(let members) = value else {
            report(path, "expected an object, found \(ScenarioLoader.describe(value))")
            return nil
        }
        return members
    }

    /// The member `key`, reporting it missing on the object when absent.
    mutating func required(_ fields: ScenarioLoader.Fields, _ key: String) -> JSONValue? {
        guard let value = fields[key] else {
            report(fields.path, "missing required key \(ScenarioLoader.quoted(key))")
            return nil
        }
        return value
    }

    mutating func string(_ value: JSONValue, at path: String) -> String? {
        guard case .string(let text) = value else {
            report(path, "expected a string, found \(ScenarioLoader.describe(value))")
            return nil
        }
        return text
    }

    mutating func nonEmptyString(_ value: JSONValue, at path: String) -> String? {
        guard let text = string(value, at: path) else { return nil }
        guard !text.isEmpty else {
            report(path, "must not be empty")
            return nil
        }
        return text
    }

    mutating func bool(_ value: JSONValue, at path: String) -> Bool? {
        guard case .bool(let flag) = value else {
            report(path, "expected true or false, found \(ScenarioLoader.describe(value))")
            return nil
        }
        return flag
    }

    mutating func array(_ value: JSONValue, at path: String) -> [JSONValue]? {
        guard case .array(let elements) = value else {
            report(path, "expected an array, found \(ScenarioLoader.describe(value))")
            return nil
        }
        return elements
    }

    /// An integer within `range`, written without fraction or exponent. `invalid`, when given, words the
    /// message for a number that is not an integer in range (it receives the number's literal text).
    mutating func integer(
        _ value: JSONValue, at path: String, in range: ClosedRange<Int>, invalid: ((String) -> String)? = nil
    ) -> Int? {
        guard case .number(let text) = value else {
            report(path, "expected an integer, found \(ScenarioLoader.describe(value))")
            return nil
        }
        let isInteger = !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" })
        if isInteger, let number = Int(text), range.contains(number) {
            return number
        }
        if let invalid {
            report(path, invalid(text))
        } else if !isInteger {
            report(path, "expected an integer, found \(text)")
        } else if range.upperBound == .max {
            report(path, "must be at least \(range.lowerBound), found \(text)")
        } else {
            report(path, "must be between \(range.lowerBound) and \(range.upperBound), found \(text)")
        }
        return nil
    }

    /// A non-negative integer up to `UInt64.max`, for seeds.
    mutating func unsignedInteger(_ value: JSONValue, at path: String) -> UInt64? {
        guard case .number(let text) = value else {
            report(path, "expected a non-negative integer, found \(ScenarioLoader.describe(value))")
            return nil
        }
        guard let number = UInt64(text) else {
            report(path, "expected a non-negative integer no larger than \(UInt64.max), found \(text)")
            return nil
        }
        return number
    }

    /// A finite number.
    mutating func number(_ value: JSONValue, at path: String) -> Double? {
        guard case .number(let text) = value else {
            report(path, "expected a number, found \(ScenarioLoader.describe(value))")
            return nil
        }
        guard let number = Double(text), number.isFinite else {
            report(path, "\(text) is too large")
            return nil
        }
        return number
    }
}
