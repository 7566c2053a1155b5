import Testing
@testable import FaultlineCore

/// The engine without sockets: matching, scripts, templates, seeded delays, fault plans.
@Suite struct EngineTests {
    static func request(
        _ method: String, _ target: String, headers: [(String, String)] = [], body: String = "",
        version: HTTPVersion = .http1_1
    ) -> HTTPRequest {
        HTTPRequest(
            head: HTTPRequestHead(
                method: method, target: target, version: version,
                headers: HTTPHeaders([("Host", "test")] + headers.map { (name: $0.0, value: $0.1) })),
            body: Array(body.utf8))
    }

    static func path(_ source: String, prefix: Bool = false) -> PathPattern {
        let segments = source.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map {
            $0.hasPrefix("{") ? PathPattern.Segment.parameter(String($0.dropFirst().dropLast())) : .literal(String($0))
        }
        return PathPattern(segments: Array(segments), isPrefix: prefix, source: source)
    }

    /// The bytes a plan writes, concatenated, as text.
    /// What a script puts on an HTTP/1.1 wire, as text.
    static func written(_ script: ResponseScript) -> String {
        String(decoding: HTTP1Renderer.bytes(script), as: UTF8.self)
    }

    static func scenario(_ routes: [Route], seed: UInt64 = 1) -> Scenario {
        Scenario(name: "test", seed: seed, routes: routes)
    }

    @Test func scriptPlaysInOrderThenRepeatsLast() {
        let route = Route(
            id: "flaky", match: RouteMatch(methods: ["GET"], path: Self.path("/p")),
            responses: [ResponseStep(status: 503, times: 2), ResponseStep(status: 200)])
        let engine = Engine(scenarios: [Self.scenario([route])])
        let statuses = (1...5).map { engine.decide(Self.request("GET", "/p"), requestID: $0).script.status }
        #expect(statuses == [503, 503, 200, 200, 200])
        let steps = (1...2).map { _ in engine.decide(Self.request("GET", "/p"), requestID: 0).step }
        #expect(steps == [1, 1])
    }

    @Test func versionsChangeOnlyWithContent() {
        let route = { (status: Int) in
            Route(id: "r", match: RouteMatch(methods: ["GET"], path: Self.path("/p")), responses: [ResponseStep(status: status)])
        }
        var other = Self.scenario([route(204)])
        other.name = "other"
        let engine = Engine(scenarios: [Self.scenario([route(200)])])
        #expect(engine.versions == [1])
        #expect(engine.decide(Self.request("GET", "/p"), requestID: 1).scenarioVersion == 1)
        engine.load([Self.scenario([route(200)])])
        engine.reset()
        #expect(engine.versions == [1], "the same document again, or a reset, is the same version")
        engine.load([Self.scenario([route(201)]), other])
        #expect(engine.versions == [2, 1])
        #expect(engine.decide(Self.request("GET", "/p"), requestID: 2).scenarioVersion == 2)
        engine.load([Self.scenario([route(200)])])
        #expect(engine.versions == [3], "going back to older content is a new version: versions only grow")
        engine.load([other])
        #expect(engine.versions == [1])
        #expect(engine.decide(Self.request("GET", "/nothing"), requestID: 3).scenarioVersion == nil)
    }

    @Test func cycleAndFailAfterLast() {
        let steps = [ResponseStep(status: 201), ResponseStep(status: 202)]
        let cycle = Route(id: "c", match: RouteMatch(path: Self.path("/c")), responses: steps, afterLast: .cycle)
        let fail = Route(id: "f", match: RouteMatch(path: Self.path("/f")), responses: steps, afterLast: .fail)
        let engine = Engine(scenarios: [Self.scenario([cycle, fail])])
        #expect((1...5).map { engine.decide(Self.request("GET", "/c"), requestID: $0).script.status } == [201, 202, 201, 202, 201])
        #expect((1...3).map { engine.decide(Self.request("GET", "/f"), requestID: $0).script.status } == [201, 202, 500])
        let exhausted = engine.decide(Self.request("GET", "/f"), requestID: 9)
        #expect(Self.written(exhausted.script).contains("script exhausted"))
        #expect(exhausted.route == .route("f") && exhausted.step == nil)
    }

    @Test func sequenceByKeepsACursorPerValue() {
        let route = Route(
            id: "r", match: RouteMatch(path: Self.path("/r")),
            responses: [ResponseStep(status: 503), ResponseStep(status: 200)], sequenceBy: .header("X-Test-Case"))
        let engine = Engine(scenarios: [Self.scenario([route])])
        func status(_ testCase: String) -> Int? {
            engine.decide(Self.request("GET", "/r", headers: [("X-Test-Case", testCase)]), requestID: 0).script.status
        }
        #expect(status("a") == 503)
        #expect(status("b") == 503)
        #expect(status("a") == 200)
        #expect(status("b") == 200)
        engine.reset()
        #expect(status("a") == 503)
    }

    @Test func matchingUsesEveryCondition() throws {
        let route = Route(
            id: "search",
            match: RouteMatch(
                methods: ["POST"], path: Self.path("/v1/items/{id}"),
                query: [("mode", .equals("full"))], headers: [("X-Token", .regex(try CompiledRegex("^t[0-9]+$")))],
                body: .contains("widget")),
            responses: [ResponseStep(status: 200)])
        let engine = Engine(scenarios: [Self.scenario([route])])
        let good = Self.request("POST", "/v1/items/7?mode=full", headers: [("x-token", "t42")], body: "a widget")
        #expect(engine.decide(good, requestID: 1).route == .route("search"))
        let cases: [(HTTPRequest, String)] = [
            (Self.request("GET", "/v1/items/7?mode=full", headers: [("x-token", "t42")], body: "a widget"), "method GET"),
            (Self.request("POST", "/v1/items?mode=full", headers: [("x-token", "t42")], body: "widget"), "path /v1/items"),
            (Self.request("POST", "/v1/items/7?mode=lite", headers: [("x-token", "t42")], body: "widget"), "query parameter mode"),
            (Self.request("POST", "/v1/items/7?mode=full", headers: [("x-token", "nope")], body: "widget"), "header X-Token"),
            (Self.request("POST", "/v1/items/7?mode=full", headers: [("x-token", "t1")], body: "gadget"), "body does not contain"),
        ]
        for (request, reason) in cases {
            let decision = engine.decide(request, requestID: 2)
            #expect(decision.route == nil)
            #expect(decision.script.status == 404)
            #expect(decision.unmatched?.nearestRoute == "search")
            #expect(decision.unmatched?.reason.hasPrefix(reason) == true, "\(decision.unmatched?.reason ?? "nil")")
        }
    }

    @Test func prefixAndPercentDecodedSegments() {
        let route = Route(
            id: "files", match: RouteMatch(path: Self.path("/files/", prefix: true)), responses: [ResponseStep()])
        let exact = Route(
            id: "named", match: RouteMatch(path: Self.path("/names/{name}")),
            responses: [ResponseStep(body: .text("hello {{path.name}}"))])
        let engine = Engine(scenarios: [Self.scenario([route, exact])])
        #expect(engine.decide(Self.request("GET", "/files/a/b/c.txt"), requestID: 1).route == .route("files"))
        #expect(engine.decide(Self.request("GET", "/files"), requestID: 1).route == .route("files"))
        #expect(engine.decide(Self.request("GET", "/filesystem"), requestID: 1).route == nil)
        let named = engine.decide(Self.request("GET", "/names/J%C3%BCrgen%20K"), requestID: 1)
        #expect(Self.written(named.script).hasSuffix("hello Jürgen K"))
        #expect(engine.decide(Self.request("GET", "/names/"), requestID: 1).route == nil)
    }

    @Test func nearestRouteIsTheClosestMiss() {
        let routes = [
            Route(id: "orders", match: RouteMatch(methods: ["GET"], path: Self.path("/v1/orders")), responses: [ResponseStep()]),
            Route(id: "order", match: RouteMatch(methods: ["GET"], path: Self.path("/v1/orders/{id}")), responses: [ResponseStep()]),
        ]
        let engine = Engine(scenarios: [Self.scenario(routes)])
        let decision = engine.decide(Self.request("DELETE", "/v1/orders/9"), requestID: 1)
        #expect(decision.unmatched?.nearestRoute == "order")
        #expect(decision.unmatched?.reason == "method DELETE is not GET")
        let body = Self.written(decision.script)
        #expect(body.hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        #expect(body.contains("\"route\":\"order\""))
    }

    @Test func templatesRenderRequestValues() {
        let route = Route(
            id: "t", match: RouteMatch(path: Self.path("/t/{id}")),
            responses: [ResponseStep(
                status: 201, headers: [("Location", "/t/{{resource.id}}")],
                body: .json(.object([
                    ("id", .string("{{path.id}}")), ("q", .string("{{query.q}}")), ("who", .string("{{header.X-User}}")),
                    ("request", .string("{{request.id}}")), ("resource", .string("{{resource.id}}")),
                    ("unknown", .string("{{nope}}")), ("n", .number("1.50")),
                ])))])
        let engine = Engine(scenarios: [Self.scenario([route])])
        let first = Self.written(engine.decide(Self.request("GET", "/t/42?q=a+b", headers: [("X-User", "ann")]), requestID: 17).script)
        #expect(first.contains("Location: /t/1\r\n"))
        #expect(first.hasSuffix(#"{"id":"42","q":"a b","who":"ann","request":"17","resource":"1","unknown":"{{nope}}","n":1.50}"#))
        let second = Self.written(engine.decide(Self.request("GET", "/t/1"), requestID: 18).script)
        #expect(second.contains("Location: /t/2\r\n"))
        #expect(second.contains(#""who":"""#))
    }

    @Test func seededDelaysAreReproducible() {
        let route = Route(
            id: "slow", match: RouteMatch(path: Self.path("/s")),
            responses: [ResponseStep(delay: .logNormal(medianMilliseconds: 50, sigma: 0.8))])
        let uniform = Route(
            id: "u", match: RouteMatch(path: Self.path("/u")), responses: [ResponseStep(delay: .uniform(min: 10, max: 20))])
        func delays(seed: UInt64) -> [Int] {
            let engine = Engine(scenarios: [Self.scenario([route, uniform], seed: seed)])
            return (0..<50).map { i in
                let plan = engine.decide(Self.request("GET", i % 2 == 0 ? "/s" : "/u"), requestID: i).script
                guard case .wait(let ms)? = plan.steps.first else { return 0 }
                return ms
            }
        }
        let a = delays(seed: 99), b = delays(seed: 99), c = delays(seed: 100)
        #expect(a == b)
        #expect(a != c)
        let uniformDelays = a.enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        #expect(uniformDelays.allSatisfy { (10...20).contains($0) })
        #expect(Set(uniformDelays).count > 3)
    }

    @Test func keepAliveFollowsTheClientAndTheStep() {
        let routes = [
            Route(id: "a", match: RouteMatch(path: Self.path("/a")), responses: [ResponseStep(body: .text("x"))]),
            Route(id: "c", match: RouteMatch(path: Self.path("/c")), responses: [ResponseStep(closeConnection: true)]),
        ]
        let engine = Engine(scenarios: [Self.scenario(routes)])
        let plain = engine.decide(Self.request("GET", "/a"), requestID: 1).script
        #expect(plain.keepAlive && !Self.written(plain).contains("Connection:"))
        let old = engine.decide(Self.request("GET", "/a", version: .http1_0), requestID: 2).script
        #expect(!old.keepAlive && Self.written(old).contains("Connection: close\r\n") && old.steps.last == .endConnection(.connectionClose))
        let oldKeep = engine.decide(Self.request("GET", "/a", headers: [("Connection", "keep-alive")], version: .http1_0), requestID: 3).script
        #expect(oldKeep.keepAlive && Self.written(oldKeep).contains("Connection: keep-alive\r\n"))
        let closing = engine.decide(Self.request("GET", "/c"), requestID: 4).script
        #expect(!closing.keepAlive && Self.written(closing).contains("Connection: close\r\n"))
        let head = engine.decide(Self.request("HEAD", "/a"), requestID: 5).script
        #expect(Self.written(head).hasSuffix("Content-Type: text/plain; charset=utf-8\r\nContent-Length: 1\r\n\r\n"))
    }

    @Test func dripSplitsTheBodyWithWaits() {
        let route = Route(
            id: "d", match: RouteMatch(path: Self.path("/d")),
            responses: [ResponseStep(body: .text("abcdefghij"), drip: DripSpec(size: 4, intervalMilliseconds: 25))])
        let plan = Engine(scenarios: [Self.scenario([route])]).decide(Self.request("GET", "/d"), requestID: 1).script
        let shape = plan.steps.map { step -> String in
            switch step {
            case .head: return "head"
            case .body(let bytes): return String(decoding: bytes, as: UTF8.self)
            case .wait(let ms): return "wait \(ms)"
            default: return "\(step)"
            }
        }
        #expect(shape == ["head", "abcd", "wait 25", "efgh", "wait 25", "ij", "end"])
    }

    @Test func faultScriptsAreProtocolNeutralSteps() {
        func plan(_ fault: FaultName) -> ResponseScript {
            let route = Route(
                id: "f", match: RouteMatch(path: Self.path("/f")),
                responses: [ResponseStep(body: .json(.object([("ok", .bool(true))])), fault: FaultSpec(fault))])
            return Engine(scenarios: [Self.scenario([route])]).decide(Self.request("GET", "/f"), requestID: 1).script
        }
        #expect(plan(.reset).steps == [.abortConnection(.reset)])
        #expect(plan(.emptyReply).steps == [.abortConnection(.close)])
        #expect(plan(.hang).steps == [.hang])
        #expect(plan(.halfClose).steps == [.abortConnection(.shutdownWrite), .hang])
        let truncated = plan(.truncateBody)
        #expect(Self.written(truncated).contains("Content-Length: 11\r\n") && Self.written(truncated).hasSuffix("\r\n\r\n{\"ok\""))
        #expect(truncated.steps.last == .abortExchange && truncated.status == 200 && truncated.fault == "truncate-body")
        #expect(plan(.reset).status == nil)
        #expect(Self.written(plan(.overlongBody)).contains("{\"ok\":true}FAULTLINE-OVERLONG"))
        #expect(Self.written(plan(.wrongContentType)).contains("Content-Type: text/html"))
        #expect(plan(.corruptJSON).keepAlive)
    }
}

/// The journal's ring: eviction, exact counters, updates by sequence number, clearing.
@Suite struct JournalTests {
    static func entry(route: String?) -> JournalEntry {
        var entry = JournalEntry(
            receivedAtWall: 0, receivedAtMonotonicNanos: 0, connectionID: 1, indexOnConnection: 0,
            clientAddress: "test", head: nil, body: Array(repeating: 65, count: 10), bodySize: 10)
        entry.route = route.map(DecisionSource.route)
        return entry
    }

    @Test func evictsTheOldestAndKeepsCountersExact() {
        var journal = Journal(capacity: 3, maxBodyBytes: 4)
        for i in 1...7 { journal.record(Self.entry(route: i % 2 == 0 ? "even" : "odd")) }
        #expect(journal.entries.map(\.sequence) == [5, 6, 7])
        #expect(journal.totalRecorded == 7 && journal.evicted == 4 && journal.retainedCount == 3)
        #expect(journal.perRoute == ["odd": 4, "even": 3])
        #expect(journal.entries.allSatisfy { $0.body.count == 4 && $0.bodySize == 10 })
        journal.update(6) { $0.status = 201 }
        journal.update(2) { $0.status = 500 }  // evicted: ignored
        #expect(journal.entry(6)?.status == 201 && journal.entry(2) == nil)
        #expect(journal.query(JournalFilter(route: "odd")).map(\.sequence) == [5, 7])
        #expect(journal.query(JournalFilter(), limit: 2).map(\.sequence) == [6, 7])
        #expect(journal.count(JournalFilter(status: 201)) == 1)
        journal.clear()
        #expect(journal.entries.isEmpty)
        #expect(journal.record(Self.entry(route: nil)) == 8)
        #expect(journal.entries.map(\.sequence) == [8] && journal.totalRecorded == 8)
    }

    @Test func requestOutcomesCountEveryRequestEvictedAndClearedOnesToo() {
        #expect(ExchangeOutcome.allCases.map(\.counterIndex) == Array(ExchangeOutcome.allCases.indices))
        var journal = Journal(capacity: 2)
        for outcome in [ExchangeOutcome.completed, .resetSent, .completed, .pending] {
            var entry = Self.entry(route: "r")
            entry.outcome = outcome
            journal.record(entry)
        }
        var attempt = Self.entry(route: nil)
        attempt.isConnectionEntry = true   // a connection's entry is no request
        journal.record(attempt)
        journal.update(4) { $0.outcome = .cancelled }   // kept: counted as it ends
        #expect(journal.requestOutcomes().map { "\($0.count) \($0.outcome.rawValue)" }
            == ["2 completed", "1 reset-sent", "1 cancelled"])
        journal.clear()
        #expect(journal.requestOutcomes().map(\.count) == [2, 1, 1])
    }

    @Test func receiveTimesAreISO8601InUTC() {
        #expect(JournalEntry.iso8601(0) == "1970-01-01T00:00:00.000Z")
        #expect(JournalEntry.iso8601(951_782_400.5) == "2000-02-29T00:00:00.500Z")
        #expect(JournalEntry.iso8601(1_795_966_129.123) == "2026-11-29T15:28:49.123Z")
    }
}

@Suite("Prepared responses")
struct PreparedResponseTests {
    /// A plain step's prepared scripts are an optimization only: for every client that takes them (HTTP/1.1 kept
    /// alive or closing, HTTP/1.0 closing, HTTP/2), they are what `respond` builds for that request.
    @Test func preparedScriptsAreWhatRespondBuilds() throws {
        let steps = [
            ResponseStep(status: 200, body: .text("hello")),
            ResponseStep(status: 204),
            ResponseStep(status: 503, headers: [(name: "Retry-After", value: "2"), (name: "Content-Type", value: "x/y")],
                         body: .bytes([1, 2, 3])),
        ]
        let requests = [
            EngineTests.request("GET", "/a"),
            EngineTests.request("GET", "/a", headers: [("Connection", "close")]),
            EngineTests.request("GET", "/a", version: .http1_0),
            EngineTests.request("GET", "/a", headers: [("Connection", "Upgrade, Close")], version: .http1_0),
            EngineTests.request("GET", "/a", version: .http2),
        ]
        let date = HTTPDateCache().line(atWall: 1_700_000_000)
        for step in steps {
            let prepared = PreparedStep(step)
            for request in requests {
                var random = SeededRandom(seed: 1)
                let fast = try #require(ResponsePlanner.cachedPlan(
                    prepared, for: request, random: &random, extraHeaders: [], keepResponse: false),
                    "\(step.status) \(request.head.version) \(request.headers.fields)")
                var other = SeededRandom(seed: 1)
                let planned = ResponsePlanner.respond(
                    HTTPResponse(status: step.status, headers: PreparedStep.headers(step, rendered: nil),
                                 body: prepared.staticBody ?? []),
                    step: step, after: [], for: request, random: &other, extraHeaders: [], keepResponse: false)
                #expect(fast.steps == planned.steps && fast.keepAlive == planned.keepAlive
                        && fast.status == planned.status, "\(step.status) \(request.head.version) \(request.headers.fields)")
                #expect(HTTP1Renderer.bytes(fast, dateLine: date) == HTTP1Renderer.bytes(planned, dateLine: date))
                #expect(fast.keepAlive == request.head.clientWantsKeepAlive)
            }
        }
        // HTTP/1.0 kept alive adds `Connection: keep-alive`: not prepared.
        var random = SeededRandom(seed: 1)
        #expect(ResponsePlanner.cachedPlan(
            PreparedStep(steps[0]), for: EngineTests.request("GET", "/a", headers: [("Connection", "keep-alive")],
                                                              version: .http1_0),
            random: &random, extraHeaders: [], keepResponse: false) == nil)
    }
}
