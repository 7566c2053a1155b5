/// RFC 6455 framing (§5): the frames a client sends, parsed and checked, and the frames the server writes.
package enum WebSocketOpcode: UInt8, Sendable, Equatable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    package var isControl: Bool { rawValue & 0x8 != 0 }

    /// The journal's name for it.
    package var name: String {
        switch self {
        case .continuation: "continuation"
        case .text: "text"
        case .binary: "binary"
        case .close: "close"
        case .ping: "ping"
        case .pong: "pong"
        }
    }
}

/// One frame as it arrived (payload unmasked) or as it is written.
package struct WebSocketFrame: Sendable, Equatable {
    package var fin: Bool
    package var opcode: WebSocketOpcode
    package var payload: [UInt8]

    package init(fin: Bool = true, opcode: WebSocketOpcode, payload: [UInt8]) {
        self.fin = fin
        self.opcode = opcode
        self.payload = payload
    }

    /// A server frame (never masked, RFC 6455 §5.1): header and payload.
    package func serialized(masked mask: [UInt8]? = nil, rsv: UInt8 = 0) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | (rsv & 0x7) << 4 | opcode.rawValue]
        out.reserveCapacity(payload.count + 14)
        Self.appendLength(payload.count, masked: mask != nil, to: &out)
        if let mask {
            out += mask
            out += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        } else {
            out += payload
        }
        return out
    }

    /// The header of a frame whose payload follows separately (a large or generated message).
    package static func header(fin: Bool, opcode: WebSocketOpcode, length: Int) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | opcode.rawValue]
        appendLength(length, masked: false, to: &out)
        return out
    }

    private static func appendLength(_ length: Int, masked: Bool, to out: inout [UInt8]) {
        let maskBit: UInt8 = masked ? 0x80 : 0
        if length < 126 {
            out.append(maskBit | UInt8(length))
        } else if length <= 0xFFFF {
            out += [maskBit | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
        } else {
            out.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: length >> shift)) }
        }
    }

    /// A close frame's payload: the code (big-endian) and a UTF-8 reason cut to fit 125 bytes.
    package static func closePayload(code: Int?, reason: String) -> [UInt8] {
        guard let code else { return [] }
        var payload = [UInt8(truncatingIfNeeded: code >> 8), UInt8(truncatingIfNeeded: code)]
        var reasonBytes = Array(reason.utf8.prefix(123))
        while !reasonBytes.isEmpty && String(validating: reasonBytes, as: UTF8.self) == nil { reasonBytes.removeLast() }
        payload += reasonBytes
        return payload
    }
}

/// Why a client's bytes are not acceptable WebSocket: the close code RFC 6455 §7.4.1 names and a reason.
package struct WebSocketViolation: Error, Sendable, Equatable {
    package var code: Int
    package var reason: String
}

/// Parses a client's byte stream into frames (RFC 6455 §5.2), enforcing what a server must: client frames are
/// masked, reserved bits are zero (no extension is negotiated), opcodes are known, control frames are final and
/// at most 125 bytes, a frame or message is at most `maxMessageBytes` (1009 past it), continuations continue a
/// message. Messages are assembled here; text is checked for UTF-8 (1007) once complete.
package struct WebSocketFrameParser: Sendable {
    package let maxMessageBytes: Int
    private var buffer: [UInt8] = []
    private var readIndex = 0
    /// The message being assembled from fragments: its opcode and bytes so far.
    private var partial: (opcode: WebSocketOpcode, bytes: [UInt8])?

    package init(maxMessageBytes: Int) {
        self.maxMessageBytes = maxMessageBytes
    }

    /// What the parser yields.
    package enum Event: Sendable, Equatable {
        /// A frame as it arrived (for the journal), payload unmasked.
        case frame(WebSocketFrame)
        /// A complete data message (text or binary), fragments joined.
        case message(WebSocketOpcode, [UInt8])
    }

    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if readIndex > 0 && readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            readIndex = 0
        } else if readIndex > 64 * 1024 {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes.bindMemory(to: UInt8.self))
    }

    package var bufferedByteCount: Int { buffer.count - readIndex }

    /// The next frame or message, nil when more bytes are needed; throws the violation that must close the
    /// connection.
    package mutating func next() throws(WebSocketViolation) -> [Event]? {
        let available = buffer.count - readIndex
        guard available >= 2 else { return nil }
        let first = buffer[readIndex], second = buffer[readIndex + 1]
        let fin = first & 0x80 != 0
        guard first & 0x70 == 0 else { throw WebSocketViolation(code: 1002, reason: "reserved bits set without an extension") }
        guard let opcode = WebSocketOpcode(rawValue: first & 0x0F) else {
            throw WebSocketViolation(code: 1002, reason: "unknown opcode 0x\(String(first & 0x0F, radix: 16))")
        }
        guard second & 0x80 != 0 else { throw WebSocketViolation(code: 1002, reason: "a client frame must be masked") }
        var length = Int(second & 0x7F)
        var headerLength = 2
        if length == 126 {
            guard available >= 4 else { return nil }
            length = Int(buffer[readIndex + 2]) << 8 | Int(buffer[readIndex + 3])
            headerLength = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            var value: UInt64 = 0
            for index in 2..<10 { value = value << 8 | UInt64(buffer[readIndex + index]) }
            guard value >> 63 == 0 else { throw WebSocketViolation(code: 1002, reason: "a 64-bit length with its top bit set") }
            length = Int(clamping: value)
            headerLength = 10
        }
        if opcode.isControl {
            guard fin else { throw WebSocketViolation(code: 1002, reason: "a fragmented \(opcode.name) frame") }
            guard length <= 125 else { throw WebSocketViolation(code: 1002, reason: "a \(opcode.name) frame of \(length) bytes (125 at most)") }
        }
        let already = opcode == .continuation ? partial?.bytes.count ?? 0 : 0
        guard length <= maxMessageBytes - already else {
            throw WebSocketViolation(code: 1009, reason: "a message over \(maxMessageBytes) bytes")
        }
        guard available >= headerLength + 4 + length else { return nil }
        let maskStart = readIndex + headerLength
        let mask = Array(buffer[maskStart..<maskStart + 4])
        let start = maskStart + 4
        var payload = Array(buffer[start..<start + length])
        for index in payload.indices { payload[index] ^= mask[index & 3] }
        readIndex = start + length
        let frame = WebSocketFrame(fin: fin, opcode: opcode, payload: payload)
        var events: [Event] = [.frame(frame)]
        switch opcode {
        case .text, .binary:
            guard partial == nil else { throw WebSocketViolation(code: 1002, reason: "a new message before the last one ended") }
            if fin {
                events.append(.message(opcode, try Self.checked(opcode, payload)))
            } else {
                partial = (opcode, payload)
            }
        case .continuation:
            guard partial != nil else { throw WebSocketViolation(code: 1002, reason: "a continuation with no message to continue") }
            // In place: a copy of `partial` mutated would copy the whole message so far at every fragment.
            partial!.bytes += payload
            if fin, let message = partial {
                partial = nil
                events.append(.message(message.opcode, try Self.checked(message.opcode, message.bytes)))
            }
        case .close:
            guard payload.count != 1 else { throw WebSocketViolation(code: 1002, reason: "a close frame of 1 byte") }
            if payload.count >= 2 {
                let code = Int(payload[0]) << 8 | Int(payload[1])
                guard Self.isValidCloseCode(code) else { throw WebSocketViolation(code: 1002, reason: "close code \(code) may not be sent") }
                guard String(validating: payload[2...], as: UTF8.self) != nil else {
                    throw WebSocketViolation(code: 1007, reason: "a close reason that is not UTF-8")
                }
            }
        case .ping, .pong:
            break
        }
        return events
    }

    private static func checked(_ opcode: WebSocketOpcode, _ bytes: [UInt8]) throws(WebSocketViolation) -> [UInt8] {
        if opcode == .text && String(validating: bytes, as: UTF8.self) == nil {
            throw WebSocketViolation(code: 1007, reason: "a text message that is not UTF-8")
        }
        return bytes
    }

    /// RFC 6455 §7.4: the codes an endpoint may send in a close frame.
    package static func isValidCloseCode(_ code: Int) -> Bool {
        (1000...1003).contains(code) || (1007...1014).contains(code) || (3000...4999).contains(code)
    }
}

/// The `Sec-WebSocket-Accept` value for a key (RFC 6455 §4.2.2): base64 of SHA-1 of the key and the GUID.
package enum WebSocketHandshake {
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    package static func accept(key: String) -> String {
        Base64.encode(SHA1.digest(Array((key + guid).utf8)))
    }

    /// Whether `key` is the base64 of 16 bytes, as §4.1 requires.
    package static func isValidKey(_ key: String) -> Bool {
        Base64.decode(key)?.count == 16
    }
}

/// SHA-1 (FIPS 180-4), for the opening handshake only: the protocol names it, not for security.
enum SHA1 {
    static func digest(_ message: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bits = UInt64(message.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) { padded.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        var w = [UInt32](repeating: 0, count: 80)
        for chunk in stride(from: 0, to: padded.count, by: 64) {
            for index in 0..<16 {
                let base = chunk + index * 4
                w[index] = UInt32(padded[base]) << 24 | UInt32(padded[base + 1]) << 16 | UInt32(padded[base + 2]) << 8
                    | UInt32(padded[base + 3])
            }
            for index in 16..<80 {
                let value = w[index - 3] ^ w[index - 8] ^ w[index - 14] ^ w[index - 16]
                w[index] = value << 1 | value >> 31
            }
            var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
            for index in 0..<80 {
                let (f, k): (UInt32, UInt32)
                switch index {
                case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
                case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
                case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
                }
                let temp = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[index]
                (e, d, c, b, a) = (d, c, b << 30 | b >> 2, a, temp)
            }
            h[0] &+= a; h[1] &+= b; h[2] &+= c; h[3] &+= d; h[4] &+= e
        }
        return h.flatMap { word in [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: word >> UInt32($0)) } }
    }
}
