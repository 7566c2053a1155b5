import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The in-process Swift API from Swift Testing: parallel tests, each with its own server.
@Suite struct SwiftAPITests {
    static let scenario = #"""
        {"name": "api", "expect": {"honorsRetryAfter": true},
         "routes": [{"id": "item", "match": {"path": "/items/{id}"},
                     "responses": [{"status": 503, "headers": {"Retry-After": "3600"}}, {"json": {"id": "{{path.id}}"}}]}]}
        """#

    /// Retry-After is an hour, so the immediate retry is early however long a loaded machine stalls this test's
    /// tasks (a full parallel run on two cores once delayed the second request past 30 s).
    @Test(arguments: 1...4)
    func parallelServersDoNotInterfere(index: Int) async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        for _ in 0..<2 {
            _ = try await session.data(from: server.baseURL.appendingPathComponent("items/\(index)"))
        }
        let seen = try await server.waitForRequests(count: 2, matching: JournalFilter(route: "item", completed: true))
        #expect(seen.map(\.status) == [503, 200])
        #expect(seen.allSatisfy { $0.path == "/items/\(index)" }, "each server saw only its own test's requests")
        let report = await server.report()
        #expect(!report.passed)
        #expect(report.failed.map(\.rule) == ["honorsRetryAfter"])
        #expect(report.failed.first?.evidence == [1, 2])
        let state = try await server.state()
        #expect(state.retryAfter.early == 1)
        #expect(await server.stateJSON()["retryAfter"]?["early"] == .int(1))
    }

    @Test func reloadScenarioFilesServesTheEditedFile() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("faultline-reload-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("api.json")
        func write(_ body: String) throws {
            try Data(#"{"name": "api", "routes": [{"id": "v", "match": {"path": "/v"}, "responses": [{"text": "\#(body)"}]}]}"#.utf8)
                .write(to: file)
        }
        try write("one")
        let server = try FaultlineServer(scenarioPaths: [folder.path])
        defer { Task { await server.stop() } }
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let url = server.baseURL.appendingPathComponent("v")

        #expect(String(decoding: try await session.data(from: url).0, as: UTF8.self) == "one")
        try write("two")
        let reload = await server.reloadScenarioFiles()
        #expect(reload.applied && reload.errors.isEmpty)
        #expect(reload.changed == [ScenarioReload.Version(name: "api", version: 2, source: file.path)])
        #expect(String(decoding: try await session.data(from: url).0, as: UTF8.self) == "two")

        try Data("{".utf8).write(to: file)
        let rejected = await server.reloadScenarioFiles()
        #expect(!rejected.applied && rejected.errors.map(\.file) == [file.path])
        #expect(String(decoding: try await session.data(from: url).0, as: UTF8.self) == "two")
        let versions = try await server.waitForRequests(count: 3, matching: JournalFilter(path: "/v")).map(\.scenarioVersion)
        #expect(versions == [1, 2, 2])
    }

    @Test func waitForRequestsThrowsWithWhatItSaw() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        _ = try TestSupport.curl(["-o", "/dev/null", server.baseURL.absoluteString + "/items/1"])
        do {
            _ = try await server.waitForRequests(count: 2, timeout: .milliseconds(200))
            Issue.record("expected a timeout")
        } catch let timeout as FaultlineServer.WaitTimeout {
            #expect(timeout.seen.count == 1)
            #expect(timeout.description.contains("#1 GET /items/1 → 503"))
        }
        do {
            _ = try await server.waitForRequests(count: 1, matching: JournalFilter(path: "/none"), timeout: .milliseconds(50))
            Issue.record("expected a timeout")
        } catch let timeout as FaultlineServer.WaitTimeout {
            #expect(timeout.description == "waited for 1 matching request(s), saw 0", "no dangling colon")
        }
    }

    @Test func waitForRequestsAnswersWhenTheRequestArrives() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        async let waited = server.waitForRequests(count: 1, matching: JournalFilter(route: "item"), timeout: .seconds(20))
        let url = server.baseURL.absoluteString + "/items/9"
        let curl = Task.detached { try TestSupport.curl(["-o", "/dev/null", url]) }
        let entries = try await waited
        #expect(entries.first?.path == "/items/9")
        _ = try await curl.value
    }
}

/// The scoped form: the server always stops, whether the body returns or throws, and scenario files are found
/// next to the test's source file, not in the working directory.
@Suite struct ScopedServerTests {
    struct Boom: Error {}

    /// The `instance` of the server answering on `port` (GET /__faultline/health), or nil when none answers.
    static func instance(on port: Int) -> String? {
        guard let client = try? RawClient(port: port),
              (try? client.send("GET /__faultline/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) != nil,
              let response = client.readResponses(1).first,
              let health = try? JSONDecoder().decode(Health.self, from: Data(response.body.utf8))
        else { return nil }
        return health.instance
    }

    /// The server that answered as `instance` on `port` is gone: nothing answers there, or another server does (the
    /// parallel tests bind free ports, and one may take this port as soon as it is released).
    static func stopped(_ port: Int, instance: String?) -> Bool {
        instance != nil && Self.instance(on: port) != instance
    }

    @Test func theServerStopsWhenTheBodyReturns() async throws {
        let (port, instance) = try await FaultlineServer.with(scenarioFiles: ["../../scenarios/flaky-catalogue.json"]) { server in
            let (_, response) = try await URLSession.shared.data(from: server.baseURL.appendingPathComponent("health"))
            #expect((response as? HTTPURLResponse) != nil)
            return (server.port, Self.instance(on: server.port))
        }
        #expect(Self.stopped(port, instance: instance), "stopped before with(…) returned")
    }

    @Test func theServerStopsWhenTheBodyThrows() async throws {
        var port = 0
        var instance: String?
        await #expect(throws: Boom.self) {
            try await FaultlineServer.with(scenarioFiles: ["../../scenarios"]) { server in
                port = server.port
                instance = Self.instance(on: port)
                throw Boom()
            }
        }
        #expect(port > 0 && Self.stopped(port, instance: instance))
    }

    @Test func relativePathsAreResolvedAgainstTheCallingSourceFile() {
        #expect(FaultlineServer.resolve("s.json", relativeTo: "/a/b/T.swift") == "/a/b/s.json")
        #expect(FaultlineServer.resolve("/abs/s.json", relativeTo: "/a/b/T.swift") == "/abs/s.json")
    }

    @Test func scenarioFilesThatDoNotLoadAreATypedServerError() {
        do {
            _ = try FaultlineServer(scenarioPaths: ["/nonexistent/scenarios.json"])
            Issue.record("a server started without its scenarios")
        } catch {
            // `error` is a ServerError: the initialisers throw one typed error.
            guard case .scenarios(let problems) = error else { Issue.record("\(error)"); return }
            #expect(!problems.errors.isEmpty)
            #expect(error.description.hasPrefix("the scenario files did not load: "))
        }
    }
}
