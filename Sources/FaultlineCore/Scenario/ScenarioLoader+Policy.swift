extension ScenarioLoader.Reader {
    /// `auth` (ARCHITECTURE §6): `{"tokenPath", "initialToken", "protect": [prefixes], "expireAfterUses",
    /// "expireAfterMs", "expiresIn", "rotateRefreshTokens", "initialRefreshToken", "refresh": [steps]}`.
    mutating func authConfig(_ value: JSONValue, at path: String) -> AuthConfig? {
        let errorCount = errors.count
        let keys = [
            "tokenPath", "initialToken", "protect", "expireAfterUses", "expireAfterMs", "expiresIn",
            "rotateRefreshTokens", "initialRefreshToken", "refresh",
        ]
        guard let fields = fields(value, at: path, known: keys) else { return nil }
        var config = AuthConfig()
        if let value = fields["tokenPath"], let text = nonEmptyString(value, at: fields.path("tokenPath")) {
            if text.hasPrefix("/") { config.tokenPath = text } else { report(fields.path("tokenPath"), "must start with \"/\"") }
        }
        if let value = fields["initialToken"], let text = nonEmptyString(value, at: fields.path("initialToken")) {
            config.initialToken = text
        }
        if let value = required(fields, "protect"), let elements = array(value, at: fields.path("protect")) {
            for (index, element) in elements.enumerated() {
                let elementPath = "\(fields.path("protect"))[\(index)]"
                guard let prefix = nonEmptyString(element, at: elementPath) else { continue }
                if prefix.hasPrefix("/") { config.protect.append(prefix) } else { report(elementPath, "must start with \"/\"") }
            }
        }
        config.expireAfterUses = fields["expireAfterUses"].flatMap {
            integer($0, at: fields.path("expireAfterUses"), in: 1...Int.max)
        }
        config.expireAfterMilliseconds = fields["expireAfterMs"].flatMap {
            integer($0, at: fields.path("expireAfterMs"), in: 1...Int.max)
        }
        if let value = fields["expiresIn"] {
            config.expiresInSeconds = integer(value, at: fields.path("expiresIn"), in: 0...Int(Int32.max)) ?? 3600
        }
        if let value = fields["rotateRefreshTokens"] {
            config.rotateRefreshTokens = bool(value, at: fields.path("rotateRefreshTokens")) ?? false
        }
        config.initialRefreshToken = fields["initialRefreshToken"].flatMap {
            nonEmptyString($0, at: fields.path("initialRefreshToken"))
        }
        if let value = fields["refresh"], let elements = array(value, at: fields.path("refresh")) {
            for (index, element) in elements.enumerated() {
                if let step = responseStep(element, at: "\(fields.path("refresh"))[\(index)]") {
                    config.refreshSteps.append(step)
                }
            }
        }
        return errors.count == errorCount ? config : nil
    }

    /// `rateLimits`: `[{"id", "path" | "pathPrefix", "limit", "windowMs", "algorithm", "key", "retryAfter",
    /// "rateLimitHeaders", "status"}]`.
    mutating func rateLimits(_ value: JSONValue, at path: String) -> [ScopedRateLimit] {
        guard let elements = array(value, at: path) else { return [] }
        var limits: [ScopedRateLimit] = []
        var seen: Set<String> = []
        for (index, element) in elements.enumerated() {
            let elementPath = "\(path)[\(index)]"
            let errorCount = errors.count
            let keys = ["id", "path", "pathPrefix", "limit", "windowMs", "algorithm", "key", "retryAfter", "rateLimitHeaders", "status"]
            guard let fields = fields(element, at: elementPath, known: keys) else { continue }
            let id = fields["id"].flatMap { nonEmptyString($0, at: fields.path("id")) } ?? "limit-\(index + 1)"
            if !seen.insert(id).inserted { report(fields.path("id"), "duplicate rate limit id \(ScenarioLoader.quoted(id))") }
            var pattern: PathPattern?
            switch (fields["path"], fields["pathPrefix"]) {
            case (.some, .some):
                report(elementPath, "use either \"path\" or \"pathPrefix\", not both")
            case (let value?, nil):
                pattern = string(value, at: fields.path("path")).flatMap { pathPattern($0, isPrefix: false, at: fields.path("path")) }
            case (nil, let value?):
                pattern = string(value, at: fields.path("pathPrefix")).flatMap {
                    pathPattern($0, isPrefix: true, at: fields.path("pathPrefix"))
                }
            case (nil, nil):
                break
            }
            let limit = required(fields, "limit").flatMap { integer($0, at: fields.path("limit"), in: 1...Int.max) }
            let window = required(fields, "windowMs").flatMap {
                integer($0, at: fields.path("windowMs"), in: 1...ScenarioLoader.maxDelayMilliseconds * 100)
            }
            var rule = RateLimitRule(id: id, limit: limit ?? 1, windowMilliseconds: window ?? 1)
            if let value = fields["algorithm"], let text = string(value, at: fields.path("algorithm")) {
                if let algorithm = RateLimitAlgorithm(rawValue: text) {
                    rule.algorithm = algorithm
                } else {
                    report(fields.path("algorithm"), "unknown algorithm \(ScenarioLoader.quoted(text))"
                        + ScenarioLoader.hint(for: text, among: RateLimitAlgorithm.allCases.map(\.rawValue), listName: "expected"))
                }
            }
            if let value = fields["key"], let text = string(value, at: fields.path("key")) {
                switch text {
                case "global": rule.key = .global
                case "client": rule.key = .clientAddress
                default:
                    if text.hasPrefix("header:"), ScenarioLoader.isToken(String(text.dropFirst(7))) {
                        rule.key = .header(String(text.dropFirst(7)))
                    } else {
                        report(fields.path("key"), #"expected "global", "client" or "header:NAME", found "# + ScenarioLoader.quoted(text))
                    }
                }
            }
            if let value = fields["retryAfter"], let text = string(value, at: fields.path("retryAfter")) {
                if let format = RetryAfterFormat(rawValue: text) {
                    rule.retryAfter = format
                } else {
                    report(fields.path("retryAfter"), "unknown retryAfter \(ScenarioLoader.quoted(text))"
                        + ScenarioLoader.hint(for: text, among: RetryAfterFormat.allCases.map(\.rawValue), listName: "expected"))
                }
            }
            if let value = fields["rateLimitHeaders"] {
                rule.rateLimitHeaders = bool(value, at: fields.path("rateLimitHeaders")) ?? false
            }
            if let value = fields["status"] {
                rule.status = integer(value, at: fields.path("status"), in: 429...503) {
                    "\($0) is not 429 or 503"
                } ?? 429
                if rule.status != 429 && rule.status != 503 { report(fields.path("status"), "\(rule.status) is not 429 or 503") }
            }
            if errors.count == errorCount { limits.append(ScopedRateLimit(rule: rule, path: pattern)) }
        }
        return limits
    }

    /// A route's `idempotency`: `{"header": "Idempotency-Key", "required": true, "expiresMs": …}`.
    mutating func idempotencyConfig(_ value: JSONValue, at path: String) -> IdempotencyConfig? {
        let errorCount = errors.count
        guard let fields = fields(value, at: path, known: ["header", "required", "expiresMs", "storeStatuses"]) else {
            return nil
        }
        var config = IdempotencyConfig()
        if let value = fields["header"], let name = nonEmptyString(value, at: fields.path("header")) {
            if ScenarioLoader.isToken(name) { config.header = name } else {
                report(fields.path("header"), "\(ScenarioLoader.quoted(name)) is not a valid header name")
            }
        }
        if let value = fields["required"] { config.required = bool(value, at: fields.path("required")) ?? false }
        if let value = fields["expiresMs"] {
            config.expiryMilliseconds = integer(value, at: fields.path("expiresMs"), in: 1...Int.max) ?? config.expiryMilliseconds
        }
        if let value = fields["storeStatuses"], let elements = array(value, at: fields.path("storeStatuses")) {
            // Statuses (201) and classes ("2xx"); default: all but 429 and 5xx (`IdempotencyConfig.stores`).
            var statuses = Set<Int>()
            for (index, element) in elements.enumerated() {
                let elementPath = "\(fields.path("storeStatuses"))[\(index)]"
                if case .string(let text) = element {
                    if text.count == 3, text.hasSuffix("xx"), let digit = text.first?.wholeNumberValue, (1...5).contains(digit) {
                        statuses.formUnion(digit * 100...digit * 100 + 99)
                    } else {
                        report(elementPath, "\(ScenarioLoader.quoted(text)) is not a status class (\"1xx\" … \"5xx\")")
                    }
                } else if let status = integer(element, at: elementPath, in: 100...599) {
                    statuses.insert(status)
                }
            }
            config.storeStatuses = statuses
        }
        return errors.count == errorCount ? config : nil
    }

    /// A step's `effects`: `["expire-token", "rotate-token", "reset-buckets", "reset-bucket:ID"]`.
    mutating func effects(_ value: JSONValue, at path: String) -> [StepEffect] {
        guard let elements = array(value, at: path) else { return [] }
        var effects: [StepEffect] = []
        let names = ["expire-token", "rotate-token", "reset-buckets", "reset-bucket:ID", "change-resource:ID",
                     "delete-resource:ID"]
        for (index, element) in elements.enumerated() {
            let elementPath = "\(path)[\(index)]"
            guard let text = string(element, at: elementPath) else { continue }
            switch text {
            case "expire-token": effects.append(.expireToken)
            case "rotate-token": effects.append(.rotateToken)
            case "reset-buckets": effects.append(.resetBuckets(nil))
            default:
                if text.hasPrefix("reset-bucket:"), text.count > 13 {
                    effects.append(.resetBuckets(String(text.dropFirst(13))))
                } else if let id = ["change-resource:", "delete-resource:"].lazy.compactMap({ prefix in
                    text.hasPrefix(prefix) && text.count > prefix.count ? String(text.dropFirst(prefix.count)) : nil
                }).first {
                    if !resources.contains(where: { $0.id == id }) {
                        report(elementPath, "no resource \(ScenarioLoader.quoted(id)) in this scenario's \"resources\""
                            + ScenarioLoader.hint(for: id, among: resources.map(\.id), listName: "its resources are"))
                    }
                    effects.append(.changeResource(id, delete: text.hasPrefix("delete-")))
                } else {
                    report(elementPath, "unknown effect \(ScenarioLoader.quoted(text))"
                        + ScenarioLoader.hint(for: text, among: names, listName: "expected"))
                }
            }
        }
        return effects
    }
}

extension ScenarioLoader.Reader {
    /// `expect`: the rules `GET /__faultline/report` judges (ARCHITECTURE §8).
    mutating func expectations(_ value: JSONValue, at path: String) -> Expectations? {
        let errorCount = errors.count
        let flags = [
            "honorsRetryAfter", "singleFlightRefresh", "noDuplicateSideEffects", "retriesOnlyReplayable", "noRetryOn4xx",
            "retriesOnlyUnprocessed", "retriesRefusedStreams", "revalidatesWithValidators", "resumesDownloads", "conditionalWrites",
            "honorsRetryAfterOnUpgrade", "backsOffDuringOutage",
        ]
        guard let fields = fields(value, at: path, known: flags + ["maxRefreshes", "maxAttempts", "backoff", "logicalRequest",
                                                                  "resubscribes", "heartbeatMs", "reconnectBackoff",
                                                                  "noRequestStorm"])
        else { return nil }
        var expect = Expectations()
        func flag(_ key: String) -> Bool { fields[key].flatMap { bool($0, at: fields.path(key)) } ?? false }
        expect.honorsRetryAfter = flag("honorsRetryAfter")
        expect.singleFlightRefresh = flag("singleFlightRefresh")
        expect.noDuplicateSideEffects = flag("noDuplicateSideEffects")
        expect.retriesOnlyReplayable = flag("retriesOnlyReplayable")
        expect.retriesOnlyUnprocessed = flag("retriesOnlyUnprocessed")
        expect.retriesRefusedStreams = flag("retriesRefusedStreams")
        expect.revalidatesWithValidators = flag("revalidatesWithValidators")
        expect.resumesDownloads = flag("resumesDownloads")
        expect.conditionalWrites = flag("conditionalWrites")
        switch fields["reconnectBackoff"] {
        case nil: break
        case .bool(let on)?: expect.reconnectBackoff = on
        case let value?:
            if let backoff = self.fields(value, at: fields.path("reconnectBackoff"), known: ["jitter"]) {
                expect.reconnectBackoff = true
                expect.reconnectJitter = backoff["jitter"].flatMap { bool($0, at: backoff.path("jitter")) } ?? false
            }
        }
        expect.honorsRetryAfterOnUpgrade = flag("honorsRetryAfterOnUpgrade")
        expect.backsOffDuringOutage = flag("backsOffDuringOutage")
        switch fields["noRequestStorm"] {
        case nil, .bool(false)?: break
        case .bool(true)?: expect.noRequestStorm = StormLimit()
        case let value?:
            if let storm = self.fields(value, at: fields.path("noRequestStorm"), known: ["max", "withinMs"]) {
                var limit = StormLimit()
                if let max = storm["max"].flatMap({ integer($0, at: storm.path("max"), in: 1...1_000_000) }) { limit.max = max }
                if let within = storm["withinMs"].flatMap({
                    integer($0, at: storm.path("withinMs"), in: 1...ScenarioLoader.maxDelayMilliseconds)
                }) { limit.withinMilliseconds = within }
                expect.noRequestStorm = limit
            }
        }
        if let value = fields["resubscribes"], let elements = array(value, at: fields.path("resubscribes")) {
            if elements.isEmpty { report(fields.path("resubscribes"), "name at least one message (a body matcher)") }
            expect.resubscribes = elements.enumerated().compactMap { bodyMatcher($1, at: "\(fields.path("resubscribes"))[\($0)]") }
        }
        if let value = fields["heartbeatMs"] {
            expect.heartbeatMilliseconds = integer(value, at: fields.path("heartbeatMs"), in: 1...ScenarioLoader.maxDelayMilliseconds)
        }
        expect.noRetryOn4xx = flag("noRetryOn4xx")
        expect.maxRefreshes = fields["maxRefreshes"].flatMap { integer($0, at: fields.path("maxRefreshes"), in: 0...Int.max) }
        expect.maxAttempts = fields["maxAttempts"].flatMap { integer($0, at: fields.path("maxAttempts"), in: 1...Int.max) }
        switch fields["backoff"] {
        case nil: break
        case .bool(let on)?: expect.backoff = on
        case let value?:
            if let backoff = self.fields(value, at: fields.path("backoff"), known: ["jitter"]) {
                expect.backoff = true
                expect.jitter = backoff["jitter"].flatMap { bool($0, at: backoff.path("jitter")) } ?? false
            }
        }
        if let value = fields["logicalRequest"], let text = string(value, at: fields.path("logicalRequest")) {
            if text == "method+path+idempotency-key" {
                expect.logicalKey = .methodPathAndIdempotencyKey
            } else if text.hasPrefix("header:"), ScenarioLoader.isToken(String(text.dropFirst(7))) {
                expect.logicalKey = .header(String(text.dropFirst(7)))
            } else {
                report(fields.path("logicalRequest"),
                       #"expected "method+path+idempotency-key" or "header:NAME", found "# + ScenarioLoader.quoted(text))
            }
        }
        return errors.count == errorCount ? expect : nil
    }
}
