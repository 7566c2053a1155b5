extension JSONValue {
    /// Compact JSON text (RFC 8259): no whitespace, object keys in stored order, numbers exactly as their
    /// literal text, strings escaped as `serialize(into:)` describes.
    public func serialized() -> String {
        var bytes: [UInt8] = []
        serialize(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the compact JSON text to `bytes`. Strings escape `"`, `\` and control characters below U+0020
    /// (as `\n`, `\r`, `\t`, `\b`, `\f`, or `\u00XX`) and nothing else: `/` stays as is and non-ASCII characters
    /// are written as UTF-8 (RFC 8259 §7).
    package func serialize(into bytes: inout [UInt8]) {
        switch self {
        case .null:
            bytes.append(contentsOf: "null".utf8)
        case .bool(let value):
            bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
        case .number(let text):
            bytes.append(contentsOf: text.utf8)
        case .string(let text):
            Self.appendQuoted(text, to: &bytes)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                element.serialize(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.appendQuoted(member.key, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                member.value.serialize(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// The same text indented by two spaces per level, one member or element per line, for people to read.
    /// Empty arrays and objects stay `[]` and `{}`.
    public func prettySerialized() -> String {
        var bytes: [UInt8] = []
        appendPretty(to: &bytes, indent: 0)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A number holding `value`'s decimal text.
    public static func int(_ value: Int) -> JSONValue {
        .number(String(value))
    }

    /// A number holding the shortest text that reads back as exactly `value` (`0.1`, `1`, `1e-7`, `1.5e300`);
    /// JSON has no NaN or infinity, so a non-finite value becomes `null`.
    public static func double(_ value: Double) -> JSONValue {
        guard value.isFinite else { return .null }
        // Swift's description is already the shortest round-trip digit string; only its form needs trimming:
        // "100.0" → "100", "1e-07" → "1e-7", "1e+16" → "1e16".
        let text = value.description
        var mantissa = Substring(text)
        var exponent: Substring?
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            mantissa = text[..<e]
            exponent = text[text.index(after: e)...]
        }
        if mantissa.hasSuffix(".0") {
            mantissa = mantissa.dropLast(2)
        }
        guard var exponentText = exponent else { return .number(String(mantissa)) }
        var sign = ""
        if exponentText.first == "-" {
            sign = "-"
            exponentText = exponentText.dropFirst()
        } else if exponentText.first == "+" {
            exponentText = exponentText.dropFirst()
        }
        let digits = exponentText.drop(while: { $0 == "0" })
        return .number("\(mantissa)e\(sign)\(digits.isEmpty ? "0" : digits)")
    }

    private func appendPretty(to bytes: inout [UInt8], indent: Int) {
        switch self {
        case .array(let elements) where !elements.isEmpty:
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                bytes.append(contentsOf: index > 0 ? ",\n".utf8 : "\n".utf8)
                Self.appendIndent(indent + 1, to: &bytes)
                element.appendPretty(to: &bytes, indent: indent + 1)
            }
            bytes.append(UInt8(ascii: "\n"))
            Self.appendIndent(indent, to: &bytes)
            bytes.append(UInt8(ascii: "]"))
        case .object(let members) where !members.isEmpty:
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                bytes.append(contentsOf: index > 0 ? ",\n".utf8 : "\n".utf8)
                Self.appendIndent(indent + 1, to: &bytes)
                Self.appendQuoted(member.key, to: &bytes)
                bytes.append(contentsOf: ": ".utf8)
                member.value.appendPretty(to: &bytes, indent: indent + 1)
            }
            bytes.append(UInt8(ascii: "\n"))
            Self.appendIndent(indent, to: &bytes)
            bytes.append(UInt8(ascii: "}"))
        default:
            serialize(into: &bytes)
        }
    }

    private static func appendIndent(_ level: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: level * 2))
    }

    /// Appends `text` as a JSON string. Runs of bytes that need no escape are copied in one go.
    private static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
                case UInt8(ascii: "\n"): bytes.append(contentsOf: #"\n"#.utf8)
                case UInt8(ascii: "\r"): bytes.append(contentsOf: #"\r"#.utf8)
                case UInt8(ascii: "\t"): bytes.append(contentsOf: #"\t"#.utf8)
                case 0x08: bytes.append(contentsOf: #"\b"#.utf8)
                case 0x0C: bytes.append(contentsOf: #"\f"#.utf8)
                default:
                    // Only bytes below 0x20 get here, so the high digit is 0 or 1.
                    let low = byte & 0x0F
                    bytes.append(contentsOf: #"\u00"#.utf8)
                    bytes.append(UInt8(ascii: "0") + (byte >> 4))
                    bytes.append(low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + low - 10)
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
