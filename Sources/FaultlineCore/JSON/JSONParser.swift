/// A JSON text that breaks RFC 8259, with the 1-based line and column (counted in Unicode scalars) where
/// reading stopped, and what was wrong there.
public struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based line; lines end at LF.
    public var line: Int
    /// 1-based column in Unicode scalars, so a multi-byte character counts once.
    public var column: Int
    /// What was wrong, such as `expected ',' or '}'`.
    public var message: String

    /// Creates an error at `line`, `column` (both 1-based).
    public init(line: Int, column: Int, message: String) {
        self.line = line
        self.column = column
        self.message = message
    }

    /// `line 3, column 14: expected ',' or '}'`.
    public var description: String { "line \(line), column \(column): \(message)" }
}

extension JSONValue {
    /// Parses exactly one JSON value, strictly per RFC 8259: whitespace may surround it; no trailing commas, no
    /// comments, no single quotes; duplicate keys in one object are rejected (the message names the key); nesting
    /// deeper than 512 arrays and objects is rejected; strings must be valid UTF-8 and `\u` escapes must pair
    /// surrogates correctly. A leading UTF-8 byte order mark is skipped, as RFC 8259 §8.1 allows.
    public static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        let result: Result<JSONValue, JSONSyntaxError> = bytes.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(input: buffer)
            do throws(JSONParseFailure) {
                return .success(try parser.parseDocument())
            } catch {
                return .failure(parser.syntaxError(for: error))
            }
        }
        return try result.get()
    }

    /// Parses the UTF-8 form of `text`; see `parse(_:)` for bytes.
    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try parse(Array(text.utf8))
    }
}

/// Where and why parsing stopped, as a byte offset; turned into line and column only when reported.
private struct JSONParseFailure: Error {
    var offset: Int
    var message: String
}

/// A single-pass, iterative parser (an explicit stack instead of recursion, so the depth limit and not the
/// thread's stack size decides how deep a document may nest).
private struct JSONParser {
    static let maxDepth = 512
    /// Objects with more members than this check duplicates through a set instead of a linear scan.
    static let linearKeyScanLimit = 16

    /// A container being filled.
    struct Frame {
        var isObject: Bool
        var elements: [JSONValue] = []
        var members: [(key: String, value: JSONValue)] = []
        /// The key whose value is being parsed (objects only).
        var pendingKey = ""
        /// Keys as UTF-8, built once the object is large. Keys compare by code units as RFC 8259 §8.3
        /// describes, not by Swift's canonical equivalence.
        var keySet: Set<[UInt8]>?
    }

    let input: UnsafeBufferPointer<UInt8>
    var offset = 0
    var byteOrderMarkLength = 0
    /// Reused buffer for strings that contain escapes.
    var scratch: [UInt8] = []

    init(input: UnsafeBufferPointer<UInt8>) {
        self.input = input
    }

    mutating func parseDocument() throws(JSONParseFailure) -> JSONValue {
        if input.count >= 3 && input[0] == 0xEF && input[1] == 0xBB && input[2] == 0xBF {
            byteOrderMarkLength = 3
            offset = 3
        }
        let value = try parseValue()
        skipWhitespace()
        if offset < input.count {
            throw failure("unexpected \(describeByte(at: offset)) after the JSON value")
        }
        return value
    }

    func syntaxError(for failure: JSONParseFailure) -> JSONSyntaxError {
        var line = 1
        var column = 1
        var index = byteOrderMarkLength
        let end = min(failure.offset, input.count)
        while index < end {
            let byte = input[index]
            if byte == JSONByte.newline {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                // Continuation bytes belong to the scalar already counted.
                column += 1
            }
            index += 1
        }
        return JSONSyntaxError(line: line, column: column, message: failure.message)
    }

    // MARK: Structure

    private mutating func parseValue() throws(JSONParseFailure) -> JSONValue {
        var stack: [Frame] = []
        nextValue: while true {
            skipWhitespace()
            guard offset < input.count else {
                throw failure(stack.isEmpty ? "expected a JSON value, found the end of the input"
                                            : "unexpected end of input; expected a value")
            }
            var value: JSONValue
            let byte = input[offset]
            if byte == JSONByte.openBrace || byte == JSONByte.openBracket {
                let isObject = byte == JSONByte.openBrace
                guard stack.count < Self.maxDepth else {
                    throw failure("nesting is deeper than \(Self.maxDepth) levels")
                }
                offset += 1
                skipWhitespace()
                if offset < input.count && input[offset] == (isObject ? JSONByte.closeBrace : JSONByte.closeBracket) {
                    offset += 1
                    value = isObject ? .object([]) : .array([])
                } else {
                    var frame = Frame(isObject: isObject)
                    if isObject {
                        frame.pendingKey = try parseKey(checkingAgainst: &frame)
                    }
                    stack.append(frame)
                    continue nextValue
                }
            } else {
                value = try parseScalar()
            }

            // A value is complete: add it to its container, closing every container that ends here.
            while let last = stack.indices.last {
                if stack[last].isObject {
                    stack[last].members.append((key: stack[last].pendingKey, value: value))
                } else {
                    stack[last].elements.append(value)
                }
                skipWhitespace()
                let isObject = stack[last].isObject
                let closer = isObject ? JSONByte.closeBrace : JSONByte.closeBracket
                let expected = isObject ? "expected ',' or '}'" : "expected ',' or ']'"
                guard offset < input.count else {
                    throw failure("unexpected end of input; \(expected)")
                }
                let next = input[offset]
                if next == JSONByte.comma {
                    offset += 1
                    skipWhitespace()
                    if offset < input.count && input[offset] == closer {
                        throw failure("trailing comma is not allowed")
                    }
                    if isObject {
                        stack[last].pendingKey = try parseKey(checkingAgainst: &stack[last])
                    }
                    continue nextValue
                }
                guard next == closer else {
                    throw failure(expected)
                }
                offset += 1
                let frame = stack.removeLast()
                value = frame.isObject ? .object(frame.members) : .array(frame.elements)
            }
            return value
        }
    }

    /// Parses `"key" :` (whitespace already skipped) and rejects a key the object already has.
    private mutating func parseKey(checkingAgainst frame: inout Frame) throws(JSONParseFailure) -> String {
        guard offset < input.count else {
            throw failure("unexpected end of input; expected a key in double quotes")
        }
        guard input[offset] == JSONByte.quote else {
            if input[offset] == JSONByte.singleQuote {
                throw failure("keys must use double quotes")
            }
            throw failure("expected a key in double quotes, found \(describeByte(at: offset))")
        }
        let keyOffset = offset
        let key = try parseString()
        if isDuplicate(key, in: &frame) {
            throw JSONParseFailure(offset: keyOffset, message: "duplicate key \(JSONValue.string(key).serialized())")
        }
        skipWhitespace()
        guard offset < input.count, input[offset] == JSONByte.colon else {
            throw failure(offset < input.count ? "expected ':'" : "unexpected end of input; expected ':'")
        }
        offset += 1
        return key
    }

    private func isDuplicate(_ key: String, in frame: inout Frame) -> Bool {
        if frame.keySet == nil && frame.members.count < Self.linearKeyScanLimit {
            return frame.members.contains { $0.key.utf8.elementsEqual(key.utf8) }
        }
        if frame.keySet == nil {
            frame.keySet = Set(frame.members.map { Array($0.key.utf8) })
        }
        return !frame.keySet!.insert(Array(key.utf8)).inserted
    }

    // MARK: Scalars

    private mutating func parseScalar() throws(JSONParseFailure) -> JSONValue {
        let byte = input[offset]
        switch byte {
        case JSONByte.quote:
            return .string(try parseString())
        case JSONByte.minus, UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            let start = offset
            while offset < input.count, JSONByte.isLetter(input[offset]) {
                offset += 1
            }
            let word = String(decoding: UnsafeBufferPointer(rebasing: input[start..<offset]), as: UTF8.self)
            switch word {
            case "true": return .bool(true)
            case "false": return .bool(false)
            case "null": return .null
            default:
                throw JSONParseFailure(
                    offset: start, message: "unexpected word \"\(word)\"; JSON's literals are true, false and null")
            }
        case JSONByte.singleQuote:
            throw failure("strings must use double quotes")
        case JSONByte.slash:
            throw failure("comments are not allowed in JSON")
        default:
            throw failure("expected a value, found \(describeByte(at: offset))")
        }
    }

    /// RFC 8259 §6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept as written.
    private mutating func parseNumber() throws(JSONParseFailure) -> JSONValue {
        let start = offset
        if input[offset] == JSONByte.minus {
            offset += 1
        }
        guard offset < input.count, JSONByte.isDigit(input[offset]) else {
            throw failure("expected a digit after '-'")
        }
        if input[offset] == UInt8(ascii: "0") {
            offset += 1
            if offset < input.count, JSONByte.isDigit(input[offset]) {
                throw failure("numbers cannot have leading zeros")
            }
        } else {
            skipDigits()
        }
        if offset < input.count, input[offset] == JSONByte.period {
            offset += 1
            guard offset < input.count, JSONByte.isDigit(input[offset]) else {
                throw failure("expected a digit after '.'")
            }
            skipDigits()
        }
        if offset < input.count, input[offset] == UInt8(ascii: "e") || input[offset] == UInt8(ascii: "E") {
            offset += 1
            if offset < input.count, input[offset] == JSONByte.plus || input[offset] == JSONByte.minus {
                offset += 1
            }
            guard offset < input.count, JSONByte.isDigit(input[offset]) else {
                throw failure("expected a digit in the exponent")
            }
            skipDigits()
        }
        return .number(String(decoding: UnsafeBufferPointer(rebasing: input[start..<offset]), as: UTF8.self))
    }

    private mutating func skipDigits() {
        while offset < input.count, JSONByte.isDigit(input[offset]) {
            offset += 1
        }
    }

    /// Parses a string starting at its opening quote. Strings without escapes are decoded straight from the input.
    private mutating func parseString() throws(JSONParseFailure) -> String {
        let quoteOffset = offset
        offset += 1
        let start = offset
        while offset < input.count {
            let byte = input[offset]
            if byte == JSONByte.quote {
                let text = String(decoding: UnsafeBufferPointer(rebasing: input[start..<offset]), as: UTF8.self)
                offset += 1
                return text
            } else if byte == JSONByte.backslash {
                break
            } else if byte < 0x20 {
                throw controlCharacterFailure(byte)
            } else if byte >= 0x80 {
                try skipUTF8Sequence()
            } else {
                offset += 1
            }
        }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: input[start..<offset]))
        while offset < input.count {
            let byte = input[offset]
            if byte == JSONByte.quote {
                offset += 1
                return String(decoding: scratch, as: UTF8.self)
            } else if byte == JSONByte.backslash {
                try parseEscape()
            } else if byte < 0x20 {
                throw controlCharacterFailure(byte)
            } else if byte >= 0x80 {
                let sequenceStart = offset
                try skipUTF8Sequence()
                scratch.append(contentsOf: UnsafeBufferPointer(rebasing: input[sequenceStart..<offset]))
            } else {
                scratch.append(byte)
                offset += 1
            }
        }
        throw JSONParseFailure(offset: quoteOffset, message: "unterminated string")
    }

    private func controlCharacterFailure(_ byte: UInt8) -> JSONParseFailure {
        switch byte {
        case JSONByte.newline, JSONByte.carriageReturn:
            return failure("unescaped line break in a string; write it as \\n or \\r")
        case JSONByte.tab:
            return failure("unescaped tab in a string; write it as \\t")
        default:
            return failure("unescaped control character U+\(JSONByte.hex4(UInt16(byte))) in a string")
        }
    }

    /// Decodes one escape (RFC 8259 §7) at `offset` into `scratch`.
    private mutating func parseEscape() throws(JSONParseFailure) {
        let escapeOffset = offset
        offset += 1
        guard offset < input.count else {
            throw failure("unterminated string")
        }
        let byte = input[offset]
        offset += 1
        switch byte {
        case JSONByte.quote, JSONByte.backslash, JSONByte.slash: scratch.append(byte)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(JSONByte.newline)
        case UInt8(ascii: "r"): scratch.append(JSONByte.carriageReturn)
        case UInt8(ascii: "t"): scratch.append(JSONByte.tab)
        case UInt8(ascii: "u"):
            let unit = try parseHex4(escapeOffset: escapeOffset)
            var scalarValue = UInt32(unit)
            if (0xDC00...0xDFFF).contains(unit) {
                throw JSONParseFailure(
                    offset: escapeOffset, message: "unpaired low surrogate \\u\(JSONByte.hex4(unit))")
            }
            if (0xD800...0xDBFF).contains(unit) {
                let lowOffset = offset
                guard offset + 1 < input.count, input[offset] == JSONByte.backslash,
                      input[offset + 1] == UInt8(ascii: "u")
                else {
                    throw JSONParseFailure(
                        offset: escapeOffset,
                        message: "high surrogate \\u\(JSONByte.hex4(unit)) must be followed by a \\u low surrogate")
                }
                offset += 2
                let low = try parseHex4(escapeOffset: lowOffset)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw JSONParseFailure(
                        offset: escapeOffset,
                        message: "high surrogate \\u\(JSONByte.hex4(unit)) is followed by \\u\(JSONByte.hex4(low)), "
                            + "not a low surrogate")
                }
                scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            }
            // Surrogates were handled above, so this is always a valid scalar.
            scratch.append(contentsOf: UTF8.encode(Unicode.Scalar(scalarValue)!)!)
        default:
            throw JSONParseFailure(offset: escapeOffset, message: "invalid escape \\\(describeEscapedByte(byte))")
        }
    }

    private mutating func parseHex4(escapeOffset: Int) throws(JSONParseFailure) -> UInt16 {
        var unit: UInt16 = 0
        for _ in 0..<4 {
            guard offset < input.count, let digit = JSONByte.hexValue(input[offset]) else {
                throw JSONParseFailure(offset: escapeOffset, message: "\\u must be followed by four hex digits")
            }
            unit = unit << 4 | UInt16(digit)
            offset += 1
        }
        return unit
    }

    /// Checks one multi-byte UTF-8 sequence at `offset` (Unicode 15 table 3-7: no overlong forms, no surrogates,
    /// nothing above U+10FFFF) and moves past it.
    private mutating func skipUTF8Sequence() throws(JSONParseFailure) {
        let lead = input[offset]
        let continuationCount: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: continuationCount = 1
        case 0xE0: continuationCount = 2; secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: continuationCount = 2
        case 0xED: continuationCount = 2; secondRange = 0x80...0x9F
        case 0xF0: continuationCount = 3; secondRange = 0x90...0xBF
        case 0xF1...0xF3: continuationCount = 3
        case 0xF4: continuationCount = 3; secondRange = 0x80...0x8F
        default: throw failure("invalid UTF-8 byte 0x\(JSONByte.hex2(lead)) in a string")
        }
        for index in 1...continuationCount {
            let position = offset + index
            let range = index == 1 ? secondRange : 0x80...0xBF
            guard position < input.count, range.contains(input[position]) else {
                throw failure("invalid UTF-8 sequence in a string")
            }
        }
        offset += 1 + continuationCount
    }

    // MARK: Helpers

    private mutating func skipWhitespace() {
        while offset < input.count {
            switch input[offset] {
            case JSONByte.space, JSONByte.tab, JSONByte.newline, JSONByte.carriageReturn: offset += 1
            default: return
            }
        }
    }

    private func failure(_ message: String) -> JSONParseFailure {
        JSONParseFailure(offset: offset, message: message)
    }

    private func describeByte(at position: Int) -> String {
        guard position < input.count else { return "the end of the input" }
        let byte = input[position]
        if byte >= 0x21 && byte < 0x7F {
            return "'\(Character(Unicode.Scalar(byte)))'"
        }
        return "byte 0x\(JSONByte.hex2(byte))"
    }

    private func describeEscapedByte(_ byte: UInt8) -> String {
        byte >= 0x21 && byte < 0x7F ? String(Character(Unicode.Scalar(byte))) : "(byte 0x\(JSONByte.hex2(byte)))"
    }
}

/// The bytes the parser looks for, and small byte helpers. A namespace rather than `UInt8` extensions so nothing
/// here can collide with helpers elsewhere in the module.
private enum JSONByte {
    static let tab = UInt8(ascii: "\t")
    static let newline = UInt8(ascii: "\n")
    static let carriageReturn = UInt8(ascii: "\r")
    static let space = UInt8(ascii: " ")
    static let quote = UInt8(ascii: "\"")
    static let singleQuote = UInt8(ascii: "'")
    static let backslash = UInt8(ascii: "\\")
    static let slash = UInt8(ascii: "/")
    static let comma = UInt8(ascii: ",")
    static let colon = UInt8(ascii: ":")
    static let period = UInt8(ascii: ".")
    static let plus = UInt8(ascii: "+")
    static let minus = UInt8(ascii: "-")
    static let openBrace = UInt8(ascii: "{")
    static let closeBrace = UInt8(ascii: "}")
    static let openBracket = UInt8(ascii: "[")
    static let closeBracket = UInt8(ascii: "]")

    static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    static func hex2(_ byte: UInt8) -> String {
        let text = String(byte, radix: 16, uppercase: true)
        return byte < 0x10 ? "0" + text : text
    }

    static func hex4(_ unit: UInt16) -> String {
        let text = String(unit, radix: 16, uppercase: true)
        return String(repeating: "0", count: 4 - text.count) + text
    }
}
