import CNghttp2
import FaultlineCore

/// Work that could not be done inside an nghttp2 callback (the re-entrancy rule, HTTP2Connection+Output.swift):
/// queued in `HTTP2Connection.deferred` and done between two `mem_send` passes of `flush`, in order.
enum HTTP2DeferredWork {
    /// RST_STREAM with the code the stream's body queue holds (`HTTP2BodyEnd.resetDue`), then the exchange ends.
    case reset(HTTP2Stream)
    /// Pull the stream's script again: nghttp2 took enough of a growing body (`awaitingRoom` → `running`).
    case run(HTTP2Stream)
    /// Close if every stream at or below our GOAWAY's last stream is done.
    case closeIfIdle
    /// The connection policy's GOAWAY, once its last response's END_STREAM went out (`HTTP2AfterEnd.goaway`).
    case goaway
    /// A connection fault from a script that ran inside `mem_recv`: its frames go out first, then the close.
    case abortConnection(ConnectionAbort, HTTP2Stream)
}

extension HTTP2Connection {
    // MARK: - Responses: a script's steps as frames

    /// Past this many body bytes pending on a stream, a growing script's next steps are not pulled until
    /// nghttp2 has taken half of them.
    static let growingQueueLimit = 256 * 1024

    /// Carries out the stream's steps while it is `running`: until one has to wait (a timer, a hang, a script not
    /// there yet, room for a growing body) or the script ends.
    func run(_ stream: HTTP2Stream) {
        guard let exchange = stream.exchange, !closed else { return }
        pulling: while stream.state.isPulling {
            if exchange.isGrowing && stream.body.count >= Self.growingQueueLimit {
                // A growing script (a proxied body) is pulled as nghttp2 sends it (`readBody` runs this again):
                // its producer sees the bytes left in the exchange and slows down.
                stream.enter(.awaitingRoom)
                submitOrResume(stream)
                break pulling
            }
            switch exchange.next() {
            case .notYet:
                // A growing script's head and body so far go out while the rest is on its way.
                if stream.head != nil { submitOrResume(stream) }
                stream.enter(.awaitingScript)
                exchange.whenScriptArrives = { [weak self, weak stream] in
                    guard let self, let stream, case .awaitingScript = stream.state else { return }
                    stream.enter(.running)
                    run(stream)
                }
                if stream.head != nil { break pulling }
                return
            case .finished:
                stream.enter(.done)
            case .step(let step):
                perform(step, on: stream, exchange)
            }
        }
        if case .done = stream.state { performStepsAfterEnd(stream, exchange) }
        // The streams of one read run one after another (`runDeferred`): their frames go out in one write.
        if runningReady {
            flushWanted = true
        } else if exchange.isGrowing && io.pendingOutput > settings.maxPendingOutput {
            // A growing script (a proxied body) wakes this for every piece that arrives: while the client is behind,
            // nothing more is asked of nghttp2 until `drained` flushes — else each wake would queue another batch
            // of DATA for a client with a large window that does not read.
        } else {
            flush()
        }
    }

    func perform(_ step: ScriptStep, on stream: HTTP2Stream, _ exchange: Exchange) {
        switch step {
        case .head(let head):
            stream.head = head
        case .body(let bytes):
            stream.body.append(bytes)
            if stream.body.isSubmitted { resume(stream) }
        case .stream(let slice):
            // Read from the source as nghttp2 asks for DATA (flow control and `maxPendingOutput` pace it).
            stream.body.append(slice)
            if stream.body.isSubmitted { resume(stream) }
        case .end:
            stream.body.end = .endStream(then: stream.request.timedOut ? .resetStream : .nothing)
            submitOrResume(stream)
            stream.enter(.done)
        case .wait(let milliseconds):
            submitOrResume(stream)
            let timer = scheduleStep(milliseconds: milliseconds) { [weak self, weak stream] in
                guard let self, let stream, case .waiting = stream.state else { return }
                stream.enter(.running)
                run(stream)
            }
            // No timer once the connection has closed (a flush on the way may close it): the stream stops.
            stream.enter(timer.map { .waiting(timer: $0) } ?? .done)
        case .hang:
            submitOrResume(stream)
            stream.enter(.hanging)
        case .abortExchange:
            // A body cut short: what was rendered goes out, then RST_STREAM (INTERNAL_ERROR) — END_STREAM never.
            submitOrResume(stream)
            reset(stream, afterBody: UInt32(NGHTTP2_INTERNAL_ERROR.rawValue), outcome: .closedByFault)
            stream.enter(.done)
        case .abortConnection(let abort):
            stream.enter(.done)
            abortConnection(abort, stream: stream, exchange)
        case .endConnection(let end):
            stream.enter(.done)
            endConnection(end, stream: stream)
        case .raw(let bytes):
            // Bytes for the wire as they are (the raw-frame escape hatch): after what nghttp2 has queued.
            flush()
            bytes.withUnsafeBytes { _ = io.write($0) }
            exchange.bytesWritten += bytes.count
        case .http2(let action):
            perform(action, on: stream, exchange)
        case .upgrade:
            // WebSocket routes serve HTTP/1.1 only (`Route.servedProtocols`): never reached over HTTP/2.
            assertionFailure("a WebSocket upgrade on an HTTP/2 stream")
            stream.enter(.done)
            reset(stream, afterBody: UInt32(NGHTTP2_INTERNAL_ERROR.rawValue), outcome: .closedByFault)
        }
    }

    func perform(_ action: HTTP2Action, on stream: HTTP2Stream, _ exchange: Exchange) {
        guard let session else { return }
        switch action {
        case .resetStream(let code):
            submitOrResume(stream)
            let outcome: ExchangeOutcome = code == HTTP2ErrorCode.refusedStream.rawValue ? .notProcessed : .streamReset
            reset(stream, afterBody: code, outcome: outcome)
            stream.enter(.done)
        case .goaway(let last, let code, let graceful):
            let lastStream: Int32 = switch last {
            case .current: stream.id
            case .previous: max(0, stream.id - 2)
            case .stream(let id): Int32(clamping: id)
            }
            submitOrResume(stream)
            if graceful {
                nghttp2_submit_shutdown_notice(session)
                flush()
                gracefulTimer = schedule(milliseconds: 50) { [weak self] in
                    guard let self else { return }
                    gracefulTimer = nil
                    sendGoaway(lastStream, code: code)
                }
            } else {
                sendGoaway(lastStream, code: code)
            }
            if stream.id > lastStream { stream.stop() }
        case .frames(let frames):
            // After what nghttp2 has queued, so the hand-made frames land where the script put them.
            flush()
            for frame in frames {
                let bytes = frame.bytes(stream: Int(stream.id))
                for _ in 0..<max(frame.count, 1) {
                    guard !closed else { return }
                    bytes.withUnsafeBytes { _ = io.write($0) }
                    exchange.bytesWritten += bytes.count
                }
            }
        }
    }

    func sendGoaway(_ lastStream: Int32, code: UInt32) {
        guard let session, !closed else { return }
        if case .writeShut = state {
            enter(.writeShut(lastStream: lastStream))
        } else {
            enter(.goingAway(lastStream: lastStream))
        }
        ourGoaways += 1
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStream, code, nil, 0)
        // Streams above the last stream id were not processed (RFC 9113 §6.8): the client may retry them.
        for stream in streams.values where stream.id > lastStream {
            stream.stop()
            if stream.exchange != nil { end(stream, .notProcessed) }
        }
        flush()
        closeIfIdle()
    }

    /// Closes once no stream at or below our GOAWAY's last stream is under way.
    func closeIfIdle() {
        guard !closed, let last = state.goawayLastStream else { return }
        if inLibrary {
            // Inside nghttp2 (a stream closed in mem_send, a GOAWAY from a request in mem_recv): closing now would
            // leave its queued frames (the GOAWAY itself) unsent and let it call back into a closed connection.
            deferred.append(.closeIfIdle)
            flushWanted = true
            return
        }
        let busy = streams.values.contains { $0.id <= last && !($0.exchange?.ended ?? true) }
        if !busy {
            flush()
            finishClosing(abortive: false)
        }
    }

    /// The steps a script has after its `end`, which the loop no longer pulls: the one that still means something
    /// over HTTP/2 is a planned end of the connection (the engine appends `maxRequests`'s after the response).
    /// Anything else after `end` (a connection fault's close) is HTTP/1.1's and is not carried out.
    func performStepsAfterEnd(_ stream: HTTP2Stream, _ exchange: Exchange) {
        while case .step(let step) = exchange.next() {
            if case .endConnection(let end) = step { endConnection(end, stream: stream) }
        }
    }

    /// A planned end of the connection after this response. `maxRequests` (the connection policy): a graceful
    /// GOAWAY naming every stream opened so far once this response's END_STREAM is out, then close once they are
    /// done. `Connection: close` means nothing over HTTP/2 (RFC 9113 §8.2.2).
    func endConnection(_ end: EndOfConnection, stream: HTTP2Stream) {
        submitOrResume(stream)
        guard end == .maxRequests else { return }
        switch stream.body.end {
        case .endStream(.nothing):
            stream.body.end = .endStream(then: .goaway)
        case .endStreamSent(.nothing) where !(stream.exchange?.ended ?? true):
            stream.body.end = .endStreamSent(then: .goaway)
        default:
            // The response has ended already (or ends some other way): the GOAWAY goes now.
            sendGoaway(highestStream, code: UInt32(NGHTTP2_NO_ERROR.rawValue))
        }
    }

    /// A connection fault: RST, FIN after what was rendered, or a half-close.
    func abortConnection(_ abort: ConnectionAbort, stream: HTTP2Stream, _ exchange: Exchange) {
        if abort != .reset && inLibrary {
            // Inside nghttp2 (a request dispatched in mem_recv): what the stream rendered can only go out once it
            // returns, so the FIN waits until then, or the client would get the FIN before the frames.
            submitOrResume(stream)
            deferred.append(.abortConnection(abort, stream))
            flushWanted = true
            return
        }
        switch abort {
        case .reset:
            end(stream, .resetSent)
            endAllStreams(.resetSent)
            finishClosing(abortive: true)
        case .close, .closeWithoutNotify:
            submitOrResume(stream)
            flush()
            // The flush may have closed the connection already (nghttp2 done, a GOAWAY's close): nothing more.
            guard !closed else { return }
            end(stream, .closedByFault)
            endAllStreams(.closedByFault)
            finishClosing(abortive: false)
        case .shutdownWrite:
            submitOrResume(stream)
            flush()
            guard !closed else { return }
            end(stream, .halfClosed)
            io.shutdownWrite()
            enter(.writeShut(lastStream: state.goawayLastStream))
        }
    }

    /// RST_STREAM `code` once the stream's rendered body has gone out (nghttp2 sends a RST_STREAM submitted now
    /// before DATA it has queued): "DATA then RST" is the body queue's `reset`, then `resetDue` when the last
    /// byte is taken, then the deferred work item that submits it.
    func reset(_ stream: HTTP2Stream, afterBody code: UInt32, outcome: ExchangeOutcome) {
        if stream.body.isSubmitted && stream.body.count > 0 {
            stream.body.end = .reset(code: code, outcome: outcome)
        } else {
            stream.body.end = .resetDue(code: code, outcome: outcome)
            deferred.append(.reset(stream))
            flushWanted = true
        }
    }

    /// One item of deferred work, outside nghttp2.
    func perform(_ work: HTTP2DeferredWork) {
        switch work {
        case .reset(let stream):
            guard let session, !closed, streams[stream.id] != nil,
                  case .resetDue(let code, let outcome) = stream.body.end else { return }
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, code)
            end(stream, outcome)
        case .run(let stream):
            guard streams[stream.id] === stream else { return }
            run(stream)
        case .closeIfIdle:
            closeIfIdle()
        case .goaway:
            sendGoaway(highestStream, code: UInt32(NGHTTP2_NO_ERROR.rawValue))
        case .abortConnection(let abort, let stream):
            guard !closed, let exchange = stream.exchange else { return }
            abortConnection(abort, stream: stream, exchange)
        }
    }
}
