#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the parser found in the bytes buffered so far (RFC 9112 §2.1: a message is a head, then a body).
package enum HTTPParseEvent: Sendable, Equatable {
    /// The head is complete and body bytes follow, or the client asked for `100 Continue`: emitted once, before
    /// `.request`, for a request that announces a body (Content-Length above 0, Transfer-Encoding) or carries an
    /// Expect field. The server uses it to send `100 Continue` at once when `head.expectsContinue` (RFC 9110
    /// §10.1.1). A request with neither comes out as `.request` alone: announcing its head would tell nobody
    /// anything, and cost a copy of the head and an event on every GET (`make hotpath`).
    case head(HTTPRequestHead)
    /// A complete request with its decoded body (chunked framing removed, trailers dropped; RFC 9112 §7.1).
    case request(HTTPRequest)
    /// The input is not valid HTTP/1.1. The parser is finished: every later `next()` returns nil.
    case failure(HTTPParseError)
}

/// An incremental HTTP/1.1 request parser (RFC 9112) over raw bytes.
///
/// Feed bytes with `append` as they arrive, then call `next()` until it returns nil. Pipelined requests come out
/// one after another. The parser never looks at a byte twice while searching for line ends, keeps a read index
/// instead of removing consumed bytes, and compacts its buffer only when the consumed prefix is large.
package struct HTTPRequestParser: Sendable {
    private let limits: HTTPParserLimits
    /// Buffered input; bytes before `readIndex` are consumed and wait for compaction.
    private var buffer: [UInt8] = []
    /// The first unconsumed byte. While a head is being read it stays on the request line's first byte, so the
    /// raw request line is at hand for error reports.
    private var readIndex = 0
    private var state: State = .requestLine
    /// Start of the field line being read (only meaningful in `.fieldLines`).
    private var lineStart = 0
    /// How far the current line has been searched for its LF, so a partial line is never searched again.
    private var scanIndex = 0
    /// Bytes of empty lines skipped before the current request line (RFC 9112 §2.2).
    private var skippedEmptyLineBytes = 0
    /// Bytes of the trailer section read so far (RFC 9112 §7.1.2).
    private var trailerBytes = 0

    // The head under construction.
    private var method = ""
    private var target = ""
    private var version = HTTPVersion.http1_1
    private var fields: [(name: String, value: String)] = []
    /// The previous request's fields on this connection (shared with its head, not copied). A keep-alive client
    /// repeats most field values, and the target too, request after request: a value whose bytes are the same as
    /// the previous request's at the same position takes that String again instead of decoding and validating the
    /// bytes anew (~185 instructions a value, `make hotpath`). Bounded by the header limits; one head a connection.
    private var previousFields: [(name: String, value: String)] = []
    /// While `fields` is empty: how many leading field lines so far were the previous request's, name and value
    /// byte for byte. A head whose every line repeats the previous one's takes `previousFields` itself, shared:
    /// no array is allocated for it, and none is freed when its journal entry goes (~400 instructions a request,
    /// `make hotpath`). The first line that differs copies the shared prefix into `fields`.
    private var sharedFields = 0
    private var framing = FramingFields()
    /// The current request's head once it is complete; nil while the head is being read.
    private var head: HTTPRequestHead?
    /// The decoded chunked body so far.
    private var chunkedBody: [UInt8] = []

    /// Where the parser is within the current request.
    private enum State: Sendable {
        /// Waiting for a request line; empty lines before it are skipped (RFC 9112 §2.2).
        case requestLine
        /// The request line is parsed; reading field lines up to the empty line ending the head (RFC 9112 §5).
        case fieldLines
        /// `.head` was emitted; waiting until `length` body bytes are buffered (RFC 9112 §6.2).
        case fixedBody(length: Int)
        /// `.head` was emitted; reading a chunk-size line with optional extensions (RFC 9112 §7.1).
        case chunkSize
        /// Reading chunk data; `remaining` bytes of the current chunk are still to come (RFC 9112 §7.1).
        case chunkData(remaining: Int)
        /// Expecting the CRLF that ends a chunk's data (RFC 9112 §7.1).
        case chunkDataEnd
        /// Reading trailer field lines up to the empty line that ends the chunked body (RFC 9112 §7.1.2).
        case trailers
        /// A failure was reported; the parser produces nothing more.
        case failed
    }

    /// Framing-relevant fields noted while the field lines go by, judged when the head is complete.
    private struct FramingFields {
        var hostCount = 0
        /// The agreed Content-Length value (RFC 9110 §8.6), if any valid one was seen.
        var contentLength: Int?
        /// Why the Content-Length fields are unusable, if they are.
        var contentLengthProblem: String?
        var hasTransferEncoding = false
        /// An Expect field was seen: the head is announced (`HTTPParseEvent.head`) even without a body.
        var hasExpect = false
    }

    /// A reason to refuse the request, turned into an `HTTPParseError` by `next()`.
    private struct Rejection: Error {
        var status: Int
        var reason: String
        /// Found among the empty lines before a request line: no request-line byte is involved, so the error's
        /// prefix is empty (whatever follows in the buffer depends on how the input happened to arrive).
        var isBeforeRequestLine = false
    }

    /// Creates a parser with empty buffer.
    package init(limits: HTTPParserLimits = HTTPParserLimits()) {
        self.limits = limits
    }

    // MARK: Input

    /// Buffers bytes received from the client. Ignored once a failure was reported.
    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty, !isFailed else { return }
        compactIfWorthwhile()
        bytes.withMemoryRebound(to: UInt8.self) { buffer.append(contentsOf: $0) }
    }

    /// Buffers bytes received from the client. Ignored once a failure was reported.
    package mutating func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty, !isFailed else { return }
        compactIfWorthwhile()
        buffer.append(contentsOf: bytes)
    }

    /// Drops the consumed prefix when it is all of the buffer, over 64 KiB, or at least half of the buffer, so
    /// the cost of moving bytes stays proportional to the bytes consumed.
    private mutating func compactIfWorthwhile() {
        guard readIndex > 0 else { return }
        if readIndex == buffer.count {
            // Keep a modest allocation for the next request; let a big one (a large body) go.
            buffer.removeAll(keepingCapacity: buffer.capacity <= 128 * 1024)
        } else if readIndex >= 64 * 1024 || readIndex >= buffer.count / 2 {
            buffer.removeSubrange(0 ..< readIndex)
        } else {
            return
        }
        lineStart = max(0, lineStart - readIndex)
        scanIndex = max(0, scanIndex - readIndex)
        readIndex = 0
    }

    // MARK: State queries

    /// Bytes buffered and not yet consumed. Zero after a failure: the rest of the input is discarded.
    package var bufferedByteCount: Int { buffer.count - readIndex }

    /// The bytes buffered after the last complete request, taken out: what a client sent right after an upgrade
    /// request belongs to the protocol it switched to.
    package mutating func takeBuffered() -> [UInt8] {
        defer {
            buffer.removeAll()
            readIndex = 0
            lineStart = 0
            scanIndex = 0
        }
        return Array(buffer[readIndex...])
    }

    /// True once the current request's head has been emitted but its body is not complete yet.
    package var isReadingBody: Bool {
        switch state {
        case .fixedBody, .chunkSize, .chunkData, .chunkDataEnd, .trailers: return true
        case .requestLine, .fieldLines, .failed: return false
        }
    }

    /// The head of the request whose body is being read (nil otherwise), for journaling a body that timed out.
    package var partialHead: HTTPRequestHead? { isReadingBody ? head : nil }

    /// The body bytes of that request that have arrived (decoded, for chunked), for the journal of a request cut
    /// short; empty when no body is being read.
    package var partialBody: [UInt8] {
        switch state {
        case .fixedBody(let length): Array(buffer[readIndex ..< min(buffer.count, readIndex + length)])
        case .chunkSize, .chunkData, .chunkDataEnd, .trailers: chunkedBody
        case .requestLine, .fieldLines, .failed: []
        }
    }

    /// True when some bytes of a request that is not yet complete are buffered (used for the 408 header timeout
    /// and to journal a request cut short). Empty lines before a request line do not count (RFC 9112 §2.2), and
    /// nothing counts after a failure.
    package var hasPartialRequest: Bool {
        switch state {
        case .failed: return false
        case .fieldLines, .fixedBody, .chunkSize, .chunkData, .chunkDataEnd, .trailers: return true
        case .requestLine:
            var index = readIndex
            while index < buffer.count {
                if buffer[index] != ASCII.cr && buffer[index] != ASCII.lf { return true }
                index += 1
            }
            return false
        }
    }

    /// The request-line prefix of the partial request (≤ 200 bytes, lossy UTF-8), for journaling a request that
    /// timed out or was abandoned. Empty when no request is in progress. Once the head has been consumed the line
    /// is rebuilt from the parsed head, which gives the same bytes since the request line grammar is strict.
    package var partialRequestLine: String {
        switch state {
        case .failed: return ""
        case .fixedBody, .chunkSize, .chunkData, .chunkDataEnd, .trailers:
            return head.map(Self.requestLinePrefix(of:)) ?? ""
        case .requestLine, .fieldLines:
            return buffer.withUnsafeBufferPointer { Self.rawRequestLinePrefix(in: $0, from: readIndex) }
        }
    }

    private var isFailed: Bool {
        if case .failed = state { return true }
        return false
    }

    // MARK: Parsing

    /// The next event the buffered bytes allow, or nil when more bytes are needed. Call repeatedly until nil
    /// (pipelined requests: several requests may be buffered at once; they come out one after another;
    /// RFC 9112 §9.3.2).
    package mutating func next() -> HTTPParseEvent? {
        if isFailed { return nil }
        // A second reference to the storage lets the closure mutate the other stored properties; the buffer
        // itself is not written while it runs, so no copy is made.
        let storage = buffer
        let event = storage.withUnsafeBufferPointer { bytes -> HTTPParseEvent? in
            do throws(Rejection) {
                return try step(bytes)
            } catch {
                let prefix = error.isBeforeRequestLine ? "" : (head.map(Self.requestLinePrefix(of:))
                    ?? Self.rawRequestLinePrefix(in: bytes, from: readIndex))
                return .failure(
                    HTTPParseError(status: error.status, reason: error.reason, head: head, requestLinePrefix: prefix)
                )
            }
        }
        if case .failure = event {
            state = .failed
            buffer = []
            readIndex = 0
            head = nil
            fields = []
            sharedFields = 0
            chunkedBody = []
        }
        return event
    }

    /// Advances through the states until an event is ready or more bytes are needed.
    private mutating func step(_ bytes: UnsafeBufferPointer<UInt8>) throws(Rejection) -> HTTPParseEvent? {
        while true {
            switch state {
            case .requestLine:
                guard try readRequestLine(bytes) else { return nil }
                state = .fieldLines
            case .fieldLines:
                guard let announced = try readFieldLines(bytes) else { return nil }
                // A body to wait for, or an Expect: the head first. Otherwise the request completes now.
                if announced, let head { return .head(head) }
            case .fixedBody(let length):
                guard bytes.count - readIndex >= length else { return nil }
                let body = length == 0
                    ? [] : Array(UnsafeBufferPointer(rebasing: bytes[readIndex ..< readIndex + length]))
                readIndex += length
                return .request(finishRequest(body: body))
            case .chunkSize:
                guard try readChunkSizeLine(bytes) else { return nil }
            case .chunkData(let remaining):
                let available = bytes.count - readIndex
                guard available > 0 else { return nil }
                let taken = min(available, remaining)
                chunkedBody.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[readIndex ..< readIndex + taken]))
                readIndex += taken
                state = taken == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - taken)
            case .chunkDataEnd:
                guard try readChunkDataEnd(bytes) else { return nil }
            case .trailers:
                guard try readTrailers(bytes) else { return nil }
                let body = chunkedBody
                chunkedBody = []
                return .request(finishRequest(body: body))
            case .failed:
                return nil
            }
        }
    }

    /// Completes the current request and resets for the next one, whose bytes may already be buffered.
    private mutating func finishRequest(body: [UInt8]) -> HTTPRequest {
        // Moved out, not copied: the parser keeps no head between requests.
        guard let head = self.head.take() else { preconditionFailure("request finished without a head") }
        state = .requestLine
        lineStart = readIndex
        scanIndex = readIndex
        skippedEmptyLineBytes = 0
        return HTTPRequest(head: head, body: body)
    }

    // MARK: Head

    /// Skips empty lines, then reads the request line (RFC 9112 §3). Returns false when more bytes are needed.
    private mutating func readRequestLine(_ bytes: UnsafeBufferPointer<UInt8>) throws(Rejection) -> Bool {
        let end = bytes.count
        let maxLine = limits.maxRequestLineBytes
        if scanIndex == readIndex {
            // RFC 9112 §2.2: ignore at least one empty line before a request line. Counted, so a client cannot
            // keep a connection busy with an endless stream of CRLFs.
            while readIndex < end {
                let byte = bytes[readIndex]
                if byte == ASCII.lf {
                    readIndex += 1
                    skippedEmptyLineBytes += 1
                } else if byte == ASCII.cr {
                    guard readIndex + 1 < end else { break }
                    guard bytes[readIndex + 1] == ASCII.lf else {
                        throw Rejection(
                            status: 400, reason: "bare CR before the request line (RFC 9112 §2.2)",
                            isBeforeRequestLine: true
                        )
                    }
                    readIndex += 2
                    skippedEmptyLineBytes += 2
                } else {
                    break
                }
                if skippedEmptyLineBytes > maxLine {
                    throw Rejection(
                        status: 400, reason: "too many empty lines before the request line (RFC 9112 §2.2)",
                        isBeforeRequestLine: true
                    )
                }
            }
            scanIndex = readIndex
            if readIndex == end || bytes[readIndex] == ASCII.cr { return false }
        }
        guard let lf = Self.firstLF(in: bytes, from: scanIndex) else {
            scanIndex = end
            // No line end yet. Decide now when the line can no longer fit: more than maxLine + 1 bytes, or
            // maxLine + 1 bytes whose last one cannot be the CR of a CRLF. (Written to survive maxLine == .max.)
            let length = end - readIndex
            if length - 1 > maxLine || (length - 1 == maxLine && bytes[end - 1] != ASCII.cr) {
                throw Rejection(status: 414, reason: "request line longer than \(maxLine) bytes (RFC 9112 §3)")
            }
            // No 431 before the line end, even past the header section limit: the line may still turn out too
            // long, and then it is a 414, as it is when the whole line arrives at once. Waiting costs at most
            // maxLine + 1 buffered bytes.
            return false
        }
        var contentEnd = lf
        if contentEnd > readIndex && bytes[contentEnd - 1] == ASCII.cr { contentEnd -= 1 }
        if contentEnd - readIndex > maxLine {
            throw Rejection(status: 414, reason: "request line longer than \(maxLine) bytes (RFC 9112 §3)")
        }
        // The empty line that ends the head still has to come.
        if lf + 1 - readIndex >= limits.maxHeaderSectionBytes {
            throw Rejection(status: 431, reason: headerSectionTooLarge)
        }
        try parseRequestLine(bytes, from: readIndex, to: contentEnd)
        lineStart = lf + 1
        scanIndex = lf + 1
        return true
    }

    /// Parses `method SP request-target SP HTTP-version` (RFC 9112 §3) in `bytes[start ..< end]`.
    private mutating func parseRequestLine(
        _ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int
    ) throws(Rejection) {
        var index = start
        while index < end && ASCII.isTokenByte(bytes[index]) { index += 1 }
        guard index > start, index < end, bytes[index] == ASCII.space else {
            throw Rejection(status: 400, reason: "invalid method or request line (RFC 9112 §3.1)")
        }
        let methodEnd = index
        index += 1
        let targetStart = index
        var targetIsASCII = true
        while index < end {
            let byte = bytes[index]
            if byte <= ASCII.space || byte == 0x7F { break }
            if byte >= 0x80 { targetIsASCII = false }
            index += 1
        }
        guard index > targetStart, index < end, bytes[index] == ASCII.space else {
            throw Rejection(
                status: 400, reason: "invalid request target or spacing in request line (RFC 9112 §3.2)"
            )
        }
        let targetEnd = index
        let parsedVersion = try Self.parseVersion(bytes, from: index + 1, to: end)
        let methodBytes = UnsafeBufferPointer(rebasing: bytes[start ..< methodEnd])
        method = ASCII.knownMethod(methodBytes) ?? String(decoding: methodBytes, as: UTF8.self)
        let targetBytes = UnsafeBufferPointer(rebasing: bytes[targetStart ..< targetEnd])
        // `target` still holds the previous request's.
        if !Self.sameText(target, targetBytes) { target = Self.decodeText(targetBytes, isASCII: targetIsASCII) }
        version = parsedVersion
    }

    /// Parses `HTTP-name "/" DIGIT "." DIGIT` (RFC 9112 §2.3): malformed is 400, well-formed but not 1.0 or 1.1
    /// is 505 (RFC 9110 §15.6.6).
    private static func parseVersion(
        _ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int
    ) throws(Rejection) -> HTTPVersion {
        guard end - start == 8,
              bytes[start] == UInt8(ascii: "H"), bytes[start + 1] == UInt8(ascii: "T"),
              bytes[start + 2] == UInt8(ascii: "T"), bytes[start + 3] == UInt8(ascii: "P"),
              bytes[start + 4] == UInt8(ascii: "/"), ASCII.isDigit(bytes[start + 5]),
              bytes[start + 6] == UInt8(ascii: "."), ASCII.isDigit(bytes[start + 7])
        else {
            throw Rejection(status: 400, reason: "malformed HTTP version (RFC 9112 §2.3)")
        }
        let major = Int(bytes[start + 5] - ASCII.zero)
        let minor = Int(bytes[start + 7] - ASCII.zero)
        guard major == 1, minor <= 1 else {
            throw Rejection(status: 505, reason: "HTTP version \(major).\(minor) not supported (RFC 9110 §15.6.6)")
        }
        return minor == 0 ? .http1_0 : .http1_1
    }

    /// Reads field lines up to the empty line that ends the head (RFC 9112 §5), then judges framing. Returns
    /// whether the head is to be announced (`completeHead`) once it is complete, nil while more bytes are needed.
    private mutating func readFieldLines(
        _ bytes: UnsafeBufferPointer<UInt8>
    ) throws(Rejection) -> Bool? {
        let maxSection = limits.maxHeaderSectionBytes
        while true {
            guard let lf = Self.firstLF(in: bytes, from: scanIndex) else {
                scanIndex = bytes.count
                // Without its final empty line yet, a section this long can only end up larger.
                if bytes.count - readIndex >= maxSection {
                    throw Rejection(status: 431, reason: headerSectionTooLarge)
                }
                return nil
            }
            let nextLine = lf + 1
            var contentEnd = lf
            if contentEnd > lineStart && bytes[contentEnd - 1] == ASCII.cr { contentEnd -= 1 }
            if contentEnd == lineStart {
                if nextLine - readIndex > maxSection {
                    throw Rejection(status: 431, reason: headerSectionTooLarge)
                }
                readIndex = nextLine
                lineStart = nextLine
                scanIndex = nextLine
                return try completeHead()
            }
            if nextLine - readIndex >= maxSection {
                throw Rejection(status: 431, reason: headerSectionTooLarge)
            }
            let line = try Self.parseFieldLine(bytes, from: lineStart, to: contentEnd)
            record(line, in: bytes)
            lineStart = nextLine
            scanIndex = nextLine
        }
    }

    /// Keeps a parsed field line and notes the fields that decide framing (RFC 9112 §3.2, §6).
    private mutating func record(_ line: FieldLine, in bytes: UnsafeBufferPointer<UInt8>) {
        let nameBytes = UnsafeBufferPointer(rebasing: bytes[line.nameStart ..< line.nameEnd])
        let valueBytes = UnsafeBufferPointer(rebasing: bytes[line.valueStart ..< line.valueEnd])
        switch nameBytes.count {
        case 4 where ASCII.lowercasedEquals(nameBytes, "host"):
            framing.hostCount += 1
        case 14 where ASCII.lowercasedEquals(nameBytes, "content-length"):
            noteContentLength(valueBytes)
        case 17 where ASCII.lowercasedEquals(nameBytes, "transfer-encoding"):
            framing.hasTransferEncoding = true
        case 6 where ASCII.lowercasedEquals(nameBytes, "expect"):
            framing.hasExpect = true
        default:
            break
        }
        if fields.isEmpty {
            if sharedFields < previousFields.count, Self.sameText(previousFields[sharedFields].name, nameBytes),
               Self.sameText(previousFields[sharedFields].value, valueBytes) {
                sharedFields += 1
                return
            }
            fields.reserveCapacity(max(8, sharedFields + 1))
            if sharedFields > 0 {
                fields.append(contentsOf: previousFields[0 ..< sharedFields])
                sharedFields = 0
            }
        }
        let position = fields.count
        let value = position < previousFields.count && Self.sameText(previousFields[position].value, valueBytes)
            ? previousFields[position].value : Self.decodeText(valueBytes, isASCII: line.valueIsASCII)
        fields.append((name: ASCII.knownFieldName(nameBytes) ?? String(decoding: nameBytes, as: UTF8.self), value: value))
    }

    /// Folds one Content-Length field value into the framing notes: a comma list of 1–18 digit numbers that must
    /// all agree with each other and with earlier Content-Length fields (RFC 9110 §8.6, RFC 9112 §6.3).
    private mutating func noteContentLength(_ value: UnsafeBufferPointer<UInt8>) {
        guard framing.contentLengthProblem == nil else { return }
        var index = 0
        while true {
            while index < value.count && ASCII.isWhitespace(value[index]) { index += 1 }
            let digitsStart = index
            var number = 0
            while index < value.count && ASCII.isDigit(value[index]) {
                // 18 digits always fit in Int64, so the check comes before any overflow can happen.
                guard index - digitsStart < 18 else {
                    framing.contentLengthProblem = "Content-Length has more than 18 digits (RFC 9110 §8.6)"
                    return
                }
                number = number * 10 + Int(value[index] - ASCII.zero)
                index += 1
            }
            guard index > digitsStart else {
                framing.contentLengthProblem = "Content-Length is not a number (RFC 9110 §8.6)"
                return
            }
            if let known = framing.contentLength, known != number {
                framing.contentLengthProblem = "conflicting Content-Length values (RFC 9112 §6.3)"
                return
            }
            framing.contentLength = number
            while index < value.count && ASCII.isWhitespace(value[index]) { index += 1 }
            if index == value.count { return }
            guard value[index] == ASCII.comma else {
                framing.contentLengthProblem = "Content-Length is not a number (RFC 9110 §8.6)"
                return
            }
            index += 1
        }
    }

    /// Builds the head from the parsed parts and decides how the body is framed (RFC 9112 §3.2, §6). Returns
    /// whether the head is announced before the request (`HTTPParseEvent.head`): a body follows, or an Expect
    /// field came.
    private mutating func completeHead() throws(Rejection) -> Bool {
        let headFields: [(name: String, value: String)]
        if !fields.isEmpty {
            headFields = fields
        } else if sharedFields == previousFields.count {
            headFields = previousFields
        } else {
            // Fewer lines than the previous head (perhaps none), each the same as its: that prefix.
            headFields = Array(previousFields[0 ..< sharedFields])
        }
        let completed = HTTPRequestHead(method: method, target: target, version: version, headers: HTTPHeaders(headFields))
        previousFields = headFields
        fields = []
        sharedFields = 0
        head = completed
        let framing = self.framing
        self.framing = FramingFields()
        if framing.hostCount == 0 && version == .http1_1 {
            throw Rejection(status: 400, reason: "missing Host header (RFC 9112 §3.2)")
        }
        if framing.hostCount > 1 {
            throw Rejection(status: 400, reason: "more than one Host header (RFC 9112 §3.2)")
        }
        if framing.hasTransferEncoding {
            if framing.contentLength != nil || framing.contentLengthProblem != nil {
                throw Rejection(
                    status: 400, reason: "both Content-Length and Transfer-Encoding present (RFC 9112 §6.1)"
                )
            }
            if version == .http1_0 {
                throw Rejection(status: 400, reason: "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 §6.1)")
            }
            try Self.checkTransferCodings(completed.headers.values("transfer-encoding"))
            chunkedBody = []
            state = .chunkSize
            scanIndex = readIndex
            return true
        }
        if let problem = framing.contentLengthProblem {
            throw Rejection(status: 400, reason: problem)
        }
        let length = framing.contentLength ?? 0
        if length > limits.maxBodyBytes {
            throw Rejection(status: 413, reason: bodyTooLarge)
        }
        state = .fixedBody(length: length)
        return length > 0 || framing.hasExpect
    }

    /// Accepts exactly `chunked`. RFC 9112 §6.3: a request whose final coding is not chunked is 400; other codings
    /// before chunked are understood by this server, so they are 501 (RFC 9112 §6.1).
    private static func checkTransferCodings(_ values: [String]) throws(Rejection) {
        var codings: [String] = []
        for value in values {
            for element in value.split(separator: ",", omittingEmptySubsequences: false) {
                let coding = element.trimmingWhitespace()
                if !coding.isEmpty { codings.append(coding) }
            }
        }
        guard let last = codings.last else {
            throw Rejection(status: 400, reason: "empty Transfer-Encoding (RFC 9112 §6.1)")
        }
        guard last.caseInsensitiveEquals("chunked") else {
            throw Rejection(status: 400, reason: "final transfer coding is not chunked (RFC 9112 §6.3)")
        }
        guard codings.count == 1 else {
            throw Rejection(status: 501, reason: "unsupported transfer coding (RFC 9112 §6.1)")
        }
    }

    // MARK: Field lines

    /// Byte ranges of one field line.
    private struct FieldLine {
        var nameStart: Int
        var nameEnd: Int
        var valueStart: Int
        var valueEnd: Int
        var valueIsASCII: Bool
    }

    /// Parses `field-name ":" OWS field-value OWS` (RFC 9112 §5) in `bytes[start ..< end]`, a non-empty line
    /// without its terminator.
    private static func parseFieldLine(
        _ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int
    ) throws(Rejection) -> FieldLine {
        let first = bytes[start]
        if first == ASCII.space || first == ASCII.tab {
            throw Rejection(status: 400, reason: "obsolete line folding or leading whitespace (RFC 9112 §5.2)")
        }
        var index = start
        while index < end && ASCII.isTokenByte(bytes[index]) { index += 1 }
        guard index < end else {
            throw Rejection(status: 400, reason: "header line without a colon (RFC 9112 §5)")
        }
        switch bytes[index] {
        case ASCII.colon:
            if index == start { throw Rejection(status: 400, reason: "empty header name (RFC 9112 §5)") }
        case ASCII.space, ASCII.tab:
            throw Rejection(status: 400, reason: "whitespace between header name and colon (RFC 9112 §5.1)")
        default:
            throw Rejection(status: 400, reason: "invalid character in header name (RFC 9110 §5.1)")
        }
        let nameEnd = index
        var valueStart = index + 1
        var valueEnd = end
        while valueStart < valueEnd && ASCII.isWhitespace(bytes[valueStart]) { valueStart += 1 }
        while valueEnd > valueStart && ASCII.isWhitespace(bytes[valueEnd - 1]) { valueEnd -= 1 }
        var isASCII = true
        let firstUnusual = ASCII.firstControlOrNonASCII(in: bytes, from: valueStart, to: valueEnd)
        for position in firstUnusual ..< valueEnd {
            let byte = bytes[position]
            if byte < ASCII.space {
                // LF cannot occur here: lines are split on it. Other controls are tolerated.
                if byte == 0 || byte == ASCII.cr {
                    throw Rejection(status: 400, reason: "NUL or CR in a header value (RFC 9110 §5.5)")
                }
            } else if byte >= 0x80 {
                isASCII = false
            }
        }
        return FieldLine(
            nameStart: start, nameEnd: nameEnd, valueStart: valueStart, valueEnd: valueEnd, valueIsASCII: isASCII
        )
    }

    // MARK: Chunked body

    /// Reads `chunk-size [ chunk-ext ] CRLF` (RFC 9112 §7.1). Returns false when more bytes are needed.
    private mutating func readChunkSizeLine(_ bytes: UnsafeBufferPointer<UInt8>) throws(Rejection) -> Bool {
        let maxLine = limits.maxRequestLineBytes
        guard let lf = Self.firstLF(in: bytes, from: scanIndex) else {
            scanIndex = bytes.count
            if bytes.count - readIndex - 1 > maxLine {
                throw Rejection(status: 400, reason: "chunk-size line too long (RFC 9112 §7.1)")
            }
            return false
        }
        var contentEnd = lf
        if contentEnd > readIndex && bytes[contentEnd - 1] == ASCII.cr { contentEnd -= 1 }
        if contentEnd - readIndex > maxLine {
            throw Rejection(status: 400, reason: "chunk-size line too long (RFC 9112 §7.1)")
        }
        var index = readIndex
        var size = 0
        while index < contentEnd, let digit = ASCII.hexValue(bytes[index]) {
            // 15 hex digits always fit in Int64, so the check comes before any overflow can happen.
            guard index - readIndex < 15 else {
                throw Rejection(status: 400, reason: "chunk size has more than 15 hex digits (RFC 9112 §7.1)")
            }
            size = size << 4 | digit
            index += 1
        }
        guard index > readIndex else {
            throw Rejection(status: 400, reason: "invalid chunk size (RFC 9112 §7.1)")
        }
        while index < contentEnd && ASCII.isWhitespace(bytes[index]) { index += 1 }
        if index < contentEnd {
            guard bytes[index] == ASCII.semicolon else {
                throw Rejection(status: 400, reason: "invalid chunk size (RFC 9112 §7.1)")
            }
            // Extensions are ignored (RFC 9112 §7.1.1), but a bare CR is never allowed inside a line.
            for position in index ..< contentEnd where bytes[position] == ASCII.cr {
                throw Rejection(status: 400, reason: "bare CR in a chunk extension (RFC 9112 §2.2)")
            }
        }
        readIndex = lf + 1
        scanIndex = readIndex
        if size == 0 {
            trailerBytes = 0
            state = .trailers
            return true
        }
        if size > limits.maxBodyBytes - chunkedBody.count {
            throw Rejection(status: 413, reason: bodyTooLarge)
        }
        state = .chunkData(remaining: size)
        return true
    }

    /// Reads the CRLF (or bare LF, RFC 9112 §2.2) that must follow chunk data (RFC 9112 §7.1).
    private mutating func readChunkDataEnd(_ bytes: UnsafeBufferPointer<UInt8>) throws(Rejection) -> Bool {
        let available = bytes.count - readIndex
        guard available > 0 else { return false }
        let byte = bytes[readIndex]
        if byte == ASCII.lf {
            readIndex += 1
        } else if byte == ASCII.cr {
            guard available >= 2 else { return false }
            guard bytes[readIndex + 1] == ASCII.lf else {
                throw Rejection(status: 400, reason: "chunk data not followed by CRLF (RFC 9112 §7.1)")
            }
            readIndex += 2
        } else {
            throw Rejection(status: 400, reason: "chunk data not followed by CRLF (RFC 9112 §7.1)")
        }
        scanIndex = readIndex
        state = .chunkSize
        return true
    }

    /// Reads and drops trailer fields up to the empty line ending the body (RFC 9112 §7.1.2). Returns false when
    /// more bytes are needed.
    private mutating func readTrailers(_ bytes: UnsafeBufferPointer<UInt8>) throws(Rejection) -> Bool {
        let maxSection = limits.maxHeaderSectionBytes
        while true {
            guard let lf = Self.firstLF(in: bytes, from: scanIndex) else {
                scanIndex = bytes.count
                if trailerBytes + bytes.count - readIndex >= maxSection {
                    throw Rejection(status: 431, reason: "trailer section larger than \(maxSection) bytes")
                }
                return false
            }
            trailerBytes += lf + 1 - readIndex
            var contentEnd = lf
            if contentEnd > readIndex && bytes[contentEnd - 1] == ASCII.cr { contentEnd -= 1 }
            if contentEnd == readIndex {
                if trailerBytes > maxSection {
                    throw Rejection(status: 431, reason: "trailer section larger than \(maxSection) bytes")
                }
                readIndex = lf + 1
                scanIndex = readIndex
                return true
            }
            if trailerBytes >= maxSection {
                throw Rejection(status: 431, reason: "trailer section larger than \(maxSection) bytes")
            }
            _ = try Self.parseFieldLine(bytes, from: readIndex, to: contentEnd)
            readIndex = lf + 1
            scanIndex = readIndex
        }
    }

    // MARK: Helpers

    private var headerSectionTooLarge: String {
        "header section larger than \(limits.maxHeaderSectionBytes) bytes (RFC 9112 §5)"
    }

    private var bodyTooLarge: String {
        "body larger than \(limits.maxBodyBytes) bytes (RFC 9110 §15.5.14)"
    }

    /// The index of the first LF at or after `start`, or nil.
    @inline(__always)
    private static func firstLF(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        guard start < bytes.count, let base = bytes.baseAddress else { return nil }
        #if canImport(Darwin) || canImport(Glibc) || canImport(Musl)
        guard let found = memchr(base + start, Int32(ASCII.lf), bytes.count - start) else { return nil }
        return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
        #else
        var index = start
        while index < bytes.count {
            if bytes[index] == ASCII.lf { return index }
            index += 1
        }
        return nil
        #endif
    }

    /// Whether `text`'s UTF-8 is exactly `bytes` (then decoding `bytes` would give `text` again).
    @inline(__always)
    private static func sameText(_ text: String, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard text.utf8.count == bytes.count else { return false }
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return true }
        return text.utf8.withContiguousStorageIfAvailable { memcmp($0.baseAddress!, base, bytes.count) == 0 } ?? false
    }

    /// Field values and targets are decoded as UTF-8, and as ISO-8859-1 when that fails so no byte is lost
    /// (RFC 9110 §5.5: obs-text).
    private static func decodeText(_ bytes: UnsafeBufferPointer<UInt8>, isASCII: Bool) -> String {
        let utf8 = String(decoding: bytes, as: UTF8.self)
        if isASCII || utf8.utf8.elementsEqual(bytes) { return utf8 }
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: bytes.lazy.map { Unicode.Scalar($0) })
        return String(scalars)
    }

    /// Up to 200 bytes of the request line starting at `start`, after any empty lines, as lossy UTF-8.
    private static func rawRequestLinePrefix(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> String {
        var lineStart = start
        while lineStart < bytes.count && (bytes[lineStart] == ASCII.cr || bytes[lineStart] == ASCII.lf) {
            lineStart += 1
        }
        var lineEnd = lineStart
        let limit = min(bytes.count, lineStart + 200)
        while lineEnd < limit && bytes[lineEnd] != ASCII.cr && bytes[lineEnd] != ASCII.lf { lineEnd += 1 }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[lineStart ..< lineEnd]), as: UTF8.self)
    }

    /// The request line of a parsed head, cut to 200 bytes.
    private static func requestLinePrefix(of head: HTTPRequestHead) -> String {
        let line = "\(head.method) \(head.target) \(head.version)"
        guard line.utf8.count > 200 else { return line }
        return String(decoding: line.utf8.prefix(200), as: UTF8.self)
    }
}

/// Byte classes of RFC 9110 §5.6 and RFC 5234 Appendix B.1.
private enum ASCII {
    static let lf: UInt8 = 0x0A
    static let cr: UInt8 = 0x0D
    static let tab: UInt8 = 0x09
    static let space: UInt8 = 0x20
    static let comma: UInt8 = 0x2C
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let zero: UInt8 = 0x30

    /// `tchar` (RFC 9110 §5.6.2): `!#$%&'*+-.^_`|~`, DIGIT, ALPHA.
    @inline(__always)
    static func isTokenByte(_ byte: UInt8) -> Bool {
        // Bit n of `low` is set when byte n is a tchar; bit n of `high` when byte 64 + n is.
        let low: UInt64 = 0x03FF_6CFA_0000_0000
        let high: UInt64 = 0x57FF_FFFF_C7FF_FFFE
        let mask = byte < 64 ? low : (byte < 128 ? high : 0)
        return (mask >> UInt64(byte & 63)) & 1 == 1
    }

    /// The index of the first byte at or after `start` that is a control (below SP) or not ASCII, or `end`.
    /// Eight bytes at a time: field values are mostly plain visible ASCII.
    @inline(__always)
    static func firstControlOrNonASCII(in bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int) -> Int {
        var index = start
        if let base = bytes.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highBits: UInt64 = 0x8080_8080_8080_8080
            while index + 8 <= end {
                let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                // A byte's high bit ends up set if the byte is >= 0x80, or if it is < 0x20 (subtracting 0x20
                // borrows); the classic "has byte less than n" test (Bit Twiddling Hacks).
                if (word | ((word &- ones &* 0x20) & ~word)) & highBits != 0 { break }
                index += 8
            }
        }
        while index < end && bytes[index] >= space && bytes[index] < 0x80 { index += 1 }
        return index
    }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool { byte &- zero < 10 }

    /// SP or HTAB, the bytes of OWS (RFC 9110 §5.6.3).
    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool { byte == space || byte == tab }

    @inline(__always)
    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30 ... 0x39: return Int(byte - 0x30)
        case 0x41 ... 0x46: return Int(byte - 0x41 + 10)
        case 0x61 ... 0x66: return Int(byte - 0x61 + 10)
        default: return nil
        }
    }

    /// `bytes` spell `literal` exactly (case and all).
    static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount && memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0
    }

    /// The common methods as string literals: a literal costs nothing to make, where decoding the bytes into a new
    /// String costs about 160 instructions a string (`make hotpath`). Exact bytes only, so what was sent is kept.
    static func knownMethod(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        switch bytes.count {
        case 3: return equals(bytes, "GET") ? "GET" : equals(bytes, "PUT") ? "PUT" : nil
        case 4: return equals(bytes, "POST") ? "POST" : equals(bytes, "HEAD") ? "HEAD" : nil
        case 5: return equals(bytes, "PATCH") ? "PATCH" : nil
        case 6: return equals(bytes, "DELETE") ? "DELETE" : nil
        case 7: return equals(bytes, "OPTIONS") ? "OPTIONS" : nil
        default: return nil
        }
    }

    /// The field names clients send most, capitalized or lowercase as clients send them, as literals (see
    /// `knownMethod`). Any other spelling ("HOST") is decoded as it came.
    static func knownFieldName(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        switch bytes.count {
        case 4: return equals(bytes, "Host") ? "Host" : equals(bytes, "host") ? "host" : nil
        case 6: return equals(bytes, "Accept") ? "Accept" : equals(bytes, "accept") ? "accept" : nil
        case 10:
            return equals(bytes, "User-Agent") ? "User-Agent" : equals(bytes, "Connection") ? "Connection"
                : equals(bytes, "user-agent") ? "user-agent" : equals(bytes, "connection") ? "connection" : nil
        case 12: return equals(bytes, "Content-Type") ? "Content-Type" : equals(bytes, "content-type") ? "content-type" : nil
        case 13: return equals(bytes, "Authorization") ? "Authorization" : equals(bytes, "authorization") ? "authorization" : nil
        case 14:
            return equals(bytes, "Content-Length") ? "Content-Length"
                : equals(bytes, "content-length") ? "content-length" : nil
        case 15:
            return equals(bytes, "Accept-Encoding") ? "Accept-Encoding"
                : equals(bytes, "accept-encoding") ? "accept-encoding" : nil
        default: return nil
        }
    }

    /// Whether `bytes`, lowercased, equal `lowercase` (which must be lowercase ASCII).
    @inline(__always)
    static func lowercasedEquals(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = lowercase.utf8Start
        for index in 0 ..< bytes.count {
            let byte = bytes[index]
            let lowered = byte &- 0x41 < 26 ? byte | 0x20 : byte
            if lowered != expected[index] { return false }
        }
        return true
    }
}
