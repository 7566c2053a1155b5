/// The loaded scenarios' resources and the state of their instances (ARCHITECTURE §4b). Owned by the engine, on the
/// loop thread; `reset` puts every instance back to its first version.
package final class ResourceStore {
    /// One instance of a resource: a path's representation and its version.
    package struct Instance: Sendable {
        package var exists: Bool
        package var body: BodySource
        package var contentType: String
        package var version: Int
        package var lastModified: Int64?
        /// Identifies the content for the ETag: FNV-1a of the bytes, or of the generator's parameters.
        var contentTag: UInt64
    }

    /// A resource with what the engine needs to serve it.
    package final class Loaded {
        package let spec: ResourceSpec
        let scenarioIndex: Int
        let scenarioName: String
        let seed: UInt64
        let match: RouteMatch
        /// The first body of a stored resource, shared by every instance until one is written.
        let initialSource: BodySource?
        let initialTag: UInt64
        /// Changes made to the resource as a whole (effects, admin calls): instances made later start there.
        var baseVersion = 1
        var baseLastModified: Int64?
        var baseDeleted = false
        package var instances: [String: Instance] = [:]
        /// Instance keys in first-use order, for listings (the first `maxListed`).
        package var order: [String] = []
        var listed: Set<String> = []
        /// Responses served, for `unstable-etag`.
        var served = 0

        init(spec: ResourceSpec, scenarioIndex: Int, scenario: Scenario) {
            self.spec = spec
            self.scenarioIndex = scenarioIndex
            scenarioName = scenario.name
            seed = scenario.seed
            match = RouteMatch(path: spec.path)
            if case .bytes(let bytes) = spec.body {
                initialSource = BodySource(bytes: bytes)
                initialTag = FNV1a.hash(bytes)
            } else {
                initialSource = nil
                initialTag = 0
            }
        }
    }

    package private(set) var resources: [Loaded] = []
    /// Bytes clients wrote that the store keeps (PUT and PATCH bodies), across every resource.
    private(set) var storedBytes = 0
    /// What clients may make the store keep: instances written per resource, and bytes in all. A write past
    /// either is answered 507 Insufficient Storage (RFC 4918 §11.5) and changes nothing.
    static let maxWrittenInstances = 10_000
    static let maxStoredBytes = 256 * 1024 * 1024
    /// Instances listed per resource by `GET /__faultline/resources`.
    static let maxListed = 1_000

    package init() {}

    /// Replaces the resources with those of `scenarios`, every instance at its first version.
    package func load(_ scenarios: [Scenario], now: EngineInstant) {
        resources = []
        for (index, scenario) in scenarios.enumerated() {
            for spec in scenario.resources {
                resources.append(Loaded(spec: spec, scenarioIndex: index, scenario: scenario))
            }
        }
        reset(now: now)
    }

    package func reset(now: EngineInstant) {
        storedBytes = 0
        for resource in resources {
            resource.baseVersion = 1
            resource.baseDeleted = false
            resource.instances = [:]
            resource.order = []
            resource.listed = []
            resource.served = 0
            switch resource.spec.lastModified {
            case .none: resource.baseLastModified = nil
            case .automatic: resource.baseLastModified = Int64(now.wallSeconds.rounded(.down)) - 60
            case .fixed(let seconds): resource.baseLastModified = seconds
            }
        }
    }

    /// The resource `id` names: the one in `scenario` (an index) when given, else the first scenario's.
    package func resource(_ id: String, scenario: Int? = nil) -> Loaded? {
        resources.first { $0.spec.id == id && (scenario == nil || $0.scenarioIndex == scenario) }
    }

    /// The resource whose path the request's path matches, with the instance key.
    func matching(_ input: MatchInput) -> (Loaded, String)? {
        for resource in resources {
            if case .matched(let parameters) = RouteMatcher.match(resource.match, input, explain: false) {
                return (resource, instanceKey(resource, parameters))
            }
        }
        return nil
    }

    /// The instance named by path parameters: the resource's path with them filled in, each value percent-encoded
    /// as one path segment (RFC 3986 `pchar`; `/` inside a value stays `%2F`), so the key is the instance's URI
    /// path — a 201's Location — and two values never give one key. A route that serves the resource passes its
    /// own parameters; the loader checked they name every parameter of the resource's path.
    package func instanceKey(_ resource: Loaded, _ parameters: [String: String]) -> String {
        guard resource.spec.path.hasParameters else { return resource.spec.path.source }
        return "/" + resource.spec.path.segments.map { segment in
            switch segment {
            case .literal(let text): return Self.uriSegment(text)
            case .parameter(let name): return Self.uriSegment(parameters[name] ?? "")
            }
        }.joined(separator: "/")
    }

    /// `text` as one URI path segment: bytes outside RFC 3986's unreserved characters, sub-delims, `:` and `@`
    /// percent-encoded (UTF-8).
    static func uriSegment(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.unicodeScalars.append(UnicodeScalar(byte))
            case _ where "-._~!$&'()*+,;=:@".utf8.contains(byte):
                out.unicodeScalars.append(UnicodeScalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }

    /// The instance: as last written, or as the resource's current base version makes it (an instance nobody
    /// wrote is not stored; it follows the resource's changes).
    func instance(_ resource: Loaded, _ key: String) -> Instance {
        if let known = resource.instances[key] { return known }
        let spec = resource.spec
        var made = Instance(
            exists: !resource.baseDeleted, body: resource.initialSource ?? BodySource(bytes: []),
            contentType: spec.contentType, version: resource.baseVersion, lastModified: resource.baseLastModified,
            contentTag: resource.initialTag)
        switch spec.body {
        case .bytes: break
        case .generated(let size): regenerate(&made, resource, key, size: size)
        case .absent: made.exists = false
        }
        return made
    }

    /// Remembers that `key` was used, for listings; bounded, as a client may ask for any number of paths.
    func noteUse(_ resource: Loaded, _ key: String) {
        guard resource.order.count < Self.maxListed, resource.listed.insert(key).inserted else { return }
        resource.order.append(key)
    }

    private func regenerate(_ instance: inout Instance, _ resource: Loaded, _ key: String, size: Int) {
        let seed = Engine.streamSeed(
            scenarioSeed: resource.seed, routeID: "resource:" + resource.spec.id, partition: "\(key)#\(instance.version)")
        instance.body = BodySource(.generated(seed: seed, size: size))
        instance.contentTag = seed
    }

    /// A new version of one instance: written by a client (`body`), or changed behind its back (nil: a generated
    /// body is generated anew, stored bytes stay and only the validators change). `delete` removes it.
    func change(
        _ resource: Loaded, _ key: String, body: [UInt8]? = nil, contentType: String? = nil, delete: Bool = false,
        now: EngineInstant
    ) {
        var changed = instance(resource, key)
        changed.version += 1
        if let previous = changed.lastModified {
            changed.lastModified = Self.modified(after: previous, now: now)
        }
        if delete {
            changed.exists = false
        } else if let body {
            changed.exists = true
            changed.body = BodySource(bytes: body)
            changed.contentTag = FNV1a.hash(body)
            if let contentType { changed.contentType = contentType }
        } else if case .generated(_, let size) = changed.body.storage {
            // Generated anew from the new version; bytes a client wrote stay as written.
            regenerate(&changed, resource, key, size: size)
        }
        noteUse(resource, key)
        if let old = resource.instances[key], case .bytes(let bytes) = old.body.storage, old.body !== resource.initialSource {
            storedBytes -= bytes.count
        }
        if case .bytes(let bytes) = changed.body.storage, changed.body !== resource.initialSource {
            storedBytes += bytes.count
        }
        resource.instances[key] = changed
    }

    /// Changes every instance of `resource` (an effect, or an admin call without a path), and the version new
    /// instances start at.
    func changeAll(_ resource: Loaded, delete: Bool, now: EngineInstant) {
        resource.baseVersion += 1
        resource.baseDeleted = delete
        if let previous = resource.baseLastModified {
            resource.baseLastModified = Self.modified(after: previous, now: now)
        }
        for key in resource.instances.keys.sorted() { change(resource, key, delete: delete, now: now) }
    }

    /// A change's Last-Modified: now, to the second — never later than the Date the response carries (RFC 9110
    /// §8.8.2.1), so two changes within one second share a date, as on any real server (the ETag tells them apart;
    /// `last-modified-only` resources cannot).
    static func modified(after previous: Int64, now: EngineInstant) -> Int64 {
        max(Int64(now.wallSeconds.rounded(.down)), previous)
    }

    /// The entity tag of an instance as the resource sends it (strong or weak), or nil when it sends none.
    func entityTag(_ resource: Loaded, _ key: String, _ instance: Instance, unstable: Bool) -> String? {
        guard let strength = resource.spec.etag else { return nil }
        var fnv = FNV1a()
        fnv.mix(resource.spec.id.utf8)
        fnv.mix(key.utf8)
        fnv.mix(littleEndian: UInt64(instance.version))
        fnv.mix(littleEndian: instance.contentTag)
        // `W/`? `"`, the hash as 16 hex digits, `"`, written as bytes: built from strings it cost ~1,900
        // instructions on every resource answer (`make hotpath`).
        let hash = fnv.hash
        let weak = strength == .weak
        let tag = String(unsafeUninitializedCapacity: 20) { out in
            var index = 0
            if weak { out[0] = UInt8(ascii: "W"); out[1] = UInt8(ascii: "/"); index = 2 }
            out[index] = UInt8(ascii: "\"")
            for digit in 0 ..< 16 {
                let nibble = UInt8(truncatingIfNeeded: hash >> (60 - 4 * UInt64(digit))) & 0xF
                out[index + 1 + digit] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
            }
            out[index + 17] = UInt8(ascii: "\"")
            return index + 18
        }
        guard unstable else { return tag }
        return String(tag.dropLast()) + "-\(resource.served)\""
    }


    /// What `GET /__faultline/resources` shows.
    package func json() -> JSONValue {
        .array(resources.map { resource in
            let keys = resource.order.isEmpty && !resource.spec.path.hasParameters ? [resource.spec.path.source] : resource.order
            return .object([
                ("id", .string(resource.spec.id)), ("scenario", .string(resource.scenarioName)),
                ("path", .string(resource.spec.path.source)),
                ("instances", .array(keys.map { key in
                    let current = instance(resource, key)
                    return .object([
                        ("path", .string(key)), ("exists", .bool(current.exists)), ("version", .int(current.version)),
                        ("etag", entityTag(resource, key, current, unstable: false).map(JSONValue.string) ?? .null),
                        ("lastModified", current.lastModified.map { .string(HTTPDate.format(unixSeconds: Double($0))) } ?? .null),
                        ("size", .int(current.exists ? current.body.count : 0)),
                        ("contentType", .string(current.contentType)),
                    ])
                })),
            ])
        })
    }
}
