/// What took a request: one of the scenarios' routes, or one of the policy layer's own answers.
///
/// The engine sets it on `Decision.route` and the journal keeps it on `JournalEntry.route`; the verdicts and the
/// report join on these cases, never on text, so a route a scenario happens to name `auth:token` or
/// `rate-limit:x` is still a route. `description` is the one place the journal's text for it is made.
public enum DecisionSource: Sendable, Hashable, CustomStringConvertible {
    /// The scenario route with this id.
    case route(String)
    /// The auth policy's token endpoint (`auth.tokenPath`); the journal prints it `auth:token`.
    case tokenEndpoint
    /// A 429 or 503 answered by the rate-limit rule with this id; the journal prints it `rate-limit:ID`.
    case rateLimit(String)
    /// The resource with this id, matched by its own path (no route took the request); printed `resource:ID`.
    case resource(String)
    /// A 503 the server answered because its connection limit was reached (`serve --max-connections`): the
    /// request came on a connection accepted past the limit. Printed `connection-limit`.
    case connectionLimit

    /// The journal's `route` field (JSON, NDJSON, HAR `_route`, the request log) and what `JournalFilter.route`
    /// (`?route=` on the admin API) is compared with.
    public var description: String {
        switch self {
        case .route(let id): return id
        case .tokenEndpoint: return "auth:token"
        case .rateLimit(let id): return "rate-limit:\(id)"
        case .resource(let id): return "resource:\(id)"
        case .connectionLimit: return "connection-limit"
        }
    }

    /// The id of the scenario route that took the request; nil for the policy layer's own answers.
    public var routeID: String? {
        if case .route(let id) = self { return id }
        return nil
    }

    /// Reads back a journal `route` field (`description`) for an entry decoded from JSON. `scenario` is the
    /// entry's scenario: a scenario route's entries always name one, the policy layer's never do, which is what
    /// tells a route called `auth:token` from the token endpoint.
    /// `resource` is the id in the entry's `resource` record: `resource:ID` with it is the resource itself.
    package init(journalText text: String, scenario: String?, resource: String? = nil) {
        if let resource, text == DecisionSource.resource(resource).description {
            self = .resource(resource)
        } else if scenario == nil, text == DecisionSource.tokenEndpoint.description {
            self = .tokenEndpoint
        } else if scenario == nil, text.hasPrefix("rate-limit:") {
            self = .rateLimit(String(text.dropFirst("rate-limit:".count)))
        } else if scenario == nil, text == DecisionSource.connectionLimit.description {
            self = .connectionLimit
        } else {
            self = .route(text)
        }
    }
}

/// Which policy layer answered a request instead of a route's script (`JournalEntry.answeredBy`, the journal's
/// `answeredBy`). Auth's 401 keeps the request under the route it matched (`route`), or unmatched when none did;
/// a rate limit's 429/503 is under the route `rate-limit:ID` (`DecisionSource.rateLimit`).
public enum PolicyAnswer: Sendable, Hashable, CustomStringConvertible {
    /// Auth refused the request's bearer token: 401. The journal prints it `auth`.
    case auth
    /// The rate-limit rule with this id turned the request away: 429 or 503. The journal prints it `rate-limit:ID`.
    case rateLimit(String)
    /// The server's connection limit (`serve --max-connections`): 503 on a connection accepted past it. The journal
    /// prints it `connection-limit`.
    case connectionLimit

    public var description: String {
        switch self {
        case .auth: return "auth"
        case .rateLimit(let id): return "rate-limit:\(id)"
        case .connectionLimit: return "connection-limit"
        }
    }

    /// Reads back the journal's `answeredBy` text (`description`).
    public init?(journalText text: String) {
        if text == "auth" {
            self = .auth
        } else if text == "connection-limit" {
            self = .connectionLimit
        } else if text.hasPrefix("rate-limit:") {
            self = .rateLimit(String(text.dropFirst("rate-limit:".count)))
        } else {
            return nil
        }
    }
}

/// One thing the engine recorded about a request, in the order it happened (`Decision.notes`, `JournalEntry.notes`).
///
/// Most are remarks for people to read; the ones a verdict counts have a case of their own, so that no rule
/// depends on the wording of a remark. `description` is the one place the journal's text for a note is made.
public enum JournalNote: Sendable, Hashable, CustomStringConvertible {
    /// What the policy layer did, in words: auth checks, rate limits, idempotency, Retry-After judgements.
    case remark(String)
    /// The side-effecting route with this id applied its effect (created a resource) for the request: what
    /// the `noDuplicateSideEffects` verdict counts. The journal prints it `side effect: ID created a resource`.
    case sideEffect(route: String)

    /// The note as the journal's `notes` array (JSON, NDJSON, HAR `_notes`) shows it.
    public var description: String {
        switch self {
        case .remark(let text): return text
        case .sideEffect(let route): return "side effect: \(route) created a resource"
        }
    }

    /// The route whose side effect this note records; nil for a remark.
    public var sideEffectRoute: String? {
        if case .sideEffect(let route) = self { return route }
        return nil
    }

    /// Reads back a note (`description`) for an entry decoded from JSON whose route is `source`: only the
    /// exact side-effect text of that entry's own route is taken as a side effect.
    package init(journalText text: String, source: DecisionSource?) {
        if let id = source?.routeID, text == JournalNote.sideEffect(route: id).description {
            self = .sideEffect(route: id)
        } else {
            self = .remark(text)
        }
    }
}
