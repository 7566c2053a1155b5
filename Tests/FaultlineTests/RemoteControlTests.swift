import Faultline
import FaultlineClient
import FaultlineCore
import Foundation
import Testing

/// One test body, run against the in-process server and against the same server through the admin API
/// (`FaultlineRemote`), as a test suite talking to `faultline serve` in another process would.
@Suite struct RemoteControlTests {
    static let scenario = #"""
        {"name": "remote", "expect": {"noRetryOn4xx": true},
         "routes": [{"id": "upload", "match": {"method": "POST", "path": "/upload"}, "responses": [{"status": 400}]}]}
        """#

    static func exercise(_ control: some FaultlineControl) async throws {
        let url = control.baseURL.absoluteString + "/upload"
        _ = try TestSupport.curl(["-o", "/dev/null", "--data-binary", "@-", url])  // empty body
        let binary = FileManager.default.temporaryDirectory.appendingPathComponent("faultline-\(UUID().uuidString).bin")
        try Data([0x00, 0xFF, 0x10, 0x80]).write(to: binary)
        defer { try? FileManager.default.removeItem(at: binary) }
        _ = try TestSupport.curl(["-o", "/dev/null", "--data-binary", "@\(binary.path)", url])
        let entries = try await control.waitForRequests(count: 2, matching: JournalFilter(route: "upload"), timeout: .seconds(10))
        #expect(entries.map(\.status) == [400, 400])
        #expect(entries.last?.body == [0x00, 0xFF, 0x10, 0x80], "binary bodies survive the trip")
        #expect(entries.last?.head?.method == "POST" && entries.last?.connectionReused == false)
        let report = try await control.report()
        #expect(report.failed.map(\.rule) == ["noRetryOn4xx"])
        #expect(report.failed.first?.evidence == [entries[0].sequence, entries[1].sequence])
        await #expect(throws: FaultlineServer.WaitTimeout.self) {
            try await control.waitForRequests(count: 3, matching: JournalFilter(), timeout: .milliseconds(100))
        }
        try await control.clearJournal()
        #expect(try await control.requests(JournalFilter(), limit: nil).isEmpty)
    }

    @Test func inProcess() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        try await Self.exercise(server)
    }

    @Test func overTheAdminAPI() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        try await Self.exercise(FaultlineRemote(baseURL: server.baseURL))
    }
}
