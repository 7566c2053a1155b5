/// A response an upstream sent, read whole: what the proxy hands to the planner (ARCHITECTURE §4d).
package struct UpstreamResponse: Sendable, Equatable {
    package var status: Int
    package var reason: String
    package var version: HTTPVersion
    /// The fields as received, in order (framing and hop-by-hop fields included; `ProxyHeaders` strips them).
    /// Made from `fields` each time it is read when the parser read the response: read it once where it is needed.
    package var headers: HTTPHeaders {
        get { givenHeaders ?? fields?.headers ?? HTTPHeaders() }
        set {
            givenHeaders = newValue
            fields = nil
        }
    }
    /// The fields as the parser read them, as bytes; nil for a response made from `headers`.
    package private(set) var fields: UpstreamFields?
    private var givenHeaders: HTTPHeaders?
    /// The body with its framing removed (chunks joined).
    package var body: [UInt8]
    /// Whether the connection may carry another request: HTTP/1.1 without `Connection: close`, HTTP/1.0 with
    /// `keep-alive`, and a body that was not delimited by the close.
    package var reusable: Bool
    /// The body's length when `Content-Length` framed it; nil for chunked and close-delimited bodies.
    package var declaredLength: Int?

    package init(
        status: Int, reason: String = "", version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders(),
        body: [UInt8] = [], reusable: Bool = true
    ) {
        self.status = status
        self.reason = reason
        self.version = version
        givenHeaders = headers
        self.body = body
        self.reusable = reusable
    }

    /// A response as the parser read it: its fields kept as bytes.
    package init(status: Int, reason: String, version: HTTPVersion, fields: UpstreamFields) {
        self.status = status
        self.reason = reason
        self.version = version
        self.fields = fields
        body = []
        reusable = true
    }

    /// Equal when what they say is: fields as bytes and the same fields as strings are the same response.
    package static func == (lhs: UpstreamResponse, rhs: UpstreamResponse) -> Bool {
        lhs.status == rhs.status && lhs.reason == rhs.reason && lhs.version == rhs.version
            && lhs.body == rhs.body && lhs.reusable == rhs.reusable && lhs.declaredLength == rhs.declaredLength
            && lhs.headers == rhs.headers
    }
}

/// The client side of HTTP/1.1 (RFC 9112): reads one response to one request, fed in pieces as they arrive.
/// Status line and fields, then the body framed as §6.3 says — no body for HEAD, 1xx, 204 and 304;
/// `Transfer-Encoding: chunked` (with trailers, which are read and dropped); `Content-Length`; else until the
/// connection closes. Interim 1xx responses (100 Continue, 103 Early Hints) are skipped. Pure: no sockets.
/// Bounded: a header section over `maxHeaderBytes` or a body over `maxBodyBytes` fails, naming the limit.
package struct HTTPResponseParser: Sendable {
    /// What feeding (or the end of the input) gave.
    package enum Progress: Sendable, Equatable {
        /// More bytes are needed.
        case needMore
        /// The response is complete. `extraBytes`: the upstream sent bytes past it (the connection is not reused).
        case complete(UpstreamResponse, extraBytes: Bool)
        /// The bytes are not an HTTP/1.1 response, or break a limit; the reason, for the 502's body.
        case failed(String)
    }

    private enum State: Sendable, Equatable {
        /// Reading the status line and fields.
        case head
        /// A body of this many more bytes.
        case fixed(remaining: Int)
        /// Reading a chunk-size line.
        case chunkSize
        /// Inside a chunk: this many data bytes, then CRLF.
        case chunkData(remaining: Int)
        /// The CRLF after a chunk's data.
        case chunkEnd
        /// Trailer fields after the last chunk, up to the empty line.
        case trailers
        /// The body ends when the connection does.
        case untilClose
        case done
        case failed
    }

    package let maxHeaderBytes: Int
    package private(set) var maxBodyBytes: Int
    /// The caller may stream the body (`startStreaming`), so a `Content-Length` over `maxBodyBytes` is no failure.
    private let mayStream: Bool
    /// The body goes to the caller as it arrives (`takeBody`) instead of being kept whole.
    package private(set) var streaming = false
    /// Body bytes read so far, streamed or kept.
    package private(set) var bodyBytes = 0
    private let headRequest: Bool
    private var state = State.head
    private var buffer: [UInt8] = []
    private var position = 0
    /// Where `headEnd` goes on looking (an index into `buffer`, at or past `position` while a head is read).
    private var headScan = 0
    /// Bytes of the trailer section read so far, line ends included.
    private var trailerBytes = 0
    private var response = UpstreamResponse(status: 0)
    /// Whether any byte arrived: a reused connection that closes before one did was stale, and the request may
    /// be retried on a fresh one.
    package private(set) var receivedAny = false

    /// `mayStream`: the caller will stream a body that does not arrive with its head (`startStreaming`), so only
    /// a body kept whole is held to `maxBodyBytes`.
    package init(
        requestMethod: String, maxHeaderBytes: Int = 64 * 1024, maxBodyBytes: Int = 64 * 1024 * 1024,
        mayStream: Bool = false
    ) {
        headRequest = requestMethod == "HEAD"
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
        self.mayStream = mayStream
    }

    /// The body is streamed from here on: the response so far (its head, and the body bytes read with it) is
    /// returned, and later body bytes are the caller's to take after each `feed` (`takeBody`, and the body of
    /// `.complete`'s response). No limit applies to a streamed body. Only after the head (`status` is set).
    package mutating func startStreaming() -> UpstreamResponse {
        streaming = true
        maxBodyBytes = .max
        let head = response
        response.body = []
        return head
    }

    /// The response read so far (its head, and the body bytes read with it), before `startStreaming`.
    package var headSoFar: UpstreamResponse { response }

    /// The caller keeps this body whole after all: the limit a streamed body would not have applies, to the
    /// length `Content-Length` announced; nil, or why the body is too large.
    package mutating func keepWhole() -> String? {
        if let length = response.declaredLength, length > maxBodyBytes {
            state = .failed
            return "the upstream's body (Content-Length \(length)) is larger than the proxy's limit of \(maxBodyBytes) bytes"
        }
        return nil
    }

    /// The body bytes read since the last take, while streaming.
    package mutating func takeBody() -> [UInt8] {
        guard !response.body.isEmpty else { return [] }
        var taken: [UInt8] = []
        swap(&taken, &response.body)
        return taken
    }

    /// Whether the response's head is read and its body is not complete: what can be streamed.
    package var inBody: Bool {
        switch state {
        case .fixed, .chunkSize, .chunkData, .chunkEnd, .trailers, .untilClose: true
        case .head, .done, .failed: false
        }
    }

    /// Whether the response's head has been read (a time-to-first-byte was seen and the status is known).
    package var status: Int? { response.status == 0 ? nil : response.status }

    /// Reads `bytes`; returns `.needMore` until the response is complete or broken. A read from the socket (not
    /// generic: called from another module, a generic `feed` ran unspecialized, ~1,500 instructions a response
    /// for appending to the buffer alone).
    package mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Progress {
        feedBytes(bytes)
    }

    /// `feed`, for bytes in an array (tests, the fuzzer, the hot-path driver).
    package mutating func feed(_ bytes: [UInt8]) -> Progress {
        bytes.withUnsafeBytes { feedBytes($0) }
    }

    /// `feed`, for any other collection of bytes.
    package mutating func feed<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Progress {
        feed(Array(bytes))
    }

    private mutating func feedBytes(_ bytes: UnsafeRawBufferPointer) -> Progress {
        guard state != .done, state != .failed else { return state == .failed ? .failed(failure) : .needMore }
        if !bytes.isEmpty { receivedAny = true }
        if position > 0 && position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            position = 0
            headScan = 0
        }
        buffer.append(contentsOf: bytes)
        return run()
    }

    /// The connection closed (FIN). Completes a close-delimited body; anything else unfinished is a failure.
    package mutating func finish() -> Progress {
        switch state {
        case .untilClose:
            state = .done
            response.reusable = false
            return .complete(response, extraBytes: false)
        case .done:
            return .needMore
        case .head:
            return fail(receivedAny ? "the upstream closed the connection inside the response's header section"
                : "the upstream closed the connection without answering")
        case .fixed(let remaining):
            return fail("the upstream closed the connection \(remaining) bytes before the end of the body "
                + "its Content-Length announced")
        case .chunkSize, .chunkData, .chunkEnd, .trailers:
            return fail("the upstream closed the connection inside a chunked body")
        case .failed:
            return .failed(failure)
        }
    }

    private mutating func fail(_ reason: String) -> Progress {
        state = .failed
        failure = reason
        return .failed(reason)
    }

    /// Why it failed: every later `feed` or `finish` says the same (the proxy asks `finish` again for the reason).
    private var failure = "already failed"

    /// The next line (without CR LF or a bare LF), or nil when it is not complete yet; `.some(nil)` when it is
    /// longer than `limit` bytes (a CR before the LF counted), whether its end has arrived or not: the same answer
    /// whichever reads the line came in (the `upstream-response` fuzzer found a line over the limit accepted when
    /// it came whole and refused when it came in pieces).
    private mutating func line(limit: Int) -> [UInt8]?? {
        guard let newline = buffer[position...].firstIndex(of: 0x0A) else {
            return buffer.count - position > limit ? .some(nil) : nil
        }
        if newline - position > limit { return .some(nil) }
        var end = newline
        if end > position && buffer[end - 1] == 0x0D { end -= 1 }
        let text = Array(buffer[position..<end])
        position = newline + 1
        return .some(text)
    }

    private mutating func run() -> Progress {
        while true {
            switch state {
            case .head:
                // The whole header section must be there: look for its empty line.
                guard let end = headEnd() else {
                    if buffer.count - position > maxHeaderBytes {
                        return fail("the upstream's header section is larger than \(maxHeaderBytes) bytes")
                    }
                    return .needMore
                }
                if end - position > maxHeaderBytes {
                    return fail("the upstream's header section is larger than \(maxHeaderBytes) bytes")
                }
                if let problem = parseHead(upTo: end) { return fail(problem) }
            case .fixed(let remaining):
                let available = min(remaining, buffer.count - position)
                response.body.append(contentsOf: buffer[position..<(position + available)])
                bodyBytes += available
                position += available
                if remaining - available > 0 {
                    state = .fixed(remaining: remaining - available)
                    return .needMore
                }
                return complete()
            case .chunkSize:
                guard let next = line(limit: 1024) else { return .needMore }
                guard let text = next else { return fail("a chunk-size line longer than 1024 bytes") }
                let sizeText = text.prefix { $0 != UInt8(ascii: ";") && $0 != 0x20 && $0 != 0x09 }
                guard !sizeText.isEmpty, sizeText.count <= 15,
                      let size = Int(String(decoding: sizeText, as: UTF8.self), radix: 16), size >= 0 else {
                    return fail("a malformed chunk size \(Self.printable(text))")
                }
                if size == 0 {
                    state = .trailers
                } else {
                    if response.body.count + size > maxBodyBytes { return tooLarge() }
                    state = .chunkData(remaining: size)
                }
            case .chunkData(let remaining):
                let available = min(remaining, buffer.count - position)
                response.body.append(contentsOf: buffer[position..<(position + available)])
                bodyBytes += available
                position += available
                if remaining - available > 0 {
                    state = .chunkData(remaining: remaining - available)
                    return .needMore
                }
                state = .chunkEnd
            case .chunkEnd:
                guard let next = line(limit: 2) else { return .needMore }
                guard let text = next, text.isEmpty else { return fail("a chunk's data is not followed by CRLF") }
                state = .chunkSize
            case .trailers:
                // The whole trailer section within the header limit, not each line: an upstream that sends
                // trailer lines without end is stopped.
                let start = position
                guard let next = line(limit: maxHeaderBytes - trailerBytes) else { return .needMore }
                guard let text = next else { return fail("the upstream's trailer section is too large") }
                trailerBytes += position - start
                if text.isEmpty { return complete() }
            case .untilClose:
                response.body.append(contentsOf: buffer[position...])
                bodyBytes += buffer.count - position
                position = buffer.count
                if response.body.count > maxBodyBytes { return tooLarge() }
                return .needMore
            case .done, .failed:
                return .needMore
            }
        }
    }

    private mutating func tooLarge() -> Progress {
        fail("the upstream's body is larger than the proxy's limit of \(maxBodyBytes) bytes")
    }

    private mutating func complete() -> Progress {
        state = .done
        return .complete(response, extraBytes: position < buffer.count)
    }

    /// The index just past the header section's empty line, or nil while it has not arrived. The search goes on
    /// from where the last one stopped (`headScan`): an upstream that drips its header section a byte per read
    /// would otherwise have it scanned from the start each time (the `upstream-response` fuzzer's reads showed it).
    private mutating func headEnd() -> Int? {
        let count = buffer.count
        let (end, scan): (Int?, Int) = buffer.withUnsafeBufferPointer { bytes in
            var index = max(position, headScan)
            while let newline = Self.newline(in: bytes, from: index, to: count) {
                let next = newline + 1
                if next < count, bytes[next] == 0x0A { return (next + 1, headScan) }
                if next + 1 < count, bytes[next] == 0x0D, bytes[next + 1] == 0x0A { return (next + 2, headScan) }
                if next >= count || (next + 1 >= count && bytes[next] == 0x0D) {
                    return (nil, newline)  // this line's end, and what follows it, are looked at again
                }
                index = next
            }
            return (nil, count)
        }
        headScan = scan
        return end
    }

    /// The index of the first LF in `bytes[from..<to]`, read straight from memory (a slice's `firstIndex` costs
    /// several times as much a byte, and every proxied response's head is scanned twice).
    private static func newline(in bytes: UnsafeBufferPointer<UInt8>, from: Int, to end: Int) -> Int? {
        var index = from
        while index < end {
            if bytes[index] == 0x0A { return index }
            index += 1
        }
        return nil
    }

    /// Parses the status line and fields in `buffer[position..<end]`, then picks the body's framing (RFC 9112
    /// §6.3). A 1xx other than 101 is interim: it is dropped and the next head is read. Nil, or the problem.
    /// Works on byte ranges of the buffer: only the field names and values become strings.
    private mutating func parseHead(upTo end: Int) -> String? {
        func lineEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> (end: Int, next: Int) {
            let newline = Self.newline(in: bytes, from: start, to: end) ?? end
            var lineEnd = newline
            if lineEnd > start && bytes[lineEnd - 1] == 0x0D { lineEnd -= 1 }
            return (lineEnd, newline + 1)
        }
        let (statusEnd, afterStatus) = buffer.withUnsafeBufferPointer { lineEnd($0, from: position) }
        let statusLine = buffer[position..<statusEnd]
        // HTTP-version SP status-code SP [reason-phrase] (RFC 9112 §4): "HTTP/1.x NNN".
        let digit = { (byte: UInt8) in byte >= 0x30 && byte <= 0x39 }
        let base = statusLine.startIndex
        guard statusLine.count >= 12, statusLine.starts(with: "HTTP/1.".utf8), digit(buffer[base + 7]),
              buffer[base + 8] == 0x20, digit(buffer[base + 9]), digit(buffer[base + 10]), digit(buffer[base + 11]),
              statusLine.count == 12 || buffer[base + 12] == 0x20 else {
            let shown = Array(statusLine)
            position = end
            return "not an HTTP/1.1 response: the status line is \(Self.printable(shown))"
        }
        let minor = Int(buffer[base + 7] - 0x30)
        let status = Int(buffer[base + 9] - 0x30) * 100 + Int(buffer[base + 10] - 0x30) * 10 + Int(buffer[base + 11] - 0x30)
        guard (100...599).contains(status) else {
            position = end
            return "not an HTTP/1.1 response: the status line is \(Self.printable(Array(statusLine)))"
        }
        // Read from the buffer's memory: the field lines are copied once, and each field's name and value kept as
        // offsets into the copy (`UpstreamFields`); strings are made only if someone asks. A malformed line's
        // range comes back for the message.
        var offsets: [UInt32] = []
        let sectionStart = afterStatus
        let malformed: Range<Int>? = buffer.withUnsafeBufferPointer { bytes in
            // One allocation for the offsets: a line per field at most.
            var lines = 0
            for index in afterStatus..<end where bytes[index] == 0x0A { lines += 1 }
            offsets.reserveCapacity(lines * 4)
            var start = afterStatus
            while start < end {
                let (fieldEnd, next) = lineEnd(bytes, from: start)
                defer { start = next }
                guard fieldEnd > start else { continue }
                // The name: up to the colon, with no whitespace in it (RFC 9112 §5.1).
                var colon = start
                while colon < fieldEnd && bytes[colon] != UInt8(ascii: ":") && bytes[colon] != 0x20 && bytes[colon] != 0x09 {
                    colon += 1
                }
                guard colon < fieldEnd, colon > start, bytes[colon] == UInt8(ascii: ":") else { return start..<fieldEnd }
                var valueStart = colon + 1
                var valueEnd = fieldEnd
                while valueStart < valueEnd && (bytes[valueStart] == 0x20 || bytes[valueStart] == 0x09) { valueStart += 1 }
                while valueEnd > valueStart && (bytes[valueEnd - 1] == 0x20 || bytes[valueEnd - 1] == 0x09) { valueEnd -= 1 }
                offsets.append(UInt32(start - sectionStart))
                offsets.append(UInt32(colon - sectionStart))
                offsets.append(UInt32(valueStart - sectionStart))
                offsets.append(UInt32(valueEnd - sectionStart))
            }
            return nil
        }
        if let malformed {
            position = end
            return "a malformed header line \(Self.printable(Array(buffer[malformed])))"
        }
        let reason = statusLine.count > 13 ? String(decoding: statusLine[(base + 13)...], as: UTF8.self) : ""
        position = end
        if (100...199).contains(status) && status != 101 {
            // An interim response (RFC 9110 §15.2): the final one follows.
            return nil
        }
        let fields = UpstreamFields(bytes: Array(buffer[sectionStart..<end]), offsets: offsets)
        response = UpstreamResponse(
            status: status, reason: reason, version: HTTPVersion(major: 1, minor: minor), fields: fields)
        // The framing fields, read in place: `Connection`'s options, the last `Transfer-Encoding`, and every
        // `Content-Length` — one value, or the same value repeated (RFC 9110 §8.6), across the fields and the
        // commas within them: anything else cannot frame the body.
        var close = false, keepAlive = false
        var chunkedLast: Bool?
        var hasLength = false
        var length: Int?
        var validLength = true
        fields.forEach { name, value in
            switch name.count {
            case 10 where HTTPHeaders.token(name, is: "connection"):
                HTTPHeaders.forEachToken(in: value) { token in
                    if HTTPHeaders.token(token, is: "close") { close = true }
                    if HTTPHeaders.token(token, is: "keep-alive") { keepAlive = true }
                }
            case 17 where HTTPHeaders.token(name, is: "transfer-encoding"):
                // Chunked must be the last coding (RFC 9112 §6.3 item 4); otherwise the close ends the body.
                var last: UnsafeBufferPointer<UInt8>?
                HTTPHeaders.forEachToken(in: value, keepingEmpty: true) { last = $0 }
                chunkedLast = last.map { HTTPHeaders.token($0, is: "chunked") } ?? false
            case 14 where HTTPHeaders.token(name, is: "content-length"):
                hasLength = true
                if validLength, !Self.contentLength(value, into: &length) { validLength = false }
            default:
                break
            }
        }
        response.reusable = minor >= 1 ? !close : keepAlive
        if headRequest || status == 204 || status == 304 || status == 101 {
            state = .fixed(remaining: 0)
            return nil
        }
        if let chunkedLast {
            if chunkedLast {
                state = .chunkSize
            } else {
                state = .untilClose
                response.reusable = false
            }
            return nil
        }
        if hasLength {
            guard validLength, let length else {
                let values = response.headers.values("content-length")
                return "an invalid Content-Length \(Self.quoted(values.joined(separator: ", ")))"
            }
            if length > maxBodyBytes && !mayStream {
                return "the upstream's body (Content-Length \(length)) is larger than the proxy's limit of \(maxBodyBytes) bytes"
            }
            state = .fixed(remaining: length)
            response.declaredLength = length
            return nil
        }
        state = .untilClose
        response.reusable = false
        return nil
    }

    /// Reads one `Content-Length` field's value — comma-separated decimal numbers, each with optional whitespace
    /// around it, at most 18 digits — into `length`, which every number must equal. False when one is not a number
    /// or differs.
    private static func contentLength(_ bytes: UnsafeBufferPointer<UInt8>, into length: inout Int?) -> Bool {
        var index = 0
        let count = bytes.count
        while true {
            while index < count && (bytes[index] == 0x20 || bytes[index] == 0x09) { index += 1 }
            var number = 0
            var digits = 0
            while index < count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                number = number * 10 + Int(bytes[index] - 0x30)
                digits += 1
                index += 1
                if digits > 18 { return false }
            }
            while index < count && (bytes[index] == 0x20 || bytes[index] == 0x09) { index += 1 }
            guard digits > 0, index == count || bytes[index] == UInt8(ascii: ",") else { return false }
            if let length, length != number { return false }
            length = number
            if index == count { return true }
            index += 1  // past the comma
        }
    }

    private static func quoted(_ text: String) -> String { JSONValue.string(text).serialized() }

    /// At most 64 bytes of `bytes`, quoted, for a message.
    private static func printable(_ bytes: [UInt8]) -> String {
        let shown = bytes.prefix(64).map { $0 >= 0x20 && $0 < 0x7F ? Character(UnicodeScalar($0)) : "?" }
        return quoted(String(shown) + (bytes.count > 64 ? "…" : ""))
    }
}

