extension ScenarioLoader.Reader {
    /// `timeline`: phases in order (ARCHITECTURE §3b). `routeIDs` are the scenario's routes, which a request trigger
    /// must name.
    mutating func timeline(_ value: JSONValue, at path: String, routeIDs: Set<String>) -> [TimelinePhase] {
        guard let elements = array(value, at: path) else { return [] }
        var phases: [TimelinePhase] = []
        for (index, element) in elements.enumerated() {
            let phasePath = "\(path)[\(index)]"
            let errorCount = errors.count
            guard let fields = fields(element, at: phasePath, known: ["after", "name"] + Self.changeKeys) else { continue }
            var trigger: TimelinePhase.Trigger?
            if let after = required(fields, "after") {
                trigger = phaseTrigger(after, at: fields.path("after"), routeIDs: routeIDs)
            }
            let name = fields["name"].flatMap { nonEmptyString($0, at: fields.path("name")) }
            let change = networkChange(fields)
            if let change, change.isEmpty {
                report(phasePath, "the phase changes nothing: give it \"listener\", \"connections\" or \"conditions\"")
            }
            if errors.count == errorCount, let trigger, let change {
                phases.append(TimelinePhase(trigger: trigger, change: change, name: name))
            }
        }
        return phases
    }

    /// `{"ms": N}` after the previous phase began, or `{"requests": N, "route": "id"}` answered since the load or reset.
    private mutating func phaseTrigger(_ value: JSONValue, at path: String, routeIDs: Set<String>) -> TimelinePhase.Trigger? {
        guard let fields = fields(value, at: path, known: ["ms", "requests", "route"]) else { return nil }
        if let ms = fields["ms"] {
            if fields["requests"] != nil || fields["route"] != nil {
                report(path, "\"ms\" and \"requests\" cannot be combined: a phase begins on one trigger")
                return nil
            }
            return integer(ms, at: fields.path("ms"), in: 0...ScenarioLoader.maxDelayMilliseconds).map { .afterMilliseconds($0) }
        }
        guard let requests = fields["requests"] else {
            report(path, "needs \"ms\" (after the previous phase began) or \"requests\" with \"route\"")
            return nil
        }
        let count = integer(requests, at: fields.path("requests"), in: 1...Int(Int32.max))
        guard let routeValue = required(fields, "route"), let route = nonEmptyString(routeValue, at: fields.path("route")) else {
            return nil
        }
        guard routeIDs.contains(route) else {
            report(fields.path("route"), "no route has the id \(ScenarioLoader.quoted(route))"
                + ScenarioLoader.hint(for: route, among: routeIDs.sorted()))
            return nil
        }
        return count.map { .afterRequests(count: $0, route: route) }
    }

    /// The keys a change has: in a phase, and in `POST /__faultline/network`.
    static let changeKeys = ["listener", "connections", "conditions"]

    /// The change an object's `listener`, `connections` and `conditions` make; nil when one was reported.
    mutating func networkChange(_ fields: ScenarioLoader.Fields) -> NetworkChange? {
        let errorCount = errors.count
        var change = NetworkChange()
        if let value = fields["listener"], let text = string(value, at: fields.path("listener")) {
            if let state = ListenerState(rawValue: text) {
                change.listener = state
            } else {
                report(fields.path("listener"), "unknown listener state \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: ListenerState.allCases.map(\.rawValue)))
            }
        }
        if let value = fields["connections"] {
            change.connections = connectionsAction(value, at: fields.path("connections"))
        }
        if let value = fields["conditions"] {
            if let shape = conditions(value, at: fields.path("conditions")) { change.conditions = .some(shape) }
        }
        return errors.count == errorCount ? change : nil
    }

    /// `"drop"`, `"drop-fin"` or `{"freezeMs": N}`.
    private mutating func connectionsAction(_ value: JSONValue, at path: String) -> ConnectionsAction? {
        switch value {
        case .string("drop"): return .drop
        case .string("drop-fin"): return .dropFin
        case .string("thaw"): return .thaw
        case .object:
            guard let fields = fields(value, at: path, known: ["freezeMs"]), let ms = required(fields, "freezeMs") else { return nil }
            return integer(ms, at: fields.path("freezeMs"), in: 1...ScenarioLoader.maxDelayMilliseconds).map { .freeze(milliseconds: $0) }
        case .string(let text):
            report(path, "unknown connections action \(ScenarioLoader.quoted(text))"
                + ScenarioLoader.hint(for: text, among: ["drop", "drop-fin", "thaw"]) + " (or {\"freezeMs\": N})")
            return nil
        default:
            report(path, "expected \"drop\", \"drop-fin\", \"thaw\" or {\"freezeMs\": N}, found \(ScenarioLoader.describe(value))")
            return nil
        }
    }

    /// A preset's name, `"none"` / null (no conditions), or an object: an optional `preset` and the fields that
    /// override it. The outer optional is nil when something was reported.
    mutating func conditions(_ value: JSONValue, at path: String) -> LinkShape?? {
        let names = LinkShape.presets.map(\.name)
        switch value {
        case .null, .string("none"):
            return .some(nil)
        case .string(let text):
            if let shape = LinkShape.preset(text) { return .some(shape) }
            report(path, "unknown conditions \(ScenarioLoader.quoted(text))"
                + ScenarioLoader.hint(for: text, among: names + ["none"]))
            return nil
        case .object:
            break
        default:
            report(path, "expected a preset's name (\(names.joined(separator: ", "))), \"none\" or an object, found "
                + ScenarioLoader.describe(value))
            return nil
        }
        let keys = ["preset", "downlink", "uplink", "latencyMs", "downlinkLatencyMs", "uplinkLatencyMs", "sliceBytes",
                    "sliceIntervalMs"]
        guard let fields = fields(value, at: path, known: keys) else { return nil }
        let errorCount = errors.count
        var shape = LinkShape()
        if let preset = fields["preset"], let text = string(preset, at: fields.path("preset")) {
            if let base = LinkShape.preset(text) {
                shape = base
            } else {
                report(fields.path("preset"), "unknown preset \(ScenarioLoader.quoted(text))" + ScenarioLoader.hint(for: text, among: names))
            }
        }
        // Overridden: no longer the preset as named.
        if fields.members.contains(where: { $0.key != "preset" }) { shape.name = nil }
        let maxRate = 1 << 40
        if let value = fields["downlink"] {
            shape.downlinkBytesPerSecond = byteSize(value, at: fields.path("downlink"), in: 1...maxRate, suffix: "/s")
        }
        if let value = fields["uplink"] {
            shape.uplinkBytesPerSecond = byteSize(value, at: fields.path("uplink"), in: 1...maxRate, suffix: "/s")
        }
        let maxLatency = 60_000
        if let value = fields["latencyMs"], let ms = integer(value, at: fields.path("latencyMs"), in: 0...maxLatency) {
            shape.downlinkLatencyMilliseconds = ms
            shape.uplinkLatencyMilliseconds = ms
        }
        if let value = fields["downlinkLatencyMs"], let ms = integer(value, at: fields.path("downlinkLatencyMs"), in: 0...maxLatency) {
            shape.downlinkLatencyMilliseconds = ms
        }
        if let value = fields["uplinkLatencyMs"], let ms = integer(value, at: fields.path("uplinkLatencyMs"), in: 0...maxLatency) {
            shape.uplinkLatencyMilliseconds = ms
        }
        if let value = fields["sliceBytes"] {
            shape.sliceBytes = integer(value, at: fields.path("sliceBytes"), in: 1...1 << 20)
        }
        if let value = fields["sliceIntervalMs"],
           let ms = integer(value, at: fields.path("sliceIntervalMs"), in: 0...maxLatency) {
            shape.sliceIntervalMilliseconds = ms
            if fields["sliceBytes"] == nil {
                report(fields.path("sliceIntervalMs"), "needs \"sliceBytes\" (the size of the slices it spaces)")
            }
        }
        return errors.count == errorCount ? .some(shape) : nil
    }
}

extension ScenarioLoader {
    /// A change as `POST /__faultline/network` takes it: `{"listener", "connections", "conditions"}`. The errors
    /// name JSON paths in the body.
    package static func networkChange(_ body: JSONValue) -> Result<NetworkChange, ScenarioLoadError> {
        var reader = Reader(file: "request body", directory: nil)
        guard let fields = reader.fields(body, at: "", known: Reader.changeKeys),
              let change = reader.networkChange(fields), reader.errors.isEmpty else {
            return .failure(ScenarioLoadError(errors: reader.errors))
        }
        return .success(change)
    }
}
