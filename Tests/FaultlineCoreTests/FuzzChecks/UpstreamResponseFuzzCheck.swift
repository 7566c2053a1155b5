import FaultlineCore

/// What must hold for any bytes a hostile upstream sends the proxy: the contract checks of the `upstream-response`
/// fuzzer (Fuzz/entries/upstream-response/UpstreamResponseFuzzer.swift), which compiles this file, and of
/// FuzzRegressionTests. The proxy reads the upstream's answer with `HTTPResponseParser`; an upstream is outside the
/// test's control (a real service, a recording replayed, a misbehaving stub), so whatever it sends must end as a
/// response RFC 9112 allows or as a failure the proxy turns into a 502, the same whichever reads it arrived in.
///
/// The first input byte picks: bit 0 a HEAD request (no body may follow), bits 1–4 the read size (1–16 bytes),
/// bit 5 streaming the body once the head is read (`startStreaming`, as the proxy does for a body that does not
/// come with its head), bit 6 the end of the input as the upstream's FIN (`finish`). The limits are small (512-byte
/// header section, 1,024-byte body) so that inputs reach them.
///
/// No `import Testing` here: the fuzzer is built by swiftc alone, without the test libraries.
enum UpstreamResponseFuzzCheck {
    static let maxHeaderBytes = 512
    static let maxBodyBytes = 1024

    /// How one read of the input ended: a response, with every body byte (streamed ones joined), or a failure.
    struct Outcome: Equatable {
        var response: UpstreamResponse?
        var extraBytes = false
        var failed = false
        var reason = ""
        var body: [UInt8] = []
        var streamed = false
    }

    static func violations(in input: [UInt8]) -> [String] {
        guard let control = input.first else { return [] }
        let bytes = Array(input.dropFirst())
        let head = control & 0x01 != 0
        let piece = Int((control >> 1) & 0x0F) + 1
        let stream = control & 0x20 != 0
        let finish = control & 0x40 != 0
        var problems: [String] = []
        let inPieces = read(bytes, piece: piece, head: head, stream: stream, finish: finish, problems: &problems)
        let whole = read(bytes, piece: max(bytes.count, 1), head: head, stream: stream, finish: finish, problems: &problems)
        // The same bytes in other reads: the same answer (a streamed body starts at a different point, so only
        // the bytes and the head are compared; whether bytes past the response came with it depends on the reads).
        // One exception: with streaming, a body over the limit that arrives in the same read as its head fails
        // before the head is handed up to be streamed. The proxy's real reads (64 KiB) never hold more than its
        // limit (64 MiB); only this check's small limit meets it.
        let limitInFirstRead = stream && [inPieces, whole].contains { $0.reason.contains("larger than the proxy's limit") }
        // Two failures agree whatever body bytes each had streamed before it.
        let bothFailed = inPieces.failed && whole.failed
        if !limitInFirstRead && !bothFailed && (inPieces.failed != whole.failed || inPieces.body != whole.body
            || inPieces.response?.status != whole.response?.status
            || inPieces.response?.headers != whole.response?.headers) {
            problems.append("reads of \(piece) bytes and one read disagree: \(summary(inPieces)) vs \(summary(whole))")
        }
        for outcome in [inPieces, whole] {
            guard let response = outcome.response else { continue }
            if !(100...999).contains(response.status) { problems.append("status \(response.status) completed") }
            if [100, 102, 103].contains(response.status) { problems.append("an interim \(response.status) completed") }
            let bodyless = head || response.status == 204 || response.status == 304 || (100..<200).contains(response.status)
            if bodyless && !outcome.body.isEmpty { problems.append("a body after a response that has none") }
            if let length = response.declaredLength, !bodyless, outcome.body.count != length {
                problems.append("Content-Length \(length) but \(outcome.body.count) body bytes")
            }
            if !stream && outcome.body.count > maxBodyBytes {
                problems.append("a body kept whole of \(outcome.body.count) bytes, over the limit")
            }
            if outcome.body.count > bytes.count { problems.append("more body bytes than input bytes") }
        }
        return problems
    }

    private static func summary(_ outcome: Outcome) -> String {
        outcome.failed ? "failed" : outcome.response.map { "\($0.status), \(outcome.body.count) body bytes" } ?? "incomplete"
    }

    private static func read(
        _ bytes: [UInt8], piece: Int, head: Bool, stream: Bool, finish: Bool, problems: inout [String]
    ) -> Outcome {
        var parser = HTTPResponseParser(
            requestMethod: head ? "HEAD" : "GET", maxHeaderBytes: maxHeaderBytes, maxBodyBytes: maxBodyBytes,
            mayStream: stream)
        var outcome = Outcome()
        var offset = 0
        var progress = HTTPResponseParser.Progress.needMore
        func settle(_ next: HTTPResponseParser.Progress) -> Bool {
            switch next {
            case .needMore:
                if parser.streaming { outcome.body += parser.takeBody() }
                return false
            case .complete(let response, let extra):
                outcome.response = response
                outcome.extraBytes = extra
                outcome.body += response.body
                return true
            case .failed(let reason):
                outcome.failed = true
                outcome.reason = reason
                return true
            }
        }
        while offset < bytes.count {
            let end = min(offset + piece, bytes.count)
            progress = parser.feed(bytes[offset..<end])
            offset = end
            if settle(progress) { break }
            if stream, !parser.streaming, parser.inBody {
                let soFar = parser.startStreaming()
                outcome.body += soFar.body
                outcome.streamed = true
            }
        }
        if outcome.response == nil, !outcome.failed, finish { _ = settle(parser.finish()) }
        if outcome.response != nil || outcome.failed {
            // Done is done: more bytes change nothing.
            if case .complete = parser.feed([0x48]) { problems.append("a second response completed") }
        }
        return outcome
    }
}
