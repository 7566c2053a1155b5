extension ScenarioLoader {
    static let proxyKeys = [
        "upstream", "host", "unmatched", "caFile", "verify", "connectTimeoutMs", "responseTimeoutMs", "maxResponseBytes",
    ]
    /// The largest `maxResponseBytes`: a proxied body read whole is held in memory while its fault is applied.
    static let maxProxyResponseBytes = 1 << 30
}

extension ScenarioLoader.Reader {
    /// `"proxy": {"upstream": "https://…", "host": "upstream" | "client" | "NAME", "unmatched": "forward" | "404",
    /// "caFile", "verify", "connectTimeoutMs", "responseTimeoutMs", "maxResponseBytes"}` (ARCHITECTURE §4d). A
    /// scenario's needs `upstream`; a route's overrides its scenario's keys and takes no `unmatched`.
    mutating func proxySection(_ value: JSONValue, at path: String, scenarioLevel: Bool) -> ProxyConfig? {
        let errorCount = errors.count
        let known = scenarioLevel ? ScenarioLoader.proxyKeys : ScenarioLoader.proxyKeys.filter { $0 != "unmatched" }
        guard let fields = fields(value, at: path, known: known) else { return nil }
        if !scenarioLevel, fields["unmatched"] != nil {
            report(fields.path("unmatched"), "\"unmatched\" belongs in the scenario's \"proxy\": a route only sees the requests it matches")
        }
        var config = ProxyConfig()
        if let value = scenarioLevel ? required(fields, "upstream") : fields["upstream"],
           let text = nonEmptyString(value, at: fields.path("upstream")) {
            switch UpstreamURL.parse(text) {
            case .success(let url): config.upstream = url
            case .failure(let error): report(fields.path("upstream"), error.description)
            }
        }
        if let value = fields["host"], let text = nonEmptyString(value, at: fields.path("host")) {
            switch text {
            case "upstream": config.host = .upstream
            case "client": config.host = .client
            default:
                if text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
                    report(fields.path("host"), "expected \"upstream\", \"client\" or a host name, found \(ScenarioLoader.quoted(text))")
                } else {
                    config.host = .value(text)
                }
            }
        }
        if scenarioLevel, let value = fields["unmatched"], let text = string(value, at: fields.path("unmatched")) {
            if let parsed = UnmatchedRequests(rawValue: text) {
                config.unmatched = parsed
            } else {
                report(fields.path("unmatched"), "unknown value \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: ["forward", "404"], listName: "expected"))
            }
        }
        if let value = fields["caFile"], let text = nonEmptyString(value, at: fields.path("caFile")) {
            config.caFile = caFilePath(text, at: fields.path("caFile"))
        }
        if let value = fields["verify"] { config.verify = bool(value, at: fields.path("verify")) }
        if config.caFile != nil, config.verify == false {
            report(path, "\"caFile\" with \"verify\": false: a CA file only matters when the certificate is verified")
        }
        if let url = config.upstream, !url.secure {
            for key in ["caFile", "verify"] where fields[key] != nil {
                report(fields.path(key), "\(ScenarioLoader.quoted(key)) applies to an https upstream; \(url) is http")
            }
        }
        config.connectTimeoutMilliseconds = fields["connectTimeoutMs"].flatMap {
            integer($0, at: fields.path("connectTimeoutMs"), in: 1...ScenarioLoader.maxDelayMilliseconds)
        }
        config.responseTimeoutMilliseconds = fields["responseTimeoutMs"].flatMap {
            integer($0, at: fields.path("responseTimeoutMs"), in: 1...ScenarioLoader.maxDelayMilliseconds)
        }
        config.maxResponseBytes = fields["maxResponseBytes"].flatMap {
            integer($0, at: fields.path("maxResponseBytes"), in: 0...ScenarioLoader.maxProxyResponseBytes)
        }
        return errors.count == errorCount ? config : nil
    }

    /// A CA file, relative to the scenario's folder; it must exist and be a regular file.
    private mutating func caFilePath(_ text: String, at path: String) -> String? {
        let full = text.hasPrefix("/") || directory == nil ? text : ScenarioLoader.joinPath(directory!, text)
        switch ScenarioLoader.fileKind(atPath: full) {
        case .failure(let failure):
            report(path, "cannot read the CA file \(ScenarioLoader.quoted(full)): \(failure)")
            return nil
        case .success(.directory):
            report(path, "\(ScenarioLoader.quoted(full)) is a folder, not a PEM file")
            return nil
        case .success(.other):
            return full
        }
    }

    /// A `proxy` step answers with the upstream's response: it takes no status or body of its own, serves no
    /// resource or WebSocket, and its fault must act on that response.
    mutating func checkProxyStep(_ step: ResponseStep, _ fields: ScenarioLoader.Fields) {
        for key in ["status", "resource", "websocket"] + ScenarioLoader.bodyKeys where fields[key] != nil {
            report(fields.path(key), "a proxy step takes no \(ScenarioLoader.quoted(key)): the upstream answers with "
                + "its own status and body (a step's \"headers\", delay, \"chunked\", fault and effects apply to it)")
        }
        if let fault = step.fault, !fault.name.usesResponse {
            report(fields.path("fault"), "fault \(ScenarioLoader.quoted(fault.name.rawValue)) sends none of the "
                + "upstream's response, so forwarding would be for nothing; use a scripted step for it, or "
                + "\"commit-then-reset\" / \"commit-then-hang\" to forward the request and then break the connection")
        }
    }
}
