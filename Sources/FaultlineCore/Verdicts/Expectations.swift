/// What a scenario expects of the client under test (ARCHITECTURE §8): the rules `GET /__faultline/report` judges.
/// Every rule is optional; an absent rule is not judged.
package struct Expectations: Sendable, Equatable {
    /// No request came before the time a 429/503 `Retry-After` allowed.
    package var honorsRetryAfter = false
    /// Never more than one token refresh in flight at once.
    package var singleFlightRefresh = false
    /// At most this many token refreshes in all.
    package var maxRefreshes: Int?
    /// At most one side effect per idempotency key.
    package var noDuplicateSideEffects = false
    /// A non-idempotent request (POST, PATCH) without an idempotency key is never sent twice.
    package var retriesOnlyReplayable = false
    /// A non-idempotent request (POST, PATCH) without an idempotency key is sent again only when the server had
    /// said it was not processed: HTTP/2's REFUSED_STREAM, or a GOAWAY whose last stream id was below it
    /// (RFC 9113 §8.7). Over HTTP/1.1 no answer says so, so any such retry fails.
    package var retriesOnlyUnprocessed = false
    /// A request the server said it did not process (HTTP/2 REFUSED_STREAM, or above a GOAWAY's last stream id) is
    /// sent again: RFC 9113 §8.7 makes that safe whatever the method, and a client that never does turns a graceful
    /// server restart into a user-visible error.
    package var retriesRefusedStreams = false
    /// At most this many attempts of one logical request.
    package var maxAttempts: Int?
    /// The waits before the n-th retry grow with n, judged across logical requests (`Verdicts.BackoffRule`);
    /// inconclusive with too few logical requests retried twice or more.
    package var backoff = false
    /// With `backoff`: the waits before the same retry vary across logical requests (jitter).
    package var jitter = false
    /// A request answered 4xx (other than 408, 409, 425, 429) is not sent again.
    package var noRetryOn4xx = false
    /// A repeated GET of a resource whose earlier answer carried validators (and no `no-store`) carries
    /// If-None-Match or If-Modified-Since.
    package var revalidatesWithValidators = false
    /// A download a fault cut after N bytes is asked for again from where it stopped (Range from at most N,
    /// above 0) with If-Range, not restarted.
    package var resumesDownloads = false
    /// Every PUT, PATCH and DELETE of a resource carries If-Match or If-Unmodified-Since (or, creating, If-None-Match).
    package var conditionalWrites = false
    /// After a WebSocket session is dropped or refused, the waits before the reconnects grow.
    package var reconnectBackoff = false
    /// With `reconnectBackoff`: the waits scatter around their growth (jitter), so that many clients dropped at once
    /// do not come back in step.
    package var reconnectJitter = false
    /// No WebSocket upgrade came before the time a refused upgrade's `Retry-After` allowed.
    package var honorsRetryAfterOnUpgrade = false
    /// Every WebSocket session after the first starts with client messages matching these, in order.
    package var resubscribes: [BodyMatcher]?
    /// The client pings at least this often (ms) in every session, or ends a session whose server went silent
    /// within this long.
    package var heartbeatMilliseconds: Int?
    /// After an outage ends, the client's requests and connection attempts are spread: no more than `max` within any
    /// `withinMilliseconds` (ARCHITECTURE §3b).
    package var noRequestStorm: StormLimit?
    /// During an outage, the connection attempts the server can see come at growing intervals.
    package var backsOffDuringOutage = false
    /// How attempts of the same logical request are recognised (`Retries` says what makes one a retry of another).
    package var logicalKey: LogicalRequestKey = .methodPathAndIdempotencyKey

    package init() {}

    package var isEmpty: Bool { self == Expectations() }
}

/// `noRequestStorm`'s limit: at most `max` arrivals within any `withinMilliseconds` after an outage ends.
package struct StormLimit: Sendable, Equatable {
    package var max = 10
    package var withinMilliseconds = 1000

    package init(max: Int = 10, withinMilliseconds: Int = 1000) {
        self.max = max
        self.withinMilliseconds = withinMilliseconds
    }
}

/// How the verdicts group attempts into one logical request.
package enum LogicalRequestKey: Sendable, Equatable {
    /// Method, path and the `Idempotency-Key` value when present (the default).
    case methodPathAndIdempotencyKey
    /// The value of a header the client sets once per logical request (e.g. `X-Request-ID`); requests without
    /// it fall back to the default.
    case header(String)
}
