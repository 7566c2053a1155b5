extension ScenarioLoader.Reader {
    /// A scenario's `tls` section: how handshakes on the TLS port go (ARCHITECTURE §3a).
    mutating func tlsSection(_ value: JSONValue, at path: String) -> TLSSection? {
        guard let fields = fields(
            value, at: path,
            known: ["serverNames", "certificate", "clientCertificate", "handshakes", "afterLast", "resumption",
                    "closeNotify", "alpn"]
        ) else { return nil }
        let errorCount = errors.count
        var section = TLSSection()
        if let value = fields["serverNames"], let names = array(value, at: fields.path("serverNames")) {
            for (index, name) in names.enumerated() {
                let namePath = "\(fields.path("serverNames"))[\(index)]"
                guard let text = nonEmptyString(name, at: namePath) else { continue }
                let bare = text.hasPrefix("*.") ? String(text.dropFirst(2)) : text
                if bare.isEmpty || bare.contains("*") || bare.contains(where: { $0 == " " || $0 == "/" || $0 == ":" }) {
                    report(namePath, "expected a host name or *.suffix, found \(ScenarioLoader.quoted(text))")
                    continue
                }
                section.serverNames.append(text.lowercased())
            }
        }
        var defaults = TLSHandshakeStep()
        if let value = fields["certificate"] { defaults.certificate = certificateName(value, at: fields.path("certificate")) }
        if let value = fields["clientCertificate"] {
            defaults.clientCertificate = clientCertificateMode(value, at: fields.path("clientCertificate"))
        }
        if let value = fields["handshakes"], let elements = array(value, at: fields.path("handshakes")) {
            if elements.isEmpty { report(fields.path("handshakes"), "needs at least one handshake step") }
            section.handshakes = []
            for (index, element) in elements.enumerated() {
                if let step = handshakeStep(element, at: "\(fields.path("handshakes"))[\(index)]", defaults: defaults) {
                    section.handshakes.append(step)
                }
            }
        } else {
            section.handshakes = [defaults]
        }
        if let value = fields["afterLast"], let text = string(value, at: fields.path("afterLast")) {
            switch text {
            case AfterLast.repeatLast.rawValue: section.afterLast = .repeatLast
            case AfterLast.cycle.rawValue: section.afterLast = .cycle
            default:
                report(fields.path("afterLast"), "expected \"repeat-last\" or \"cycle\", found \(ScenarioLoader.quoted(text))")
            }
        }
        if let value = fields["resumption"], let flag = bool(value, at: fields.path("resumption")) {
            section.resumption = flag
        }
        if let value = fields["closeNotify"], let flag = bool(value, at: fields.path("closeNotify")) {
            section.closeNotify = flag
        }
        if let value = fields["alpn"], let names = array(value, at: fields.path("alpn")) {
            if names.isEmpty { report(fields.path("alpn"), "needs at least one protocol (\"h2\", \"http/1.1\")") }
            var alpn: [String] = []
            for (index, name) in names.enumerated() {
                let namePath = "\(fields.path("alpn"))[\(index)]"
                guard let text = string(name, at: namePath) else { continue }
                if text == "h2" || text == "http/1.1" {
                    if alpn.contains(text) { report(namePath, "\(ScenarioLoader.quoted(text)) is listed twice") }
                    alpn.append(text)
                } else {
                    report(namePath, "unknown protocol \(ScenarioLoader.quoted(text))"
                        + ScenarioLoader.hint(for: text, among: ["h2", "http/1.1"], listName: "expected"))
                }
            }
            section.alpn = alpn
        }
        return errors.count == errorCount ? section : nil
    }

    private mutating func handshakeStep(_ value: JSONValue, at path: String, defaults: TLSHandshakeStep) -> TLSHandshakeStep? {
        guard let fields = fields(
            value, at: path, known: ["certificate", "fault", "minVersion", "maxVersion", "clientCertificate", "times"]
        ) else { return nil }
        var step = defaults
        if let value = fields["certificate"] { step.certificate = certificateName(value, at: fields.path("certificate")) }
        if let value = fields["fault"] { step.fault = handshakeFault(value, at: fields.path("fault")) }
        if let value = fields["minVersion"] { step.minVersion = tlsVersion(value, at: fields.path("minVersion")) }
        if let value = fields["maxVersion"] { step.maxVersion = tlsVersion(value, at: fields.path("maxVersion")) }
        if let minimum = step.minVersion, let maximum = step.maxVersion, minimum > maximum {
            report(path, "minVersion \(minimum.rawValue) is above maxVersion \(maximum.rawValue)")
        }
        if let value = fields["clientCertificate"] {
            step.clientCertificate = clientCertificateMode(value, at: fields.path("clientCertificate"))
        }
        if let value = fields["times"], let times = integer(value, at: fields.path("times"), in: 1...Int(Int32.max)) {
            step.times = times
        }
        return step
    }

    private mutating func certificateName(_ value: JSONValue, at path: String) -> TLSCertificateName? {
        guard let text = string(value, at: path) else { return nil }
        guard let name = TLSCertificateName(rawValue: text) else {
            report(path, "unknown certificate \(ScenarioLoader.quoted(text))"
                + ScenarioLoader.hint(for: text, among: TLSCertificateName.allCases.map(\.rawValue)))
            return nil
        }
        return name
    }

    private mutating func clientCertificateMode(_ value: JSONValue, at path: String) -> ClientCertificateMode? {
        guard let text = string(value, at: path) else { return nil }
        guard let mode = ClientCertificateMode(rawValue: text) else {
            report(path, "expected \"none\", \"optional\" or \"required\", found \(ScenarioLoader.quoted(text))")
            return nil
        }
        return mode
    }

    private mutating func tlsVersion(_ value: JSONValue, at path: String) -> TLSVersion? {
        guard let text = string(value, at: path) else { return nil }
        guard let version = TLSVersion(rawValue: text) else {
            report(path, "expected \"1.0\", \"1.1\", \"1.2\" or \"1.3\", found \(ScenarioLoader.quoted(text))")
            return nil
        }
        return version
    }

    /// `"handshake-hang"`, `"handshake-reset"`, `{"type": "alert", "alert": NAME}`,
    /// `{"type": "slow-handshake", "size": N, "intervalMs": N}`.
    private mutating func handshakeFault(_ value: JSONValue, at path: String) -> TLSHandshakeFault? {
        let names = ["handshake-hang", "handshake-reset", "alert", "slow-handshake"]
        var fields: ScenarioLoader.Fields?
        let type: String
        if case .string(let text) = value {
            type = text
        } else {
            fields = self.fields(value, at: path, known: ["type", "alert", "size", "intervalMs"])
            guard let fields, let typeValue = required(fields, "type"),
                  let text = string(typeValue, at: fields.path("type")) else { return nil }
            type = text
        }
        switch type {
        case "handshake-hang": return .hang
        case "handshake-reset": return .reset
        case "alert":
            guard let fields else {
                report(path, "an alert names its alert: {\"type\": \"alert\", \"alert\": \"handshake_failure\"}")
                return nil
            }
            guard let value = required(fields, "alert"), let text = string(value, at: fields.path("alert")) else {
                return nil
            }
            guard let alert = TLSAlert(rawValue: text) else {
                report(fields.path("alert"), "unknown alert \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: TLSAlert.allCases.map(\.rawValue)))
                return nil
            }
            return .alert(alert)
        case "slow-handshake":
            let size = fields?["size"].flatMap { integer($0, at: fields!.path("size"), in: 1...65_536) } ?? 64
            let interval = fields?["intervalMs"].flatMap {
                integer($0, at: fields!.path("intervalMs"), in: 0...600_000)
            } ?? 100
            return .slow(DripSpec(size: size, intervalMilliseconds: interval))
        default:
            report(path, "unknown handshake fault \(ScenarioLoader.quoted(type))" + ScenarioLoader.hint(for: type, among: names))
            return nil
        }
    }
}
