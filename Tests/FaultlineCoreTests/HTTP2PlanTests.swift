import Testing
@testable import FaultlineCore

private func load(_ json: String) throws -> Scenario { try ScenarioTestSupport.load(json, file: "h2.json") }

private func errors(_ json: String) -> [String] { ScenarioTestSupport.errors(json, file: "h2.json") }

/// A scenario with one route at /x whose members are `route` (JSON text without braces).
private func routeJSON(_ route: String, extra: String = "") -> String {
    #"{"name": "h2", \#(extra) "routes": [{"id": "r", "match": {"path": "/x"}, \#(route)}]}"#
}

/// HTTP/2's faults, a route's protocols, the `http2` section, and RFC 9113 §8.7 as a verdict — without a socket.
@Suite("HTTP/2 faults, route protocols and retriesOnlyUnprocessed")
struct HTTP2PlanTests {
    @Test func http2FaultsLoadWithTheirParameters() throws {
        let scenario = try load(routeJSON(#"""
            "responses": [
              {"status": 201, "fault": {"type": "rst-stream", "code": "refused_stream"}},
              {"status": 200, "text": "abcdef", "fault": {"type": "rst-stream", "after": "body", "bytes": 2}},
              {"fault": {"type": "goaway", "lastStreamId": 7, "code": "ENHANCE_YOUR_CALM", "graceful": true}},
              {"fault": {"type": "goaway", "lastStreamId": "current"}},
              {"fault": {"type": "raw-frames", "preset": "data-on-stream-0"}},
              {"fault": {"type": "raw-frames", "base64": "AAAA"}}]
            """#))
        let steps = scenario.routes[0].responses.map { $0.fault! }
        #expect(steps[0].name == .rstStream && steps[0].code == .refusedStream && steps[0].after == .nothing)
        #expect(steps[1].after == .body && steps[1].bytes == 2 && steps[1].code == nil)
        #expect(steps[2].lastStream == .stream(7) && steps[2].code == .enhanceYourCalm && steps[2].graceful)
        #expect(steps[3].lastStream == .current && !steps[3].graceful)
        #expect(steps[4].frames == HTTP2FramePreset.dataOnStreamZero.frames && steps[5].rawBytes == [0, 0, 0])
        #expect(scenario.routes[0].servedProtocols == [.http2], "HTTP/2 faults: an h2-only route")
    }

    @Test func badHTTP2FaultsNameThePathAndTheProblem() {
        #expect(errors(routeJSON(#""responses": [{"fault": {"type": "rst-stream", "code": "REFUSED"}}]"#)).first?
            .hasPrefix(#"routes[0].responses[0].fault.code: unknown HTTP/2 error code "REFUSED""#) == true)
        #expect(errors(routeJSON(#""responses": [{"fault": "raw-frames"}]"#)).first?
            .hasPrefix("routes[0].responses[0].fault: raw-frames needs its bytes") == true)
        #expect(errors(routeJSON(#""responses": [{"fault": {"type": "raw-frames", "base64": "AA==", "preset": "bad-hpack"}}]"#))
            == [#"routes[0].responses[0].fault.preset: give "base64" or "preset", not both"#])
        #expect(errors(routeJSON(#""responses": [{"fault": {"type": "reset", "code": "CANCEL"}}]"#))
            == [#"routes[0].responses[0].fault.code: reset takes no "code""#])
        #expect(errors(routeJSON(#""responses": [{"fault": {"type": "goaway", "lastStreamId": "next"}}]"#)).first?
            .hasPrefix("routes[0].responses[0].fault.lastStreamId:") == true)
    }

    @Test func aRouteServesTheProtocolsItsFaultsExistOn() throws {
        let both = try load(routeJSON(#""responses": [{"fault": "reset"}, {"status": 200}]"#))
        #expect(both.routes[0].servedProtocols == [.http1, .http2])
        let http1 = try load(routeJSON(#""responses": [{"fault": "garbage"}]"#))
        #expect(http1.routes[0].servedProtocols == [.http1])
        let chaos = try load(routeJSON(#""responses": [{}], "chaos": {"rate": 0.5, "faults": ["malformed-chunk"]}"#))
        #expect(chaos.routes[0].servedProtocols == [.http1], "chaos faults count too")
        let named = try load(routeJSON(#""protocols": ["h2c"], "responses": [{"status": 200}]"#))
        #expect(named.routes[0].servedProtocols == [.http2], "h2c is h2 in clear text")
    }

    @Test func aNamedProtocolAFaultCannotCarryIsAnError() {
        #expect(errors(routeJSON(#""protocols": ["http/1.1", "h2"], "responses": [{"fault": "garbage"}]"#)) == [
            #"routes[0].responses[0].fault: fault "garbage" exists only on http/1.1, but the route serves h2 too "#
                + #"(routes[0].protocols); take h2 out of its protocols or move the fault to a route of its own"#,
        ])
        #expect(errors(routeJSON(#""responses": [{"fault": "overlong-body"}, {"fault": "goaway"}]"#)).first?
            .contains("one route cannot serve both; split it in two") == true)
        #expect(errors(routeJSON(#""protocols": ["h3"], "responses": [{}]"#)).first?
            .hasPrefix(#"routes[0].protocols[0]: unknown protocol "h3""#) == true)
        #expect(errors(routeJSON(#""protocols": [], "responses": [{}]"#)).first?
            .hasPrefix("routes[0].protocols: needs at least one protocol") == true)
    }

    @Test func anotherProtocolIsRefusedWithoutPlayingTheRoute() throws {
        let engine = Engine(scenarios: [try load(routeJSON(#""responses": [{"fault": "garbage"}, {"status": 204}]"#))])
        let overH2 = engine.decide(EngineTests.request("GET", "/x", version: .http2), requestID: 1)
        #expect(overH2.script.steps == [.http2(.resetStream(code: HTTP2ErrorCode.http11Required.rawValue))])
        #expect(overH2.step == nil && overH2.notes.contains { $0.description.contains("does not serve h2") })
        let overHTTP1 = engine.decide(EngineTests.request("GET", "/x"), requestID: 2)
        #expect(overHTTP1.step == 0 && overHTTP1.script.fault == "garbage", "the refusal moved no cursor")

        let h2Only = Engine(scenarios: [try load(routeJSON(#""responses": [{"fault": "rst-stream"}]"#))])
        let refused = h2Only.decide(EngineTests.request("GET", "/x"), requestID: 1)
        #expect(refused.script.status == 505 && refused.step == nil)
    }

    @Test func http2FaultsBecomeFrameSteps() throws {
        let engine = Engine(scenarios: [try load(routeJSON(#"""
            "responses": [
              {"status": 200, "text": "abcdef", "fault": {"type": "rst-stream", "code": "CANCEL", "after": "body", "bytes": 2}},
              {"status": 200, "text": "ok", "fault": {"type": "goaway", "lastStreamId": "current"}}]
            """#))])
        let reset = engine.decide(EngineTests.request("GET", "/x", version: .http2), requestID: 1).script.steps
        #expect(reset.count == 3 && reset[1] == .body(Array("ab".utf8)))
        #expect(reset.last == .http2(.resetStream(code: HTTP2ErrorCode.cancel.rawValue)))
        let goaway = engine.decide(EngineTests.request("GET", "/x", version: .http2), requestID: 2).script.steps
        #expect(goaway.first == .http2(.goaway(last: .current, code: 0, graceful: false)) && goaway.last == .end)
    }

    @Test func anHTTP2SectionLoadsAndIsChecked() throws {
        let scenario = try load(routeJSON(#""responses": [{}]"#, extra: #"""
            "http2": {"maxConcurrentStreams": 1, "initialWindowSize": 0, "windowUpdateAfterMs": 200,
                      "maxFrameSize": 32768, "headerTableSize": 0, "goawayAfterStreams": 3, "ackPings": false},
            """#))
        let plan = try #require(scenario.http2)
        #expect(plan.maxConcurrentStreams == 1 && plan.initialWindowSize == 0 && plan.windowUpdateAfterMilliseconds == 200)
        #expect(plan.maxFrameSize == 32768 && plan.headerTableSize == 0 && plan.goawayAfterStreams == 3 && !plan.ackPings)
        #expect(Engine(scenarios: [scenario]).http2Plan == plan)
        #expect(errors(routeJSON(#""responses": [{}]"#, extra: #""http2": {"maxFrameSize": 100},"#)).first?
            .hasPrefix("http2.maxFrameSize:") == true)
        #expect(errors(routeJSON(#""responses": [{}]"#, extra: #""http2": {"windowUpdateAfterMs": 5},"#))
            == [#"http2.windowUpdateAfterMs: needs "initialWindowSize" (the window it opens)"#])
    }

    // MARK: - retriesOnlyUnprocessed

    private static func entry(
        _ sequence: Int, _ method: String, stream: Int?, outcome: ExchangeOutcome, fault: String? = nil,
        key: String? = nil
    ) -> JournalEntry {
        let headers = key.map { [("Idempotency-Key", $0)] } ?? []
        let request = EngineTests.request(method, "/orders", headers: headers, body: "{}", version: stream == nil ? .http1_1 : .http2)
        var entry = JournalEntry(
            sequence: sequence, receivedAtWall: 0, receivedAtMonotonicNanos: UInt64(sequence) * 100_000_000,
            connectionID: sequence, indexOnConnection: 0, clientAddress: "t", head: request.head, body: request.body,
            bodySize: request.body.count)
        entry.route = .route("orders")
        entry.outcome = outcome
        entry.finishedAtMonotonicNanos = entry.receivedAtMonotonicNanos
        entry.fault = fault
        entry.status = outcome == .completed ? 201 : nil
        if let stream {
            entry.exchangeProtocol = .http2
            entry.stream = stream
        }
        return entry
    }

    private static func judge(_ entries: [JournalEntry]) -> Verdict {
        var expect = Expectations()
        expect.retriesOnlyUnprocessed = true
        return Verdicts.evaluate(expect, VerdictInput(entries: entries))[0]
    }

    @Test func aRetryOfARefusedOrGoneAwayStreamIsSafe() {
        let verdict = Self.judge([
            Self.entry(1, "POST", stream: 1, outcome: .notProcessed, fault: "rst-stream"),
            Self.entry(2, "POST", stream: 3, outcome: .notProcessed),
            Self.entry(3, "POST", stream: 1, outcome: .completed),
        ])
        #expect(verdict.passed && verdict.evidence == [1, 2, 3])
        #expect(verdict.explanation.contains("#1 (h2c stream 1 on connection 1, RST_STREAM REFUSED_STREAM) → #2"))
        #expect(verdict.explanation.contains("above the last stream id of the server's GOAWAY) → #3"))
    }

    @Test func aRetryOfAProcessedRequestFailsWithEvidence() {
        let reset = Self.judge([
            Self.entry(1, "POST", stream: 1, outcome: .streamReset, fault: "rst-stream"),
            Self.entry(2, "POST", stream: 1, outcome: .completed),
        ])
        #expect(!reset.passed && reset.evidence == [1, 2])
        #expect(reset.explanation.hasSuffix("the server reset its stream after taking it (RST_STREAM, not REFUSED_STREAM)"))
        let http1 = Self.judge([
            Self.entry(1, "POST", stream: nil, outcome: .resetSent, fault: "reset"),
            Self.entry(2, "POST", stream: nil, outcome: .completed),
        ])
        #expect(!http1.passed && http1.explanation.contains("(http/1.1 on connection 1)"))
        let keyed = Self.judge([
            Self.entry(1, "POST", stream: 1, outcome: .streamReset, key: "k"),
            Self.entry(2, "POST", stream: 1, outcome: .completed, key: "k"),
            Self.entry(3, "GET", stream: 1, outcome: .clientClosed), Self.entry(4, "GET", stream: 1, outcome: .completed),
        ])
        // A keyed POST was reset and sent again with its key: judged, and safe.
        #expect(keyed.outcome == .pass && keyed.explanation.hasPrefix("1 POST or PATCH attempt(s) failed with their processing unknown"))
    }
}
