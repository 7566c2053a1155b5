/// Limits from RFC 9112 practice; all in bytes.
public struct HTTPParserLimits: Sendable {
    /// The longest request line accepted, without its CRLF; longer gets 414 (RFC 9112 §3, RFC 9110 §15.5.15).
    /// Also the cap on empty lines before a request line (400) and on one chunk-size line (400).
    public var maxRequestLineBytes: Int
    /// The largest header section accepted: request line, field lines and the final empty line, with their line
    /// terminators; larger gets 431 (RFC 6585 §5). Also the cap on a chunked body's trailer section.
    public var maxHeaderSectionBytes: Int
    /// The largest body accepted, after chunked decoding; larger gets 413 (RFC 9110 §15.5.14).
    public var maxBodyBytes: Int

    /// Creates limits; the defaults suit a stub server that sees ordinary client traffic.
    public init(
        maxRequestLineBytes: Int = 8192,
        maxHeaderSectionBytes: Int = 65536,
        maxBodyBytes: Int = 10 * 1024 * 1024
    ) {
        self.maxRequestLineBytes = maxRequestLineBytes
        self.maxHeaderSectionBytes = maxHeaderSectionBytes
        self.maxBodyBytes = maxBodyBytes
    }
}
