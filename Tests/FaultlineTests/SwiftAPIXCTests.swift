import Faultline
import FaultlineCore
import XCTest

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The same in-process API from XCTest, as most existing iOS test suites would use it.
final class SwiftAPIXCTests: XCTestCase {
    func testServerFromScenarioFilesAnswersAndJournals() async throws {
        let path = TestSupport.repositoryRoot.appendingPathComponent("scenarios/flaky-catalogue.json").path
        let server = try FaultlineServer(scenarioPaths: [path])
        let session = URLSession(configuration: .ephemeral)
        var statuses: [Int] = []
        for _ in 0..<3 {
            let (_, response) = try await session.data(from: server.baseURL.appendingPathComponent("v1/products/5"))
            statuses.append((response as? HTTPURLResponse)?.statusCode ?? 0)
        }
        session.invalidateAndCancel()
        XCTAssertEqual(statuses, [503, 503, 200])
        let entries = try await server.waitForRequests(count: 3, matching: JournalFilter(route: "product"))
        XCTAssertEqual(entries.map(\.step), [0, 0, 1])
        let report = await server.report()
        XCTAssertFalse(report.passed, "URLSession does not wait for Retry-After by itself")
        XCTAssertEqual(report.failed.map(\.rule), ["honorsRetryAfter"])
        await server.resetScenarios()
        await server.clearJournal()
        let counters = await server.journalCounters()
        XCTAssertEqual(counters["totalRecorded"], .int(3))
        XCTAssertEqual(counters["retained"], .int(0))
        await server.stop()
    }
}
