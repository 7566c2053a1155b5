import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client-policy features seen from URLSession: the unknown outcome reconciled with an idempotency
/// key, a 401 → refresh → retry, and 429 with Retry-After.
@Suite struct PolicyURLSessionTests {
    static let scenario = """
        {"name": "p",
         "auth": {"tokenPath": "/token", "protect": ["/api/"], "initialToken": "t-1"},
         "rateLimits": [{"id": "burst", "path": "/api/search", "limit": 1, "windowMs": 60000}],
         "routes": [
           {"id": "order", "match": {"method": "POST", "path": "/orders"}, "idempotency": {"required": true},
            "responses": [{"status": 201, "json": {"id": "o-{{resource.id}}"}, "fault": "commit-then-reset"},
                          {"status": 201, "json": {"id": "o-{{resource.id}}"}}]},
           {"id": "me", "match": {"path": "/api/me"}, "responses": [{"json": {"name": "ann"}}]},
           {"id": "search", "match": {"path": "/api/search"}, "responses": [{"json": {"hits": []}}]}
         ]}
        """

    static func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 5
        return URLSession(configuration: configuration)
    }

    @Test func aResetPOSTRetriedWithTheSameKeyCreatesOneOrder() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let session = Self.session()
        defer { session.invalidateAndCancel() }
        var post = URLRequest(url: server.baseURL.appendingPathComponent("orders"))
        post.httpMethod = "POST"
        post.setValue("order-7f3a", forHTTPHeaderField: "Idempotency-Key")
        post.httpBody = Data(#"{"sku":"w-1"}"#.utf8)
        do {
            _ = try await session.data(for: post)
            Issue.record("the first attempt should have failed with a reset")
        } catch let error as URLError {
            #expect(error.code == .networkConnectionLost, "\(error)")
        }
        let (data, response) = try await session.data(for: post)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 201)
        #expect(http.value(forHTTPHeaderField: "Idempotent-Replayed") == "true")
        #expect(String(decoding: data, as: UTF8.self) == #"{"id":"o-1"}"#)
        let state = try TestSupport.admin(server, "state")
        #expect((state["sideEffects"] as? [String: Any])?["total"] as? Int == 1)
    }

    @Test func a401IsFollowedByOneRefreshAndARetry() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let session = Self.session()
        defer { session.invalidateAndCancel() }
        _ = try TestSupport.admin(server, "auth/expire", method: "POST")
        var me = URLRequest(url: server.baseURL.appendingPathComponent("api/me"))
        me.setValue("Bearer t-1", forHTTPHeaderField: "Authorization")
        let (_, first) = try await session.data(for: me)
        let rejected = try #require(first as? HTTPURLResponse)
        #expect(rejected.statusCode == 401)
        #expect(rejected.value(forHTTPHeaderField: "WWW-Authenticate")?.contains(#"error="invalid_token""#) == true)

        var refresh = URLRequest(url: server.baseURL.appendingPathComponent("token"))
        refresh.httpMethod = "POST"
        refresh.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        refresh.httpBody = Data("grant_type=client_credentials".utf8)
        let (tokenData, _) = try await session.data(for: refresh)
        let token = try #require(try JSONSerialization.jsonObject(with: tokenData) as? [String: Any])
        let accessToken = try #require(token["access_token"] as? String)
        #expect(accessToken == "token-2")
        me.setValue("Bearer \(accessToken)", forHTTPHeaderField: "Authorization")
        let (_, retried) = try await session.data(for: me)
        #expect((retried as? HTTPURLResponse)?.statusCode == 200)
        let auth = try #require(try TestSupport.admin(server, "state")["auth"] as? [String: Any])
        #expect(auth["refreshCalls"] as? Int == 1 && auth["staleTokenRequests"] as? Int == 1)
    }

    @Test func a429CarriesRetryAfter() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let session = Self.session()
        defer { session.invalidateAndCancel() }
        var search = URLRequest(url: server.baseURL.appendingPathComponent("api/search"))
        search.setValue("Bearer t-1", forHTTPHeaderField: "Authorization")
        let (_, ok) = try await session.data(for: search)
        #expect((ok as? HTTPURLResponse)?.statusCode == 200)
        let (_, limited) = try await session.data(for: search)
        let http = try #require(limited as? HTTPURLResponse)
        #expect(http.statusCode == 429)
        let seconds = try #require(http.value(forHTTPHeaderField: "Retry-After").flatMap(Int.init))
        // The rest of the 60 s window (opened by the first request), rounded up, as the server timed the two requests:
        // on a loaded machine they can be many seconds apart, so the bound comes from the journal, not a guess.
        let entries = await server.requests(JournalFilter(path: "/api/search"))
        #expect(entries.count == 2)
        if entries.count == 2 {
            let apart = Double(entries[1].receivedAtMonotonicNanos - entries[0].receivedAtMonotonicNanos) / 1e9
            let expected = Int((60 - apart).rounded(.up))
            #expect(abs(seconds - expected) <= 1 && (1...60).contains(seconds), "\(seconds) s; requests \(apart) s apart")
        }
    }
}
