import Faultline
import FaultlineCore
import Foundation
import Testing

/// The network conditions' Swift API on an in-process server (ARCHITECTURE §3b), with raw sockets: what the kernel
/// answers, what the journal says. The clients' own reports are in test_network.py and NetworkURLSessionTests.
@Suite struct NetworkControlTests {
    static let scenario = #"""
        {"name": "net",
         "routes": [{"id": "sync", "match": {"path": "/sync"}, "responses": [{"text": "ok"}]}],
         "timeline": [{"after": {"requests": 2, "route": "sync"}, "name": "gone", "listener": "refuse"},
                      {"after": {"ms": 3000}, "listener": "up", "conditions": "3g"}]}
        """#

    /// One request on a fresh connection; the status, or the errno of a failed connect.
    private static func request(_ port: Int, _ path: String = "/sync") -> Result<Int, RawClient.Failure> {
        do {
            let client = try RawClient(port: port)
            try client.send("GET \(path) HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            guard let response = client.readResponses(1, seconds: 5).first else {
                return .failure(RawClient.Failure(description: "no response"))
            }
            return .success(response.status)
        } catch let failure as RawClient.Failure {
            return .failure(failure)
        } catch {
            return .failure(RawClient.Failure(description: "\(error)"))
        }
    }

    /// Polls `condition` until it holds or `seconds` pass, on a thread of its own: the raw requests block, and
    /// blocking Swift's small cooperative pool (two threads here) would stall other tests and this one's deadline.
    private func eventually(_ seconds: Double, _ condition: @escaping @Sendable () -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let deadline = Date().addingTimeInterval(seconds)
                while Date() < deadline {
                    if condition() { return continuation.resume(returning: true) }
                    usleep(10_000)
                }
                continuation.resume(returning: condition())
            }
        }
    }

    @Test func refuseThenBackOnTheSamePort() async throws {
        let server = try TestSupport.server([#"{"name": "n", "routes": [{"id": "sync", "match": {"path": "/sync"}, "responses": [{"text": "ok"}]}]}"#])
        defer { Task { await server.stop() } }
        let record = await server.changeNetwork(NetworkChange(listener: .refuse))
        #expect(record.outage && record.listener == .refuse && record.source == "api" && record.error == nil)
        guard case .failure(let refused) = Self.request(server.port) else {
            Issue.record("a refusing listener accepted")
            return
        }
        #expect(refused.description.contains("errno \(ECONNREFUSED)"), "\(refused)")
        // Back up by itself, 300 ms after a second change says so.
        await server.changeNetwork(NetworkChange(listener: .refuse), restoringAfter: 300)
        let port = server.port
        #expect(await eventually(5) { (try? Self.request(port).get()) == 200 }, "the port did not come back")
        let changes = await server.requests(JournalFilter()).filter(\.isNetworkChange)
        #expect(changes.map { $0.network?.listener } == [.refuse, .refuse, .up])
        #expect(changes.last?.network?.phase == "after 300 ms")
        #expect(await server.network()["listener"] == .string("up"))
    }

    @Test func resetOnAcceptJournalsEachAttempt() async throws {
        let server = try TestSupport.server([#"{"name": "n", "routes": [{"id": "sync", "match": {"path": "/sync"}, "responses": [{"text": "ok"}]}]}"#])
        defer { Task { await server.stop() } }
        await server.changeNetwork(NetworkChange(listener: .resetOnAccept))
        for _ in 0..<3 {
            if case .success(let status) = Self.request(server.port) { Issue.record("answered \(status) while resetting") }
        }
        var connections = JournalFilter()
        connections.connection = true
        let attempts = try await server.waitForRequests(count: 3, matching: connections)
        #expect(attempts.allSatisfy { $0.network?.event == .attempt && $0.network?.listener == .resetOnAccept && $0.outcome == .resetSent })
        await server.changeNetwork(NetworkChange(listener: .up))
        #expect((try? Self.request(server.port).get()) == 200)
    }

    @Test func theAdminPortIsOutOfReach() async throws {
        let server = try TestSupport.server([#"{"name": "n", "routes": [{"id": "sync", "match": {"path": "/sync"}, "responses": [{"text": "ok"}]}]}"#]) {
            $0.adminPort = 0
        }
        defer { Task { await server.stop() } }
        let adminPort = try #require(server.adminPort)
        await server.changeNetwork(NetworkChange(listener: .refuse, conditions: .some(LinkShape.preset("offline"))))
        #expect((try? Self.request(adminPort, "/__faultline/network").get()) == 200)
        // Only the admin API is served there.
        #expect((try? Self.request(adminPort, "/sync").get()) == 404)
        #expect(await server.count(JournalFilter(route: "sync")) == 0)
    }

    @Test func aTimelineGoesOfflineAfterTheSecondRequestAndComesBackShaped() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        #expect((try? Self.request(server.port).get()) == 200)
        #expect((try? Self.request(server.port).get()) == 200)
        let port = server.port
        #expect(await eventually(5) { if case .failure = Self.request(port) { return true } else { return false } },
                "the listener did not refuse after the second request")
        #expect(await eventually(10) { (try? Self.request(port).get()) == 200 }, "the listener did not come back")
        let entries = await server.requests(JournalFilter())
        let phases = entries.filter(\.isNetworkChange).compactMap(\.network)
        #expect(phases.map(\.phase) == ["gone", "phase 2"])
        #expect(phases.map(\.outage) == [true, false])
        #expect(phases.last?.conditions == "3g")
        #expect(entries.last?.network?.event == .shaped)
        // A reset restarts the timeline and puts the network back.
        await server.resetScenarios()
        #expect(await server.network()["conditions"] == .null)
        #expect(await server.network()["timeline"]?["begun"] == .int(0))
    }
}
