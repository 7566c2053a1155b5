/// A moment as the engine sees it: monotonic milliseconds for durations and expiry, wall seconds for
/// HTTP-dates. Injected, so tests run on a fake clock.
package struct EngineInstant: Sendable, Equatable {
    /// The monotonic clock in nanoseconds: the journal's own times, so "did this request arrive after that answer
    /// went out" is decided exactly, not to the millisecond (a burst on fresh connections shares milliseconds).
    package var monotonicNanos: UInt64
    package var wallSeconds: Double

    /// The monotonic clock in whole milliseconds, what the policies (tokens, buckets, keys) count in.
    package var monotonicMilliseconds: UInt64 { monotonicNanos / 1_000_000 }

    package init(monotonicMilliseconds: UInt64 = 0, wallSeconds: Double = 0) {
        let nanos = monotonicMilliseconds.multipliedReportingOverflow(by: 1_000_000)
        self.monotonicNanos = nanos.overflow ? UInt64.max : nanos.partialValue
        self.wallSeconds = wallSeconds
    }

    package init(monotonicNanos: UInt64, wallSeconds: Double) {
        self.monotonicNanos = monotonicNanos
        self.wallSeconds = wallSeconds
    }
}

/// What the engine needs to hear when an exchange ends (whatever its outcome): a token call is no longer
/// in flight; an idempotent first attempt's response is stored for replay; a `Retry-After` has been delivered, so
/// requests from then on can follow it (`RetryAfterTracker.delivered`).
package struct ExchangeCompletion: Sendable {
    /// The engine's `generation` when the exchange was decided.
    package var generation: Int
    package var refresh = false
    package var idempotency: (scope: String, key: String, response: StoredResponse)?
    /// The advertisement this exchange's answer carries: its tracker key and journal sequence.
    package var retryAfter: (key: RetryAfterKey, sequence: Int)?
}

/// The client-policy state of the loaded scenarios (ARCHITECTURE §6): tokens, rate-limit buckets, Retry-After
/// judgements, idempotency records and side-effect counts. Owned by the engine; loop thread only.
struct PolicyRuntime {
    var authority: TokenAuthority?
    var refreshServed = 0
    var limits: [ScopedRateLimit] = []
    var limiter = RateLimiter(rules: [])
    var retryAfter = RetryAfterTracker()
    var idempotency: [String: IdempotencyStore] = [:]

    init(scenarios: [Scenario], now: EngineInstant) {
        if let auth = scenarios.lazy.compactMap(\.auth).first {
            authority = TokenAuthority(config: auth, nowMilliseconds: now.monotonicMilliseconds)
        }
        limits = scenarios.flatMap(\.rateLimits)
        limiter = RateLimiter(rules: limits.map(\.rule))
        for scenario in scenarios {
            for route in scenario.routes {
                if let config = route.idempotency {
                    idempotency[route.id] = IdempotencyStore(expiryMilliseconds: config.expiryMilliseconds)
                }
            }
        }
    }
}

extension Engine {
    /// `GET /__faultline/state`: tokens and refresh counts, buckets, Retry-After judgements, idempotency
    /// records and side effects.
    package func stateJSON(now: EngineInstant) -> JSONValue {
        let stores = policy.idempotency.sorted { $0.key < $1.key }
        let total = stores.reduce(0) { $0 + $1.value.totalSideEffects }
        return .object([
            ("auth", policy.authority?.stateJSON(nowMilliseconds: now.monotonicMilliseconds) ?? .null),
            ("rateLimits", policy.limiter.stateJSON(nowMilliseconds: now.monotonicMilliseconds)),
            ("retryAfter", policy.retryAfter.stateJSON()),
            ("idempotency", .object(stores.map { ($0.key, $0.value.stateJSON(nowMilliseconds: now.monotonicMilliseconds)) })),
            ("sideEffects", .object([("total", .int(total))])),
        ])
    }

    /// The admin call that expires the current token now.
    package func expireToken() -> Bool {
        guard policy.authority != nil else { return false }
        policy.authority!.expire()
        return true
    }

    /// An exchange has ended at `now`; see `ExchangeCompletion`. `delivered`: some of its answer was written (a
    /// `Retry-After` that never went out asked nothing of the client).
    package func finish(_ completion: ExchangeCompletion, now: EngineInstant, processed: Bool = true, delivered: Bool = true) {
        // Decided by scripts that have since been reloaded or reset: the state it would update is gone.
        guard completion.generation == generation else { return }
        if completion.refresh { policy.authority?.refreshFinished() }
        if let advertisement = completion.retryAfter {
            policy.retryAfter.delivered(
                key: advertisement.key, sequence: advertisement.sequence, atNanos: now.monotonicNanos, seen: delivered)
        }
        // A stream the server declared not processed (HTTP/2 REFUSED_STREAM, above a GOAWAY's last stream id)
        // stores nothing: the client may send it again and must find the key free.
        if let stored = completion.idempotency, !processed {
            policy.idempotency[stored.scope]?.abandon(scope: stored.scope, key: stored.key)
        } else if let stored = completion.idempotency {
            policy.idempotency[stored.scope]?.complete(
                scope: stored.scope, key: stored.key, response: stored.response, nowMilliseconds: now.monotonicMilliseconds)
        }
    }

    /// A proxied request's idempotency key, once the upstream has answered or failed (ARCHITECTURE §4d):
    /// `stored` is kept for replays — the upstream did the work, whether or not the client got the answer — and
    /// nil frees the key for a retry (the upstream failed, answered a status the route does not store, or a fault
    /// broke the exchange before the answer). `sideEffect`: counted for `noDuplicateSideEffects`.
    package func settleIdempotency(_ hold: ProxyIdempotency, stored: StoredResponse?, sideEffect: Bool, now: EngineInstant) {
        // Decided by scripts that have since been reloaded or reset: the store it would update is gone.
        guard hold.generation == generation else { return }
        if sideEffect { policy.idempotency[hold.scope]?.recordSideEffect(scope: hold.scope, key: hold.key) }
        if let stored {
            policy.idempotency[hold.scope]?.complete(
                scope: hold.scope, key: hold.key, response: stored, nowMilliseconds: now.monotonicMilliseconds)
        } else {
            policy.idempotency[hold.scope]?.abandon(scope: hold.scope, key: hold.key)
        }
    }

    func apply(_ effects: [StepEffect], now: EngineInstant) {
        for effect in effects {
            switch effect {
            case .expireToken: policy.authority?.expire()
            case .rotateToken: policy.authority?.issue(nowMilliseconds: now.monotonicMilliseconds)
            case .resetBuckets(let id): policy.limiter.reset(ruleID: id)
            case .changeResource(let id, let delete): _ = changeResource(id, delete: delete, now: now)
            }
        }
    }

    // MARK: - Before route matching

    /// The token endpoint, auth and rate limits, in that order. Nil when the request goes on to the routes;
    /// `extraHeaders` collects the RateLimit fields for the eventual response.
    func policyDecision(
        _ input: MatchInput, requestID: Int, client: String, now: EngineInstant,
        extraHeaders: inout [(name: String, value: String)], notes: inout [JournalNote]
    ) -> Decision? {
        let request = input.request
        if let authority = policy.authority {
            if request.method == "POST" && input.path == authority.config.tokenPath {
                return tokenCall(input, requestID: requestID, now: now, notes: &notes)
            }
            if authority.protects(input.path) {
                if let rejection = policy.authority!.authorize(
                    request.headers["authorization"], nowMilliseconds: now.monotonicMilliseconds) {
                    notes.append(.remark("auth: \(rejection.rawValue) token, 401"))
                    return policyAnswer(
                        input, by: .auth, script: Self.unauthorized(request, rejection, current: authority.currentToken))
                }
            }
        }
        for (index, scoped) in policy.limits.enumerated() {
            if let pattern = scoped.path, case .missed = RouteMatcher.match(RouteMatch(path: pattern), input) { continue }
            let bucket: String
            switch scoped.rule.key {
            case .global: bucket = ""
            case .clientAddress: bucket = client
            case .header(let name): bucket = request.headers[name] ?? ""
            }
            let trackerKey = RetryAfterKey.rateLimit(id: scoped.rule.id, bucket: bucket)
            if policy.retryAfter.hasPending,
               let seen = policy.retryAfter.arrived(
                key: trackerKey, sequence: requestID, nowNanos: currentAttempt.arrivedAtNanos, attempt: currentAttempt) {
                notes.append(.remark(Self.describe(seen)))
            }
            switch policy.limiter.check(
                ruleIndex: index, bucketKey: bucket, nowMilliseconds: now.monotonicMilliseconds, wallSeconds: now.wallSeconds) {
            case .allowed(let headers):
                extraHeaders += headers
            case .limited(let status, let wait, let headers):
                let retryAfter = headers.first { $0.name.caseInsensitiveEquals("retry-after") }?.value ?? ""
                policy.retryAfter.advertised(
                    key: trackerKey, sequence: requestID, status: status, retryAfter: retryAfter, waitMilliseconds: wait,
                    nowNanos: now.monotonicNanos, connection: currentAttempt.connection, stream: currentAttempt.stream)
                notes.append(.remark("rate limit \(scoped.rule.id): \(status), Retry-After \(retryAfter)"))
                var response = HTTPResponse.json(status, .object([
                    ("error", .string(status == 429 ? "rate limited" : "service unavailable")),
                    ("limit", .string(scoped.rule.id)),
                    ("retryAfterMs", .int(wait)),
                ]))
                for field in headers { response.headers.append(name: field.name, value: field.value) }
                // Journaled under a route of its own, so `route=rate-limit:ID` finds every limited request.
                let decision = Decision(
                    scenario: nil, route: .rateLimit(scoped.rule.id), step: nil, unmatched: nil,
                    script: ResponseScript.simple(for: request, response: response))
                decision.answeredBy = .rateLimit(scoped.rule.id)
                decision.completion = ExchangeCompletion(generation: generation, retryAfter: (trackerKey, requestID))
                decision.notes = notes
                return decision
            }
        }
        return nil
    }

    private func tokenCall(_ input: MatchInput, requestID: Int, now: EngineInstant, notes: inout [JournalNote]) -> Decision {
        let request = input.request
        policy.authority!.refreshStarted()
        let steps = policy.authority!.config.refreshSteps
        var step = steps.isEmpty ? ResponseStep() : steps[min(policy.refreshServed, steps.count - 1)]
        policy.refreshServed += 1
        if (200..<300).contains(step.status), step.body == .empty, step.fault == nil {
            switch policy.authority!.grant(
                body: request.body, contentType: request.headers["content-type"], nowMilliseconds: now.monotonicMilliseconds) {
            case .issued(let body):
                step.body = .json(body)
                step.headers.append((name: "Cache-Control", value: "no-store"))
                notes.append(.remark("auth: token call issued \(policy.authority!.currentToken)"))
            case .invalidGrant(let reason):
                step.status = 400
                step.body = .json(.object([("error", .string("invalid_grant")), ("error_description", .string(reason))]))
                notes.append(.remark("auth: token call rejected, \(reason)"))
            }
        } else {
            notes.append(.remark("auth: token call answered by refresh step \(min(policy.refreshServed, steps.count) - 1)"))
        }
        var context = TemplateContext(
            pathParameters: [:], input: input, requestID: requestID, wallSeconds: now.wallSeconds, dates: dates,
            resourceID: { 0 })
        let plan = ResponsePlanner.plan(PreparedStep(step), for: request, context: &context, random: &tokenRandom)
        let decision = Decision(scenario: nil, route: .tokenEndpoint, step: nil, unmatched: nil, script: plan)
        decision.completion = ExchangeCompletion(generation: generation, refresh: true)
        return decision
    }

    /// 401 with `WWW-Authenticate: Bearer error="invalid_token"` (RFC 6750 §3).
    static func unauthorized(_ request: HTTPRequest, _ rejection: TokenAuthority.Rejection, current: String) -> ResponseScript {
        let description: String
        switch rejection {
        case .missing: description = "no bearer token"
        case .stale: description = "the token has expired or was replaced; refresh it"
        case .unknown: description = "unknown token"
        }
        var response = HTTPResponse.json(401, .object([
            ("error", .string("invalid_token")), ("error_description", .string(description)),
        ]))
        response.headers.append(
            name: "WWW-Authenticate", value: #"Bearer realm="faultline", error="invalid_token", error_description="\#(description)""#)
        return ResponseScript.simple(for: request, response: response)
    }

    static func describe(_ seen: RetryAfterTracker.Observation) -> String {
        seen.honoured
            ? "retry-after: request came \(seen.actualWaitMilliseconds) ms after #\(seen.advertisedSequence), "
                + "which asked for \(seen.advertisedWaitMilliseconds) ms: honoured"
            : "retry-after: request came \(seen.actualWaitMilliseconds) ms after #\(seen.advertisedSequence)'s "
                + "\(seen.advertisedWaitMilliseconds) ms: \(seen.earlyByMilliseconds) ms early"
    }

    // MARK: - Idempotency (IETF httpapi idempotency-key draft)

    /// What an idempotent route does before its script runs: nil to run it (with `key` set for a fresh key),
    /// or the decision that answers instead (400 missing/invalid key, replay, 409, 422).
    func idempotencyGate(
        _ config: IdempotencyConfig, routeID: String, _ input: MatchInput, key: inout String?, now: EngineInstant,
        notes: inout [JournalNote]
    ) -> ResponseScript? {
        let request = input.request
        guard let raw = request.headers[config.header] else {
            if config.required {
                notes.append(.remark("idempotency: \(config.header) missing, 400"))
                return Self.problem(request, 400, "Idempotency-Key is missing",
                                    "This operation requires an \(config.header) header.")
            }
            notes.append(.remark("idempotency: no key"))
            return nil
        }
        guard let parsed = IdempotencyStore.parseKey(raw) else {
            notes.append(.remark("idempotency: invalid key, 400"))
            return Self.problem(request, 400, "Idempotency-Key is invalid",
                                "\(config.header) must be a structured-field string, e.g. \"8e03978e-40d5\".")
        }
        let fingerprint = IdempotencyStore.fingerprint(method: request.method, target: request.target, body: request.body)
        switch policy.idempotency[routeID]!.admit(
            scope: routeID, key: parsed, fingerprint: fingerprint, nowMilliseconds: now.monotonicMilliseconds) {
        case .fresh:
            key = parsed
            notes.append(.remark("idempotency: key \(parsed) first use"))
            return nil
        case .replay(let stored):
            notes.append(.remark("idempotency: key \(parsed) replayed the stored \(stored.status)"))
            var response = HTTPResponse(status: stored.status, headers: HTTPHeaders(stored.headers), body: stored.body)
            response.headers.append(name: "Idempotent-Replayed", value: "true")
            return ResponseScript.simple(for: request, response: response)
        case .inFlight:
            notes.append(.remark("idempotency: key \(parsed) still in flight, 409"))
            return Self.problem(request, 409, "A request with this Idempotency-Key is being processed",
                                "Retry once the first request has completed.")
        case .mismatch:
            notes.append(.remark("idempotency: key \(parsed) reused with a different payload, 422"))
            return Self.problem(request, 422, "Idempotency-Key reused with a different payload",
                                "The key was first used for a different request.")
        }
    }

    /// An RFC 9457 problem+json response.
    static func problem(_ request: HTTPRequest, _ status: Int, _ title: String, _ detail: String) -> ResponseScript {
        var response = HTTPResponse.json(status, .object([
            ("type", .string("about:blank")), ("title", .string(title)), ("status", .int(status)),
            ("detail", .string(detail)),
        ]))
        response.headers = HTTPHeaders([("Content-Type", "application/problem+json")])
        return ResponseScript.simple(for: request, response: response)
    }
}
