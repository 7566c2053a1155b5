extension ScenarioLoader.Reader {
    /// A step's `"websocket"`: the upgrade's options and the session script (ARCHITECTURE §4c).
    mutating func webSocketSpec(_ value: JSONValue, at path: String) -> WebSocketSpec? {
        let errorCount = errors.count
        let keys = ["subprotocols", "headers", "script", "maxMessageBytes", "ignorePings", "upgradeFault"]
        guard let fields = fields(value, at: path, known: keys) else { return nil }
        var spec = WebSocketSpec()
        if let value = fields["subprotocols"], let elements = array(value, at: fields.path("subprotocols")) {
            for (index, element) in elements.enumerated() {
                let elementPath = "\(fields.path("subprotocols"))[\(index)]"
                guard let name = nonEmptyString(element, at: elementPath) else { continue }
                if !ScenarioLoader.isToken(name) { report(elementPath, "\(ScenarioLoader.quoted(name)) is not a token (RFC 6455 §4.1)") }
                spec.subprotocols.append(name)
            }
        }
        if let value = fields["headers"] { spec.headers = headerFields(value, at: fields.path("headers")) }
        if let value = fields["maxMessageBytes"] {
            spec.maxMessageBytes = integer(value, at: fields.path("maxMessageBytes"), in: 1...(64 << 20)) ?? spec.maxMessageBytes
        }
        if let value = fields["ignorePings"] { spec.ignorePings = bool(value, at: fields.path("ignorePings")) ?? false }
        if let value = fields["upgradeFault"], let text = string(value, at: fields.path("upgradeFault")) {
            if let fault = WebSocketUpgradeFault(rawValue: text) {
                spec.upgradeFault = fault
            } else {
                report(fields.path("upgradeFault"), "unknown upgrade fault \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: WebSocketUpgradeFault.allCases.map(\.rawValue), listName: "expected"))
            }
        }
        if let value = fields["script"], let elements = array(value, at: fields.path("script")) {
            for (index, element) in elements.enumerated() {
                if let step = webSocketStep(element, at: "\(fields.path("script"))[\(index)]") { spec.script.append(step) }
            }
        }
        return errors.count == errorCount ? spec : nil
    }

    private mutating func webSocketStep(_ value: JSONValue, at path: String) -> WebSocketStep? {
        let kinds = ["text", "json", "base64", "generated", "waitMs", "receive", "echo", "ping", "close", "fault"]
        guard let fields = fields(value, at: path, known: kinds + ["everyMs", "times", "timeoutMs"]),
              let kind = exactlyOne(of: kinds, in: fields) else { return nil }
        let kindPath = fields.path(kind)
        let value = fields[kind]!
        for key in ["everyMs", "times"] where fields[key] != nil && !["text", "json", "base64", "generated"].contains(kind) {
            report(fields.path(key), "only a message step (text, json, base64, generated) repeats")
        }
        if fields["timeoutMs"] != nil && kind != "receive" { report(fields.path("timeoutMs"), "only a receive step has a timeout") }
        switch kind {
        case "text", "json", "base64", "generated":
            let payload: WebSocketPayload?
            switch kind {
            case "text": payload = string(value, at: kindPath).map { .text($0) }
            case "json":
                var bytes: [UInt8] = []
                value.serialize(into: &bytes)
                payload = .text(String(decoding: bytes, as: UTF8.self))
            case "base64":
                payload = string(value, at: kindPath).flatMap { text in
                    guard let bytes = Base64.decode(text) else {
                        report(kindPath, "not valid base64 (standard alphabet, with = padding)")
                        return nil
                    }
                    return .binary(bytes)
                }
            default:
                var size: Int?
                if let sizeFields = self.fields(value, at: kindPath, known: ["size"]), let sizeValue = required(sizeFields, "size") {
                    size = integer(sizeValue, at: sizeFields.path("size"), in: 0...(256 << 20))
                }
                payload = size.map { WebSocketPayload.generated(size: $0) }
            }
            let every = fields["everyMs"].flatMap { integer($0, at: fields.path("everyMs"), in: 1...ScenarioLoader.maxDelayMilliseconds) }
            let times = fields["times"].flatMap { integer($0, at: fields.path("times"), in: 1...1_000_000) } ?? 1
            if times > 1 && every == nil && fields["everyMs"] == nil {
                report(fields.path("times"), "repeating a message needs \"everyMs\" (the interval)")
            }
            return payload.map { .send($0, everyMilliseconds: every, times: times) }
        case "waitMs":
            return integer(value, at: kindPath, in: 0...ScenarioLoader.maxDelayMilliseconds).map { .wait(milliseconds: $0) }
        case "receive":
            let timeout = fields["timeoutMs"].flatMap { integer($0, at: fields.path("timeoutMs"), in: 1...ScenarioLoader.maxDelayMilliseconds) }
            if value == .string("any") { return .receive(nil, timeoutMilliseconds: timeout) }
            return bodyMatcher(value, at: kindPath).map { .receive($0, timeoutMilliseconds: timeout) }
        case "echo":
            switch value {
            case .bool(true): return .echo(count: nil)
            default: return integer(value, at: kindPath, in: 1...1_000_000).map { .echo(count: $0) }
            }
        case "ping":
            return string(value, at: kindPath).flatMap { text in
                guard text.utf8.count <= 125 else {
                    report(kindPath, "a ping's payload is at most 125 bytes (RFC 6455 §5.5)")
                    return nil
                }
                return .ping(Array(text.utf8))
            }
        case "close":
            return closeFields(value, at: kindPath).map { .close(code: $0.code, reason: $0.reason) }
        default:
            return webSocketFault(value, at: kindPath).map { .fault($0) }
        }
    }

    /// `{"code": 1001, "reason": "…"}` (both optional for `close`; a close without a code sends an empty frame).
    private mutating func closeFields(_ value: JSONValue, at path: String) -> (code: Int?, reason: String)? {
        guard let fields = fields(value, at: path, known: ["code", "reason"]) else { return nil }
        let code = fields["code"].flatMap { closeCode($0, at: fields.path("code")) }
        let reason = fields["reason"].flatMap { closeReason($0, at: fields.path("reason")) } ?? ""
        if code == nil && fields["code"] == nil && !reason.isEmpty { report(path, "a close reason needs a code") }
        return (code, reason)
    }

    /// A close code an endpoint may send (RFC 6455 §7.4).
    private mutating func closeCode(_ value: JSONValue, at path: String) -> Int? {
        guard let number = integer(value, at: path, in: 1000...4999) else { return nil }
        guard WebSocketFrameParser.isValidCloseCode(number) else {
            report(path, "\(number) may not be sent in a close frame (RFC 6455 §7.4: 1000–1003, 1007–1014, 3000–4999)")
            return nil
        }
        return number
    }

    /// A close reason: text of at most 123 bytes (RFC 6455 §5.5).
    private mutating func closeReason(_ value: JSONValue, at path: String) -> String? {
        guard let reason = string(value, at: path) else { return nil }
        if reason.utf8.count > 123 { report(path, "a close reason is at most 123 bytes (RFC 6455 §5.5)") }
        return reason
    }

    private mutating func webSocketFault(_ value: JSONValue, at path: String) -> WebSocketFault? {
        let names = ["drop", "drop-fin", "close-keep-open", "truncated-frame", "fragmented", "masked-frame", "silence"]
        var name: String?
        var fields: ScenarioLoader.Fields?
        if case .string(let text) = value {
            name = text
        } else if let parsed = self.fields(value, at: path, known: ["type", "code", "reason", "bytes", "text", "fragments", "gapMs"]) {
            fields = parsed
            name = required(parsed, "type").flatMap { string($0, at: parsed.path("type")) }
        }
        guard let name else { return nil }
        func int(_ key: String, _ range: ClosedRange<Int>, _ fallback: Int) -> Int {
            guard let fields, let value = fields[key] else { return fallback }
            return integer(value, at: fields.path(key), in: range) ?? fallback
        }
        switch name {
        case "drop": return .drop(reset: true)
        case "drop-fin": return .drop(reset: false)
        case "close-keep-open":
            // The close frame is well formed: only its answer is missing.
            var code = 1001, reason = ""
            if let fields, let value = fields["code"] { code = closeCode(value, at: fields.path("code")) ?? code }
            if let fields, let value = fields["reason"] { reason = closeReason(value, at: fields.path("reason")) ?? reason }
            return .closeKeepOpen(code: code, reason: reason)
        case "truncated-frame": return .truncatedFrame(bytes: int("bytes", 2...(64 << 20), 1024))
        case "fragmented":
            var text = "a message in fragments"
            if let fields, let value = fields["text"] { text = string(value, at: fields.path("text")) ?? text }
            return .fragmented(text: text, fragments: int("fragments", 2...1000, 3), gapMilliseconds: int("gapMs", 0...ScenarioLoader.maxDelayMilliseconds, 1000))
        case "masked-frame": return .maskedFrame
        case "silence": return .silence
        default:
            report(fields.map { $0.path("type") } ?? path, "unknown WebSocket fault \(ScenarioLoader.quoted(name))"
                + ScenarioLoader.hint(for: name, among: names, listName: "expected"))
            return nil
        }
    }
}
