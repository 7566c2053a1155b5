import FaultlineClient
import Foundation
import Testing
@testable import Faultline
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// FaultlineClient: every admin operation has a Swift method (`FaultlineRemote.operations`, checked against
/// openapi.json both ways and called for real), and the typed answers decode what a server sends.
@Suite struct FaultlineClientTests {
    /// The admin API's description, as compiled into the server (docs/openapi.json links to it).
    static let openAPIFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/Faultline/Resources/openapi.json").standardized

    /// "METHOD path" for every operation of openapi.json's `paths`, HEAD left out.
    static func openAPIOperations() throws -> [String] {
        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: openAPIFile)) as? [String: Any]
        let paths = try #require(document?["paths"] as? [String: [String: Any]])
        let verbs = ["get", "put", "post", "delete", "options", "patch", "trace"]
        return paths.flatMap { path, item in verbs.filter { item[$0] != nil }.map { "\($0.uppercased()) \(path)" } }
    }

    static var tableOperations: [String] { FaultlineRemote.operations.map { "\($0.method) \($0.path)" } }

    @Test func everyOpenAPIOperationHasASwiftMethod() throws {
        let table = Set(Self.tableOperations)
        let missing = try Self.openAPIOperations().filter { !table.contains($0) }.sorted()
        #expect(missing.isEmpty, "admin operations with no method on FaultlineRemote: \(missing)")
    }

    @Test func everyTableEntryIsAnOpenAPIOperation() throws {
        let described = Set(try Self.openAPIOperations())
        let unknown = Self.tableOperations.filter { !described.contains($0) }
        #expect(unknown.isEmpty, "FaultlineRemote.operations names operations openapi.json does not: \(unknown)")
        #expect(Set(Self.tableOperations).count == Self.tableOperations.count, "no operation is listed twice")
        // The server's own list of endpoints agrees too.
        #expect(Set(AdminAPI.endpoints.map { "\($0.method) \($0.path)" }) == Set(Self.tableOperations))
    }

    /// One call per table entry, each naming its method, so the compiler proves the method exists; the keys are
    /// the table's `swiftMethod`s.
    static let calls: [String: @Sendable (FaultlineRemote) async throws -> Void] = [
        "health()": { let health = try await $0.health(); #expect(health.status == "ok") },
        "requests(_:limit:)": { _ = try await $0.requests(JournalFilter(route: "product"), limit: 1) },
        "clearJournal()": { try await $0.clearJournal() },
        "har(_:limit:)": { let har = try JSONValue.parse(Array(try await $0.har(JournalFilter(), limit: 5))); #expect(har["log"] != nil) },
        "count(_:)": { _ = try await $0.count(JournalFilter(matched: true)) },
        "waitForRequests(count:matching:timeout:)": { _ = try await $0.waitForRequests(count: 0, matching: JournalFilter(), timeout: .seconds(1)) },
        "scenarios()": { let list = try await $0.scenarios(); #expect(list["scenarios"] != nil) },
        "loadScenarios(_:add:)": {
            let names = try await $0.loadScenarios(Data(#"{"name": "extra", "routes": [{"id": "x", "match": {"path": "/x"}, "responses": [{"status": 204}]}]}"#.utf8), add: true)
            #expect(names == ["extra"])
        },
        "resetScenarios(journal:)": { _ = try await $0.resetScenarios(journal: true) },
        "reloadScenarioFiles()": { let reload = try await $0.reloadScenarioFiles(); #expect(reload["scenarios"] != nil) },
        "report()": { _ = try await $0.report() },
        "state()": { _ = try await $0.state() },
        "expireToken()": { try await $0.expireToken() },
        "resources()": { let list = try await $0.resources(); #expect(list["resources"] != nil) },
        "changeResource(_:)": {
            let changed = try await $0.changeResource(.object([("id", .string("catalogue"))]))
            #expect(changed["resource"]?["id"] == .string("catalogue"))
        },
        "stopRecording()": {
            // This server is not recording (`faultline record` is, test_proxy.py): 409, thrown with its status.
            do {
                _ = try await $0.stopRecording()
                Issue.record("a server that is not recording answered record/stop")
            } catch let failure as FaultlineRemote.Failure {
                #expect(failure.status == 409)
            }
        },
        "network()": { let network = try await $0.network(); #expect(network["listener"] == .string("up")) },
        "changeNetwork(_:)": {
            let changed = try await $0.changeNetwork(.object([("connections", .object([("freezeMs", .int(10))]))]))
            #expect(changed["change"]?["connections"] == .string("freeze 10 ms"))
        },
        "shutdown()": { try await $0.shutdown() },
        "openAPIDocument()": { let served = try await $0.openAPIDocument(); #expect(served == (try Data(contentsOf: openAPIFile))) },
        "index()": { let index = try await $0.index(); #expect(index["endpoints"] != nil) },
        "events(cursor:timeout:)": {
            let first = try await $0.events()
            #expect(first["reset"] == .bool(true))
            let quiet = try await $0.events(cursor: first["cursor"]?.intValue, timeout: .zero)
            #expect(quiet["reset"] == .bool(false) && quiet["cursor"] == first["cursor"])
        },
        "dashboardAsset(_:)": {
            let script = try await $0.dashboardAsset("dashboard.js")
            #expect(String(decoding: script, as: UTF8.self).contains("faultline-data"))
        },
    ]

    @Test func everyTableEntryIsCalledAndAnswered() async throws {
        #expect(Set(Self.calls.keys) == Set(FaultlineRemote.operations.map(\.swiftMethod)))
        let server = try FaultlineServer(scenarioPaths: [TestSupport.scenariosFolder])
        let remote = FaultlineRemote(baseURL: server.baseURL)
        // Shutdown last: it stops the server.
        for operation in FaultlineRemote.operations.sorted(by: { $1.swiftMethod == "shutdown()" && $0.swiftMethod != "shutdown()" }) {
            let call = try #require(Self.calls[operation.swiftMethod], "no call for \(operation.swiftMethod)")
            do {
                try await call(remote)
            } catch {
                Issue.record("\(operation.method) \(operation.path) via \(operation.swiftMethod): \(error)")
            }
        }
        if FaultlineRemote.operations.contains(where: { $0.swiftMethod == "shutdown()" }) {
            await server.waitUntilStopped()  // stopped by shutdown()
        } else {
            await server.stop()  // the table lost shutdown(): the expectation above has failed; do not hang
        }
    }

    /// Traffic for every policy of the bundled scenarios, with curl: a rate-limited export, an idempotent order
    /// (whose first answer is committed, then the connection reset), a 503 with Retry-After retried at once, a
    /// request with no token.
    static func drive(_ base: URL) throws {
        func send(_ arguments: [String]) throws { _ = try TestSupport.curl(["-o", "/dev/null"] + arguments) }
        let url = base.absoluteString
        try send(["-H", "X-Api-Key: k", url + "/search-api/v1/export"])
        try send(["-H", "X-Api-Key: k", url + "/search-api/v1/export"])
        try send(["-H", "Idempotency-Key: a1", "-H", "Content-Type: application/json", "--data-binary", #"{"sku": "1"}"#,
                  url + "/shop/v1/orders"])
        try send([url + "/v1/products/1"])
        try send([url + "/v1/products/1"])
        try send([url + "/bank/v1/me"])
    }

    static func checkTyped(_ state: PolicyState) {
        #expect(state.auth?.missingTokenRequests == 1)
        #expect(state.auth?.tokenPath == "/bank/oauth/token")
        let export = state.rateLimits.first { $0.id == "export" }
        #expect(export?.algorithm == "token-bucket" && export?.key == "header:X-Api-Key")
        #expect(export?.buckets.map(\.key) == ["k"] && export?.buckets.first?.requests == 2 && export?.buckets.first?.limited == 1)
        #expect(state.retryAfter.retries == 1 && state.retryAfter.early == 1 && state.retryAfter.honoured == 0)
        #expect(state.retryAfter.observations.first?.honoured == false)
        #expect(Set(state.retryAfter.pending.map(\.status)) == [429, 503])
        let orders = state.idempotency["create-order"]
        #expect(orders?.records.map(\.key) == ["a1"] && orders?.records.first?.status == 201 && orders?.records.first?.state == "completed")
        #expect(orders?.sideEffects.total == 1 && orders?.sideEffects.perKey.first?.count == 1)
        #expect(state.sideEffects.total >= 1)
    }

    @Test func typedAnswersOverTheAdminAPIAndInProcess() async throws {
        try await FaultlineServer.with(configuration: .init(scenarios: ScenarioLoader.load(paths: [TestSupport.scenariosFolder]))) { server in
            try Self.drive(server.baseURL)
            let remote = FaultlineRemote(baseURL: server.baseURL)
            _ = try await remote.waitForRequests(count: 6, matching: JournalFilter(completed: true), timeout: .seconds(10))
            Self.checkTyped(try await remote.state())
            Self.checkTyped(try await server.state())
            #expect(try await remote.stateJSON()["retryAfter"]?["early"] == .int(1))

            let health = try await remote.health()
            #expect(health.port == server.port && health.scenarios.contains("flaky-catalogue"))
            #expect(health.journal.totalRecorded == 6 && health.journal.perRoute["product"] == 2)
            #expect(try await remote.count(JournalFilter(route: "product")) == 2)
            #expect(await server.count(JournalFilter(route: "product")) == 2)
            #expect(try await remote.requests(JournalFilter(), limit: 2).map(\.sequence) == [5, 6])
            let lines = String(decoding: try await remote.ndjson(JournalFilter(method: "GET")), as: UTF8.self).split(separator: "\n")
            #expect(lines.count == 5 && lines.allSatisfy { (try? JSONValue.parse(String($0)))?["sequence"] != nil })
            guard case .array(let entries)? = try await remote.harDocument(JournalFilter(route: "product"))["log"]?["entries"] else {
                Issue.record("the HAR document has no entries")
                return
            }
            #expect(entries.count == 2)
            #expect(try await remote.journalCounters() == (await server.journalCounters()))

            try await remote.expireToken()
            #expect(try await remote.state().auth?.currentTokenExpired == true)
            #expect(try await remote.resetScenarios(journal: true) == 6)
            #expect(try await remote.count() == 0)
            await #expect(throws: FaultlineRemote.Failure.self) {
                try await remote.loadScenarios(json: #"{"name": "bad", "routez": []}"#)
            }
        }
    }
}
