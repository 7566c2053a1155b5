/// What a request to a resource carried and what the server decided (the journal's `resource`): the evidence the
/// caching, resume and write verdicts read.
public struct ResourceRecord: Sendable, Equatable {
    public var id: String
    /// The instance's path (the resource's path for one without parameters).
    public var instance: String
    /// The instance's version when the request was decided (after a write it made).
    public var version: Int
    /// The ETag the response carried, if any.
    public var etag: String?
    /// The Last-Modified the response carried, if any.
    public var lastModified: String?
    /// The response said `Cache-Control: no-store`: nothing to revalidate.
    public var noStore = false
    /// The representation's length in bytes (0 when absent).
    public var size: Int
    /// The conditional and range fields the request carried, by name, in the order RFC 9110 §13.2.2 reads them.
    public var carried: [String]
    /// The Range field as sent.
    public var range: String?
    public var decision: ResourceDecision
    /// The byte ranges a 206 served, first and last inclusive.
    public var ranges: [ClosedRange<Int>]
    /// The offset in the representation where a fault cut the body (the bytes before it were sent).
    public var cutAt: Int?
    /// The deviations the response committed.
    public var deviations: [String]

    package init(id: String, instance: String, version: Int, size: Int, decision: ResourceDecision) {
        self.id = id
        self.instance = instance
        self.version = version
        self.size = size
        self.decision = decision
        carried = []
        ranges = []
        deviations = []
    }

    /// The offset the request's Range starts at, for a single `bytes=N-…` range.
    public var rangeStart: Int? {
        guard let range, let spec = RangeRequest.parse(range), spec.count == 1, case .from(let first, _) = spec[0]
        else { return nil }
        return first
    }

    package func json() -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("id", .string(id)), ("instance", .string(instance)), ("version", .int(version)),
            ("etag", etag.map(JSONValue.string) ?? .null),
            ("lastModified", lastModified.map(JSONValue.string) ?? .null), ("size", .int(size)),
            ("carried", .array(carried.map(JSONValue.string))), ("range", range.map(JSONValue.string) ?? .null),
            ("decision", .string(decision.rawValue)),
            ("ranges", .array(ranges.map { .array([.int($0.lowerBound), .int($0.upperBound)]) })),
        ]
        if let cutAt { members.append(("cutAt", .int(cutAt))) }
        if noStore { members.append(("noStore", .bool(true))) }
        members.append(("deviations", .array(deviations.map(JSONValue.string))))
        return .object(members)
    }

    package init?(json: JSONValue) {
        guard case .string(let id)? = json["id"], case .string(let instance)? = json["instance"],
              let version = json["version"]?.intValue, let size = json["size"]?.intValue,
              case .string(let decisionText)? = json["decision"], let decision = ResourceDecision(rawValue: decisionText)
        else { return nil }
        self.init(id: id, instance: instance, version: version, size: size, decision: decision)
        if case .string(let text)? = json["etag"] { etag = text }
        if case .string(let text)? = json["lastModified"] { lastModified = text }
        noStore = json["noStore"] == .bool(true)
        if case .string(let text)? = json["range"] { range = text }
        if case .array(let names)? = json["carried"] {
            carried = names.compactMap { if case .string(let text) = $0 { text } else { nil } }
        }
        if case .array(let pairs)? = json["ranges"] {
            ranges = pairs.compactMap { pair in
                guard case .array(let bounds) = pair, bounds.count == 2, let first = bounds[0].intValue,
                      let last = bounds[1].intValue, first <= last else { return nil }
                return first...last
            }
        }
        cutAt = json["cutAt"]?.intValue
        if case .array(let names)? = json["deviations"] {
            deviations = names.compactMap { if case .string(let text) = $0 { text } else { nil } }
        }
    }
}

/// What the server decided for a request to a resource.
public enum ResourceDecision: String, Sendable, Equatable {
    /// 200 with the whole representation (also a Range ignored or an If-Range that failed).
    case full
    /// 206 with the ranges asked for.
    case partial
    /// 304: the client's copy is current.
    case notModified = "not-modified"
    /// 412: If-Match or If-Unmodified-Since (or If-None-Match on a write) failed.
    case preconditionFailed = "precondition-failed"
    /// 428: an unconditional write to a resource that requires conditions.
    case preconditionRequired = "precondition-required"
    /// 416: no range asked for lies inside the representation.
    case rangeNotSatisfiable = "range-not-satisfiable"
    case created, updated, deleted
    /// 404: the instance has no representation (deleted, or never created).
    case notFound = "not-found"
    /// 405: a method the resource does not allow.
    case methodNotAllowed = "method-not-allowed"
    /// 415: a PATCH the resource cannot apply.
    case unsupportedMediaType = "unsupported-media-type"
    /// 507: a write past what the server keeps of clients' writes.
    case insufficientStorage = "insufficient-storage"
}
