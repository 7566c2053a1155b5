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
        pool.forward(key, bytes, method: plan.request.method, limits: limits, startedAt: startedAt) {
            [unowned self] result, timing in
            record.connectMilliseconds = timing.connectMilliseconds
            record.firstByteMilliseconds = timing.firstByteMilliseconds
            record.totalMilliseconds = timing.totalMilliseconds
            record.reused = timing.reused
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
