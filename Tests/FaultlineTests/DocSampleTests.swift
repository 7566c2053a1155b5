// The manual's Swift sample (docs/testing.md), verbatim: Tests/Python/test_doc_samples.py fails when the two differ,
// and `swift test` runs it, so the sample is known to compile and pass.
import Faultline
import FaultlineCore
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking   // URLSession on Linux
#endif

@Test func clientRetriesThrough503AndHonoursRetryAfter() async throws {
    // A server on 127.0.0.1, port 0, for this test alone, stopped (and awaited) when the closure ends, even by a
    // throw. Relative scenario paths are found next to this source file, whatever the working directory.
    try await FaultlineServer.with(scenarioFiles: ["scenarios/flaky-catalogue.json"]) { server in
        let url = server.baseURL.appendingPathComponent("v1/products/1")

        // The client under test; here, a loop that retries 503s after the Retry-After they carry.
        for _ in 0..<3 {
            let (_, response) = try await URLSession.shared.data(from: url)
            guard let wait = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Retry-After") else { break }
            try await Task.sleep(for: .seconds(Int(wait) ?? 1))
        }

        let attempts = try await server.waitForRequests(count: 3, matching: JournalFilter(route: "product"))
        #expect(attempts.map(\.status) == [503, 503, 200])
        let report = await server.report()
        #expect(report.passed, "\(report)")      // the scenario's expect rules, with evidence when they fail
    }
}
