import Testing
@testable import FaultlineCore

/// The HTTP/1.1 connection machine driven in-process, with no socket, on a fake clock: every action it takes
/// is recorded by `FakeHTTP1IO`, and timers fire only when the test advances the clock.
final class FakeHTTP1IO: HTTP1ConnectionIO {
    /// What the machine did, in order: "write …", "shutdown", "close", "close RST", "close soon", "pause",
    /// "resume", "probe", "dispatch /path", "reject 400", "unanswered … outcome", "finished /path outcome".
    var actions: [String] = []
    var written: [UInt8] = []
    var pendingOutput = 0
    var hasUnreadInput = false
    var peerHasReset = false
    var clientGone = false
    /// Fake monotonic clock, milliseconds.
    var clock = 0
    private var timers: [HTTP1Timer: Int] = [:]
    /// The script each path gets; unlisted paths get a plain 200 "ok".
    var scripts: [String: ResponseScript] = [:]
    var finishedAt: [String: UInt64] = [:]
    var policyCloses: [String] = []
    weak var machine: HTTP1Connection?
    var rejections: [HTTPParseError] = []
    var rejectedBodies: [[UInt8]] = []
    private var exchangeNames: [ObjectIdentifier: String] = [:]

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if clientGone { return false }
        written += bytes
        actions.append("write " + (String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n").first ?? ""))
        return true
    }
    func probePeer() { actions.append("probe") }
    func shutdownWrite() { actions.append("shutdown") }
    func omitCloseNotify() { actions.append("no close_notify") }
    func close(abortive: Bool) { actions.append(abortive ? "close RST" : "close") }
    func closeSoon() { actions.append("close soon") }
    func setReading(_ enabled: Bool) { actions.append(enabled ? "resume" : "pause") }
    func startTimer(_ timer: HTTP1Timer, milliseconds: Int) { timers[timer] = clock + milliseconds }
    func cancelTimer(_ timer: HTTP1Timer) { timers[timer] = nil }
    func now() -> Arrival { Arrival(wall: 1_700_000_000 + Double(clock) / 1000, monotonicNanos: UInt64(clock) * 1_000_000) }
    func timerRunning(_ timer: HTTP1Timer) -> Bool { timers[timer] != nil }
    let dates = HTTPDateCache()
    func dateLine() -> [UInt8] { dates.line(atWall: now().wall) }

    /// Paths whose exchange is dispatched with no script (answered later, as a proxied one is): kept here.
    var deferredPaths: Set<String> = []
    var deferred: [String: Exchange] = [:]

    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange {
        actions.append("dispatch \(request.path)")
        if deferredPaths.contains(request.path) {
            let exchange = Exchange(sequence: context.indexOnConnection + 1, script: nil)
            exchangeNames[ObjectIdentifier(exchange)] = request.path
            deferred[request.path] = exchange
            return exchange
        }
        let script = scripts[request.path] ?? ResponseScript.simple(
            for: request, response: HTTPResponse(status: 200, body: Array("ok".utf8)))
        let exchange = Exchange(sequence: context.indexOnConnection + 1, script: script,
                                clientWantsClose: !request.head.clientWantsKeepAlive)
        exchangeNames[ObjectIdentifier(exchange)] = request.path
        return exchange
    }
    func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange {
        actions.append("reject \(error.status)")
        rejections.append(error)
        rejectedBodies.append(body)
        let head = ResponseHead(status: error.status, headers: HTTPHeaders(), bodyLength: 0, close: true)
        let exchange = Exchange(
            sequence: context.indexOnConnection + 1,
            script: ResponseScript(steps: [.head(head), .end, .endConnection(.connectionClose)], status: error.status,
                                   keepAlive: false),
            clientWantsClose: false)
        exchangeNames[ObjectIdentifier(exchange)] = "rejected"
        return exchange
    }
    func journalUnanswered(_ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext,
                           _ outcome: ExchangeOutcome) {
        actions.append("unanswered \(request?.path ?? error?.reason ?? "?") \(outcome.rawValue)")
    }
    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?) {
        let name = exchangeNames[ObjectIdentifier(exchange)] ?? "?"
        actions.append("finished \(name) \(outcome.rawValue)")
        finishedAt[name] = at ?? UInt64(clock) * 1_000_000
    }
    func policyClosed(after sequence: Int, _ reason: PolicyClose) { policyCloses.append("\(sequence) \(reason.rawValue)") }
    /// The bytes an upgrade handed over, per upgraded path.
    var upgradedWith: [String: [UInt8]] = [:]
    func upgrade(_ exchange: Exchange, _ plan: WebSocketSessionPlan, early: [UInt8]) {
        let name = exchangeNames[ObjectIdentifier(exchange)] ?? "?"
        actions.append("upgrade \(name)")
        upgradedWith[name] = early
    }

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

    /// The actions since the last call.
    func take() -> [String] {
        defer { actions = [] }
        return actions
    }
}

@Suite struct HTTP1ConnectionTests {
    static func make(_ configure: (FakeHTTP1IO) -> Void = { _ in }) -> (HTTP1Connection, FakeHTTP1IO) {
        let io = FakeHTTP1IO()
        configure(io)
        var settings = HTTP1Settings(parserLimits: HTTPParserLimits(maxBodyBytes: 16), headerTimeoutMilliseconds: 500)
        settings.lingerMilliseconds = 2000
        let machine = HTTP1Connection(io: io, settings: settings)
        io.machine = machine
        return (machine, io)
    }

    static func send(_ machine: HTTP1Connection, _ text: String) {
        Array(text.utf8).withUnsafeBytes { machine.received($0) }
    }

    static func get(_ path: String, _ extra: String = "") -> String {
        "GET \(path) HTTP/1.1\r\nHost: x\r\n\(extra)\r\n"
    }

    static func delayed(_ milliseconds: Int, _ text: String = "late") -> ResponseScript {
        let head = ResponseHead(status: 200, headers: HTTPHeaders(), bodyLength: text.utf8.count, close: false)
        return ResponseScript(steps: [.wait(milliseconds: milliseconds), .head(head), .body(Array(text.utf8)), .end],
                              status: 200, keepAlive: true)
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() {
        let (machine, io) = Self.make { $0.scripts["/slow"] = Self.delayed(100) }
        Self.send(machine, Self.get("/slow") + Self.get("/fast"))
        #expect(io.take() == ["dispatch /slow", "dispatch /fast"])
        io.advance(99)
        #expect(io.take().isEmpty, "the fast response waits behind the slow one")
        io.advance(1)
        #expect(io.take() == ["write HTTP/1.1 200 OK", "finished /slow completed", "write HTTP/1.1 200 OK",
                              "finished /fast completed"])
        #expect(String(decoding: io.written, as: UTF8.self).hasSuffix(
            "late" + "HTTP/1.1 200 OK\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\nContent-Length: 2\r\n\r\nok"))
        #expect(machine.state == .idle)
    }

    @Test func aClientThatLeavesDuringADelayIsNoticedAtOnceAndGetsNothing() {
        let (machine, io) = Self.make { $0.scripts["/slow"] = Self.delayed(5000) }
        Self.send(machine, Self.get("/slow"))
        io.advance(1000)
        _ = io.take()
        io.peerHasReset = true  // the client closed its socket: its kernel answers the probe with RST
        machine.peerFinished()
        #expect(io.take() == ["probe"])
        io.advance(25)
        #expect(io.take() == ["finished /slow client-closed", "close"])
        #expect(io.finishedAt["/slow"] == 1000 * 1_000_000, "the moment the client left, not the end of the delay")
        #expect(io.written.isEmpty)
        #expect(machine.state == .closed)
    }

    @Test func aClientThatHalfClosesDuringADelayStillGetsItsResponse() {
        let (machine, io) = Self.make { $0.scripts["/slow"] = Self.delayed(300) }
        Self.send(machine, Self.get("/slow"))
        io.advance(100)
        _ = io.take()
        machine.peerFinished()
        io.advance(25)
        #expect(io.take() == ["probe"], "no RST: the client is still reading")
        io.advance(175)
        #expect(io.take() == ["write HTTP/1.1 200 OK"])
        io.advance(25)
        #expect(io.take() == ["finished /slow completed", "close"])
    }

    @Test func finDuringADripEndsItWhenTheWriteFails() {
        let head = ResponseHead(status: 200, headers: HTTPHeaders(), bodyLength: 4, close: false)
        let drip = ResponseScript(
            steps: [.head(head), .body([65, 66]), .wait(milliseconds: 50), .body([67, 68]), .end], status: 200,
            keepAlive: true)
        let (machine, io) = Self.make { $0.scripts["/drip"] = drip }
        Self.send(machine, Self.get("/drip"))
        #expect(io.take() == ["dispatch /drip", "write HTTP/1.1 200 OK"])
        machine.peerFinished()
        #expect(io.take() == ["probe"])
        io.clientGone = true
        io.advance(25)  // the probe found no RST yet (a later write will)
        io.advance(25)
        #expect(io.take() == ["finished /drip client-closed", "close"])
    }

    @Test func aRequestTooLargeGets413AndALingeringClose() {
        let (machine, io) = Self.make()
        Self.send(machine, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        #expect(io.take() == ["reject 413", "write HTTP/1.1 413 Content Too Large", "finished rejected completed",
                              "shutdown"])
        guard case .lingering(readsLateRequests: false) = machine.state else {
            Issue.record("not lingering: \(machine.state)")
            return
        }
        Self.send(machine, String(repeating: "x", count: 100))
        #expect(io.take().isEmpty, "the body the client still sends is read and dropped")
        io.advance(2000)
        #expect(io.take() == ["close"])
    }

    @Test func connectionCloseIsAPlainCloseThroughTheQueue() {
        let (machine, io) = Self.make()
        Self.send(machine, Self.get("/a", "Connection: close\r\n"))
        #expect(io.take() == ["dispatch /a", "write HTTP/1.1 200 OK", "finished /a completed", "close soon"])
        #expect(String(decoding: io.written, as: UTF8.self).contains("Connection: close\r\n"))
        io.hasUnreadInput = true
        machine.closeFromQueue()
        #expect(io.take() == ["shutdown"], "unread input: linger instead of a close that would send RST")
        machine.peerFinished()
        #expect(io.take() == ["close"])
    }

    @Test func idleCloseClosesAKeptAliveConnectionAndMarksTheLastResponse() {
        var script = ResponseScript.simple(
            for: HTTPRequest(head: HTTPRequestHead(method: "GET", target: "/i", version: .http1_1, headers: HTTPHeaders())),
            response: HTTPResponse(status: 200))
        script.idleCloseMilliseconds = 150
        let (machine, io) = Self.make { $0.scripts["/i"] = script }
        Self.send(machine, Self.get("/i"))
        io.advance(149)
        #expect(machine.state == .idle)
        _ = io.take()
        io.advance(1)
        #expect(io.take() == ["close"])
        #expect(io.policyCloses == ["1 idle-close"])
    }

    @Test func requestsArrivingAfterAPolicyCloseAreJournaledAsNeverAnswered() {
        var last = ResponseScript.simple(
            for: HTTPRequest(head: HTTPRequestHead(method: "GET", target: "/m", version: .http1_1, headers: HTTPHeaders())),
            response: HTTPResponse(status: 200))
        last.steps.append(.endConnection(.maxRequests))
        last.keepAlive = false
        last.policyClose = .maxRequests
        let (machine, io) = Self.make { $0.scripts["/m"] = last }
        Self.send(machine, Self.get("/m"))
        #expect(io.take() == ["dispatch /m", "write HTTP/1.1 200 OK", "finished /m completed", "shutdown"])
        // The client's keep-alive pool reused the connection before it saw our FIN.
        Self.send(machine, Self.get("/next"))
        #expect(io.take() == ["unanswered /next connection-closing"])
        machine.peerFinished()
        #expect(io.take() == ["close"])
    }

    @Test func headerTimeoutAnswers408() {
        let (machine, io) = Self.make()
        Self.send(machine, "GET /x HTTP/1.1\r\nHo")
        io.advance(499)
        #expect(io.take().isEmpty)
        io.advance(1)
        #expect(io.take().prefix(2) == ["reject 408", "write HTTP/1.1 408 Request Timeout"])
    }

    static func withBodyTimeout(_ milliseconds: Int) -> (HTTP1Connection, FakeHTTP1IO) {
        let io = FakeHTTP1IO()
        var settings = HTTP1Settings(parserLimits: HTTPParserLimits(), headerTimeoutMilliseconds: 500)
        settings.bodyTimeoutMilliseconds = milliseconds
        let machine = HTTP1Connection(io: io, settings: settings)
        io.machine = machine
        return (machine, io)
    }

    /// A body dripped a byte at a time never completes: 408 at the body timeout after the header section,
    /// however often bytes come (the timer is not re-armed per byte), and the connection closes.
    @Test func aBodyDrippedForeverAnswers408AtTheBodyTimeout() {
        let (machine, io) = Self.withBodyTimeout(1000)
        Self.send(machine, "POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        for _ in 0..<9 {
            io.advance(100)
            Self.send(machine, "x")
        }
        io.advance(99)
        #expect(io.take().isEmpty, "the header timeout (500 ms) does not apply to the body")
        io.advance(1)
        let actions = io.take()
        #expect(actions.prefix(2) == ["reject 408", "write HTTP/1.1 408 Request Timeout"], "\(actions)")
        #expect(actions.contains("close") || actions.contains("shutdown"), "\(actions)")
        #expect(io.rejections.last?.reason == "request body not complete within 1000 ms of its header section")
        #expect(io.rejections.last?.head?.target == "/u")
        #expect(io.rejectedBodies.last == Array(repeating: UInt8(ascii: "x"), count: 9), "what arrived of the body")
    }

    /// The client half-closes mid-body: the cut request is journaled once, and the body timer does not fire later
    /// to journal it a second time or write a 408 nobody asked for.
    @Test func aHalfCloseMidBodyStopsTheBodyTimer() {
        let (machine, io) = Self.withBodyTimeout(1000)
        Self.send(machine, "POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        machine.peerFinished()
        #expect(io.take().first == "unanswered /u rejected")
        io.advance(2000)
        #expect(!io.take().contains("reject 408"))
        #expect(!io.timerRunning(.body))

        // The same while an earlier pipelined response is still being delayed (the connection settles, not closes).
        let (busy, busyIO) = Self.withBodyTimeout(1000)
        busyIO.scripts["/slow"] = Self.delayed(3000)
        Self.send(busy, Self.get("/slow") + "POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        busy.peerFinished()
        #expect(busyIO.take().contains("unanswered /u rejected"))
        busyIO.advance(2000)
        #expect(!busyIO.take().contains("reject 408"), "journaled once, as cut")
    }

    /// Each body gets its own timeout: a pipelined request whose body begins late in the first one's time is not
    /// cut early, and 0 means no limit.
    @Test func eachBodyHasItsOwnTimeoutAndZeroMeansNone() {
        let (machine, io) = Self.withBodyTimeout(1000)
        Self.send(machine, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nh")
        io.advance(900)
        Self.send(machine, "iPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nh")
        io.advance(900)
        #expect(!io.take().contains("reject 408"), "/b's body has had 900 ms of its 1000")
        io.advance(100)
        #expect(io.take().contains("reject 408"))

        let (unlimited, quiet) = Self.withBodyTimeout(0)
        Self.send(unlimited, "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nh")
        quiet.advance(3_600_000)
        #expect(!quiet.take().contains("reject 408"))
    }

    @Test func expectContinueIsAnsweredAtOnce() {
        let (machine, io) = Self.make()
        Self.send(machine, "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        #expect(io.take() == ["write HTTP/1.1 100 Continue"])
        Self.send(machine, "hi")
        #expect(io.take().first == "dispatch /e")
    }

    @Test func aPipeliningClientThatDoesNotReadIsPaused() {
        let (machine, io) = Self.make { $0.scripts["/slow"] = Self.delayed(10) }
        Self.send(machine, Self.get("/slow") + String(repeating: Self.get("/q"), count: 130))
        #expect(io.take().contains("pause"))
        io.advance(10)
        #expect(io.take().contains("resume"))
    }

    @Test func aReadOfManyPipelinedRequestsIsAnsweredASliceAPass() {
        let (machine, io) = Self.make { _ in }
        Self.send(machine, String(repeating: Self.get("/q"), count: 200))
        var actions = io.take()
        #expect(actions.filter { $0 == "dispatch /q" }.count == 64, "one slice, then the next loop turn")
        #expect(actions.last { $0 == "pause" || $0 == "resume" } == "pause" && io.timerRunning(.slice))
        #expect(!io.timerRunning(.header), "the requests wait for the server, not the client")
        io.advance(0)
        actions = io.take()
        #expect(actions.filter { $0 == "dispatch /q" }.count == 136)
        #expect(actions.last { $0 == "pause" || $0 == "resume" } == "resume" && !io.timerRunning(.slice))
        #expect(machine.state == .idle)
    }

    @Test func aHangIsReleasedWhenTheClientCloses() {
        let (machine, io) = Self.make {
            $0.scripts["/h"] = ResponseScript(steps: [.hang], status: nil, fault: "hang", keepAlive: false)
        }
        Self.send(machine, Self.get("/h"))
        #expect(machine.hasPendingScriptedResponse)
        _ = io.take()
        machine.peerFinished()
        #expect(io.take() == ["finished /h hang-released", "close"])
    }

    @Test func resetWaitsForTheOutputToDrain() {
        let head = ResponseHead(status: 200, headers: HTTPHeaders(), bodyLength: 10, close: true)
        let (machine, io) = Self.make {
            $0.scripts["/r"] = ResponseScript(steps: [.head(head), .body([1, 2]), .abortConnection(.reset)],
                                              status: 200, fault: "x", keepAlive: false)
        }
        io.pendingOutput = 10
        Self.send(machine, Self.get("/r"))
        #expect(machine.state == .draining(.reset))
        _ = io.take()
        io.pendingOutput = 0
        machine.drained()
        #expect(io.take() == ["finished /r reset-sent", "close RST"])
    }

    @Test func onlyTheRulesTransitionsAreLegal() {
        #expect(HTTP1Connection.isLegal(from: .idle, to: .responding))
        #expect(HTTP1Connection.isLegal(from: .waiting, to: .responding))
        #expect(!HTTP1Connection.isLegal(from: .hanging, to: .responding), "a hang ends only with the connection")
        #expect(!HTTP1Connection.isLegal(from: .halfClosed, to: .idle), "nothing is answered after a half-close")
        #expect(!HTTP1Connection.isLegal(from: .lingering(readsLateRequests: false), to: .responding))
        #expect(!HTTP1Connection.isLegal(from: .settling, to: .responding))
        #expect(!HTTP1Connection.isLegal(from: .idle, to: .waiting), "a wait belongs to a response in progress")
    }
}
