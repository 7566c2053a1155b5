import Testing
@testable import FaultlineCore

/// Auth, rate limits, idempotency and Retry-After judgements through the engine, on a fake clock.
@Suite struct PolicyEngineTests {
    static func engine(_ json: String) throws -> Engine {
        Engine(scenarios: [try ScenarioLoader.load(bytes: Array(json.utf8), file: "p.json", directory: nil)])
    }

    static func at(_ ms: UInt64) -> EngineInstant {
        EngineInstant(monotonicMilliseconds: ms, wallSeconds: 1_800_000_000 + Double(ms) / 1000)
    }

    static func request(_ method: String, _ target: String, _ headers: [(String, String)] = [], body: String = "") -> HTTPRequest {
        EngineTests.request(method, target, headers: headers, body: body)
    }

    static let auth = """
        {"name": "a", "auth": {"tokenPath": "/token", "protect": ["/api/"], "expireAfterUses": 2, "rotateRefreshTokens": true,
          "initialRefreshToken": "r-1"},
         "routes": [{"id": "me", "match": {"path": "/api/me"}, "responses": [{"text": "me"}]}]}
        """

    @Test func bearerTokensExpireAndRefreshIsCounted() throws {
        let engine = try Self.engine(Self.auth)
        let bearer = { (token: String) in [("Authorization", "Bearer \(token)")] }
        let missing = engine.decide(Self.request("GET", "/api/me"), requestID: 1)
        #expect(missing.script.status == 401)
        #expect(EngineTests.written(missing.script).contains(#"WWW-Authenticate: Bearer realm="faultline", error="invalid_token""#))
        #expect(engine.decide(Self.request("GET", "/api/me", bearer("token-1")), requestID: 2).script.status == 200)
        #expect(engine.decide(Self.request("GET", "/api/me", bearer("token-1")), requestID: 3).script.status == 200)
        let expired = engine.decide(Self.request("GET", "/api/me", bearer("token-1")), requestID: 4)
        #expect(expired.script.status == 401 && expired.notes == [.remark("auth: stale token, 401")])

        let call = engine.decide(Self.request("POST", "/token", [("Content-Type", "application/x-www-form-urlencoded")],
                                              body: "grant_type=refresh_token&refresh_token=r-1"), requestID: 5, now: Self.at(10))
        #expect(call.script.status == 200 && call.completion?.refresh == true)
        #expect(EngineTests.written(call.script).hasSuffix(
            #"{"access_token":"token-2","token_type":"Bearer","expires_in":3600,"refresh_token":"refresh-2"}"#))
        #expect(engine.decide(Self.request("GET", "/api/me", bearer("token-2")), requestID: 6).script.status == 200)
        // Rotation: the used refresh token is spent.
        let reuse = engine.decide(Self.request("POST", "/token", body: "grant_type=refresh_token&refresh_token=r-1"), requestID: 7)
        #expect(reuse.script.status == 400 && EngineTests.written(reuse.script).contains(#""error":"invalid_grant""#))
        let state = engine.stateJSON(now: Self.at(20))["auth"]
        #expect(state?["refreshCalls"] == .int(2) && state?["refreshesInFlight"] == .int(2))
        #expect(state?["maxRefreshesInFlight"] == .int(2) && state?["staleTokenRequests"] == .int(1))
        engine.finish(call.completion!, now: Self.at(30))
        engine.finish(reuse.completion!, now: Self.at(30))
        #expect(engine.stateJSON(now: Self.at(40))["auth"]?["refreshesInFlight"] == .int(0))
    }

    static let limited = """
        {"name": "l", "rateLimits": [{"id": "s", "pathPrefix": "/s", "limit": 2, "windowMs": 1000, "rateLimitHeaders": true}],
         "routes": [{"id": "s", "match": {"pathPrefix": "/s"}, "responses": [{"text": "ok"}]}]}
        """

    @Test func rateLimitsAnswer429AndJudgeTheRetry() throws {
        let engine = try Self.engine(Self.limited)
        let first = engine.decide(Self.request("GET", "/s"), requestID: 1, now: Self.at(0))
        #expect(first.script.status == 200 && EngineTests.written(first.script).contains(#"RateLimit-Policy: "s";q=2;w=1"#))
        #expect(engine.decide(Self.request("GET", "/s"), requestID: 2, now: Self.at(100)).script.status == 200)
        let limited = engine.decide(Self.request("GET", "/s"), requestID: 3, now: Self.at(200))
        #expect(limited.script.status == 429)
        #expect(EngineTests.written(limited.script).contains("Retry-After: 1\r\n"))
        // A request decided before the 429 went out cannot have read it: it follows nothing.
        #expect(engine.decide(Self.request("GET", "/s"), requestID: 4, now: Self.at(200)).notes.contains { $0.description.hasPrefix("retry-after") } == false)
        engine.finish(limited.completion!, now: Self.at(200))
        // 300 ms after the answer went out is 700 ms early for a 1000 ms Retry-After.
        let early = engine.decide(Self.request("GET", "/s"), requestID: 5, now: Self.at(500))
        #expect(early.script.status == 429)
        #expect(early.notes.first?.description.contains("ms early") == true, "\(early.notes)")
        engine.finish(early.completion!, now: Self.at(500))
        let onTime = engine.decide(Self.request("GET", "/s"), requestID: 6, now: Self.at(1600))
        #expect(onTime.script.status == 200 && onTime.notes.first?.description.hasSuffix("honoured") == true, "\(onTime.notes)")
    }

    static let orders = """
        {"name": "o", "routes": [
          {"id": "order", "match": {"method": "POST", "path": "/orders"}, "idempotency": {"required": true},
           "responses": [{"status": 201, "json": {"id": "o-{{resource.id}}"}, "fault": "commit-then-reset"},
                         {"status": 201, "json": {"id": "o-{{resource.id}}"}}]},
          {"id": "pay", "match": {"method": "POST", "path": "/pay"}, "idempotency": {},
           "responses": [{"status": 201, "delayMs": 100, "json": {"ok": true}}]}]}
        """

    @Test func idempotencyKeysReplayConflictAndCountSideEffects() throws {
        let engine = try Self.engine(Self.orders)
        let key = { (value: String) in [("Idempotency-Key", value)] }
        #expect(engine.decide(Self.request("POST", "/orders", body: "{}"), requestID: 1).script.status == 400)
        let committed = engine.decide(Self.request("POST", "/orders", key(#""k1""#), body: "{}"), requestID: 2)
        #expect(committed.script.steps == [.abortConnection(.reset)] && committed.script.fault == "commit-then-reset")
        let replay = engine.decide(Self.request("POST", "/orders", key("k1"), body: "{}"), requestID: 3)
        let replayed = EngineTests.written(replay.script)
        #expect(replayed.hasPrefix("HTTP/1.1 201 Created\r\n") && replayed.contains("Idempotent-Replayed: true\r\n"))
        #expect(replayed.hasSuffix(#"{"id":"o-1"}"#))
        #expect(engine.decide(Self.request("POST", "/orders", key("k1"), body: #"{"x":1}"#), requestID: 4).script.status == 422)
        let second = engine.decide(Self.request("POST", "/orders", key("k2"), body: "{}"), requestID: 5)
        #expect(second.script.status == 201 && second.completion?.idempotency?.key == "k2")
        engine.finish(second.completion!, now: Self.at(10))
        let state = engine.stateJSON(now: Self.at(10))
        #expect(state["sideEffects"]?["total"] == .int(2))

        let pay = engine.decide(Self.request("POST", "/pay", key("p"), body: "{}"), requestID: 6)
        #expect(pay.script.status == 201)
        #expect(engine.decide(Self.request("POST", "/pay", key("p"), body: "{}"), requestID: 7).script.status == 409)
        engine.finish(pay.completion!, now: Self.at(200))
        let again = engine.decide(Self.request("POST", "/pay", key("p"), body: "{}"), requestID: 8)
        #expect(EngineTests.written(again.script).contains("Idempotent-Replayed: true"))
        // Keyless requests to an optional-key route run every time and count as keyless side effects.
        _ = engine.decide(Self.request("POST", "/pay", body: "{}"), requestID: 9)
        _ = engine.decide(Self.request("POST", "/pay", body: "{}"), requestID: 10)
        #expect(engine.stateJSON(now: Self.at(300))["sideEffects"]?["total"] == .int(5))
        engine.reset()
        #expect(engine.stateJSON(now: Self.at(300))["sideEffects"]?["total"] == .int(0))
    }

    @Test func completionsFromBeforeAResetOrReloadAreIgnored() throws {
        let engine = try Self.engine(Self.orders)
        let key = [("Idempotency-Key", "k")]
        let first = engine.decide(Self.request("POST", "/pay", key, body: "{}"), requestID: 1)
        #expect(first.script.status == 201)
        engine.reset()
        // The old exchange ends after the reset: its response must not become the new store's record for "k".
        engine.finish(first.completion!, now: Self.at(5))
        let fresh = engine.decide(Self.request("POST", "/pay", key, body: "{}"), requestID: 2)
        #expect(fresh.script.status == 201 && !EngineTests.written(fresh.script).contains("Idempotent-Replayed"))
        #expect(fresh.completion?.generation == engine.generation)

        let refresh = try Self.engine(Self.auth)
        let tokenCall = { (id: Int) in
            refresh.decide(Self.request("POST", "/token", [("Content-Type", "application/x-www-form-urlencoded")],
                                        body: "grant_type=refresh_token&refresh_token=r-1"), requestID: id)
        }
        let old = tokenCall(1)
        refresh.load(refresh.scenarios)
        _ = tokenCall(2)
        // Only the new call is in flight; the old one ending must not count it as finished.
        refresh.finish(old.completion!, now: Self.at(5))
        #expect(refresh.stateJSON(now: Self.at(5))["auth"]?["refreshesInFlight"] == .int(1))
    }

    @Test func scriptedRetryAfterIsJudgedPerRoute() throws {
        let json = #"{"name": "r", "routes": [{"id": "m", "match": {"path": "/m"}, "responses": [{"status": 503, "headers": {"Retry-After": "2"}}, {"text": "up"}]}]}"#
        let engine = try Self.engine(json)
        let first = engine.decide(Self.request("GET", "/m"), requestID: 1, now: Self.at(0))
        #expect(first.script.status == 503)
        engine.finish(first.completion!, now: Self.at(0))
        let retry = engine.decide(Self.request("GET", "/m"), requestID: 2, now: Self.at(1500))
        #expect(retry.notes == [.remark("retry-after: request came 1500 ms after #1's 2000 ms: 500 ms early")])
        let tracker = engine.stateJSON(now: Self.at(1600))["retryAfter"]
        #expect(tracker?["early"] == .int(1))
    }

    @Test func failuresThatCommitNothingFreeTheKey() throws {
        let json = """
            {"name": "f", "routes": [
              {"id": "a", "match": {"path": "/a"}, "idempotency": {}, "responses": [{"status": 201, "fault": "reset"}, {"status": 201}]},
              {"id": "c", "match": {"path": "/c"}, "idempotency": {}, "chaos": {"rate": 1, "faults": ["status:503"]},
               "responses": [{"status": 201}]}]}
            """
        let engine = try Self.engine(json)
        let key = [("Idempotency-Key", "k")]
        let reset = engine.decide(Self.request("POST", "/a", key), requestID: 1)
        #expect(reset.script.steps == [.abortConnection(.reset)] && reset.completion == nil)
        let retry = engine.decide(Self.request("POST", "/a", key), requestID: 2)
        #expect(retry.script.status == 201 && !EngineTests.written(retry.script).contains("Idempotent-Replayed"))
        #expect(engine.decide(Self.request("POST", "/c", key), requestID: 3).script.status == 503)
        #expect(engine.decide(Self.request("POST", "/c", key), requestID: 4).script.status == 503, "not 409: nothing in flight")
        // Only the retry of /a created something.
        engine.finish(retry.completion!, now: Self.at(1))
        #expect(engine.stateJSON(now: Self.at(1))["sideEffects"]?["total"] == .int(1))
    }

    @Test func rateLimitedRequestsAreJournaledUnderTheirLimit() throws {
        let engine = try Self.engine(Self.limited)
        _ = engine.decide(Self.request("GET", "/s"), requestID: 1)
        _ = engine.decide(Self.request("GET", "/s"), requestID: 2)
        #expect(engine.decide(Self.request("GET", "/s"), requestID: 3).route == .rateLimit("s"))
    }

    @Test func tokenTemplateIsTheCurrentAccessToken() throws {
        let json = #"{"name": "t", "auth": {"tokenPath": "/token", "protect": ["/api/"]}, "routes": [{"id": "w", "match": {"path": "/whoami"}, "responses": [{"text": "{{token}}"}]}]}"#
        let engine = try Self.engine(json)
        #expect(EngineTests.written(engine.decide(Self.request("GET", "/whoami"), requestID: 1).script).hasSuffix("\r\n\r\ntoken-1"))
        _ = engine.decide(Self.request("POST", "/token", body: "grant_type=client_credentials"), requestID: 2)
        #expect(EngineTests.written(engine.decide(Self.request("GET", "/whoami"), requestID: 3).script).hasSuffix("\r\n\r\ntoken-2"))
    }
}
