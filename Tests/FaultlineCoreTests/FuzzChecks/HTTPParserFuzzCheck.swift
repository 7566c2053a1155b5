import FaultlineCore

/// What must hold for any bytes a client sends to `HTTPRequestParser`: the contract checks of the
/// `http-parser` fuzzer (Fuzz/entries/http-parser/HTTPParserFuzzer.swift), which compiles this file, and of
/// FuzzRegressionTests, which runs the saved inputs through it. Returns the broken rules; [] when all hold.
///
/// No `import Testing` here: the fuzzer is built by swiftc alone, without the test libraries.
///
/// Input layout, so one input drives the limits and the split points as well as the bytes:
/// - byte 0 modulo 4 picks the limits (`limitProfiles`);
/// - byte 1 picks how the stream is cut: the low two bits give the largest piece (1, 4, 17 or 257 bytes), the
///   other six seed the piece sizes;
/// - the rest is the byte stream. Seed files start with two printable bytes such as `0c`.
enum HTTPParserFuzzCheck {
    /// Limits that reach the limit checks with short inputs. Every request-line limit is at least 200 bytes:
    /// below that, a 414 found before the line's end carries a shorter request-line prefix than the same 414
    /// found with the whole line buffered, which is allowed ("up to 200 bytes") but would fail the comparison.
    static let limitProfiles: [HTTPParserLimits] = [
        HTTPParserLimits(),
        HTTPParserLimits(maxRequestLineBytes: 200, maxHeaderSectionBytes: 300, maxBodyBytes: 40),
        // A header section limit below the request-line limit, and no body allowed at all.
        HTTPParserLimits(maxRequestLineBytes: 400, maxHeaderSectionBytes: 220, maxBodyBytes: 0),
        // The parser promises to survive `.max` without overflowing.
        HTTPParserLimits(maxRequestLineBytes: .max, maxHeaderSectionBytes: .max, maxBodyBytes: .max),
    ]

    static func violations(in input: [UInt8]) -> [String] {
        guard input.count >= 2 else { return [] }
        let limits = limitProfiles[Int(input[0] % 4)]
        let stream = Array(input[2...])
        var problems: [String] = []

        var whole = HTTPRequestParser(limits: limits)
        whole.append(stream)
        let wholeEvents = drain(&whole)
        problems += sequenceViolations(wholeEvents, limits: limits, mode: "one append")
        problems += stateViolations(whole, after: wholeEvents, mode: "one append")

        // The same bytes in pieces, drained after each, must give the same events: the parser may not depend on
        // where the network cut the stream (RFC 9112 is a byte stream).
        var pieces = HTTPRequestParser(limits: limits)
        var piecesEvents: [HTTPParseEvent] = []
        var random = SeededRandom(seed: UInt64(input[1] >> 2))
        let largestPiece = [1, 4, 17, 257][Int(input[1] & 3)]
        var offset = 0
        while offset < stream.count {
            let value = random.next()
            let size = min(1 + Int(value % UInt64(largestPiece)), stream.count - offset)
            let piece = Array(stream[offset ..< offset + size])
            // Both append overloads, chosen by a bit the piece size does not use.
            if value & (1 << 40) == 0 {
                pieces.append(piece)
            } else {
                piece.withUnsafeBytes { pieces.append($0) }
            }
            offset += size
            let events = drain(&pieces)
            piecesEvents += events
            problems += stateViolations(pieces, after: piecesEvents, mode: "pieces up to byte \(offset)")
            if !problems.isEmpty { return problems }
        }
        problems += sequenceViolations(piecesEvents, limits: limits, mode: "pieces")

        if piecesEvents != wholeEvents {
            let index = zip(piecesEvents, wholeEvents).prefix(while: { $0 == $1 }).count
            let inPieces = index < piecesEvents.count ? describe(piecesEvents[index]) : "nothing"
            let inWhole = index < wholeEvents.count ? describe(wholeEvents[index]) : "nothing"
            problems.append("event \(index) differs: \(inPieces) in pieces, \(inWhole) in one append")
        }
        if pieces.bufferedByteCount != whole.bufferedByteCount || pieces.isReadingBody != whole.isReadingBody
            || pieces.hasPartialRequest != whole.hasPartialRequest
            || pieces.partialRequestLine != whole.partialRequestLine
        {
            problems.append("final state differs between pieces and one append")
        }

        for event in wholeEvents {
            guard case .request(let request) = event else { continue }
            problems += roundTripViolations(request)
            exerciseMatching(request)
        }
        return problems
    }

    // MARK: Rules

    /// The events form `(head? request)* [head? failure]` (the head first exactly when a body or an Expect field
    /// comes), each request is framed as its head says, and each
    /// failure carries an allowed status.
    private static func sequenceViolations(
        _ events: [HTTPParseEvent], limits: HTTPParserLimits, mode: String
    ) -> [String] {
        var problems: [String] = []
        var pendingHead: HTTPRequestHead?
        for (index, event) in events.enumerated() {
            let at = "\(mode), event \(index)"
            if index > 0, case .failure = events[index - 1] {
                problems.append("\(at): \(describe(event)) after a failure")
            }
            switch event {
            case .head(let head):
                if pendingHead != nil { problems.append("\(at): a second head before the request") }
                pendingHead = head
                problems += headViolations(head, at: at)
            case .request(let request):
                if let pendingHead {
                    if pendingHead != request.head { problems.append("\(at): request after another request's head") }
                } else if Self.announcesHead(request.head) {
                    problems.append("\(at): a request with a body or an Expect field came without its head first")
                } else {
                    problems += headViolations(request.head, at: at)
                }
                pendingHead = nil
                problems += bodyViolations(request, limits: limits, at: at)
            case .failure(let error):
                if let pendingHead, error.head != pendingHead {
                    problems.append("\(at): failure after a head does not carry that head")
                }
                pendingHead = nil
                if ![400, 413, 414, 431, 501, 505].contains(error.status) {
                    problems.append("\(at): failure status \(error.status)")
                }
                if error.reason.isEmpty { problems.append("\(at): failure without a reason") }
                if error.requestLinePrefix.unicodeScalars.count > 200 {
                    problems.append("\(at): request-line prefix longer than 200 bytes")
                }
            }
        }
        return problems
    }

    /// Whether the parser must announce this head before its request (`HTTPParseEvent.head`): a body follows
    /// (Transfer-Encoding, a Content-Length above 0) or the client sent Expect.
    private static func announcesHead(_ head: HTTPRequestHead) -> Bool {
        if head.headers["expect"] != nil || head.headers["transfer-encoding"] != nil { return true }
        // Without Foundation (the fuzzer builds this file alone): each comma-separated value, spaces and tabs
        // trimmed, is a number other than 0.
        return head.headers.values("content-length").contains { value in
            value.split(separator: ",").contains { part in
                Int(String(part.filter { $0 != " " && $0 != "\t" })) != 0
            }
        }
    }

    /// RFC 9112 §3 and §3.2: a token method, a target without spaces, HTTP/1.0 or 1.1, one Host in HTTP/1.1.
    private static func headViolations(_ head: HTTPRequestHead, at: String) -> [String] {
        var problems: [String] = []
        if head.method.isEmpty || !head.method.utf8.allSatisfy(isTokenByte) {
            problems.append("\(at): method \(head.method.debugDescription) is not a token")
        }
        if head.target.isEmpty || head.target.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
            problems.append("\(at): target \(head.target.debugDescription) is empty or holds a space or control")
        }
        if head.version != .http1_0 && head.version != .http1_1 {
            problems.append("\(at): version \(head.version)")
        }
        let hosts = head.headers.values("host").count
        if hosts > 1 || (hosts == 0 && head.version == .http1_1) {
            problems.append("\(at): \(hosts) Host fields in an \(head.version) request")
        }
        for field in head.headers {
            if field.name.isEmpty || !field.name.utf8.allSatisfy(isTokenByte) {
                problems.append("\(at): field name \(field.name.debugDescription) is not a token")
            }
            if field.value.unicodeScalars.contains(where: { $0 == "\0" || $0 == "\r" || $0 == "\n" }) {
                problems.append("\(at): field value \(field.value.debugDescription) holds NUL, CR or LF")
            }
        }
        return problems
    }

    /// The body is exactly what the framing fields declare (RFC 9112 §6.3), recomputed here independently.
    private static func bodyViolations(_ request: HTTPRequest, limits: HTTPParserLimits, at: String) -> [String] {
        var problems: [String] = []
        if request.body.count > limits.maxBodyBytes {
            problems.append("\(at): body of \(request.body.count) bytes over the \(limits.maxBodyBytes) limit")
        }
        let codings = request.headers.values("transfer-encoding")
        let lengths = request.headers.values("content-length")
        if !codings.isEmpty {
            let last = codings.joined(separator: ",").split(separator: ",").last?.trimmingWhitespace() ?? ""
            if !last.caseInsensitiveEquals("chunked") || !lengths.isEmpty || request.head.version != .http1_1 {
                problems.append("\(at): accepted Transfer-Encoding \(codings) with Content-Length \(lengths)")
            }
            return problems
        }
        var declared: Set<Int> = []
        let elements = lengths.isEmpty
            ? [] : lengths.joined(separator: ",").split(separator: ",", omittingEmptySubsequences: false)
        for element in elements {
            let digits = element.trimmingWhitespace()
            guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = Int(digits) else {
                problems.append("\(at): accepted Content-Length \(lengths)")
                return problems
            }
            declared.insert(number)
        }
        if declared.count > 1 { problems.append("\(at): accepted conflicting Content-Length \(lengths)") }
        let expected = declared.first ?? 0
        if request.body.count != expected {
            problems.append("\(at): body of \(request.body.count) bytes, Content-Length says \(expected)")
        }
        return problems
    }

    /// A request written back out plainly (with Content-Length framing) parses to the same request: whatever
    /// the parser accepts, it understood completely.
    private static func roundTripViolations(_ request: HTTPRequest) -> [String] {
        let isFraming = { (name: String) in
            name.caseInsensitiveEquals("content-length") || name.caseInsensitiveEquals("transfer-encoding")
        }
        let kept = request.headers.filter { !isFraming($0.name) }
        var text = "\(request.method) \(request.target) \(request.head.version)\r\n"
        for field in kept { text += "\(field.name): \(field.value)\r\n" }
        text += "Content-Length: \(request.body.count)\r\n\r\n"
        var parser = HTTPRequestParser(limits: limitProfiles[3])
        parser.append(Array(text.utf8) + request.body)
        let events = drain(&parser)
        guard let last = events.last, events.count == (kept.contains { $0.name.caseInsensitiveEquals("expect") } || !request.body.isEmpty ? 2 : 1),
              case .request(let again) = last else {
            return ["round trip of \(request.method) \(request.target.debugDescription): \(events.map(describe))"]
        }
        let keptAgain = again.headers.filter { !isFraming($0.name) }
        guard again.method == request.method, again.target == request.target,
              again.head.version == request.head.version, again.body == request.body,
              HTTPHeaders(kept) == HTTPHeaders(keptAgain)
        else {
            return ["round trip of \(request.method) \(request.target.debugDescription) changed the request"]
        }
        return []
    }

    /// The server matches routes on every parsed request; its accessors must cope with any target and header.
    private static func exerciseMatching(_ request: HTTPRequest) {
        let input = MatchInput(request: request)
        _ = input.path
        _ = input.pathSegments
        _ = input.query
        _ = request.head.expectsContinue
        _ = request.head.clientWantsKeepAlive
    }

    /// State queries agree with the events drained so far.
    private static func stateViolations(
        _ parser: HTTPRequestParser, after events: [HTTPParseEvent], mode describeMode: @autoclosure () -> String
    ) -> [String] {
        var problems: [String] = []
        // Only described when something is wrong: this runs after every piece.
        var mode: String { describeMode() }
        let line = parser.partialRequestLine
        if parser.bufferedByteCount < 0 { problems.append("\(mode): bufferedByteCount \(parser.bufferedByteCount)") }
        if line.unicodeScalars.count > 200 { problems.append("\(mode): partialRequestLine over 200 bytes") }
        if case .failure? = events.last {
            if parser.bufferedByteCount != 0 || parser.isReadingBody || parser.hasPartialRequest || !line.isEmpty {
                problems.append("\(mode): state queries report input after a failure")
            }
            return problems
        }
        if parser.isReadingBody && !parser.hasPartialRequest {
            problems.append("\(mode): reading a body but no partial request")
        }
        if !parser.hasPartialRequest && !line.isEmpty {
            problems.append("\(mode): partialRequestLine \(line.debugDescription) without a partial request")
        }
        // After `.head` the parser stopped for lack of body bytes, so it must be reading the body, and the
        // partial request line comes from that head.
        var pendingHead: HTTPRequestHead?
        for event in events {
            switch event {
            case .head(let head): pendingHead = head
            default: pendingHead = nil
            }
        }
        if parser.isReadingBody != (pendingHead != nil) {
            let last = events.last.map(describe) ?? "no event"
            problems.append("\(mode): isReadingBody is \(parser.isReadingBody) after \(last)")
        }
        if let pendingHead {
            // Cut to 200 bytes, so a character split at the cut shows as U+FFFD.
            let full = "\(pendingHead.method) \(pendingHead.target) \(pendingHead.version)"
            if line != String(decoding: Array(full.utf8.prefix(200)), as: UTF8.self) {
                problems.append("\(mode): partialRequestLine \(line.debugDescription) is not from the head")
            }
        }
        return problems
    }

    // MARK: Helpers

    private static func drain(_ parser: inout HTTPRequestParser) -> [HTTPParseEvent] {
        var events: [HTTPParseEvent] = []
        while let event = parser.next() { events.append(event) }
        return events
    }

    private static func describe(_ event: HTTPParseEvent) -> String {
        switch event {
        case .head(let head): return "head \(head.method) \(head.target.debugDescription)"
        case .request(let request): return "request \(request.method) \(request.target.debugDescription) "
            + "with \(request.body.count) body bytes"
        case .failure(let error): return "failure \(error) (prefix \(error.requestLinePrefix.debugDescription))"
        }
    }

    /// `tchar` (RFC 9110 §5.6.2), written out independently of the parser's bit table.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "A") ... UInt8(ascii: "Z"),
             UInt8(ascii: "0") ... UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

