import Testing
@testable import FaultlineCore

/// Records a WebSocket session's actions on a fake clock: frames written (parsed back), timers, journal, end.
final class FakeWebSocketIO: WebSocketSessionIO {
    var written: [UInt8] = []
    var timers: [WebSocketTimer: Int] = [:]
    var clock = 0
    var journaled: [WebSocketFrameRecord] = []
    var end: WebSocketEnd?
    var closed: String?
    var clientGone = false
    var pendingOutput = 0
    weak var session: WebSocketSession?

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if clientGone { return false }
        written += bytes
        return true
    }
    func close(abortive: Bool) { closed = abortive ? "RST" : "FIN" }
    func startTimer(_ timer: WebSocketTimer, milliseconds: Int) { timers[timer] = clock + milliseconds }
    func cancelTimer(_ timer: WebSocketTimer) { timers[timer] = nil }
    func nowNanos() -> UInt64 { UInt64(clock) * 1_000_000 }
    func journal(_ frame: WebSocketFrameRecord) { journaled.append(frame) }
    func ended(_ end: WebSocketEnd) { self.end = end }
    var faults: [String] = []
    func faultStarted(_ name: String) { faults.append(name) }

    func advance(_ milliseconds: Int) {
        let end = clock + milliseconds
        while let (timer, due) = timers.filter({ $0.value <= end }).min(by: { $0.value < $1.value }) {
            clock = due
            timers[timer] = nil
            session?.timerFired(timer)
        }
        clock = end
    }

    /// The server frames written since the last call, as (opcode, fin, payload text).
    func frames() -> [String] {
        defer { written = [] }
        var out: [String] = []
        var index = 0
        while index + 2 <= written.count {
            let first = written[index], second = written[index + 1]
            var length = Int(second & 0x7F)
            var header = 2
            if length == 126 { length = Int(written[index + 2]) << 8 | Int(written[index + 3]); header = 4 }
            else if length == 127 { length = (2..<10).reduce(0) { $0 << 8 | Int(written[index + $1]) }; header = 10 }
            let masked = second & 0x80 != 0
            let start = index + header + (masked ? 4 : 0)
            guard start + length <= written.count else { out.append("partial"); break }
            var payload = Array(written[start..<start + length])
            if masked {
                let mask = Array(written[(start - 4)..<start])
                for index in payload.indices { payload[index] ^= mask[index & 3] }
            }
            let opcode = WebSocketOpcode(rawValue: first & 0x0F)?.name ?? "?"
            var text = String(decoding: payload, as: UTF8.self)
            if opcode == "close" && payload.count >= 2 { text = "\(Int(payload[0]) << 8 | Int(payload[1]))" + (payload.count > 2 ? " " + String(decoding: payload[2...], as: UTF8.self) : "") }
            out.append("\(opcode)\(first & 0x80 != 0 ? "" : " (more)")\(masked ? " masked" : ""): \(text)")
            index = start + length
        }
        return out
    }
}

@Suite struct WebSocketTests {
    /// A client frame: masked, as RFC 6455 §5.3 requires.
    static func client(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true) -> [UInt8] {
        WebSocketFrame(fin: fin, opcode: opcode, payload: Array(text.utf8)).serialized(masked: [1, 2, 3, 4])
    }

    static func session(_ script: [WebSocketStep], ignorePings: Bool = false) -> (WebSocketSession, FakeWebSocketIO) {
        let io = FakeWebSocketIO()
        let plan = WebSocketSessionPlan(script: script, maxMessageBytes: 1000, ignorePings: ignorePings, seed: 1, subprotocol: nil)
        let session = WebSocketSession(io: io, plan: plan)
        io.session = session
        return (session, io)
    }

    static func feed(_ session: WebSocketSession, _ bytes: [UInt8]) { bytes.withUnsafeBytes { session.received($0) } }

    // MARK: - Framing

    @Test func theAcceptValueIsRFC6455sExample() {
        #expect(WebSocketHandshake.accept(key: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        #expect(WebSocketHandshake.isValidKey("dGhlIHNhbXBsZSBub25jZQ==") && !WebSocketHandshake.isValidKey("c2hvcnQ="))
    }

    @Test func fragmentsAreJoinedAndControlFramesInterleave() throws {
        var parser = WebSocketFrameParser(maxMessageBytes: 100)
        let bytes = Self.client(.text, "hel", fin: false) + Self.client(.ping, "p") + Self.client(.continuation, "lo")
        bytes.withUnsafeBytes { parser.append($0) }
        var events: [WebSocketFrameParser.Event] = []
        while let next = try parser.next() { events += next }
        #expect(events.last == .message(.text, Array("hello".utf8)))
        #expect(events.count == 4 && parser.bufferedByteCount == 0)
    }

    @Test(arguments: [
        (WebSocketFrame(opcode: .text, payload: [0x61]).serialized(), 1002, "a client frame must be masked"),
        (WebSocketFrame(opcode: .text, payload: [0x61]).serialized(masked: [1, 2, 3, 4], rsv: 4), 1002, "reserved bits set without an extension"),
        (WebSocketFrame(fin: false, opcode: .ping, payload: []).serialized(masked: [1, 2, 3, 4]), 1002, "a fragmented ping frame"),
        (WebSocketFrame(opcode: .ping, payload: Array(repeating: 0, count: 126)).serialized(masked: [1, 2, 3, 4]), 1002, "a ping frame of 126 bytes (125 at most)"),
        (WebSocketFrame(opcode: .continuation, payload: [0x61]).serialized(masked: [1, 2, 3, 4]), 1002, "a continuation with no message to continue"),
        (WebSocketFrame(opcode: .text, payload: [0xFF, 0xFE]).serialized(masked: [1, 2, 3, 4]), 1007, "a text message that is not UTF-8"),
        (WebSocketFrame(opcode: .binary, payload: Array(repeating: 0, count: 101)).serialized(masked: [1, 2, 3, 4]), 1009, "a message over 100 bytes"),
        (WebSocketFrame(opcode: .close, payload: [0x03, 0xED]).serialized(masked: [1, 2, 3, 4]), 1002, "close code 1005 may not be sent"),
        ([0x83, 0x80, 0, 0, 0, 0], 1002, "unknown opcode 0x3"),
    ])
    func badClientFramesAreRefusedWithTheRFCsCode(bytes: [UInt8], code: Int, reason: String) {
        var parser = WebSocketFrameParser(maxMessageBytes: 100)
        bytes.withUnsafeBytes { parser.append($0) }
        #expect(throws: WebSocketViolation(code: code, reason: reason)) { _ = try parser.next() }
    }

    @Test func aLargeFrameUsesTheLongLengthForms() throws {
        let payload = Array(repeating: UInt8(0x61), count: 70_000)
        let frame = WebSocketFrame(opcode: .binary, payload: payload)
        #expect(frame.serialized().prefix(2) == [0x82, 127])
        var parser = WebSocketFrameParser(maxMessageBytes: 100_000)
        frame.serialized(masked: [9, 9, 9, 9]).withUnsafeBytes { parser.append($0) }
        #expect(try parser.next()?.last == .message(.binary, payload))
    }

    // MARK: - Sessions

    @Test func theScriptPlaysAndEchoesAndRepeats() {
        let (session, io) = Self.session([
            .send(.text("hi"), everyMilliseconds: nil, times: 1), .receive(.contains("sub"), timeoutMilliseconds: 1000),
            .echo(count: 1), .send(.text("tick {{n}}"), everyMilliseconds: 100, times: 3),
        ])
        session.start(early: [])
        #expect(io.frames() == ["text: hi"])
        Self.feed(session, Self.client(.text, "hello"))
        #expect(io.frames().isEmpty, "not the message the receive step waits for")
        Self.feed(session, Self.client(.text, "subscribe"))
        #expect(io.frames() == ["text: tick 1"])
        Self.feed(session, Self.client(.text, "echo me") + Self.client(.text, "not echoed"))
        #expect(io.frames() == ["text: echo me"])
        io.advance(200)
        #expect(io.frames() == ["text: tick 2", "text: tick 3"])
        Self.feed(session, Self.client(.ping, "p"))
        #expect(io.frames() == ["pong: p"])
        Self.feed(session, WebSocketFrame(opcode: .close, payload: WebSocketFrame.closePayload(code: 1000, reason: "bye")).serialized(masked: [5, 6, 7, 8]))
        #expect(io.frames() == ["close: 1000"])
        #expect(io.end?.by == .client && io.end?.code == 1000 && io.end?.clean == true && io.closed == "FIN")
        #expect(io.journaled.filter { $0.direction == .fromClient }.map(\.opcode) == ["text", "text", "text", "text", "ping", "close"])
    }

    @Test func aLargeMessageGoesOutAsTheOutputDrainsAndFramesWaitBehindIt() {
        let (session, io) = Self.session([.send(.generated(size: 200_000), everyMilliseconds: nil, times: 1),
                                          .send(.text("after"), everyMilliseconds: nil, times: 1)])
        io.pendingOutput = 1  // the kernel takes nothing at once
        session.start(early: [])
        let piece = WebSocketSession.streamPiece
        #expect(io.written.count == 10 + piece, "the header and one piece")
        Self.feed(session, Self.client(.ping, "p"))
        for _ in 0..<2 { session.drained() }
        #expect(io.written.count == 10 + 3 * piece, "a piece per drain; the text and the pong wait behind the message")
        session.drained()
        let frames = io.frames()
        #expect(frames.count == 3 && frames[0].hasPrefix("binary: ") && frames.dropFirst() == ["text: after", "pong: p"])
        #expect(io.journaled.filter { $0.direction == .toClient }.map(\.size) == [200_000, 5, 1])
    }

    @Test func aServerCloseWaitsForTheClientsThenCloses() {
        let (session, io) = Self.session([.close(code: 1012, reason: "restart")])
        session.start(early: [])
        #expect(io.frames() == ["close: 1012 restart"] && io.end == nil)
        Self.feed(session, WebSocketFrame(opcode: .close, payload: WebSocketFrame.closePayload(code: 1012, reason: "")).serialized(masked: [1, 1, 1, 1]))
        #expect(io.end == WebSocketEnd(by: .server, code: 1012, reason: "restart", clean: true, fault: nil, atMonotonicNanos: 0))
        let (quiet, quietIO) = Self.session([.close(code: 1001, reason: "")])
        quiet.start(early: [])
        quietIO.advance(WebSocketSession.closingMilliseconds)
        #expect(quietIO.end?.clean == false && quietIO.closed == "FIN", "a client that never answers is closed anyway")
    }

    @Test func aReceiveThatTimesOutClosesWith1008() {
        let (session, io) = Self.session([.receive(nil, timeoutMilliseconds: 300)])
        session.start(early: [])
        io.advance(300)
        #expect(io.frames() == ["close: 1008 no matching message for script step 0"])
    }

    @Test func faultsBreakTheSessionTheWayTheySay() {
        let (dropped, dropIO) = Self.session([.fault(.drop(reset: true))])
        dropped.start(early: [])
        #expect(dropIO.closed == "RST" && dropIO.end?.fault == "drop" && dropIO.end?.code == nil && dropIO.frames().isEmpty)

        let (kept, keptIO) = Self.session([.fault(.closeKeepOpen(code: 1001, reason: "away"))])
        kept.start(early: [])
        #expect(keptIO.frames() == ["close: 1001 away"])
        Self.feed(kept, WebSocketFrame(opcode: .close, payload: WebSocketFrame.closePayload(code: 1001, reason: "")).serialized(masked: [1, 2, 3, 4]))
        #expect(keptIO.frames().isEmpty && keptIO.closed == nil, "the client's close is never answered")
        kept.peerFinished()
        #expect(keptIO.end?.fault == "close-keep-open")

        let (silent, silentIO) = Self.session([.fault(.silence)])
        silent.start(early: [])
        Self.feed(silent, Self.client(.ping, "anyone?"))
        #expect(silentIO.frames().isEmpty && silentIO.journaled.count == 1)

        let (fragmented, fragmentIO) = Self.session([.fault(.fragmented(text: "abcdef", fragments: 3, gapMilliseconds: 500)), .send(.text("after"), everyMilliseconds: nil, times: 1)])
        fragmented.start(early: [])
        #expect(fragmentIO.frames() == ["text (more): ab"])
        fragmentIO.advance(500)
        #expect(fragmentIO.frames() == ["continuation (more): cd"])
        fragmentIO.advance(500)
        #expect(fragmentIO.frames() == ["continuation: ef", "text: after"])

        let (masked, maskedIO) = Self.session([.fault(.maskedFrame)])
        masked.start(early: [])
        #expect(maskedIO.frames() == ["text masked: masked, which a server must not do"])

        let (truncated, truncatedIO) = Self.session([.fault(.truncatedFrame(bytes: 300))])
        truncated.start(early: [])
        #expect(truncatedIO.written.count == 4 + 150 && truncatedIO.frames() == ["partial"])
        let (deaf, deafIO) = Self.session([], ignorePings: true)
        deaf.start(early: [])
        Self.feed(deaf, Self.client(.ping, "p"))
        #expect(deafIO.frames().isEmpty)
    }

    @Test func aClientThatBreaksTheProtocolGetsItsCloseCode() {
        let (session, io) = Self.session([])
        session.start(early: WebSocketFrame(opcode: .text, payload: [0x61]).serialized())
        #expect(io.frames() == ["close: 1002 a client frame must be masked"] && io.end?.code == 1002 && io.closed == "FIN")
    }

    // MARK: - The handshake and the HTTP/1.1 hand-over

    static let route = #"""
        {"name": "ws", "routes": [{"id": "live", "match": {"path": "/live"}, "responses": [
          {"websocket": {"subprotocols": ["v2", "v1"], "headers": {"X-Id": "{{request.id}}"}, "script": [{"text": "hi"}]}},
          {"websocket": {"upgradeFault": "wrong-accept"}}]}]}
        """#

    static func upgrade(_ extra: [(String, String)] = [], version: String = "13") -> HTTPRequest {
        EngineTests.request("GET", "/live", headers: [
            ("Upgrade", "websocket"), ("Connection", "keep-alive, Upgrade"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", version),
        ] + extra)
    }

    @Test func theOpeningHandshakeIsCheckedAndAnswered() throws {
        let engine = Engine(scenarios: [try ScenarioTestSupport.load(Self.route)])
        let accepted = engine.decide(Self.upgrade([("Sec-WebSocket-Protocol", "v0, v1")]), requestID: 7)
        let head = EngineTests.written(accepted.script)
        #expect(head.hasPrefix("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: v1\r\nX-Id: 7\r\n\r\n"))
        guard case .upgrade(let plan) = accepted.script.steps.last else {
            Issue.record("no upgrade step: \(accepted.script.steps)")
            return
        }
        #expect(plan.subprotocol == "v1" && plan.script == [.send(.text("hi"), everyMilliseconds: nil, times: 1)])
        let wrong = EngineTests.written(engine.decide(Self.upgrade(), requestID: 8).script)
        #expect(wrong.contains("Sec-WebSocket-Accept: ") && !wrong.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        engine.reset()
        #expect(engine.decide(EngineTests.request("GET", "/live"), requestID: 9).script.status == 426)
        let version = engine.decide(Self.upgrade(version: "8"), requestID: 10)
        #expect(version.script.status == 426 && EngineTests.written(version.script).contains("Sec-WebSocket-Version: 13"))
        #expect(engine.decide(EngineTests.request("GET", "/live", headers: [("Upgrade", "websocket"), ("Connection", "upgrade"),
            ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", "short")]), requestID: 11).script.status == 400)
        #expect(engine.decide(EngineTests.request("GET", "/live", version: .http2), requestID: 12).script.steps
            == [.http2(.resetStream(code: HTTP2ErrorCode.http11Required.rawValue))], "a WebSocket route is HTTP/1.1's")
    }

    @Test func theMachineHandsTheConnectionOverWithTheBytesThatFollowed() {
        let plan = WebSocketSessionPlan(script: [], maxMessageBytes: 10, ignorePings: false, seed: 0, subprotocol: nil)
        let head = ResponseHead(status: 101, headers: HTTPHeaders([("Upgrade", "websocket")]), bodyLength: 0, close: false)
        let (machine, io) = HTTP1ConnectionTests.make {
            $0.scripts["/live"] = ResponseScript(steps: [.head(head), .upgrade(plan)], status: 101, keepAlive: true)
        }
        let request = "GET /live HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        HTTP1ConnectionTests.send(machine, request + "\u{81}\u{80}frame bytes")
        #expect(io.take() == ["dispatch /live", "write HTTP/1.1 101 Switching Protocols", "upgrade /live"])
        #expect(io.upgradedWith["/live"] == Array("\u{81}\u{80}frame bytes".utf8) && machine.state == .upgraded)

        // A refused upgrade (a 401) lets HTTP go on with what followed.
        let (refusing, refusedIO) = HTTP1ConnectionTests.make {
            $0.scripts["/live"] = ResponseScript.simple(for: EngineTests.request("GET", "/live"), response: HTTPResponse(status: 401))
        }
        HTTP1ConnectionTests.send(refusing, request + HTTP1ConnectionTests.get("/next"))
        #expect(refusedIO.take() == ["dispatch /live", "write HTTP/1.1 401 Unauthorized", "finished /live completed",
                                     "dispatch /next", "write HTTP/1.1 200 OK", "finished /next completed"])
    }

    @Test(arguments: [
        (#"{"websocket": {"script": [{"fault": "dorp"}]}}"#, #"routes[0].responses[0].websocket.script[0].fault: unknown WebSocket fault "dorp"; did you mean "drop"?"#),
        (#"{"websocket": {"script": [{"close": {"code": 1005}}]}}"#, "routes[0].responses[0].websocket.script[0].close.code: 1005 may not be sent in a close frame (RFC 6455 §7.4: 1000–1003, 1007–1014, 3000–4999)"),
        (#"{"websocket": {"script": [{"fault": {"type": "close-keep-open", "code": 1006}}]}}"#, "routes[0].responses[0].websocket.script[0].fault.code: 1006 may not be sent in a close frame (RFC 6455 §7.4: 1000–1003, 1007–1014, 3000–4999)"),
        (#"{"websocket": {"script": [{"text": "x", "times": 3}]}}"#, #"routes[0].responses[0].websocket.script[0].times: repeating a message needs "everyMs" (the interval)"#),
        (#"{"websocket": {}, "status": 200}"#, #"routes[0].responses[0].status: a step that accepts a WebSocket takes no "status""#),
        (#"{"websocket": {"script": [{"text": "a", "ping": "b"}]}}"#, "routes[0].responses[0].websocket.script[0]"),
    ])
    func badSessionsAreReportedWithTheirPath(step: String, message: String) {
        let errors = ScenarioTestSupport.errors(#"{"name": "w", "routes": [{"id": "w", "match": {"path": "/w"}, "responses": ["# + step + "]}]}")
        #expect(errors.contains { $0.hasPrefix(message) }, "\(errors)")
    }
}

/// The WebSocket rules on synthetic journals (times in ms).
@Suite struct WebSocketVerdictTests {
    /// An upgrade attempt at `at` ms: refused with `status`, or a session that ended at `end` ms.
    static func attempt(_ sequence: Int, at: Int, status: Int = 101, end: Int? = nil, by: WebSocketEnd.Party = .server,
                        clean: Bool = false, pings: [Int] = [], sent: [String] = [], silence: Int? = nil) -> JournalEntry {
        var entry = JournalEntry(
            sequence: sequence, receivedAtWall: 0, receivedAtMonotonicNanos: UInt64(at) * 1_000_000, connectionID: sequence,
            indexOnConnection: 0, clientAddress: "c",
            head: HTTPRequestHead(method: "GET", target: "/live", version: .http1_1, headers: HTTPHeaders()))
        entry.route = .route("live")
        entry.status = status
        entry.outcome = .completed
        entry.finishedAtMonotonicNanos = UInt64(end ?? at) * 1_000_000
        if status == 101 {
            var record = WebSocketRecord(subprotocol: nil)
            for ping in pings {
                record.add(WebSocketFrameRecord(direction: .fromClient, opcode: "ping", fin: true, size: 0, text: nil,
                                                atMonotonicNanos: UInt64(ping) * 1_000_000))
            }
            for text in sent {
                record.add(WebSocketFrameRecord(direction: .fromClient, opcode: "text", fin: true, size: text.utf8.count,
                                                text: text, atMonotonicNanos: UInt64(at) * 1_000_000))
            }
            if let silence { record.faultStarted = ("silence", UInt64(silence) * 1_000_000) }
            if let end {
                record.end = WebSocketEnd(by: by, code: nil, reason: "", clean: clean, fault: nil,
                                          atMonotonicNanos: UInt64(end) * 1_000_000)
            }
            entry.websocket = record
        }
        return entry
    }

    static func judge(_ entries: [JournalEntry], _ configure: (inout Expectations) -> Void) -> Verdict? {
        var expect = Expectations()
        configure(&expect)
        var input = VerdictInput(entries: entries)
        input.webSocketRoutes = ["live"]
        return Verdicts.evaluate(expect, input).first
    }

    /// A client that reconnects after each drop, waiting `waits` ms in turn.
    static func reconnects(_ waits: [Int]) -> [JournalEntry] {
        var entries: [JournalEntry] = []
        var time = 0
        for (index, wait) in ([0] + waits).enumerated() {
            time += wait
            entries.append(attempt(index + 1, at: time, end: time + 100))
            time += 100
        }
        return entries
    }

    @Test func reconnectsThatBackOffPassAndImmediateOnesFail() {
        let careful = Self.judge(Self.reconnects([100, 210, 390, 820, 1500, 3300])) { $0.reconnectBackoff = true }
        #expect(careful?.outcome == .pass, "\(careful?.explanation ?? "")")
        let eager = Self.judge(Self.reconnects([5, 3, 6, 4, 5, 3])) { $0.reconnectBackoff = true }
        // Seven attempts, each journal number once in the evidence.
        #expect(eager?.outcome == .fail && eager?.evidence.count == 7, "\(eager?.explanation ?? "")")
        #expect(Self.judge(Self.reconnects([100, 200])) { $0.reconnectBackoff = true }?.outcome == .inconclusive)
        let doubling = Self.judge(Self.reconnects([100, 200, 400, 800, 1600, 3200])) { $0.reconnectBackoff = true; $0.reconnectJitter = true }
        #expect(doubling?.outcome == .fail && doubling?.explanation.hasPrefix("no jitter") == true, "\(doubling?.explanation ?? "")")
        let jittered = Self.judge(Self.reconnects([100, 260, 330, 980, 1300, 3700])) { $0.reconnectBackoff = true; $0.reconnectJitter = true }
        #expect(jittered?.outcome == .pass, "\(jittered?.explanation ?? "")")
        // A client's own clean close is no drop: what follows is a new connection, not a reconnect.
        let closed = [Self.attempt(1, at: 0, end: 50, by: .client, clean: true), Self.attempt(2, at: 60, end: 70, by: .client, clean: true)]
        #expect(Self.judge(closed) { $0.reconnectBackoff = true }?.outcome == .inconclusive)
    }

    @Test func resubscriptionIsJudgedOnEverySessionButTheFirst() {
        let matcher = [BodyMatcher.contains("subscribe")]
        let good = [Self.attempt(1, at: 0, end: 10, sent: ["subscribe a"]), Self.attempt(2, at: 20, end: 30, sent: ["subscribe a", "x"])]
        #expect(Self.judge(good) { $0.resubscribes = matcher }?.outcome == .pass)
        let forgot = [Self.attempt(1, at: 0, end: 10, sent: ["subscribe a"]), Self.attempt(2, at: 20, end: 30, sent: ["hello"])]
        let verdict = Self.judge(forgot) { $0.resubscribes = matcher }
        #expect(verdict?.outcome == .fail && verdict?.evidence == [2])
    }

    @Test func heartbeatsAreJudgedByPingGapsOrBySilenceNoticed() {
        let pinging = [Self.attempt(1, at: 0, end: 10_000, by: .client, pings: [2_000, 4_500, 7_000, 9_500])]
        #expect(Self.judge(pinging) { $0.heartbeatMilliseconds = 3_000 }?.outcome == .pass)
        let lazy = [Self.attempt(1, at: 0, end: 10_000, by: .client, pings: [2_000])]
        let verdict = Self.judge(lazy) { $0.heartbeatMilliseconds = 3_000 }
        #expect(verdict?.outcome == .fail && verdict?.explanation.contains("8000 ms without a ping") == true)
        let noticed = [Self.attempt(1, at: 0, end: 6_000, by: .client, silence: 4_000)]
        #expect(Self.judge(noticed) { $0.heartbeatMilliseconds = 3_000 }?.outcome == .pass)
        let oblivious = [Self.attempt(1, at: 0, end: 20_000, by: .client, silence: 4_000)]
        #expect(Self.judge(oblivious) { $0.heartbeatMilliseconds = 3_000 }?.outcome == .fail)
    }

    @Test func harCarriesTheFramesAsWebSocketMessages() {
        var entry = Self.attempt(3, at: 10, end: 500, by: .client, clean: true, pings: [100], sent: ["hi"])
        entry.websocket?.add(WebSocketFrameRecord(direction: .toClient, opcode: "binary", fin: true, size: 9, text: nil,
                                                  atMonotonicNanos: 300_000_000))
        guard case .array(let messages)? = HAR.entry(entry)["_webSocketMessages"] else {
            Issue.record("no _webSocketMessages")
            return
        }
        #expect(messages.map { $0["type"] } == [.string("send"), .string("send"), .string("receive")])
        #expect(messages.map { $0["opcode"] } == [.int(9), .int(1), .int(2)])
        #expect(messages.last?["data"] == .string("(9 bytes)") && messages[1]["data"] == .string("hi"))
    }

    @Test func theRecordSurvivesJSON() throws {
        var entry = Self.attempt(3, at: 10, end: 500, by: .client, clean: true, pings: [100], sent: ["hi"], silence: 200)
        entry.websocket?.subprotocol = "v1"
        let decoded = try #require(JournalEntry(json: entry.json()))
        #expect(decoded.websocket == entry.websocket && decoded.protocolName == "websocket")
    }
}
