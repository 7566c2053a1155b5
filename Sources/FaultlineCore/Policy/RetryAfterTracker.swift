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
/// `honorsRetryAfter` verdict of §8). Each 429 or 503 that carried `Retry-After` leaves one pending advertisement per
/// key. It can be followed only once it was *delivered* — its exchange finished with bytes sent (`delivered`) — and
/// only by a request that arrived after that moment (`Retries.follows`, the one definition of a retry): a request
/// that arrived while the answer was still going out (a concurrent HTTP/2 stream, a parallel connection) could not
/// have read it, and is not judged, nor does it use the advertisement up. A route's advertisement is followed only
/// by the same logical request (`Retries.label`); a rate-limit bucket's by any request the bucket counts, since the
/// limit applies to all of them. The delay-seconds form is counted from when the head could first go out (the
/// decision plus a scripted delay before it: `headAtNanos`), never from the exchange's end, which the loop may
/// record a few milliseconds after the client already read the answer; the HTTP-date form names a moment.
package struct RetryAfterTracker: Sendable {
    /// A response with `Retry-After` that has not yet been followed by a request with the same key.
    package struct Advertisement: Sendable, Equatable {
        /// The route partition or rate-limit bucket the advertisement applies to.
        package var key: RetryAfterKey
        /// The logical request the advertisement answered (`Retries.label`); nil for a rate-limit bucket, which every
        /// request it counts follows.
        package var logical: String?
        /// The journal sequence number of the request that got the 429/503.
        package var sequence: Int
        /// When the response was decided (monotonic ns).
        package var sentAtNanos: UInt64
        /// When its head could first go out: the decision plus the script's waits before the head (a step's delay).
        /// The client cannot have read the field sooner, and reads it no later than the head's write, so counting the
        /// delay from here never blames a client for the server's own lateness.
        package var headAtNanos: UInt64 = 0
        /// When its exchange finished with bytes sent: nil while the answer is still going out.
        package var deliveredAtNanos: UInt64?
        /// The connection and stream the answer went out on.
        package var connection: Int = 0
        package var stream: Int?
        /// The wait the field value asked for, in ms (for an HTTP-date, from `sentAtNanos`).
        package var waitMilliseconds: Int
        /// The field value was an HTTP-date: a moment, not a delay counted from the delivery.
        package var absolute: Bool
        package var status: Int
        /// The `Retry-After` field value as sent.
        package var retryAfter: String

        /// The first moment a follow-up honours the advertisement (monotonic ns): the head's moment plus the delay,
        /// or the date's moment.
        package var earliestRetryNanos: UInt64 {
            let from = absolute ? sentAtNanos : max(headAtNanos, sentAtNanos)
            let sum = from.addingReportingOverflow(UInt64(max(0, waitMilliseconds)).multipliedReportingOverflow(by: 1_000_000).partialValue)
            return sum.overflow ? UInt64.max : sum.partialValue
        }
    }

    /// One judged retry: the request that followed an advertisement, and how its timing compares.
    package struct Observation: Sendable, Equatable {
        /// The route partition or rate-limit bucket the retry was judged for.
        package var key: RetryAfterKey
        /// The journal sequence of the 429/503.
        package var advertisedSequence: Int
        /// The request that followed it.
        package var retrySequence: Int
        /// From the advertisement's head to the earliest honoured moment.
        package var advertisedWaitMilliseconds: Int
        /// Retry arrival − the advertisement's head.
        package var actualWaitMilliseconds: Int
        /// > 0 when the retry came before the advertised time, else 0.
        package var earlyByMilliseconds: Int
        /// The window in which a retry would have been early (monotonic ns): from the advertisement's head to the
        /// earliest honoured moment. Zero when not known (an observation made up by a test).
        package var windowStartNanos: UInt64 = 0
        package var windowEndNanos: UInt64 = 0

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
    /// Every advertisement delivered since the start (or the last reset): with no retry judged, the verdict says
    /// which it waited for.
    package private(set) var deliveredCount = 0
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

    /// A response with `Retry-After` was decided for `key` at `nowNanos`, asking the client to wait `waitMilliseconds`
    /// (what the field value means; see `waitMilliseconds(retryAfter:wallSeconds:)`). It waits for `delivered`.
    /// Several may be pending for one key (concurrent requests limited together); each is followed once.
    package mutating func advertised(
        key: RetryAfterKey, logical: String? = nil, sequence: Int, status: Int, retryAfter: String, waitMilliseconds: Int,
        nowNanos: UInt64, headDelayMilliseconds: Int = 0, connection: Int = 0, stream: Int? = nil
    ) {
        pendingByKey[key, default: []].append(Advertisement(
            key: key, logical: logical, sequence: sequence, sentAtNanos: nowNanos, deliveredAtNanos: nil,
            connection: connection, stream: stream, waitMilliseconds: waitMilliseconds,
            absolute: HTTPDate.parse(retryAfter.trimmingWhitespace()) != nil, status: status, retryAfter: retryAfter))
        pendingByKey[key]![pendingByKey[key]!.count - 1].headAtNanos =
            nowNanos &+ UInt64(max(0, headDelayMilliseconds)) &* 1_000_000
        pendingCount += 1
        if pendingCount >= 2 * observationCapacity {
            let kept = pendingByKey.values.flatMap { $0 }.sorted { $0.sequence < $1.sequence }.suffix(observationCapacity)
            pendingByKey = Dictionary(grouping: kept, by: \.key)
            pendingCount = kept.count
        }
    }

    /// The exchange of the advertisement `sequence` (for `key`) finished at `atNanos`. `seen`: it sent bytes, so the
    /// client could read the field; an answer that never went out is forgotten, since nothing asked the client to wait.
    package mutating func delivered(key: RetryAfterKey, sequence: Int, atNanos: UInt64, seen: Bool) {
        guard let index = pendingByKey[key]?.firstIndex(where: { $0.sequence == sequence }) else { return }
        if seen {
            pendingByKey[key]![index].deliveredAtNanos = atNanos
            deliveredCount += 1
        } else {
            pendingByKey[key]!.remove(at: index)
            pendingCount -= 1
            if pendingByKey[key]!.isEmpty { pendingByKey[key] = nil }
        }
    }

    /// A request with `key` (and, for a route, the logical request `logical`) arrived at `nowNanos` (`attempt`: where
    /// and when, for `Retries.follows`; by default a request on the advertisements' own HTTP/1.1 connection): the
    /// advertisement it follows — the earliest delivered that it provably followed, as `Retries.chains` links
    /// attempts — is judged and cleared. The limited request itself, and requests that overlapped the answer, follow
    /// nothing.
    @discardableResult
    package mutating func arrived(
        key: RetryAfterKey, logical: String? = nil, sequence: Int, nowNanos: UInt64, attempt: Retries.Attempt? = nil
    ) -> Observation? {
        guard let list = pendingByKey[key] else { return nil }
        let attempt = attempt ?? Retries.Attempt(connection: 0, arrivedAtNanos: nowNanos)
        var found: Int?
        for (index, advertisement) in list.enumerated() {
            let answer = Retries.Answer(
                connection: advertisement.connection, stream: advertisement.stream, finishedAtNanos: advertisement.deliveredAtNanos)
            guard sequence > advertisement.sequence, Retries.follows(attempt, answer),
                  advertisement.logical == nil || advertisement.logical == logical else { continue }
            if found == nil || advertisement.deliveredAtNanos! < list[found!].deliveredAtNanos! { found = index }
        }
        guard let index = found else { return nil }
        let advertisement = pendingByKey[key]!.remove(at: index)
        pendingCount -= 1
        if pendingByKey[key]!.isEmpty { pendingByKey[key] = nil }
        let head = max(advertisement.headAtNanos, advertisement.sentAtNanos)
        let earliest = advertisement.earliestRetryNanos
        var observation = Observation(
            key: key,
            advertisedSequence: advertisement.sequence,
            retrySequence: sequence,
            advertisedWaitMilliseconds: Self.milliseconds(earliest, head),
            actualWaitMilliseconds: Self.milliseconds(nowNanos, head),
            earlyByMilliseconds: Self.milliseconds(earliest, nowNanos, roundingUp: true))
        observation.windowStartNanos = head
        observation.windowEndNanos = earliest
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
        deliveredCount = 0
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
                    ("windowStartMs", Self.milliseconds(observation.windowStartNanos)),
                    ("windowEndMs", Self.milliseconds(observation.windowEndNanos)),
                ])
            })),
            ("pending", .array(pending.map { advertisement in
                .object([
                    ("key", .string(advertisement.key.description)),
                    ("sequence", .int(advertisement.sequence)),
                    ("status", .int(advertisement.status)),
                    ("retryAfter", .string(advertisement.retryAfter)),
                    ("sentAtMs", .number(String(advertisement.sentAtNanos / 1_000_000))),
                    ("deliveredAtMs", advertisement.deliveredAtNanos.map { .number(String($0 / 1_000_000)) } ?? .null),
                    ("earliestRetryMs", .number(String(advertisement.earliestRetryNanos / 1_000_000))),
                    ("windowStartMs", Self.milliseconds(
                        advertisement.absolute ? advertisement.sentAtNanos : max(advertisement.headAtNanos, advertisement.sentAtNanos))),
                    ("windowEndMs", Self.milliseconds(advertisement.earliestRetryNanos)),
                ])
            })),
        ])
    }

    /// A monotonic moment as the journal's `receivedAtMonotonicMs` writes it (fractional ms); null when unknown.
    private static func milliseconds(_ nanos: UInt64) -> JSONValue {
        nanos == 0 || nanos == UInt64.max ? .null : .double(Double(nanos) / 1_000_000)
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

    /// `a − b` (nanoseconds) in milliseconds, 0 when negative and capped at `Int.max`; rounded down, or up (so a
    /// retry early by a fraction of a millisecond is early by 1 ms, never "0 ms early" and honoured).
    private static func milliseconds(_ a: UInt64, _ b: UInt64, roundingUp: Bool = false) -> Int {
        guard a > b else { return 0 }
        let nanos = a - b
        let ms = roundingUp ? nanos / 1_000_000 + (nanos % 1_000_000 == 0 ? 0 : 1) : nanos / 1_000_000
        return Int(min(ms, UInt64(Int.max)))
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
