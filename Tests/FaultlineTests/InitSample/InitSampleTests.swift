// A sample test written by `faultline init --swift`. It starts a server for this test alone on scenarios/example.json
// (found next to this source file, whatever the working directory), drives a tiny URLSession client that retries
// each 429 after the Retry-After it carries, and asks the server for its verdicts.
import Faultline
import FaultlineCore
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking   // URLSession on Linux
#endif

private struct ExampleItem: Decodable, Equatable {
    var id: String
    var name: String
}

@Test func exampleClientWaitsAsRetryAfterAsks() async throws {
    try await FaultlineServer.with(scenarioFiles: ["scenarios/example.json"]) { server in
        let url = server.baseURL.appendingPathComponent("v1/items/42")

        // The client under test: GET, and on 429 wait as long as Retry-After says (in seconds), then try again.
        var status = 0
        var body = Data()
        for _ in 0..<5 {
            let (data, response) = try await URLSession.shared.data(from: url)
            let http = try #require(response as? HTTPURLResponse)
            (status, body) = (http.statusCode, data)
            guard status == 429 else { break }
            let wait = Int(http.value(forHTTPHeaderField: "Retry-After") ?? "") ?? 1
            try await Task.sleep(for: .seconds(wait))
        }
        #expect(status == 200)
        #expect(try JSONDecoder().decode(ExampleItem.self, from: body) == ExampleItem(id: "42", name: "Item 42"))

        let attempts = try await server.waitForRequests(count: 3, matching: JournalFilter(route: "item"))
        #expect(attempts.map(\.status) == [429, 429, 200])
        let report = await server.report()
        #expect(report.passed, "\(report)")   // the scenario's expect rules, with evidence when they fail
    }
}
