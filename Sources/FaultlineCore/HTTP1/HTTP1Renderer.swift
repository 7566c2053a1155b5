/// Renders script steps as HTTP/1.1 bytes: the writing half of the HTTP/1.1 codec. Keeps the one fact a
/// response's framing needs across steps: whether its head declared chunked.
package struct HTTP1Renderer: Sendable {
    private var chunked = false

    package init() {}

    /// Whether the head rendered last declared chunked framing: body bytes written past the renderer (a
    /// `stream` step's pieces) must be chunks too.
    package var isChunked: Bool { chunked }

    private static let crlf: [UInt8] = [13, 10]
    private static let lastChunk = Array("0\r\n\r\n".utf8)

    /// Appends the bytes `step` puts on the wire to `out`. Steps that are not bytes (waits, aborts, hang)
    /// append nothing; the connection carries them out. `date` gives the `Date` field line (`Date: …` CRLF) for a
    /// head that adds one (`ResponseHead.addsDate`), asked only then.
    package mutating func render<Sink: ByteSink & ~Copyable>(
        _ step: ScriptStep, into out: inout Sink, date: () -> [UInt8]
    ) {
        switch step {
        case .head(let head):
            render(head: head, dateLine: head.addsDate ? date() : [], into: &out)
        case .body(let bytes):
            guard chunked else {
                out.append(bytes: bytes)
                return
            }
            guard !bytes.isEmpty else { return }  // a zero-size chunk would end the body
            out.append(bytes: Array(String(bytes.count, radix: 16).utf8))
            out.append(bytes: Self.crlf)
            out.append(bytes: bytes)
            out.append(bytes: Self.crlf)
        case .stream(let slice):
            render(.body(slice.source.bytes(slice.range)), into: &out, date: date)
        case .end:
            if chunked { out.append(bytes: Self.lastChunk) }
            chunked = false
        case .raw(let bytes):
            out.append(bytes: bytes)
        case .wait, .abortExchange, .abortConnection, .endConnection, .hang, .http2, .upgrade:
            break
        }
    }

    /// Appends a head: its HTTP/1.1 bytes as they were built (for a plain step, once, at load), with `dateLine` —
    /// the `Date` field line, when the head adds one — right after the status line. The shared bytes are written
    /// around the date, not rebuilt with it.
    package mutating func render<Sink: ByteSink & ~Copyable>(
        head: ResponseHead, dateLine: [UInt8], into out: inout Sink
    ) {
        chunked = head.chunked
        guard head.addsDate, !dateLine.isEmpty else {
            out.append(bytes: head.http1)
            return
        }
        let split = head.statusLineLength
        head.http1.withUnsafeBytes { http1 in
            out.append(raw: UnsafeRawBufferPointer(rebasing: http1[..<split]))
            out.append(bytes: dateLine)
            out.append(raw: UnsafeRawBufferPointer(rebasing: http1[split...]))
        }
    }

    /// Every byte a script puts on an HTTP/1.1 wire, waits ignored: for tests and for reading a script. `dateLine`
    /// is the `Date` field line its heads get (`HTTPDateCache.line(atWall:)`); none by default, so a test reads the
    /// bytes the script itself decides.
    package static func bytes(_ script: ResponseScript, dateLine: [UInt8] = []) -> [UInt8] {
        var renderer = HTTP1Renderer()
        var out: [UInt8] = []
        for step in script.steps { renderer.render(step, into: &out, date: { dateLine }) }
        return out
    }
}
