@testable import FaultlineCLI
import FaultlineCore
import Foundation
import Testing
#if canImport(FoundationXML)
import FoundationXML
#endif

/// `faultline verify --junit`: the XML written for each kind of verdict, checked as text (the writer is a pure
/// function, so the bytes are fixed) and read back with an XML parser.
@Suite struct JUnitReportTests {
    static let url = "http://127.0.0.1:8080"
    /// 2026-12-01T10:00:00Z.
    static let time = 1_796_119_200.0

    static func json(_ text: String) throws -> JSONValue { try JSONValue.parse(text) }

    static func entry(_ sequence: Int, _ method: String, _ target: String, status: Int?, fault: String? = nil,
                      outcome: String = "completed", at: Double, duration: Double? = nil, connection: Int,
                      stream: Int? = nil) throws -> JSONValue {
        var response = #""status":\#(status.map(String.init) ?? "null"),"fault":\#(fault.map { "\"\($0)\"" } ?? "null"),"outcome":"\#(outcome)""#
        if let duration { response += #","durationMs":\#(duration)"# }
        return try json("""
            {"sequence":\(sequence),"kind":"request","receivedAtMonotonicMs":\(at),"connection":{"id":\(connection)},
             "method":"\(method)","target":"\(target)","path":"\(target)","stream":\(stream.map(String.init) ?? "null"),
             "response":{\(response)}}
            """)
    }

    static let report = """
        {"passed":false,"outcome":"fail","judged":3,"inconclusive":1,"requests":3,"verdicts":[
         {"scenario":"orders","rule":"noRetryOn4xx","passed":false,"outcome":"fail","explanation":"request #2 retried #1, answered 404","evidence":[1,2]},
         {"scenario":"orders","rule":"maxAttempts","passed":true,"outcome":"pass","explanation":"at most 2 attempts","evidence":[]},
         {"scenario":"tokens","rule":"maxRefreshes","passed":true,"outcome":"inconclusive","explanation":"no request was refused with 401","evidence":[]}]}
        """

    static func journal() throws -> [JSONValue] {
        [try entry(1, "GET", "/v1/orders/9", status: 404, at: 1000, duration: 1.26, connection: 1),
         try entry(2, "GET", "/v1/orders/9", status: 404, at: 1010.5, duration: 0.84, connection: 2, stream: 1)]
    }

    @Test func passFailAndInconclusiveAsTestcases() throws {
        let xml = JUnitReport.xml(report: try Self.json(Self.report), journal: try Self.journal(), server: Self.url,
                                  version: "1.2.3", timestamp: Self.time)
        #expect(xml == """
            <?xml version="1.0" encoding="UTF-8"?>
            <testsuites name="faultline" tests="3" failures="1" errors="0" skipped="1" time="0.011" timestamp="2026-12-01T10:00:00.000Z">
              <testsuite name="orders" tests="2" failures="1" errors="0" skipped="0" time="0.011" timestamp="2026-12-01T10:00:00.000Z" hostname="127.0.0.1">
                <properties>
                  <property name="faultline.server" value="http://127.0.0.1:8080"/>
                  <property name="faultline.version" value="1.2.3"/>
                </properties>
                <testcase classname="faultline.orders" name="noRetryOn4xx" time="0">
                  <failure message="request #2 retried #1, answered 404" type="verdict">#1 GET /v1/orders/9 → 404 · completed · 1.3 ms · connection 1
            #2 GET /v1/orders/9 → 404 · completed · 0.8 ms · connection 2 stream 1</failure>
                </testcase>
                <testcase classname="faultline.orders" name="maxAttempts" time="0"/>
              </testsuite>
              <testsuite name="tokens" tests="1" failures="0" errors="0" skipped="1" time="0" timestamp="2026-12-01T10:00:00.000Z" hostname="127.0.0.1">
                <properties>
                  <property name="faultline.server" value="http://127.0.0.1:8080"/>
                  <property name="faultline.version" value="1.2.3"/>
                </properties>
                <testcase classname="faultline.tokens" name="maxRefreshes" time="0">
                  <skipped message="no request was refused with 401"/>
                </testcase>
              </testsuite>
            </testsuites>

            """)
        let parsed = try ParsedXML(xml)
        #expect(parsed.elements.filter { $0.name == "testcase" }.count == 3)
    }

    @Test func strictMakesInconclusiveAFailure() throws {
        let xml = JUnitReport.xml(report: try Self.json(Self.report), journal: try Self.journal(), server: Self.url,
                                  version: "1.2.3", timestamp: Self.time, strict: true)
        #expect(xml.contains(#"<testsuites name="faultline" tests="3" failures="2" errors="0" skipped="0""#))
        #expect(xml.contains(#"<testsuite name="tokens" tests="1" failures="1" errors="0" skipped="0""#))
        #expect(xml.contains("""
                <testcase classname="faultline.tokens" name="maxRefreshes" time="0">
                  <failure message="no request was refused with 401" type="inconclusive"/>
                </testcase>
            """))
        #expect(!xml.contains("<skipped"))
    }

    @Test func escapesMarkupQuotesAndForbiddenCharacters() throws {
        let sentence = "a <b> & \"c\" 'd' \u{01}e\u{7F} \u{FFFE}\nnext\ttab ]]> done"
        let verdict = JSONValue.object([
            ("scenario", .string("s&<'\"")), ("rule", .string("r>")), ("passed", .bool(false)), ("outcome", .string("fail")),
            ("explanation", .string(sentence)), ("evidence", .array([.number("7")])),
        ])
        let odd = try JSONValue.parse(#"""
            {"sequence":7,"receivedAtMonotonicMs":5,"connection":{"id":3},"method":"GET","target":"/x?a=1&b=<2>\u0002",
             "stream":null,"response":{"status":500,"fault":null,"outcome":"completed"}}
            """#)
        let xml = JUnitReport.xml(report: .object([("verdicts", .array([verdict]))]), journal: [odd], server: Self.url,
                                  version: "v", timestamp: Self.time)
        #expect(xml.contains(#"<testsuite name="s&amp;&lt;&apos;&quot;""#))
        #expect(xml.contains(#"classname="faultline.s&amp;&lt;&apos;&quot;" name="r&gt;""#))
        #expect(xml.contains(#"message="a &lt;b&gt; &amp; &quot;c&quot; &apos;d&apos; \#u{FFFD}e\#u{FFFD} \#u{FFFD}&#10;next&#9;tab ]]&gt; done""#))
        #expect(xml.contains("#7 GET /x?a=1&amp;b=&lt;2&gt;\u{FFFD} → 500 · completed · connection 3</failure>"))
        for scalar in xml.unicodeScalars {
            #expect(scalar.value >= 0x20 || scalar == "\n", "a raw control character U+\(String(scalar.value, radix: 16))")
        }
        // A conforming parser reads the sentence back, the forbidden characters as U+FFFD (and it does refuse
        // what is not well-formed).
        #expect(throws: ParsedXML.NotWellFormed.self) { try ParsedXML("<a b=\"\u{01}\">&</a>") }
        let parsed = try ParsedXML(xml)
        let failure = try #require(parsed.elements.first { $0.name == "failure" })
        #expect(failure.attributes["message"] == "a <b> & \"c\" 'd' \u{FFFD}e\u{FFFD} \u{FFFD}\nnext\ttab ]]> done")
        #expect(failure.text == "#7 GET /x?a=1&b=<2>\u{FFFD} → 500 · completed · connection 3")
        #expect(parsed.elements.first { $0.name == "testsuite" }?.attributes["name"] == "s&<'\"")
    }

    @Test func noVerdictIsOneSkippedTestcase() throws {
        let empty = try Self.json(#"{"passed":true,"outcome":"pass","judged":0,"inconclusive":0,"requests":0,"verdicts":[]}"#)
        let xml = JUnitReport.xml(report: empty, journal: [], server: Self.url, version: "v", timestamp: Self.time)
        #expect(xml.contains(#"<testsuites name="faultline" tests="1" failures="0" errors="0" skipped="1" time="0""#))
        #expect(xml.contains(#"<testsuite name="faultline" tests="1" failures="0" errors="0" skipped="1" time="0""#))
        #expect(xml.contains("""
                <testcase classname="faultline" name="verdicts" time="0">
                  <skipped message="no rule was judged: no loaded scenario has an &quot;expect&quot; section"/>
                </testcase>
            """))
        let strict = JUnitReport.xml(report: empty, journal: [], server: Self.url, version: "v", timestamp: Self.time,
                                     strict: true, scenario: "orders")
        #expect(strict.contains(#"tests="1" failures="1" errors="0" skipped="0""#))
        #expect(strict.contains(
            #"<failure message="no rule was judged: no loaded scenario named &quot;orders&quot; has an &quot;expect&quot; section" type="inconclusive"/>"#))
        _ = try ParsedXML(strict)
    }

    @Test func evidenceLinesInShort() throws {
        let reset = try Self.entry(12, "GET", "/v1/orders", status: 503, fault: "reset", outcome: "reset", at: 0,
                                   duration: 3.1, connection: 4, stream: 1)
        #expect(JUnitReport.evidenceLine("12", reset) == "#12 GET /v1/orders → 503 fault reset · reset · 3.1 ms · connection 4 stream 1")
        let pending = try Self.entry(3, "POST", "/v1/pay?x=1", status: nil, outcome: "pending", at: 0, connection: 1)
        #expect(JUnitReport.evidenceLine("3", pending) == "#3 POST /v1/pay?x=1 → - · pending · connection 1")
        let malformed = try Self.json(#"{"sequence":4,"connection":{"id":2},"method":null,"target":null,"requestLine":"GARBAGE","response":{"status":400,"outcome":"rejected","durationMs":0.04}}"#)
        #expect(JUnitReport.evidenceLine("4", malformed) == "#4 GARBAGE → 400 · rejected · 0.0 ms · connection 2")
        #expect(JUnitReport.evidenceLine("9", nil) == "#9 is no longer in the journal (evicted or cleared)")

        // In the XML: an evidence number the journal no longer holds is a line too, and the span counts what is left.
        let report = try Self.json(#"{"verdicts":[{"scenario":"s","rule":"r","passed":false,"outcome":"fail","explanation":"e","evidence":[9,12]}]}"#)
        let xml = JUnitReport.xml(report: report, journal: [reset], server: "http://[::1]:9/", version: "v", timestamp: 0)
        #expect(xml.contains("""
            type="verdict">#9 is no longer in the journal (evicted or cleared)
            #12 GET /v1/orders → 503 fault reset · reset · 3.1 ms · connection 4 stream 1</failure>
            """))
        #expect(xml.contains(#"time="0.003" timestamp="1970-01-01T00:00:00.000Z" hostname="::1">"#))
    }
}

/// What Foundation's XML parser read: every element with its attributes and text, in document order. Throws when
/// the document is not well-formed.
final class ParsedXML: NSObject, XMLParserDelegate {
    struct Element {
        var name: String
        var attributes: [String: String]
        var text = ""
    }

    struct NotWellFormed: Error, CustomStringConvertible {
        var description: String
    }

    private(set) var elements: [Element] = []
    private var open: [Int] = []

    init(_ xml: String) throws {
        super.init()
        let parser = XMLParser(data: Data(xml.utf8))
        parser.delegate = self
        guard parser.parse() else {
            throw NotWellFormed(description: parser.parserError.map { "\($0)" } ?? "not well-formed")
        }
    }

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName: String?, attributes: [String: String] = [:]) {
        open.append(elements.count)
        elements.append(Element(name: elementName, attributes: attributes))
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        open.removeLast()
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if let index = open.last { elements[index].text += string }
    }
}
