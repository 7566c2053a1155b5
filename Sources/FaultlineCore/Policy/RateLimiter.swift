/// How requests are grouped into buckets (ARCHITECTURE §6): each distinct key value gets its own quota.
package enum RateLimitKey: Sendable, Equatable {
    /// One bucket for every request.
    case global
    /// One bucket per client host (the peer address of the connection).
    case clientAddress
    /// One bucket per value of the named request header; a missing header is its own (empty) value.
    case header(String)
}

/// How a bucket spends and regains its quota.
package enum RateLimitAlgorithm: String, Sendable, Equatable, CaseIterable {
    /// `limit` requests per window; the first window opens at the bucket's first request and the next ones
    /// follow back to back every `windowMilliseconds`, whether or not requests arrive.
    case fixedWindow = "fixed-window"
    /// A bucket of `limit` tokens, refilled continuously at `limit` tokens per `windowMilliseconds`;
    /// each request takes one token.
    case tokenBucket = "token-bucket"
}

/// The two forms of `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
package enum RetryAfterFormat: String, Sendable, Equatable, CaseIterable {
    /// `Retry-After: 2`
    case seconds
    /// `Retry-After: Sun, 06 Nov 1994 08:49:39 GMT` (IMF-fixdate, RFC 9110 §5.6.7)
    case httpDate = "http-date"
}

/// One rate limit of a scenario: its quota, how buckets are keyed, and what a limited response says.
package struct RateLimitRule: Sendable, Equatable {
    /// Names the policy in the `RateLimit-Policy` and `RateLimit` fields.
    package var id: String
    /// Requests per window (fixed window) or bucket capacity (token bucket).
    package var limit: Int
    /// The window length, or the time a token bucket takes to refill from empty to full.
    package var windowMilliseconds: Int
    package var algorithm: RateLimitAlgorithm
    package var key: RateLimitKey
    package var retryAfter: RetryAfterFormat
    /// Add the IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers) to every
    /// response the rule counts, allowed or limited.
    package var rateLimitHeaders: Bool
    /// The status of a limited response: 429 (RFC 6585 §4) normally, 503 (RFC 9110 §15.6.4) allowed.
    package var status: Int

    /// A rule; the defaults give a global fixed window answering 429 with `Retry-After` in delay-seconds.
    package init(
        id: String, limit: Int, windowMilliseconds: Int, algorithm: RateLimitAlgorithm = .fixedWindow,
        key: RateLimitKey = .global, retryAfter: RetryAfterFormat = .seconds, rateLimitHeaders: Bool = false,
        status: Int = 429
    ) {
        self.id = id
        self.limit = limit
        self.windowMilliseconds = windowMilliseconds
        self.algorithm = algorithm
        self.key = key
        self.retryAfter = retryAfter
        self.rateLimitHeaders = rateLimitHeaders
        self.status = status
    }
}

/// What the rate limiter says about one request.
package enum RateLimitDecision: Sendable, Equatable {
    /// Allowed; `headers` are the RateLimit fields to add to the normal response (empty unless the rule has
    /// `rateLimitHeaders`).
    case allowed(headers: [(name: String, value: String)])
    /// Over the limit: answer `status` with these headers (`Retry-After` always, first; the RateLimit fields when
    /// enabled) and a JSON body; the client may retry after `retryAfterMilliseconds`, which is exactly what the
    /// `Retry-After` value means (whole seconds, or the time until the HTTP-date), not the unrounded wait.
    case limited(status: Int, retryAfterMilliseconds: Int, headers: [(name: String, value: String)])

    /// Equal when the cases, numbers and every header name and value (in order) are equal.
    package static func == (lhs: RateLimitDecision, rhs: RateLimitDecision) -> Bool {
        switch (lhs, rhs) {
        case let (.allowed(a), .allowed(b)):
            return sameHeaders(a, b)
        case let (.limited(statusA, waitA, a), .limited(statusB, waitB, b)):
            return statusA == statusB && waitA == waitB && sameHeaders(a, b)
        default:
            return false
        }
    }

    private static func sameHeaders(
        _ a: [(name: String, value: String)], _ b: [(name: String, value: String)]
    ) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }
}

/// The server's rate-limit state (ARCHITECTURE §6): one bucket per rule and key, counted with an injected monotonic
/// clock. Over the limit a request gets 429 (RFC 6585 §4) or 503 with `Retry-After` (RFC 9110 §10.2.3) and,
/// when enabled, the `RateLimit-Policy` and `RateLimit` fields of draft-ietf-httpapi-ratelimit-headers.
/// A limited request does not consume quota.
package struct RateLimiter: Sendable {
    /// The rules, in scenario order; `check(ruleIndex:…)` indexes into this.
    package private(set) var rules: [RateLimitRule]
    /// Per rule, the buckets by key.
    private var buckets: [[String: Bucket]]
    /// Per rule, bucket keys in the order they were first seen, so `stateJSON` is stable.
    private var keyOrder: [[String]]

    /// A limiter with empty buckets for `rules`.
    package init(rules: [RateLimitRule]) {
        self.rules = rules
        self.buckets = Array(repeating: [:], count: rules.count)
        self.keyOrder = Array(repeating: [], count: rules.count)
    }

    /// Counts one request against rule `ruleIndex` for the bucket `bucketKey` (the caller has already computed the
    /// key string from `RateLimitKey`: "" for global, the client host, or the header value) at monotonic time
    /// `nowMilliseconds`; `wallSeconds` is the Unix time, used only for an HTTP-date `Retry-After`
    /// (RFC 9110 §10.2.3).
    package mutating func check(
        ruleIndex: Int, bucketKey: String, nowMilliseconds: UInt64, wallSeconds: Double
    ) -> RateLimitDecision {
        guard rules.indices.contains(ruleIndex) else {
            assertionFailure("rate-limit rule index \(ruleIndex) out of range 0..<\(rules.count)")
            return .allowed(headers: [])
        }
        let rule = rules[ruleIndex]
        let quota = Quota(rule)
        var bucket = buckets[ruleIndex][bucketKey] ?? {
            keyOrder[ruleIndex].append(bucketKey)
            return Bucket(quota: quota, algorithm: rule.algorithm, now: nowMilliseconds)
        }()
        let outcome = bucket.take(quota: quota, now: nowMilliseconds)
        buckets[ruleIndex][bucketKey] = bucket

        switch outcome {
        case .allowed(let remaining, let resetMilliseconds):
            let headers = rule.rateLimitHeaders
                ? Self.rateLimitFields(rule, remaining: remaining, resetMilliseconds: resetMilliseconds)
                : []
            return .allowed(headers: headers)
        case .limited(let waitMilliseconds, let resetMilliseconds):
            let retryAfter = Self.retryAfter(
                waitMilliseconds: waitMilliseconds, format: rule.retryAfter, wallSeconds: wallSeconds)
            var headers = [(name: "Retry-After", value: retryAfter.value)]
            if rule.rateLimitHeaders {
                headers += Self.rateLimitFields(rule, remaining: 0, resetMilliseconds: resetMilliseconds)
            }
            return .limited(status: rule.status, retryAfterMilliseconds: retryAfter.milliseconds, headers: headers)
        }
    }

    /// Empties the buckets of one rule (by id; every rule with that id), or of all rules when nil — a step's
    /// `reset-bucket` effect or a scenario reset. An unknown id changes nothing.
    package mutating func reset(ruleID: String?) {
        for index in rules.indices where ruleID == nil || rules[index].id == ruleID {
            buckets[index] = [:]
            keyOrder[index] = []
        }
    }

    /// For `GET /__faultline/state`: an array with one object per rule — its settings and its buckets in the order
    /// first seen, each with `key`, `remaining` and `resetMs` as of `nowMilliseconds` (a fixed window's reset is
    /// the end of its current window; a token bucket's is the time until it is full again), `requests` (all
    /// requests counted, allowed or not) and `limited`.
    package func stateJSON(nowMilliseconds: UInt64) -> JSONValue {
        .array(rules.indices.map { index in
            let rule = rules[index]
            let quota = Quota(rule)
            let bucketValues: [JSONValue] = keyOrder[index].compactMap { key in
                guard let bucket = buckets[index][key] else { return nil }
                let (remaining, resetMilliseconds) = bucket.peek(quota: quota, now: nowMilliseconds)
                return .object([
                    ("key", .string(key)),
                    ("remaining", .int(remaining)),
                    ("resetMs", .int(resetMilliseconds)),
                    ("requests", .int(bucket.requests)),
                    ("limited", .int(bucket.limited)),
                ])
            }
            return .object([
                ("id", .string(rule.id)),
                ("algorithm", .string(rule.algorithm.rawValue)),
                ("limit", .int(rule.limit)),
                ("windowMs", .int(rule.windowMilliseconds)),
                ("key", .string(Self.describe(rule.key))),
                ("retryAfter", .string(rule.retryAfter.rawValue)),
                ("rateLimitHeaders", .bool(rule.rateLimitHeaders)),
                ("status", .int(rule.status)),
                ("buckets", .array(bucketValues)),
            ])
        })
    }

    // MARK: - Header values

    /// The `Retry-After` value for a wait (RFC 9110 §10.2.3) and the milliseconds that value actually means.
    /// Delay-seconds round the wait up and never say 0: "0" would invite an immediate retry that fails again.
    /// An HTTP-date names the whole second at or after wall-now + wait, so it never lies early.
    private static func retryAfter(
        waitMilliseconds: Int, format: RetryAfterFormat, wallSeconds: Double
    ) -> (value: String, milliseconds: Int) {
        let wait = max(0, waitMilliseconds)
        switch format {
        case .seconds:
            let seconds = max(1, ceilingDivide(wait, 1000))
            return (String(seconds), seconds * 1000)
        case .httpDate:
            // Integer milliseconds from here on, so the advertised wait is exact rather than a float near it.
            let wallMilliseconds = wallSeconds.isFinite ? Int((wallSeconds * 1000).rounded()) : 0
            let dateSeconds = ceilingDivide(wallMilliseconds + wait, 1000)
            return (HTTPDate.format(unixSeconds: Double(dateSeconds)), dateSeconds * 1000 - wallMilliseconds)
        }
    }

    /// `RateLimit-Policy: "ID";q=LIMIT;w=WINDOW` and `RateLimit: "ID";r=REMAINING;t=RESET`
    /// (draft-ietf-httpapi-ratelimit-headers, the RateLimit-Policy and RateLimit fields): each an sf-list of one
    /// item whose value is the policy id as an sf-string (RFC 9651 §3.3.3) with integer parameters. `w` and `t`
    /// are whole seconds, rounded up, and `w` is at least 1 (a window shorter than a second still lasts one).
    private static func rateLimitFields(
        _ rule: RateLimitRule, remaining: Int, resetMilliseconds: Int
    ) -> [(name: String, value: String)] {
        let id = structuredFieldString(rule.id)
        let windowSeconds = max(1, ceilingDivide(rule.windowMilliseconds, 1000))
        let resetSeconds = ceilingDivide(max(0, resetMilliseconds), 1000)
        return [
            (name: "RateLimit-Policy", value: "\(id);q=\(max(0, rule.limit));w=\(windowSeconds)"),
            (name: "RateLimit", value: "\(id);r=\(max(0, remaining));t=\(resetSeconds)"),
        ]
    }

    /// An sf-string (RFC 9651 §3.3.3): quoted, with `"` and `\` escaped. Only printable ASCII may appear, so any
    /// other character becomes `?` — the scenario loader should reject such ids; this keeps the field parseable.
    private static func structuredFieldString(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"", "\\": result += "\\" + String(scalar)
            case " "..."~": result.unicodeScalars.append(scalar)
            default: result += "?"
            }
        }
        return result + "\""
    }

    private static func describe(_ key: RateLimitKey) -> String {
        switch key {
        case .global: return "global"
        case .clientAddress: return "client-address"
        case .header(let name): return "header:" + name
        }
    }
}

/// ⌈a / b⌉ for b > 0 and any sign of a.
private func ceilingDivide(_ a: Int, _ b: Int) -> Int {
    let quotient = a / b
    return (a % b != 0 && a > 0) ? quotient + 1 : quotient
}

/// A rule's limit and window, clamped so the integer token arithmetic cannot overflow: both at most 2³¹ − 1
/// (a limit of two billion, or a window of 24 days), so `limit × window` fits in 62 bits.
private struct Quota {
    let limit: Int64
    let window: Int64

    init(_ rule: RateLimitRule) {
        limit = Int64(min(max(rule.limit, 0), Int(Int32.max)))
        window = Int64(min(max(rule.windowMilliseconds, 1), Int(Int32.max)))
    }

    /// Token-bucket capacity in units of 1/window token: one token is `window` units, and refill is exactly
    /// `limit` units per millisecond, so fractional refill needs no floating point.
    var capacity: Int64 { limit * window }
}

/// What one bucket decided for one request.
private enum BucketOutcome {
    /// Counted; `remaining` requests are left and the quota resets in `resetMilliseconds`.
    case allowed(remaining: Int, resetMilliseconds: Int)
    /// Not counted; a request can succeed in `waitMilliseconds`; the quota resets in `resetMilliseconds`.
    case limited(waitMilliseconds: Int, resetMilliseconds: Int)
}

/// One key's quota under one rule.
private struct Bucket: Sendable {
    /// The algorithm's state.
    enum State: Sendable {
        /// Fixed window: the current window opened at `start` and has counted `count` requests.
        case window(start: UInt64, count: Int64)
        /// Token bucket: `level` units (see `Quota.capacity`) as of `updatedAt`.
        case tokens(level: Int64, updatedAt: UInt64)
    }

    var state: State
    /// Every request counted against this bucket, allowed or limited.
    var requests = 0
    var limited = 0

    init(quota: Quota, algorithm: RateLimitAlgorithm, now: UInt64) {
        switch algorithm {
        case .fixedWindow: state = .window(start: now, count: 0)
        case .tokenBucket: state = .tokens(level: quota.capacity, updatedAt: now)
        }
    }

    /// Counts one request at `now`, taking quota only when it is allowed.
    mutating func take(quota: Quota, now: UInt64) -> BucketOutcome {
        requests += 1
        let outcome: BucketOutcome
        switch advanced(quota: quota, now: now) {
        case .window(let start, let count):
            let reset = Self.windowReset(start: start, quota: quota, now: now)
            if count < quota.limit {
                state = .window(start: start, count: count + 1)
                outcome = .allowed(remaining: Int(quota.limit - count - 1), resetMilliseconds: reset)
            } else {
                state = .window(start: start, count: count)
                outcome = .limited(waitMilliseconds: reset, resetMilliseconds: reset)
            }
        case .tokens(let level, let updatedAt):
            if level >= quota.window {
                let left = level - quota.window
                state = .tokens(level: left, updatedAt: updatedAt)
                outcome = .allowed(
                    remaining: Int(left / quota.window), resetMilliseconds: Self.timeToFill(level: left, quota: quota))
            } else {
                state = .tokens(level: level, updatedAt: updatedAt)
                // A rule with limit 0 never refills; say "one window" rather than forever.
                let wait = quota.limit > 0 ? Self.ceilingDivide(quota.window - level, quota.limit) : quota.window
                outcome = .limited(
                    waitMilliseconds: Int(wait), resetMilliseconds: Self.timeToFill(level: level, quota: quota))
            }
        }
        if case .limited = outcome { limited += 1 }
        return outcome
    }

    /// Remaining requests and milliseconds to reset at `now`, without counting anything.
    func peek(quota: Quota, now: UInt64) -> (remaining: Int, resetMilliseconds: Int) {
        switch advanced(quota: quota, now: now) {
        case .window(let start, let count):
            return (Int(max(0, quota.limit - count)), Self.windowReset(start: start, quota: quota, now: now))
        case .tokens(let level, _):
            return (Int(level / quota.window), Self.timeToFill(level: level, quota: quota))
        }
    }

    /// The state brought forward to `now`: a fixed window rolled over to the window `now` falls in (windows stay
    /// aligned to the first request), or a token bucket refilled. A clock that reads earlier than the state
    /// (which a monotonic clock should not) changes nothing.
    private func advanced(quota: Quota, now: UInt64) -> State {
        switch state {
        case .window(let start, _):
            let window = UInt64(quota.window)
            guard now >= start, now - start >= window else { return state }
            return .window(start: start + (now - start) / window * window, count: 0)
        case .tokens(let level, let updatedAt):
            guard now > updatedAt else { return state }
            // Anything past one window fills the bucket anyway; capping first keeps the product in range.
            let elapsed = Int64(min(now - updatedAt, UInt64(quota.window)))
            return .tokens(level: min(quota.capacity, level + elapsed * quota.limit), updatedAt: now)
        }
    }

    private static func windowReset(start: UInt64, quota: Quota, now: UInt64) -> Int {
        let end = start + UInt64(quota.window)
        return end > now ? Int(end - now) : 0
    }

    private static func timeToFill(level: Int64, quota: Quota) -> Int {
        guard quota.limit > 0 else { return 0 }
        return Int(ceilingDivide(quota.capacity - level, quota.limit))
    }

    private static func ceilingDivide(_ a: Int64, _ b: Int64) -> Int64 {
        (a + b - 1) / b  // a ≥ 0, b > 0 at every call site
    }
}
