/// One scenario file, validated: the routes it scripts and the seed that makes its randomness reproducible.
public struct Scenario: Sendable, Equatable {
    public var name: String
    public var description: String?
    /// Seeds every random choice the scenario makes (delay distributions, chaos). Default 0.
    public var seed: UInt64
    public var routes: [Route]
    /// The file it came from, or a label such as `<admin upload>` for scenarios that came without one.
    public var sourceFile: String
    /// The folder that `file` bodies are confined to; nil when the scenario came without a folder.
    public var directory: String?

    public init(
        name: String, description: String? = nil, seed: UInt64 = 0, routes: [Route],
        sourceFile: String = "<inline>", directory: String? = nil
    ) {
        self.name = name
        self.description = description
        self.seed = seed
        self.routes = routes
        self.sourceFile = sourceFile
        self.directory = directory
    }
}

/// A route: which requests it takes and the script of responses it plays to them.
public struct Route: Sendable, Equatable {
    public var id: String
    public var match: RouteMatch
    public var responses: [ResponseStep]
    public var afterLast: AfterLast
    /// When set, each distinct value of this part of the request has its own cursor into `responses`.
    public var sequenceBy: SequenceKey?

    public init(
        id: String, match: RouteMatch, responses: [ResponseStep], afterLast: AfterLast = .repeatLast,
        sequenceBy: SequenceKey? = nil
    ) {
        self.id = id
        self.match = match
        self.responses = responses
        self.afterLast = afterLast
        self.sequenceBy = sequenceBy
    }
}

/// What a route does once every step of its script has been played.
public enum AfterLast: String, Sendable, Equatable {
    /// Keep answering with the last step (the default).
    case repeatLast = "repeat-last"
    /// Start the script again from the first step.
    case cycle
    /// Answer 500 with a JSON body saying the script ran out.
    case fail
}

/// The part of a request that separates script cursors: `header:X-Test-Case`, `query:session`, `path:id`.
public enum SequenceKey: Sendable, Equatable {
    case header(String)
    case query(String)
    case pathParameter(String)
}

/// The conditions a request must meet to be taken by a route. Every condition given must hold.
public struct RouteMatch: Sendable, Equatable {
    /// Upper-cased methods; empty means any method.
    public var methods: [String]
    public var path: PathPattern?
    /// Query parameter name → condition on its (percent-decoded) value.
    public var query: [(name: String, matcher: ValueMatcher)]
    /// Header name (as written) → condition on its value. Names are compared ignoring case.
    public var headers: [(name: String, matcher: ValueMatcher)]
    public var body: BodyMatcher?

    public init(
        methods: [String] = [], path: PathPattern? = nil, query: [(name: String, matcher: ValueMatcher)] = [],
        headers: [(name: String, matcher: ValueMatcher)] = [], body: BodyMatcher? = nil
    ) {
        self.methods = methods
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    public static func == (lhs: RouteMatch, rhs: RouteMatch) -> Bool {
        lhs.methods == rhs.methods && lhs.path == rhs.path && lhs.body == rhs.body
            && lhs.query.map(\.name) == rhs.query.map(\.name) && lhs.query.map(\.matcher) == rhs.query.map(\.matcher)
            && lhs.headers.map(\.name) == rhs.headers.map(\.name)
            && lhs.headers.map(\.matcher) == rhs.headers.map(\.matcher)
    }
}

/// A path template such as `/v1/products/{id}`. With `isPrefix`, the template must match the leading
/// segments of the request path and anything may follow.
public struct PathPattern: Sendable, Equatable {
    public enum Segment: Sendable, Equatable {
        case literal(String)
        /// Matches exactly one non-empty segment and captures it under this name.
        case parameter(String)
    }

    public var segments: [Segment]
    public var isPrefix: Bool
    /// The template as written in the scenario, for messages.
    public var source: String

    public init(segments: [Segment], isPrefix: Bool, source: String) {
        self.segments = segments
        self.isPrefix = isPrefix
        self.source = source
    }
}

/// A condition on a single string value (a header or a query parameter).
public enum ValueMatcher: Sendable, Equatable {
    case equals(String)
    case contains(String)
    /// A regular expression (NSRegularExpression syntax), validated at load time; must match somewhere.
    case regex(String)
    case present
    case absent
}

/// A condition on the request body.
public enum BodyMatcher: Sendable, Equatable {
    case equals(String)
    case contains(String)
    /// The body parses as JSON and contains this value: objects recursively by key, everything else equal.
    case jsonSubset(JSONValue)
}

/// One step of a route's script.
public struct ResponseStep: Sendable, Equatable {
    public var status: Int
    /// Header fields in the order written. Values may hold templates.
    public var headers: [(name: String, value: String)]
    public var body: StepBody
    public var delay: DelaySpec?
    public var drip: DripSpec?
    public var fault: String?
    /// How many consecutive requests this step answers before the script moves on. At least 1.
    public var times: Int
    /// Close the connection after this response, sending `Connection: close`.
    public var closeConnection: Bool

    public init(
        status: Int = 200, headers: [(name: String, value: String)] = [], body: StepBody = .empty,
        delay: DelaySpec? = nil, drip: DripSpec? = nil, fault: String? = nil, times: Int = 1,
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

    public static func == (lhs: ResponseStep, rhs: ResponseStep) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body && lhs.delay == rhs.delay && lhs.drip == rhs.drip
            && lhs.fault == rhs.fault && lhs.times == rhs.times && lhs.closeConnection == rhs.closeConnection
            && lhs.headers.map(\.name) == rhs.headers.map(\.name)
            && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }
}

/// A step's body. Templates (`{{path.id}}`) are expanded in `json` strings and in `text`.
public enum StepBody: Sendable, Equatable {
    case empty
    case json(JSONValue)
    case text(String)
    /// Raw bytes from `base64`. Not templated.
    case bytes([UInt8])
    /// Bytes of a file inside the scenario's folder, read at load time. Not templated.
    case file(path: String, bytes: [UInt8])
}

/// How long to wait before the response's first byte.
public enum DelaySpec: Sendable, Equatable {
    case fixed(milliseconds: Int)
    /// Uniform over [min, max] milliseconds.
    case uniform(min: Int, max: Int)
    /// Log-normal with the given median (ms) and shape sigma; heavy-tailed like real latencies.
    case logNormal(medianMilliseconds: Double, sigma: Double)
}

/// Send the body in pieces: `size` bytes every `intervalMilliseconds`.
public struct DripSpec: Sendable, Equatable {
    public var size: Int
    public var intervalMilliseconds: Int

    public init(size: Int, intervalMilliseconds: Int) {
        self.size = size
        self.intervalMilliseconds = intervalMilliseconds
    }
}
