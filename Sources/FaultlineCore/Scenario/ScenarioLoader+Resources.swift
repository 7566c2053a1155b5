extension ScenarioLoader {
    /// The largest `file` body of a resource: a download fixture may be large; it is read once and shared.
    static let maxResourceFileBytes = 256 * 1024 * 1024
    /// The largest generated body (it costs no memory: any size a test can wait for).
    static let maxGeneratedBytes = 1 << 40
    /// Faults that rewrite a body's bytes copy the whole body per request: refused on larger resources.
    static let maxCopiedResourceBytes = 16 * 1024 * 1024
    static let resourceKeys = [
        "id", "path", "json", "text", "base64", "file", "generated", "contentType", "etag", "lastModified",
        "cacheControl", "expiresAfterSeconds", "vary", "methods", "requireConditional", "deviations",
    ]
}

extension ScenarioLoader.Reader {
    /// `resources`: a list of resource objects (ARCHITECTURE §4b).
    mutating func resourceSection(_ value: JSONValue, at path: String) -> [ResourceSpec] {
        guard let elements = array(value, at: path) else { return [] }
        var specs: [ResourceSpec] = []
        var firstByID: [String: Int] = [:]
        for (index, element) in elements.enumerated() {
            let elementPath = "\(path)[\(index)]"
            guard let spec = resource(element, at: elementPath) else { continue }
            if let first = firstByID[spec.id] {
                report("\(elementPath).id", "duplicate resource id \(ScenarioLoader.quoted(spec.id)); \(path)[\(first)] has it too")
                continue
            }
            firstByID[spec.id] = index
            specs.append(spec)
        }
        return specs
    }

    private mutating func resource(_ value: JSONValue, at path: String) -> ResourceSpec? {
        let errorCount = errors.count
        guard let fields = fields(value, at: path, known: ScenarioLoader.resourceKeys) else { return nil }
        let id = required(fields, "id").flatMap { nonEmptyString($0, at: fields.path("id")) }
        let pattern = required(fields, "path").flatMap { value in
            string(value, at: fields.path("path")).flatMap { pathPattern($0, isPrefix: false, at: fields.path("path")) }
        }
        var body = ResourceBody.absent
        var contentType = "application/octet-stream"
        let kinds = fields.present(ScenarioLoader.bodyKeys + ["generated"])
        if kinds.count > 1 {
            report(path, "a resource has at most one body; found \(ScenarioLoader.quotedList(kinds))")
        } else if let kind = kinds.first {
            let kindPath = fields.path(kind)
            if kind == "generated" {
                body = generatedBody(fields[kind]!, at: kindPath).map { .generated(size: $0) } ?? .absent
            } else {
                switch self.body(kind, fields[kind]!, at: kindPath, fileLimit: ScenarioLoader.maxResourceFileBytes) {
                case .json(let json)?:
                    var bytes: [UInt8] = []
                    json.serialize(into: &bytes)
                    body = .bytes(bytes)
                    contentType = "application/json"
                case .text(let text)?:
                    body = .bytes(Array(text.utf8))
                    contentType = "text/plain; charset=utf-8"
                case .bytes(let bytes)?, .file(_, let bytes)?:
                    body = .bytes(bytes)
                default:
                    break
                }
            }
        }
        guard let id, let pattern else { return nil }
        var spec = ResourceSpec(id: id, path: pattern, body: body, contentType: contentType)
        if let value = fields["contentType"], let text = nonEmptyString(value, at: fields.path("contentType")) {
            spec.contentType = text
        }
        if let value = fields["etag"] {
            switch value {
            case .bool(false): spec.etag = nil
            case .string(let text) where ETagStrength(rawValue: text) != nil: spec.etag = ETagStrength(rawValue: text)
            default: report(fields.path("etag"), "expected \"strong\", \"weak\" or false, found \(ScenarioLoader.describe(value))")
            }
        }
        if let value = fields["lastModified"] {
            switch value {
            case .bool(let flag): spec.lastModified = flag ? .automatic : .none
            case .string(let text):
                if let seconds = HTTPDate.parse(text) {
                    spec.lastModified = .fixed(unixSeconds: Int64(seconds))
                } else {
                    report(fields.path("lastModified"), "\(ScenarioLoader.quoted(text)) is not an HTTP date "
                        + "(e.g. \"Sun, 06 Nov 1994 08:49:37 GMT\")")
                }
            default:
                report(fields.path("lastModified"), "expected true, false or an HTTP date, found \(ScenarioLoader.describe(value))")
            }
        }
        for (key, keyPath) in [("cacheControl", \ResourceSpec.cacheControl), ("vary", \ResourceSpec.vary)] {
            if let value = fields[key], let text = fieldValue(value, at: fields.path(key)) { spec[keyPath: keyPath] = text }
        }
        if let value = fields["expiresAfterSeconds"] {
            spec.expiresAfterSeconds = integer(value, at: fields.path("expiresAfterSeconds"), in: -31_536_000...31_536_000)
        }
        if let value = fields["methods"], let elements = array(value, at: fields.path("methods")) {
            for (index, element) in elements.enumerated() {
                let elementPath = "\(fields.path("methods"))[\(index)]"
                guard let text = string(element, at: elementPath) else { continue }
                switch text {
                case "GET", "HEAD": break
                case "PUT", "PATCH", "DELETE":
                    if !spec.writeMethods.contains(text) { spec.writeMethods.append(text) }
                default:
                    report(elementPath, "unknown method \(ScenarioLoader.quoted(text)) for a resource"
                        + ScenarioLoader.hint(for: text, among: ["GET", "HEAD", "PUT", "PATCH", "DELETE"], listName: "expected"))
                }
            }
        }
        if let value = fields["requireConditional"] {
            spec.requireConditional = bool(value, at: fields.path("requireConditional")) ?? false
            if spec.requireConditional && spec.writeMethods.isEmpty {
                report(fields.path("requireConditional"), "the resource allows no writes (\"methods\" has no PUT, PATCH "
                    + "or DELETE), so there is nothing to require conditions of")
            }
        }
        if case .absent = spec.body, !spec.writeMethods.contains("PUT") {
            report(path, "a resource needs a body (\"json\", \"text\", \"base64\", \"file\" or \"generated\"), "
                + "or PUT among its \"methods\" so that a client can create it")
        }
        if let value = fields["deviations"] {
            spec.deviations = deviations(value, at: fields.path("deviations"))
        }
        return errors.count == errorCount ? spec : nil
    }

    /// `{"size": N}` (bytes, or a string such as `"64MiB"`).
    private mutating func generatedBody(_ value: JSONValue, at path: String) -> Int? {
        guard let fields = fields(value, at: path, known: ["size"]), let size = required(fields, "size") else { return nil }
        return byteSize(size, at: fields.path("size"), in: 0...ScenarioLoader.maxGeneratedBytes)
    }

    /// A number of bytes, or a string such as `"64MiB"` (`suffix`, e.g. `/s`, may follow the unit).
    mutating func byteSize(_ value: JSONValue, at path: String, in range: ClosedRange<Int>, suffix: String = "") -> Int? {
        if case .string(let whole) = value {
            let text = whole.hasSuffix(suffix) ? String(whole.dropLast(suffix.count)) : whole
            let units: [(String, Int)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("B", 1)]
            for (unit, factor) in units where text.hasSuffix(unit) {
                if let count = Int(text.dropLast(unit.count)), range.contains(count * factor), count <= range.upperBound / factor {
                    return count * factor
                }
                break
            }
            report(path, "\(ScenarioLoader.quoted(whole)) is not a size: a number of bytes, or a number with KiB, MiB or GiB"
                + (suffix.isEmpty ? "" : ", then \(suffix)"))
            return nil
        }
        return integer(value, at: path, in: range)
    }

    /// A header value from a scenario: no CR, LF or NUL.
    private mutating func fieldValue(_ value: JSONValue, at path: String) -> String? {
        guard let text = string(value, at: path) else { return nil }
        if text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) {
            report(path, "a header value must not contain CR, LF or NUL")
            return nil
        }
        return text
    }

    private mutating func deviations(_ value: JSONValue, at path: String) -> [ResourceDeviation] {
        guard let elements = array(value, at: path) else { return [] }
        var found: [ResourceDeviation] = []
        for (index, element) in elements.enumerated() {
            let elementPath = "\(path)[\(index)]"
            guard let text = string(element, at: elementPath) else { continue }
            if let deviation = ResourceDeviation(rawValue: text) {
                found.append(deviation)
            } else {
                report(elementPath, "unknown deviation \(ScenarioLoader.quoted(text))"
                    + ScenarioLoader.hint(for: text, among: ResourceDeviation.allCases.map(\.rawValue), listName: "expected"))
            }
        }
        return found
    }

    /// A step's `"resource"`: an id, or `{"id": …, "deviations": […]}`.
    mutating func resourceReference(_ value: JSONValue, at path: String) -> ResourceReference? {
        if case .string = value {
            return nonEmptyString(value, at: path).map { ResourceReference(id: $0) }
        }
        guard let fields = fields(value, at: path, known: ["id", "deviations"]),
              let id = required(fields, "id").flatMap({ nonEmptyString($0, at: fields.path("id")) })
        else { return nil }
        let found = fields["deviations"].map { deviations($0, at: fields.path("deviations")) } ?? []
        return ResourceReference(id: id, deviations: found)
    }

    /// A route's resource steps name a resource of the scenario; the route's path gives every parameter of the
    /// resource's (they name the instance); a fault that rewrites body bytes is not asked of a large body.
    mutating func checkResourceSteps(_ responses: [ResponseStep], pathParameters: [String], at path: String) {
        for (index, step) in responses.enumerated() {
            guard case .resource(let reference) = step.kind else { continue }
            let stepPath = "\(path)[\(index)]"
            guard let spec = resources.first(where: { $0.id == reference.id }) else {
                report("\(stepPath).resource", "no resource \(ScenarioLoader.quoted(reference.id)) in this scenario's \"resources\""
                    + ScenarioLoader.hint(for: reference.id, among: resources.map(\.id), listName: "its resources are"))
                continue
            }
            let needed = spec.path.segments.compactMap { if case .parameter(let name) = $0 { name } else { nil } }
            let missing = needed.filter { !pathParameters.contains($0) }
            if !missing.isEmpty {
                report("\(stepPath).resource", "resource \(ScenarioLoader.quoted(spec.id)) is at \(spec.path.source); "
                    + "the route's path must name \(missing.map { "{\($0)}" }.joined(separator: ", ")) too, to say which instance")
            }
            if let fault = step.fault, fault.name.rewritesBody,
               case .generated(let size) = spec.body, size > ScenarioLoader.maxCopiedResourceBytes {
                report("\(stepPath).fault", "\(fault.name.rawValue) rewrites the body's bytes, which copies all \(size) bytes "
                    + "of \(ScenarioLoader.quoted(spec.id)) per request; use truncate-body, half-close or a smaller resource")
            }
        }
    }
}
