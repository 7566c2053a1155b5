import CNghttp2
import FaultlineCore

extension HTTP2Connection {
    // MARK: - Requests

    /// A HEADERS frame begins (nghttp2's begin-frame callback, before it decides anything about it). A new client
    /// stream after our GOAWAY went out is one nghttp2 will ignore without a callback: it reached the server, so it
    /// is journaled here, once (`highestStream` moves past it).
    func headersBegin(_ id: Int32) {
        guard goawayWentOut, id % 2 == 1, id > highestStream, streams[id] == nil, let session else { return }
        highestStream = id
        let last = state.goawayLastStream ?? nghttp2_session_get_last_proc_stream_id(session)
        let context = RequestContext(arrival: io.now(), arrivedNow: true, indexOnConnection: requestCount, stream: Int(id))
        requestCount += 1
        io.journalIgnoredStream(context, afterGoaway: last)
    }

    func beginStream(_ id: Int32) {
        highestStream = max(highestStream, id)
        let stream = HTTP2Stream(id: id, arrival: io.now(), index: requestCount)
        requestCount += 1
        streams[id] = stream
        if let clientGoaway { stream.client.goaway = clientGoaway }
        if let delay = settings.windowUpdateAfterMilliseconds {
            // The stalled upload (`initialWindowSize: 0`) goes on once the window opens.
            stream.windowTimer = schedule(milliseconds: delay) { [weak self, weak stream] in
                guard let self, let stream, let session, !closed, streams[stream.id] != nil else { return }
                stream.windowTimer = nil
                nghttp2_submit_window_update(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, 1 << 24)
                flush()
            }
        }
        // The request timer starts only if the read that began the stream did not also end its request (most
        // requests are one HEADERS frame with END_STREAM): no timer per stream on the fast path.
        begunThisRead.append(stream)
        if let limit = settings.goawayAfterStreams, requestCount == limit, state.goawayLastStream == nil {
            // The connection has served its quota: this stream is the last one processed.
            sendGoaway(id, code: UInt32(NGHTTP2_NO_ERROR.rawValue))
        }
    }

    func header(_ id: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        guard let stream = streams[id] else { return true }
        stream.request.headerBytes += name.count + value.count + 32
        if stream.request.headerBytes > settings.parserLimits.maxHeaderSectionBytes {
            stream.request.error = HTTPParseError(
                status: 431,
                reason: "header section larger than \(settings.parserLimits.maxHeaderSectionBytes) bytes (RFC 6585 §5)")
            return true
        }
        let name = String(decoding: name, as: UTF8.self)
        let value = String(decoding: value, as: UTF8.self)
        switch name {
        case ":method": stream.request.method = value
        case ":path": stream.request.path = value
        default: break
        }
        stream.request.headers.append(name: name, value: value)
        return true
    }

    func data(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[id] else { return }
        if stream.request.body.count + bytes.count > settings.parserLimits.maxBodyBytes {
            if stream.request.error == nil {
                stream.request.error = HTTPParseError(
                    status: 413, reason: "body larger than \(settings.parserLimits.maxBodyBytes) bytes (RFC 9110 §15.5.14)")
            }
            return
        }
        stream.request.body.append(contentsOf: bytes)
    }

    func startRequestTimers() {
        for stream in begunThisRead where streams[stream.id] === stream {
            guard case .receiving = stream.state else { continue }
            let timer = schedule(milliseconds: settings.requestTimeoutMilliseconds) { [weak self, weak stream] in
                guard let self, let stream, !closed, streams[stream.id] != nil else { return }
                requestTimedOut(stream)
            }
            stream.enter(.receiving(timer: timer))
        }
        begunThisRead.removeAll(keepingCapacity: true)
    }

    /// The request did not complete in time: 408 (RFC 9110 §15.5.9) with what arrived, then RST_STREAM NO_ERROR
    /// once the answer is out, so the client stops sending (RFC 9113 §8.1; `HTTP2AfterEnd.resetStream`).
    func requestTimedOut(_ stream: HTTP2Stream) {
        guard case .receiving = stream.state else { return }
        stream.request.error = HTTPParseError(
            status: 408, reason: "the request was not complete within \(settings.requestTimeoutMilliseconds) ms")
        requestComplete(stream.id)
        flush()
    }

    /// The request is complete (END_STREAM): dispatch it.
    func requestComplete(_ id: Int32) {
        guard let stream = streams[id], case .receiving = stream.state else { return }
        let head = stream.request.head
        let context = stream.requestContext
        if let last = state.goawayLastStream, id > last {
            // Above our GOAWAY's last stream id: journaled, never processed (RFC 9113 §6.8).
            stream.enter(.unanswered)
            io.journalUnanswered(
                HTTPRequest(head: head, body: stream.request.body), nil, context, .notProcessed, client: stream.client)
            return
        }
        // Running before the Dispatcher sees it: a teardown from inside `dispatch` (the server stopping) must not
        // journal the stream a second time as cut short.
        stream.enter(.running)
        let exchange: Exchange
        if var error = stream.request.error {
            error.head = head
            error.requestLinePrefix = stream.request.requestLine
            exchange = io.reject(error, context, body: stream.request.body)
        } else {
            exchange = io.dispatch(HTTPRequest(head: head, body: stream.request.body), context)
        }
        stream.exchange = exchange
        stream.request.body = []
        if closed {
            // The connection ended while the request was dispatched: its exchange ends as the others did.
            end(stream, closingOutcome ?? .clientClosed)
            return
        }
        // A GOAWAY from the client came while the request was still arriving: its entry has it too.
        if !stream.client.isEmpty { journalClientFrames(stream) }
        if inLibrary {
            // From nghttp2's callback: the script runs once nghttp2 has returned, so that what a step writes or
            // closes comes after the frames already queued.
            readyToRun.append(stream)
            flushWanted = true
        } else {
            run(stream)
        }
    }

    /// nghttp2 refused a request's HEADERS itself (more streams than SETTINGS_MAX_CONCURRENT_STREAMS allows, a
    /// stream id out of order, fields HTTP/2 forbids) and answered with RST_STREAM or GOAWAY: the request reached
    /// the server, so it is journaled — not processed when refused, else rejected — with what was read of it.
    func requestRefused(_ id: Int32, libraryError: Int32) {
        // A stream already answering (invalid trailers, say) ends through nghttp2's stream close as usual.
        let stream = streams[id]
        if let stream {
            guard case .receiving = stream.state else { return }
        }
        streams[id] = nil
        stream?.cancelTimers()
        stream?.enter(.unanswered)
        let refused = libraryError == NGHTTP2_ERR_REFUSED_STREAM.rawValue
        let context = stream?.requestContext ?? RequestContext(
            arrival: io.now(), arrivedNow: false, indexOnConnection: requestCount, stream: Int(id))
        let known = stream.flatMap { $0.request.method.isEmpty ? nil : $0.request }
        let error = HTTPParseError(
            status: 400, reason: "HTTP/2 stream \(id) \(refused ? "refused (RST_STREAM REFUSED_STREAM)" : "rejected"): "
                + Self.describe(libraryError), head: known?.head,
            requestLinePrefix: known?.requestLine ?? "(HTTP/2 stream \(id))")
        io.journalUnanswered(
            nil, error, context, refused ? .notProcessed : .rejected, client: stream?.client ?? HTTP2ClientFrames())
    }

    /// nghttp2 closed the stream: its response is complete, or it was reset by either side.
    func streamClosed(_ id: Int32, errorCode: UInt32) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.cancelTimers()
        if let exchange = stream.exchange {
            if !exchange.ended {
                let outcome: ExchangeOutcome
                if case .endStreamSent = stream.body.end, errorCode == NGHTTP2_NO_ERROR.rawValue {
                    outcome = .completed
                } else {
                    outcome = stream.body.end.ourReset ?? .clientClosed
                }
                end(stream, outcome)
            }
        } else if !stream.isJournaled {
            if errorCode != NGHTTP2_NO_ERROR.rawValue && stream.client.reset == nil {
                // Not the client's RST_STREAM: nghttp2 reset the stream itself, for a rule the client broke while
                // sending the request (DATA past the stream's window: FLOW_CONTROL_ERROR, RFC 9113 §6.9.1).
                let code = HTTP2ErrorCode(rawValue: errorCode)?.name ?? "error \(errorCode)"
                journalIncomplete(
                    stream, .rejected,
                    reason: "HTTP/2 stream \(id) reset by the server with RST_STREAM \(code) while its request arrived"
                        + (lastLibraryError.map { " (\($0))" } ?? ""))
            } else {
                journalIncomplete(stream, .clientClosed)
            }
        }
        if state.goawayLastStream != nil { closeIfIdle() }
    }
}
