/// Why a request could not be parsed; carries the status the server should answer with.
///
/// The statuses follow RFC 9112 and RFC 9110: 400 for a malformed message (RFC 9112 §2.2, §3, §5, §6, §7.1),
/// 413 for a body over the limit (RFC 9110 §15.5.14), 414 for a request line over the limit (RFC 9110 §15.5.15),
/// 431 for a header section over the limit (RFC 6585 §5), 501 for an unsupported transfer coding
/// (RFC 9112 §6.1) and 505 for an unsupported HTTP version (RFC 9110 §15.6.6).
package struct HTTPParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The status code the server should answer with: 400, 413, 414, 431, 501 or 505.
    package var status: Int
    /// Short human text naming the problem, e.g.
    /// "both Content-Length and Transfer-Encoding present (RFC 9112 §6.1)".
    package var reason: String
    /// The request head when it had been parsed completely before the problem was found (framing errors,
    /// 413 by Content-Length or by chunk sizes, bad chunked framing), else nil.
    package var head: HTTPRequestHead?
    /// Up to the first 200 bytes of the offending request's request line, decoded as lossy UTF-8, for the
    /// journal. Empty when the problem came before any request-line byte.
    package var requestLinePrefix: String

    /// Creates an error from its parts.
    package init(status: Int, reason: String, head: HTTPRequestHead? = nil, requestLinePrefix: String = "") {
        self.status = status
        self.reason = reason
        self.head = head
        self.requestLinePrefix = requestLinePrefix
    }

    /// `"<status> <reason>"`, e.g. `"400 missing Host header (RFC 9112 §3.2)"`.
    package var description: String { "\(status) \(reason)" }
}
