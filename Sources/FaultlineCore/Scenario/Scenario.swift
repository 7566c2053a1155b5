/// One scenario file, validated: the routes it scripts and the seed that makes its randomness reproducible.
public struct Scenario: Sendable, Equatable {
    public var name: String
    package var description: String?
    /// Seeds every random choice the scenario makes (delay distributions, chaos). Default 0.
    package var seed: UInt64
    package var routes: [Route]
    /// The file it came from, or a label such as `<admin upload>` for scenarios that came without one.
    package var sourceFile: String
    /// The folder that `file` bodies are confined to; nil when the scenario came without a folder.
    package var directory: String?
    /// How the server treats kept-alive connections while this scenario is loaded.
    package var connections: ConnectionPolicy?
    /// Bearer-token auth for protected paths, with a token endpoint (ARCHITECTURE §6).
    package var auth: AuthConfig?
    /// Rate limits, checked in order before route matching (ARCHITECTURE §6).
    package var rateLimits: [ScopedRateLimit] = []
    /// The client behaviour the report judges (ARCHITECTURE §8).
    package var expect: Expectations?
    /// How handshakes on the TLS port go while this scenario is loaded.
    package var tls: TLSSection?
    /// What HTTP/2 connections announce while this scenario is loaded (`http2`).
    package var http2: HTTP2Plan?
    /// Versioned resources: conditional requests, ranges and writes (ARCHITECTURE §4b).
    package var resources: [ResourceSpec] = []
    /// Forward to a real upstream (ARCHITECTURE §4d): the `proxy` steps of its routes and, unless `unmatched`
    /// says 404, the requests no route takes.
    package var proxy: ProxyConfig?
    /// Network phases (ARCHITECTURE §3b): listener states, connection drops and freezes, conditions, in order.
    package var timeline: [TimelinePhase] = []

    package init(
        name: String, description: String? = nil, seed: UInt64 = 0, routes: [Route],
        sourceFile: String = "<inline>", directory: String? = nil, connections: ConnectionPolicy? = nil
    ) {
        self.name = name
        self.description = description
        self.seed = seed
        self.routes = routes
        self.sourceFile = sourceFile
        self.directory = directory
        self.connections = connections
    }
}

/// A rate limit and the requests it counts: those whose path matches `path` (all requests when nil).
package struct ScopedRateLimit: Sendable, Equatable {
    package var rule: RateLimitRule
    package var path: PathPattern?

    package init(rule: RateLimitRule, path: PathPattern? = nil) {
        self.rule = rule
        self.path = path
    }
}

/// A route's idempotency-key handling: `{"header": "Idempotency-Key", "required": true, "expiresMs": …}`.
package struct IdempotencyConfig: Sendable, Equatable {
    package var header: String
    /// A request without the key gets 400 (problem+json) instead of running the route.
    package var required: Bool
    package var expiryMilliseconds: Int
    /// The statuses whose responses are stored under the key (`storeStatuses`); nil for the default, every
    /// status but 429 and 5xx: those say the request was not processed, so the key stays free for the retry.
    package var storeStatuses: Set<Int>?

    /// Whether a response with `status` is stored under its key and replayed to retries.
    package func stores(_ status: Int) -> Bool {
        storeStatuses?.contains(status) ?? (status != 429 && status < 500)
    }

    package init(header: String = "Idempotency-Key", required: Bool = false, expiryMilliseconds: Int = 86_400_000) {
        self.header = header
        self.required = required
        self.expiryMilliseconds = expiryMilliseconds
    }
}

/// A change a step makes to the server's policy state when it is played.
package enum StepEffect: Sendable, Equatable {
    /// The current access token stops working.
    case expireToken
    /// A new access token replaces the current one (the client's becomes stale).
    case rotateToken
    /// Empties one rate limit's buckets (by id), or all of them when nil.
    case resetBuckets(String?)
    /// Every instance of the resource gets a new version (`change-resource:ID`), or loses its representation
    /// (`delete-resource:ID`).
    case changeResource(String, delete: Bool)
}

/// Connection-level faults (ARCHITECTURE §5, `idle-close`): what a real server or a proxy in front of it does to
/// kept-alive connections, which is where clients' connection-reuse bugs hide.
package struct ConnectionPolicy: Sendable, Equatable {
    /// Close a kept-alive connection after this many requests, without announcing it with
    /// `Connection: close` (as servers with a keep-alive request limit do).
    package var maxRequests: Int?
    /// Close a kept-alive connection once it has sat idle this long: the stale keep-alive race, where the
    /// client sends its next request just as the server closes.
    package var idleCloseMilliseconds: Int?

    package init(maxRequests: Int? = nil, idleCloseMilliseconds: Int? = nil) {
        self.maxRequests = maxRequests
        self.idleCloseMilliseconds = idleCloseMilliseconds
    }
}

/// Why the server closed a connection on its own, after a complete response: the connection policy. Marked
/// on the response that was the connection's last, so a test can prove the stale keep-alive race.
public enum PolicyClose: String, Sendable, Equatable {
    /// `connections.maxRequests`: the connection served its last request.
    case maxRequests = "max-requests"
    /// `connections.idleCloseMs`: the kept-alive connection sat idle too long.
    case idleClose = "idle-close"
}

/// A route: which requests it takes and the script of responses it plays to them.
package struct Route: Sendable, Equatable {
    package var id: String
    package var match: RouteMatch
    /// The protocols the route serves (`"protocols"`); nil: every protocol its faults can be rendered on. A
    /// request over another protocol is refused, never answered with a fault the protocol cannot carry: over
    /// HTTP/2 with RST_STREAM HTTP_1_1_REQUIRED (RFC 9113 §7), over HTTP/1.1 with 505.
    package var protocols: Set<ExchangeProtocol>?
    package var responses: [ResponseStep]
    package var afterLast: AfterLast
    /// When set, each distinct value of this part of the request has its own cursor into `responses`.
    package var sequenceBy: SequenceKey?
    /// Seeded random failures on top of the script.
    package var chaos: ChaosSpec?
    /// Idempotency-key handling for the route (IETF httpapi idempotency-key draft).
    package var idempotency: IdempotencyConfig?
    /// The proxy settings of the route's `proxy` steps, over its scenario's (ARCHITECTURE §4d).
    package var proxy: ProxyConfig?

    /// The protocols the route serves: `protocols`, or those on which every fault it uses exists.
    package var servedProtocols: Set<ExchangeProtocol> {
        if let protocols { return protocols }
        var served = Set(ExchangeProtocol.allCases)
        for step in responses { if let fault = step.fault { served.formIntersection(fault.name.protocols) } }
        // A WebSocket is an HTTP/1.1 upgrade (RFC 8441's HTTP/2 CONNECT is not served).
        if responses.contains(where: \.isWebSocket) { served.formIntersection([.http1]) }
        for case .fault(let spec) in chaos?.outcomes ?? [] { served.formIntersection(spec.name.protocols) }
        return served
    }

    package init(
        id: String, match: RouteMatch, responses: [ResponseStep], afterLast: AfterLast = .repeatLast,
        sequenceBy: SequenceKey? = nil, chaos: ChaosSpec? = nil
    ) {
        self.id = id
        self.match = match
        self.responses = responses
        self.afterLast = afterLast
        self.sequenceBy = sequenceBy
        self.chaos = chaos
    }
}

/// `"chaos": {"rate": 0.2, "faults": ["reset", "status:503"]}`: that fraction of the route's requests fails
/// with one of the listed outcomes, chosen from the scenario's seed, so the same seed gives the same failures
/// in the same order. A request chaos takes does not advance the route's script.
package struct ChaosSpec: Sendable, Equatable {
    /// Between 0 and 1.
    package var rate: Double
    package var outcomes: [ChaosOutcome]

    package init(rate: Double, outcomes: [ChaosOutcome]) {
        self.rate = rate
        self.outcomes = outcomes
    }
}

/// One way chaos may fail a request.
package enum ChaosOutcome: Sendable, Equatable, CustomStringConvertible {
    /// The scripted step's response, broken by this fault.
    case fault(FaultSpec)
    /// A plain error response with this status (`"status:503"`).
    case status(Int)

    package var description: String {
        switch self {
        case .fault(let spec): return spec.name.rawValue
        case .status(let code): return "status:\(code)"
        }
    }
}

/// A named fault and its parameters (ARCHITECTURE §5). Written `"fault": "reset"` or, with parameters,
/// `"fault": {"type": "half-close", "after": "headers"}`.
package struct FaultSpec: Sendable, Equatable {
    package var name: FaultName
    /// A byte count whose meaning depends on the fault: `truncate-body` body bytes sent before closing
    /// (default half the body); `overlong-body` extra bytes after the body (default 38); `garbage` bytes sent
    /// (default 64–512, seeded); `half-close` with `after: body` the body bytes sent before FIN (default half).
    package var bytes: Int?
    /// `half-close` only: what precedes the FIN.
    package var after: HalfCloseAfter
    /// `malformed-chunk` only: how the chunked framing is broken.
    package var chunkBreak: ChunkBreak
    /// `rst-stream` and `goaway`: the HTTP/2 error code (`rst-stream` default INTERNAL_ERROR, `goaway` NO_ERROR).
    package var code: HTTP2ErrorCode?
    /// `goaway` only: the last stream id it names, and whether a shutdown notice goes first.
    package var lastStream: GoawayLastStream = .previous
    package var graceful = false
    /// `raw-frames` only: bytes written as they are (`base64`), or hand-made frames (`preset`).
    package var rawBytes: [UInt8] = []
    package var frames: [HTTP2RawFrame] = []

    package init(_ name: FaultName, bytes: Int? = nil, after: HalfCloseAfter = .nothing, chunkBreak: ChunkBreak = .badSize) {
        self.name = name
        self.bytes = bytes
        self.after = after
        self.chunkBreak = chunkBreak
    }
}

extension FaultSpec {
    /// The body bytes a fault that cuts a body short sends of a body of `length` (`truncate-body`, `rst-stream`
    /// after the body): `bytes`, by default half, and never the whole body, which would not be cut. One definition
    /// for the planner's slices and a streamed proxy body's count (`ProxyPlan.streamOpening`).
    package func cutPrefix(ofBodyLength length: Int) -> Int {
        min(bytes ?? length / 2, max(length - 1, 0))
    }
}

/// What a `half-close` sends before shutting down its writing side.
package enum HalfCloseAfter: String, Sendable, Equatable, CaseIterable {
    /// FIN straight after reading the request.
    case nothing
    /// The complete header section, then FIN.
    case headers
    /// The headers and `bytes` bytes of the body, then FIN.
    case body
}

/// How `malformed-chunk` breaks chunked framing (RFC 9112 §7.1).
package enum ChunkBreak: String, Sendable, Equatable, CaseIterable {
    /// The first chunk size is not hexadecimal.
    case badSize = "bad-size"
    /// A chunk's data is not followed by CRLF.
    case missingCRLF = "missing-crlf"
    /// The body ends (connection closed) without the terminating zero-size chunk.
    case missingTerminator = "missing-terminator"
}

/// What a route does once every step of its script has been played.
package enum AfterLast: String, Sendable, Equatable {
    /// Keep answering with the last step (the default).
    case repeatLast = "repeat-last"
    /// Start the script again from the first step.
    case cycle
    /// Answer 500 with a JSON body saying the script ran out.
    case fail
}

/// The part of a request that separates script cursors: `header:X-Test-Case`, `query:session`, `path:id`.
package enum SequenceKey: Sendable, Equatable {
    case header(String)
    case query(String)
    case pathParameter(String)
}

/// The conditions a request must meet to be taken by a route. Every condition given must hold.
package struct RouteMatch: Sendable, Equatable {
    /// Upper-cased methods; empty means any method.
    package var methods: [String]
    package var path: PathPattern?
    /// Query parameter name → condition on its (percent-decoded) value.
    package var query: [(name: String, matcher: ValueMatcher)]
    /// Header name (as written) → condition on its value. Names are compared ignoring case.
    package var headers: [(name: String, matcher: ValueMatcher)]
    package var body: BodyMatcher?

    package init(
        methods: [String] = [], path: PathPattern? = nil, query: [(name: String, matcher: ValueMatcher)] = [],
        headers: [(name: String, matcher: ValueMatcher)] = [], body: BodyMatcher? = nil
    ) {
        self.methods = methods
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    package static func == (lhs: RouteMatch, rhs: RouteMatch) -> Bool {
        lhs.methods == rhs.methods && lhs.path == rhs.path && lhs.body == rhs.body
            && lhs.query.map(\.name) == rhs.query.map(\.name) && lhs.query.map(\.matcher) == rhs.query.map(\.matcher)
            && lhs.headers.map(\.name) == rhs.headers.map(\.name)
            && lhs.headers.map(\.matcher) == rhs.headers.map(\.matcher)
    }
}

/// A path template such as `/v1/products/{id}`. With `isPrefix`, the template must match the leading
/// segments of the request path and anything may follow.
package struct PathPattern: Sendable, Equatable {
    package enum Segment: Sendable, Equatable {
        case literal(String)
        /// Matches exactly one non-empty segment and captures it under this name.
        case parameter(String)
    }

    package var segments: [Segment]
    package var isPrefix: Bool
    /// The template as written in the scenario, for messages.
    package var source: String
    /// For an exact path without parameters (`/v1/items`): the decoded path itself, which a request path
    /// without percent-escapes can be compared with whole, without splitting it into segments.
    package let literalPath: String?

    /// Whether any segment is a `{param}`.
    package var hasParameters: Bool { segments.contains { if case .parameter = $0 { true } else { false } } }

    package init(segments: [Segment], isPrefix: Bool, source: String) {
        self.segments = segments
        self.isPrefix = isPrefix
        self.source = source
        var literals: [String] = []
        for segment in segments {
            guard case .literal(let text) = segment else { break }
            literals.append(text)
        }
        literalPath = !isPrefix && literals.count == segments.count && !segments.isEmpty
            ? "/" + literals.joined(separator: "/") : nil
    }
}

/// A condition on a single string value (a header or a query parameter).
package enum ValueMatcher: Sendable, Equatable {
    case equals(String)
    case contains(String)
    /// A regular expression, compiled when the scenario is loaded; must match somewhere.
    case regex(CompiledRegex)
    case present
    case absent
}

/// A condition on the request body.
package enum BodyMatcher: Sendable, Equatable {
    case equals(String)
    case contains(String)
    /// The body parses as JSON and contains this value: objects recursively by key, everything else equal.
    case jsonSubset(JSONValue)
}

/// One step of a route's script.
package struct ResponseStep: Sendable, Equatable {
    package var status: Int
    /// Header fields in the order written. Values may hold templates.
    package var headers: [(name: String, value: String)]
    package var body: StepBody
    package var delay: DelaySpec?
    package var drip: DripSpec?
    package var fault: FaultSpec?
    /// How many consecutive requests this step answers before the script moves on. At least 1.
    package var times: Int
    /// Close the connection after this response, sending `Connection: close`.
    package var closeConnection: Bool
    /// Policy-state changes applied when this step is played.
    package var effects: [StepEffect] = []
    /// What answers the request: the step's own status and body, a resource, a WebSocket session or the upstream.
    package var kind: StepKind = .plain
    /// Send the server's `Date` (RFC 9110 §6.6.1) when `headers` set none: true by default; `"date": false` sends
    /// none at all (on a `proxy` step, the upstream's goes too), for a client that must cope with its absence.
    package var date = true

    package init(
        status: Int = 200, headers: [(name: String, value: String)] = [], body: StepBody = .empty,
        delay: DelaySpec? = nil, drip: DripSpec? = nil, fault: FaultSpec? = nil, times: Int = 1,
        closeConnection: Bool = false
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.delay = delay
        self.drip = drip
        self.fault = fault
        self.times = times
        self.closeConnection = closeConnection
    }

    package static func == (lhs: ResponseStep, rhs: ResponseStep) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body && lhs.delay == rhs.delay && lhs.drip == rhs.drip
            && lhs.fault == rhs.fault && lhs.times == rhs.times && lhs.closeConnection == rhs.closeConnection
            && lhs.effects == rhs.effects && lhs.kind == rhs.kind && lhs.date == rhs.date
            && lhs.headers.map(\.name) == rhs.headers.map(\.name)
            && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }
}

/// What a route step answers with (`ResponseStep.kind`): one of these, never two.
package enum StepKind: Sendable, Equatable {
    /// The step's own status, headers and body (the default).
    case plain
    /// A resource's answer (`{"resource": "ID"}`): the resource decides status and body (ARCHITECTURE §4b).
    case resource(ResourceReference)
    /// A WebSocket upgrade, then a session (`{"websocket": {…}}`): 101, or the refusal the RFC asks for (§4c).
    case websocket(WebSocketSpec)
    /// The upstream's response to the forwarded request (`"proxy": true`), after the step's delay and with its
    /// headers and fault applied (ARCHITECTURE §4d).
    case proxy
}

extension ResponseStep {
    /// The step accepts a WebSocket upgrade (`kind` is `.websocket`): the route serves HTTP/1.1 only.
    package var isWebSocket: Bool {
        if case .websocket = kind { return true }
        return false
    }
}

/// A step's body. Templates (`{{path.id}}`) are expanded in `json` strings and in `text`.
package enum StepBody: Sendable, Equatable {
    case empty
    case json(JSONValue)
    case text(String)
    /// Raw bytes from `base64`. Not templated.
    case bytes([UInt8])
    /// Bytes of a file inside the scenario's folder, read at load time. Not templated.
    case file(path: String, bytes: [UInt8])
}

/// How long to wait before the response's first byte.
package enum DelaySpec: Sendable, Equatable {
    case fixed(milliseconds: Int)
    /// Uniform over [min, max] milliseconds.
    case uniform(min: Int, max: Int)
    /// Log-normal with the given median (ms) and shape sigma; heavy-tailed like real latencies.
    case logNormal(medianMilliseconds: Double, sigma: Double)
}

/// Send the body in pieces: `size` bytes every `intervalMilliseconds`.
package struct DripSpec: Sendable, Equatable {
    package var size: Int
    package var intervalMilliseconds: Int

    package init(size: Int, intervalMilliseconds: Int) {
        self.size = size
        self.intervalMilliseconds = intervalMilliseconds
    }
}
