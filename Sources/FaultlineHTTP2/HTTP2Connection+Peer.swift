import CNghttp2
import FaultlineCore

extension HTTP2Connection {
    // MARK: - PINGs

    func schedulePing() {
        guard let every = settings.pingEveryMilliseconds else { return }
        pingTimer = schedule(milliseconds: every) { [weak self] in
            guard let self, let session, !closed else { return }
            pingCounter += 1
            var opaque = pingCounter.bigEndian
            withUnsafeBytes(of: &opaque) { bytes in
                _ = nghttp2_submit_ping(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), bytes.bindMemory(to: UInt8.self).baseAddress)
            }
            pingsInFlight[pingCounter] = io.now().monotonicNanos
            summary.pingsSent += 1
            flush()
            schedulePing()
        }
    }

    /// A PING arrived: the client's own, or the acknowledgement of one of ours (its round trip is journaled).
    func pingReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        guard frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 else {
            summary.pingsReceived += 1
            return
        }
        var opaque = frame.pointee.ping.opaque_data
        let counter = withUnsafeBytes(of: &opaque) { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) }
        guard let sentAt = pingsInFlight.removeValue(forKey: counter) else { return }
        summary.pingRoundTripsMilliseconds.append(Double(io.now().monotonicNanos &- sentAt) / 1_000_000)
    }

    // MARK: - What the client sent to end a stream or the connection


    /// The client sent GOAWAY: it found something wrong with the connection (the code says what: a `raw-frames`
    /// fault answered with COMPRESSION_ERROR) or is leaving. Journaled on the entry of every stream still under
    /// way — a hanging stream's entry is the one a test reads — and of any stream begun after it; on the
    /// connection's entry when it ends (`finishClosing`). Nothing here calls nghttp2 (we are inside its callback).
    func goawayReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let goaway = frame.pointee.goaway
        var record = HTTP2ClientGoaway(
            errorCode: goaway.error_code, lastStreamID: Int(goaway.last_stream_id),
            debugData: UnsafeBufferPointer(
                start: UnsafePointer(goaway.opaque_data), count: goaway.opaque_data == nil ? 0 : goaway.opaque_data_len),
            receivedAtMonotonicNanos: io.now().monotonicNanos)
        record.count = (clientGoaway?.count ?? 0) + 1
        clientGoaway = record
        for stream in streams.values where !(stream.exchange?.ended ?? false) {
            stream.client.goaway = record
            journalClientFrames(stream)
        }
    }

    /// The client sent RST_STREAM (RFC 9113 §6.4): CANCEL when it gave up waiting, an error when it found the stream
    /// broken. Journaled on that stream's entry, before nghttp2 closes the stream (`streamClosed` ends it).
    func resetReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        guard let stream = streams[frame.pointee.hd.stream_id] else { return }
        stream.client.reset = HTTP2ClientReset(
            errorCode: frame.pointee.rst_stream.error_code, receivedAtMonotonicNanos: io.now().monotonicNanos)
        journalClientFrames(stream)
    }

    /// What the client sent, on the stream's entry once it has one; a stream not journaled yet (its request still
    /// arriving) carries it into its entry (`requestComplete`, `journalIncomplete`). Admin exchanges have none.
    func journalClientFrames(_ stream: HTTP2Stream) {
        guard let sequence = stream.exchange?.sequence else { return }
        io.clientSent(stream.client, onEntry: sequence)
    }


    /// Whether a stream's scripted response is in progress (a scenario reset must not let it leak).
    package var hasPendingScriptedResponse: Bool {
        streams.values.contains { $0.exchange.map { !$0.ended && $0.sequence != nil } ?? false }
    }

}
