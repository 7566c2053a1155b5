/// Which later requests an advertised `Retry-After` is compared with: those taken by the same route in the same
/// script partition, or those counted by the same rate-limit rule in the same bucket. The report joins
/// observations to scenarios on these cases; `description` is the one place the text `/state` shows is made.
package enum RetryAfterKey: Sendable, Hashable, CustomStringConvertible {
    /// Scripted responses of the route with this id, for one `sequenceBy` value ("" without `sequenceBy`).
    case route(id: String, partition: String)
    /// The rate-limit rule with this id, for one bucket ("" for a global rule).
    case rateLimit(id: String, bucket: String)

    /// The `key` of `/state`'s Retry-After observations and pending advertisements: `route ID [partition]`
    /// or `rate-limit ID [bucket]`.
    package var description: String {
        switch self {
        case .route(let id, let partition): return "route \(id) [\(partition)]"
        case .rateLimit(let id, let bucket): return "rate-limit \(id) [\(bucket)]"
        }
    }
}

/// Judges whether clients wait as long as `Retry-After` asked (RFC 9110 §10.2.3; ARCHITECTURE §6 and the
/// `honorsRetryAfter` verdict of §6). Each 429 or 503 that carried `Retry-After` leaves one pending
/// advertisement per key; the next request with that key is compared with it and the advertisement is cleared.
package struct RetryAfterTracker: Sendable {
    /// A response with `Retry-After` that has not yet been followed by a request with the same key.
    package struct Advertisement: Sendable, Equatable {
        /// The route partition or rate-limit bucket the advertisement applies to.
        package var key: RetryAfterKey
        /// The journal sequence number of the request that got the 429/503.
        package var sequence: Int
        package var sentAtMilliseconds: UInt64
        /// `sentAtMilliseconds` plus the advertised wait: the first moment a retry honours the advertisement.
        package var earliestRetryMilliseconds: UInt64
        package var status: Int
        /// The `Retry-After` field value as sent.
        package var retryAfter: String
        /// The connection the advertisement went out on (0 when unknown).
        package var connection: Int = 0

        /// An advertisement as `RetryAfterTracker.advertised` records it.
        package init(
            key: RetryAfterKey, sequence: Int, sentAtMilliseconds: UInt64, earliestRetryMilliseconds: UInt64, status: Int,
            retryAfter: String
        ) {
            self.key = key
            self.sequence = sequence
            self.sentAtMilliseconds = sentAtMilliseconds
            self.earliestRetryMilliseconds = earliestRetryMilliseconds
            self.status = status
            self.retryAfter = retryAfter
        }
    }

    /// One judged retry: the request that followed an advertisement, and how its timing compares.
    package struct Observation: Sendable, Equatable {
        /// The route partition or rate-limit bucket the retry was judged for.
        package var key: RetryAfterKey
        /// The journal sequence of the 429/503.
        package var advertisedSequence: Int
        /// The next request with the same key.
        package var retrySequence: Int
        package var advertisedWaitMilliseconds: Int
        /// Retry arrival − advertisement send time.
        package var actualWaitMilliseconds: Int
        /// > 0 when the retry came before the advertised time, else 0.
        package var earlyByMilliseconds: Int

        /// The retry came no earlier than `Retry-After` allowed.
        package var honoured: Bool { earlyByMilliseconds == 0 }

        /// An observation as `RetryAfterTracker.arrived` records it.
        package init(
            key: RetryAfterKey, advertisedSequence: Int, retrySequence: Int, advertisedWaitMilliseconds: Int,
            actualWaitMilliseconds: Int, earlyByMilliseconds: Int
        ) {
            self.key = key
            self.advertisedSequence = advertisedSequence
            self.retrySequence = retrySequence
            self.advertisedWaitMilliseconds = advertisedWaitMilliseconds
            self.actualWaitMilliseconds = actualWaitMilliseconds
            self.earlyByMilliseconds = earlyByMilliseconds
        }
    }

    /// How many judged retries are kept for `/state` and the `honorsRetryAfter` verdict: the newest ones, as the
    /// journal keeps its newest entries (whose default capacity this is); `retries` and `early` stay exact.
    /// Unbounded, a server answering 429s or 503s for hours grew by ~150 bytes per retry (found by `make soak`).
    package let observationCapacity: Int
    /// Judged retries, oldest first: the newest `observationCapacity` of them.
    package var observations: [Observation] { Array(judged.suffix(observationCapacity)) }
    /// Up to twice the capacity, trimmed to it in one step, so that recording stays O(1) amortized.
    private var judged: [Observation] = []
    /// Every retry judged since the start (or the last reset), including those no longer kept.
    package private(set) var retries = 0
    /// Of `retries`, those that came before the advertised time.
    package private(set) var early = 0
    /// Per key, the advertisements not yet answered by a retry, oldest first. Bounded like `observations`: when
    /// twice `observationCapacity` are pending (a client that never retries, or a fresh `sequenceBy` value per
    /// request), only the newest `observationCapacity` are kept.
    private var pendingByKey: [RetryAfterKey: [Advertisement]] = [:]
    private var pendingCount = 0

    /// A tracker with nothing pending and nothing observed.
    package init(observationCapacity: Int = 10_000) {
        self.observationCapacity = max(observationCapacity, 1)
    }

    /// Whether any advertisement waits for a retry (lets the hot path skip building keys).
    package var hasPending: Bool { !pendingByKey.isEmpty }

    /// Advertisements still waiting for a request with their key, oldest first (by sequence).
    package var pending: [Advertisement] {
        pendingByKey.values.flatMap { $0 }.sorted { $0.sequence < $1.sequence }
    }

    /// A response with `Retry-After` went out (or is about to) for `key` at `nowMilliseconds`, asking the client to
    /// wait `waitMilliseconds` (what the field value means; see `waitMilliseconds(retryAfter:wallSeconds:)`).
    /// Several may be pending for one key (concurrent requests limited together); each later request with the
    /// key is taken as the retry of the oldest one still pending, so a burst of limited requests is judged
    /// request by request.
    package mutating func advertised(
        key: RetryAfterKey, sequence: Int, status: Int, retryAfter: String, waitMilliseconds: Int, nowMilliseconds: UInt64,
        connection: Int = 0
    ) {
        let earliest = nowMilliseconds.addingReportingOverflow(UInt64(max(0, waitMilliseconds)))
        pendingByKey[key, default: []].append(Advertisement(
            key: key, sequence: sequence, sentAtMilliseconds: nowMilliseconds,
            earliestRetryMilliseconds: earliest.overflow ? UInt64.max : earliest.partialValue, status: status,
            retryAfter: retryAfter))
        pendingByKey[key]![pendingByKey[key]!.count - 1].connection = connection
        pendingCount += 1
        if pendingCount >= 2 * observationCapacity {
            let kept = pendingByKey.values.flatMap { $0 }.sorted { $0.sequence < $1.sequence }.suffix(observationCapacity)
            pendingByKey = Dictionary(grouping: kept, by: \.key)
            pendingCount = kept.count
        }
    }

    /// A request on another connection that was already open when the advertisement went out, arriving this
    /// soon after it, was already on its way (the client could not have read the 429 yet): not judged as a retry.
    package static let concurrencyGraceMilliseconds: UInt64 = 10

    /// A request with `key` arrived; if an advertisement for that key is pending, the oldest is judged and cleared.
    /// A request whose sequence is not after the advertisement's (the limited request itself, when the caller
    /// reports its arrival after advertising) is not a retry and leaves the advertisement pending.
    @discardableResult
    /// `connection` and `connectionOpenedAtMilliseconds` tell a retry from a request that was already in flight.
    package mutating func arrived(
        key: RetryAfterKey, sequence: Int, nowMilliseconds: UInt64, connection: Int = 0,
        connectionOpenedAtMilliseconds: UInt64 = 0
    ) -> Observation? {
        // The oldest advertisement this request can be the follow-up of: one sent on the same connection (a
        // sequential retry), one sent before this connection was opened, or one it clearly came after.
        guard let index = pendingByKey[key]?.firstIndex(where: { advertisement in
            sequence > advertisement.sequence
                && (connection == advertisement.connection && connection != 0
                    || connection != 0 && connectionOpenedAtMilliseconds >= advertisement.sentAtMilliseconds
                    || nowMilliseconds >= advertisement.sentAtMilliseconds + Self.concurrencyGraceMilliseconds)
        }) else { return nil }
        let advertisement = pendingByKey[key]!.remove(at: index)
        pendingCount -= 1
        if pendingByKey[key]!.isEmpty { pendingByKey[key] = nil }
        let sent = advertisement.sentAtMilliseconds
        let earliest = advertisement.earliestRetryMilliseconds
        let observation = Observation(
            key: key,
            advertisedSequence: advertisement.sequence,
            retrySequence: sequence,
            advertisedWaitMilliseconds: Self.clampedDifference(earliest, sent),
            actualWaitMilliseconds: Self.clampedDifference(nowMilliseconds, sent),
            earlyByMilliseconds: Self.clampedDifference(earliest, nowMilliseconds))
        retries += 1
        if !observation.honoured { early += 1 }
        judged.append(observation)
        if judged.count >= 2 * observationCapacity { judged.removeFirst(judged.count - observationCapacity) }
        return observation
    }

    /// Forgets every observation and pending advertisement (scenario reset).
    package mutating func reset() {
        judged = []
        retries = 0
        early = 0
        pendingByKey = [:]
        pendingCount = 0
    }

    /// For `GET /__faultline/state`: the exact counts, the observations kept (oldest first), and the pending
    /// advertisements.
    package func stateJSON() -> JSONValue {
        .object([
            ("retries", .int(retries)),
            ("honoured", .int(retries - early)),
            ("early", .int(early)),
            ("observations", .array(observations.map { observation in
                .object([
                    ("key", .string(observation.key.description)),
                    ("advertisedSequence", .int(observation.advertisedSequence)),
                    ("retrySequence", .int(observation.retrySequence)),
                    ("advertisedWaitMs", .int(observation.advertisedWaitMilliseconds)),
                    ("actualWaitMs", .int(observation.actualWaitMilliseconds)),
                    ("earlyByMs", .int(observation.earlyByMilliseconds)),
                    ("honoured", .bool(observation.honoured)),
                ])
            })),
            ("pending", .array(pending.map { advertisement in
                .object([
                    ("key", .string(advertisement.key.description)),
                    ("sequence", .int(advertisement.sequence)),
                    ("status", .int(advertisement.status)),
                    ("retryAfter", .string(advertisement.retryAfter)),
                    ("sentAtMs", .number(String(advertisement.sentAtMilliseconds))),
                    ("earliestRetryMs", .number(String(advertisement.earliestRetryMilliseconds))),
                ])
            })),
        ])
    }

    /// Parses a `Retry-After` value (RFC 9110 §10.2.3: delay-seconds, `1*DIGIT`, or an HTTP-date in any form of
    /// §5.6.7) into milliseconds from `wallSeconds`; nil if invalid. Surrounding whitespace is ignored; a date in
    /// the past means 0; a huge delay saturates instead of overflowing.
    package static func waitMilliseconds(retryAfter: String, wallSeconds: Double) -> Int? {
        let text = retryAfter.trimmingWhitespace()
        guard !text.isEmpty else { return nil }
        if text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            let cap = Int.max / 1000
            var seconds = 0
            for byte in text.utf8 {
                seconds = min(cap, seconds * 10 + Int(byte - UInt8(ascii: "0")))
            }
            return seconds * 1000
        }
        guard wallSeconds.isFinite, let date = HTTPDate.parse(text) else { return nil }
        // Clamp before converting: a Double outside Int's range would trap.
        let milliseconds = ((date - wallSeconds) * 1000).rounded()
        return Int(min(max(milliseconds, 0), 1e15))
    }

    /// `a − b` in milliseconds, 0 when negative and capped at `Int.max`.
    private static func clampedDifference(_ a: UInt64, _ b: UInt64) -> Int {
        a > b ? Int(min(a - b, UInt64(Int.max))) : 0
    }
}

extension String {
    /// Without leading and trailing spaces and tabs (HTTP's OWS, RFC 9110 §5.6.3).
    fileprivate func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
