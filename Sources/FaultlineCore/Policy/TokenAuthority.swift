/// A scenario's bearer-token auth (ARCHITECTURE §6): which paths need a token, how tokens expire, and how the token
/// endpoint behaves, so a client's 401 → refresh → retry path can be exercised and judged.
package struct AuthConfig: Sendable, Equatable {
    /// `POST` here issues the next token (OAuth 2.0 token endpoint, RFC 6749 §5.1).
    package var tokenPath: String
    package var initialToken: String
    /// Path prefixes that need `Authorization: Bearer <current token>`.
    package var protect: [String]
    /// The current token stops working after this many accepted requests.
    package var expireAfterUses: Int?
    /// The current token stops working this long after it was issued.
    package var expireAfterMilliseconds: Int?
    /// `expires_in` reported by the token endpoint, in seconds.
    package var expiresInSeconds: Int
    /// Issue a new refresh token with every access token; a refresh token that was already used is then
    /// rejected with 400 `invalid_grant` (RFC 6749 §5.2, refresh-token rotation).
    package var rotateRefreshTokens: Bool
    package var initialRefreshToken: String?
    /// Steps the token endpoint plays before (and instead of) issuing: a delay, a 5xx, a fault. A step with a
    /// 2xx status and no body issues a token (after its delay).
    package var refreshSteps: [ResponseStep]

    package init(
        tokenPath: String = "/oauth/token", initialToken: String = "token-1", protect: [String] = [],
        expireAfterUses: Int? = nil, expireAfterMilliseconds: Int? = nil, expiresInSeconds: Int = 3600,
        rotateRefreshTokens: Bool = false, initialRefreshToken: String? = nil, refreshSteps: [ResponseStep] = []
    ) {
        self.tokenPath = tokenPath
        self.initialToken = initialToken
        self.protect = protect
        self.expireAfterUses = expireAfterUses
        self.expireAfterMilliseconds = expireAfterMilliseconds
        self.expiresInSeconds = expiresInSeconds
        self.rotateRefreshTokens = rotateRefreshTokens
        self.initialRefreshToken = initialRefreshToken
        self.refreshSteps = refreshSteps
    }
}

/// The server's token state: the current access token, how it expires, the refresh tokens, and the counters
/// that judge a client's refresh behaviour (how many refreshes, how many at once, how many stale tokens).
package struct TokenAuthority: Sendable {
    /// Why a protected request was turned away.
    package enum Rejection: String, Sendable, Equatable {
        /// No `Authorization: Bearer …` at all.
        case missing
        /// A token this server issued earlier, since replaced or expired: the client did not refresh.
        case stale
        /// Never issued by this server.
        case unknown
    }

    package let config: AuthConfig
    package private(set) var currentToken: String
    package private(set) var currentRefreshToken: String?
    private var issued: Set<String>
    private var usedRefreshTokens: Set<String> = []
    private var issuedAtMilliseconds: UInt64
    private var uses = 0
    private var expired = false
    private var generation = 1
    package private(set) var refreshCalls = 0
    package private(set) var refreshesInFlight = 0
    package private(set) var maxRefreshesInFlight = 0
    package private(set) var tokensIssued = 0
    package private(set) var staleTokenRequests = 0
    package private(set) var missingTokenRequests = 0
    package private(set) var acceptedRequests = 0
    package private(set) var invalidGrants = 0

    package init(config: AuthConfig, nowMilliseconds: UInt64) {
        self.config = config
        currentToken = config.initialToken
        currentRefreshToken = config.initialRefreshToken ?? (config.rotateRefreshTokens ? "refresh-1" : nil)
        issued = [config.initialToken]
        issuedAtMilliseconds = nowMilliseconds
    }

    /// Whether `path` needs a token.
    package func protects(_ path: String) -> Bool {
        config.protect.contains { path.hasPrefix($0) }
    }

    /// Checks `Authorization` (RFC 6750 §2.1) and counts the use. Nil when the request may proceed.
    package mutating func authorize(_ authorization: String?, nowMilliseconds: UInt64) -> Rejection? {
        expireIfDue(nowMilliseconds)
        guard let authorization, let token = Self.bearerToken(authorization) else {
            missingTokenRequests += 1
            return .missing
        }
        guard token == currentToken, !expired else {
            if issued.contains(token) {
                staleTokenRequests += 1
                return .stale
            }
            return .unknown
        }
        uses += 1
        acceptedRequests += 1
        if let limit = config.expireAfterUses, uses >= limit { expired = true }
        return nil
    }

    private mutating func expireIfDue(_ now: UInt64) {
        if let lifetime = config.expireAfterMilliseconds, now >= issuedAtMilliseconds + UInt64(lifetime) {
            expired = true
        }
    }

    /// The token in a `Bearer` credential, scheme matched case-insensitively (RFC 9110 §11.1).
    static func bearerToken(_ authorization: String) -> String? {
        let trimmed = authorization.trimmingWhitespace()
        guard trimmed.count > 7, trimmed.prefix(7).caseInsensitiveEquals("bearer ") else { return nil }
        let token = trimmed.dropFirst(7).trimmingWhitespace()
        return token.isEmpty ? nil : token
    }

    // MARK: - Refresh

    /// A call to the token endpoint began; it is in flight until `refreshFinished()`.
    package mutating func refreshStarted() {
        refreshCalls += 1
        refreshesInFlight += 1
        maxRefreshesInFlight = max(maxRefreshesInFlight, refreshesInFlight)
    }

    package mutating func refreshFinished() {
        refreshesInFlight = max(0, refreshesInFlight - 1)
    }

    /// What the token endpoint answers to a grant (RFC 6749 §5.1 success, §5.2 error).
    package enum Grant: Sendable, Equatable {
        case issued(JSONValue)
        case invalidGrant(String)
    }

    /// Issues the next token for a token request body (form-encoded or JSON). With rotation, a
    /// `refresh_token` grant must present the current refresh token.
    package mutating func grant(body: [UInt8], contentType: String?, nowMilliseconds: UInt64) -> Grant {
        let parameters = Self.parameters(body, contentType: contentType)
        if config.rotateRefreshTokens, parameters["grant_type"] == "refresh_token" {
            let presented = parameters["refresh_token"]
            guard let presented, presented == currentRefreshToken, !usedRefreshTokens.contains(presented) else {
                invalidGrants += 1
                let reason = presented.map { usedRefreshTokens.contains($0) ? "refresh token \($0) was already used" : "unknown refresh token \($0)" }
                    ?? "refresh_token is missing"
                return .invalidGrant(reason)
            }
            usedRefreshTokens.insert(presented)
        }
        issue(nowMilliseconds: nowMilliseconds)
        var members: [(key: String, value: JSONValue)] = [
            ("access_token", .string(currentToken)),
            ("token_type", .string("Bearer")),
            ("expires_in", .int(config.expiresInSeconds)),
        ]
        if let refresh = currentRefreshToken { members.append(("refresh_token", .string(refresh))) }
        return .issued(.object(members))
    }

    /// Replaces the current token (the `rotate-token` effect, and every successful grant).
    package mutating func issue(nowMilliseconds: UInt64) {
        generation += 1
        currentToken = "token-\(generation)"
        issued.insert(currentToken)
        tokensIssued += 1
        uses = 0
        expired = false
        issuedAtMilliseconds = nowMilliseconds
        if config.rotateRefreshTokens { currentRefreshToken = "refresh-\(generation)" }
    }

    /// Makes the current token stop working now (the `expire-token` effect and the admin call).
    package mutating func expire() {
        expired = true
    }

    static func parameters(_ body: [UInt8], contentType: String?) -> [String: String] {
        let text = String(decoding: body, as: UTF8.self)
        if contentType?.lowercased().contains("json") == true || text.hasPrefix("{") {
            guard case .object(let members)? = try? JSONValue.parse(body) else { return [:] }
            var result: [String: String] = [:]
            for member in members {
                if case .string(let value) = member.value { result[member.key] = value }
            }
            return result
        }
        var result: [String: String] = [:]
        for (name, value) in PercentDecoding.queryParameters(text) where result[name] == nil { result[name] = value }
        return result
    }

    /// For `GET /__faultline/state`.
    package func stateJSON(nowMilliseconds: UInt64) -> JSONValue {
        var expiresIn: JSONValue = .null
        if let lifetime = config.expireAfterMilliseconds {
            let end = issuedAtMilliseconds + UInt64(lifetime)
            expiresIn = .int(end > nowMilliseconds ? Int(end - nowMilliseconds) : 0)
        }
        return .object([
            ("currentToken", .string(currentToken)),
            ("currentTokenExpired", .bool(expired)),
            ("currentTokenUses", .int(uses)),
            ("currentTokenExpiresInMs", expiresIn),
            ("currentRefreshToken", currentRefreshToken.map(JSONValue.string) ?? .null),
            ("tokenPath", .string(config.tokenPath)),
            ("protect", .array(config.protect.map(JSONValue.string))),
            ("refreshCalls", .int(refreshCalls)),
            ("refreshesInFlight", .int(refreshesInFlight)),
            ("maxRefreshesInFlight", .int(maxRefreshesInFlight)),
            ("tokensIssued", .int(tokensIssued)),
            ("acceptedRequests", .int(acceptedRequests)),
            ("staleTokenRequests", .int(staleTokenRequests)),
            ("missingTokenRequests", .int(missingTokenRequests)),
            ("invalidGrants", .int(invalidGrants)),
        ])
    }
}
