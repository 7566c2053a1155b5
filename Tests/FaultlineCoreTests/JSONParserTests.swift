import Testing
@testable import FaultlineCore

/// The parse error for `text`, or nil when it parsed.
private func syntaxError(_ text: String) -> JSONSyntaxError? {
    syntaxError(Array(text.utf8))
}

private func syntaxError(_ bytes: [UInt8]) -> JSONSyntaxError? {
    do {
        _ = try JSONValue.parse(bytes)
        return nil
    } catch {
        return error
    }
}

/// The literal text of a number value, or nil for anything else (`==` on numbers compares values, not text).
private func numberText(_ value: JSONValue?) -> String? {
    guard case .number(let text)? = value else { return nil }
    return text
}

@Suite("JSON parsing")
struct JSONParserTests {
    @Test("compact text survives a parse and serialize round trip unchanged")
    func roundTrip() throws {
        let text = #"{"zeta":1,"alpha":[true,false,null,"x",{}],"mid":{"b":[],"a":-0.50},"n":1E+2}"#
        let value = try JSONValue.parse(text)
        #expect(value.serialized() == text)
        guard case .object(let members) = value else {
            Issue.record("expected an object")
            return
        }
        #expect(members.map(\.key) == ["zeta", "alpha", "mid", "n"])
    }

    @Test("numbers keep their literal text", arguments: ["0", "-0", "1.50", "1e10", "1E+2", "-12.5e-3", "0.000001",
                                                         "123456789012345678901234567890"])
    func numberLiterals(literal: String) throws {
        let value = try JSONValue.parse("[\(literal)]")
        guard case .array(let elements) = value else {
            Issue.record("expected an array")
            return
        }
        #expect(numberText(elements.first) == literal)
        #expect(value.serialized() == "[\(literal)]")
    }

    @Test("escapes decode, and serialize back in RFC 8259 form without escaping /")
    func escapes() throws {
        let value = try JSONValue.parse(#""q\"b\\s\/n\nt\tr\rb\bf\fc\u0001z\u0000""#)
        #expect(value == .string("q\"b\\s/n\nt\tr\rb\u{8}f\u{C}c\u{1}z\u{0}"))
        #expect(value.serialized() == #""q\"b\\s/n\nt\tr\rb\bf\fc\u0001z\u0000""#)
        #expect(JSONValue.string("\u{1F}\u{7F}/").serialized() == "\"\\u001f\u{7F}/\"")
    }

    @Test("non-ASCII text is read from UTF-8 and written as UTF-8")
    func unicode() throws {
        let value = try JSONValue.parse("{\"clé\":\"日本 😀\"}")
        #expect(value["clé"] == .string("日本 😀"))
        var bytes: [UInt8] = []
        value.serialize(into: &bytes)
        #expect(bytes == Array("{\"clé\":\"日本 😀\"}".utf8))
    }

    @Test("\\u escapes: BMP characters and surrogate pairs")
    func unicodeEscapes() throws {
        #expect(try JSONValue.parse(#""\u00e9\u65E5""#) == .string("é日"))
        #expect(try JSONValue.parse(#""\uD83D\uDE00!""#) == .string("😀!"))
        #expect(try JSONValue.parse(#""\udbff\udfff""#) == .string("\u{10FFFF}"))
    }

    @Test("unpaired surrogates are rejected")
    func unpairedSurrogates() {
        let lone = syntaxError(#""ab\uD83D""#)
        #expect(lone?.message == #"high surrogate \uD83D must be followed by a \u low surrogate"#)
        #expect(lone?.column == 4)
        #expect(syntaxError(#""\uD83D\u0041""#)?.message
            == #"high surrogate \uD83D is followed by \u0041, not a low surrogate"#)
        #expect(syntaxError(#""\uDE00""#)?.message == #"unpaired low surrogate \uDE00"#)
        #expect(syntaxError(#""\u12G4""#)?.message == #"\u must be followed by four hex digits"#)
    }

    @Test("strings must be valid UTF-8", arguments: [
        [0x22, 0xFF, 0x22],               // never valid
        [0x22, 0xC0, 0x80, 0x22],         // overlong NUL
        [0x22, 0xED, 0xA0, 0x80, 0x22],   // encoded surrogate
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], // above U+10FFFF
        [0x22, 0xE6, 0x97, 0x22],         // truncated sequence
    ] as [[UInt8]])
    func invalidUTF8(bytes: [UInt8]) {
        let error = syntaxError(bytes)
        #expect(error?.message.contains("UTF-8") == true)
        #expect(error?.line == 1 && error?.column == 2)
    }

    @Test("the error position is 1-based line and column, counted in characters")
    func errorPosition() {
        let error = syntaxError("{\n  \"a\": 1\n  \"b\": 2\n}")
        #expect(error == JSONSyntaxError(line: 3, column: 3, message: "expected ',' or '}'"))
        #expect(error?.description == "line 3, column 3: expected ',' or '}'")

        let afterAccent = syntaxError("[\"é\", @]")
        #expect(afterAccent?.line == 1)
        #expect(afterAccent?.column == 7)
        #expect(afterAccent?.message == "expected a value, found '@'")

        let inArray = syntaxError("[1\r\n 2]")
        #expect(inArray == JSONSyntaxError(line: 2, column: 2, message: "expected ',' or ']'"))
    }

    @Test("syntax errors name the problem", arguments: [
        ("[1,2,]", 1, 6, "trailing comma is not allowed"),
        ("{\"a\":1,}", 1, 8, "trailing comma is not allowed"),
        ("// note\n{}", 1, 1, "comments are not allowed in JSON"),
        ("{'a':1}", 1, 2, "keys must use double quotes"),
        ("['a']", 1, 2, "strings must use double quotes"),
        ("", 1, 1, "expected a JSON value, found the end of the input"),
        ("  \n ", 2, 2, "expected a JSON value, found the end of the input"),
        ("1 2", 1, 3, "unexpected '2' after the JSON value"),
        ("01", 1, 2, "numbers cannot have leading zeros"),
        ("-", 1, 2, "expected a digit after '-'"),
        ("1.", 1, 3, "expected a digit after '.'"),
        ("1e+", 1, 4, "expected a digit in the exponent"),
        (".5", 1, 1, "expected a value, found '.'"),
        ("+1", 1, 1, "expected a value, found '+'"),
        ("True", 1, 1, "unexpected word \"True\"; JSON's literals are true, false and null"),
        ("[nul]", 1, 2, "unexpected word \"nul\"; JSON's literals are true, false and null"),
        ("{\"a\" 1}", 1, 6, "expected ':'"),
        ("{\"a\":1", 1, 7, "unexpected end of input; expected ',' or '}'"),
        ("[1,", 1, 4, "unexpected end of input; expected a value"),
        ("{1:2}", 1, 2, "expected a key in double quotes, found '1'"),
        ("\"abc", 1, 1, "unterminated string"),
        ("[\"a\nb\"]", 1, 4, "unescaped line break in a string; write it as \\n or \\r"),
        ("\"a\tb\"", 1, 3, "unescaped tab in a string; write it as \\t"),
        ("\"\\x\"", 1, 2, "invalid escape \\x"),
    ] as [(String, Int, Int, String)])
    func syntaxErrors(text: String, line: Int, column: Int, message: String) {
        #expect(syntaxError(text) == JSONSyntaxError(line: line, column: column, message: message))
    }

    @Test("duplicate keys are rejected, naming the key and pointing at it")
    func duplicateKeys() {
        #expect(syntaxError("{\"a\":1,\n \"b\":{\"a\":2}, \"a\":3}")
            == JSONSyntaxError(line: 2, column: 15, message: "duplicate key \"a\""))
        // Large objects use a set; the check must still hold.
        let members = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(syntaxError("{\(members),\"k7\":0}")?.message == "duplicate key \"k7\"")
        // Keys compare by code units: precomposed and decomposed é are different keys.
        #expect(syntaxError("{\"\\u00e9\":1,\"e\\u0301\":2}") == nil)
        // The same key in different objects is fine.
        #expect(syntaxError("[{\"a\":1},{\"a\":2}]") == nil)
    }

    @Test("nesting is limited to 512 levels")
    func depthLimit() throws {
        let deepest = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        let parsed = try JSONValue.parse(deepest)
        #expect(parsed.serialized() == deepest)

        let tooDeep = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        #expect(syntaxError(tooDeep)
            == JSONSyntaxError(line: 1, column: 513, message: "nesting is deeper than 512 levels"))

        let objects = String(repeating: "{\"a\":", count: 513) + "1" + String(repeating: "}", count: 513)
        #expect(syntaxError(objects)?.message == "nesting is deeper than 512 levels")
    }

    @Test("whitespace around the value and a leading byte order mark are accepted")
    func whitespaceAndBOM() throws {
        #expect(try JSONValue.parse(" \t\r\n true \n") == .bool(true))
        #expect(try JSONValue.parse([0xEF, 0xBB, 0xBF] + Array("[null]".utf8)) == .array([.null]))
        #expect(syntaxError([0xEF, 0xBB, 0xBF] + Array("[x]".utf8))?.column == 2)
    }

    @Test("parse(String) and parse(bytes) agree")
    func stringAndBytes() throws {
        let text = "{\"a\":[1,2.5,\"é\"]}"
        #expect(try JSONValue.parse(text) == JSONValue.parse(Array(text.utf8)))
    }

    @Test("serialize(into:) appends to what is already there")
    func serializeAppends() {
        var bytes = Array("x=".utf8)
        JSONValue.object([(key: "k", value: .array([.int(1), .string("v")]))]).serialize(into: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == #"x={"k":[1,"v"]}"#)
    }

    @Test("pretty form indents by two spaces")
    func pretty() throws {
        let value = try JSONValue.parse(#"{"a":1,"b":[true,{"c":"d"}],"e":{},"f":[]}"#)
        let expected = """
            {
              "a": 1,
              "b": [
                true,
                {
                  "c": "d"
                }
              ],
              "e": {},
              "f": []
            }
            """
        #expect(value.prettySerialized() == expected)
        #expect(try JSONValue.parse(value.prettySerialized()) == value)
        #expect(JSONValue.string("x").prettySerialized() == "\"x\"")
    }

    @Test("int and double builders")
    func builders() {
        #expect(numberText(.int(42)) == "42")
        #expect(numberText(.int(-7)) == "-7")
        #expect(numberText(.int(Int.min)) == "-9223372036854775808")
        #expect(numberText(.double(0.1)) == "0.1")
        #expect(numberText(.double(1)) == "1")
        #expect(numberText(.double(-2.5)) == "-2.5")
        #expect(numberText(.double(1e-7)) == "1e-7")
        #expect(numberText(.double(1e21)) == "1e21")
        #expect(numberText(.double(1.5e300)) == "1.5e300")
        #expect(numberText(.double(-0.0)) == "-0")
        #expect(JSONValue.double(.nan) == .null)
        #expect(JSONValue.double(.infinity) == .null)
        #expect(JSONValue.double(-.infinity) == .null)
    }

    @Test("double text parses as JSON and reads back as the same Double")
    func doubleRoundTrip() throws {
        // A fixed xorshift sequence: wide coverage of bit patterns, same samples on every run.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let random: [Double] = (0..<300).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            let sample = Double(bitPattern: state)
            return sample.isFinite ? sample : 1.5
        }
        let samples: [Double] = [0.1 + 0.2, 1 / 3, .pi, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 2e-5] + random
        for sample in samples {
            let value = JSONValue.double(sample)
            guard let text = numberText(value) else {
                Issue.record("no number for \(sample)")
                continue
            }
            #expect(Double(text) == sample, "\(text)")
            #expect(try JSONValue.parse(text).serialized() == text)
        }
    }
}
