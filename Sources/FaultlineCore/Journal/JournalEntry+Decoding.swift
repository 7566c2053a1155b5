extension JournalEntry {
    /// Reads an entry back from the admin API's JSON (`JournalEntry.json()`), for clients of a server in
    /// another process. Times come back at millisecond precision; nil when the value is not an entry.
    package init?(json: JSONValue) {
        func int(_ value: JSONValue?) -> Int? { if case .number(let text)? = value { return Int(text) }; return nil }
        func double(_ value: JSONValue?) -> Double? { if case .number(let text)? = value { return Double(text) }; return nil }
        func string(_ value: JSONValue?) -> String? { if case .string(let text)? = value { return text }; return nil }
        guard let sequence = int(json["sequence"]) else { return nil }
        let connection = json["connection"]
        var head: HTTPRequestHead?
        if let method = string(json["method"]), let target = string(json["target"]) {
            var headers = HTTPHeaders()
            if case .array(let pairs)? = json["headers"] {
                for pair in pairs {
                    if case .array(let parts) = pair, parts.count == 2, let name = string(parts[0]), let value = string(parts[1]) {
                        headers.append(name: name, value: value)
                    }
                }
            }
            let version: HTTPVersion = switch string(json["httpVersion"]) {
            case "HTTP/1.0": .http1_0
            case "HTTP/2": .http2
            default: .http1_1
            }
            head = HTTPRequestHead(method: method, target: target, version: version, headers: headers)
        }
        var body: [UInt8] = []
        if let text = string(json["body"]) {
            body = string(json["bodyEncoding"]) == "base64" ? (Base64.decode(text) ?? []) : Array(text.utf8)
        }
        self.init(
            sequence: sequence, receivedAtWall: 0,
            receivedAtMonotonicNanos: UInt64(max(0, (double(json["receivedAtMonotonicMs"]) ?? 0) * 1_000_000)),
            connectionID: int(connection?["id"]) ?? 0, indexOnConnection: int(connection?["requestIndex"]) ?? 0,
            clientAddress: string(connection?["client"]) ?? "", head: head,
            rawRequestLine: head == nil ? string(json["requestLine"]) : nil, body: body,
            bodySize: int(json["bodySize"]) ?? body.count, malformed: string(json["error"]))
        scenario = string(json["scenario"])
        scenarioVersion = int(json["scenarioVersion"])
        if let record = json["resource"], record != .null { resource = ResourceRecord(json: record) }
        if let record = json["proxy"], record != .null { proxy = ProxyRecord(json: record) }
        if let record = json["websocket"], record != .null {
            websocket = WebSocketRecord(json: record, start: receivedAtMonotonicNanos)
        }
        if let record = json["network"], record != .null { network = NetworkRecord(json: record) }
        if let record = json["clientGoaway"] { clientGoaway = HTTP2ClientGoaway(json: record) }
        if let record = json["clientReset"] { clientReset = HTTP2ClientReset(json: record) }
        route = string(json["route"]).map { DecisionSource(journalText: $0, scenario: scenario, resource: resource?.id) }
        answeredBy = string(json["answeredBy"]).flatMap(PolicyAnswer.init(journalText:))
        step = int(json["step"])
        if case .array(let items)? = json["notes"] {
            notes = items.compactMap(string).map { [route] in JournalNote(journalText: $0, source: route) }
        }
        let response = json["response"]
        status = int(response?["status"])
        fault = string(response?["fault"])
        chaos = response?["chaos"] == .bool(true)
        bytesWritten = int(response?["bytesWritten"]) ?? 0
        outcome = string(response?["outcome"]).flatMap(ExchangeOutcome.init(rawValue:)) ?? .pending
        policyClose = string(response?["connectionClosedAfter"]).flatMap(PolicyClose.init(rawValue:))
        if let duration = double(response?["durationMs"]) {
            finishedAtMonotonicNanos = receivedAtMonotonicNanos + UInt64(max(0, duration * 1_000_000))
        }
        isConnectionEntry = string(json["kind"]) == "connection"
        if let tls = json["tls"], tls != .null { self.tls = TLSSummary(json: tls) }
        if let name = string(json["protocol"]), name == "h2" || name == "h2c" { exchangeProtocol = .http2 }
        stream = int(json["stream"])
        if case .object? = json["http2"], let summary = json["http2"] {
            var decoded = HTTP2ConnectionSummary()
            decoded.streams = int(summary["streams"]) ?? 0
            decoded.pingsSent = int(summary["pingsSent"]) ?? 0
            if case .array(let trips)? = summary["pingRoundTripsMs"] { decoded.pingRoundTripsMilliseconds = trips.compactMap(double) }
            decoded.pingsReceived = int(summary["pingsReceived"]) ?? 0
            decoded.pingsAcknowledged = summary["pingsAcknowledged"] != .bool(false)
            http2 = decoded
        }
    }
}

extension TLSSummary {
    /// Reads a summary back from the journal's JSON (`json()`).
    package init(json: JSONValue) {
        func string(_ value: JSONValue?) -> String? { if case .string(let text)? = value { return text }; return nil }
        self.init()
        version = string(json["version"])
        cipher = string(json["cipher"])
        serverName = string(json["serverName"])
        if case .array(let items)? = json["alpnOffered"] { alpnOffered = items.compactMap { string($0) } }
        alpn = string(json["alpn"])
        clientCertificate = string(json["clientCertificate"])
        certificate = string(json["certificate"])
        resumed = json["resumed"] == .bool(true)
        handshake = string(json["handshake"]).flatMap(TLSHandshakeEnd.init(rawValue:)) ?? .pending
        alertSent = string(json["alertSent"])
        alertReceived = string(json["alertReceived"])
        error = string(json["error"])
        if case .number(let text)? = json["handshakeMs"] { handshakeMilliseconds = Double(text) }
        fault = string(json["fault"])
        scenario = string(json["scenario"])
        if case .number(let text)? = json["step"] { step = Int(text) }
    }
}

extension Base64 {
    /// Decodes standard base64 with padding; nil when malformed.
    package static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for byte in text.utf8 where byte != UInt8(ascii: "=") {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(byte - 65)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(byte - 71)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(byte + 4)
            case UInt8(ascii: "+"): values.append(62)
            case UInt8(ascii: "/"): values.append(63)
            default: return nil
            }
        }
        var out: [UInt8] = []
        var index = 0
        while index + 1 < values.count {
            let chunk = values[index..<min(index + 4, values.count)]
            let a = chunk[chunk.startIndex], b = chunk[chunk.startIndex + 1]
            out.append(a << 2 | b >> 4)
            if chunk.count > 2 { out.append(b << 4 | chunk[chunk.startIndex + 2] >> 2) }
            if chunk.count > 3 { out.append(chunk[chunk.startIndex + 2] << 6 | chunk[chunk.startIndex + 3]) }
            index += 4
        }
        return out
    }
}
