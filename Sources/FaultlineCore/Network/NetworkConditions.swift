/// What the listening sockets do (ARCHITECTURE §3b). Switched at run time by the admin API, the Swift API or a
/// scenario's `timeline`; both ports (plain and TLS) follow it.
public enum ListenerState: String, Sendable, CaseIterable {
    /// Accepting and serving.
    case up
    /// Nothing listens on the port: the kernel answers every connection attempt with RST ("connection refused").
    /// The port is bound again when the listener comes back up.
    case refuse
    /// The accept queue is full and never drained, so the kernel drops every SYN: clients see their connect time
    /// out, exactly as behind a firewall that drops packets. Attempts never reach the server.
    case blackhole
    /// Every connection is accepted and answered with RST at once: the client sees its connection reset.
    case resetOnAccept = "reset-on-accept"
    /// Every connection is accepted and then frozen: no byte is read or written until the listener is up again,
    /// when it is served. What a client sees when packets stop after its handshake.
    case stall

    /// Whether clients are kept from being served: an outage.
    public var isOutage: Bool { self != .up }
}

/// How bytes move on a connection, shaped in user space (ARCHITECTURE §3b): latency added to each write (and to
/// the delivery of what the client sends), a bandwidth cap each way, and responses sliced into small writes. A
/// user-space server cannot lose packets or fail DNS: those are not here.
public struct LinkShape: Sendable, Equatable {
    /// The preset it came from (`3g`, `edge`, …), or nil for one spelled out.
    public var name: String?
    /// Server → client, bytes per second; nil: uncapped.
    public var downlinkBytesPerSecond: Int?
    /// Client → server, bytes per second; nil: uncapped.
    public var uplinkBytesPerSecond: Int?
    /// Added before each write reaches the socket.
    public var downlinkLatencyMilliseconds = 0
    /// Added before what the client sends reaches the server's codec.
    public var uplinkLatencyMilliseconds = 0
    /// Writes are cut into pieces of at most this many bytes, `sliceIntervalMilliseconds` apart.
    public var sliceBytes: Int?
    public var sliceIntervalMilliseconds = 0
    /// No byte moves either way (the `offline` preset): every connection, old and new, is frozen.
    public var frozen = false

    public init(
        name: String? = nil, downlinkBytesPerSecond: Int? = nil, uplinkBytesPerSecond: Int? = nil,
        downlinkLatencyMilliseconds: Int = 0, uplinkLatencyMilliseconds: Int = 0, sliceBytes: Int? = nil,
        sliceIntervalMilliseconds: Int = 0, frozen: Bool = false
    ) {
        self.name = name
        self.downlinkBytesPerSecond = downlinkBytesPerSecond
        self.uplinkBytesPerSecond = uplinkBytesPerSecond
        self.downlinkLatencyMilliseconds = downlinkLatencyMilliseconds
        self.uplinkLatencyMilliseconds = uplinkLatencyMilliseconds
        self.sliceBytes = sliceBytes
        self.sliceIntervalMilliseconds = sliceIntervalMilliseconds
        self.frozen = frozen
    }

    /// Whether anything about reading is shaped (reading then goes through the shaper).
    package var shapesUplink: Bool { frozen || uplinkBytesPerSecond != nil || uplinkLatencyMilliseconds > 0 }

    /// The presets, in the spirit of Apple's Network Link Conditioner (its numbers; loss, which a user-space server
    /// cannot cause, left out). kbit/s are 1,000 bits; a KiB is 1,024 bytes.
    public static let presets: [(name: String, shape: LinkShape)] = [
        ("3g", LinkShape(name: "3g", downlinkBytesPerSecond: 780_000 / 8, uplinkBytesPerSecond: 330_000 / 8,
                         downlinkLatencyMilliseconds: 100, uplinkLatencyMilliseconds: 100)),
        ("edge", LinkShape(name: "edge", downlinkBytesPerSecond: 240_000 / 8, uplinkBytesPerSecond: 200_000 / 8,
                           downlinkLatencyMilliseconds: 400, uplinkLatencyMilliseconds: 440)),
        ("lte", LinkShape(name: "lte", downlinkBytesPerSecond: 50_000_000 / 8, uplinkBytesPerSecond: 10_000_000 / 8,
                          downlinkLatencyMilliseconds: 50, uplinkLatencyMilliseconds: 65)),
        ("very-bad", LinkShape(name: "very-bad", downlinkBytesPerSecond: 1_000_000 / 8, uplinkBytesPerSecond: 1_000_000 / 8,
                               downlinkLatencyMilliseconds: 500, uplinkLatencyMilliseconds: 500)),
        ("offline", LinkShape(name: "offline", frozen: true)),
    ]

    public static func preset(_ name: String) -> LinkShape? {
        presets.first(where: { $0.name == name })?.shape
    }

    package func json() -> JSONValue {
        .object([
            ("name", name.map(JSONValue.string) ?? .null),
            ("downlinkBytesPerSecond", downlinkBytesPerSecond.map(JSONValue.int) ?? .null),
            ("uplinkBytesPerSecond", uplinkBytesPerSecond.map(JSONValue.int) ?? .null),
            ("downlinkLatencyMs", .int(downlinkLatencyMilliseconds)),
            ("uplinkLatencyMs", .int(uplinkLatencyMilliseconds)),
            ("sliceBytes", sliceBytes.map(JSONValue.int) ?? .null),
            ("sliceIntervalMs", .int(sliceIntervalMilliseconds)),
            ("frozen", .bool(frozen)),
        ])
    }

    /// A short label for logs and the journal: the preset's name, or what is shaped.
    public var label: String {
        if let name { return name }
        if frozen { return "frozen" }
        var parts: [String] = []
        if let down = downlinkBytesPerSecond { parts.append("down \(down) B/s") }
        if let up = uplinkBytesPerSecond { parts.append("up \(up) B/s") }
        if downlinkLatencyMilliseconds > 0 || uplinkLatencyMilliseconds > 0 {
            parts.append("+\(downlinkLatencyMilliseconds)/\(uplinkLatencyMilliseconds) ms")
        }
        if let slice = sliceBytes { parts.append("slices of \(slice) B every \(sliceIntervalMilliseconds) ms") }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }
}

/// What happens to the connections open at the moment of a change.
public enum ConnectionsAction: Sendable, Equatable {
    /// Every open connection ends with RST.
    case drop
    /// Every open connection ends with FIN (after what was already written).
    case dropFin
    /// No byte moves either way on every open connection for this long (a Wi-Fi handover). Connections opened
    /// meanwhile are not frozen.
    case freeze(milliseconds: Int)
    /// Ends a freeze now (and a `stall`'s hold on the connections it accepted).
    case thaw

    public var label: String {
        switch self {
        case .drop: "drop"
        case .dropFin: "drop-fin"
        case .freeze(let milliseconds): "freeze \(milliseconds) ms"
        case .thaw: "thaw"
        }
    }
}

/// One change of the network: any of the listener's state, an action on the open connections and the shaping of
/// connections (nil fields are left as they are). A timeline phase, an admin call or a Swift call.
public struct NetworkChange: Sendable, Equatable {
    public var listener: ListenerState?
    public var connections: ConnectionsAction?
    /// `.some(nil)` clears the shaping; nil leaves it.
    public var conditions: LinkShape??

    public init(listener: ListenerState? = nil, connections: ConnectionsAction? = nil, conditions: LinkShape?? = nil) {
        self.listener = listener
        self.connections = connections
        self.conditions = conditions
    }

    public var isEmpty: Bool { listener == nil && connections == nil && conditions == nil }
}

/// The network as it is now: what `GET /__faultline/network` shows.
package struct NetworkState: Sendable, Equatable {
    package var listener: ListenerState = .up
    package var conditions: LinkShape?
    /// Open connections are frozen until this monotonic millisecond (a `freeze`), if later than now.
    package var frozenUntilMilliseconds: UInt64?

    package init() {}

    /// Whether clients cannot be served: the listener is not up, or the conditions are `offline`.
    package var isOutage: Bool { listener.isOutage || (conditions?.frozen ?? false) }

    /// `change` applied (its connection action does not change the state, except a freeze's end).
    package mutating func apply(_ change: NetworkChange, nowMilliseconds: UInt64) {
        if let listener = change.listener { self.listener = listener }
        if let conditions = change.conditions { self.conditions = conditions }
        switch change.connections {
        case .freeze(let milliseconds)?:
            frozenUntilMilliseconds = max(frozenUntilMilliseconds ?? 0, nowMilliseconds + UInt64(milliseconds))
        case .thaw?:
            frozenUntilMilliseconds = nil
        default:
            break
        }
    }
}
