import Testing
@testable import FaultlineCore

/// The `Date` field on every response the server originates (RFC 9110 §6.6.1), on a fake clock: scripted steps,
/// the engine's own answers, resources and faults, through the HTTP/1.1 connection machine as the server runs them.
/// The date is the clock's at the moment the head is written, formatted once per second.
@Suite struct ResponseDateTests {
    /// Tue, 14 Nov 2023 22:13:20 GMT.
    static let wall = 1_700_000_000.0
    static let first = "Tue, 14 Nov 2023 22:13:20 GMT"
    static let second = "Tue, 14 Nov 2023 22:13:21 GMT"

    /// An engine behind the connection machine, on a fake clock: what the server's Connection and Dispatcher do
    /// for the machine, minus sockets and the journal.
    final class EngineIO: HTTP1ConnectionIO {
        let engine: Engine
        /// Fake clock, milliseconds since `ResponseDateTests.wall`.
        var clock = 0
        var written: [UInt8] = []
        private var timers: [HTTP1Timer: Int] = [:]
        weak var machine: HTTP1Connection?

        init(_ engine: Engine) { self.engine = engine }

        var wallSeconds: Double { ResponseDateTests.wall + Double(clock) / 1000 }
        var instant: EngineInstant { EngineInstant(monotonicMilliseconds: UInt64(clock), wallSeconds: wallSeconds) }

        func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
            written += bytes
            return true
        }
        var pendingOutput: Int { 0 }
        var hasUnreadInput: Bool { false }
        var peerHasReset: Bool { false }
        func probePeer() {}
        func shutdownWrite() {}
        func omitCloseNotify() {}
        func close(abortive: Bool) {}
        func closeSoon() {}
        func setReading(_ enabled: Bool) {}
        func startTimer(_ timer: HTTP1Timer, milliseconds: Int) { timers[timer] = clock + milliseconds }
        func cancelTimer(_ timer: HTTP1Timer) { timers[timer] = nil }
        func now() -> Arrival { Arrival(wall: wallSeconds, monotonicNanos: UInt64(clock) * 1_000_000) }
        func dateLine() -> [UInt8] { engine.dates.line(atWall: wallSeconds) }
        func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange {
            let decision = engine.decide(request, requestID: context.indexOnConnection + 1, now: instant)
            return Exchange(sequence: context.indexOnConnection + 1, script: decision.script)
        }
        func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange {
            let response = HTTPResponse.json(error.status, .object([("reason", .string(error.reason))]))
            let head = ResponseHead(
                status: error.status, headers: response.headers, bodyLength: response.body.count, close: true)
            return Exchange(sequence: nil, script: ResponseScript(
                steps: [.head(head), .body(response.body), .end, .endConnection(.connectionClose)], status: error.status,
                keepAlive: false))
        }
        func upgrade(_ exchange: Exchange, _ plan: WebSocketSessionPlan, early: [UInt8]) {}
        func journalUnanswered(_ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext,
                               _ outcome: ExchangeOutcome) {}
        func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?) {}
        func policyClosed(after sequence: Int, _ reason: PolicyClose) {}

        /// Moves the clock on, firing due timers in deadline order.
        func advance(_ milliseconds: Int) {
            let end = clock + milliseconds
            while let (timer, due) = timers.filter({ $0.value <= end }).min(by: { $0.value < $1.value }) {
                clock = due
                timers[timer] = nil
                machine?.timerFired(timer)
            }
            clock = end
        }

        /// What was written since the last call, as text.
        func take() -> String {
            defer { written = [] }
            return String(decoding: written, as: UTF8.self)
        }
    }

    static func connection(_ scenario: String, at clock: Int = 0) throws -> (HTTP1Connection, EngineIO) {
        let engine = Engine(scenarios: [try ScenarioTestSupport.load(scenario)], now: EngineInstant(wallSeconds: wall))
        let io = EngineIO(engine)
        io.clock = clock
        let machine = HTTP1Connection(
            io: io, settings: HTTP1Settings(parserLimits: HTTPParserLimits(), headerTimeoutMilliseconds: 10_000))
        io.machine = machine
        return (machine, io)
    }

    /// The response to `GET path` (or the raw request text given), as written.
    static func answer(_ machine: HTTP1Connection, _ io: EngineIO, _ path: String, _ extra: String = "",
                       method: String = "GET") -> String {
        Array("\(method) \(path) HTTP/1.1\r\nHost: x\r\n\(extra)\r\n".utf8).withUnsafeBytes { machine.received($0) }
        return io.take()
    }

    /// The values of every `Date` field in a response's head.
    static func dates(_ response: String) -> [String] {
        let head = response.components(separatedBy: "\r\n\r\n")[0]
        return head.components(separatedBy: "\r\n").dropFirst()
            .filter { $0.lowercased().hasPrefix("date:") }
            .map { String($0.dropFirst(5)).trimmingASCIIWhitespace }
    }

    static func routes(_ routes: String, extra: String = "") -> String {
        #"{"name": "d", "routes": "# + routes + extra + "}"
    }

    /// A scenario whose one route, `/a`, plays `responses` (a JSON array's text).
    static func routeA(_ responses: String) -> String {
        routes(#"[{"id": "a", "match": {"path": "/a"}, "responses": "# + responses + "}]")
    }

    // MARK: - The cache and the renderer

    @Test func theCacheFormatsOncePerSecond() {
        let cache = HTTPDateCache()
        let line = cache.line(atWall: Self.wall)
        #expect(String(decoding: line, as: UTF8.self) == "Date: \(Self.first)\r\n")
        let again = cache.line(atWall: Self.wall + 0.999)
        #expect(line.withUnsafeBufferPointer { $0.baseAddress } == again.withUnsafeBufferPointer { $0.baseAddress },
                "within the second: the same text, not formatted again")
        #expect(cache.value(atWall: Self.wall + 1) == Self.second, "the next second")
        #expect(String(decoding: HTTPDateCache.value(ofLine: cache.line(atWall: Self.wall + 1.5)), as: UTF8.self)
            == Self.second)
        #expect(cache.value(atWall: Self.wall - 0.5) == "Tue, 14 Nov 2023 22:13:19 GMT", "a clock set back")
        #expect(cache.value(atWall: .nan) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(cache.value(atWall: 1e300) == "Fri, 31 Dec 9999 23:59:59 GMT")
    }

    @Test func theRendererWritesTheSharedHeadAroundTheDate() {
        let head = ResponseHead(status: 200, headers: HTTPHeaders([("X-A", "1")]), bodyLength: 2, close: false)
        #expect(head.addsDate && head.http1 == Array("HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n".utf8),
                "the head itself holds no date")
        let script = ResponseScript(steps: [.head(head), .body(Array("ok".utf8)), .end], status: 200, keepAlive: true)
        let line = HTTPDateCache().line(atWall: Self.wall)
        #expect(String(decoding: HTTP1Renderer.bytes(script, dateLine: line), as: UTF8.self)
            == "HTTP/1.1 200 OK\r\nDate: \(Self.first)\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nok")
        let own = ResponseHead(status: 200, headers: HTTPHeaders([("date", "x")]), bodyLength: 0, close: false)
        let none = ResponseHead(status: 204, headers: HTTPHeaders(), bodyLength: 0, close: false, date: false)
        #expect(!own.addsDate && !none.addsDate)
        var renderer = HTTP1Renderer()
        var out: [UInt8] = []
        for unDated in [own, none] {
            renderer.render(.head(unDated), into: &out, date: {
                Issue.record("a head that adds no Date asked for one")
                return []
            })
        }
        #expect(String(decoding: out, as: UTF8.self)
            == "HTTP/1.1 200 OK\r\ndate: x\r\nContent-Length: 0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
    }

    // MARK: - Scripted steps

    @Test func aPlainStepCarriesTheClocksDateRightAfterTheStatusLine() throws {
        let (machine, io) = try Self.connection(Self.routeA(#"[{"text": "hi"}]"#), at: 500)
        let response = Self.answer(machine, io, "/a")
        #expect(response.hasPrefix("HTTP/1.1 200 OK\r\nDate: \(Self.first)\r\nContent-Type: text/plain"))
        #expect(Self.dates(response) == [Self.first])
        #expect(response.hasSuffix("\r\n\r\nhi"))
    }

    @Test func theDateMovesOnAtTheSecondBoundaryForTheSameSharedHead() throws {
        let (machine, io) = try Self.connection(Self.routeA(#"[{"text": "hi"}]"#), at: 999)
        #expect(Self.dates(Self.answer(machine, io, "/a")) == [Self.first])
        #expect(Self.dates(Self.answer(machine, io, "/a")) == [Self.first])
        io.advance(1)
        #expect(Self.dates(Self.answer(machine, io, "/a")) == [Self.second])
    }

    @Test func aDelayedHeadIsDatedWhenItIsWritten() throws {
        let (machine, io) = try Self.connection(Self.routeA(#"[{"text": "late", "delayMs": 1200}]"#))
        #expect(Self.answer(machine, io, "/a").isEmpty)
        io.advance(1200)
        #expect(Self.dates(io.take()) == [Self.second])
    }

    @Test func aStepsOwnDateIsSentOnceAsWritten() throws {
        let (machine, io) = try Self.connection(
            Self.routeA(#"[{"headers": {"date": "Sun, 06 Nov 1994 08:49:37 GMT"}, "text": "x"}]"#))
        #expect(Self.dates(Self.answer(machine, io, "/a")) == ["Sun, 06 Nov 1994 08:49:37 GMT"])
    }

    @Test func dateFalseSendsNoDate() throws {
        let (machine, io) = try Self.connection(Self.routes(#"""
            [{"id": "a", "match": {"path": "/a"},
              "responses": [{"text": "x", "date": false}, {"status": 503, "date": false, "fault": "truncate-body"}]},
             {"id": "b", "match": {"path": "/b"}, "responses": [{"text": "{{path.x}}", "date": false, "delayMs": 5}]}]
            """#))
        let plain = Self.answer(machine, io, "/a")
        #expect(plain.hasPrefix("HTTP/1.1 200 OK\r\n") && Self.dates(plain).isEmpty)
        #expect(Self.dates(Self.answer(machine, io, "/a")).isEmpty, "a fault's head too")
        _ = Self.answer(machine, io, "/b")
        io.advance(5)
        #expect(Self.dates(io.take()).isEmpty, "a rendered step too")
    }

    @Test func theNowHTTPDateTemplateIsTheDecisionsDate() throws {
        let (machine, io) = try Self.connection(
            Self.routeA(#"[{"text": "now {{now.httpDate}}", "headers": {"X-At": "{{ now.httpDate }}"}}]"#), at: 1500)
        let response = Self.answer(machine, io, "/a")
        #expect(response.hasSuffix("\r\n\r\nnow \(Self.second)"))
        #expect(response.contains("\r\nX-At: \(Self.second)\r\n"))
    }

    @Test(arguments: [#"{"text": "0123456789", "fault": "truncate-body"}"#,
                      #"{"text": "0123456789", "fault": "no-close-notify"}"#,
                      #"{"text": "0123456789", "fault": {"type": "half-close", "after": "headers"}}"#,
                      #"{"text": "0123456789", "fault": "wrong-content-type"}"#,
                      #"{"status": 200, "fault": "html-error-page"}"#,
                      #"{"text": "0123456789", "chunked": {"size": 4, "intervalMs": 0}}"#])
    func faultHeadsAreDated(step: String) throws {
        let (machine, io) = try Self.connection(Self.routeA("[" + step + "]"))
        let response = Self.answer(machine, io, "/a")
        #expect(response.hasPrefix("HTTP/1.1 ") && Self.dates(response) == [Self.first], "\(response)")
    }

    // MARK: - The engine's own answers

    @Test func unmatchedRequestsAndPolicyAnswersAreDated() throws {
        let (machine, io) = try Self.connection(#"""
            {"name": "p", "auth": {"tokenPath": "/token", "protect": ["/api/"]},
             "rateLimits": [{"id": "one", "path": "/limited", "limit": 1, "windowMs": 60000}],
             "routes": [{"id": "l", "match": {"path": "/limited"}, "responses": [{"status": 204}]},
                        {"id": "api", "match": {"path": "/api/x"}, "responses": [{"text": "secret"}]}]}
            """#)
        let missing = Self.answer(machine, io, "/nowhere")
        #expect(missing.hasPrefix("HTTP/1.1 404 ") && Self.dates(missing) == [Self.first])
        #expect(Self.dates(Self.answer(machine, io, "/limited")) == [Self.first], "a 204")
        let limited = Self.answer(machine, io, "/limited")
        #expect(limited.hasPrefix("HTTP/1.1 429 ") && Self.dates(limited) == [Self.first])
        let refused = Self.answer(machine, io, "/api/x")
        #expect(refused.hasPrefix("HTTP/1.1 401 ") && Self.dates(refused) == [Self.first])
        let token = Self.answer(machine, io, "/token", "Content-Type: application/x-www-form-urlencoded\r\n"
            + "Content-Length: 29\r\n\r\ngrant_type=client_credentials", method: "POST")
        #expect(token.hasPrefix("HTTP/1.1 200 ") && Self.dates(token) == [Self.first])
    }

    @Test func aMalformedRequestsAnswerIsDated() throws {
        let (machine, io) = try Self.connection(Self.routes("[]"))
        Array("GET / HTTP/1.1\r\nBad Header\r\n\r\n".utf8).withUnsafeBytes { machine.received($0) }
        let response = io.take()
        #expect(response.hasPrefix("HTTP/1.1 400 ") && Self.dates(response) == [Self.first])
    }

    @Test func webSocketAnswersAreDated() throws {
        let (machine, io) = try Self.connection(Self.routes(
            #"[{"id": "ws", "match": {"path": "/ws"}, "responses": [{"websocket": {"script": []}}]}]"#))
        let refused = Self.answer(machine, io, "/ws")
        #expect(refused.hasPrefix("HTTP/1.1 426 ") && Self.dates(refused) == [Self.first])
        let accepted = Self.answer(machine, io, "/ws", "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")
        #expect(accepted.hasPrefix("HTTP/1.1 101 ") && Self.dates(accepted) == [Self.first])
    }

    // MARK: - Resources

    static let resources = #"""
        {"name": "r", "resources": [
            {"id": "doc", "path": "/doc", "text": "0123456789", "methods": ["PUT"], "requireConditional": true},
            {"id": "bare", "path": "/bare", "text": "0123456789", "deviations": ["no-date"]}],
         "routes": [{"id": "step", "match": {"path": "/step"},
                     "responses": [{"resource": {"id": "doc", "deviations": ["no-date"]}}]}]}
        """#

    @Test func everyResourceAnswerIsDatedOnce() throws {
        let (machine, io) = try Self.connection(Self.resources, at: 1500)
        let whole = Self.answer(machine, io, "/doc")
        #expect(whole.hasPrefix("HTTP/1.1 200 ") && Self.dates(whole) == [Self.second])
        let etag = try #require(whole.components(separatedBy: "\r\n").first { $0.hasPrefix("ETag: ") }).dropFirst(6)
        let cases: [(String, String, String)] = [
            ("GET", "If-None-Match: \(etag)\r\n", "304"),
            ("GET", "If-Match: \"other\"\r\n", "412"),
            ("GET", "Range: bytes=0-1\r\n", "206"),
            ("GET", "Range: bytes=50-\r\n", "416"),
            ("PUT", "Content-Length: 1\r\n\r\nx", "428"),
            ("DELETE", "", "405"),
        ]
        for (method, extra, status) in cases {
            let response = Self.answer(machine, io, "/doc", extra, method: method)
            #expect(response.hasPrefix("HTTP/1.1 \(status) "), "\(method) \(extra)")
            #expect(Self.dates(response) == [Self.second], "\(status): one Date, the clock's")
        }
        let failed = Self.answer(machine, io, "/doc", "If-Match: \"other\"\r\n")
        #expect(failed.contains("\r\nLast-Modified: "), "a 412 carries Last-Modified, and Date with it")
    }

    @Test func theNoDateDeviationLeavesDateOut() throws {
        let (machine, io) = try Self.connection(Self.resources)
        let requests = [
            ("/bare", ""), ("/bare", "If-Match: \"other\"\r\n"), ("/step", ""), ("/step", "Range: bytes=0-1\r\n"),
        ]
        for (path, extra) in requests {
            let response = Self.answer(machine, io, path, extra)
            #expect(response.hasPrefix("HTTP/1.1 ") && Self.dates(response).isEmpty, "\(path) \(extra)")
        }
    }

    // MARK: - Recording

    @Test func aRecordedStepKeepsNoDateSoEachReplayIsDatedAnew() throws {
        let output = RecordingWriter.write([RecordingWriterTests.exchange(
            "GET", "/a", headers: [("Date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("X-A", "1")])], options: .init())
        guard case .array(let steps)? = RecordingWriterTests.routes(output).first?["responses"] else {
            Issue.record("no responses")
            return
        }
        #expect(steps.first?["headers"] == .object([("X-A", .string("1"))]))
    }

    // MARK: - The loader

    @Test func dateMustBeFalseOrTrue() {
        #expect(ScenarioTestSupport.errors(Self.routeA(#"[{"date": "no"}]"#)).count == 1)
        let typo = ScenarioTestSupport.errors(Self.routeA(#"[{"dates": false}]"#))
        #expect(typo.count == 1 && typo[0].contains("did you mean \"date\""), "\(typo)")
        let both = ScenarioTestSupport.errors(Self.routeA(#"[{"date": false, "headers": {"Date": "x"}}]"#))
        #expect(both.count == 1, "a step cannot both set a Date and ask for none: \(both)")
    }
}
