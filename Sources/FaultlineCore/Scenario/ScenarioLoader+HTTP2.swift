extension ScenarioLoader.Reader {
    /// `{"maxConcurrentStreams": n, "initialWindowSize": n, "windowUpdateAfterMs": ms, "maxFrameSize": n,
    /// "headerTableSize": n, "goawayAfterStreams": n, "ackPings": bool, "pingEveryMs": ms}` (see `HTTP2Plan`).
    mutating func http2Section(_ value: JSONValue, at path: String) -> HTTP2Plan? {
        let errorCount = errors.count
        guard let fields = fields(value, at: path, known: [
            "maxConcurrentStreams", "initialWindowSize", "windowUpdateAfterMs", "maxFrameSize", "headerTableSize",
            "goawayAfterStreams", "ackPings", "pingEveryMs",
        ]) else { return nil }
        var plan = HTTP2Plan()
        func setting(_ key: String, _ range: ClosedRange<Int>) -> UInt32? {
            fields[key].flatMap { integer($0, at: fields.path(key), in: range) }.map { UInt32($0) }
        }
        plan.maxConcurrentStreams = setting("maxConcurrentStreams", 0...0x7fff_ffff)
        plan.initialWindowSize = setting("initialWindowSize", 0...0x7fff_ffff)
        plan.maxFrameSize = setting("maxFrameSize", 16_384...16_777_215)
        plan.headerTableSize = setting("headerTableSize", 0...0x7fff_ffff)
        plan.windowUpdateAfterMilliseconds = fields["windowUpdateAfterMs"].flatMap {
            integer($0, at: fields.path("windowUpdateAfterMs"), in: 0...ScenarioLoader.maxDelayMilliseconds)
        }
        if plan.windowUpdateAfterMilliseconds != nil && plan.initialWindowSize == nil {
            report(fields.path("windowUpdateAfterMs"), "needs \"initialWindowSize\" (the window it opens)")
        }
        plan.goawayAfterStreams = fields["goawayAfterStreams"].flatMap {
            integer($0, at: fields.path("goawayAfterStreams"), in: 1...Int(Int32.max / 2))
        }
        if let value = fields["ackPings"], let flag = bool(value, at: fields.path("ackPings")) { plan.ackPings = flag }
        plan.pingEveryMilliseconds = fields["pingEveryMs"].flatMap {
            integer($0, at: fields.path("pingEveryMs"), in: 10...ScenarioLoader.maxDelayMilliseconds)
        }
        return errors.count == errorCount ? plan : nil
    }
}
