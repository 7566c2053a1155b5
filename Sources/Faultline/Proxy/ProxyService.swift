import FaultlineCore

/// Carries out the engine's forwarding decisions (ARCHITECTURE §4d): sends the request upstream through the
/// pool, then builds the script from what came back (`ProxyPlan`, the same planner a scripted step uses), journals
/// the `proxy` record, hands the script to the waiting exchange, and tells a recording what it saw. Loop thread
/// only; the server core owns one.
final class ProxyService {
    private unowned(unsafe) let core: ServerCore
    private(set) lazy var pool = UpstreamPool(loop: core.loop, readScratch: core.readScratch)
    /// `faultline record`: every proxied exchange that got a response.
    @exclusivity(unchecked) var recording: ProxyRecording?

    /// Set once the recording has been written: a stop after `POST /record/stop` writes nothing again.
    @exclusivity(unchecked) private var written: Result<RecordingSummary, RecordingFailure>?

    init(core: ServerCore) {
        self.core = core
        if core.configuration.recording != nil { recording = ProxyRecording() }
    }

    /// Writes the recording (`faultline record`), once; nil when the server is not recording.
    func writeRecording() -> Result<RecordingSummary, RecordingFailure>? {
        if let written { return written }
        guard let recording, let configuration = core.configuration.recording else { return nil }
        let result = RecordingFile.write(recording, configuration)
        written = result
        configuration.onWritten?(result)
        return result
    }

    /// Forwards `plan`'s request for the exchange journaled as `sequence`, and answers the exchange when the
    /// upstream has (or has failed to).
    func forward(_ plan: ProxyPlan, exchange: Exchange, sequence: Int, connection: ConnectionInfo) {
        let startedAt = Clock.monotonicNanos()
        var record = ProxyRecord(upstream: plan.upstreamURL)
        guard let upstream = plan.config.upstream else {
            let script = plan.failureScript(
                .noUpstream, "no upstream is configured: give the scenario a \"proxy\": {\"upstream\": …} or run "
                    + "serve --proxy URL", record: &record)
            answer(exchange, sequence, script, record)
            return
        }
        let key = UpstreamKey(
            secure: upstream.secure, host: upstream.host, port: upstream.port, caFile: plan.config.caFile,
            verify: plan.config.verify ?? true)
        let limits = UpstreamLimits(
            connectTimeout: plan.config.connectTimeout, responseTimeout: plan.config.responseTimeout,
            maxResponseBytes: plan.config.responseLimit)
        let bytes = plan.requestBytes(client: connection.clientHost, clientTLS: connection.tls != nil)
        // A body that does not come with its head is streamed when the plan allows it (`ProxyPlan.canStream`).
        let forwarded = ForwardedRequest(
            service: self, plan: plan, exchange: exchange, sequence: sequence, record: record,
            mayStream: plan.canStream())
        pool.forward(key, bytes, method: plan.request.method, limits: limits, startedAt: startedAt, forwarded)
    }

    /// The upstream's response, read whole, or why there is none — or the end of a streamed body: the script from
    /// the plan, the journal, the recording, the idempotency key settled, the exchange answered.
    fileprivate func finish(
        _ forwarded: ForwardedRequest, _ result: Result<UpstreamResponse, UpstreamError>, _ timing: UpstreamTiming
    ) {
        let (plan, exchange, sequence) = (forwarded.plan, forwarded.exchange, forwarded.sequence)
        var record = forwarded.record
        record.take(timing)
        record.totalMilliseconds = timing.totalMilliseconds
        if let stream = forwarded.stream {
            endStream(stream, result, exchange, sequence, &record)
            if let recording, case .success = result {
                // The copy kept as the body passed, unless it outgrew what the recording may still keep.
                if var whole = stream.recorded, let body = stream.copy {
                    whole.body = body
                    recording.record(plan.request, whole, milliseconds: timing.totalMilliseconds)
                } else {
                    recording.drop()
                }
            }
            return
        }
        let script: ResponseScript
        var notes: [JournalNote] = []
        switch result {
        case .success(let response):
            script = plan.script(for: response, record: &record)
            recording?.record(plan.request, response, milliseconds: timing.totalMilliseconds)
            if let hold = plan.idempotency, let settled = plan.settlement(upstreamStatus: response.status) {
                core.engine.settleIdempotency(hold, stored: settled.stored, sideEffect: settled.sideEffect, now: core.now())
                if settled.sideEffect { notes.append(.sideEffect(route: hold.scope)) }
                notes.append(.remark(settled.stored != nil
                    ? "idempotency: key \(hold.key) stored with the upstream's \(response.status)"
                    : "idempotency: key \(hold.key) not stored (upstream \(response.status)"
                        + (plan.step?.fault.map { ", \($0.name.rawValue)" } ?? "") + "), free for a retry"))
            }
        case .failure(let error):
            script = plan.failureScript(error.kind, error.reason, record: &record)
            if let hold = plan.idempotency {
                core.engine.settleIdempotency(hold, stored: nil, sideEffect: false, now: core.now())
                notes.append(.remark("idempotency: key \(hold.key) not stored (upstream \(error.kind.rawValue)), free for a retry"))
            }
        }
        answer(exchange, sequence, script, record, notes: notes)
    }

    // MARK: - Streaming

    /// The upstream's head came without the whole body: the client gets the head (after the step's delay) and
    /// the body so far now, the rest as it arrives (`forwarded.stream`). Nothing streams when the client has
    /// already left.
    fileprivate func startStream(
        _ forwarded: ForwardedRequest, _ response: UpstreamResponse, _ timing: UpstreamTiming,
        _ upstream: UpstreamConnection
    ) {
        let (plan, exchange, sequence) = (forwarded.plan, forwarded.exchange, forwarded.sequence)
        forwarded.record.take(timing)
        guard !exchange.ended else {
            upstream.abandon()
            forwarded.record.changed.append("the client left before the upstream answered; its connection was closed")
            let record = forwarded.record
            core.updateEntry(sequence) { $0.proxy = record }
            return
        }
        let (script, closing, keep) = plan.streamOpening(response, record: &forwarded.record)
        let stream = StreamedBody(exchange: exchange, upstream: upstream, closing: closing, keep: keep)
        if let recording {
            // `faultline record`: a copy of the body as it passes, within what the recording may still keep.
            var head = response
            head.body = []
            stream.recorded = head
            stream.copy = []
            stream.copyLimit = recording.remainingBytes
        }
        let snapshot = forwarded.record
        core.updateEntry(sequence) {
            $0.status = script.status
            $0.fault = script.fault
            $0.policyClose = script.policyClose
            $0.proxy = snapshot
        }
        exchange.whenEnded = { [unowned self, weak stream] in
            // The client left (or the server reset) while the body was still coming: the rest is not wanted.
            guard let stream, !stream.upstreamDone else { return }
            stream.upstreamDone = true
            stream.upstream?.abandon()
            recording?.drop()
            let (sent, received) = (stream.sent, stream.received)
            core.updateEntry(sequence) {
                $0.proxy?.changed.append("the client left after \(sent) body bytes; the upstream connection was closed")
                $0.proxy?.upstreamBytes = received
            }
        }
        if keep != nil {
            stream.whenCut = { [unowned self, unowned stream] in
                let received = stream.received
                core.updateEntry(sequence) {
                    $0.proxy?.changed.append("the rest of the upstream's body was not read: its connection was closed")
                    $0.proxy?.upstreamBytes = received
                }
            }
        }
        forwarded.stream = stream
        exchange.respond(script, growing: true)
        stream.forward(response.body)
    }

    /// The streamed body's end: the closing steps, or — when the upstream failed mid-body — the exchange is
    /// abandoned (HTTP/1.1 closes the connection, HTTP/2 resets the stream: the truncation a client must notice).
    private func endStream(
        _ stream: StreamedBody, _ result: Result<UpstreamResponse, UpstreamError>, _ exchange: Exchange,
        _ sequence: Int, _ record: inout ProxyRecord
    ) {
        guard !stream.upstreamDone else { return }
        stream.upstreamDone = true
        stream.upstream = nil
        switch result {
        case .success(let response):
            let last = stream.take(response.body)
            stream.keepCopy(response.body)
            stream.received += response.body.count
            stream.sent += last.count
            exchange.finish(last.isEmpty ? stream.closing : [.body(last)] + stream.closing)
        case .failure(let error):
            record.failure = error.kind.rawValue
            record.error = error.reason
            record.changed.append("the body was cut short after \(stream.sent) bytes: the upstream failed")
            exchange.finish([.abortExchange])
        }
        record.upstreamBytes = stream.received
        let snapshot = record
        core.updateEntry(sequence) { $0.proxy = snapshot }
    }

    private func answer(
        _ exchange: Exchange, _ sequence: Int, _ script: ResponseScript, _ record: ProxyRecord, notes: [JournalNote] = []
    ) {
        guard !exchange.ended else {
            // The client left (or the server reset) before the upstream answered: the record still says what came.
            core.updateEntry(sequence) {
                $0.proxy = record
                $0.notes += notes
            }
            return
        }
        core.updateEntry(sequence) {
            $0.status = script.status
            $0.fault = script.fault
            $0.policyClose = script.policyClose
            $0.proxy = record
            $0.notes += notes
        }
        exchange.respond(script)
    }

    /// The server is stopping: upstream connections close, a recording is written.
    func stop() {
        pool.stop()
        _ = writeRecording()
    }
}

/// A proxied body on its way from the upstream to the client (ARCHITECTURE §4d): each read is appended to the
/// exchange's growing script, and the upstream connection stops reading while more than `highWater` bytes wait
/// for the client, until the codec has pulled them down to `lowWater`. Loop thread only.
final class StreamedBody {
    static let highWater = 1024 * 1024
    static let lowWater = 256 * 1024

    let exchange: Exchange
    weak var upstream: UpstreamConnection?
    /// `.end`, and the connection's close when the response ends it; a cutting fault's break.
    let closing: [ScriptStep]
    /// A cutting fault's count: the body bytes the client gets before `closing` (nil: all of them).
    let keep: Int?
    /// Body bytes handed to the exchange so far.
    var sent = 0
    /// Body bytes read from the upstream so far (more than `sent` when a cutting fault dropped the rest).
    var received = 0
    /// The upstream's part is over: complete, failed, cut, or abandoned because the client left.
    var upstreamDone = false
    /// Run when a cutting fault's count is reached (the journal hears of it).
    var whenCut: (() -> Void)?

    init(exchange: Exchange, upstream: UpstreamConnection, closing: [ScriptStep], keep: Int?) {
        self.exchange = exchange
        self.upstream = upstream
        self.closing = closing
        self.keep = keep
    }

    /// `faultline record`: the upstream's head, and its body as it passed (nil once it outgrew `copyLimit`).
    var recorded: UpstreamResponse?
    var copy: [UInt8]?
    var copyLimit = 0

    func keepCopy(_ bytes: [UInt8]) {
        guard copy != nil else { return }
        if copy!.count + bytes.count > copyLimit {
            copy = nil
        } else {
            copy!.append(contentsOf: bytes)
        }
    }

    /// What of `bytes` the client gets: all of it, or up to a cutting fault's count.
    func take(_ bytes: [UInt8]) -> [UInt8] {
        guard let keep, sent + bytes.count > keep else { return bytes }
        return Array(bytes.prefix(max(keep - sent, 0)))
    }

    func forward(_ bytes: [UInt8]) {
        guard !upstreamDone, !exchange.ended else { return }
        received += bytes.count
        keepCopy(bytes)
        let taken = take(bytes)
        sent += taken.count
        if !taken.isEmpty { exchange.append([.body(taken)]) }
        if let keep, sent >= keep {
            // The fault's count is reached: the break, and the rest of the upstream's body is not wanted.
            upstreamDone = true
            upstream?.abandon()
            upstream = nil
            exchange.finish(closing)
            whenCut?()
            whenCut = nil
            return
        }
        pace()
    }

    /// Pauses the upstream while the client is behind; the codec's pulls resume it.
    func pace() {
        guard exchange.unpulledBytes > Self.highWater, let upstream, exchange.whenRoom == nil else { return }
        upstream.pause()
        exchange.roomMark = Self.lowWater
        exchange.whenRoom = { [weak self] in
            guard let self, !upstreamDone else { return }
            self.upstream?.resume()
        }
    }
}

/// One forwarded request on its way (ARCHITECTURE §4d): what the pool's connection reports to — one allocation
/// per request rather than a closure per event. Loop thread only.
final class ForwardedRequest: UpstreamReceiver {
    private unowned(unsafe) let service: ProxyService
    let plan: ProxyPlan
    let exchange: Exchange
    let sequence: Int
    var record: ProxyRecord
    let mayStream: Bool
    /// Set when the body streams (`upstreamHead`).
    var stream: StreamedBody?

    init(service: ProxyService, plan: ProxyPlan, exchange: Exchange, sequence: Int, record: ProxyRecord, mayStream: Bool) {
        self.service = service
        self.plan = plan
        self.exchange = exchange
        self.sequence = sequence
        self.record = record
        self.mayStream = mayStream
    }

    func shouldStream(_ head: UpstreamResponse) -> Bool { plan.streams(head) }

    func upstreamHead(_ response: UpstreamResponse, _ timing: UpstreamTiming, _ connection: UpstreamConnection) {
        service.startStream(self, response, timing, connection)
    }

    func upstreamBody(_ bytes: [UInt8]) { stream?.forward(bytes) }

    func upstreamFinished(_ result: Result<UpstreamResponse, UpstreamError>, _ timing: UpstreamTiming) {
        service.finish(self, result, timing)
    }
}

extension ProxyRecord {
    /// The connection's timings up to the first byte (the total is known only at the end).
    fileprivate mutating func take(_ timing: UpstreamTiming) {
        connectMilliseconds = timing.connectMilliseconds
        firstByteMilliseconds = timing.firstByteMilliseconds
        reused = timing.reused
    }
}
