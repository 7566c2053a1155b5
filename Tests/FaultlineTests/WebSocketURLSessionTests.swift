import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// WebSocket sessions (ARCHITECTURE §4c) against `URLSessionWebSocketTask`, in process. On Linux it is
/// FoundationNetworking's, over libcurl, and Debian's libcurl 7.88 is built without WebSocket support: the task fails
/// at once with `unsupportedURL` and nothing reaches the server — the first test says so. The session tests run
/// where URLSession speaks WebSocket (Apple's stack); Python's `websockets` and node's `ws` cover the sessions here
/// (Tests/Python/test_websocket.py).
@Suite struct WebSocketURLSessionTests {
    static func scenario(_ script: String, extra: String = "") -> String {
        #"{"name": "ws", "seed": 2, "routes": [{"id": "live", "match": {"path": "/live"}, "responses": [{"websocket": {"#
            + extra + #""script": "# + script + "}}]}]}"
    }

    static func url(_ server: FaultlineServer) -> URL {
        var components = URLComponents(url: server.baseURL.appendingPathComponent("live"), resolvingAgainstBaseURL: false)!
        components.scheme = "ws"
        return components.url!
    }

    static func session(_ server: FaultlineServer) async throws -> JournalEntry {
        let entries = try await server.waitForRequests(count: 1, matching: JournalFilter(route: "live", completed: true),
                                                       timeout: .seconds(5))
        return try #require(entries.first)
    }

    #if canImport(FoundationNetworking)
    @Test func foundationNetworkingOverDebiansLibcurlHasNoWebSocket() async throws {
        let server = try TestSupport.server([Self.scenario(#"[{"text": "hello"}]"#)])
        defer { Task { await server.stop() } }
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let task = session.webSocketTask(with: Self.url(server))
        task.resume()
        do {
            _ = try await task.receive()
            Issue.record("this libcurl speaks WebSocket: the session tests below can run on Linux too")
        } catch let error as URLError {
            #expect(error.code == .unsupportedURL)
            #expect(error.userInfo[NSLocalizedDescriptionKey] as? String == "WebSockets not supported by libcurl")
        }
        #expect(await server.requests().isEmpty, "nothing reached the server")
    }
    #else
    @Test func aScriptedSessionWithMessagesEchoAndAServerClose() async throws {
        let server = try TestSupport.server([Self.scenario(
            #"[{"text": "hello"}, {"receive": "any", "timeoutMs": 3000}, {"echo": true}, {"text": "tick {{n}}", "everyMs": 50, "times": 2}, {"receive": {"contains": "bye"}}, {"close": {"code": 1001, "reason": "going away"}}]"#)])
        defer { Task { await server.stop() } }
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let task = session.webSocketTask(with: Self.url(server))
        task.resume()
        var received: [String] = []
        func next() async throws {
            if case .string(let text) = try await task.receive() { received.append(text) }
        }
        try await next()
        try await task.send(.string("subscribe"))
        try await task.send(.string("echo me"))
        for _ in 0..<3 { try await next() }
        #expect(received.first == "hello")
        #expect(Set(received.dropFirst()) == ["echo me", "tick 1", "tick 2"])
        try await task.send(.string("bye"))
        // The server's close surfaces as a receive error; the task's close code is the server's.
        await #expect(throws: (any Error).self) { _ = try await task.receive() }
        let entry = try await Self.session(server)
        #expect(task.closeCode.rawValue == 1001)
        #expect(entry.websocket?.end?.by == .server && entry.websocket?.end?.code == 1001)
        #expect(entry.websocket?.clientFrames("text").map(\.text) == ["subscribe", "echo me", "bye"])
    }

    @Test func aDroppedSessionFailsTheNextReceive() async throws {
        let server = try TestSupport.server([Self.scenario(#"[{"text": "one"}, {"fault": "drop"}]"#)])
        defer { Task { await server.stop() } }
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let task = session.webSocketTask(with: Self.url(server))
        task.resume()
        // The message may or may not be read before the RST destroys it; the next receive fails either way.
        var failed: (any Error)?
        for _ in 0..<2 where failed == nil {
            do { _ = try await task.receive() } catch { failed = error }
        }
        #expect(failed != nil)
        let entry = try await Self.session(server)
        #expect(entry.websocket?.end?.fault == "drop" && entry.websocket?.end?.code == nil && entry.outcome == .closedByFault)
    }
    #endif
}
