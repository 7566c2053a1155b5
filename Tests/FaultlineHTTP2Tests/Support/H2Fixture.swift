import FaultlineCore
import FaultlineHTTP2
import Testing

/// One server connection on the fake transport (`FakeHTTP2IO`) and one nghttp2 client talking to it: each
/// request's script is picked by its path (`scripts`; a plain 200 "ok" otherwise).
final class H2Fixture {
    let io: FakeHTTP2IO
    let connection: HTTP2Connection
    let client: NGHTTP2TestClient
    var scripts: [String: ResponseScript] = [:]
    /// Called inside `dispatch` (inside nghttp2's `mem_recv`) before the script is picked: a re-entrant server.
    var onDispatch: ((HTTPRequest, HTTP2Connection) -> Void)?

    init(
        settings: HTTP2ConnectionSettings = HTTP2ConnectionSettings(), client: NGHTTP2TestClient = NGHTTP2TestClient(),
        scripts: [String: ResponseScript] = [:]
    ) {
        let io = FakeHTTP2IO { _, _ in (nil, nil) }
        self.io = io
        self.client = client
        self.scripts = scripts
        connection = HTTP2Connection(io: io, settings: settings)
        io.respond = { [unowned self] request, _ in
            onDispatch?(request, connection)
            return (self.scripts[request.path] ?? Scripts.ok("ok"), nil)
        }
    }

    /// Client → server → client until both are quiet; no timer fires.
    func pump() { exchange(client, connection, io) }

    /// Moves the fake clock (firing the timers due), then pumps.
    func advance(_ milliseconds: Int) {
        io.advance(milliseconds: milliseconds)
        pump()
    }

    /// How the exchange of the request to `path` ended (the journal's outcome), nil while it has not.
    func outcome(_ path: String) -> ExchangeOutcome? {
        guard let index = io.requests.firstIndex(where: { $0.request.path == path }) else { return nil }
        return io.outcomes[io.exchanges[index].sequence!]
    }

    /// The journal entry's sequence of the request to `path`.
    func sequence(_ path: String) -> Int? {
        io.requests.firstIndex { $0.request.path == path }.map { io.exchanges[$0].sequence! }
    }

    /// The server's frames on the wire, in order, from the server's SETTINGS on.
    var wire: [WireFrame] { client.wire }

    /// The frames on a stream, as a short list: "HEADERS", "DATA 5", "DATA 0 END_STREAM", "RST_STREAM CANCEL".
    func summary(_ stream: UInt32) -> [String] {
        wire.filter { $0.stream == stream }.map(Self.short)
    }

    static func short(_ frame: WireFrame) -> String {
        var text = frame.typeName
        if frame.type == WireFrame.data { text += " \(frame.length)" }
        if frame.isEndStream { text += " END_STREAM" }
        if frame.isAck { text += " ACK" }
        if let code = frame.errorCode { text += " " + HTTP2ErrorCode.name(of: code) }
        if let last = frame.lastStream { text += " last \(last)" }
        return text
    }
}

/// Scripts as the engine builds them (ResponsePlanner's `faultSteps`): the steps a real fault produces.
enum Scripts {
    static func head(
        _ status: Int = 200, _ headers: [(String, String)] = [("Content-Type", "text/plain")], length: Int
    ) -> ResponseHead {
        ResponseHead(status: status, headers: HTTPHeaders(headers.map { (name: $0.0, value: $0.1) }), bodyLength: length,
                     close: false)
    }

    static func ok(_ text: String, status: Int = 200, headers: [(String, String)] = [("Content-Type", "text/plain")])
        -> ResponseScript {
        let body = Array(text.utf8)
        return ResponseScript(
            steps: [.head(head(status, headers, length: body.count))] + (body.isEmpty ? [] : [.body(body)]) + [.end],
            status: status, keepAlive: true)
    }

    static func bytes(_ count: Int, _ byte: UInt8 = 0x61) -> ResponseScript {
        ResponseScript(
            steps: [.head(head(length: count)), .body([UInt8](repeating: byte, count: count)), .end], status: 200,
            keepAlive: true)
    }

    /// A `delay` before a plain answer.
    static func delayed(_ milliseconds: Int, _ text: String) -> ResponseScript {
        var script = ok(text)
        script.steps.insert(.wait(milliseconds: milliseconds), at: 0)
        return script
    }

    /// A drip: `first`, a wait, `second`, END_STREAM.
    static func drip(_ first: String, wait: Int, _ second: String) -> ResponseScript {
        ResponseScript(
            steps: [.head(head(length: first.utf8.count + second.utf8.count)), .body(Array(first.utf8)),
                    .wait(milliseconds: wait), .body(Array(second.utf8)), .end], status: 200, keepAlive: true)
    }

    /// `rst-stream` after `sent` bytes of `text` (after: body).
    static func rstStream(after sent: Int, of text: String, code: HTTP2ErrorCode) -> ResponseScript {
        let body = Array(text.utf8)
        return ResponseScript(
            steps: [.head(head(length: body.count)), .body(Array(body.prefix(sent))),
                    .http2(.resetStream(code: code.rawValue))], status: 200, fault: "rst-stream", keepAlive: true)
    }

    /// `rst-stream` after the headers.
    static func rstStreamAfterHeaders(_ code: HTTP2ErrorCode, length: Int = 2) -> ResponseScript {
        ResponseScript(
            steps: [.head(head(length: length)), .http2(.resetStream(code: code.rawValue))], status: 200,
            fault: "rst-stream", keepAlive: true)
    }

    /// `truncate-body`: the head announces all of `text`, `sent` bytes go, then the exchange is abandoned.
    static func truncated(after sent: Int, of text: String) -> ResponseScript {
        let body = Array(text.utf8)
        return ResponseScript(
            steps: [.head(head(length: body.count)), .body(Array(body.prefix(sent))), .abortExchange], status: 200,
            fault: "truncate-body", keepAlive: false)
    }

    /// `goaway`: the GOAWAY first, then the answer (processed only if the GOAWAY's last stream covers it).
    static func goaway(_ last: GoawayLastStream, code: HTTP2ErrorCode = .noError, graceful: Bool = false,
                       _ text: String = "after goaway") -> ResponseScript {
        let body = Array(text.utf8)
        return ResponseScript(
            steps: [.http2(.goaway(last: last, code: code.rawValue, graceful: graceful)), .head(head(length: body.count)),
                    .body(body), .end], status: 200, fault: "goaway", keepAlive: true)
    }

    /// `raw-frames` with a preset: the frames, then a hang.
    static func rawFrames(_ preset: HTTP2FramePreset) -> ResponseScript {
        ResponseScript(steps: [.http2(.frames(preset.frames)), .hang], status: nil, fault: "raw-frames", keepAlive: true)
    }

    /// `stall-after-headers`: the head, then nothing.
    static func stallAfterHeaders(length: Int = 10) -> ResponseScript {
        ResponseScript(steps: [.head(head(length: length)), .hang], status: 200, fault: "stall-after-headers",
                       keepAlive: true)
    }

    /// `hang`: nothing at all.
    static var hang: ResponseScript { ResponseScript(steps: [.hang], status: nil, fault: "hang", keepAlive: true) }

    /// `reset`: RST on the connection, nothing else.
    static var reset: ResponseScript {
        ResponseScript(steps: [.abortConnection(.reset)], status: nil, fault: "reset", keepAlive: false)
    }

    /// `empty-reply`: FIN, nothing else.
    static var emptyReply: ResponseScript {
        ResponseScript(steps: [.abortConnection(.close)], status: nil, fault: "empty-reply", keepAlive: false)
    }

    /// `no-close-notify`: an unframed head and the body, then FIN (the body ends with the connection).
    static func noCloseNotify(_ text: String) -> ResponseScript {
        let head = ResponseHead(status: 200, headers: HTTPHeaders([(name: "Content-Type", value: "text/plain")]),
                                bodyLength: 0, close: true, framed: false)
        return ResponseScript(
            steps: [.head(head), .body(Array(text.utf8)), .abortConnection(.closeWithoutNotify)], status: 200,
            fault: "no-close-notify", keepAlive: false)
    }

    /// `half-close` after `sent` body bytes: FIN from our side, then keep reading.
    static func halfClose(after sent: Int, of text: String) -> ResponseScript {
        let body = Array(text.utf8)
        return ResponseScript(
            steps: [.head(head(length: body.count)), .body(Array(body.prefix(sent))), .abortConnection(.shutdownWrite),
                    .hang], status: 200, fault: "half-close", keepAlive: false)
    }
}
