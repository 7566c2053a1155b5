import FaultlineCore

/// The CPU work of one keep-alive request without sockets: parse wrk's request, journal it, decide it against
/// the benchmark's stub (bench/plain-json.json) and complete it, as the Dispatcher and the HTTP/1.1 codec do. Run N times by
/// `scripts/hotpath.sh`, which counts instructions with callgrind: a figure that does not depend on a noisy
/// machine, for telling whether a change to the request path made it cheaper.
@main
struct HotPath {
    static func main() throws {
        let arguments = CommandLine.arguments
        guard arguments.count >= 3, let requests = Int(arguments[2]) else {
            print("usage: hotpath SCENARIO.json REQUESTS [connection | forward | TARGET]")
            return
        }
        if arguments.count == 4 && arguments[3] == "connection" {
            try throughConnection(path: arguments[1], requests: requests)
            return
        }
        if arguments.count == 4 && arguments[3] == "forward" {
            try run(path: arguments[1], target: "/item", requests: requests, Forwarded())
            return
        }
        // Another route of the scenario (a fault, a resource), decided and rendered the same way.
        try run(path: arguments[1], target: arguments.count == 4 ? arguments[3] : "/item", requests: requests, Scripted())
    }

    /// Parse wrk's request, journal it, decide it, have `answer` make the script, render it, complete the entry —
    /// `requests` times. Generic, so each kind of answer gets its own specialized loop.
    static func run<Answer: HotPathAnswer>(path: String, target: String, requests: Int, _ answer: Answer) throws {
        // The scenario loaded as the other drivers load it; the journal kept here, a local, as before.
        let engine = try BenchDispatcher(scenarioPath: path).engine
        var journal = Journal(capacity: 10_000, maxBodyBytes: 65_536)
        var parser = HTTPRequestParser()
        let request = Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:18081\r\n\r\n".utf8)
        var written = 0
        var output = OutputBuffer()
        for index in 0..<requests {
            parser.append(request)
            while let event = parser.next() {
                guard case .request(let request) = event else { continue }
                var entry = JournalEntry(
                    receivedAtWall: 0, receivedAtMonotonicNanos: UInt64(index), connectionID: 1, indexOnConnection: index,
                    clientAddress: "127.0.0.1:40000", head: request.head, body: request.body, bodySize: request.body.count)
                let decision = engine.decide(
                    request, requestID: journal.nextSequence, connectionRequestIndex: index, client: "127.0.0.1",
                    now: EngineInstant(monotonicMilliseconds: UInt64(index), wallSeconds: 0),
                    attempt: Retries.Attempt(connection: 1, arrivedAtNanos: UInt64(index)))
                entry.record(decision)
                let (sequence, script) = answer.script(decision, request, consume entry, &journal, &written)
                // What the HTTP/1.1 codec does with the script: render its steps into one reused output buffer,
                // heads dated from the engine's per-second cache (the clock moves on a second every 1000 requests).
                var renderer = HTTP1Renderer()
                let wall = Double(index) / 1000
                for step in script.steps {
                    if case .head(let head) = step {
                        renderer.render(
                            head: head, dateLine: head.addsDate ? engine.dates.line(atWall: wall) : [], into: &output)
                    } else {
                        renderer.render(step, into: &output, date: { [] })
                    }
                }
                written += output.count
                output.reset()
                journal.update(sequence) {
                    $0.outcome = .completed
                    $0.bytesWritten = written
                }
            }
        }
        guard journal.totalRecorded == requests else { fatalError("journaled \(journal.totalRecorded) of \(requests)") }
        print("\(requests) requests, \(written) bytes written")
    }

    /// The same requests through the HTTP/1.1 connection machine, as the server runs them: read event in, the
    /// machine parses, hands the request to a Dispatcher-like IO (decide, journal), renders the script and writes
    /// it, and completes the exchange when the (fake) output drains at once.
    static func throughConnection(path: String, requests: Int) throws {
        let io = BenchIO(try BenchDispatcher(scenarioPath: path))
        let machine = HTTP1Connection(
            io: io, settings: HTTP1Settings(parserLimits: HTTPParserLimits(), headerTimeoutMilliseconds: 10_000))
        let request = Array("GET /item HTTP/1.1\r\nHost: 127.0.0.1:18081\r\n\r\n".utf8)
        for _ in 0..<requests {
            request.withUnsafeBytes { machine.received($0) }
        }
        guard io.core.journal.totalRecorded == requests else { fatalError("journaled \(io.core.journal.totalRecorded)") }
        print("\(requests) requests through the connection machine, \(io.written) response bytes")
    }

}

/// What the server's Connection and Dispatcher do for the machine, minus the sockets and timers.
final class BenchIO: HTTP1ConnectionIO {
    let core: BenchDispatcher
    // As in the server's connection: loop-confined state, no run-time exclusivity checks.
    @exclusivity(unchecked) var written = 0
    @exclusivity(unchecked) var tick: UInt64 = 0

    init(_ core: BenchDispatcher) { self.core = core }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool { written += bytes.count; return true }
    var pendingOutput: Int { 0 }
    var hasUnreadInput: Bool { false }
    var peerHasReset: Bool { false }
    func probePeer() {}
    func shutdownWrite() {}
    func omitCloseNotify() {}
    func close(abortive: Bool) {}
    func closeSoon() {}
    func setReading(_ enabled: Bool) {}
    func startTimer(_ timer: HTTP1Timer, milliseconds: Int) {}
    func cancelTimer(_ timer: HTTP1Timer) {}
    func now() -> Arrival { tick += 1; return Arrival(wall: 0, monotonicNanos: tick * 1_000_000) }
    /// As the server's Connection: the engine's per-second cache (the fake clock moves on a second every 1000 ticks).
    func dateLine() -> [UInt8] { core.engine.dates.line(atWall: Double(tick) / 1000) }
    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange { core.dispatch(request, context) }
    func reject(_ error: HTTPParseError, _ context: RequestContext, body: [UInt8]) -> Exchange {
        fatalError("bad request")
    }
    func journalUnanswered(_ request: HTTPRequest?, _ error: HTTPParseError?, _ context: RequestContext,
                           _ outcome: ExchangeOutcome) {}
    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome, at: UInt64?) { core.finished(exchange, outcome) }
    func policyClosed(after sequence: Int, _ reason: PolicyClose) {}
    func upgrade(_ exchange: Exchange, _ plan: WebSocketSessionPlan, early: [UInt8]) {}
}

/// Where a decided request's script comes from in `HotPath.run`: it journals the entry and returns its sequence.
protocol HotPathAnswer {
    func script(
        _ decision: Decision, _ request: HTTPRequest, _ entry: consuming JournalEntry, _ journal: inout Journal,
        _ written: inout Int
    ) -> (Int, ResponseScript)
}

/// A scripted step's answer: the decision's script (the first figures).
struct Scripted: HotPathAnswer {
    @inline(__always)
    func script(
        _ decision: Decision, _ request: HTTPRequest, _ entry: consuming JournalEntry, _ journal: inout Journal,
        _ written: inout Int
    ) -> (Int, ResponseScript) {
        (journal.record(consume entry), decision.script)
    }
}

/// A forwarded request (bench/hotpath-proxy.json, the proxy row's scenario): what the server's ProxyService does,
/// minus the upstream connection's sockets — the upstream request built, nginx's answer parsed, the client's script
/// planned from it, the journal's proxy record written.
struct Forwarded: HotPathAnswer {
    /// What the proxy row's upstream nginx answers `GET /item`.
    let answer: [UInt8] = {
        let body = #"{"id":"1","name":"widget","price":9.99}"#
        return Array(("HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Fri, 04 Dec 2026 02:42:49 GMT\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: keep-alive\r\n\r\n"
            + body).utf8)
    }()

    func script(
        _ decision: Decision, _ request: HTTPRequest, _ entry: consuming JournalEntry, _ journal: inout Journal,
        _ written: inout Int
    ) -> (Int, ResponseScript) {
        guard let plan = decision.proxy else { fatalError("the scenario does not forward /item") }
        entry.proxy = ProxyRecord(upstream: plan.upstreamURL)
        let sequence = journal.record(consume entry)
        written += plan.requestBytes(client: "127.0.0.1", clientTLS: false).count
        var upstream = HTTPResponseParser(requestMethod: request.method, mayStream: plan.canStream())
        guard case .complete(let response, _) = upstream.feed(answer) else {
            fatalError("the upstream's answer did not parse")
        }
        var record = ProxyRecord(upstream: plan.upstreamURL)
        let script = plan.script(for: response, record: &record)
        journal.update(sequence) {
            $0.status = script.status
            $0.proxy = record
        }
        return (sequence, script)
    }
}
