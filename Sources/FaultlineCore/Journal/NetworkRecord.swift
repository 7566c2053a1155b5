/// The network on a journal entry (ARCHITECTURE §3b), under `network`:
/// - a *change* is an entry of its own (`kind: "network"`): who made it, what changed and the state after it;
/// - an *attempt* is a connection entry: a connection accepted during an outage (`reset-on-accept`, `stall`, or the
///   `offline` conditions);
/// - *shaped* is on a request entry whose connection ran under conditions: which.
public struct NetworkRecord: Sendable, Equatable {
    public enum Event: String, Sendable {
        case change, attempt, shaped
    }

    public var event: Event
    /// change: `timeline`, `admin`, `api`, `reset` (a scenario reset put the network back up) or `load`.
    public var source: String?
    /// change from a timeline: the phase's name.
    public var phase: String?
    /// change: the listener's state after it; attempt: the state that answered the connection.
    public var listener: ListenerState?
    /// change: what was done to the open connections (`drop`, `drop-fin`, `freeze 1000 ms`).
    public var connections: String?
    /// change: how long open connections were frozen.
    public var freezeMilliseconds: Int?
    /// change: the conditions after it (nil: none); shaped: the conditions in force.
    public var conditions: String?
    /// change: whether the state after it keeps clients from being served (listener not up, or `offline`).
    public var outage = false
    /// change: what went wrong carrying it out (a port that could not be bound again).
    public var error: String?

    package init(event: Event) {
        self.event = event
    }

    package func json() -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [("event", .string(event.rawValue))]
        switch event {
        case .change:
            members += [
                ("source", source.map(JSONValue.string) ?? .null), ("phase", phase.map(JSONValue.string) ?? .null),
                ("listener", listener.map { .string($0.rawValue) } ?? .null),
                ("connections", connections.map(JSONValue.string) ?? .null),
                ("freezeMs", freezeMilliseconds.map(JSONValue.int) ?? .null),
                ("conditions", conditions.map(JSONValue.string) ?? .null), ("outage", .bool(outage)),
                ("error", error.map(JSONValue.string) ?? .null),
            ]
        case .attempt:
            members.append(("listener", listener.map { .string($0.rawValue) } ?? .null))
            members.append(("conditions", conditions.map(JSONValue.string) ?? .null))
        case .shaped:
            members.append(("conditions", conditions.map(JSONValue.string) ?? .null))
        }
        return .object(members)
    }

    package init?(json: JSONValue) {
        func string(_ value: JSONValue?) -> String? { if case .string(let text)? = value { return text }; return nil }
        guard let event = string(json["event"]).flatMap(Event.init(rawValue:)) else { return nil }
        self.event = event
        source = string(json["source"])
        phase = string(json["phase"])
        listener = string(json["listener"]).flatMap(ListenerState.init(rawValue:))
        connections = string(json["connections"])
        if case .number(let text)? = json["freezeMs"] { freezeMilliseconds = Int(text) }
        conditions = string(json["conditions"])
        outage = json["outage"] == .bool(true)
        error = string(json["error"])
    }

    /// The request line a change entry shows where a request's would be (logs, HAR-less views).
    package var summary: String {
        var parts: [String] = []
        if let listener { parts.append("listener \(listener.rawValue)") }
        if let connections { parts.append("connections \(connections)") }
        if event == .change { parts.append("conditions \(conditions ?? "none")") }
        let origin = [source, phase].compactMap { $0 }.joined(separator: " ")
        return "(network: \(parts.joined(separator: ", "))\(origin.isEmpty ? "" : " — \(origin)"))"
    }
}
