import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Proxy mode (ARCHITECTURE §4d) against Foundation's URLSession, in process, with a second Faultline as the "real"
/// upstream: a scripted 503 before the upstream's answer, a fault on a proxied route seen exactly as on a scripted
/// one, a large body streamed through intact, and an upstream that is down answered 502 with the reason.
@Suite struct ProxyURLSessionTests {
    static let size = 8 << 20
    static let upstreamScenario = #"""
        { "name": "upstream",
          "resources": [ { "id": "blob", "path": "/blob", "generated": { "size": 8388608 } } ],
          "routes": [ { "id": "item", "match": { "path": "/items/{id}" },
                        "responses": [ { "status": 200, "json": { "id": "{{path.id}}", "name": "gadget" } } ] } ] }
        """#

    static func proxyScenario(_ upstream: String) -> String {
        """
        { "name": "proxy", "proxy": { "upstream": "\(upstream)" },
          "routes": [
            { "id": "flaky", "match": { "path": "/items/1" },
              "responses": [ { "status": 503, "headers": { "Retry-After": "0" }, "times": 1 }, { "proxy": true } ] },
            { "id": "cut", "match": { "path": "/items/2" }, "responses": [ { "proxy": true, "fault": "truncate-body" } ] },
            { "id": "scripted", "match": { "path": "/scripted/2" },
              "responses": [ { "status": 200, "json": { "id": "2", "name": "gadget" }, "fault": "truncate-body" } ] }
          ] }
        """
    }

    /// The upstream's origin without a trailing slash.
    static func origin(_ server: FaultlineServer) -> String {
        var text = server.baseURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }

    /// A second Faultline as the upstream, a proxy in front of it, and a session (`stop` ends them).
    static func upstreamAndProxy() throws -> (FaultlineServer, FaultlineServer, URLSession) {
        let upstream = try TestSupport.server([upstreamScenario])
        let proxy = try TestSupport.server([proxyScenario(origin(upstream))])
        return (upstream, proxy, URLSession(configuration: .ephemeral))
    }

    static func stop(_ upstream: FaultlineServer, _ proxy: FaultlineServer, _ session: URLSession) {
        session.invalidateAndCancel()
        Task {
            await proxy.stop()
            await upstream.stop()
        }
    }

    static func get(_ session: URLSession, _ url: URL) async -> Result<(Data, HTTPURLResponse), URLError> {
        do {
            let (data, response) = try await session.data(from: url)
            guard let http = response as? HTTPURLResponse else { return .failure(URLError(.badServerResponse)) }
            return .success((data, http))
        } catch let error as URLError {
            return .failure(error)
        } catch {
            return .failure(URLError(.unknown))
        }
    }

    @Test func aScripted503ComesFirstThenTheUpstreamsAnswer() async throws {
        let (upstream, proxy, session) = try Self.upstreamAndProxy()
        defer { Self.stop(upstream, proxy, session) }
        let url = proxy.baseURL.appendingPathComponent("items/1")
        let (_, first) = try await Self.get(session, url).get()
        #expect(first.statusCode == 503 && first.value(forHTTPHeaderField: "Retry-After") == "0")
        let (data, second) = try await Self.get(session, url).get()
        #expect(second.statusCode == 200 && second.value(forHTTPHeaderField: "Via") == "1.1 faultline")
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: String])
        #expect(json == ["id": "1", "name": "gadget"])
        #expect(await upstream.requests(JournalFilter(path: "/items/1")).count == 1, "the 503 never reached the upstream")
    }

    @Test func aFaultOnAProxiedRouteFailsURLSessionAsOnAScriptedOne() async throws {
        let (upstream, proxy, session) = try Self.upstreamAndProxy()
        defer { Self.stop(upstream, proxy, session) }
        let proxied = await Self.get(session, proxy.baseURL.appendingPathComponent("items/2"))
        let scripted = await Self.get(session, proxy.baseURL.appendingPathComponent("scripted/2"))
        guard case .failure(let proxiedError) = proxied, case .failure(let scriptedError) = scripted else {
            Issue.record("a truncated body must fail: \(proxied) / \(scripted)")
            return
        }
        #expect(proxiedError.code == scriptedError.code, "\(proxiedError.code.rawValue) vs \(scriptedError.code.rawValue)")
        let entry = try #require(await proxy.requests(JournalFilter(route: "cut")).first)
        #expect(entry.fault == "truncate-body" && entry.proxy?.upstreamStatus == 200 && entry.proxy?.streamed == false)
    }

    @Test func aLargeBodyIsStreamedThroughIntact() async throws {
        let (upstream, proxy, session) = try Self.upstreamAndProxy()
        defer { Self.stop(upstream, proxy, session) }
        let (direct, _) = try await Self.get(session, upstream.baseURL.appendingPathComponent("blob")).get()
        let (through, response) = try await Self.get(session, proxy.baseURL.appendingPathComponent("blob")).get()
        #expect(response.statusCode == 200 && response.expectedContentLength == Int64(Self.size))
        #expect(through.count == Self.size && through == direct)
        let entry = try #require(
            try await proxy.waitForRequests(count: 1, matching: JournalFilter(path: "/blob", completed: true), timeout: .seconds(5)).first)
        #expect(entry.proxy?.streamed == true && entry.proxy?.upstreamBytes == Self.size)
    }

    @Test func anUpstreamThatIsDownIsA502NamingWhy() async throws {
        // A port held bound with nothing listening: refused, and no parallel test's server can be given it.
        let held = try HeldPort()
        let proxy = try TestSupport.server([Self.proxyScenario("http://127.0.0.1:\(held.port)")])
        defer { Task { await proxy.stop() } }
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let (data, response) = try await Self.get(session, proxy.baseURL.appendingPathComponent("items/9")).get()
        #expect(response.statusCode == 502)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(json["failure"] as? String == "refused")
        #expect((json["reason"] as? String)?.contains("cannot connect to 127.0.0.1:\(held.port)") == true, "\(json)")
    }
}
