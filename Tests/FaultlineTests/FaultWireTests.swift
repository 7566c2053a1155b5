import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Faults as the wire shows them to a raw socket: RST versus FIN, half-close, hang release, connection
/// policies and chaos reproducibility. (A thousand held connections are tested from Python, Tests/Python/
/// test_scale.py: thousands of sockets in this process made Foundation's Process.run crash while other tests
/// spawned curl.)
@Suite struct FaultWireTests {
    static func scenario(_ steps: String, extra: String = "", seed: Int = 1) -> String {
        #"{"name": "w", "seed": \#(seed)\#(extra), "routes": [ { "id": "r", "match": { "path": "/r" }, "responses": [\#(steps)] }, { "id": "ok", "match": { "path": "/ok" }, "responses": [ { "text": "ok" } ] } ] }"#
    }

    static let get = "GET /r HTTP/1.1\r\nHost: x\r\n\r\n"

    @Test func resetIsAnRSTNotAFIN() async throws {
        let server = try TestSupport.server([Self.scenario(#"{ "fault": "reset" }"#)])
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send(Self.get)
        let result = client.readUntilClose()
        #expect(result.error == ECONNRESET, "expected ECONNRESET, got closed=\(result.closed) error=\(String(describing: result.error))")
        #expect(result.bytes.isEmpty)
        let entry = try #require(await server.requests().first)
        #expect(entry.fault == "reset" && entry.outcome == .resetSent && entry.status == nil)
    }

    @Test func emptyReplyIsAFINWithNoBytes() async throws {
        let server = try TestSupport.server([Self.scenario(#"{ "fault": "empty-reply" }"#)])
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send(Self.get)
        let result = client.readUntilClose()
        #expect(result.closed && result.bytes.isEmpty && result.error == nil)
        #expect(await server.requests().first?.outcome == .closedByFault)
    }

    @Test func halfCloseAfterHeadersKeepsReadingAndJournaling() async throws {
        let server = try TestSupport.server([Self.scenario(#"{ "text": "abcdef", "fault": { "type": "half-close", "after": "headers" } }"#)])
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send(Self.get)
        let result = client.readUntilClose()
        #expect(result.closed, "FIN after the headers")
        #expect(result.text.hasPrefix("HTTP/1.1 200 OK\r\n") && result.text.hasSuffix("Content-Length: 6\r\n\r\n"))
        // Our side is still open for writing: the server reads and journals what we send after its FIN.
        try client.send("GET /ok HTTP/1.1\r\nHost: x\r\nX-After: fin\r\n\r\n")
        let waited = try TestSupport.admin(server, "requests/wait?count=2&timeoutMs=5000")
        #expect(waited["satisfied"] as? Bool == true)
        let entries = await server.requests()
        #expect(entries.first?.outcome == .halfClosed && entries.first?.fault == "half-close")
        #expect(entries.last?.head?.headers["x-after"] == "fin")
    }

    @Test func hangIsReleasedWhenTheClientCloses() async throws {
        let server = try TestSupport.server([Self.scenario(#"{ "fault": "hang" }"#)])
        defer { Task { await server.stop() } }
        var client: RawClient? = try RawClient(port: server.port)
        try client!.send(Self.get)
        let silent = client!.read(seconds: 0.3) { !$0.isEmpty }
        #expect(silent.bytes.isEmpty && !silent.closed)
        #expect(try TestSupport.admin(server, "requests/wait?count=1&timeoutMs=5000")["satisfied"] as? Bool == true)
        client = nil  // closes the socket
        let released = try TestSupport.admin(server, "requests/wait?count=1&completed=true&timeoutMs=5000")
        #expect(released["satisfied"] as? Bool == true)
        #expect(await server.requests().first?.outcome == .hangReleased)
    }

    @Test func idleKeptAliveConnectionsAreClosedAfterTheirIdleTime() async throws {
        let server = try TestSupport.server([Self.scenario(#"{ "text": "x" }"#, extra: #", "connections": { "idleCloseMs": 200 }"#)])
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        let start = Date()
        try client.send(Self.get)
        #expect(client.readResponses(1).first?.header("Connection") == nil, "kept alive, nothing announced")
        let result = client.readUntilClose(seconds: 5)
        let elapsed = Date().timeIntervalSince(start)
        #expect(result.closed)
        #expect(elapsed >= 0.19 && elapsed < 2, "\(elapsed)")
    }

    @Test func maxRequestsClosesWithoutConnectionClose() async throws {
        let server = try TestSupport.server([Self.scenario(#"{ "text": "x" }"#, extra: #", "connections": { "maxRequests": 2 }"#)])
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send(Self.get)
        #expect(client.readResponses(1).first?.body == "x")
        try client.send(Self.get)
        let result = client.readUntilClose()
        #expect(result.closed)
        let responses = RawResponse.parseAll(result.bytes)
        #expect(responses.count == 1 && responses.first?.header("Connection") == nil)
    }

    @Test func chaosJournalsAreIdenticalForTheSameSeed() async throws {
        func run(seed: Int) async throws -> [String] {
            let chaos = #", "chaos": { "rate": 0.4, "faults": ["reset", "status:503", "empty-reply"] }"#
            let json = #"{"name": "c", "seed": \#(seed), "routes": [ { "id": "r", "match": { "path": "/r" }, "responses": [ { "text": "fine" } ]\#(chaos) } ] }"#
            let server = try TestSupport.server([json])
            defer { Task { await server.stop() } }
            for _ in 0..<40 {
                let client = try RawClient(port: server.port)
                try client.send("GET /r HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                _ = client.readUntilClose(seconds: 5)
            }
            return await server.requests().map { "\($0.status.map(String.init) ?? "-") \($0.fault ?? "") \($0.chaos)" }
        }
        let first = try await run(seed: 7), second = try await run(seed: 7), other = try await run(seed: 8)
        #expect(first.count == 40)
        #expect(first == second)
        #expect(first != other)
        #expect(first.contains { $0.hasSuffix("true") } && first.contains { $0.hasSuffix("false") })
    }
}
