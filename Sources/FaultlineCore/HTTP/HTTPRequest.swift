/// The HTTP version a request line named (RFC 9112 §2.3).
public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    package init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)
    /// A request that came over HTTP/2 (RFC 9113 has no minor version: it prints as `HTTP/2`).
    public static let http2 = HTTPVersion(major: 2, minor: 0)

    public var description: String { major == 2 ? "HTTP/2" : "HTTP/\(major).\(minor)" }
}

/// Header fields in the order they arrived. Names keep their original spelling; look-ups ignore case
/// (RFC 9110 §5.1).
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    public package(set) var fields: [(name: String, value: String)]

    package init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    package mutating func append(name: String, value: String) {
        fields.append((name, value))
    }

    /// Room for `count` fields, so that appending them allocates once.
    package mutating func reserveCapacity(_ count: Int) {
        fields.reserveCapacity(count)
    }

    /// The first value of the named field, or nil.
    public subscript(name: String) -> String? {
        for field in fields where field.name.caseInsensitiveEquals(name) {
            return field.value
        }
        return nil
    }

    /// Every value of the named field, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Removes every field of that name.
    package mutating func remove(name: String) {
        fields.removeAll { $0.name.caseInsensitiveEquals(name) }
    }

    /// Replaces the named field's value (in its first place), or appends the field.
    package mutating func set(name: String, value: String) {
        var kept = false
        fields = fields.compactMap { field in
            guard field.name.caseInsensitiveEquals(name) else { return field }
            defer { kept = true }
            return kept ? nil : (field.name, value)
        }
        if !kept { fields.append((name, value)) }
    }

    /// A list field's values joined as one (RFC 9110 §5.3), or nil when absent.
    public func list(_ name: String) -> String? {
        let all = values(name)
        return all.isEmpty ? nil : all.joined(separator: ", ")
    }

    public var count: Int { fields.count }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }
}

/// A request line plus header section, complete before any body byte is read.
public struct HTTPRequestHead: Sendable, Equatable {
    public var method: String
    /// The request-target exactly as sent (origin-form `/a/b?x=1`, absolute-form, `*`).
    public var target: String
    public var version: HTTPVersion
    public var headers: HTTPHeaders

    package init(method: String, target: String, version: HTTPVersion, headers: HTTPHeaders) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// A WebSocket opening handshake's marks (RFC 6455 §4.1): `Upgrade: websocket` and `Connection: upgrade`.
    public var asksForWebSocket: Bool {
        guard let upgrade = headers["upgrade"], upgrade.lowercased().contains("websocket") else { return false }
        return headers.values("connection").contains { $0.lowercased().contains("upgrade") }
    }

    /// The path part of the target (before `?`), still percent-encoded. Absolute-form targets are reduced
    /// to their path.
    public var path: String {
        // Origin-form, the usual case: up to `?`, found byte-wise (no grapheme breaking on the hot path).
        if target.utf8.first == UInt8(ascii: "/") {
            // Over the contiguous bytes when there are some (always, for a parsed target): a plain loop, not the
            // generic UTF8View search.
            let mark = UInt8(ascii: "?")
            let question = target.utf8.withContiguousStorageIfAvailable { $0.firstIndex(of: mark) }
                ?? target.utf8.firstIndex(of: mark).map { target.utf8.distance(from: target.startIndex, to: $0) }
            guard let question else { return target }
            return String(target[..<target.utf8.index(target.startIndex, offsetBy: question)])
        }
        var rest = Substring(target)
        // Absolute-form (RFC 9112 §3.2.2): drop "scheme://authority".
        if !rest.hasPrefix("/"), let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            rest = rest[rest.index(colon, offsetBy: 3)...]
            rest = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
        }
        if let q = rest.firstIndex(of: "?") { rest = rest[..<q] }
        return String(rest)
    }

    /// The query string after `?`, without the `?`; empty when there is none.
    public var query: String {
        guard let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return "" }
        return String(target[target.index(after: q)...])
    }

    /// Whether the client asked for `100 Continue` before sending its body (RFC 9110 §10.1.1).
    package var expectsContinue: Bool {
        headers["expect"].map { $0.trimmingWhitespace().caseInsensitiveEquals("100-continue") } ?? false
    }

    /// Whether the connection may stay open after this exchange, from the client's side (RFC 9112 §9.3):
    /// HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    package var clientWantsKeepAlive: Bool {
        // HTTP/2 has no per-request close: its connection outlives every stream (RFC 9113 §8.2.2).
        if version.major == 2 { return true }
        guard headers.contains("connection") else { return version.major == 1 && version.minor != 0 }
        // The options read in place (`forEachConnectionToken`, compared without case: RFC 9110 §7.6.1): split,
        // trimmed and lowercased into arrays it cost four allocations a call, three calls a `Connection: close`
        // request.
        var close = false
        var keepAlive = false
        headers.forEachConnectionToken { token in
            if HTTPHeaders.token(token, is: "close") {
                close = true
            } else if HTTPHeaders.token(token, is: "keep-alive") {
                keepAlive = true
            }
        }
        if close { return false }
        if version.major == 1 && version.minor == 0 { return keepAlive }
        return version.major == 1
    }
}

/// A complete request: head and decoded body (chunked framing removed).
package struct HTTPRequest: Sendable, Equatable {
    package var head: HTTPRequestHead
    package var body: [UInt8]

    package init(head: HTTPRequestHead, body: [UInt8] = []) {
        self.head = head
        self.body = body
    }

    package var method: String { head.method }
    package var target: String { head.target }
    package var path: String { head.path }
    package var query: String { head.query }
    package var headers: HTTPHeaders { head.headers }
}

extension StringProtocol {
    /// ASCII case-insensitive comparison, as header names and tokens require.
    package func caseInsensitiveEquals<Other: StringProtocol>(_ other: Other) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        // Native strings (every header name and literal here) compare over their contiguous bytes: the generic
        // zip of two UTF8Views was a visible share of the proxy's per-request time. Others are copied first.
        if let result = a.withContiguousStorageIfAvailable({ x in
            b.withContiguousStorageIfAvailable { y in Self.asciiCaseInsensitiveEqual(x, y) }
        }), let result {
            return result
        }
        return Array(a).withUnsafeBufferPointer { x in
            Array(b).withUnsafeBufferPointer { y in Self.asciiCaseInsensitiveEqual(x, y) }
        }
    }

    private static func asciiCaseInsensitiveEqual(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        for index in 0..<a.count {
            let x = a[index], y = b[index]
            if x == y { continue }
            let lx = (x >= 65 && x <= 90) ? x | 0x20 : x
            let ly = (y >= 65 && y <= 90) ? y | 0x20 : y
            if lx != ly { return false }
        }
        return true
    }

    /// The string without leading and trailing spaces and horizontal tabs (HTTP's OWS).
    package func trimmingWhitespace() -> String {
        let bytes = Array(utf8)
        guard let first = bytes.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }) else { return "" }
        let last = bytes.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })!
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}

extension HTTPHeaders {
    /// Calls `body` with the bytes of each token of the `Connection` fields (RFC 9110 §7.6.1), spaces trimmed: no
    /// allocation, since this runs for every proxied message both ways.
    package func forEachConnectionToken(_ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        for field in fields where field.name.caseInsensitiveEquals("connection") {
            var value = field.value
            value.withUTF8 { Self.forEachToken(in: $0, body) }
        }
    }

    /// Calls `body` with each element of the comma-separated list `value` (RFC 9110 §5.6.1), spaces and tabs
    /// trimmed; empty elements are skipped unless `keepingEmpty` (where the last element's place matters).
    package static func forEachToken(
        in value: UnsafeBufferPointer<UInt8>, keepingEmpty: Bool = false, _ body: (UnsafeBufferPointer<UInt8>) -> Void
    ) {
        var start = 0
        while true {
            var end = start
            while end < value.count && value[end] != UInt8(ascii: ",") { end += 1 }
            var first = start, last = end
            while first < last && (value[first] == 0x20 || value[first] == 0x09) { first += 1 }
            while last > first && (value[last - 1] == 0x20 || value[last - 1] == 0x09) { last -= 1 }
            if last > first || keepingEmpty { body(UnsafeBufferPointer(rebasing: value[first..<last])) }
            guard end < value.count else { return }
            start = end + 1
        }
    }

    /// Whether `token` is `lowerCased` (ASCII letters compared without case).
    package static func token(_ token: UnsafeBufferPointer<UInt8>, is lowerCased: StaticString) -> Bool {
        guard token.count == lowerCased.utf8CodeUnitCount else { return false }
        let expected = lowerCased.utf8Start
        for index in 0..<token.count {
            let byte = token[index]
            let folded = byte >= 65 && byte <= 90 ? byte | 0x20 : byte
            if folded != expected[index] { return false }
        }
        return true
    }
}

extension Array where Element == UInt8 {
    /// Appends `text`'s UTF-8 bytes as one copy (the generic `append(contentsOf: text.utf8)` walks the view).
    package mutating func appendUTF8(_ text: String) {
        // Read in place (a native or small string always is), without the copy `withUTF8` needs to be mutating.
        if text.utf8.withContiguousStorageIfAvailable({ append(contentsOf: $0) }) == nil {
            append(contentsOf: text.utf8)
        }
    }

    /// Appends a literal's bytes as one copy (the generic `append(contentsOf: "…".utf8)` walks the view).
    package mutating func appendLiteral(_ literal: StaticString) {
        append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends CR LF.
    package mutating func appendCRLF() {
        append(0x0D)
        append(0x0A)
    }

    /// Appends `value` in decimal, without making a String.
    package mutating func appendDecimal(_ value: Int) {
        if value < 0 { append(UInt8(ascii: "-")) }
        let number = value.magnitude
        var divisor: UInt = 1
        while divisor <= number / 10 { divisor *= 10 }
        while divisor > 0 {
            append(UInt8(truncatingIfNeeded: number / divisor % 10) + 0x30)
            divisor /= 10
        }
    }
}
