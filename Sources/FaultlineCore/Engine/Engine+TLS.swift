extension Engine {
    /// How the next TLS handshake goes (ARCHITECTURE §3a), decided from the ClientHello's server name before
    /// the server sends a byte:
    /// 1. the first loaded scenario whose `tls.serverNames` claims the name, else the first whose `tls` section
    ///    names none, plays the next step of its handshake script;
    /// 2. a step that names no certificate serves the catalogue certificate the server name asks for
    ///    (`expired.localhost` → `expired`), else the listener's own.
    /// Deterministic: a script's n-th handshake is the same whatever else happened; `reset` rewinds it.
    package func decideHandshake(serverName: String?, alpnOffered: [String], now: EngineInstant) -> TLSHandshakeDecision {
        var decision = TLSHandshakeDecision(certificate: Self.catalogueCertificate(named: serverName))
        guard let index = scenarios.firstIndex(where: { $0.tls?.claims(serverName) == true })
                ?? scenarios.firstIndex(where: { $0.tls != nil && $0.tls!.serverNames.isEmpty }),
              let section = scenarios[index].tls, !section.handshakes.isEmpty
        else { return decision }
        let served = handshakesServed[index, default: 0]
        handshakesServed[index] = served + 1
        let total = section.handshakes.reduce(0) { $0 + $1.times }
        var position = served
        if position >= total {
            position = section.afterLast == .cycle ? position % total : total - 1
        }
        var stepIndex = 0
        var remaining = position
        while stepIndex < section.handshakes.count - 1, remaining >= section.handshakes[stepIndex].times {
            remaining -= section.handshakes[stepIndex].times
            stepIndex += 1
        }
        let step = section.handshakes[stepIndex]
        if let certificate = step.certificate { decision.certificate = certificate }
        decision.fault = step.fault
        decision.minVersion = step.minVersion
        decision.maxVersion = step.maxVersion
        // A cap below 1.2 means the old versions only: the default minimum (1.2) would leave none.
        if let maximum = step.maxVersion, maximum < .tls1_2, step.minVersion == nil { decision.minVersion = .tls1_0 }
        decision.clientCertificate = step.clientCertificate ?? .none
        decision.resumption = section.resumption
        decision.closeNotify = section.closeNotify
        decision.alpn = section.alpn
        decision.scenario = scenarios[index].name
        decision.step = stepIndex
        return decision
    }

    /// `NAME.localhost` (any letter case), where NAME is a catalogue certificate: that certificate.
    static func catalogueCertificate(named serverName: String?) -> TLSCertificateName? {
        guard let name = serverName?.lowercased(), name.hasSuffix(".localhost") else { return nil }
        return TLSCertificateName(rawValue: String(name.dropLast(".localhost".count)))
    }
}

extension Engine {
    /// The `http2` section of the first loaded scenario that has one: what a new HTTP/2 connection announces.
    package var http2Plan: HTTP2Plan? { scenarios.lazy.compactMap(\.http2).first }
}
