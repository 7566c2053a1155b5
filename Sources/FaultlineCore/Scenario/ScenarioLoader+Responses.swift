extension ScenarioLoader {
    /// The longest delay a step may ask for: ten minutes, longer than any client timeout worth testing.
    package static let maxDelayMilliseconds = 600_000
    /// The largest `file` body: big enough for any fixture, small enough to keep every scenario in memory.
    static let maxFileBodyBytes = 10 * 1024 * 1024
    static let bodyKeys = ["json", "text", "base64", "file"]
    static let stepKeys = [
        "status", "headers", "json", "text", "base64", "file", "delayMs", "delay", "chunked", "fault", "times", "close",
        "effects", "resource", "websocket", "proxy", "date",
    ]
}

extension ScenarioLoader.Reader {
    /// One response step; nil when anything in it was reported.
    mutating func responseStep(_ value: JSONValue, at path: String) -> ResponseStep? {
        let errorCount = errors.count
        guard let fields = fields(value, at: path, known: ScenarioLoader.stepKeys) else {
            return nil
        }
        var step = ResponseStep()

        if let value = fields["status"] {
            step.status = integer(value, at: fields.path("status"), in: 100...599) {
                "\($0) is not an HTTP status (100–599)"
            } ?? step.status
        }

        if let value = fields["headers"] {
            step.headers = headerFields(value, at: fields.path("headers"))
        }

        let bodies = fields.present(ScenarioLoader.bodyKeys)
        if bodies.count > 1 {
            report(path, "a step has at most one body; found \(ScenarioLoader.quotedList(bodies))")
        } else if let kind = bodies.first {
            step.body = body(kind, fields[kind]!, at: fields.path(kind)) ?? .empty
        }

        switch (fields["delayMs"], fields["delay"]) {
        case (.some, .some):
            report(path, "use either \"delayMs\" or \"delay\", not both")
        case (let value?, nil):
            if let milliseconds = integer(
                value, at: fields.path("delayMs"), in: 0...ScenarioLoader.maxDelayMilliseconds
            ) {
                step.delay = .fixed(milliseconds: milliseconds)
            }
        case (nil, let value?):
            step.delay = delay(value, at: fields.path("delay"))
        case (nil, nil):
            break
        }

        if let value = fields["chunked"] {
            step.drip = drip(value, at: fields.path("chunked"))
        }

        if let value = fields["fault"] {
            step.fault = faultSpec(value, at: fields.path("fault"))
        }

        if let value = fields["times"] {
            step.times = integer(value, at: fields.path("times"), in: 1...Int.max) ?? step.times
        }

        if let value = fields["close"] {
            step.closeConnection = bool(value, at: fields.path("close")) ?? false
        }

        if let value = fields["effects"] {
            step.effects = effects(value, at: fields.path("effects"))
        }

        if let value = fields["resource"] {
            // The resource decides status and body; a step adds only timing, headers, a fault and effects.
            for key in ["status", "chunked"] + ScenarioLoader.bodyKeys where fields[key] != nil {
                report(fields.path(key), "a step that serves a resource takes no \(ScenarioLoader.quoted(key)): "
                    + "the resource answers with its own status and body")
            }
            if let reference = resourceReference(value, at: fields.path("resource")) { step.kind = .resource(reference) }
        }

        if let value = fields["websocket"] {
            // The 101 and the session decide everything a response would: a step adds only a delay before the
            // 101, `times` and effects.
            for key in ["status", "chunked", "fault", "resource", "headers"] + ScenarioLoader.bodyKeys where fields[key] != nil {
                report(fields.path(key), "a step that accepts a WebSocket takes no \(ScenarioLoader.quoted(key))"
                    + (key == "headers" ? ": the 101's fields go in \"websocket\".\"headers\"" : ""))
            }
            if let spec = webSocketSpec(value, at: fields.path("websocket")) { step.kind = .websocket(spec) }
        }

        if let value = fields["date"], let date = bool(value, at: fields.path("date")) {
            if !date, step.headers.contains(where: { $0.name.caseInsensitiveEquals("date") }) {
                report(fields.path("date"), "a step with \"date\": false sends no Date; remove the Date header, "
                    + "or the \"date\" key to send that header as written")
            }
            step.date = date
        }

        if let value = fields["proxy"], let forward = bool(value, at: fields.path("proxy")), forward {
            checkProxyStep(step, fields)
            step.kind = .proxy
        }

        return errors.count == errorCount ? step : nil
    }

    /// `{"Name": "value", …}`: response fields in the order written, each name a token and each value free of CR,
    /// LF and NUL.
    mutating func headerFields(_ value: JSONValue, at path: String) -> [(name: String, value: String)] {
        guard let members = namedMembers(value, at: path) else { return [] }
        var fields: [(name: String, value: String)] = []
        for member in members {
            let memberPath = ScenarioLoader.path(path, key: member.key)
            if !ScenarioLoader.isToken(member.key) {
                report(memberPath, "\(ScenarioLoader.quoted(member.key)) is not a valid header name")
            }
            guard let text = string(member.value, at: memberPath) else { continue }
            // CR or LF would end the field early and let the value inject header lines; NUL is forbidden
            // outright (RFC 9110 §5.5).
            if text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) {
                report(memberPath, "a header value must not contain CR, LF or NUL")
                continue
            }
            fields.append((name: member.key, value: text))
        }
        return fields
    }

    /// `"NAME"` or `{"type": "NAME", …parameters}` (see `FaultSpec`).
    mutating func faultSpec(_ value: JSONValue, at path: String) -> FaultSpec? {
        func named(_ name: String, at namePath: String) -> FaultName? {
            if let fault = FaultName(rawValue: name) { return fault }
            let names = FaultName.allCases.map(\.rawValue)
            report(namePath, "unknown fault \(ScenarioLoader.quoted(name))"
                + ScenarioLoader.hint(for: name, among: names, listName: "valid faults are"))
            return nil
        }
        if case .string(let name) = value {
            if name == FaultName.rawFrames.rawValue {
                report(path, "raw-frames needs its bytes: {\"type\": \"raw-frames\", \"base64\": …} or a \"preset\" ("
                    + HTTP2FramePreset.allCases.map(\.rawValue).joined(separator: ", ") + ")")
                return nil
            }
            return named(name, at: path).map { FaultSpec($0) }
        }
        guard case .object = value else {
            report(path, "expected a fault name or an object with \"type\", found \(ScenarioLoader.describe(value))")
            return nil
        }
        let errorCount = errors.count
        let parameters = ["bytes", "after", "variant", "code", "lastStreamId", "graceful", "base64", "preset"]
        guard let fields = fields(value, at: path, known: ["type"] + parameters) else { return nil }
        guard let typeValue = required(fields, "type"), let typeName = string(typeValue, at: fields.path("type")),
              let name = named(typeName, at: fields.path("type"))
        else { return nil }
        var spec = FaultSpec(name)
        let allowed = name.parameters
        for key in parameters where fields[key] != nil && !allowed.contains(key) {
            report(fields.path(key), "\(typeName) takes no \(ScenarioLoader.quoted(key))"
                + (allowed.isEmpty ? "" : "; it takes \(ScenarioLoader.quotedList(allowed))"))
        }
        if let value = fields["bytes"], allowed.contains("bytes") {
            // Bytes a fault makes up (garbage, overlong-body's excess) are made in memory; cut points of a
            // resource's body may be anywhere in it.
            let made = [FaultName.garbage, .overlongBody].contains(name)
            spec.bytes = integer(
                value, at: fields.path("bytes"),
                in: 0...(made ? ScenarioLoader.maxFileBodyBytes : ScenarioLoader.maxGeneratedBytes))
        }
        if let value = fields["after"], allowed.contains("after"), let text = string(value, at: fields.path("after")) {
            if let after = HalfCloseAfter(rawValue: text) {
                spec.after = after
            } else {
                report(fields.path("after"), "unknown value \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: HalfCloseAfter.allCases.map(\.rawValue), listName: "expected"))
            }
        }
        if let value = fields["variant"], allowed.contains("variant"),
           let text = string(value, at: fields.path("variant")) {
            if let variant = ChunkBreak(rawValue: text) {
                spec.chunkBreak = variant
            } else {
                report(fields.path("variant"), "unknown variant \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: ChunkBreak.allCases.map(\.rawValue), listName: "expected"))
            }
        }
        http2Parameters(fields, name: name, into: &spec)
        return errors.count == errorCount ? spec : nil
    }

    /// `code`, `lastStreamId`, `graceful`, `base64` and `preset`: the HTTP/2 faults' parameters.
    private mutating func http2Parameters(_ fields: ScenarioLoader.Fields, name: FaultName, into spec: inout FaultSpec) {
        if let value = fields["code"], name == .rstStream || name == .goaway,
           let text = string(value, at: fields.path("code")) {
            if let code = HTTP2ErrorCode(name: text) {
                spec.code = code
            } else {
                report(fields.path("code"), "unknown HTTP/2 error code \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text.uppercased(), among: HTTP2ErrorCode.allCases.map(\.name),
                                          listName: "RFC 9113 §7 names"))
            }
        }
        if let value = fields["lastStreamId"], name == .goaway {
            switch value {
            case .string("current"): spec.lastStream = .current
            case .string("previous"): spec.lastStream = .previous
            default:
                if let id = integer(value, at: fields.path("lastStreamId"), in: 0...0x7fff_ffff) {
                    spec.lastStream = .stream(id)
                }
            }
        }
        if let value = fields["graceful"], name == .goaway, let flag = bool(value, at: fields.path("graceful")) {
            spec.graceful = flag
        }
        if name == .rawFrames {
            let encoded: JSONValue? = fields["base64"], preset: JSONValue? = fields["preset"]
            switch (encoded, preset) {
            case (let encoded?, nil):
                guard let text = string(encoded, at: fields.path("base64")) else { break }
                switch ScenarioLoader.decodeBase64(text) {
                case .success(let bytes) where !bytes.isEmpty: spec.rawBytes = bytes
                case .success: report(fields.path("base64"), "must not be empty")
                case .failure(let problem):
                    report(fields.path("base64"), "not valid base64 (standard alphabet, with = padding): \(problem.reason)")
                }
            case (nil, let preset?):
                guard let text = string(preset, at: fields.path("preset")) else { break }
                if let known = HTTP2FramePreset(rawValue: text) {
                    spec.frames = known.frames
                } else {
                    report(fields.path("preset"), "unknown preset \(ScenarioLoader.quoted(text))"
                        + ScenarioLoader.hint(for: text, among: HTTP2FramePreset.allCases.map(\.rawValue), listName: "expected"))
                }
            case (nil, nil):
                report(fields.path("type"), "raw-frames needs \"base64\" (the bytes) or \"preset\"")
            case (.some, .some):
                report(fields.path("preset"), "give \"base64\" or \"preset\", not both")
            }
        }
    }

    mutating func body(
        _ kind: String, _ value: JSONValue, at path: String, fileLimit: Int = ScenarioLoader.maxFileBodyBytes
    ) -> StepBody? {
        switch kind {
        case "json":
            return .json(value)
        case "text":
            return string(value, at: path).map { .text($0) }
        case "base64":
            guard let text = string(value, at: path) else { return nil }
            switch ScenarioLoader.decodeBase64(text) {
            case .success(let bytes):
                return .bytes(bytes)
            case .failure(let problem):
                report(path, "not valid base64 (standard alphabet, with = padding): \(problem.reason)")
                return nil
            }
        default:
            guard let relative = string(value, at: path) else { return nil }
            return fileBody(relative, at: path, limit: fileLimit)
        }
    }

    /// The bytes of `relative` inside the scenario folder. The path is resolved the way the OS will open it
    /// (symlinks and `..` included) and must stay inside the folder, so a scenario cannot serve arbitrary files.
    private mutating func fileBody(_ relative: String, at path: String, limit: Int) -> StepBody? {
        let quotedPath = ScenarioLoader.quoted(relative)
        guard let directory else {
            report(path, "file bodies need a scenario folder; this scenario was loaded without one")
            return nil
        }
        guard !relative.isEmpty else {
            report(path, "must not be empty")
            return nil
        }
        guard !relative.hasPrefix("/") else {
            report(path, "\(quotedPath) must be a path relative to the scenario folder")
            return nil
        }
        // First by the text alone, so "../x" is reported as escaping even when it does not exist.
        var depth = 0
        for component in relative.split(separator: "/") where component != "." {
            depth += component == ".." ? -1 : 1
            if depth < 0 {
                report(path, "\(quotedPath) is outside the scenario folder")
                return nil
            }
        }
        let folder: String
        switch ScenarioLoader.canonicalPath(directory) {
        case .success(let resolved):
            folder = resolved
        case .failure(let failure):
            report(path, "cannot open the scenario folder \(ScenarioLoader.quoted(directory)): \(failure)")
            return nil
        }
        let target: String
        switch ScenarioLoader.canonicalPath(ScenarioLoader.joinPath(directory, relative)) {
        case .success(let resolved):
            target = resolved
        case .failure(let failure):
            report(path, "cannot read \(quotedPath) in the scenario folder: \(failure)")
            return nil
        }
        // Then by where it really is, which catches symlinks that lead out.
        let folderPrefix = folder.hasSuffix("/") ? folder : folder + "/"
        guard target.hasPrefix(folderPrefix) else {
            let resolved = ScenarioLoader.quoted(target)
            report(path, "\(quotedPath) is outside the scenario folder (it resolves to \(resolved))")
            return nil
        }
        switch ScenarioLoader.readFile(atPath: target, limit: limit) {
        case .success(let bytes):
            return .file(path: relative, bytes: bytes)
        case .failure(let failure):
            report(path, "cannot read \(quotedPath) in the scenario folder: \(failure)")
            return nil
        }
    }

    /// `{"uniform": [a, b]}` or `{"lognormal": {"medianMs": m, "sigma": s}}`.
    private mutating func delay(_ value: JSONValue, at path: String) -> DelaySpec? {
        let kinds = ["uniform", "lognormal"]
        guard let options = fields(value, at: path, known: kinds), let kind = exactlyOne(of: kinds, in: options) else {
            return nil
        }
        let kindPath = options.path(kind)
        if kind == "uniform" {
            guard let bounds = array(options[kind]!, at: kindPath) else { return nil }
            guard bounds.count == 2 else {
                let plural = bounds.count == 1 ? "" : "s"
                report(kindPath, "expected two integers [min, max], found \(bounds.count) element\(plural)")
                return nil
            }
            let range = 0...ScenarioLoader.maxDelayMilliseconds
            let low = integer(bounds[0], at: "\(kindPath)[0]", in: range)
            let high = integer(bounds[1], at: "\(kindPath)[1]", in: range)
            guard let low, let high else { return nil }
            guard low <= high else {
                report(kindPath, "the minimum \(low) is greater than the maximum \(high)")
                return nil
            }
            return .uniform(min: low, max: high)
        }
        guard let parameters = fields(options[kind]!, at: kindPath, known: ["medianMs", "sigma"]) else { return nil }
        let errorCount = errors.count
        let median = required(parameters, "medianMs").flatMap { number($0, at: parameters.path("medianMs")) }
        let sigma = required(parameters, "sigma").flatMap { number($0, at: parameters.path("sigma")) }
        if let median, median <= 0 {
            report(parameters.path("medianMs"), "must be greater than 0, found \(ScenarioLoader.numberText(median))")
        }
        if let sigma, sigma < 0 {
            report(parameters.path("sigma"), "must be 0 or more, found \(ScenarioLoader.numberText(sigma))")
        }
        guard errors.count == errorCount, let median, let sigma else { return nil }
        return .logNormal(medianMilliseconds: median, sigma: sigma)
    }

    /// `{"size": bytes ≥ 1, "intervalMs": ms ≥ 0}`.
    private mutating func drip(_ value: JSONValue, at path: String) -> DripSpec? {
        guard let fields = fields(value, at: path, known: ["size", "intervalMs"]) else { return nil }
        let size = required(fields, "size").flatMap { integer($0, at: fields.path("size"), in: 1...Int.max) }
        let interval = required(fields, "intervalMs").flatMap {
            integer($0, at: fields.path("intervalMs"), in: 0...ScenarioLoader.maxDelayMilliseconds)
        }
        guard let size, let interval else { return nil }
        return DripSpec(size: size, intervalMilliseconds: interval)
    }
}

// MARK: - Base64

extension ScenarioLoader {
    /// Why a base64 text did not decode.
    struct Base64Problem: Error {
        var reason: String
    }

    /// Decodes RFC 4648 §4 base64: the standard alphabet, length a multiple of 4, `=` padding only at the end.
    static func decodeBase64(_ text: String) -> Result<[UInt8], Base64Problem> {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else {
            return .failure(Base64Problem(reason: "its length \(input.count) is not a multiple of 4"))
        }
        let padding = input.reversed().prefix(while: { $0 == UInt8(ascii: "=") }).count
        guard padding <= 2 else {
            return .failure(Base64Problem(reason: "it ends with \(padding) \"=\"; at most 2 are allowed"))
        }
        var output: [UInt8] = []
        output.reserveCapacity(input.count / 4 * 3)
        var accumulator: UInt32 = 0
        for (offset, byte) in input[..<(input.count - padding)].enumerated() {
            guard let sextet = base64Value(byte) else {
                let shown = byte >= 0x21 && byte < 0x7F ? "\"\(Character(Unicode.Scalar(byte)))\"" : "byte \(byte)"
                return .failure(Base64Problem(reason: "\(shown) at offset \(offset) is not in the base64 alphabet"))
            }
            accumulator = accumulator << 6 | UInt32(sextet)
            if offset % 4 == 3 {
                output.append(UInt8(truncatingIfNeeded: accumulator >> 16))
                output.append(UInt8(truncatingIfNeeded: accumulator >> 8))
                output.append(UInt8(truncatingIfNeeded: accumulator))
                accumulator = 0
            }
        }
        switch padding {
        case 1:
            output.append(UInt8(truncatingIfNeeded: accumulator >> 10))
            output.append(UInt8(truncatingIfNeeded: accumulator >> 2))
        case 2:
            output.append(UInt8(truncatingIfNeeded: accumulator >> 4))
        default:
            break
        }
        return .success(output)
    }

    private static func base64Value(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }

    /// A number as its shortest text, for messages.
    static func numberText(_ value: Double) -> String {
        JSONValue.double(value).serialized()
    }
}
