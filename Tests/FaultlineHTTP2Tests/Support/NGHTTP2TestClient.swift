import CNghttp2
import FaultlineCore
import FaultlineHTTP2
import Testing

/// A real HTTP/2 client on memory: an nghttp2 client session whose output the test hands to the server's
/// `HTTP2Connection` and whose input is the fake transport's output (`exchange`). It sends the client preface and
/// its SETTINGS on the first `send`, submits requests (a body through a data provider, held back on demand), sends
/// RST_STREAM, GOAWAY, WINDOW_UPDATE, SETTINGS and PING when told, and records every frame it receives, in order:
/// nghttp2's decoded view (`frames`, `headers`, `data`) and the raw bytes as they came (`wire`).
final class NGHTTP2TestClient {
    /// One frame as the nghttp2 client received it (after HPACK decoding).
    struct Frame: CustomStringConvertible {
        var type: UInt8
        var flags: UInt8
        var stream: Int32
        var length: Int
        /// RST_STREAM's or GOAWAY's code.
        var errorCode: UInt32?
        var lastStream: Int32?
        var increment: Int32?
        var settings: [SettingsEntry] = []
        /// HEADERS' fields, decoded, in order.
        var headers: [(name: String, value: String)] = []

        var isEndStream: Bool { (type == WireFrame.data || type == WireFrame.headers) && flags & 0x1 != 0 }
        var isAck: Bool { (type == WireFrame.settings || type == WireFrame.ping) && flags & 0x1 != 0 }
        var description: String {
            WireFrame(type: type, flags: flags, stream: UInt32(stream), payload: []).typeName
                + "[\(stream)] len \(length)" + (flags != 0 ? " flags 0x" + String(flags, radix: 16) : "")
                + (errorCode.map { " " + HTTP2ErrorCode.name(of: $0) } ?? "")
        }
    }

    private(set) var session: OpaquePointer?
    /// Frames received, in order (frames nghttp2 found invalid are in `invalid`).
    private(set) var frames: [Frame] = []
    private(set) var invalid: [(frame: Frame, error: Int32)] = []
    /// The server's bytes as they arrived, parsed by the tests' own parser (`WireFrame`).
    private(set) var wire: [WireFrame] = []
    private var unparsed: [UInt8] = []
    /// DATA bytes received, per stream.
    private(set) var data: [Int32: [UInt8]] = [:]
    /// nghttp2 closed the stream, with this code (the server's RST_STREAM, or NO_ERROR).
    private(set) var closed: [Int32: UInt32] = [:]
    /// What `nghttp2_session_mem_recv` returned when it failed (the server broke the protocol).
    private(set) var receiveErrors: [String] = []
    private(set) var libraryErrors: [String] = []
    private var fields: [Int32: [(name: String, value: String)]] = [:]
    private var uploads: [Int32: Upload] = [:]
    let autoWindowUpdate: Bool

    private struct Upload {
        var bytes: [UInt8]
        var offset = 0
        var held: Bool
    }

    /// `settings`: the client's SETTINGS (none: the defaults). `autoWindowUpdate: false`: a client that does not
    /// read — it sends no WINDOW_UPDATE unless told (`windowUpdate`).
    init(settings: [SettingsEntry] = [], autoWindowUpdate: Bool = true) {
        self.autoWindowUpdate = autoWindowUpdate
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        Self.install(callbacks)
        var options: OpaquePointer?
        nghttp2_option_new(&options)
        defer { nghttp2_option_del(options) }
        if !autoWindowUpdate { nghttp2_option_set_no_auto_window_update(options, 1) }
        nghttp2_session_client_new2(&session, callbacks, Unmanaged.passUnretained(self).toOpaque(), options)
        submitSettings(settings)
    }

    deinit { nghttp2_session_del(session) }

    // MARK: - What the client sends

    /// Submits a request; its stream id. `body`: sent as DATA through a data provider (none: HEADERS with
    /// END_STREAM); `holdBody`: not a byte of it until `releaseBody`.
    @discardableResult
    func request(
        _ method: String = "GET", _ path: String = "/", headers: [(String, String)] = [], body: [UInt8]? = nil,
        holdBody: Bool = false
    ) -> Int32 {
        let all = [(":method", method), (":scheme", "http"), (":path", path), (":authority", "localhost")] + headers
        let id = Self.withNV(all) { nv, count -> Int32 in
            guard body != nil else { return nghttp2_submit_request(session, nil, nv, count, nil, nil) }
            var provider = nghttp2_data_provider(
                source: nghttp2_data_source(ptr: nil),
                read_callback: { _, stream, buffer, length, flags, _, user in
                    NGHTTP2TestClient.client(user).readBody(stream, buffer, length, flags)
                })
            return nghttp2_submit_request(session, nil, nv, count, &provider, nil)
        }
        precondition(id > 0, "nghttp2_submit_request failed: \(id)")
        if let body { uploads[id] = Upload(bytes: body, held: holdBody) }
        return id
    }

    /// The held body goes out (as flow control allows).
    func releaseBody(_ stream: Int32) {
        uploads[stream]?.held = false
        nghttp2_session_resume_data(session, stream)
    }

    /// Body bytes of `stream` not sent yet.
    func unsentBody(_ stream: Int32) -> Int { uploads[stream].map { $0.bytes.count - $0.offset } ?? 0 }

    func reset(_ stream: Int32, _ code: HTTP2ErrorCode = .cancel) {
        nghttp2_submit_rst_stream(session, 0, stream, code.rawValue)
    }

    func goaway(_ code: HTTP2ErrorCode = .noError, debug: String = "") {
        var bytes = Array(debug.utf8)
        let last = nghttp2_session_get_last_proc_stream_id(session)
        nghttp2_submit_goaway(session, 0, last, code.rawValue, &bytes, bytes.count)
    }

    func windowUpdate(_ stream: Int32, _ increment: Int32) {
        nghttp2_submit_window_update(session, 0, stream, increment)
    }

    func submitSettings(_ entries: [SettingsEntry]) {
        var iv = entries.map { nghttp2_settings_entry(settings_id: Int32($0.id), value: $0.value) }
        nghttp2_submit_settings(session, 0, &iv, iv.count)
    }

    func ping(_ opaque: UInt64 = 0x1122_3344_5566_7788) {
        var value = opaque.bigEndian
        withUnsafeBytes(of: &value) { _ = nghttp2_submit_ping(session, 0, $0.bindMemory(to: UInt8.self).baseAddress) }
    }

    /// Bytes sent that the transport has not read yet (reading paused): they go first next time.
    var backlog: [UInt8] = []

    /// The client's queued frames, as bytes (the preface first, on the first call).
    func send() -> [UInt8] {
        var out = backlog
        backlog = []
        while true {
            var pointer: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &pointer)
            guard count > 0, let pointer else { break }
            out.append(contentsOf: UnsafeBufferPointer(start: pointer, count: count))
        }
        return out
    }

    /// The server's bytes arrive.
    func receive(_ bytes: [UInt8]) {
        unparsed += bytes
        wire += WireFrame.take(from: &unparsed)
        let result = bytes.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, $0.count) }
        if result < 0 { receiveErrors.append(String(cString: nghttp2_strerror(Int32(truncatingIfNeeded: result)))) }
    }

    // MARK: - What it received

    func frames(_ type: UInt8, stream: Int32? = nil) -> [Frame] {
        frames.filter { $0.type == type && (stream == nil || $0.stream == stream) }
    }

    func wire(_ type: UInt8, stream: UInt32? = nil) -> [WireFrame] {
        wire.filter { $0.type == type && (stream == nil || $0.stream == stream) }
    }

    /// The response's header fields on `stream` (its first HEADERS).
    func headers(_ stream: Int32) -> [(name: String, value: String)] {
        frames(WireFrame.headers, stream: stream).first?.headers ?? []
    }

    func status(_ stream: Int32) -> String? { headers(stream).first { $0.name == ":status" }?.value }

    func body(_ stream: Int32) -> [UInt8] { data[stream] ?? [] }

    func text(_ stream: Int32) -> String { String(decoding: body(stream), as: UTF8.self) }

    /// Whether the stream's response ended with END_STREAM.
    func ended(_ stream: Int32) -> Bool { frames.contains { $0.stream == stream && $0.isEndStream } }

    /// The server's SETTINGS (not the ACK), its first.
    var serverSettings: [SettingsEntry]? {
        frames.first { $0.type == WireFrame.settings && !$0.isAck }?.settings
    }

    /// The stream's send window as nghttp2 sees it (the client's upload).
    func sendWindow(_ stream: Int32) -> Int32 { nghttp2_session_get_stream_remote_window_size(session, stream) }

    // MARK: - Callbacks

    private func readBody(
        _ stream: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>?
    ) -> Int {
        guard var upload = uploads[stream], let buffer else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
        if upload.held { return Int(NGHTTP2_ERR_DEFERRED.rawValue) }
        let count = min(length, upload.bytes.count - upload.offset)
        upload.bytes.withUnsafeBufferPointer { source in
            buffer.update(from: source.baseAddress! + upload.offset, count: count)
        }
        upload.offset += count
        if upload.offset == upload.bytes.count { flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        uploads[stream] = upload
        return count
    }

    private func record(_ frame: UnsafePointer<nghttp2_frame>) -> Frame {
        let header = frame.pointee.hd
        var record = Frame(type: header.type, flags: header.flags, stream: header.stream_id, length: header.length)
        switch header.type {
        case WireFrame.rstStream:
            record.errorCode = frame.pointee.rst_stream.error_code
        case WireFrame.goaway:
            record.errorCode = frame.pointee.goaway.error_code
            record.lastStream = frame.pointee.goaway.last_stream_id
        case WireFrame.windowUpdate:
            record.increment = frame.pointee.window_update.window_size_increment
        case WireFrame.settings:
            let settings = frame.pointee.settings
            record.settings = (0..<settings.niv).map {
                SettingsEntry(UInt16(settings.iv[$0].settings_id), settings.iv[$0].value)
            }
        case WireFrame.headers:
            record.headers = fields.removeValue(forKey: header.stream_id) ?? []
        default:
            break
        }
        return record
    }

    static func client(_ user: UnsafeMutableRawPointer?) -> NGHTTP2TestClient {
        Unmanaged<NGHTTP2TestClient>.fromOpaque(user!).takeUnretainedValue()
    }

    private static func install(_ callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            if let frame { NGHTTP2TestClient.client(user).fields[frame.pointee.hd.stream_id] = [] }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame else { return 0 }
            let field = (String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
                         String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self))
            NGHTTP2TestClient.client(user).fields[frame.pointee.hd.stream_id, default: []].append(field)
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, user in
            NGHTTP2TestClient.client(user).data[stream, default: []].append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            let client = NGHTTP2TestClient.client(user)
            client.frames.append(client.record(frame))
            return 0
        }
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, frame, error, user in
            guard let frame else { return 0 }
            let client = NGHTTP2TestClient.client(user)
            client.invalid.append((client.record(frame), error))
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, code, user in
            NGHTTP2TestClient.client(user).closed[stream] = code
            return 0
        }
        nghttp2_session_callbacks_set_error_callback2(callbacks) { _, _, message, length, user in
            if let message {
                NGHTTP2TestClient.client(user).libraryErrors.append(String(
                    decoding: UnsafeRawBufferPointer(start: message, count: length), as: UTF8.self))
            }
            return 0
        }
    }

    /// Fields as `nghttp2_nv` entries for one call (nghttp2 copies them).
    static func withNV<T>(_ fields: [(String, String)], _ body: (UnsafePointer<nghttp2_nv>, Int) -> T) -> T {
        let bytes = fields.flatMap { Array($0.0.utf8) + Array($0.1.utf8) }
        let storage = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        defer { storage.deallocate() }
        storage.initialize(from: bytes, count: bytes.count)
        var offset = 0
        let entries = fields.map { name, value -> nghttp2_nv in
            let nameLength = name.utf8.count, valueLength = value.utf8.count
            defer { offset += nameLength + valueLength }
            return nghttp2_nv(
                name: storage + offset, value: storage + offset + nameLength, namelen: nameLength,
                valuelen: valueLength, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
        }
        return entries.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
    }
}

/// The pump: the client's output to `connection.received`, the fake transport's output (cleared as it is taken)
/// to the client, until neither has anything more. No timer fires (the test moves the clock: `io.advance`). What
/// the client sends while the transport does not read (`io.readingEnabled` false: backpressure) waits; what it
/// sends after the server closed is dropped, as a closed socket would.
func exchange(
    _ client: NGHTTP2TestClient, _ connection: HTTP2Connection, _ io: FakeHTTP2IO,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    var held: [UInt8] = []
    for _ in 0..<10_000 {
        var moved = false
        held += client.send()
        if !held.isEmpty && io.closedAt == nil && io.readingEnabled {
            let bytes = held
            held = []
            moved = true
            bytes.withUnsafeBytes { connection.received($0) }
        } else if io.closedAt != nil {
            held = []
        }
        if !io.output.isEmpty {
            let bytes = io.output
            io.output = []
            moved = true
            client.receive(bytes)
        }
        if !moved {
            client.backlog = held
            return
        }
    }
    Issue.record("the client and the server kept talking for 10,000 rounds", sourceLocation: sourceLocation)
}
