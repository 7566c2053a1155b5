import Foundation
import Testing
@testable import FaultlineCore

/// The HAR 1.2 export of journal entries: the structure the spec requires, bodies that round-trip (text as is,
/// binary as base64), and entries HAR has no natural shape for (malformed, nothing sent, still pending).
@Suite struct HARTests {
    /// 2026-11-29T16:02:11.104Z
    static let wall = 1_795_968_131.104

    static func entry(
        _ method: String, _ target: String, version: HTTPVersion = .http1_1, headers: [(String, String)] = [],
        body: [UInt8] = [], status: Int? = 200, outcome: ExchangeOutcome = .completed, durationMs: UInt64? = 12
    ) -> JournalEntry {
        let head = HTTPRequestHead(
            method: method, target: target, version: version,
            headers: HTTPHeaders(headers.map { (name: $0.0, value: $0.1) }))
        var entry = JournalEntry(
            sequence: 7, receivedAtWall: wall, receivedAtMonotonicNanos: 5_000_000_000, connectionID: 3,
            indexOnConnection: 1, clientAddress: "127.0.0.1:50112", head: head, body: body, bodySize: body.count)
        entry.status = status
        entry.outcome = outcome
        entry.bytesWritten = status == nil ? 0 : 150
        entry.finishedAtMonotonicNanos = durationMs.map { 5_000_000_000 + $0 * 1_000_000 }
        entry.route = .route("echo")
        entry.scenario = "exports"
        entry.step = 0
        entry.notes = [.remark("auth: ok")]
        return entry
    }

    static func har(_ entries: [JournalEntry]) throws -> JSONValue {
        // Through text and back, as a tool reading the file would see it.
        try JSONValue.parse(HAR.document(entries, creatorVersion: "9.9.9").serialized())
    }

    /// The document's `log.entries`.
    static func entries(_ entries: [JournalEntry]) throws -> [JSONValue] {
        let document = try har(entries)
        return try #require(array(document["log"]?["entries"]))
    }

    static func string(_ value: JSONValue?) -> String? {
        if case .string(let text)? = value { return text }
        return nil
    }

    static func number(_ value: JSONValue?) -> Double? {
        if case .number(let text)? = value { return Double(text) }
        return nil
    }

    static func array(_ value: JSONValue?) -> [JSONValue]? {
        if case .array(let items)? = value { return items }
        return nil
    }

    /// The members HAR 1.2 requires on an entry and its objects, with their JSON types.
    static func expectValidHAREntry(_ entry: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) {
        func has(_ object: JSONValue?, _ fields: [String: String], _ where_: String) {
            for (name, type) in fields {
                let value = object?[name]
                let ok: Bool
                switch (type, value) {
                case ("string", .string?), ("number", .number?), ("array", .array?), ("object", .object?): ok = true
                default: ok = false
                }
                #expect(ok, "\(where_).\(name) should be a \(type), is \(String(describing: value))", sourceLocation: sourceLocation)
            }
        }
        has(entry, ["startedDateTime": "string", "time": "number", "request": "object", "response": "object",
                    "cache": "object", "timings": "object"], "entry")
        has(entry["request"], ["method": "string", "url": "string", "httpVersion": "string", "cookies": "array",
                               "headers": "array", "queryString": "array", "headersSize": "number",
                               "bodySize": "number"], "request")
        has(entry["response"], ["status": "number", "statusText": "string", "httpVersion": "string",
                                "cookies": "array", "headers": "array", "content": "object", "redirectURL": "string",
                                "headersSize": "number", "bodySize": "number"], "response")
        has(entry["response"]?["content"], ["size": "number", "mimeType": "string"], "content")
        has(entry["timings"], ["send": "number", "wait": "number", "receive": "number"], "timings")
        if let postData = entry["request"]?["postData"] {
            has(postData, ["mimeType": "string", "text": "string"], "postData")
        }
        // `time` is the sum of the timings that are not -1 (HAR 1.2 "timings"); send, wait, receive >= 0.
        let timings = ["blocked", "dns", "connect", "send", "wait", "receive"].compactMap { number(entry["timings"]?[$0]) }
        for name in ["send", "wait", "receive"] {
            #expect((number(entry["timings"]?[name]) ?? -1) >= 0, "timings.\(name) must not be negative", sourceLocation: sourceLocation)
        }
        let sum = timings.filter { $0 != -1 }.reduce(0, +)
        #expect(abs(sum - (number(entry["time"]) ?? -1)) < 0.0005, sourceLocation: sourceLocation)
        // Custom fields start with an underscore; every other member is one HAR 1.2 defines.
        let standard: Set = ["pageref", "startedDateTime", "time", "request", "response", "cache", "timings",
                             "serverIPAddress", "connection", "comment"]
        if case .object(let members) = entry {
            for member in members {
                #expect(member.key.hasPrefix("_") || standard.contains(member.key), "\(member.key)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test func documentHasTheLogStructureOfHAR12() throws {
        let har = try Self.har([Self.entry("GET", "/v1/products/42", headers: [("Host", "127.0.0.1:8080")])])
        let log = har["log"]
        #expect(Self.string(log?["version"]) == "1.2")
        #expect(Self.string(log?["creator"]?["name"]) == "Faultline")
        #expect(Self.string(log?["creator"]?["version"]) == "9.9.9")
        #expect(Self.array(log?["pages"])?.isEmpty == true)
        let entries = try #require(Self.array(log?["entries"]))
        #expect(entries.count == 1)
        Self.expectValidHAREntry(entries[0])
        // An empty journal is still a valid document.
        #expect(try Self.entries([]).isEmpty)
    }

    @Test func requestFieldsComeFromTheJournal() throws {
        let entry = try Self.entries([Self.entry(
            "GET", "/search?q=a%20b&tag=x&tag=y+z", headers: [("Host", "stub.test:8080"), ("Accept", "*/*")])])[0]
        Self.expectValidHAREntry(entry)
        #expect(Self.string(entry["startedDateTime"]) == "2026-11-29T16:02:11.104Z")
        #expect(Self.number(entry["time"]) == 12)
        #expect(Self.number(entry["timings"]?["wait"]) == 12)
        let request = try #require(entry["request"])
        #expect(Self.string(request["method"]) == "GET")
        #expect(Self.string(request["url"]) == "http://stub.test:8080/search?q=a%20b&tag=x&tag=y+z")
        #expect(Self.string(request["httpVersion"]) == "HTTP/1.1")
        #expect(request["headers"] == .array([
            .object([("name", .string("Host")), ("value", .string("stub.test:8080"))]),
            .object([("name", .string("Accept")), ("value", .string("*/*"))]),
        ]))
        #expect(request["queryString"] == .array([
            .object([("name", .string("q")), ("value", .string("a b"))]),
            .object([("name", .string("tag")), ("value", .string("x"))]),
            .object([("name", .string("tag")), ("value", .string("y z"))]),
        ]))
        #expect(request["postData"] == nil, "no body, no postData")
        #expect(Self.number(request["bodySize"]) == 0)
        let response = try #require(entry["response"])
        #expect(Self.number(response["status"]) == 200)
        #expect(Self.string(response["statusText"]) == "OK")
        #expect(Self.number(response["content"]?["size"]) == 150)
        #expect(Self.string(response["comment"])?.contains("no response headers") == true)
        // Faultline's own fields.
        #expect(Self.number(entry["_sequence"]) == 7)
        #expect(Self.string(entry["_route"]) == "echo")
        #expect(entry["_fault"] == .null)
        #expect(Self.string(entry["_outcome"]) == "completed")
        #expect(entry["_connection"]?["id"] == .int(3))
        #expect(entry["_connection"]?["reused"] == .bool(true))
        #expect(entry["_notes"] == .array([.string("auth: ok")]))
        #expect(entry["_malformed"] == .bool(false))
    }

    @Test func textBodyIsPostDataText() throws {
        let body = Array(#"{"name":"Zoë"}"#.utf8)
        let entry = try Self.entries([Self.entry(
            "POST", "/orders", headers: [("Host", "h"), ("Content-Type", "application/json")], body: body)])[0]
        Self.expectValidHAREntry(entry)
        let postData = try #require(entry["request"]?["postData"])
        #expect(Self.string(postData["mimeType"]) == "application/json")
        #expect(Self.string(postData["text"]) == #"{"name":"Zoë"}"#)
        #expect(postData["encoding"] == nil)
        #expect(Self.number(entry["request"]?["bodySize"]) == Double(body.count))
    }

    @Test func binaryBodyIsBase64AndRoundTrips() throws {
        let body: [UInt8] = [0x00, 0xFF, 0xFE, 0x80, 0x41, 0x0A, 0xC3]
        let withType = Self.entry("PUT", "/blob", headers: [("Host", "h"), ("Content-Type", "image/png")], body: body)
        let withoutType = Self.entry("PUT", "/blob", headers: [("Host", "h")], body: body)
        let entries = try Self.entries([withType, withoutType])
        for entry in entries { Self.expectValidHAREntry(entry) }
        let postData = try #require(entries[0]["request"]?["postData"])
        #expect(Self.string(postData["encoding"]) == "base64")
        #expect(Self.string(postData["mimeType"]) == "image/png")
        let text = try #require(Self.string(postData["text"]))
        let decoded = try #require(Data(base64Encoded: text))
        #expect(Array(decoded) == body)
        #expect(Self.string(entries[1]["request"]?["postData"]?["mimeType"]) == "application/octet-stream")
    }

    @Test func truncatedBodySaysSo() throws {
        var entry = Self.entry("POST", "/big", headers: [("Host", "h")], body: Array("abc".utf8))
        entry.bodySize = 100_000
        let har = try Self.entries([entry])[0]
        #expect(Self.number(har["request"]?["bodySize"]) == 100_000)
        #expect(Self.string(har["request"]?["postData"]?["comment"])?.contains("first 3 of 100000 bytes") == true)
    }

    @Test func malformedRequestWithoutAHeadGetsAPlaceholderURL() throws {
        var entry = JournalEntry(
            sequence: 9, receivedAtWall: Self.wall, receivedAtMonotonicNanos: 1_000, connectionID: 4,
            indexOnConnection: 0, clientAddress: "127.0.0.1:1", head: nil, rawRequestLine: "GARBAGE\u{1}",
            malformed: "bad request line")
        entry.status = 400
        entry.bytesWritten = 120
        entry.outcome = .completed
        entry.finishedAtMonotonicNanos = 2_001_000
        let har = try Self.entries([entry])[0]
        Self.expectValidHAREntry(har)
        #expect(Self.string(har["request"]?["method"]) == "")
        #expect(Self.string(har["request"]?["url"]) == "http://invalid/")
        #expect(Self.string(har["_requestLine"]) == "GARBAGE\u{1}")
        #expect(har["_malformed"] == .bool(true))
        #expect(Self.string(har["_error"]) == "bad request line")
        #expect(Self.number(har["response"]?["status"]) == 400)
        #expect(Self.string(har["response"]?["statusText"]) == "Bad Request")
        #expect(Self.number(har["time"]) == 2)
    }

    @Test func nothingSentIsStatusZeroAndPendingHasNoDuration() throws {
        var reset = Self.entry("GET", "/boom", headers: [("Host", "h")], status: nil, outcome: .resetSent)
        reset.fault = "reset"
        let pending = Self.entry("GET", "/slow", headers: [("Host", "h")], outcome: .pending, durationMs: nil)
        let entries = try Self.entries([reset, pending])
        for entry in entries { Self.expectValidHAREntry(entry) }
        #expect(Self.number(entries[0]["response"]?["status"]) == 0)
        #expect(Self.string(entries[0]["response"]?["statusText"]) == "")
        #expect(Self.number(entries[0]["response"]?["content"]?["size"]) == 0)
        #expect(Self.string(entries[0]["_fault"]) == "reset")
        #expect(Self.string(entries[0]["_outcome"]) == "reset-sent")
        #expect(Self.number(entries[1]["time"]) == 0)
        #expect(Self.string(entries[1]["_outcome"]) == "pending")
    }

    @Test func urlUsesTheHostHeaderOrLoopback() {
        func url(_ target: String, _ headers: [(String, String)]) -> String {
            HAR.url(HTTPRequestHead(
                method: "GET", target: target, version: .http1_0,
                headers: HTTPHeaders(headers.map { (name: $0.0, value: $0.1) })))
        }
        #expect(url("/a?b=c", []) == "http://127.0.0.1/a?b=c")
        #expect(url("/a", [("host", " example.test ")]) == "http://example.test/a")
        #expect(url("http://proxy.test/x", [("Host", "other")]) == "http://proxy.test/x")
        #expect(url("*", [("Host", "h:1")]) == "http://h:1/")
    }
}
