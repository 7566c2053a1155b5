/// HTTP/2's own ways to end a stream or a connection (RFC 9113 §6.4, §6.8), as script steps.
package enum HTTP2Action: Sendable, Equatable {
    /// RST_STREAM with this error code, after what the stream has rendered.
    case resetStream(code: UInt32)
    /// GOAWAY naming `last` as the last stream processed, with an error code; `graceful` sends the shutdown
    /// notice (a GOAWAY naming 2^31-1) first, then the final one.
    case goaway(last: GoawayLastStream, code: UInt32, graceful: Bool)
    /// Frames written as they are, after what nghttp2 has queued: the frames nghttp2 would never send.
    case frames([HTTP2RawFrame])
}

/// One hand-made HTTP/2 frame (RFC 9113 §4.1), written `count` times.
package struct HTTP2RawFrame: Sendable, Equatable {
    package var type: UInt8
    package var flags: UInt8
    /// On the exchange's own stream; false: stream 0.
    package var onStream: Bool
    package var payload: [UInt8]
    package var count: Int

    package init(type: UInt8, flags: UInt8, onStream: Bool, payload: [UInt8], count: Int = 1) {
        self.type = type
        self.flags = flags
        self.onStream = onStream
        self.payload = payload
        self.count = count
    }

    /// The frame's bytes: the 9-byte header (length, type, flags, stream id), then the payload.
    package func bytes(stream: Int) -> [UInt8] {
        let length = payload.count
        let id = onStream ? UInt32(truncatingIfNeeded: stream) & 0x7fff_ffff : 0
        var out: [UInt8] = [
            UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
            UInt8(truncatingIfNeeded: length), type, flags,
            UInt8(truncatingIfNeeded: id >> 24), UInt8(truncatingIfNeeded: id >> 16),
            UInt8(truncatingIfNeeded: id >> 8), UInt8(truncatingIfNeeded: id),
        ]
        out.append(contentsOf: payload)
        return out
    }
}

/// The `raw-frames` fault's ready-made breakages.
package enum HTTP2FramePreset: String, Sendable, CaseIterable {
    /// HEADERS whose HPACK block cannot be decoded (an integer that overflows): COMPRESSION_ERROR (RFC 9113 §4.3).
    case badHPACK = "bad-hpack"
    /// HEADERS without END_HEADERS, then CONTINUATION frames that never end the block: a client must cap what it
    /// buffers (the 2024 "CONTINUATION flood").
    case continuationFlood = "continuation-flood"
    /// DATA on stream 0, which RFC 9113 §6.1 makes a connection error (PROTOCOL_ERROR).
    case dataOnStreamZero = "data-on-stream-0"
    /// A SETTINGS frame whose length is not a multiple of 6: FRAME_SIZE_ERROR (RFC 9113 §6.5).
    case badSettings = "bad-settings"

    package var frames: [HTTP2RawFrame] {
        switch self {
        case .badHPACK:
            // An indexed field whose index never ends (0xFF, then continuation bytes).
            return [HTTP2RawFrame(type: 0x1, flags: 0x4 | 0x1, onStream: true, payload: [0xff, 0xff, 0xff, 0xff, 0xff, 0xff])]
        case .continuationFlood:
            // A literal field with a new name whose length is long, then name bytes, 16 KiB per CONTINUATION.
            let filler = [UInt8](repeating: 0x61, count: 16_384)
            return [HTTP2RawFrame(type: 0x1, flags: 0, onStream: true, payload: [0x00, 0x7f, 0xff, 0xff, 0x03]),
                    HTTP2RawFrame(type: 0x9, flags: 0, onStream: true, payload: filler, count: 640)]
        case .dataOnStreamZero:
            return [HTTP2RawFrame(type: 0x0, flags: 0, onStream: false, payload: Array("faultline".utf8))]
        case .badSettings:
            return [HTTP2RawFrame(type: 0x4, flags: 0, onStream: false, payload: [0, 3, 0, 0])]
        }
    }
}

/// Which stream a GOAWAY names as the last one processed.
package enum GoawayLastStream: Sendable, Equatable {
    /// The stream whose script sends the GOAWAY: it is processed, any later one is not.
    case current
    /// The stream before it (id − 2): this one and every later one are not processed.
    case previous
    case stream(Int)
}

/// HTTP/2 error codes (RFC 9113 §7), by the names scenarios use.
package enum HTTP2ErrorCode: UInt32, Sendable, CaseIterable {
    case noError = 0x0
    case protocolError = 0x1
    case internalError = 0x2
    case flowControlError = 0x3
    case settingsTimeout = 0x4
    case streamClosed = 0x5
    case frameSizeError = 0x6
    case refusedStream = 0x7
    case cancel = 0x8
    case compressionError = 0x9
    case connectError = 0xa
    case enhanceYourCalm = 0xb
    case inadequateSecurity = 0xc
    case http11Required = 0xd

    /// The RFC's name, e.g. `REFUSED_STREAM`.
    package var name: String {
        switch self {
        case .noError: "NO_ERROR"
        case .protocolError: "PROTOCOL_ERROR"
        case .internalError: "INTERNAL_ERROR"
        case .flowControlError: "FLOW_CONTROL_ERROR"
        case .settingsTimeout: "SETTINGS_TIMEOUT"
        case .streamClosed: "STREAM_CLOSED"
        case .frameSizeError: "FRAME_SIZE_ERROR"
        case .refusedStream: "REFUSED_STREAM"
        case .cancel: "CANCEL"
        case .compressionError: "COMPRESSION_ERROR"
        case .connectError: "CONNECT_ERROR"
        case .enhanceYourCalm: "ENHANCE_YOUR_CALM"
        case .inadequateSecurity: "INADEQUATE_SECURITY"
        case .http11Required: "HTTP_1_1_REQUIRED"
        }
    }

    /// The code a scenario names, e.g. `REFUSED_STREAM` (any case).
    package init?(name: String) {
        guard let code = Self.allCases.first(where: { $0.name == name.uppercased() }) else { return nil }
        self = code
    }
}
