import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// HTTP/1.1 behaviour over real loopback sockets: keep-alive, pipelining, HTTP/1.0, 100-continue,
/// chunked bodies, half-close, and every bad-input answer (RFC 9112) while other clients keep being served.
@Suite struct HTTPConformanceTests {
    static let scenario = """
        {
          "name": "conformance",
          "routes": [
            { "id": "echo-id", "match": { "path": "/items/{id}" },
              "responses": [ { "text": "item {{path.id}}" } ] },
            { "id": "upload", "match": { "method": "POST", "path": "/upload" },
              "responses": [ { "status": 201, "text": "stored" } ] },
            { "id": "slow", "match": { "path": "/slow" },
              "responses": [ { "delayMs": 300, "text": "slow" } ] }
          ]
        }
        """

    static func server(headerTimeout: Int = 10_000, maxBody: Int = 1024) throws -> FaultlineServer {
        try TestSupport.server([scenario]) {
            $0.headerTimeoutMilliseconds = headerTimeout
            $0.parserLimits.maxBodyBytes = maxBody
        }
    }

    @Test func keepAliveReusesTheConnectionAndTheJournalShowsIt() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        for id in 1...3 {
            try client.send("GET /items/\(id) HTTP/1.1\r\nHost: x\r\n\r\n")
            let responses = client.readResponses(1)
            #expect(responses.first?.body == "item \(id)")
        }
        let entries = await server.requests()
        #expect(entries.count == 3)
        #expect(Set(entries.map(\.connectionID)).count == 1)
        #expect(entries.map(\.connectionReused) == [false, true, true])
        #expect(entries.map(\.indexOnConnection) == [0, 1, 2])
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        // The slow one first: the fast ones behind it must wait their turn.
        try client.send(
            "GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /items/a HTTP/1.1\r\nHost: x\r\n\r\n"
                + "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /items/b HTTP/1.1\r\nHost: x\r\n\r\n")
        let responses = client.readResponses(4)
        #expect(responses.map(\.body) == ["slow", "item a", "stored", "item b"])
        #expect(responses.map(\.status) == [200, 200, 201, 200])
        let entries = await server.requests()
        #expect(entries.map { $0.path } == ["/slow", "/items/a", "/upload", "/items/b"])
        #expect(entries[2].body == Array("abc".utf8))
    }

    @Test func http10ClosesUnlessKeepAliveIsAsked() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        let plain = try RawClient(port: server.port)
        try plain.send("GET /items/1 HTTP/1.0\r\n\r\n")
        let closed = plain.readUntilClose()
        #expect(closed.closed)
        #expect(closed.text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(closed.text.contains("Connection: close\r\n"))

        let keep = try RawClient(port: server.port)
        try keep.send("GET /items/1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let first = keep.readResponses(1)
        #expect(first.first?.header("Connection") == "keep-alive")
        try keep.send("GET /items/2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        #expect(keep.readResponses(1).first?.body == "item 2")
    }

    @Test func expectContinueIsAnsweredBeforeTheBody() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        let interim = client.read(seconds: 5) { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
        #expect(interim.text == "HTTP/1.1 100 Continue\r\n\r\n")
        try client.send("hello")
        let final = client.readResponses(1)
        #expect(final.first?.status == 201)
        #expect(await server.requests().first?.body == Array("hello".utf8))
    }

    @Test func chunkedRequestBodiesAreDecoded() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n")
        try client.send("5;ext=1\r\npedia\r\n0\r\nX-Trailer: t\r\n\r\n")
        #expect(client.readResponses(1).first?.status == 201)
        let entry = try #require(await server.requests().first)
        #expect(entry.body == Array("Wikipedia".utf8))
        #expect(entry.bodySize == 9)
    }

    @Test func aClientThatHalfClosesStillGetsItsResponse() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        client.shutdownWrite()
        let result = client.readUntilClose()
        #expect(result.closed)
        #expect(RawResponse.parseAll(result.bytes).first?.body == "slow")
        let entry = try #require(await server.requests().first)
        #expect(entry.outcome == .completed)
    }

    /// Every bad-input case gets its status, is journaled as malformed, and a parallel keep-alive client
    /// keeps being served throughout.
    @Test(arguments: [
        ("GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n", 400),
        ("GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        ("GET / HTTP/1.1\r\nHost: x\r\n" + String(repeating: "X-Fill: " + String(repeating: "y", count: 1000) + "\r\n", count: 70) + "\r\n", 431),
        ("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n", 413),
        ("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        ("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        ("GET / HTTP/1.1\r\n\r\n", 400),
    ])
    func badInputGetsTheRightStatus(request: String, status: Int) async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        let bystander = try RawClient(port: server.port)
        try bystander.send("GET /items/before HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(bystander.readResponses(1).first?.body == "item before")

        let bad = try RawClient(port: server.port)
        try bad.send(request)
        let result = bad.readUntilClose()
        #expect(result.closed, "the server closes after a bad request")
        let response = try #require(RawResponse.parseAll(result.bytes).first)
        #expect(response.status == status)
        #expect(response.header("Connection") == "close")

        try bystander.send("GET /items/after HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(bystander.readResponses(1).first?.body == "item after")
        let malformed = await server.requests(JournalFilter(malformed: true))
        #expect(malformed.count == 1)
        #expect(malformed.first?.status == status)
        #expect(malformed.first?.malformed?.isEmpty == false)
        #expect(await server.requests(JournalFilter(malformed: false)).count == 2)
    }

    @Test func slowHeadersGet408() async throws {
        let server = try Self.server(headerTimeout: 200)
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send("GET /items/1 HTTP/1.1\r\nHost: x\r\n")
        let result = client.readUntilClose(seconds: 5)
        #expect(result.closed)
        #expect(RawResponse.parseAll(result.bytes).first?.status == 408)
        let entry = try #require(await server.requests().first)
        #expect(entry.status == 408)
        #expect(entry.requestLine.hasPrefix("GET /items/1"))
    }

    @Test func aRequestCutShortIsStillJournaled() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-some")
        client.shutdownWrite()
        #expect(client.readUntilClose().closed)
        let entries = try TestSupport.journal(server)
        #expect(entries.count == 1)
        #expect(entries.first?["malformed"] as? Bool == true)
        #expect((entries.first?["requestLine"] as? String)?.hasPrefix("POST /upload") == true)
    }

    @Test func delaysAreTimersNotSleeps() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        // 40 concurrent 300 ms responses on one loop thread: serialized they would take 12 s.
        let clients = try (0..<40).map { _ in try RawClient(port: server.port) }
        let start = Date()
        for client in clients { try client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n") }
        for client in clients { #expect(client.readResponses(1, seconds: 10).first?.body == "slow") }
        let elapsed = Date().timeIntervalSince(start)
        #expect(elapsed >= 0.3)
        #expect(elapsed < 3, "took \(elapsed) s")
    }
}
