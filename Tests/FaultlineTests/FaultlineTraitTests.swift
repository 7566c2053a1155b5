import Faultline
import FaultlineCore
import FaultlineTesting
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `.faultline(…)` trait: a server of its own for each test, found through `FaultlineServer.current`.
@Suite struct FaultlineTraitTests {
    @Test(.faultline("scenarios/flaky-catalogue.json"))
    func aTestGetsItsOwnServer() async throws {
        let server = try #require(FaultlineServer.current)
        let (_, response) = try await URLSession.shared.data(from: server.baseURL.appendingPathComponent("v1/products/1"))
        #expect((response as? HTTPURLResponse)?.statusCode == 503, "the scenario's first scripted answer")
        #expect(try await server.waitForRequests(count: 1, matching: JournalFilter(route: "product")).count == 1)
    }

    @Test func withoutTheTraitThereIsNoServer() {
        #expect(FaultlineServer.current == nil)
    }
}

@Suite(.faultline("scenarios/flaky-catalogue.json"))
struct FaultlineSuiteTraitTests {
    /// Each test of the suite gets a fresh server: the script starts at its first step in both.
    @Test(arguments: [1, 2])
    func eachTestStartsFromTheFirstStep(run: Int) async throws {
        let server = try #require(FaultlineServer.current)
        let (_, response) = try await URLSession.shared.data(from: server.baseURL.appendingPathComponent("v1/products/1"))
        #expect((response as? HTTPURLResponse)?.statusCode == 503, "run \(run)")
    }
}
