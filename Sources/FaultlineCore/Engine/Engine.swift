/// The decision for one request: which route and step took it (if any) and the script of its response.
/// A class: it is built once per request, changed in place while the engine decides, and read by the server;
/// as a 300-byte struct it was copied twice per request, a retain per field each time.
package final class Decision {
    @exclusivity(unchecked) package var scenario: String?
    /// The matched scenario's version (`Engine.version(of:)`): which edit of the file served the request.
    @exclusivity(unchecked) package var scenarioVersion: Int?
    /// What took the request: a scenario route, the token endpoint or a rate-limit rule; nil when no route
    /// matched. A request auth refused is under the route it matched (`answeredBy` says auth answered). The
    /// journal prints it with `DecisionSource.description`.
    @exclusivity(unchecked) package var route: DecisionSource?
    /// Set when the policy layer answered instead of a route's script: auth's 401, a rate limit's 429/503.
    @exclusivity(unchecked) package var answeredBy: PolicyAnswer?
    /// Zero-based index into the route's `responses`.
    @exclusivity(unchecked) package var step: Int?
    /// Set when no route took the request: the nearest route and why it missed.
    @exclusivity(unchecked) package var unmatched: UnmatchedInfo?
    /// Whether the route's chaos failed this request instead of its script.
    @exclusivity(unchecked) package var chaos: Bool = false
    @exclusivity(unchecked) package var script: ResponseScript
    /// Index of the matched route's scenario in the engine's `scenarios`.
    @exclusivity(unchecked) var scenarioIndex: Int?
    /// What the policy layer did (auth, rate limits, idempotency, Retry-After judgements) and the side effects
    /// applied, for the journal.
    @exclusivity(unchecked) package var notes: [JournalNote] = []
    /// Tell the engine when the exchange ends (`Engine.finish`).
    @exclusivity(unchecked) package var completion: ExchangeCompletion?
    /// A resource answered: what the request carried and what was decided.
    package var resource: ResourceRecord? {
        get { resourceBox?.value }
        set { resourceBox = newValue.map(JournalEntry.Rare.init) }
    }
    /// `resource` boxed, as the journal keeps it (shared with the entry, not copied): a request without one
    /// destroys a nil pointer, not a 200-byte optional through generic value witnesses (`make hotpath`).
    @exclusivity(unchecked) package private(set) var resourceBox: JournalEntry.Rare<ResourceRecord>?
    /// The request is to be forwarded (ARCHITECTURE §4d): `script` is a placeholder, the Dispatcher builds the
    /// real one from the upstream's response.
    @exclusivity(unchecked) package var proxy: ProxyPlan?

    init(scenario: String?, route: DecisionSource?, step: Int?, unmatched: UnmatchedInfo?, script: ResponseScript) {
        self.scenario = scenario
        self.route = route
        self.step = step
        self.unmatched = unmatched
        self.script = script
    }
}

/// What the 404 for an unmatched request says about the nearest route.
public struct UnmatchedInfo: Sendable, Equatable {
    public var nearestScenario: String?
    public var nearestRoute: String?
    public var reason: String
}

/// The scripted behaviour of the loaded scenarios: matching, sequence cursors and response scripts.
///
/// Not thread-safe by design: the server owns one engine on its loop thread, so a match and the cursor
/// move it causes happen as one step (ARCHITECTURE §1). Deterministic: all randomness comes from each
/// scenario's seed, in one stream per route and `sequenceBy` partition (`streamSeed`), so a route's n-th request
/// in its partition gets the same seeded choices whatever other traffic came before or in between.
package final class Engine {
    /// A route with the scenario it came from and its pre-rendered steps. A class: the request path reads it
    /// for every request, and copying a struct of this size costs a retain and release per field. The fields
    /// the request path reads are copied out of `route` once, at load, so that reading one does not copy the
    /// whole `Route`.
    private final class LoadedRoute {
        let scenario: Scenario
        let scenarioIndex: Int
        let route: Route
        let id: String
        let match: RouteMatch
        let idempotency: IdempotencyConfig?
        /// The protocols the route serves (`Route.servedProtocols`).
        let protocols: Set<ExchangeProtocol>
        /// `protocols` as two flags: the request path asks per request, and hashing into the set cost ~300
        /// instructions (`make hotpath`).
        let servesHTTP1: Bool
        let servesHTTP2: Bool
        /// Cumulative `times`: step i answers requests [ends[i-1], ends[i]) of the script.
        let stepEnds: [Int]
        let prepared: [PreparedStep]
        /// Requests served by a route without `sequenceBy` (one script for everyone): a counter here instead
        /// of an entry in the engine's `cursors`, which would hash a key per request.
        @exclusivity(unchecked) var served = 0
        /// The random stream of a route without `sequenceBy` (`Engine.streamSeed`); restarted by `reset`.
        @exclusivity(unchecked) var random = SeededRandom(seed: 0)

        init(scenario: Scenario, scenarioIndex: Int, route: Route, stepEnds: [Int], prepared: [PreparedStep]) {
            self.scenario = scenario
            self.scenarioIndex = scenarioIndex
            self.route = route
            id = route.id
            match = route.match
            idempotency = route.idempotency
            protocols = route.servedProtocols
            servesHTTP1 = protocols.contains(.http1)
            servesHTTP2 = protocols.contains(.http2)
            self.stepEnds = stepEnds
            self.prepared = prepared
        }

        /// Whether the route takes `input` (`RouteMatcher.match`). Asked here, where `match` is this object's own
        /// constant, it is read in place: `RouteMatcher.match(routes[i].match, …)` copied the whole `RouteMatch` out
        /// of the route for every request and route tried (~320 instructions, `make hotpath`).
        func matches(_ input: MatchInput, explain: Bool = true) -> MatchResult {
            RouteMatcher.match(match, input, explain: explain)
        }
    }

    @exclusivity(unchecked) package private(set) var scenarios: [Scenario] = []
    /// `versions[i]` is the version of `scenarios[i]`: 1 the first time a scenario name is loaded, one more each
    /// time a scenario of that name is loaded with different content (a hot reload of an edited file, an upload).
    /// Loading identical content again keeps the version, so a version names one exact scenario document.
    @exclusivity(unchecked) package private(set) var versions: [Int] = []
    @exclusivity(unchecked) private var versionHistory: [String: (scenario: Scenario, version: Int)] = [:]
    /// Bumped by every load and reset: completions of exchanges decided before it are ignored, so a response
    /// still in flight from the old scripts cannot touch the new state.
    @exclusivity(unchecked) private(set) var generation = 0
    @exclusivity(unchecked) private var routes: [LoadedRoute] = []
    /// Requests served, and the random stream, per (route index, sequenceBy value).
    @exclusivity(unchecked) private var cursors: [CursorKey: Partition] = [:]
    /// The token endpoint's random stream (delays of `auth.refresh` steps).
    @exclusivity(unchecked) var tokenRandom = SeededRandom(seed: 0)
    @exclusivity(unchecked) private var nextResourceID = 1
    @exclusivity(unchecked) var policy = PolicyRuntime(scenarios: [], now: EngineInstant())
    /// Where and when the request being decided arrived: what `Retries.follows` compares with an answer's end.
    @exclusivity(unchecked) var currentAttempt = Retries.Attempt(connection: 0, arrivedAtNanos: 0)
    @exclusivity(unchecked) private var loadedAt = EngineInstant()
    /// Handshakes decided so far, per scenario index with a `tls` section (`decideHandshake`).
    @exclusivity(unchecked) var handshakesServed: [Int: Int] = [:]
    /// The resources of the loaded scenarios and their instances' versions.
    package let resources = ResourceStore()
    /// The `Date` every response carries (RFC 9110 §6.6.1), formatted once per second: the codecs write heads with
    /// it, at the time they write them, and `{{now.httpDate}}` renders from it.
    package let dates = HTTPDateCache()
    /// `serve --proxy URL`: the proxy settings under every scenario's (ARCHITECTURE §4d).
    @exclusivity(unchecked) package var defaultProxy: ProxyConfig? {
        didSet { unmatchedProxyCache = nil }
    }

    private struct CursorKey: Hashable {
        var route: Int
        var partition: String
    }

    /// One `sequenceBy` partition of a route: its script cursor and its own random stream.
    private struct Partition {
        var served = 0
        var random: SeededRandom
    }

    /// The seed of one random stream: FNV-1a (64-bit) over the scenario seed's 8 bytes (little-endian), the
    /// route id's UTF-8 bytes and, for a `sequenceBy` route, a 0xFF byte and the partition value's UTF-8 bytes;
    /// then one SplitMix64 step to spread it. Stable across runs and platforms (unlike `Hasher`).
    ///
    /// The guarantee this gives: every seeded choice a route makes — whether chaos takes a request and which
    /// outcome it picks, delay distributions, `garbage` and corrupted bytes — is drawn from the stream of that
    /// route (and partition) alone, so the n-th request of a route (in its partition) gets the same choices
    /// whatever other routes or partitions were sent before or in between. `reset` restarts every stream.
    package static func streamSeed(scenarioSeed: UInt64, routeID: String, partition: String?) -> UInt64 {
        var fnv = FNV1a()
        fnv.mix(littleEndian: scenarioSeed)
        fnv.mix(routeID.utf8)
        if let partition {
            fnv.mix(0xFF)
            fnv.mix(partition.utf8)
        }
        var spread = SeededRandom(seed: fnv.hash)
        return spread.next()
    }

    package init(scenarios: [Scenario] = [], now: EngineInstant = EngineInstant()) {
        load(scenarios, now: now)
    }

    /// Replaces every loaded scenario and starts all scripts from the beginning.
    package func load(_ scenarios: [Scenario], now: EngineInstant = EngineInstant()) {
        loadedAt = now
        self.scenarios = scenarios
        unmatchedProxyCache = nil
        versions = scenarios.map { scenario in
            let previous = versionHistory[scenario.name]
            let version = previous.map { $0.scenario == scenario ? $0.version : $0.version + 1 } ?? 1
            versionHistory[scenario.name] = (scenario, version)
            return version
        }
        routes = []
        for (index, scenario) in scenarios.enumerated() {
            for route in scenario.routes {
                var ends: [Int] = []
                var total = 0
                for step in route.responses {
                    total += max(step.times, 1)
                    ends.append(total)
                }
                routes.append(LoadedRoute(
                    scenario: scenario, scenarioIndex: index, route: route, stepEnds: ends,
                    prepared: route.responses.map(PreparedStep.init)))
            }
        }
        resources.load(scenarios, now: now)
        reset()
    }

    /// Rewinds every script and reseeds every random source; the loaded scenarios stay.
    /// Policy state (tokens, buckets, idempotency records, counters) starts again too.
    package func reset(now: EngineInstant? = nil) {
        generation += 1
        cursors = [:]
        handshakesServed = [:]
        for route in routes {
            route.served = 0
            route.random = SeededRandom(
                seed: Self.streamSeed(scenarioSeed: route.scenario.seed, routeID: route.id, partition: nil))
        }
        let tokenSeed = scenarios.first { $0.auth != nil }?.seed ?? 0
        tokenRandom = SeededRandom(
            seed: Self.streamSeed(scenarioSeed: tokenSeed, routeID: DecisionSource.tokenEndpoint.description, partition: nil))
        nextResourceID = 1
        policy = PolicyRuntime(scenarios: scenarios, now: now ?? loadedAt)
        resources.reset(now: now ?? loadedAt)
    }


    /// Chooses the response for `request`, moving the matched route's cursor. `requestID` is the journal
    /// sequence number, for `{{request.id}}`; `connectionRequestIndex` counts earlier requests on the same
    /// connection, for the connection policy; `attempt` is where and when the request arrived (`Retries.follows`).
    package func decide(
        _ request: HTTPRequest, requestID: Int, connectionRequestIndex: Int = 0, client: String = "",
        now: EngineInstant = EngineInstant(), attempt: Retries.Attempt? = nil
    ) -> Decision {
        currentAttempt = attempt ?? Retries.Attempt(connection: 0, arrivedAtNanos: now.monotonicNanos)
        let input = MatchInput(request: request)
        var extraHeaders: [(name: String, value: String)] = []
        var notes: [JournalNote] = []
        let decision = policyDecision(
            input, requestID: requestID, client: client, now: now, extraHeaders: &extraHeaders, notes: &notes)
            ?? match(input, requestID: requestID, now: now, extraHeaders: extraHeaders, notes: &notes)
        decision.notes = notes
        // A scenario's connection policy applies to the responses of its own routes only.
        if let index = decision.scenarioIndex, let policy = scenarios[index].connections, decision.script.keepAlive {
            if let limit = policy.maxRequests, connectionRequestIndex + 1 >= limit {
                // Deliberately unannounced: no `Connection: close` on this response, just a FIN after it.
                decision.script.steps.append(.endConnection(.maxRequests))
                decision.script.keepAlive = false
                decision.script.policyClose = .maxRequests
            } else {
                decision.script.idleCloseMilliseconds = policy.idleCloseMilliseconds
            }
        }
        if let proxy = decision.proxy {
            proxy.policyClose = decision.script.policyClose
            proxy.idleCloseMilliseconds = decision.script.idleCloseMilliseconds
        }
        return decision
    }

    private func match(
        _ input: MatchInput, requestID: Int, now: EngineInstant, extraHeaders: [(name: String, value: String)],
        notes: inout [JournalNote]
    ) -> Decision {
        // `input.request` is read where it is needed, not bound first: a binding copied the request (`make hotpath`).
        for index in routes.indices {
            if case .matched(let parameters) = routes[index].matches(input, explain: false) {
                let overHTTP2 = input.request.head.version.major == 2
                guard overHTTP2 ? routes[index].servesHTTP2 : routes[index].servesHTTP1 else {
                    return refuseProtocol(routes[index], overHTTP2 ? .http2 : .http1, input.request, notes: &notes)
                }
                return play(index, input, parameters, requestID: requestID, now: now, extraHeaders: extraHeaders, notes: &notes)
            }
        }
        if let decision = resourceDecision(input, now: now, extraHeaders: extraHeaders) { return decision }
        if let (config, scenario) = unmatchedProxy() {
            // No route, no resource: forwarded as it is, no fault, no cursor.
            let decision = Decision(
                scenario: scenario, route: nil, step: nil, unmatched: nil,
                script: ResponseScript(steps: [], status: nil, keepAlive: true))
            decision.proxy = ProxyPlan(
                config: config, step: nil, request: input.request, seed: 0, extraHeaders: extraHeaders)
            notes.append(.remark("no route matched: forwarded to the upstream"))
            return decision
        }
        let info = unmatchedInfo(input)
        return Decision(
            scenario: nil, route: nil, step: nil, unmatched: info,
            script: ResponsePlanner.notFound(input.request, info))
    }

    /// The proxy that takes requests no route took: the first scenario with a `proxy` section decides (its
    /// `unmatched`, `forward` by default), else `serve --proxy`'s. Nil: answer 404.
    private func unmatchedProxy() -> (ProxyConfig, String?)? {
        if let known = unmatchedProxyCache { return known }
        let found = findUnmatchedProxy()
        unmatchedProxyCache = .some(found)
        return found
    }

    /// `unmatchedProxy`'s answer, worked out once per load and `--proxy` (every forwarded request asks).
    @exclusivity(unchecked) private var unmatchedProxyCache: (ProxyConfig, String?)??

    private func findUnmatchedProxy() -> (ProxyConfig, String?)? {
        if let scenario = scenarios.first(where: { $0.proxy != nil }), let own = scenario.proxy {
            let config = own.merged(over: defaultProxy)
            return (config.unmatched ?? .forward) == .forward ? (config, scenario.name) : nil
        }
        guard let defaultProxy, (defaultProxy.unmatched ?? .forward) == .forward else { return nil }
        return (defaultProxy, nil)
    }

    /// The settings of a `proxy` step of `loaded`'s route: the route's over its scenario's over the command line's.
    private func proxyConfig(_ loaded: LoadedRoute) -> ProxyConfig {
        let scenarioLevel = loaded.scenario.proxy.map { $0.merged(over: defaultProxy) } ?? defaultProxy
        return (loaded.route.proxy ?? ProxyConfig()).merged(over: scenarioLevel ?? ProxyConfig())
    }

    /// No route took the request: only now work out which came nearest, and why it missed, for the 404.
    private func unmatchedInfo(_ input: MatchInput) -> UnmatchedInfo {
        var nearest: (miss: MatchMiss, index: Int)?
        for index in routes.indices {
            if case .missed(let miss) = routes[index].matches(input),
               nearest == nil || miss.score > nearest!.miss.score {
                nearest = (miss, index)
            }
        }
        return UnmatchedInfo(
            nearestScenario: nearest.map { routes[$0.index].scenario.name },
            nearestRoute: nearest.map { routes[$0.index].route.id },
            reason: nearest?.miss.reason ?? "no routes are loaded")
    }

    /// The policy layer answered `input` with `script` before its route ran (auth's 401): the decision names
    /// the route the request matched — without playing it: no cursor moves, no random draw — or, when no
    /// route matches, is unmatched like a 404 would be. `answeredBy` says who answered.
    func policyAnswer(_ input: MatchInput, by answeredBy: PolicyAnswer, script: ResponseScript) -> Decision {
        let decision: Decision
        if let index = routes.indices.first(where: {
            if case .matched = routes[$0].matches(input, explain: false) { return true }
            return false
        }) {
            decision = routeDecision(routes[index], step: nil, script: script)
            // Not the route's own response: its scenario's connection policy does not apply.
            decision.scenarioIndex = nil
        } else {
            decision = Decision(scenario: nil, route: nil, step: nil, unmatched: unmatchedInfo(input), script: script)
        }
        decision.answeredBy = answeredBy
        return decision
    }

    /// Plays `routes[index]`'s script for a request it matched. The preamble — a Retry-After followed, the
    /// idempotency gate, the cursor and random stream of the request's partition — comes first; then chaos, an
    /// exhausted script, or the step by its kind; then the epilogue (`finishPlay`). The order of the random draws
    /// and of the idempotency store's changes is part of what a seed reproduces: keep it.
    private func play(
        _ index: Int, _ input: MatchInput, _ parameters: [String: String], requestID: Int, now: EngineInstant,
        extraHeaders: [(name: String, value: String)], notes: inout [JournalNote]
    ) -> Decision {
        let loaded = routes[index]
        let sequenced = loaded.route.sequenceBy != nil
        let partitionValue = sequenced ? partition(loaded.route.sequenceBy, input, parameters) : ""
        if policy.retryAfter.hasPending {
            noteRetryAfterFollowed(loaded, partition: partitionValue, input, requestID: requestID, notes: &notes)
        }
        var idempotencyKey: String?
        if let config = loaded.idempotency, let answer = idempotencyGate(
            config, routeID: loaded.id, input, key: &idempotencyKey, now: now, notes: &notes) {
            return routeDecision(loaded, step: nil, script: answer)
        }
        let key = CursorKey(route: index, partition: partitionValue)
        var state = partitionState(loaded, sequenced: sequenced, key)
        // Whatever path returns, the cursor and the stream go back to where they live.
        defer { storePartition(state, loaded, sequenced: sequenced, key) }
        let served = state.served
        if let chaos = loaded.route.chaos, !chaos.outcomes.isEmpty, state.random.nextUnit() < chaos.rate {
            return playChaos(
                chaos, loaded, served: served, input, parameters, requestID: requestID, now: now,
                extraHeaders: extraHeaders, idempotencyKey: idempotencyKey, random: &state.random)
        }
        state.served = served + 1
        guard let stepIndex = Self.stepIndex(loaded, served: served) else {
            return scriptExhausted(loaded, input, idempotencyKey: idempotencyKey)
        }
        let prepared = loaded.prepared[stepIndex]
        let plan: ResponseScript
        var resourceRecord: ResourceRecord?
        switch prepared.step.kind {
        case .proxy:
            return forward(
                prepared, stepIndex: stepIndex, loaded, input, parameters, requestID: requestID, now: now,
                extraHeaders: extraHeaders, idempotencyKey: idempotencyKey, random: &state.random)
        case .websocket(let spec):
            var context = templateContext(input, parameters, requestID: requestID, now: now)
            plan = webSocketScript(spec, step: prepared.step, input.request, context: &context, random: &state.random)
        case .resource(let reference):
            let answered = resourcePlan(
                reference, prepared, loaded, input, parameters, requestID: requestID, now: now,
                extraHeaders: extraHeaders, keepResponse: idempotencyKey != nil, random: &state.random)
            (plan, resourceRecord) = (answered.script, answered.record)
        case .plain:
            // The fast path is asked here, not through a helper: returning its script through one more function
            // copied it once more per request (`make hotpath`).
            if let cached = ResponsePlanner.cachedPlan(
                prepared, for: input.request, random: &state.random, extraHeaders: extraHeaders,
                keepResponse: idempotencyKey != nil) {
                plan = cached
            } else {
                plan = renderedPlan(
                    prepared, input, parameters, requestID: requestID, now: now, extraHeaders: extraHeaders,
                    keepResponse: idempotencyKey != nil, random: &state.random)
            }
        }
        return finishPlay(
            plan, resourceRecord, prepared, stepIndex: stepIndex, loaded, partition: partitionValue, input,
            requestID: requestID, now: now, idempotencyKey: idempotencyKey, notes: &notes)
    }

    // MARK: - Playing a route: the preamble

    /// A scripted Retry-After (a 503 step, say) is judged per route and script partition.
    private static func retryKey(_ loaded: LoadedRoute, partition: String) -> RetryAfterKey {
        .route(id: loaded.id, partition: partition)
    }

    /// A route's Retry-After is followed only by the same logical request (`Retries`).
    private static func logicalRequest(_ loaded: LoadedRoute, _ input: MatchInput) -> String {
        Retries.label(input.request.head, loaded.scenario.expect?.logicalKey ?? .methodPathAndIdempotencyKey)
    }

    /// A Retry-After the route advertised is pending: whether this request followed it, noted for the journal.
    private func noteRetryAfterFollowed(
        _ loaded: LoadedRoute, partition: String, _ input: MatchInput, requestID: Int, notes: inout [JournalNote]
    ) {
        if let seen = policy.retryAfter.arrived(
            key: Self.retryKey(loaded, partition: partition), logical: Self.logicalRequest(loaded, input),
            sequence: requestID, nowNanos: currentAttempt.arrivedAtNanos, attempt: currentAttempt) {
            notes.append(.remark(Self.describe(seen)))
        }
    }

    /// The cursor and random stream of the request's partition: the route's own without `sequenceBy`, else the
    /// partition's, started from its seed on its first request.
    private func partitionState(_ loaded: LoadedRoute, sequenced: Bool, _ key: CursorKey) -> Partition {
        if !sequenced { return Partition(served: loaded.served, random: loaded.random) }
        if let known = cursors[key] { return known }
        return Partition(random: SeededRandom(seed: Self.streamSeed(
            scenarioSeed: loaded.scenario.seed, routeID: loaded.id, partition: key.partition)))
    }

    private func storePartition(_ state: Partition, _ loaded: LoadedRoute, sequenced: Bool, _ key: CursorKey) {
        if sequenced {
            cursors[key] = state
        } else {
            loaded.served = state.served
            loaded.random = state.random
        }
    }

    /// The step that answers the route's request number `served` (from 0), past the end as `afterLast` says; nil
    /// when the script has run out and `afterLast` is `fail`.
    /// Where each route stands (`GET /__faultline/scenarios`, the dashboard's state), per scenario index and route
    /// id: one cursor per `sequenceBy` partition seen (`partition` null for a route without one) with the requests
    /// it served and the step that answers its next request (null: the script is exhausted and `afterLast` is
    /// `fail`). At most `maxPartitions` partitions per route, in the order of their values. One pass over the
    /// partitions for every scenario.
    package func routeCursors(maxPartitions: Int = 100) -> [Int: [String: (cursors: [JSONValue], partitions: Int)]] {
        func cursor(_ loaded: LoadedRoute, _ partition: String?, served: Int) -> JSONValue {
            let total = loaded.stepEnds.last ?? 0
            return .object([
                ("partition", partition.map(JSONValue.string) ?? .null),
                ("served", .int(served)),
                ("nextStep", Self.stepIndex(loaded, served: served).map(JSONValue.int) ?? .null),
                ("exhausted", .bool(served >= total)),
            ])
        }
        var partitions: [Int: [(String, Int)]] = [:]
        for (key, state) in cursors {
            partitions[key.route, default: []].append((key.partition, state.served))
        }
        var answer: [Int: [String: (cursors: [JSONValue], partitions: Int)]] = [:]
        for (position, loaded) in routes.enumerated() {
            if loaded.route.sequenceBy == nil {
                answer[loaded.scenarioIndex, default: [:]][loaded.id] = ([cursor(loaded, nil, served: loaded.served)], 1)
            } else {
                let seen = (partitions[position] ?? []).sorted { $0.0 < $1.0 }
                answer[loaded.scenarioIndex, default: [:]][loaded.id] =
                    (seen.prefix(maxPartitions).map { cursor(loaded, $0.0, served: $0.1) }, seen.count)
            }
        }
        return answer
    }

    private static func stepIndex(_ loaded: LoadedRoute, served: Int) -> Int? {
        let total = loaded.stepEnds.last ?? 0
        var position = served
        if served >= total {
            switch loaded.route.afterLast {
            case .repeatLast: position = total - 1
            case .cycle: position = served % total
            case .fail: return nil
            }
        }
        return loaded.stepEnds.firstIndex(where: { position < $0 }) ?? loaded.stepEnds.count - 1
    }

    // MARK: - Playing a route: chaos, an exhausted script

    /// Chaos takes this request (its draw came out under the rate): the script does not move, and nothing was
    /// committed, so the idempotency key is free again. The outcome is drawn next, then the step is played with
    /// chaos's fault or replaced by its status.
    private func playChaos(
        _ chaos: ChaosSpec, _ loaded: LoadedRoute, served: Int, _ input: MatchInput, _ parameters: [String: String],
        requestID: Int, now: EngineInstant, extraHeaders: [(name: String, value: String)], idempotencyKey: String?,
        random: inout SeededRandom
    ) -> Decision {
        if let idempotencyKey { policy.idempotency[loaded.id]?.abandon(scope: loaded.id, key: idempotencyKey) }
        let outcome = chaos.outcomes[Int(random.next() % UInt64(chaos.outcomes.count))]
        let total = loaded.stepEnds.last ?? 0
        let stepIndex = loaded.stepEnds.firstIndex(where: { min(served, total - 1) < $0 }) ?? 0
        var step = loaded.route.responses[stepIndex]
        switch outcome {
        case .fault(let spec):
            step.fault = spec
        case .status(let code):
            step = ResponseStep(status: code, body: .json(.object([
                ("error", .string("chaos")), ("status", .int(code)),
                ("message", .string("route \(loaded.id) failed this request on purpose")),
            ])))
        }
        let decision = chaosDecision(
            step, outcome, loaded, input, parameters, requestID: requestID, now: now, extraHeaders: extraHeaders,
            random: &random)
        decision.chaos = true
        if case .status = outcome { decision.script.fault = outcome.description }
        return decision
    }

    /// Chaos's step by its kind: a fault breaks the upstream's answer (when it uses one) or the resource's; anything
    /// else — a status, a plain or WebSocket step, a fault that sends nothing of a response — is planned from the
    /// step's own fields.
    private func chaosDecision(
        _ step: ResponseStep, _ outcome: ChaosOutcome, _ loaded: LoadedRoute, _ input: MatchInput,
        _ parameters: [String: String], requestID: Int, now: EngineInstant,
        extraHeaders: [(name: String, value: String)], random: inout SeededRandom
    ) -> Decision {
        switch step.kind {
        case .proxy:
            guard case .fault(let spec) = outcome, spec.name.usesResponse else { break }
            let decision = routeDecision(loaded, step: nil, script: ResponseScript(steps: [], status: nil, keepAlive: true))
            decision.proxy = ProxyPlan(
                config: proxyConfig(loaded), step: step, request: input.request, seed: random.next(),
                extraHeaders: extraHeaders)
            return decision
        case .resource(let reference):
            // Only a fault keeps the step's kind: a status outcome replaced the step with a plain one.
            guard let (script, record) = resourceStep(
                reference, step, scenarioIndex: loaded.scenarioIndex, input, parameters, now: now, random: &random,
                extraHeaders: extraHeaders) else { break }
            let decision = routeDecision(loaded, step: nil, script: script)
            decision.resource = record
            return decision
        case .plain, .websocket:
            break
        }
        var context = templateContext(input, parameters, requestID: requestID, now: now)
        let plan = ResponsePlanner.plan(PreparedStep(step), for: input.request, context: &context, random: &random)
        return routeDecision(loaded, step: nil, script: plan)
    }

    /// The script ran out and `afterLast` is `fail`: 500, and the idempotency key is free again.
    private func scriptExhausted(_ loaded: LoadedRoute, _ input: MatchInput, idempotencyKey: String?) -> Decision {
        if let idempotencyKey { policy.idempotency[loaded.id]?.abandon(scope: loaded.id, key: idempotencyKey) }
        let played = loaded.stepEnds.last ?? 0
        return routeDecision(
            loaded, step: nil, script: ResponsePlanner.scriptExhausted(input.request, routeID: loaded.id, played: played))
    }

    // MARK: - Playing a route: the step by its kind

    /// A `proxy` step: forwarded; the step's delay, drip, headers and fault wait for the upstream's answer. Its
    /// effects apply now. An idempotency key stays in flight until the upstream answers (`settleIdempotency`): the
    /// layer sits in front of the upstream, so a replay with the key is answered here and never reaches it twice.
    private func forward(
        _ prepared: PreparedStep, stepIndex: Int, _ loaded: LoadedRoute, _ input: MatchInput,
        _ parameters: [String: String], requestID: Int, now: EngineInstant,
        extraHeaders: [(name: String, value: String)], idempotencyKey: String?, random: inout SeededRandom
    ) -> Decision {
        if !prepared.step.effects.isEmpty { apply(prepared.step.effects, now: now) }
        let decision = routeDecision(
            loaded, step: stepIndex, script: ResponseScript(steps: [], status: nil, keepAlive: true))
        var step = prepared.step
        if prepared.templatedHeaders {
            // The step's headers are rendered now, from the request, as a scripted step's are.
            let context = templateContext(input, parameters, requestID: requestID, now: now)
            var resourceID: Int?
            step.headers = step.headers.map { (name: $0.name, value: Template.render($0.value, context, resourceID: &resourceID)) }
        }
        decision.proxy = ProxyPlan(
            config: proxyConfig(loaded), step: step, request: input.request, seed: random.next(),
            extraHeaders: extraHeaders)
        if let idempotencyKey, let config = loaded.idempotency {
            decision.proxy?.idempotency = ProxyIdempotency(
                scope: loaded.id, key: idempotencyKey, config: config, generation: generation)
        }
        return decision
    }

    /// A `resource` step: the resource's answer with the step's delay, headers and fault. A resource the scenario
    /// does not have (a scenario built in Swift; the loader refuses it) leaves the step's own status and body.
    private func resourcePlan(
        _ reference: ResourceReference, _ prepared: PreparedStep, _ loaded: LoadedRoute, _ input: MatchInput,
        _ parameters: [String: String], requestID: Int, now: EngineInstant,
        extraHeaders: [(name: String, value: String)], keepResponse: Bool, random: inout SeededRandom
    ) -> (script: ResponseScript, record: ResourceRecord?) {
        if let (script, record) = resourceStep(
            reference, prepared.step, scenarioIndex: loaded.scenarioIndex, input, parameters, now: now,
            random: &random, extraHeaders: extraHeaders) {
            return (script, record)
        }
        return (scriptedPlan(
            prepared, input, parameters, requestID: requestID, now: now, extraHeaders: extraHeaders,
            keepResponse: keepResponse, random: &random), nil)
    }

    /// A plain step: the script prepared at load when nothing needs rendering (`cachedPlan`), else rendered now.
    private func scriptedPlan(
        _ prepared: PreparedStep, _ input: MatchInput, _ parameters: [String: String], requestID: Int,
        now: EngineInstant, extraHeaders: [(name: String, value: String)], keepResponse: Bool,
        random: inout SeededRandom
    ) -> ResponseScript {
        if let cached = ResponsePlanner.cachedPlan(
            prepared, for: input.request, random: &random, extraHeaders: extraHeaders, keepResponse: keepResponse) {
            return cached
        }
        return renderedPlan(
            prepared, input, parameters, requestID: requestID, now: now, extraHeaders: extraHeaders,
            keepResponse: keepResponse, random: &random)
    }

    /// A plain step rendered now: its templates, fault, drip and extra headers (`ResponsePlanner.renderedPlan`).
    private func renderedPlan(
        _ prepared: PreparedStep, _ input: MatchInput, _ parameters: [String: String], requestID: Int,
        now: EngineInstant, extraHeaders: [(name: String, value: String)], keepResponse: Bool,
        random: inout SeededRandom
    ) -> ResponseScript {
        var context = templateContext(input, parameters, requestID: requestID, now: now)
        return ResponsePlanner.renderedPlan(
            prepared, for: input.request, context: &context, random: &random, extraHeaders: extraHeaders,
            keepResponse: keepResponse)
    }

    // MARK: - Playing a route: the epilogue

    /// A step played (not forwarded): its effects apply, then the decision is made, the Retry-After its head
    /// carries is advertised, and the idempotency key is settled — in that order.
    private func finishPlay(
        _ plan: ResponseScript, _ resourceRecord: ResourceRecord?, _ prepared: PreparedStep, stepIndex: Int,
        _ loaded: LoadedRoute, partition: String, _ input: MatchInput, requestID: Int, now: EngineInstant,
        idempotencyKey: String?, notes: inout [JournalNote]
    ) -> Decision {
        if !prepared.step.effects.isEmpty { apply(prepared.step.effects, now: now) }
        let decision = routeDecision(loaded, step: stepIndex, script: plan)
        decision.resource = resourceRecord
        if let retryAfter = prepared.retryAfter {
            advertiseRetryAfter(
                retryAfter, decision, prepared, loaded, partition: partition, input, requestID: requestID, now: now)
        }
        if let config = loaded.idempotency {
            settleIdempotency(decision, config, prepared, loaded, key: idempotencyKey, now: now, notes: &notes)
        }
        return decision
    }

    /// The step's head carries `Retry-After`: the tracker learns the wait it asks for, and the exchange's end
    /// (`ExchangeCompletion.retryAfter`) tells it when the advertisement was delivered.
    private func advertiseRetryAfter(
        _ retryAfter: String, _ decision: Decision, _ prepared: PreparedStep, _ loaded: LoadedRoute, partition: String,
        _ input: MatchInput, requestID: Int, now: EngineInstant
    ) {
        guard let wait = RetryAfterTracker.waitMilliseconds(retryAfter: retryAfter, wallSeconds: now.wallSeconds)
        else { return }
        let key = Self.retryKey(loaded, partition: partition)
        policy.retryAfter.advertised(
            key: key, logical: Self.logicalRequest(loaded, input), sequence: requestID, status: prepared.step.status,
            retryAfter: retryAfter, waitMilliseconds: wait, nowNanos: now.monotonicNanos,
            headDelayMilliseconds: Self.waitBeforeHead(decision.script), connection: currentAttempt.connection,
            stream: currentAttempt.stream)
        decision.completion = ExchangeCompletion(generation: generation, retryAfter: (key, requestID))
    }

    /// What an idempotent route's played step does to its key. Only a step that answers normally, or a
    /// commit-then-* fault, has done the work; any other fault broke the exchange before anything was committed,
    /// so the key is free for the retry. A status the route does not store frees it too; otherwise the answer is
    /// stored — now for commit-then-* (the "unknown outcome": committed before the connection breaks), else when
    /// the exchange completes.
    private func settleIdempotency(
        _ decision: Decision, _ config: IdempotencyConfig, _ prepared: PreparedStep, _ loaded: LoadedRoute,
        key idempotencyKey: String?, now: EngineInstant, notes: inout [JournalNote]
    ) {
        let fault = prepared.step.fault
        let commits = fault?.name.commits ?? false
        if let idempotencyKey, fault != nil, !commits {
            policy.idempotency[loaded.id]?.abandon(scope: loaded.id, key: idempotencyKey)
            decision.script.response = nil
            return
        }
        if fault == nil && prepared.step.status < 400 || commits {
            policy.idempotency[loaded.id]?.recordSideEffect(scope: loaded.id, key: idempotencyKey)
            notes.append(.sideEffect(route: loaded.id))
        }
        guard let idempotencyKey, let response = decision.script.response else { return }
        decision.script.response = nil
        guard config.stores(response.status) else {
            // A 429 or 5xx (by default) says the request was not processed: nothing is stored, the key is free.
            policy.idempotency[loaded.id]?.abandon(scope: loaded.id, key: idempotencyKey)
            notes.append(.remark("idempotency: key \(idempotencyKey) not stored (\(response.status)), free for a retry"))
            return
        }
        let stored = StoredResponse(status: response.status, headers: response.headers.fields, body: response.body)
        if commits {
            policy.idempotency[loaded.id]?.complete(
                scope: loaded.id, key: idempotencyKey, response: stored, nowMilliseconds: now.monotonicMilliseconds)
        } else {
            var completion = decision.completion ?? ExchangeCompletion(generation: generation)
            completion.idempotency = (loaded.id, idempotencyKey, stored)
            decision.completion = completion
        }
    }

    /// The script's waits before its head (a step's delay): when a Retry-After in that head can first be read.
    static func waitBeforeHead(_ script: ResponseScript) -> Int {
        var total = 0
        for step in script.steps {
            switch step {
            case .head: return total
            case .wait(let milliseconds): total += milliseconds
            default: continue
            }
        }
        return total
    }

    /// The values `{{…}}` placeholders read. Built only for a step that renders something.
    private func templateContext(
        _ input: MatchInput, _ parameters: [String: String], requestID: Int, now: EngineInstant
    ) -> TemplateContext {
        var context = TemplateContext(
            pathParameters: parameters, input: input, requestID: requestID, wallSeconds: now.wallSeconds, dates: dates,
            resourceID: { [unowned self] in
                defer { self.nextResourceID += 1 }
                return self.nextResourceID
            })
        context.token = policy.authority?.currentToken
        return context
    }

    /// A route that does not serve the request's protocol (its faults exist only on another one, or its
    /// `protocols` say so): refused the way the protocol says, without playing the route — no cursor moves.
    /// Over HTTP/2, RST_STREAM HTTP_1_1_REQUIRED (RFC 9113 §7), which clients such as curl answer by retrying
    /// over HTTP/1.1; over HTTP/1.1, 505 with a body that names the route.
    private func refuseProtocol(
        _ loaded: LoadedRoute, _ carried: ExchangeProtocol, _ request: HTTPRequest, notes: inout [JournalNote]
    ) -> Decision {
        let names = ExchangeProtocol.allCases.filter(loaded.protocols.contains).map(\.rawValue)
        let served = names.joined(separator: ", ")
        let why = loaded.route.protocols == nil
            ? "its faults exist only on \(served)" : "its \"protocols\" are \(served)"
        notes.append(.remark("route \(loaded.id) does not serve \(carried.rawValue): \(why)"))
        let script: ResponseScript
        switch carried {
        case .http2:
            script = ResponseScript(
                steps: [.http2(.resetStream(code: HTTP2ErrorCode.http11Required.rawValue))], status: nil, keepAlive: true)
        case .http1:
            let body: JSONValue = .object([
                ("error", .string("route \(loaded.id) does not serve \(carried.rawValue)")),
                ("protocols", .array(names.map(JSONValue.string))),
                ("hint", .string("\(why); use a client that speaks \(served)")),
            ])
            script = ResponseScript.simple(for: request, response: .json(505, body))
        }
        return routeDecision(loaded, step: nil, script: script)
    }

    /// A decision taken by `loaded`'s route; the one place that ties it to its scenario.
    private func routeDecision(_ loaded: LoadedRoute, step: Int?, script plan: ResponseScript) -> Decision {
        let decision = Decision(
            scenario: loaded.scenario.name, route: .route(loaded.id), step: step, unmatched: nil, script: plan)
        decision.scenarioIndex = loaded.scenarioIndex
        decision.scenarioVersion = versions[loaded.scenarioIndex]
        return decision
    }

    private func partition(_ key: SequenceKey?, _ input: MatchInput, _ parameters: [String: String]) -> String {
        switch key {
        case nil: return ""
        case .header(let name): return input.request.headers[name] ?? ""
        case .query(let name): return input.query.first(where: { $0.name == name })?.value ?? ""
        case .pathParameter(let name): return parameters[name] ?? ""
        }
    }
}
