import FaultlineCore
import Testing

// MARK: - Helpers

/// The UTF-8 bytes of `text`.
private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Appends each piece in turn and drains the parser after every append.
private func drain(_ parser: inout HTTPRequestParser) -> [HTTPParseEvent] {
    var events: [HTTPParseEvent] = []
    while let event = parser.next() { events.append(event) }
    return events
}

/// Every event the pieces produce, fed one after another.
private func events(
    _ pieces: [[UInt8]], limits: HTTPParserLimits = HTTPParserLimits()
) -> [HTTPParseEvent] {
    var parser = HTTPRequestParser(limits: limits)
    var events: [HTTPParseEvent] = []
    for piece in pieces {
        parser.append(piece)
        events += drain(&parser)
    }
    return events
}

/// Every event `text` produces in one append.
private func events(_ text: String, limits: HTTPParserLimits = HTTPParserLimits()) -> [HTTPParseEvent] {
    events([bytes(text)], limits: limits)
}

/// The complete requests among `events`.
private func requests(_ events: [HTTPParseEvent]) -> [HTTPRequest] {
    events.compactMap { if case .request(let request) = $0 { request } else { nil } }
}

/// The only failure among `events`, required to be the last event.
private func failure(_ events: [HTTPParseEvent]) -> HTTPParseError? {
    guard case .failure(let error)? = events.last else { return nil }
    return error
}

/// A head with the given parts.
private func makeHead(
    _ method: String, _ target: String, _ fields: [(String, String)], version: HTTPVersion = .http1_1
) -> HTTPRequestHead {
    HTTPRequestHead(
        method: method, target: target, version: version,
        headers: HTTPHeaders(fields.map { (name: $0.0, value: $0.1) })
    )
}

/// Splits `input` into pieces whose sizes cycle through `sizes`.
private func split(_ input: [UInt8], sizes: [Int]) -> [[UInt8]] {
    var pieces: [[UInt8]] = []
    var offset = 0
    var turn = 0
    while offset < input.count {
        let size = min(sizes[turn % sizes.count], input.count - offset)
        pieces.append(Array(input[offset ..< offset + size]))
        offset += size
        turn += 1
    }
    return pieces
}


// MARK: - Well-formed requests

@Test func simpleGet() {
    let result = events("GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n")
    let head = makeHead("GET", "/index.html", [("Host", "example.com")])
    // No body and no Expect: nothing to announce before the request.
    #expect(result == [.request(HTTPRequest(head: head))])
    let request = requests(result).first
    #expect(request?.method == "GET")
    #expect(request?.target == "/index.html")
    #expect(request?.head.version == .http1_1)
    #expect(request?.body == [])
}

@Test func headerOrderSpellingAndValuesArePreserved() throws {
    let text = "PUT /x HTTP/1.1\r\nX-Zeta: 1\r\nhOsT:   example.com  \r\nx-alpha:\tv a l\t\r\n"
        + "X-Zeta: 2\r\nEmpty:\r\nContent-Length: 0\r\n\r\n"
    let request = try #require(requests(events(text)).first)
    let fields = request.headers.fields
    #expect(fields.map(\.name) == ["X-Zeta", "hOsT", "x-alpha", "X-Zeta", "Empty", "Content-Length"])
    #expect(fields.map(\.value) == ["1", "example.com", "v a l", "2", "", "0"])
    #expect(request.headers["host"] == "example.com")
    #expect(request.headers["X-ALPHA"] == "v a l")
    #expect(request.headers.values("x-zeta") == ["1", "2"])
}

@Test func pathAndQueryAccessors() throws {
    let text = "GET /a/b%20c?x=1&y=2 HTTP/1.1\r\nHost: h\r\n\r\n"
        + "GET http://example.com:8080/p/q?z HTTP/1.1\r\nHost: example.com:8080\r\n\r\n"
        + "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"
    let all = requests(events(text))
    try #require(all.count == 3)
    #expect(all[0].path == "/a/b%20c")
    #expect(all[0].query == "x=1&y=2")
    #expect(all[1].target == "http://example.com:8080/p/q?z")
    #expect(all[1].path == "/p/q")
    #expect(all[1].query == "z")
    #expect(all[2].method == "OPTIONS")
    #expect(all[2].target == "*")
    #expect(all[2].query == "")
}

@Test func contentLengthBody() throws {
    let result = events("POST /submit HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world")
    let head = makeHead("POST", "/submit", [("Host", "h"), ("Content-Length", "11")])
    #expect(result == [.head(head), .request(HTTPRequest(head: head, body: bytes("hello world")))])
}

@Test func equalContentLengthsAreAccepted() {
    let list = requests(events("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3 , 3\r\n\r\nabc"))
    #expect(list.map(\.body) == [bytes("abc")])
    let repeated = requests(events("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc"))
    #expect(repeated.map(\.body) == [bytes("abc")])
}

@Test func zeroLengthBodyComesAsTheRequestAlone() {
    let result = events("POST /empty HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
    let head = makeHead("POST", "/empty", [("Host", "h"), ("Content-Length", "0")])
    #expect(result == [.request(HTTPRequest(head: head))])
}

@Test func expectWithoutABodyStillAnnouncesTheHead() {
    // The server decides about 100 Continue on the head; the parser announces it whenever Expect came.
    let result = events("POST /empty HTTP/1.1\r\nHost: h\r\nexpect: 100-continue\r\nContent-Length: 0\r\n\r\n")
    let head = makeHead("POST", "/empty", [("Host", "h"), ("expect", "100-continue"), ("Content-Length", "0")])
    #expect(result == [.head(head), .request(HTTPRequest(head: head))])
    let chunked = events("POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    guard case .head? = chunked.first else {
        Issue.record("a chunked request announces its head: \(chunked)")
        return
    }
    #expect(requests(chunked).count == 1)
}

@Test func byteAtATimeMatchesOneAppend() {
    let text = "\r\nPOST /upload?id=7 HTTP/1.1\r\nHost: h\r\nX-Multi: a, b\r\nContent-Length: 10\r\n\r\n0123456789"
        + "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        + "4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\n"
    let whole = events(text)
    let single = events(bytes(text).map { [$0] })
    #expect(requests(whole).count == 2)
    #expect(single == whole)
    #expect(requests(single).map(\.body) == [bytes("0123456789"), bytes("Wikipedia")])
}

@Test func pipelinedRequestsComeOutInOrder() {
    let text = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"
        + "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody"
        + "DELETE /3 HTTP/1.1\r\nHost: h\r\n\r\n"
    var parser = HTTPRequestParser()
    parser.append(bytes(text))
    let result = drain(&parser)
    #expect(requests(result).map(\.target) == ["/1", "/2", "/3"])
    #expect(requests(result).map(\.method) == ["GET", "POST", "DELETE"])
    #expect(requests(result).map(\.body) == [[], bytes("body"), []])
    // Only the request with a body announces its head, just before it.
    let kinds = result.map { event -> String in
        switch event {
        case .head(let head): "head \(head.target)"
        case .request(let request): "request \(request.target)"
        case .failure: "failure"
        }
    }
    #expect(kinds == ["request /1", "head /2", "request /2", "request /3"])
    #expect(parser.bufferedByteCount == 0)
    #expect(!parser.hasPartialRequest)
}

/// A connection's heads reuse the previous head's fields where they repeat it; every head must still come out as
/// exactly its own lines, however it differs: in the middle, at the end, fewer lines, more, none, obs-text.
@Test func repeatedHeadsOnOneConnectionKeepTheirOwnFields() throws {
    let heads: [(request: String, fields: [(String, String)])] = [
        ("GET /1 HTTP/1.1", [("Host", "h"), ("Accept", "*/*"), ("X-Id", "1")]),
        ("GET /2 HTTP/1.1", [("Host", "h"), ("Accept", "*/*"), ("X-Id", "1")]),
        ("GET /3 HTTP/1.1", [("Host", "h"), ("Accept", "*/*"), ("X-Id", "1")]),
        ("GET /4 HTTP/1.1", [("Host", "h"), ("Accept", "text/html"), ("X-Id", "1")]),
        ("GET /5 HTTP/1.1", [("Host", "h"), ("Accept", "text/html"), ("X-Id", "2")]),
        ("GET /6 HTTP/1.1", [("Host", "h"), ("Accept", "text/html")]),
        ("GET /7 HTTP/1.1", [("Host", "h")]),
        ("GET /8 HTTP/1.1", [("Host", "h"), ("Accept", "text/html"), ("X-More", "m")]),
        ("GET /9 HTTP/1.0", []),
        ("GET /10 HTTP/1.1", [("Host", "h"), ("Accept", "text/html"), ("X-More", "m")]),
        ("GET /11 HTTP/1.1", [("host", "h"), ("Accept", "text/html"), ("X-More", "m")]),
        ("GET /12 HTTP/1.1", [("Host", "h"), ("X-Latin", "caf\u{E9}")]),
        ("GET /13 HTTP/1.1", [("Host", "h"), ("X-Latin", "caf\u{E9}")]),
    ]
    var input: [UInt8] = []
    for head in heads {
        input += bytes(head.request + "\r\n")
        for (name, value) in head.fields {
            input += bytes(name + ": ")
            // Values are sent as ISO-8859-1 bytes: "é" is the lone byte 0xE9.
            input += value.unicodeScalars.map { UInt8($0.value) }
            input += bytes("\r\n")
        }
        input += bytes("\r\n")
    }
    // Whole, and one byte at a time: where the appends fall must not matter.
    for pieces in [[input], input.map { [$0] }] {
        let all = requests(events(pieces))
        try #require(all.count == heads.count)
        for (request, head) in zip(all, heads) {
            #expect(request.headers.fields.map(\.name) == head.fields.map(\.0), "\(head.request)")
            #expect(request.headers.fields.map(\.value) == head.fields.map(\.1), "\(head.request)")
        }
    }
}

@Test func leftoverBytesBelongToTheNextRequest() {
    var parser = HTTPRequestParser()
    parser.append(bytes("GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HT"))
    #expect(requests(drain(&parser)).map(\.target) == ["/a"])
    #expect(parser.bufferedByteCount == 9)
    #expect(parser.hasPartialRequest)
    parser.append(bytes("TP/1.1\r\nHost: h\r\n\r\n"))
    #expect(requests(drain(&parser)).map(\.target) == ["/b"])
    #expect(parser.bufferedByteCount == 0)
}

@Test func chunkedBodyWithExtensionsAndTrailersInOddSplits() throws {
    let text = "POST /chunks HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  Chunked \r\n\r\n"
        + "7;name=value;flag\r\nMozilla\r\n"
        + "9 ; quoted=\"a;b\"\r\nDeveloper\r\n"
        + "A\r\n Network!!\r\n"
        + "00000\r\nExpires: never\r\nX-Checksum: 1234\r\n\r\n"
        + "GET /after HTTP/1.1\r\nHost: h\r\n\r\n"
    let expectedBody = bytes("MozillaDeveloper Network!!")
    let whole = events(text)
    let first = try #require(requests(whole).first)
    #expect(first.body == expectedBody)
    #expect(first.headers.fields.map(\.name) == ["Host", "Transfer-Encoding"])
    #expect(!first.headers.contains("Expires"))
    #expect(requests(whole).map(\.target) == ["/chunks", "/after"])
    for sizes in [[1], [2, 3], [3, 1, 4, 1, 5], [7, 11], [13], [64]] {
        #expect(events(split(bytes(text), sizes: sizes)) == whole, "split sizes \(sizes)")
    }
}

@Test func chunkedBodyWithBareLFLineEnds() {
    let text = "POST / HTTP/1.1\nHost: h\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n"
    #expect(requests(events(text)).map(\.body) == [bytes("abc")])
}

@Test func randomSplitsOfAMixedStreamMatchOneAppend() {
    var stream: [UInt8] = []
    for index in 0 ..< 60 {
        switch index % 3 {
        case 0:
            stream += bytes("GET /get/\(index)?q=\(index) HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n")
        case 1:
            let body = (0 ..< index * 97).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            stream += bytes("POST /post/\(index) HTTP/1.1\r\nHost: h\r\nContent-Length: \(body.count)\r\n\r\n") + body
        default:
            stream += bytes("\r\nPUT /chunked/\(index) HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
            stream += bytes("\(String(index, radix: 16))\r\n") + Array(repeating: UInt8(index), count: index)
            stream += bytes("\r\n0\r\n\r\n")
        }
    }
    let whole = events([stream])
    #expect(requests(whole).count == 60)
    var generator = SeededRandom(seed: 42)
    for _ in 0 ..< 20 {
        var pieces: [[UInt8]] = []
        var offset = 0
        while offset < stream.count {
            let size = min(Int.random(in: 1 ... 700, using: &generator), stream.count - offset)
            pieces.append(Array(stream[offset ..< offset + size]))
            offset += size
        }
        #expect(events(pieces) == whole)
    }
}

@Test func largeBodiesAcrossCompaction() {
    // Bodies over 64 KiB fed in 10 KiB reads make the parser compact its buffer mid-stream.
    var stream: [UInt8] = []
    var bodies: [[UInt8]] = []
    for index in 0 ..< 4 {
        let body = (0 ..< 100_000 + index).map { UInt8(truncatingIfNeeded: $0 &+ index) }
        bodies.append(body)
        stream += bytes("POST /big/\(index) HTTP/1.1\r\nHost: h\r\nContent-Length: \(body.count)\r\n\r\n") + body
    }
    let result = events(split(stream, sizes: [10_240]))
    #expect(requests(result).map(\.body) == bodies)
    #expect(requests(result).map(\.target) == ["/big/0", "/big/1", "/big/2", "/big/3"])
}

@Test func http10WithoutHostIsAccepted() throws {
    let request = try #require(requests(events("GET /old HTTP/1.0\r\n\r\n")).first)
    #expect(request.head.version == .http1_0)
    #expect(request.headers.count == 0)
}

@Test func leadingEmptyLinesAreIgnored() {
    let result = events("\r\n\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n")
    #expect(requests(result).map(\.target) == ["/"])
    #expect(failure(result) == nil)
}

@Test func bareLFRequestIsAccepted() {
    let result = events("GET /lf HTTP/1.1\nHost: h\nX: 1\n\n")
    let head = makeHead("GET", "/lf", [("Host", "h"), ("X", "1")])
    #expect(result == [.request(HTTPRequest(head: head))])
}

@Test func obsTextValuesAreKept() throws {
    // "café" in ISO-8859-1 (0xE9 alone is not UTF-8) and in UTF-8.
    let input = bytes("GET / HTTP/1.1\r\nHost: h\r\nX-Latin: caf") + [0xE9]
        + bytes("\r\nX-Utf8: café\r\nX-Mixed: \u{00FF}") + [0xFF, 0x80] + bytes("\r\n\r\n")
    let request = try #require(requests(events([input])).first)
    #expect(request.headers["x-latin"] == "café")
    #expect(request.headers["x-utf8"] == "café")
    #expect(request.headers["x-mixed"] == "\u{00C3}\u{00BF}\u{00FF}\u{0080}")
}

@Test func expectContinueHeadComesBeforeTheBody() {
    var parser = HTTPRequestParser()
    parser.append(bytes("PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"))
    guard case .head(let head)? = parser.next() else {
        Issue.record("expected a head")
        return
    }
    #expect(head.expectsContinue)
    #expect(parser.next() == nil)
    #expect(parser.isReadingBody)
    parser.append(bytes("12345"))
    #expect(parser.next() == .request(HTTPRequest(head: head, body: bytes("12345"))))
    #expect(parser.next() == nil)
    #expect(!parser.isReadingBody)
}

// MARK: - State queries

@Test func partialRequestStateQueries() {
    var parser = HTTPRequestParser()
    #expect(!parser.hasPartialRequest)
    #expect(!parser.isReadingBody)
    #expect(parser.partialRequestLine == "")
    #expect(parser.bufferedByteCount == 0)

    parser.append(bytes("\r\n\r"))
    #expect(parser.next() == nil)
    #expect(!parser.hasPartialRequest, "empty lines are not a request")
    #expect(parser.bufferedByteCount == 1, "the CR waits for its LF")
    #expect(parser.partialRequestLine == "")

    parser.append(bytes("\nPOST /upload HT"))
    #expect(parser.next() == nil)
    #expect(parser.hasPartialRequest)
    #expect(!parser.isReadingBody)
    #expect(parser.partialRequestLine == "POST /upload HT")
    #expect(parser.bufferedByteCount == 15)

    parser.append(bytes("TP/1.1\r\nHost: h\r\nContent-"))
    #expect(parser.next() == nil)
    #expect(parser.partialRequestLine == "POST /upload HTTP/1.1")
    #expect(parser.hasPartialRequest)

    parser.append(bytes("Length: 4\r\n\r\nab"))
    guard case .head? = parser.next() else {
        Issue.record("expected a head")
        return
    }
    #expect(parser.next() == nil)
    #expect(parser.isReadingBody)
    #expect(parser.hasPartialRequest)
    #expect(parser.partialRequestLine == "POST /upload HTTP/1.1")
    #expect(parser.bufferedByteCount == 2)

    parser.append(bytes("cd"))
    guard case .request? = parser.next() else {
        Issue.record("expected a request")
        return
    }
    #expect(!parser.isReadingBody)
    #expect(!parser.hasPartialRequest)
    #expect(parser.partialRequestLine == "")
    #expect(parser.bufferedByteCount == 0)
}

@Test func partialRequestLineIsCappedAt200Bytes() {
    var parser = HTTPRequestParser()
    let target = "/" + String(repeating: "x", count: 500)
    parser.append(bytes("GET \(target)"))
    #expect(parser.next() == nil)
    #expect(parser.partialRequestLine == "GET " + String(target.prefix(196)))
    #expect(parser.partialRequestLine.utf8.count == 200)
}

@Test func chunkedStateQueriesWhileReadingBody() {
    var parser = HTTPRequestParser()
    parser.append(bytes("POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"))
    guard case .head? = parser.next() else {
        Issue.record("expected a head")
        return
    }
    #expect(parser.next() == nil)
    #expect(parser.isReadingBody)
    #expect(parser.hasPartialRequest)
    #expect(parser.partialRequestLine == "POST /c HTTP/1.1")
    parser.append(bytes("cde\r\n0\r\n\r\n"))
    #expect(requests([parser.next()].compactMap { $0 }).map(\.body) == [bytes("abcde")])
    #expect(!parser.isReadingBody)
}

// MARK: - Errors

/// One malformed input and the status it must get.
struct HTTPParserErrorCase: Sendable, CustomTestStringConvertible {
    var name: String
    var input: String
    var status: Int
    /// Whether the error must carry the parsed head.
    var hasHead: Bool = false
    var testDescription: String { name }
}

private let testCases: [HTTPParserErrorCase] = [
    HTTPParserErrorCase(name: "bad method character", input: "GE(T / HTTP/1.1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "empty method", input: " / HTTP/1.1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "extra space after method", input: "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "extra space after target", input: "GET /  HTTP/1.1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "trailing space after version", input: "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "tab as separator", input: "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "missing version", input: "GET /\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "control in target", input: "GET /a\u{1}b HTTP/1.1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "bare CR in request line", input: "GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "lowercase http name", input: "GET / http/1.1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "two-digit minor version", input: "GET / HTTP/1.10\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "version without minor", input: "GET / HTTP/1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "HTTP/2.0", input: "GET / HTTP/2.0\r\nHost: h\r\n\r\n", status: 505),
    HTTPParserErrorCase(name: "HTTP/1.2", input: "GET / HTTP/1.2\r\nHost: h\r\n\r\n", status: 505),
    HTTPParserErrorCase(name: "HTTP/0.9", input: "GET / HTTP/0.9\r\n\r\n", status: 505),
    HTTPParserErrorCase(name: "bare CR before request line", input: "\rGET / HTTP/1.1\r\nHost: h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "obs-fold", input: "GET / HTTP/1.1\r\nHost: h\r\nX: 1\r\n  2\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "tab fold", input: "GET / HTTP/1.1\r\nHost: h\r\nX: 1\r\n\t2\r\n\r\n", status: 400),
    HTTPParserErrorCase(
        name: "whitespace after request line", input: "GET / HTTP/1.1\r\n Host: h\r\n\r\n", status: 400
    ),
    HTTPParserErrorCase(name: "space before colon", input: "GET / HTTP/1.1\r\nHost : h\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "empty header name", input: "GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "missing colon", input: "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", status: 400),
    HTTPParserErrorCase(
        name: "bad header name character", input: "GET / HTTP/1.1\r\nHost: h\r\nA(b: c\r\n\r\n", status: 400
    ),
    HTTPParserErrorCase(name: "NUL in value", input: "GET / HTTP/1.1\r\nHost: h\r\nX: a\u{0}b\r\n\r\n", status: 400),
    HTTPParserErrorCase(name: "bare CR in value", input: "GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", status: 400),
    HTTPParserErrorCase(
        name: "missing Host on 1.1", input: "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "two Host fields", input: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "Content-Length and Transfer-Encoding",
        input: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "3\r\nabc\r\n0\r\n\r\n",
        status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "conflicting Content-Length fields",
        input: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", status: 400,
        hasHead: true
    ),
    HTTPParserErrorCase(
        name: "conflicting Content-Length list",
        input: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 4\r\n\r\nabcd", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "negative Content-Length",
        input: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "signed Content-Length",
        input: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\na", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "empty Content-Length",
        input: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "19-digit Content-Length",
        input: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0000000000000000001\r\n\r\na", status: 400,
        hasHead: true
    ),
    HTTPParserErrorCase(
        name: "Transfer-Encoding on HTTP/1.0",
        input: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "final coding not chunked",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "only gzip",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "gzip then chunked",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", status: 501,
        hasHead: true
    ),
    HTTPParserErrorCase(
        name: "gzip then chunked in two fields",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
        status: 501, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "bad chunk hex",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "chunk size with leading space",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "chunk size followed by junk",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5x\r\n", status: 400, hasHead: true
    ),
    HTTPParserErrorCase(
        name: "16 hex digits",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000001\r\n", status: 400,
        hasHead: true
    ),
    HTTPParserErrorCase(
        name: "missing CRLF after chunk data",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc0\r\n\r\n", status: 400,
        hasHead: true
    ),
    HTTPParserErrorCase(
        name: "CR then junk after chunk data",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\rX", status: 400,
        hasHead: true
    ),
    HTTPParserErrorCase(
        name: "bad trailer",
        input: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer: x\r\n\r\n",
        status: 400, hasHead: true
    ),
]

@Test(arguments: testCases)
func malformedRequestsAreRejected(_ testCase: HTTPParserErrorCase) throws {
    var parser = HTTPRequestParser()
    parser.append(bytes(testCase.input))
    let result = drain(&parser)
    let error = try #require(failure(result))
    #expect(error.status == testCase.status, "\(error)")
    #expect(!error.reason.isEmpty)
    #expect((error.head != nil) == testCase.hasHead)
    // Only a head may come before the failure, and only for errors found in the body.
    #expect(result.count <= 2)
    #expect(requests(result).isEmpty)
    // Nothing after a failure, even when a valid request follows.
    parser.append(bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
    #expect(parser.next() == nil)
    #expect(!parser.hasPartialRequest)
}

@Test func contentLengthAndTransferEncodingErrorCarriesHeadAndNoHeadEvent() throws {
    let text = "POST /smuggle HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
    let result = events(text)
    #expect(result.count == 1)
    let error = try #require(failure(result))
    #expect(error.status == 400)
    #expect(error.reason.contains("Content-Length"))
    #expect(error.head?.target == "/smuggle")
    #expect(error.head?.headers["transfer-encoding"] == "chunked")
    #expect(error.requestLinePrefix == "POST /smuggle HTTP/1.1")
}

@Test func headerErrorReportsTheRequestLinePrefix() throws {
    let error = try #require(failure(events("\r\nGET /p?q=1 HTTP/1.1\r\nHost : h\r\n\r\n")))
    #expect(error.status == 400)
    #expect(error.head == nil)
    #expect(error.requestLinePrefix == "GET /p?q=1 HTTP/1.1")
    #expect(error.description == "400 \(error.reason)")
}

@Test func errorPrefixIsCappedAt200Bytes() throws {
    let target = "/" + String(repeating: "y", count: 300)
    let error = try #require(failure(events("GET \(target) HTTP/3.0\r\n\r\n")))
    #expect(error.status == 505)
    #expect(error.requestLinePrefix == "GET " + String(target.prefix(196)))
}

@Test func contentLengthOverLimitIs413WithoutHead() throws {
    let limits = HTTPParserLimits(maxBodyBytes: 10)
    let accepted = events("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789", limits: limits)
    #expect(requests(accepted).map(\.body) == [bytes("0123456789")])

    let text = "POST /big HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n"
    let result = events(text, limits: limits)
    #expect(result.count == 1, "no .head before a 413")
    let error = try #require(failure(result))
    #expect(error.status == 413)
    #expect(error.head?.target == "/big")
    #expect(error.head?.expectsContinue == true)
}

@Test func chunkTotalOverLimitIs413AsSoonAsDeclared() throws {
    var parser = HTTPRequestParser(limits: HTTPParserLimits(maxBodyBytes: 10))
    parser.append(bytes("POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n"))
    guard case .head? = parser.next() else {
        Issue.record("expected a head")
        return
    }
    #expect(parser.next() == nil)
    // 6 + 5 > 10, known from the size line alone: no chunk data is sent.
    parser.append(bytes("5\r\n"))
    let error = try #require(failure([parser.next()].compactMap { $0 }))
    #expect(error.status == 413)
    #expect(error.head?.target == "/c")
    #expect(error.requestLinePrefix == "POST /c HTTP/1.1")
    #expect(parser.next() == nil)
}

@Test func chunkTotalAtLimitIsAccepted() {
    let text = "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n4\r\nghij\r\n0\r\n\r\n"
    let result = events(text, limits: HTTPParserLimits(maxBodyBytes: 10))
    #expect(requests(result).map(\.body) == [bytes("abcdefghij")])
}

@Test func requestLineOverLimitIs414AsSoonAsPassed() throws {
    let limits = HTTPParserLimits(maxRequestLineBytes: 32)
    // A 32-byte line (without CRLF) fits exactly.
    let fitting = "GET /" + String(repeating: "a", count: 18) + " HTTP/1.1"
    #expect(fitting.utf8.count == 32)
    #expect(requests(events(fitting + "\r\nHost: h\r\n\r\n", limits: limits)).count == 1)

    var parser = HTTPRequestParser(limits: limits)
    parser.append(bytes("GET /" + String(repeating: "a", count: 27)))
    #expect(parser.next() == nil, "32 bytes without a line end may still fit")
    parser.append(bytes("\r"))
    #expect(parser.next() == nil, "32 bytes and a CR may still be a 32-byte line")
    parser.append(bytes("a"))
    let error = try #require(failure([parser.next()].compactMap { $0 }))
    #expect(error.status == 414)
    #expect(error.requestLinePrefix.hasPrefix("GET /aaaa"))

    var other = HTTPRequestParser(limits: limits)
    other.append(bytes("GET /" + String(repeating: "b", count: 28)))
    #expect(failure([other.next()].compactMap { $0 })?.status == 414, "33 bytes without a line end")

    let complete = events("GET /" + String(repeating: "c", count: 19) + " HTTP/1.1\r\nHost: h\r\n\r\n", limits: limits)
    #expect(failure(complete)?.status == 414, "a complete 33-byte line")
}

@Test func tooManyLeadingEmptyLinesIs400() throws {
    var parser = HTTPRequestParser(limits: HTTPParserLimits(maxRequestLineBytes: 16))
    parser.append(bytes(String(repeating: "\r\n", count: 8)))
    #expect(parser.next() == nil, "16 bytes of empty lines are tolerated")
    parser.append(bytes("\n"))
    let error = try #require(failure([parser.next()].compactMap { $0 }))
    #expect(error.status == 400)
}

@Test func headerSectionOverLimitIs431AsSoonAsPassed() throws {
    let limits = HTTPParserLimits(maxHeaderSectionBytes: 64)
    // Exactly 64 bytes: request line, one field line, final CRLF.
    let requestLine = "GET /exactly HTTP/1.1\r\n"
    let field = "Host: " + String(repeating: "h", count: 64 - 2 - requestLine.utf8.count - 8) + "\r\n"
    #expect((requestLine + field + "\r\n").utf8.count == 64)
    #expect(requests(events(requestLine + field + "\r\n", limits: limits)).count == 1)

    var parser = HTTPRequestParser(limits: limits)
    parser.append(bytes("GET /over HTTP/1.1\r\nHost: h\r\nX-Pad: "))
    #expect(parser.next() == nil)
    #expect(parser.bufferedByteCount < 64)
    parser.append(bytes(String(repeating: "p", count: 64 - parser.bufferedByteCount)))
    #expect(parser.bufferedByteCount == 64)
    // 64 bytes and still no end of the head: the section can only end up larger.
    let error = try #require(failure([parser.next()].compactMap { $0 }))
    #expect(error.status == 431)
    #expect(error.head == nil)
    #expect(error.requestLinePrefix == "GET /over HTTP/1.1")

    let longerField = "Host: " + String(repeating: "h", count: 32) + "\r\n"
    let oneOver = events(requestLine + longerField + "\r\n", limits: limits)
    #expect(failure(oneOver)?.status == 431)
}

@Test func nothingAfterFailure() {
    var parser = HTTPRequestParser()
    parser.append(bytes("BROKEN\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"))
    guard case .failure(let error)? = parser.next() else {
        Issue.record("expected a failure")
        return
    }
    #expect(error.status == 400)
    #expect(parser.next() == nil)
    parser.append(bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
    #expect(parser.next() == nil)
    #expect(parser.next() == nil)
    #expect(!parser.hasPartialRequest)
    #expect(!parser.isReadingBody)
    #expect(parser.bufferedByteCount == 0)
    #expect(parser.partialRequestLine == "")
}

@Test func rawBufferAppendMatchesArrayAppend() {
    let input = bytes("GET /raw HTTP/1.1\r\nHost: h\r\n\r\nGET /raw2 HTTP/1.1\r\nHost: h\r\n\r\n")
    var parser = HTTPRequestParser()
    input.withUnsafeBytes { raw in
        parser.append(UnsafeRawBufferPointer(rebasing: raw[0 ..< 20]))
        parser.append(UnsafeRawBufferPointer(rebasing: raw[20...]))
    }
    #expect(drain(&parser) == events([input]))
}

// MARK: - Byte classes

/// The tchar set of RFC 9110 §5.6.2.
private let tokenBytes = Set(bytes("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))

@Test func methodAcceptsExactlyTheTokenBytes() {
    for byte in UInt8.min ... UInt8.max where byte != 0x0A && byte != 0x0D {
        let result = events([[byte] + bytes("X / HTTP/1.1\r\nHost: h\r\n\r\n")])
        if tokenBytes.contains(byte) {
            #expect(requests(result).first?.method.utf8.first == byte, "byte \(byte)")
        } else {
            #expect(failure(result)?.status == 400, "byte \(byte)")
        }
    }
}

@Test func headerNameAcceptsExactlyTheTokenBytes() {
    for byte in UInt8.min ... UInt8.max where byte != 0x0A && byte != 0x0D && byte != UInt8(ascii: ":") {
        let input = bytes("GET / HTTP/1.1\r\nHost: h\r\nA") + [byte] + bytes(": v\r\n\r\n")
        let result = events([input])
        if tokenBytes.contains(byte) {
            #expect(requests(result).first?.headers.fields.last?.name.utf8.last == byte, "byte \(byte)")
        } else {
            #expect(failure(result)?.status == 400, "byte \(byte)")
        }
    }
}

@Test func valueBytesAreCheckedAtEveryPosition() throws {
    for position in 0 ..< 20 {
        var value = Array(repeating: UInt8(ascii: "v"), count: 20)
        func parse() -> [HTTPParseEvent] {
            events([bytes("GET / HTTP/1.1\r\nHost: h\r\nX: ") + value + bytes("\r\n\r\n")])
        }
        let plain = String(repeating: "v", count: 20)
        value[position] = 0x00
        #expect(failure(parse())?.status == 400, "NUL at \(position)")
        value[position] = 0x0D
        #expect(failure(parse())?.status == 400, "CR at \(position)")
        value[position] = 0x01
        let control = plain.prefix(position) + "\u{1}" + plain.dropFirst(position + 1)
        #expect(requests(parse()).first?.headers["x"] == String(control), "0x01 at \(position)")
        value[position] = 0xE9
        let latin1 = plain.prefix(position) + "é" + plain.dropFirst(position + 1)
        #expect(requests(parse()).first?.headers["x"] == String(latin1), "0xE9 at \(position)")
    }
}

@Test func connectionTokensDecideKeepAlive() {
    func wantsKeepAlive(_ version: String, _ fields: String) -> Bool? {
        requests(events("GET / \(version)\r\nHost: h\r\n\(fields)\r\n")).first?.head.clientWantsKeepAlive
    }
    // RFC 9112 §9.3: HTTP/1.1 persists unless a Connection option says close; HTTP/1.0 only with keep-alive.
    #expect(wantsKeepAlive("HTTP/1.1", "") == true)
    #expect(wantsKeepAlive("HTTP/1.1", "Connection: close\r\n") == false)
    #expect(wantsKeepAlive("HTTP/1.1", "Connection: Upgrade ,\tCLOSE \r\n") == false)
    #expect(wantsKeepAlive("HTTP/1.1", "Connection: keep-alive\r\nconnection: Close\r\n") == false)
    #expect(wantsKeepAlive("HTTP/1.1", "Connection: closed, enclose, close-ish\r\n") == true)
    #expect(wantsKeepAlive("HTTP/1.1", "Connection: \r\n") == true)
    #expect(wantsKeepAlive("HTTP/1.1", "X-Connection: close\r\n") == true)
    #expect(wantsKeepAlive("HTTP/1.0", "") == false)
    #expect(wantsKeepAlive("HTTP/1.0", "Connection: Keep-Alive\r\n") == true)
    #expect(wantsKeepAlive("HTTP/1.0", "Connection: te, keep-alive,,\r\n") == true)
    #expect(wantsKeepAlive("HTTP/1.0", "Connection: keep-alive, close\r\n") == false)
    #expect(wantsKeepAlive("HTTP/1.0", "Connection: keep-alives\r\n") == false)
}
