import FaultlineCore

/// One HTTP/2 frame as bytes on the wire (RFC 9113 §4.1): the tests' own builder and parser, for checks that an
/// nghttp2 client would hide (a frame it refuses, an order it would not send) and for reading exactly what the
/// server wrote.
struct WireFrame: Equatable, CustomStringConvertible {
    var type: UInt8
    var flags: UInt8
    var stream: UInt32
    var payload: [UInt8]

    static let data: UInt8 = 0x0, headers: UInt8 = 0x1, rstStream: UInt8 = 0x3, settings: UInt8 = 0x4,
        ping: UInt8 = 0x6, goaway: UInt8 = 0x7, windowUpdate: UInt8 = 0x8, continuation: UInt8 = 0x9
    static let endStream: UInt8 = 0x1, ack: UInt8 = 0x1, endHeaders: UInt8 = 0x4

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    var bytes: [UInt8] {
        let length = payload.count
        return [UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
                UInt8(truncatingIfNeeded: length), type, flags,
                UInt8(truncatingIfNeeded: stream >> 24) & 0x7f, UInt8(truncatingIfNeeded: stream >> 16),
                UInt8(truncatingIfNeeded: stream >> 8), UInt8(truncatingIfNeeded: stream)] + payload
    }

    var length: Int { payload.count }
    var isEndStream: Bool { (type == Self.data || type == Self.headers) && flags & Self.endStream != 0 }
    var isAck: Bool { (type == Self.settings || type == Self.ping) && flags & Self.ack != 0 }

    private func word(at offset: Int) -> UInt32 {
        guard payload.count >= offset + 4 else { return 0 }
        return UInt32(payload[offset]) << 24 | UInt32(payload[offset + 1]) << 16 | UInt32(payload[offset + 2]) << 8
            | UInt32(payload[offset + 3])
    }

    /// RST_STREAM's or GOAWAY's error code.
    var errorCode: UInt32? {
        switch type {
        case Self.rstStream: word(at: 0)
        case Self.goaway: word(at: 4)
        default: nil
        }
    }

    /// GOAWAY's last stream id.
    var lastStream: UInt32? { type == Self.goaway ? word(at: 0) & 0x7fff_ffff : nil }

    /// WINDOW_UPDATE's increment.
    var increment: UInt32? { type == Self.windowUpdate ? word(at: 0) & 0x7fff_ffff : nil }

    /// SETTINGS' entries (identifier, value), in order.
    var settingsEntries: [SettingsEntry] {
        guard type == Self.settings else { return [] }
        return stride(from: 0, to: payload.count - payload.count % 6, by: 6).map { offset in
            SettingsEntry(UInt16(payload[offset]) << 8 | UInt16(payload[offset + 1]), word(at: offset + 2))
        }
    }

    var typeName: String {
        switch type {
        case Self.data: "DATA"
        case Self.headers: "HEADERS"
        case 0x2: "PRIORITY"
        case Self.rstStream: "RST_STREAM"
        case Self.settings: "SETTINGS"
        case 0x5: "PUSH_PROMISE"
        case Self.ping: "PING"
        case Self.goaway: "GOAWAY"
        case Self.windowUpdate: "WINDOW_UPDATE"
        case Self.continuation: "CONTINUATION"
        default: "0x" + String(type, radix: 16)
        }
    }

    var description: String {
        var text = "\(typeName)[\(stream)] len \(length)"
        if flags != 0 { text += " flags 0x" + String(flags, radix: 16) }
        if let code = errorCode { text += " " + HTTP2ErrorCode.name(of: code) }
        if let last = lastStream { text += " last \(last)" }
        if let increment { text += " +\(increment)" }
        return text
    }

    // MARK: - Building frames (a client's)

    static func settings(_ entries: [SettingsEntry] = []) -> WireFrame {
        WireFrame(type: settings, flags: 0, stream: 0, payload: entries.flatMap { entry in
            [UInt8(entry.id >> 8), UInt8(entry.id & 0xff)] + word(entry.value)
        })
    }

    static var settingsAck: WireFrame { WireFrame(type: settings, flags: ack, stream: 0, payload: []) }

    static func headers(_ stream: UInt32, _ block: [UInt8], endStream: Bool) -> WireFrame {
        WireFrame(type: headers, flags: endHeaders | (endStream ? Self.endStream : 0), stream: stream, payload: block)
    }

    static func data(_ stream: UInt32, _ bytes: [UInt8], endStream: Bool = false) -> WireFrame {
        WireFrame(type: data, flags: endStream ? Self.endStream : 0, stream: stream, payload: bytes)
    }

    static func rst(_ stream: UInt32, _ code: UInt32) -> WireFrame {
        WireFrame(type: rstStream, flags: 0, stream: stream, payload: word(code))
    }

    static func goaway(last: UInt32 = 0, _ code: UInt32, debug: String = "") -> WireFrame {
        WireFrame(type: goaway, flags: 0, stream: 0, payload: word(last) + word(code) + Array(debug.utf8))
    }

    static func ping(_ opaque: [UInt8], ack: Bool = false) -> WireFrame {
        WireFrame(type: ping, flags: ack ? Self.ack : 0, stream: 0, payload: opaque)
    }

    static func windowUpdate(_ stream: UInt32, _ increment: UInt32) -> WireFrame {
        WireFrame(type: windowUpdate, flags: 0, stream: stream, payload: word(increment))
    }

    static func word(_ value: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
         UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    /// DATA frames carrying `count` bytes of `byte`, at most 16,384 a frame (the default SETTINGS_MAX_FRAME_SIZE),
    /// the last with END_STREAM when `endStream`.
    static func body(_ stream: UInt32, count: Int, byte: UInt8 = 0x75, endStream: Bool) -> [WireFrame] {
        var frames: [WireFrame] = []
        var left = count
        while left > 0 {
            let size = min(left, 16_384)
            left -= size
            frames.append(data(stream, [UInt8](repeating: byte, count: size), endStream: endStream && left == 0))
        }
        return frames
    }

    /// A request's header block: literal fields without indexing, new names (RFC 7541 §6.2.2), no Huffman.
    static func requestBlock(method: String = "GET", path: String = "/", authority: String = "localhost",
                             extra: [(String, String)] = []) -> [UInt8] {
        ([(":method", method), (":scheme", "http"), (":path", path), (":authority", authority)] + extra)
            .flatMap { name, value in
                let name = Array(name.utf8), value = Array(value.utf8)
                return [0x00, UInt8(name.count)] + name + [UInt8(value.count)] + value
            }
    }

    // MARK: - Parsing

    /// The whole frames at the start of `buffer`, removed from it; a partial frame stays.
    static func take(from buffer: inout [UInt8]) -> [WireFrame] {
        var frames: [WireFrame] = []
        var offset = 0
        while buffer.count - offset >= 9 {
            let length = Int(buffer[offset]) << 16 | Int(buffer[offset + 1]) << 8 | Int(buffer[offset + 2])
            guard buffer.count - offset >= 9 + length else { break }
            let stream = UInt32(buffer[offset + 5] & 0x7f) << 24 | UInt32(buffer[offset + 6]) << 16
                | UInt32(buffer[offset + 7]) << 8 | UInt32(buffer[offset + 8])
            frames.append(WireFrame(
                type: buffer[offset + 3], flags: buffer[offset + 4], stream: stream,
                payload: Array(buffer[offset + 9 ..< offset + 9 + length])))
            offset += 9 + length
        }
        buffer.removeFirst(offset)
        return frames
    }

    static func parse(_ bytes: [UInt8]) -> [WireFrame] {
        var buffer = bytes
        return take(from: &buffer)
    }
}

/// One SETTINGS parameter (RFC 9113 §6.5.2).
struct SettingsEntry: Equatable, CustomStringConvertible {
    var id: UInt16
    var value: UInt32
    init(_ id: UInt16, _ value: UInt32) {
        self.id = id
        self.value = value
    }
    static let headerTableSize: UInt16 = 0x1, enablePush: UInt16 = 0x2, maxConcurrentStreams: UInt16 = 0x3,
        initialWindowSize: UInt16 = 0x4, maxFrameSize: UInt16 = 0x5, maxHeaderListSize: UInt16 = 0x6
    var description: String { "\(id)=\(value)" }
}
