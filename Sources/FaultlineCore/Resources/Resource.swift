/// A versioned resource (`resources` in a scenario, ARCHITECTURE §4b): a representation at a path that GET and
/// HEAD read with RFC 9110's conditional requests and ranges, that PUT, PATCH and DELETE change when allowed,
/// and whose version a step or an admin call can change behind the client's back.
package struct ResourceSpec: Sendable, Equatable {
    package var id: String
    /// The path; with `{param}` segments, every distinct path is an instance of its own (its own body and version).
    package var path: PathPattern
    package var body: ResourceBody
    package var contentType: String
    package var etag: ETagStrength?
    /// Last-Modified: nil to send none; otherwise the first version's date (Unix seconds), or `loadedAt − 60 s`
    /// when `automatic`.
    package var lastModified: LastModifiedSetting
    package var cacheControl: String?
    /// `Expires` this many seconds after the response.
    package var expiresAfterSeconds: Int?
    package var vary: String?
    /// Of PUT, PATCH, DELETE: the writes the resource accepts (GET and HEAD always work).
    package var writeMethods: [String]
    /// Unconditional writes get 428 Precondition Required (RFC 6585 §3).
    package var requireConditional: Bool
    /// The deviations every response of the resource commits.
    package var deviations: [ResourceDeviation]

    package init(id: String, path: PathPattern, body: ResourceBody, contentType: String) {
        self.id = id
        self.path = path
        self.body = body
        self.contentType = contentType
        etag = .strong
        lastModified = .automatic
        writeMethods = []
        requireConditional = false
        deviations = []
    }
}

/// A resource's first body.
package enum ResourceBody: Sendable, Equatable {
    case bytes([UInt8])
    /// `size` bytes made from the scenario's seed, the resource id, the instance and its version: a large
    /// download that costs no memory, different after every change.
    case generated(size: Int)
    /// No representation until a PUT creates one (GET answers 404).
    case absent
}

package enum ETagStrength: String, Sendable, Equatable {
    case strong, weak
}

package enum LastModifiedSetting: Sendable, Equatable {
    case none
    case automatic
    case fixed(unixSeconds: Int64)
}

/// What a real server gets wrong, on purpose (ARCHITECTURE §4b). Each changes what a correct client must do.
package enum ResourceDeviation: String, Sendable, Equatable, CaseIterable {
    /// Range is ignored: a full 200, with `Accept-Ranges: bytes` still announced.
    case ignoreRange = "ignore-range"
    /// A 206 whose Content-Range names another range than the bytes it carries (it claims to start at 0, or at
    /// 1 when the range does start at 0).
    case wrongContentRange = "wrong-content-range"
    /// Every response carries a new ETag (as a cluster whose nodes make their own): If-Range and If-None-Match
    /// never match, so a resume comes back a full 200 and a revalidation a full 200.
    case unstableETag = "unstable-etag"
    /// A 206 carries the weak form of the ETag, which If-Range may not use (RFC 9110 §13.1.5).
    case weakETagOn206 = "weak-etag-on-206"
    /// No `Accept-Ranges` (ranges are still honoured).
    case noAcceptRanges = "no-accept-ranges"
    /// No ETag, only Last-Modified.
    case lastModifiedOnly = "last-modified-only"
    /// A 304 without the ETag RFC 9110 §15.4.5 requires.
    case notModifiedWithoutETag = "304-without-etag"
    /// A 304 whose headers differ from the 200's: `Content-Length: 0`, another Cache-Control and Content-Type.
    case notModifiedChangedHeaders = "304-changed-headers"
    /// If-None-Match and If-Modified-Since are ignored: a full 200 where a 304 was due.
    case ignoreIfNoneMatch = "ignore-if-none-match"
    /// No `Date` on any answer (RFC 9110 §6.6.1 requires it): a cache must then take the time it received the
    /// answer as its date (RFC 9111 §4.2.3) and still compute freshness and age.
    case noDate = "no-date"
}

/// A route step that serves a resource (`{"resource": "ID"}`): the resource's answer, with the step's delay,
/// fault, extra deviations and effects.
package struct ResourceReference: Sendable, Equatable {
    package var id: String
    package var deviations: [ResourceDeviation]

    package init(id: String, deviations: [ResourceDeviation] = []) {
        self.id = id
        self.deviations = deviations
    }
}
