/// A resource's answer to one request, before any step fault breaks it.
package struct ResourceAnswer: Sendable {
    package var status: Int
    package var headers: HTTPHeaders
    package var body: BodyPieces
    /// What `Content-Length` announces: the body's length, or a GET's for HEAD.
    package var bodyLength: Int
    /// Where the body starts in the representation (a single range's first byte), for `cutAt`.
    package var offset: Int
    package var record: ResourceRecord
    /// Whether the head gets the server's `Date` (RFC 9110 §6.6.1), which the codec adds as it writes it: false
    /// for the `no-date` deviation.
    package var date = true
}

/// RFC 9110's conditional requests (§13), ranges (§14) and the status codes they lead to, on a resource instance,
/// with the deviations the resource or the step asks for (ARCHITECTURE §4b).
extension ResourceStore {
    /// The conditional and range fields, in the order §13.2.2 evaluates them.
    static let conditionalFields = ["If-Match", "If-Unmodified-Since", "If-None-Match", "If-Modified-Since", "If-Range", "Range"]
    /// More ranges than this, or ranges adding up to more than the representation twice over, are ignored
    /// (§14.2 lets a server ignore Range; a long or overlapping list is a denial-of-service pattern).
    static let maxRanges = 100

    package func respond(
        _ request: HTTPRequest, _ resource: Loaded, key: String, deviations extra: [ResourceDeviation] = [],
        now: EngineInstant
    ) -> ResourceAnswer {
        noteUse(resource, key)
        resource.served += 1
        let spec = resource.spec
        var deviations = Set(spec.deviations)
        deviations.formUnion(extra)
        let headers = request.headers
        var record = ResourceRecord(id: spec.id, instance: key, version: 0, size: 0, decision: .full)
        record.carried = Self.conditionalFields.filter { headers[$0] != nil }
        record.range = headers["range"]
        let method = request.method
        var answer: ResourceAnswer
        // (Not `case "PUT", "PATCH", "DELETE" where …`: a `where` guards only the last pattern of a case.)
        switch method {
        case "GET", "HEAD":
            answer = read(request, resource, key, deviations, &record, now: now)
        case _ where spec.writeMethods.contains(method):
            answer = write(request, resource, key, deviations, &record, now: now)
        default:
            record.decision = .methodNotAllowed
            let allowed = ["GET", "HEAD"] + spec.writeMethods
            answer = problem(405, "Method Not Allowed", "\(spec.id) allows \(allowed.joined(separator: ", "))", record)
            answer.headers.append(name: "Allow", value: allowed.joined(separator: ", "))
        }
        let current = instance(resource, key)
        answer.record.version = current.version
        answer.record.size = current.exists ? current.body.count : 0
        answer.record.deviations = ResourceDeviation.allCases.filter(deviations.contains).map(\.rawValue)
        if method == "HEAD" {
            answer.body = BodyPieces()
        }
        answer.record.etag = answer.headers["etag"]
        answer.record.lastModified = answer.headers["last-modified"]
        answer.record.noStore = answer.headers["cache-control"]?.lowercased().contains("no-store") ?? false
        answer.date = !deviations.contains(.noDate)
        return answer
    }

    // MARK: - GET and HEAD

    private func read(
        _ request: HTTPRequest, _ resource: Loaded, _ key: String, _ deviations: Set<ResourceDeviation>,
        _ record: inout ResourceRecord, now: EngineInstant
    ) -> ResourceAnswer {
        let current = instance(resource, key)
        guard current.exists else {
            record.decision = .notFound
            return problem(404, "Not Found", "\(key) has no representation (it was deleted or never created)", record)
        }
        let validators = self.validators(resource, key, current, deviations)
        let headers = request.headers
        if let failed = failedWritePrecondition(headers, validators) {
            record.decision = .preconditionFailed
            return preconditionFailed(failed, validators, record)
        }
        if !deviations.contains(.ignoreIfNoneMatch), notModified(headers, validators) {
            record.decision = .notModified
            return notModifiedAnswer(resource, current, validators, deviations, record, now: now)
        }
        var answer = ResourceAnswer(
            status: 200, headers: representationHeaders(resource, current, validators, deviations, now: now),
            body: BodyPieces([.slice(BodySlice(current.body))]), bodyLength: current.body.count, offset: 0,
            record: record)
        answer.headers.append(name: "Content-Type", value: current.contentType)
        guard request.method == "GET", !deviations.contains(.ignoreRange), let rangeText = headers["range"],
              let specs = RangeRequest.parse(rangeText), current.body.count > 0
        else { return answer }
        if let condition = headers["if-range"], !ifRangeHolds(condition, validators) {
            return answer
        }
        let ranges = RangeRequest.resolve(specs, length: current.body.count)
        if specs.count > Self.maxRanges || ranges.reduce(0, { $0 + $1.count }) > 2 * current.body.count {
            return answer
        }
        let length = current.body.count
        guard !ranges.isEmpty else {
            record.decision = .rangeNotSatisfiable
            var refused = problem(416, "Range Not Satisfiable", "the representation is \(length) bytes", record)
            refused.headers.append(name: "Content-Range", value: "bytes */\(length)")
            return refused
        }
        answer.status = 206
        answer.record.decision = .partial
        answer.record.ranges = ranges
        if deviations.contains(.weakETagOn206), let tag = validators.etag, !tag.hasPrefix("W/") {
            answer.headers.set(name: "ETag", value: "W/" + tag)
        }
        if ranges.count == 1 {
            let range = ranges[0]
            var claimed = range
            if deviations.contains(.wrongContentRange) {
                let start = range.lowerBound == 0 ? 1 : 0
                claimed = start...(start + range.count - 1)
            }
            answer.headers.append(name: "Content-Range", value: "bytes \(claimed.lowerBound)-\(claimed.upperBound)/\(length)")
            answer.body = BodyPieces([.slice(BodySlice(current.body, range.lowerBound..<(range.upperBound + 1)))])
            answer.bodyLength = range.count
            answer.offset = range.lowerBound
            return answer
        }
        // Several ranges: multipart/byteranges (RFC 9110 §14.6), the parts in the order asked.
        let boundary = "faultline-" + String(FNV1a.hash((validators.etag ?? key).utf8), radix: 16)
        var pieces: [BodyPieces.Piece] = []
        for (index, range) in ranges.enumerated() {
            let part = (index == 0 ? "" : "\r\n") + "--\(boundary)\r\nContent-Type: \(current.contentType)\r\n"
                + "Content-Range: bytes \(range.lowerBound)-\(range.upperBound)/\(length)\r\n\r\n"
            pieces.append(.bytes(Array(part.utf8)))
            pieces.append(.slice(BodySlice(current.body, range.lowerBound..<(range.upperBound + 1))))
        }
        pieces.append(.bytes(Array("\r\n--\(boundary)--\r\n".utf8)))
        answer.body = BodyPieces(pieces)
        answer.bodyLength = answer.body.count
        answer.headers.set(name: "Content-Type", value: "multipart/byteranges; boundary=\(boundary)")
        return answer
    }

    struct Validators {
        var etag: String?
        var lastModified: Int64?
    }

    private func validators(
        _ resource: Loaded, _ key: String, _ current: Instance, _ deviations: Set<ResourceDeviation>
    ) -> Validators {
        let etag = deviations.contains(.lastModifiedOnly)
            ? nil : entityTag(resource, key, current, unstable: deviations.contains(.unstableETag))
        return Validators(etag: etag, lastModified: current.lastModified)
    }

    /// The name of the first write precondition that fails (§13.2.2 steps 1–2), or nil.
    private func failedWritePrecondition(_ headers: HTTPHeaders, _ validators: Validators) -> String? {
        if let value = headers.list("if-match") {
            guard let tags = EntityTag.list(value) else { return "If-Match" }
            if tags == ["*"] { return nil }
            guard let etag = validators.etag, tags.contains(where: { EntityTag.strongMatch($0, etag) }) else {
                return "If-Match"
            }
            return nil
        }
        if let value = headers["if-unmodified-since"], let date = HTTPDate.parse(value),
           let modified = validators.lastModified, Double(modified) > date {
            return "If-Unmodified-Since"
        }
        return nil
    }

    /// Whether If-None-Match (weak comparison) or, without it, If-Modified-Since says the client's copy is current.
    private func notModified(_ headers: HTTPHeaders, _ validators: Validators) -> Bool {
        if let value = headers.list("if-none-match") {
            guard let tags = EntityTag.list(value) else { return false }
            if tags == ["*"] { return true }
            guard let etag = validators.etag else { return false }
            return tags.contains { EntityTag.weakMatch($0, etag) }
        }
        if let value = headers["if-modified-since"], let date = HTTPDate.parse(value),
           let modified = validators.lastModified {
            return Double(modified) <= date
        }
        return false
    }

    /// §13.1.5: an entity tag must match strongly; a date must be the Last-Modified exactly.
    private func ifRangeHolds(_ condition: String, _ validators: Validators) -> Bool {
        let trimmed = condition.trimmingASCIIWhitespace
        if trimmed.hasPrefix("\"") || trimmed.hasPrefix("W/") {
            guard let etag = validators.etag else { return false }
            return EntityTag.strongMatch(trimmed, etag)
        }
        guard let date = HTTPDate.parse(trimmed), let modified = validators.lastModified else { return false }
        return Double(modified) == date
    }

    /// The validators, caching fields and Accept-Ranges: what a 200, a 206 and a 304 share. (`Date`, which every
    /// answer carries, is the codec's: it adds it as it writes the head, from the engine's per-second cache.)
    private func representationHeaders(
        _ resource: Loaded, _ current: Instance, _ validators: Validators, _ deviations: Set<ResourceDeviation>,
        now: EngineInstant
    ) -> HTTPHeaders {
        let spec = resource.spec
        var headers = HTTPHeaders()
        if let etag = validators.etag { headers.append(name: "ETag", value: etag) }
        if let modified = validators.lastModified {
            headers.append(name: "Last-Modified", value: HTTPDate.format(unixSeconds: Double(modified)))
        }
        if let cacheControl = spec.cacheControl { headers.append(name: "Cache-Control", value: cacheControl) }
        if let seconds = spec.expiresAfterSeconds {
            headers.append(name: "Expires", value: HTTPDate.format(unixSeconds: now.wallSeconds + Double(seconds)))
        }
        if let vary = spec.vary { headers.append(name: "Vary", value: vary) }
        if !deviations.contains(.noAcceptRanges) { headers.append(name: "Accept-Ranges", value: "bytes") }
        return headers
    }

    private func notModifiedAnswer(
        _ resource: Loaded, _ current: Instance, _ validators: Validators, _ deviations: Set<ResourceDeviation>,
        _ record: ResourceRecord, now: EngineInstant
    ) -> ResourceAnswer {
        var headers = representationHeaders(resource, current, validators, deviations, now: now)
        headers.remove(name: "Accept-Ranges")
        if deviations.contains(.notModifiedWithoutETag) { headers.remove(name: "ETag") }
        if deviations.contains(.notModifiedChangedHeaders) {
            // What broken servers and proxies do: a length of 0 (a cache that believes it empties its copy), a
            // changed freshness and type.
            headers.set(name: "Cache-Control", value: "no-store")
            headers.append(name: "Content-Type", value: "text/plain")
            headers.append(name: "Content-Length", value: "0")
        }
        return ResourceAnswer(status: 304, headers: headers, body: BodyPieces(), bodyLength: 0, offset: 0, record: record)
    }

    private func preconditionFailed(_ field: String, _ validators: Validators, _ record: ResourceRecord) -> ResourceAnswer {
        var answer = problem(412, "Precondition Failed", "\(field) does not match the current representation", record)
        if let etag = validators.etag { answer.headers.append(name: "ETag", value: etag) }
        if let modified = validators.lastModified {
            answer.headers.append(name: "Last-Modified", value: HTTPDate.format(unixSeconds: Double(modified)))
        }
        return answer
    }

    private func problem(_ status: Int, _ title: String, _ detail: String, _ record: ResourceRecord) -> ResourceAnswer {
        var body: [UInt8] = []
        JSONValue.object([
            ("type", .string("about:blank")), ("title", .string(title)), ("status", .int(status)),
            ("detail", .string(detail)),
        ]).serialize(into: &body)
        body.append(0x0A)
        return ResourceAnswer(
            status: status, headers: HTTPHeaders([("Content-Type", "application/problem+json")]),
            body: BodyPieces([.bytes(body)]), bodyLength: body.count, offset: 0, record: record)
    }

    // MARK: - PUT, PATCH, DELETE

    private func write(
        _ request: HTTPRequest, _ resource: Loaded, _ key: String, _ deviations: Set<ResourceDeviation>,
        _ record: inout ResourceRecord, now: EngineInstant
    ) -> ResourceAnswer {
        let headers = request.headers
        let method = request.method
        let conditional = headers["if-match"] != nil || headers["if-unmodified-since"] != nil
            || (method == "PUT" && headers["if-none-match"] != nil)
        if resource.spec.requireConditional && !conditional {
            record.decision = .preconditionRequired
            return problem(428, "Precondition Required",
                           "\(method) \(key) needs If-Match with the ETag you have (this resource refuses blind writes)", record)
        }
        let current = instance(resource, key)
        let validators = self.validators(resource, key, current, deviations)
        guard current.exists || method == "PUT" else {
            record.decision = .notFound
            return problem(404, "Not Found", "\(key) has no representation (it was deleted or never created)", record)
        }
        if current.exists {
            if let failed = failedWritePrecondition(headers, validators) {
                record.decision = .preconditionFailed
                return preconditionFailed(failed, validators, record)
            }
            if notModified(headers, validators) {
                record.decision = .preconditionFailed
                return preconditionFailed("If-None-Match", validators, record)
            }
        } else if headers["if-match"] != nil {
            // Nothing to match (§13.1.1): even If-Match: * fails; there are no validators to send.
            record.decision = .preconditionFailed
            return preconditionFailed("If-Match", Validators(), record)
        }
        let contentType = headers["content-type"]
        if method != "DELETE" && (resource.instances[key] == nil && resource.instances.count >= Self.maxWrittenInstances
            || storedBytes + request.body.count > Self.maxStoredBytes) {
            record.decision = .insufficientStorage
            return problem(507, "Insufficient Storage", "the server keeps at most \(Self.maxWrittenInstances) written "
                + "instances per resource and \(Self.maxStoredBytes) bytes of written bodies", record)
        }
        var status = 204
        var body: [UInt8] = []
        switch method {
        case "DELETE":
            change(resource, key, delete: true, now: now)
            record.decision = .deleted
        case "PATCH":
            guard current.contentType.lowercased().hasPrefix("application/json"),
                  let type = contentType?.lowercased(),
                  type.hasPrefix("application/merge-patch+json") || type.hasPrefix("application/json"),
                  let patch = try? JSONValue.parse(request.body),
                  let document = try? JSONValue.parse(current.body.bytes(0..<current.body.count))
            else {
                record.decision = .unsupportedMediaType
                var refused = problem(415, "Unsupported Media Type",
                                      "PATCH takes a JSON merge patch (RFC 7396) of a JSON resource", record)
                refused.headers.append(name: "Accept-Patch", value: "application/merge-patch+json")
                return refused
            }
            Self.mergePatch(document, patch).serialize(into: &body)
            change(resource, key, body: body, now: now)
            record.decision = .updated
            status = 200
        default:
            change(resource, key, body: request.body, contentType: contentType, now: now)
            record.decision = current.exists ? .updated : .created
            status = current.exists ? 204 : 201
        }
        let written = instance(resource, key)
        var answerHeaders = HTTPHeaders()
        if method != "DELETE" {
            let after = self.validators(resource, key, written, deviations)
            if let etag = after.etag { answerHeaders.append(name: "ETag", value: etag) }
            if let modified = after.lastModified {
                answerHeaders.append(name: "Last-Modified", value: HTTPDate.format(unixSeconds: Double(modified)))
            }
            if status == 201 { answerHeaders.append(name: "Location", value: key) }
            if status == 200 { answerHeaders.append(name: "Content-Type", value: written.contentType) }
        }
        return ResourceAnswer(
            status: status, headers: answerHeaders, body: BodyPieces(body.isEmpty ? [] : [.bytes(body)]),
            bodyLength: body.count, offset: 0, record: record)
    }

    /// RFC 7396: members of an object patch replace, `null` removes, anything else replaces the whole.
    static func mergePatch(_ target: JSONValue, _ patch: JSONValue) -> JSONValue {
        guard case .object(let changes) = patch else { return patch }
        var members: [(key: String, value: JSONValue)] = []
        if case .object(let existing) = target { members = existing }
        for change in changes {
            let index = members.firstIndex { $0.key == change.key }
            if change.value == .null {
                if let index { members.remove(at: index) }
            } else if let index {
                members[index].value = mergePatch(members[index].value, change.value)
            } else {
                members.append((change.key, mergePatch(.null, change.value)))
            }
        }
        return .object(members)
    }
}
