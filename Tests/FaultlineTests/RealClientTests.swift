import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Real clients against a live server: curl (including --retry against 503, 503, 200) and URLSession.
@Suite struct RealClientTests {
    static let flaky = """
        {
          "name": "flaky",
          "routes": [
            { "id": "product", "match": { "method": "GET", "path": "/v1/products/{id}" },
              "responses": [
                { "status": 503, "headers": { "Retry-After": "1" }, "json": { "error": "unavailable" }, "times": 2 },
                { "status": 200, "json": { "id": "{{path.id}}", "name": "widget" } }
              ] },
            { "id": "create", "match": { "method": "POST", "path": "/v1/orders", "body": { "json": { "sku": "w-1" } } },
              "responses": [ { "status": 201, "headers": { "Location": "/v1/orders/{{resource.id}}" },
                               "json": { "order": "{{resource.id}}", "by": "{{header.X-User}}" } } ] }
          ]
        }
        """

    @Test func curlRetriesThrough503sAndTheJournalShowsEachAttempt() async throws {
        let server = try TestSupport.server([Self.flaky])
        defer { Task { await server.stop() } }
        let url = server.baseURL.absoluteString + "/v1/products/42"
        let result = try TestSupport.curl(["--retry", "3", "--fail", url])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == #"{"id":"42","name":"widget"}"#)
        let entries = try TestSupport.journal(server)
        #expect(entries.compactMap { ($0["response"] as? [String: Any])?["status"] as? Int } == [503, 503, 200])
        #expect(entries.allSatisfy { $0["route"] as? String == "product" })
        #expect(entries.compactMap { $0["step"] as? Int } == [0, 0, 1])
        // curl honoured Retry-After: 1 — the attempts are at least a second apart.
        let times = entries.compactMap { $0["receivedAtMonotonicMs"] as? Double }
        #expect(times.count == 3)
        #expect(times[1] - times[0] >= 990 && times[2] - times[1] >= 990, "\(times)")
    }

    @Test func curlReusesOneConnectionForSeveralURLs() async throws {
        let server = try TestSupport.server([Self.flaky])
        defer { Task { await server.stop() } }
        let base = server.baseURL.absoluteString
        let result = try TestSupport.curl(["-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null",
                                           "\(base)/v1/products/1", "\(base)/v1/products/2", "\(base)/v1/products/3"])
        #expect(result.status == 0)
        let entries = try TestSupport.journal(server)
        let connections = entries.compactMap { ($0["connection"] as? [String: Any])?["id"] as? Int }
        let reused = entries.compactMap { ($0["connection"] as? [String: Any])?["reused"] as? Bool }
        #expect(connections.count == 3 && Set(connections).count == 1)
        #expect(reused == [false, true, true])
    }

    @Test func unmatchedRequestsGetA404NamingTheNearestRoute() async throws {
        let server = try TestSupport.server([Self.flaky])
        defer { Task { await server.stop() } }
        let result = try TestSupport.curl(["-w", "\n%{http_code}", "-X", "DELETE", server.baseURL.absoluteString + "/v1/products/9"])
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.last == "404")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        let nearest = try #require(body["nearest"] as? [String: Any])
        #expect(nearest["route"] as? String == "product")
        #expect(nearest["reason"] as? String == "method DELETE is not GET")
        let entries = try TestSupport.journal(server, "matched=false")
        #expect(entries.count == 1)
        #expect((entries[0]["nearest"] as? [String: Any])?["route"] as? String == "product")
    }

    @Test func urlSessionGetsScriptedResponses() async throws {
        let server = try TestSupport.server([Self.flaky])
        defer { Task { await server.stop() } }
        let session = URLSession(configuration: .ephemeral)
        let url = server.baseURL.appendingPathComponent("v1/products/7")
        var statuses: [Int] = []
        var lastBody = Data()
        for _ in 0..<3 {
            let (data, response) = try await session.data(from: url)
            statuses.append((response as! HTTPURLResponse).statusCode)
            lastBody = data
        }
        #expect(statuses == [503, 503, 200])
        let product = try JSONSerialization.jsonObject(with: lastBody) as? [String: Any]
        #expect(product?["id"] as? String == "7")

        var post = URLRequest(url: server.baseURL.appendingPathComponent("v1/orders"))
        post.httpMethod = "POST"
        post.setValue("application/json", forHTTPHeaderField: "Content-Type")
        post.setValue("ann", forHTTPHeaderField: "X-User")
        post.httpBody = Data(#"{"sku":"w-1","qty":2}"#.utf8)
        let (data, response) = try await session.data(for: post)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 201)
        #expect(http.value(forHTTPHeaderField: "Location") == "/v1/orders/1")
        #expect(String(decoding: data, as: UTF8.self) == #"{"order":"1","by":"ann"}"#)

        let entries = await server.requests(JournalFilter(route: "create"))
        #expect(entries.count == 1)
        #expect(entries.first.map { String(decoding: $0.body, as: UTF8.self) } == #"{"sku":"w-1","qty":2}"#)
        #expect(entries.first?.head?.headers["x-user"] == "ann")
        session.invalidateAndCancel()
    }
}
