/// A WebSocket session on its upgrade request's journal entry (`websocket`): the frames both ways (the first
/// `maxFrames`; the counts go on), and how the session ended and who ended it.
public struct WebSocketRecord: Sendable, Equatable {
    /// Frames kept per session: a session that streams for minutes keeps its counts, not every frame.
    public static let maxFrames = 200
    public var subprotocol: String?
    public var frames: [WebSocketFrameRecord] = []
    public var framesIn = 0
    public var framesOut = 0
    public var end: WebSocketEnd?
    /// The first script fault and when it started (the moment a `silence` made the server a dead peer).
    public var faultStarted: (name: String, atMonotonicNanos: UInt64)?

    public static func == (lhs: WebSocketRecord, rhs: WebSocketRecord) -> Bool {
        lhs.subprotocol == rhs.subprotocol && lhs.frames == rhs.frames && lhs.framesIn == rhs.framesIn
            && lhs.framesOut == rhs.framesOut && lhs.end == rhs.end && lhs.faultStarted?.name == rhs.faultStarted?.name
            && lhs.faultStarted?.atMonotonicNanos == rhs.faultStarted?.atMonotonicNanos
    }

    package init(subprotocol: String?) {
        self.subprotocol = subprotocol
    }

    package mutating func add(_ frame: WebSocketFrameRecord) {
        if frame.direction == .fromClient { framesIn += 1 } else { framesOut += 1 }
        if frames.count < Self.maxFrames { frames.append(frame) }
    }

    /// The client's frames of one opcode (kept ones), oldest first.
    public func clientFrames(_ opcode: String) -> [WebSocketFrameRecord] {
        frames.filter { $0.direction == .fromClient && $0.opcode == opcode }
    }

    package func json(since start: UInt64) -> JSONValue {
        func ms(_ nanos: UInt64) -> JSONValue { .double((Double(nanos &- start) / 1_000_000 * 1000).rounded() / 1000) }
        var end: JSONValue = .null
        if let finished = self.end {
            end = .object([
                ("by", .string(finished.by.rawValue)), ("code", finished.code.map(JSONValue.int) ?? .null),
                ("reason", .string(finished.reason)), ("clean", .bool(finished.clean)),
                ("fault", finished.fault.map(JSONValue.string) ?? .null), ("atMs", ms(finished.atMonotonicNanos)),
            ])
        }
        return .object([
            ("subprotocol", subprotocol.map(JSONValue.string) ?? .null),
            ("framesIn", .int(framesIn)), ("framesOut", .int(framesOut)),
            ("frames", .array(frames.map { frame in
                .object([
                    ("direction", .string(frame.direction.rawValue)), ("opcode", .string(frame.opcode)),
                    ("fin", .bool(frame.fin)), ("size", .int(frame.size)),
                    ("text", frame.text.map(JSONValue.string) ?? .null), ("atMs", ms(frame.atMonotonicNanos)),
                ])
            })),
            ("fault", faultStarted.map { .object([("name", .string($0.name)), ("atMs", ms($0.atMonotonicNanos))]) } ?? .null),
            ("end", end),
        ])
    }

    package init?(json: JSONValue, start: UInt64) {
        guard case .object = json else { return nil }
        func nanos(_ value: JSONValue?) -> UInt64 {
            if case .number(let text)? = value, let ms = Double(text) { return start &+ UInt64(max(0, ms * 1_000_000)) }
            return start
        }
        if case .string(let name)? = json["subprotocol"] { subprotocol = name }
        framesIn = json["framesIn"]?.intValue ?? 0
        framesOut = json["framesOut"]?.intValue ?? 0
        if case .array(let items)? = json["frames"] {
            frames = items.compactMap { item in
                guard case .string(let direction)? = item["direction"],
                      let way = WebSocketFrameRecord.Direction(rawValue: direction),
                      case .string(let opcode)? = item["opcode"] else { return nil }
                var text: String?
                if case .string(let value)? = item["text"] { text = value }
                return WebSocketFrameRecord(direction: way, opcode: opcode, fin: item["fin"] != .bool(false),
                                            size: item["size"]?.intValue ?? 0, text: text, atMonotonicNanos: nanos(item["atMs"]))
            }
        }
        if let started = json["fault"], case .string(let name)? = started["name"] {
            faultStarted = (name, nanos(started["atMs"]))
        }
        if let finished = json["end"], case .string(let by)? = finished["by"], let party = WebSocketEnd.Party(rawValue: by) {
            var reason = ""
            if case .string(let text)? = finished["reason"] { reason = text }
            var fault: String?
            if case .string(let text)? = finished["fault"] { fault = text }
            end = WebSocketEnd(by: party, code: finished["code"]?.intValue, reason: reason,
                               clean: finished["clean"] == .bool(true), fault: fault, atMonotonicNanos: nanos(finished["atMs"]))
        }
    }
}
