/// A GOAWAY the HTTP/2 client sent (RFC 9113 §6.8): how a test tells "the client detected the broken frame and
/// gave up" (a `raw-frames` fault answered with COMPRESSION_ERROR) from "the client ignored it" (ARCHITECTURE §4a).
/// Journaled on every entry of the connection whose exchange had not ended when it arrived, and on the
/// connection's entry when it has one.
public struct HTTP2ClientGoaway: Sendable, Equatable {
    /// The debug data kept: its first 256 bytes (`debugDataSize` is the whole size).
    public static let debugDataLimit = 256

    /// The error code as sent (RFC 9113 §7); `HTTP2ErrorCode.name(of:)` names it.
    public var errorCode: UInt32
    /// The last stream *the server* opened that the client may have processed: 0, since the server opens none.
    public var lastStreamID: Int
    /// The additional debug data (opaque: nghttp2 puts its reason there as text), up to `debugDataLimit` bytes.
    public var debugData: [UInt8]
    public var debugDataSize: Int
    /// When it arrived (monotonic, the journal's clock).
    public var receivedAtMonotonicNanos: UInt64
    /// The GOAWAYs the client had sent on the connection by then (a graceful shutdown sends two); the fields
    /// describe the last.
    public var count = 1

    package init(
        errorCode: UInt32, lastStreamID: Int, debugData: some Collection<UInt8>, receivedAtMonotonicNanos: UInt64
    ) {
        self.errorCode = errorCode
        self.lastStreamID = lastStreamID
        self.debugData = Array(debugData.prefix(Self.debugDataLimit))
        debugDataSize = debugData.count
        self.receivedAtMonotonicNanos = receivedAtMonotonicNanos
    }

    private static let whitespace: Set<Unicode.Scalar> = ["\t", "\r", "\n"]

    /// The debug data is text when it is UTF-8 without control characters (tab, CR and LF aside), else base64.
    package func json() -> JSONValue {
        let text = String(validating: debugData, as: UTF8.self).flatMap { text in
            text.unicodeScalars.contains { $0.properties.generalCategory == .control && !Self.whitespace.contains($0) }
                ? nil : text
        }
        return .object([
            ("code", .string(HTTP2ErrorCode.name(of: errorCode))),
            ("errorCode", .int(Int(errorCode))),
            ("lastStreamId", .int(lastStreamID)),
            ("debugData", .string(text ?? Base64.encode(debugData))),
            ("debugDataEncoding", .string(text == nil ? "base64" : "utf8")),
            ("debugDataSize", .int(debugDataSize)),
            ("receivedAtMonotonicMs", .double(Double(receivedAtMonotonicNanos) / 1_000_000)),
            ("count", .int(count)),
        ])
    }
}

/// A RST_STREAM the HTTP/2 client sent (RFC 9113 §6.4): the client cancelled the stream (CANCEL: it gave up
/// waiting) or found it broken. Journaled on that stream's entry.
public struct HTTP2ClientReset: Sendable, Equatable {
    /// The error code as sent (RFC 9113 §7).
    public var errorCode: UInt32
    public var receivedAtMonotonicNanos: UInt64

    package init(errorCode: UInt32, receivedAtMonotonicNanos: UInt64) {
        self.errorCode = errorCode
        self.receivedAtMonotonicNanos = receivedAtMonotonicNanos
    }

    package func json() -> JSONValue {
        .object([
            ("code", .string(HTTP2ErrorCode.name(of: errorCode))),
            ("errorCode", .int(Int(errorCode))),
            ("receivedAtMonotonicMs", .double(Double(receivedAtMonotonicNanos) / 1_000_000)),
        ])
    }
}

/// What the client sent to end an entry's stream or connection: the entry keeps both in one `Rare` box, and the
/// HTTP/2 codec hands them to the journal together.
package struct HTTP2ClientFrames: Sendable, Equatable {
    package var goaway: HTTP2ClientGoaway?
    package var reset: HTTP2ClientReset?

    package init(goaway: HTTP2ClientGoaway? = nil, reset: HTTP2ClientReset? = nil) {
        self.goaway = goaway
        self.reset = reset
    }

    package var isEmpty: Bool { goaway == nil && reset == nil }
}

extension HTTP2ErrorCode {
    /// The RFC 9113 §7 name of `code`, e.g. `PROTOCOL_ERROR`; a code the RFC does not define (which must not
    /// trigger special behaviour) as hex, e.g. `0x77`.
    package static func name(of code: UInt32) -> String {
        HTTP2ErrorCode(rawValue: code)?.name ?? "0x" + String(code, radix: 16)
    }
}

extension HTTP2ClientGoaway {
    /// Reads a record back from the journal's JSON (`json()`); nil when the value is not one.
    package init?(json: JSONValue) {
        guard case .number(let code)? = json["errorCode"], let errorCode = UInt32(code),
              case .number(let last)? = json["lastStreamId"], let lastStreamID = Int(last) else { return nil }
        var data: [UInt8] = []
        if case .string(let text)? = json["debugData"] {
            data = json["debugDataEncoding"] == .string("base64") ? (Base64.decode(text) ?? []) : Array(text.utf8)
        }
        var at: UInt64 = 0
        if case .number(let ms)? = json["receivedAtMonotonicMs"], let value = Double(ms) {
            at = UInt64(max(0, (value * 1_000_000).rounded()))
        }
        self.init(errorCode: errorCode, lastStreamID: lastStreamID, debugData: data, receivedAtMonotonicNanos: at)
        if case .number(let size)? = json["debugDataSize"], let size = Int(size) { debugDataSize = size }
        if case .number(let count)? = json["count"], let count = Int(count) { self.count = count }
    }
}

extension HTTP2ClientReset {
    /// Reads a record back from the journal's JSON (`json()`); nil when the value is not one.
    package init?(json: JSONValue) {
        guard case .number(let code)? = json["errorCode"], let errorCode = UInt32(code) else { return nil }
        var at: UInt64 = 0
        if case .number(let ms)? = json["receivedAtMonotonicMs"], let value = Double(ms) {
            at = UInt64(max(0, (value * 1_000_000).rounded()))
        }
        self.init(errorCode: errorCode, receivedAtMonotonicNanos: at)
    }
}
