import Testing
@testable import FaultlineCore

/// The engine's forwarding decisions and the scripts built from an upstream's answer, without sockets: proxy
/// steps, unmatched requests, policies in front, faults and delays from the planner, the header rules, and the
/// loader's checks of proxy configuration.
@Suite struct ProxyPlanTests {
    static let upstream = #"{"upstream": "http://127.0.0.1:9/base"}"#

    static func engine(_ json: String) throws -> Engine {
        Engine(scenarios: [try ScenarioTestSupport.load(json)])
    }

    static func request(_ target: String, method: String = "GET", headers: [(String, String)] = [("Host", "client.test")],
                        body: String = "") -> HTTPRequest {
        HTTPRequest(
            head: HTTPRequestHead(method: method, target: target, version: .http1_1,
                                  headers: HTTPHeaders(headers.map { (name: $0.0, value: $0.1) })),
            body: Array(body.utf8))
    }

    static let answer = UpstreamResponse(
        status: 200, headers: HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", "27"),
                                           ("Connection", "keep-alive, X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "timeout=5")]),
        body: Array(#"{"id":"1","name":"gadget"}"#.utf8))

    @Test func proxyStepsForwardAndTheirFaultsBreakTheUpstreamsAnswer() throws {
        let engine = try Self.engine("""
            {"name": "p", "proxy": \(Self.upstream), "routes": [{"id": "item", "match": {"path": "/item"},
             "responses": [{"status": 503, "headers": {"Retry-After": "1"}, "times": 2},
                           {"proxy": true, "fault": {"type": "truncate-body", "bytes": 5}, "headers": {"X-Step": "yes"}},
                           {"proxy": true, "delayMs": 30}]}]}
            """)
        for _ in 0..<2 {
            let scripted = engine.decide(Self.request("/item"), requestID: 1)
            #expect(scripted.proxy == nil && scripted.script.status == 503)
        }
        let broken = try #require(engine.decide(Self.request("/item"), requestID: 3).proxy)
        var record = ProxyRecord(upstream: broken.upstreamURL)
        #expect(broken.upstreamURL == "http://127.0.0.1:9/base/item")
        let script = broken.script(for: Self.answer, record: &record)
        #expect(script.fault == "truncate-body" && !script.keepAlive)
        let bytes = String(decoding: HTTP1Renderer.bytes(script), as: UTF8.self)
        #expect(bytes.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(bytes.contains("Content-Length: 26\r\n") && bytes.contains("X-Step: yes\r\n") && bytes.contains("Via: 1.1 faultline\r\n"))
        #expect(!bytes.contains("X-Hop") && !bytes.contains("Keep-Alive") && !bytes.contains("keep-alive"))
        #expect(bytes.hasSuffix("\r\n\r\n{\"id\""))
        #expect(record.changed == ["headers set: X-Step", "truncate-body: 5 of 26 body bytes sent"])

        let slow = try #require(engine.decide(Self.request("/item"), requestID: 4).proxy)
        var slowRecord = ProxyRecord(upstream: slow.upstreamURL)
        let delayed = slow.script(for: Self.answer, record: &slowRecord)
        #expect(delayed.steps.first == .wait(milliseconds: 30))
        #expect(slowRecord.changed == ["delay 30 ms"])
    }

    @Test func anIdempotencyKeyIsStoredWithTheUpstreamsAnswerOrFreed() throws {
        let engine = try Self.engine("""
            {"name": "p", "proxy": \(Self.upstream), "routes": [{"id": "pay", "match": {"method": "POST", "path": "/pay"},
             "idempotency": {"header": "Idempotency-Key"},
             "responses": [{"proxy": true, "fault": "truncate-body", "times": 1}, {"proxy": true, "fault": "commit-then-reset", "times": 1},
                           {"proxy": true}]}]}
            """)
        func post(_ key: String) -> Decision {
            engine.decide(Self.request("/pay", method: "POST", headers: [("Idempotency-Key", "\"\(key)\"")], body: "x"), requestID: 1)
        }
        func settle(_ plan: ProxyPlan, _ answer: UpstreamResponse) -> (stored: StoredResponse?, sideEffect: Bool)? {
            var record = ProxyRecord(upstream: plan.upstreamURL)
            _ = plan.script(for: answer, record: &record)
            let settled = plan.settlement(upstreamStatus: answer.status)
            if let hold = plan.idempotency, let settled {
                engine.settleIdempotency(hold, stored: settled.stored, sideEffect: settled.sideEffect, now: EngineInstant())
            }
            return settled
        }
        // truncate-body broke the answer: freed, though the upstream did the work (a side effect).
        let broken = try #require(post("a").proxy)
        let freed = try #require(settle(broken, Self.answer))
        #expect(freed.stored == nil && freed.sideEffect)
        // commit-then-reset: stored; the retry is a replay answered without a plan.
        let committed = try #require(post("a").proxy)
        let stored = try #require(settle(committed, Self.answer)?.stored)
        #expect(stored.status == 200 && stored.body == Self.answer.body)
        #expect(stored.headers.contains { $0.name == "Via" } && !stored.headers.contains { $0.name == "X-Hop" })
        let replay = post("a")
        #expect(replay.proxy == nil && replay.script.status == 200)
        #expect(HTTP1Renderer.bytes(replay.script).starts(with: Array("HTTP/1.1 200 OK\r\n".utf8)))
        // A 503 is not stored: the key is free, and the next attempt is forwarded again.
        let busy = try #require(post("b").proxy)
        let unavailable = UpstreamResponse(status: 503, headers: HTTPHeaders([("Content-Length", "0")]), body: [])
        #expect(settle(busy, unavailable).map { $0.stored == nil && !$0.sideEffect } == true)
        #expect(post("b").proxy != nil)
        // No key, nothing to settle.
        let keyless = try #require(engine.decide(Self.request("/pay", method: "POST", body: "x"), requestID: 9).proxy)
        #expect(keyless.idempotency == nil && settle(keyless, Self.answer) == nil)
    }

    @Test func unmatchedRequestsForwardOrGet404() throws {
        let forwarding = try Self.engine(#"{"name": "p", "proxy": \#(Self.upstream), "routes": [{"id": "a", "match": {"path": "/a"}, "responses": [{"status": 200}]}]}"#)
        let forwarded = forwarding.decide(Self.request("/elsewhere?x=1"), requestID: 1)
        #expect(forwarded.proxy?.step == nil && forwarded.route == nil)
        #expect(forwarding.decide(Self.request("/a"), requestID: 2).proxy == nil)
        let refusing = try Self.engine(#"{"name": "p", "proxy": {"upstream": "http://127.0.0.1:9", "unmatched": "404"}, "routes": [{"id": "a", "match": {"path": "/a"}, "responses": [{"status": 200}]}]}"#)
        let refused = refusing.decide(Self.request("/elsewhere"), requestID: 1)
        #expect(refused.proxy == nil && refused.script.status == 404)
        // serve --proxy alone: a scenario without a proxy section still forwards what no route takes.
        let plain = try Self.engine(#"{"name": "p", "routes": [{"id": "a", "match": {"path": "/a"}, "responses": [{"status": 200}]}]}"#)
        #expect(plain.decide(Self.request("/b"), requestID: 1).proxy == nil)
        plain.defaultProxy = ProxyConfig(upstream: UpstreamURL(secure: false, host: "127.0.0.1", port: 9))
        #expect(plain.decide(Self.request("/b"), requestID: 2).proxy != nil)
    }

    @Test func authAnswersBeforeTheProxy() throws {
        let engine = try Self.engine("""
            {"name": "p", "proxy": \(Self.upstream),
             "auth": {"protect": ["/"], "tokenPath": "/token"},
             "routes": [{"id": "all", "match": {"pathPrefix": "/"}, "proxy": {}}]}
            """)
        let refused = engine.decide(Self.request("/private"), requestID: 1)
        #expect(refused.proxy == nil && refused.script.status == 401)
    }

    @Test func theUpstreamRequestFollowsTheProxyRules() throws {
        let request = Self.request("/orders?x=1", method: "POST", headers: [
            ("Host", "client.test"), ("Connection", "keep-alive, X-Private"), ("X-Private", "no"), ("TE", "trailers"),
            ("Proxy-Authorization", "Basic x"), ("Upgrade", "h2c"), ("X-Forwarded-For", "10.0.0.1"),
            ("Content-Type", "application/json"), ("Transfer-Encoding", "chunked"),
        ], body: "{}")
        let url = UpstreamURL(secure: true, host: "api.test", port: 8443, basePath: "/v2")
        let bytes = String(decoding: ProxyHeaders.upstreamRequest(
            request, upstream: url, host: .upstream, client: "127.0.0.1", clientTLS: false), as: UTF8.self)
        #expect(bytes.hasPrefix("POST /v2/orders?x=1 HTTP/1.1\r\nHost: api.test:8443\r\n"))
        for gone in ["X-Private", "TE:", "Proxy-Authorization", "Upgrade", "Transfer-Encoding", "Connection"] {
            #expect(!bytes.contains(gone), "\(gone) was forwarded: \(bytes)")
        }
        #expect(bytes.contains("X-Forwarded-For: 10.0.0.1, 127.0.0.1\r\n") && bytes.contains("Via: 1.1 faultline\r\n"))
        #expect(bytes.contains("X-Forwarded-Host: client.test\r\n") && bytes.hasSuffix("Content-Length: 2\r\n\r\n{}"))
        let kept = String(decoding: ProxyHeaders.upstreamRequest(
            request, upstream: url, host: .client, client: "127.0.0.1", clientTLS: true), as: UTF8.self)
        #expect(kept.contains("Host: client.test\r\n") && kept.contains("X-Forwarded-Proto: https\r\n"))
    }

    @Test func failuresAre502Or504WithTheReason() throws {
        let plan = ProxyPlan(
            config: ProxyConfig(upstream: UpstreamURL(secure: false, host: "127.0.0.1", port: 9)), step: nil,
            request: Self.request("/x"), seed: 0, extraHeaders: [])
        var record = ProxyRecord(upstream: plan.upstreamURL)
        let timeout = plan.failureScript(.timeout, "no response within 100 ms", record: &record)
        #expect(timeout.status == 504 && record.failure == "timeout")
        let text = String(decoding: HTTP1Renderer.bytes(timeout), as: UTF8.self)
        #expect(text.contains(#""failure":"timeout""#) && text.contains("no response within 100 ms"))
        #expect(plan.failureScript(.reset, "reset", record: &record).status == 502)
    }

    @Test func theLoaderChecksProxyConfiguration() {
        let route = #""routes": [{"id": "r", "match": {"path": "/r"}, "responses": [STEP]}]"#
        func errors(_ proxy: String, step: String = #"{"proxy": true}"#) -> [String] {
            ScenarioTestSupport.errors(#"{"name": "p", "proxy": \#(proxy), \#(route.replacingOccurrences(of: "STEP", with: step))}"#)
        }
        #expect(errors(#"{"upstream": "ftp://x"}"#) == ["proxy.upstream: ftp://x is not an http:// or https:// URL"])
        #expect(errors(#"{"upstraem": "http://x"}"#).contains("proxy: unknown key \"upstraem\"; did you mean \"upstream\"?"))
        #expect(errors(#"{"upstream": "http://x", "unmatched": "forwrd"}"#)
            == [#"proxy.unmatched: unknown value "forwrd"; did you mean "forward"?"#])
        #expect(errors(#"{"upstream": "http://x", "caFile": "/nonexistent.pem"}"#).count == 2)
        #expect(errors(Self.upstream, step: #"{"proxy": true, "status": 201}"#).first?.hasPrefix("routes[0].responses[0].status: a proxy step takes no \"status\"") == true)
        #expect(errors(Self.upstream, step: #"{"proxy": true, "fault": "reset"}"#).first?.contains("commit-then-reset") == true)
        #expect(errors(Self.upstream, step: #"{"proxy": true, "fault": "truncate-body", "delayMs": 5}"#).isEmpty)
    }

    /// The plain forward's one-pass head (`ProxyHeaders.clientHead`, `ProxyPlan.plainScript`) against the planner's
    /// path it short-cuts: the same bytes on the wire, the same fields for HTTP/2, the same script.
    @Test func thePlainForwardIsThePlannersAnswerByteForByte() throws {
        let engine = try Self.engine("""
            {"name": "p", "proxy": \(Self.upstream), "routes": [{"id": "slow", "match": {"path": "/slow"},
             "responses": [{"proxy": true, "delayMs": 15}]}]}
            """)
        let answers = [
            Self.answer,
            UpstreamResponse(status: 404, headers: HTTPHeaders([("Via", "1.0 edge"), ("Connection", "close, X-A"),
                ("X-A", "hop"), ("x-b", "kept"), ("Via", "1.1 cdn"), ("Transfer-Encoding", "chunked")]),
                body: Array("missing".utf8)),
            UpstreamResponse(status: 201, headers: HTTPHeaders([("Location", "/o/1"), ("Proxy-Agent", "x")])),
            UpstreamResponse(status: 200, headers: HTTPHeaders([("date", "Sun, 06 Nov 1994 08:49:37 GMT")]),
                             body: Array("dated".utf8)),
        ]
        // The same answers as the parser reads them off the wire, whose fields stay bytes (`UpstreamFields`):
        // `clientHead` copies those through instead of serializing strings, and must send the same head.
        let parsed = try answers.map { try Self.parsed($0) }
        #expect(parsed.allSatisfy { $0.fields != nil })
        let requests = [Self.request("/a"), Self.request("/a", headers: [("Connection", "close")]),
                        Self.request("/slow"), HTTPRequest(head: HTTPRequestHead(method: "GET", target: "/a", version: .http2,
                                                                               headers: HTTPHeaders([(":path", "/a")])))]
        for (index, request) in requests.enumerated() {
            for answer in answers + parsed {
                let plan = try #require(engine.decide(request, requestID: index).proxy)
                var record = ProxyRecord(upstream: plan.upstreamURL)
                let fast = plan.script(for: answer, record: &record)
                var random = SeededRandom(seed: 1)
                let keepAlive = request.head.clientWantsKeepAlive
                let planned = ResponsePlanner.respond(
                    HTTPResponse(status: answer.status, headers: ProxyHeaders.clientResponse(answer, requestMethod: "GET"),
                                 body: answer.body),
                    step: ResponseStep(), after: request.path == "/slow" ? [.wait(milliseconds: 15)] : [], for: request,
                    random: &random, extraHeaders: [], keepResponse: false)
                let date = HTTPDateCache().line(atWall: 1_700_000_000)
                #expect(HTTP1Renderer.bytes(fast, dateLine: date) == HTTP1Renderer.bytes(planned, dateLine: date),
                        "\(request.path) \(answer.status)")
                #expect(fast.steps == planned.steps && fast.keepAlive == planned.keepAlive && fast.keepAlive == keepAlive)
                guard case .head(let head)? = fast.steps.first(where: { if case .head = $0 { true } else { false } }),
                      case .head(let expected)? = planned.steps.first(where: { if case .head = $0 { true } else { false } })
                else {
                    Issue.record("no head")
                    continue
                }
                #expect(head.headers == expected.headers && head.contentLength == expected.contentLength && !head.chunked)
                #expect(head.addsDate == expected.addsDate && head.statusLineLength == expected.statusLineLength)
                #expect(head.addsDate == (answer.headers["date"] == nil),
                        "the upstream's Date is kept, else ours added")
                #expect(record.changed == (request.path == "/slow" ? ["delay 15 ms"] : []))
            }
        }
    }

    /// A field value with obs-text (RFC 9110 §5.5: bytes 0x80–0xFF, here Latin-1 `é`) reaches an HTTP/1.1 client
    /// as the upstream sent it: the end-to-end fields are copied through as bytes, not decoded as UTF-8 (which
    /// replaced such a byte with U+FFFD).
    @Test func obsTextInAFieldValueIsForwardedAsSent() throws {
        let engine = try Self.engine(#"{"name": "p", "proxy": \#(Self.upstream), "routes": []}"#)
        let wire: [UInt8] = Array("HTTP/1.1 200 OK\r\nContent-Disposition: attachment; filename=\"caf".utf8) + [0xE9]
            + Array("\"\r\nContent-Length: 2\r\n\r\nok".utf8)
        var parser = HTTPResponseParser(requestMethod: "GET")
        guard case .complete(let response, extraBytes: false) = parser.feed(wire) else {
            Issue.record("the answer did not parse")
            return
        }
        let plan = try #require(engine.decide(Self.request("/a"), requestID: 1).proxy)
        var record = ProxyRecord(upstream: plan.upstreamURL)
        let sent = HTTP1Renderer.bytes(plan.script(for: response, record: &record), dateLine: [])
        let expected: [UInt8] = Array("\r\nContent-Disposition: attachment; filename=\"caf".utf8) + [0xE9, 0x22, 0x0D, 0x0A]
        #expect(sent.firstRange(of: expected) != nil, "\(String(decoding: sent, as: UTF8.self))")
    }

    /// `response` as an upstream sends it (its fields as given, the body chunked when they say so, else framed
    /// by a `Content-Length` of its true size), read back by the parser.
    static func parsed(_ response: UpstreamResponse) throws -> UpstreamResponse {
        var wire = "HTTP/1.1 \(response.status) \(HTTPStatus.reasonPhrase(response.status))\r\n"
        let chunked = response.headers["transfer-encoding"] != nil
        for field in response.headers where !field.name.caseInsensitiveEquals("content-length") {
            wire += "\(field.name): \(field.value)\r\n"
        }
        if !chunked { wire += "Content-Length: \(response.body.count)\r\n" }
        var bytes = Array((wire + "\r\n").utf8)
        if chunked {
            bytes += Array(String(response.body.count, radix: 16).utf8) + [0x0D, 0x0A] + response.body
            bytes += Array("\r\n0\r\n\r\n".utf8)
        } else {
            bytes += response.body
        }
        var parser = HTTPResponseParser(requestMethod: "GET")
        guard case .complete(let read, extraBytes: false) = parser.feed(bytes) else {
            throw ParseFailure(wire: wire)
        }
        return read
    }

    struct ParseFailure: Error { let wire: String }
}
