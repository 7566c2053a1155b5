import CNghttp2
import FaultlineCore

/// Session I/O: nghttp2 in, frames out.
///
/// **The re-entrancy rule.** nghttp2 calls back into this class from inside `nghttp2_session_mem_recv` (frames
/// arriving) and `nghttp2_session_mem_send` (frames leaving), and nothing may call nghttp2 from inside its own
/// callback: a submit there would be sent out of order, a close would leave its queued frames unsent, and a
/// `mem_send` would recurse. So `inLibrary` is true for the length of both calls, and work that would call
/// nghttp2 waits:
/// - a stream whose request completed in `mem_recv` waits in `readyToRun` (its script runs once nghttp2 returned,
///   so that what a step writes or closes comes after the frames already queued);
/// - anything else waits in `deferred` as an `HTTP2DeferredWork` item: the RST_STREAM due after a body's last
///   DATA, a pull after a growing body made room, a close after a GOAWAY, a connection fault from `mem_recv`;
/// - a `flush` asked for sets `flushWanted`.
/// `flush` alternates `mem_send` passes with one batch of that work (`runDeferred`) until none is left, so work a
/// batch queues (a RST_STREAM after the HEADERS it produced) comes after the frames before it.
extension HTTP2Connection {
    // MARK: - Writing

    /// Moves what nghttp2 has queued to the transport, until it has nothing more or the transport is full. The
    /// frames nghttp2 hands out one at a time are gathered and written together (one write, one TLS record, per
    /// flush rather than per frame: two sends per request otherwise).
    func flush() {
        guard !closed, let session else { return }
        if inLibrary {
            flushWanted = true
            return
        }
        repeat {
            flushWanted = false
            while true {
                var data: UnsafePointer<UInt8>?
                inLibrary = true
                let count = nghttp2_session_mem_send(session, &data)
                inLibrary = false
                // A callback closed the connection (what was gathered went out first: `end`, `finishClosing`).
                if closed { return }
                if count < 0 {
                    reportConnectionError(Self.describe(Int32(truncatingIfNeeded: count)))
                    finishClosing(abortive: true)
                    return
                }
                guard count > 0, let data else { break }
                gathered.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
                if gathered.count >= 64 * 1024, !writeGathered() { return }
            }
            if !writeGathered() { return }
            runDeferred()
        } while flushWanted && !closed
        if !closed && nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            finishClosing(abortive: false)
        }
    }

    /// Hands the gathered frames to the transport; false when the client is gone. Small flushes keep their
    /// buffer; a large body's does not stay with an idle connection.
    func sendGathered() -> Bool {
        wroteAnything = true
        let written = gathered.withUnsafeBytes { io.write($0) }
        gathered.removeAll(keepingCapacity: gathered.capacity <= 16 * 1024)
        return written
    }

    /// Writes the gathered frames; false when the connection closed (the client is gone) or reading paused.
    func writeGathered() -> Bool {
        guard !gathered.isEmpty, !writingGathered, !closed else { return !closed }
        writingGathered = true
        let written = sendGathered()
        writingGathered = false
        if !written {
            finishClosing(abortive: true)
            return false
        }
        if io.pendingOutput > settings.maxPendingOutput {
            if !readingPaused {
                readingPaused = true
                io.setReading(false)
            }
            return false
        }
        return true
    }

    /// One batch of waiting work per call, between two `mem_send` passes of `flush`: the deferred actions first
    /// (an RST_STREAM after a stream's last DATA, a close after a GOAWAY), else the streams whose requests
    /// completed. A batch may queue work that must come after the frames it produced (a RST_STREAM after a
    /// stream's HEADERS): the next call, after the next pass, does it.
    func runDeferred() {
        guard !closed else { return }
        if !deferred.isEmpty {
            let work = deferred
            deferred = []
            for item in work where !closed { perform(item) }
            flushWanted = true
        } else if !readyToRun.isEmpty {
            swap(&running, &readyToRun)
            runningReady = true
            for stream in running where !closed { run(stream) }
            runningReady = false
            running.removeAll(keepingCapacity: true)
            flushWanted = true
        }
    }

    func submitOrResume(_ stream: HTTP2Stream) {
        if stream.body.isSubmitted {
            resume(stream)
        } else {
            submit(stream)
        }
    }

    func resume(_ stream: HTTP2Stream) {
        guard case .starved = stream.body.provider, let session else { return }
        stream.body.provider = .reading
        nghttp2_session_resume_data(session, stream.id)
    }

    /// HEADERS for the stream's head, and a data source for its body unless the script already ended with none.
    func submit(_ stream: HTTP2Stream) {
        guard let head = stream.head, let session, !stream.body.isSubmitted else { return }
        if case .writeShut = state { return }
        stream.body.provider = .reading
        var endsAlone: HTTP2AfterEnd?
        if case .endStream(let then) = stream.body.end, stream.body.count == 0 { endsAlone = then }
        // Plain steps share their head: the fields of the last one rendered are kept, and made again when the
        // second changes the date (the same line, the same array, for a whole second: compared by identity first).
        let date = head.addsDate ? io.dateLine() : []
        if head !== lastHead || date != lastDate {
            lastHead = head
            lastDate = date
            lastFields = Self.fields(head, dateLine: date)
        }
        let fields = lastFields
        var provider = nghttp2_data_provider(
            source: nghttp2_data_source(ptr: nil),
            read_callback: { session, streamID, buffer, length, flags, _, user in
                guard let user else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
                let connection = Unmanaged<HTTP2Connection>.fromOpaque(user).takeUnretainedValue()
                return connection.readBody(streamID, buffer, length, flags)
            })
        let result = fields.withNV { nv, count in
            endsAlone == nil
                ? nghttp2_submit_response(session, stream.id, nv, count, &provider)
                : nghttp2_submit_response(session, stream.id, nv, count, nil)
        }
        if result != 0 {
            stream.body.provider = .notSubmitted
        } else if let then = endsAlone {
            // HEADERS with END_STREAM: the response has no body.
            stream.body.end = .endStreamSent(then: then)
        }
    }

    /// nghttp2 asks for DATA: the queued body bytes, the EOF flag after the last one when the script ended, or
    /// "deferred" when there are none yet (`resume` wakes it). A reset due after the body is handed to the
    /// deferred work here, once its last byte is taken.
    func readBody(
        _ id: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>?
    ) -> Int {
        guard let stream = streams[id], let buffer else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        if stream.body.count == 0 {
            switch stream.body.end {
            case .endStream(let then), .endStreamSent(let then):
                flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                stream.body.end = .endStreamSent(then: then)
                return 0
            case .reset(let code, let outcome):
                stream.body.end = .resetDue(code: code, outcome: outcome)
                deferred.append(.reset(stream))
                flushWanted = true
            case .open, .resetDue:
                break
            }
            stream.body.provider = .starved
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        let count = stream.body.take(into: buffer, length: length)
        if stream.body.count == 0, case .endStream(let then) = stream.body.end {
            flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            stream.body.end = .endStreamSent(then: then)
        }
        if case .awaitingRoom = stream.state, stream.body.count < Self.growingQueueLimit / 2 {
            // Outside nghttp2's callback: the growing script is pulled again.
            stream.enter(.running)
            deferred.append(.run(stream))
            flushWanted = true
        }
        return count
    }

    /// A frame went out: the frame that ended a stream completes its exchange.
    func frameSent(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        if header.type == UInt8(NGHTTP2_GOAWAY.rawValue) {
            goawayWentOut = true
            let code = frame.pointee.goaway.error_code
            if ourGoaways > 0 {
                ourGoaways -= 1
            } else if code != NGHTTP2_NO_ERROR.rawValue {
                // nghttp2 found the client breaking the protocol and answered with this GOAWAY.
                let name = HTTP2ErrorCode(rawValue: code)?.name ?? "error \(code)"
                reportConnectionError(lastLibraryError.map { "\(name): \($0)" } ?? name)
            }
            return
        }
        guard header.type == UInt8(NGHTTP2_HEADERS.rawValue) || header.type == UInt8(NGHTTP2_DATA.rawValue),
              let stream = streams[header.stream_id] else { return }
        // The exchange's bytes are its frames', headers included (HPACK-compressed as sent).
        stream.exchange?.bytesWritten += 9 + header.length
        if header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
            end(stream, .completed)
            guard case .endStreamSent(let then) = stream.body.end, let session else { return }
            switch then {
            case .nothing:
                break
            case .resetStream:
                nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, UInt32(NGHTTP2_NO_ERROR.rawValue))
            case .goaway:
                // Inside mem_send: the GOAWAY (which may close the connection) waits for nghttp2 to return.
                deferred.append(.goaway)
                flushWanted = true
            }
        }
    }

    /// The response head as HTTP/2 fields: `:status`, `date` from `dateLine` when it is not empty, lower-case
    /// names, and none of the connection-specific fields (RFC 9113 §8.2.2). A chunked head's framing is HTTP/1.1's:
    /// DATA frames carry its body.
    static func fields(_ head: ResponseHead, dateLine: [UInt8] = []) -> HTTP2Fields {
        let fields = HTTP2Fields()
        fields.append(":status", String(head.status))
        if !dateLine.isEmpty {
            fields.append("date", String(decoding: HTTPDateCache.value(ofLine: dateLine), as: UTF8.self))
        }
        for field in head.headers {
            let name = field.name.lowercased()
            switch name {
            case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
                continue
            default:
                fields.append(name, field.value)
            }
        }
        if let length = head.contentLength { fields.append("content-length", String(length)) }
        return fields
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
         UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    static func describe(_ code: Int32) -> String {
        guard let text = nghttp2_strerror(code) else { return "nghttp2 error \(code)" }
        return String(cString: text)
    }

}
