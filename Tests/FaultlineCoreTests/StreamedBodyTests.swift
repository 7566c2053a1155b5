import Testing
@testable import FaultlineCore

/// A proxied body streamed as it arrives (ARCHITECTURE §4d), without sockets: the exchange's growing script and
/// its backpressure, the HTTP/1.1 machine pulling it as the output drains, the response parser handing a body over
/// piece by piece, and the head `ProxyPlan.streamOpening` builds.
@Suite struct StreamedBodyTests {
    static func head(length: Int?) -> ResponseHead {
        var headers = HTTPHeaders()
        if length == nil { headers.append(name: "Transfer-Encoding", value: "chunked") }
        return ResponseHead(status: 200, headers: headers, bodyLength: length ?? 0, close: false)
    }

    @Test func aGrowingScriptSaysNotYetUntilItIsFinished() {
        let exchange = Exchange(sequence: 1, script: nil)
        #expect(exchange.next() == .notYet)
        var woken = 0
        exchange.whenScriptArrives = { woken += 1 }
        exchange.respond(ResponseScript(steps: [.head(Self.head(length: nil))], status: 200, keepAlive: true), growing: true)
        #expect(woken == 1 && exchange.isGrowing)
        guard case .step(.head) = exchange.next() else { Issue.record("no head"); return }
        #expect(exchange.next() == .notYet, "the body has not come")
        exchange.whenScriptArrives = { woken += 1 }
        exchange.append([.body([1, 2, 3])])
        #expect(woken == 2 && exchange.unpulledBytes == 3)
        #expect(exchange.next() == .step(.body([1, 2, 3])) && exchange.unpulledBytes == 0)
        exchange.whenScriptArrives = { woken += 1 }
        exchange.finish([.end])
        #expect(woken == 3, "finishing wakes the codec once")
        #expect(exchange.next() == .step(.end))
        #expect(exchange.next() == .finished)
    }

    @Test func theProducerIsToldWhenTheCodecHasPulledBelowTheMark() {
        let exchange = Exchange(sequence: 1, script: nil)
        exchange.respond(ResponseScript(steps: [.head(Self.head(length: 40))], status: 200, keepAlive: true), growing: true)
        _ = exchange.next()
        for _ in 0..<4 { exchange.append([.body(Array(repeating: 7, count: 10))]) }
        #expect(exchange.unpulledBytes == 40)
        var room = 0
        exchange.roomMark = 15
        exchange.whenRoom = { room += 1 }
        _ = exchange.next()
        _ = exchange.next()
        #expect(room == 0 && exchange.unpulledBytes == 20)
        _ = exchange.next()
        #expect(room == 1 && exchange.unpulledBytes == 10, "once, at the mark")
        _ = exchange.next()
        #expect(room == 1)
    }

    @Test func anEndedExchangeTellsItsProducerAndTakesNoMore() {
        let exchange = Exchange(sequence: 1, script: nil)
        exchange.respond(ResponseScript(steps: [.head(Self.head(length: nil))], status: 200, keepAlive: true), growing: true)
        var told = 0
        exchange.whenEnded = { told += 1 }
        exchange.whenRoom = { Issue.record("room after the end") }
        #expect(exchange.end())
        #expect(!exchange.end())
        #expect(told == 1)
        exchange.append([.body([1])])
        #expect(exchange.unpulledBytes == 0, "nothing is kept for a client that left")
    }

    // MARK: - The HTTP/1.1 machine

    @Test func theHTTP1MachineWritesEachPieceAsItComesAndCompletesAtTheEnd() {
        let (machine, io) = HTTP1ConnectionTests.make { $0.deferredPaths = ["/p"] }
        HTTP1ConnectionTests.send(machine, HTTP1ConnectionTests.get("/p"))
        let exchange = try! #require(io.deferred["/p"])
        _ = io.take()
        exchange.respond(
            ResponseScript(steps: [.head(Self.head(length: nil)), .body(Array("first".utf8))], status: 200, keepAlive: true),
            growing: true)
        #expect(io.take() == ["write HTTP/1.1 200 OK"], "the head and the first piece, in one write")
        #expect(String(decoding: io.written, as: UTF8.self).hasSuffix("Transfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n"))
        #expect(machine.state == .responding)
        exchange.append([.body(Array("second".utf8))])
        #expect(io.take() == ["write 6"])
        exchange.finish([.end])
        #expect(io.take() == ["write 0", "finished /p completed"])
        #expect(String(decoding: io.written, as: UTF8.self).hasSuffix("6\r\nsecond\r\n0\r\n\r\n"))
        #expect(machine.state == .idle)
    }

    @Test func theHTTP1MachinePullsNoMoreWhileTheClientIsBehind() {
        let (machine, io) = HTTP1ConnectionTests.make { $0.deferredPaths = ["/p"] }
        HTTP1ConnectionTests.send(machine, HTTP1ConnectionTests.get("/p"))
        let exchange = try! #require(io.deferred["/p"])
        exchange.respond(ResponseScript(steps: [.head(Self.head(length: nil))], status: 200, keepAlive: true), growing: true)
        _ = io.take()
        io.pendingOutput = HTTP1Connection.growingQueueLimit
        exchange.append([.body(Array(repeating: 1, count: 100)), .body(Array(repeating: 2, count: 100))])
        #expect(io.take().isEmpty, "nothing is pulled while the queue is full")
        #expect(exchange.unpulledBytes == 200 && machine.state == .streaming)
        io.pendingOutput = 0
        machine.drained()
        #expect(io.take() == ["write 64"], "both pieces, in one write, once the output drained")
        #expect(io.written.suffix(106) == Array("64\r\n".utf8) + Array(repeating: 2, count: 100) + Array("\r\n".utf8))
        #expect(exchange.unpulledBytes == 0 && machine.state == .responding)
    }

    @Test func aClientThatLeavesEndsTheGrowingExchange() {
        let (machine, io) = HTTP1ConnectionTests.make { $0.deferredPaths = ["/p"] }
        HTTP1ConnectionTests.send(machine, HTTP1ConnectionTests.get("/p"))
        let exchange = try! #require(io.deferred["/p"])
        var told = false
        exchange.whenEnded = { told = true }
        exchange.respond(ResponseScript(steps: [.head(Self.head(length: 10))], status: 200, keepAlive: true), growing: true)
        _ = io.take()
        machine.peerFailed()
        #expect(told, "the producer hears the client is gone")
        #expect(io.take().contains("finished /p client-closed"))
    }

    // MARK: - The parser

    @Test func theParserHandsOverABodyThatDidNotComeWithItsHead() {
        var parser = HTTPResponseParser(requestMethod: "GET", maxBodyBytes: 4, mayStream: true)
        #expect(parser.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nab".utf8)) == .needMore)
        #expect(parser.inBody && !parser.streaming)
        let head = parser.startStreaming()
        #expect(head.status == 200 && head.declaredLength == 12 && head.body == Array("ab".utf8))
        #expect(parser.feed(Array("cdefgh".utf8)) == .needMore)
        #expect(parser.takeBody() == Array("cdefgh".utf8) && parser.takeBody().isEmpty)
        guard case .complete(let last, extraBytes: false) = parser.feed(Array("ijkl".utf8)) else {
            Issue.record("not complete")
            return
        }
        #expect(last.body == Array("ijkl".utf8) && parser.bodyBytes == 12, "over maxBodyBytes, since it streams")
    }

    @Test func aChunkedBodyStreamsWithoutItsFraming() {
        var parser = HTTPResponseParser(requestMethod: "GET", mayStream: true)
        #expect(parser.feed(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n".utf8)) == .needMore)
        let head = parser.startStreaming()
        #expect(head.declaredLength == nil && head.body == Array("abc".utf8))
        #expect(parser.feed(Array("2\r\nde".utf8)) == .needMore)
        #expect(parser.takeBody() == Array("de".utf8))
        guard case .complete(let last, _) = parser.feed(Array("\r\n0\r\n\r\n".utf8)) else {
            Issue.record("not complete")
            return
        }
        #expect(last.body.isEmpty && parser.bodyBytes == 5)
    }

    @Test func withoutStreamingTheLimitStillHolds() {
        var parser = HTTPResponseParser(requestMethod: "GET", maxBodyBytes: 4)
        guard case .failed(let reason) = parser.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n".utf8)) else {
            Issue.record("a body over the limit was accepted")
            return
        }
        #expect(reason.contains("limit of 4 bytes"))
    }

    // MARK: - The head

    @Test func theStreamedHeadIsTheOneAWholeAnswerWouldGet() throws {
        let engine = try ProxyPlanTests.engine("""
            {"name": "p", "proxy": \(ProxyPlanTests.upstream), "routes": [{"id": "s", "match": {"path": "/s"},
             "responses": [{"proxy": true, "headers": {"X-Step": "yes"}, "delayMs": 20}]},
             {"id": "f", "match": {"path": "/f"}, "responses": [{"proxy": true, "fault": "truncate-body"}]}]}
            """)
        let plan = try #require(engine.decide(ProxyPlanTests.request("/s"), requestID: 1).proxy)
        #expect(plan.canStream())
        var answer = ProxyPlanTests.answer
        answer.declaredLength = 27
        answer.body = Array(#"{"id""#.utf8)
        var record = ProxyRecord(upstream: plan.upstreamURL)
        let (script, closing, keep) = plan.streamOpening(answer, record: &record)
        #expect(script.steps.first == .wait(milliseconds: 20))
        guard case .head(let head) = script.steps[1] else {
            Issue.record("no head")
            return
        }
        let text = String(decoding: head.http1, as: UTF8.self)
        #expect(text.contains("Content-Length: 27\r\n") && text.contains("X-Step: yes\r\n") && !text.contains("X-Hop"))
        #expect(script.steps.count == 2 && closing == [.end] && keep == nil, "the body so far is counted, not scripted")
        #expect(record.streamed && record.changed == ["headers set: X-Step", "delay 20 ms"])

        answer.declaredLength = nil
        let chunked = try #require(engine.decide(ProxyPlanTests.request("/s", headers: [("Connection", "close")]), requestID: 2).proxy)
        var second = ProxyRecord(upstream: chunked.upstreamURL)
        let (closingScript, ending, _) = chunked.streamOpening(answer, record: &second)
        guard case .head(let unsized) = closingScript.steps[1] else {
            Issue.record("no head")
            return
        }
        #expect(unsized.chunked && String(decoding: unsized.http1, as: UTF8.self).contains("Connection: close\r\n"))
        #expect(!closingScript.keepAlive && ending == [.end, .endConnection(.connectionClose)])

        // truncate-body needs only a prefix: it streams when Content-Length gives the length to cut from.
        let faulted = try #require(engine.decide(ProxyPlanTests.request("/f"), requestID: 3).proxy)
        #expect(faulted.canStream())
        answer.declaredLength = 27
        #expect(faulted.streams(answer))
        var cut = ProxyRecord(upstream: faulted.upstreamURL)
        let (cutScript, breaking, count) = faulted.streamOpening(answer, record: &cut)
        #expect(count == 13 && breaking == [.abortExchange] && cutScript.fault == "truncate-body" && !cutScript.keepAlive)
        #expect(cut.changed == ["truncate-body: 13 of 27 body bytes sent"])
        answer.declaredLength = nil
        #expect(!faulted.streams(answer), "without a length to announce, the body is read whole")
    }

    @Test func onlyFaultsThatNeedAPrefixStream() throws {
        func fault(_ json: String) throws -> FaultSpec {
            let engine = try ProxyPlanTests.engine("""
                {"name": "p", "proxy": \(ProxyPlanTests.upstream), "routes": [{"id": "f", "match": {"path": "/f"},
                 "responses": [{"proxy": true, "fault": \(json)}]}]}
                """)
            // Over HTTP/2: an rst-stream route serves no other protocol.
            let request = HTTPRequest(head: HTTPRequestHead(
                method: "GET", target: "/f", version: .http2, headers: HTTPHeaders([(":path", "/f")])))
            return try #require(engine.decide(request, requestID: 1).proxy?.step?.fault, "\(json)")
        }
        for cutting in [#""truncate-body""#, #""close-after-headers""#, #""stall-after-headers""#,
                        #"{"type": "rst-stream", "after": "body", "bytes": 5}"#, #"{"type": "rst-stream", "after": "headers"}"#] {
            #expect(ProxyPlan.cutsStream(try fault(cutting)), "\(cutting)")
        }
        for whole in [#""corrupt-json""#, #""html-error-page""#, #""truncated-json""#, #""bad-gzip""#] {
            #expect(!ProxyPlan.cutsStream(try fault(whole)), "\(whole)")
        }
    }
}
