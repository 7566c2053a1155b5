#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `GET /__faultline/state`, typed: the token authority, the rate limiters' buckets, the Retry-After judgements,
/// the idempotency records and the side effects. The fields are the admin API's (openapi.json, schema `State`).
public struct PolicyState: Sendable, Equatable, Decodable {
    /// Null when no loaded scenario declares `auth`.
    public var auth: Auth?
    public var rateLimits: [RateLimit]
    public var retryAfter: RetryAfter
    /// Per idempotent route id.
    public var idempotency: [String: Idempotency]
    public var sideEffects: SideEffectTotal

    public struct Auth: Sendable, Equatable, Decodable {
        public var currentToken: String
        public var currentTokenExpired: Bool
        public var currentTokenUses: Int
        /// Nil when tokens do not expire with time.
        public var currentTokenExpiresInMs: Int?
        public var currentRefreshToken: String?
        public var tokenPath: String
        public var protect: [String]
        public var refreshCalls: Int
        public var refreshesInFlight: Int
        public var maxRefreshesInFlight: Int
        public var tokensIssued: Int
        public var acceptedRequests: Int
        public var staleTokenRequests: Int
        public var missingTokenRequests: Int
        public var invalidGrants: Int
    }

    public struct RateLimit: Sendable, Equatable, Decodable {
        public var id: String
        /// `fixed-window` or `token-bucket`.
        public var algorithm: String
        public var limit: Int
        public var windowMs: Int
        /// `global`, `client-address` or `header:NAME`.
        public var key: String
        /// `seconds` or `http-date`.
        public var retryAfter: String
        public var rateLimitHeaders: Bool
        public var status: Int
        /// In the order first seen.
        public var buckets: [Bucket]

        public struct Bucket: Sendable, Equatable, Decodable {
            public var key: String
            public var remaining: Int
            public var resetMs: Int
            public var requests: Int
            public var limited: Int
        }
    }

    public struct RetryAfter: Sendable, Equatable, Decodable {
        public var retries: Int
        public var honoured: Int
        public var early: Int
        public var observations: [Observation]
        /// Advertised waits no retry has come for yet.
        public var pending: [Pending]

        public struct Observation: Sendable, Equatable, Decodable {
            public var key: String
            public var advertisedSequence: Int
            public var retrySequence: Int
            public var advertisedWaitMs: Int
            public var actualWaitMs: Int
            public var earlyByMs: Int
            public var honoured: Bool
        }

        public struct Pending: Sendable, Equatable, Decodable {
            public var key: String
            public var sequence: Int
            public var status: Int
            /// The `Retry-After` value sent.
            public var retryAfter: String
            public var sentAtMs: Int
            public var earliestRetryMs: Int
        }
    }

    public struct Idempotency: Sendable, Equatable, Decodable {
        public var expiryMs: Int
        /// Live records by creation time; expired ones are left out.
        public var records: [Record]
        public var sideEffects: SideEffects

        public struct Record: Sendable, Equatable, Decodable {
            public var scope: String
            public var key: String
            /// `in-flight` or `completed`.
            public var state: String
            public var fingerprint: String
            /// The stored response's status; nil while in flight.
            public var status: Int?
            /// Milliseconds from now (zero or negative).
            public var createdMs: Int
            /// Milliseconds from now; nil while in flight.
            public var expiresMs: Int?
            public var replays: Int
            public var conflicts: Int
            public var mismatches: Int
        }

        public struct SideEffects: Sendable, Equatable, Decodable {
            public var total: Int
            public var keyless: Int
            public var perKey: [PerKey]

            public struct PerKey: Sendable, Equatable, Decodable {
                public var scope: String
                public var key: String
                public var count: Int
            }
        }
    }

    public struct SideEffectTotal: Sendable, Equatable, Decodable {
        public var total: Int
    }

    /// Decodes the admin API's JSON (`stateJSON()`).
    public init(json: JSONValue) throws {
        self = try JSONDecoder().decode(PolicyState.self, from: Data(json.serialized().utf8))
    }
}

/// `GET /__faultline/health`, typed.
public struct Health: Sendable, Equatable, Decodable {
    /// Always `ok`.
    public var status: String
    /// Faultline's version, as `faultline --version` prints it.
    public var version: String
    public var port: Int
    public var uptimeMs: Int
    /// When the server started, on the clock of the entries' `receivedAtMonotonicNanos` (in milliseconds).
    public var startedAtMonotonicMs: Double
    /// Names this server process: a new value means a restarted server.
    public var instance: String
    /// Open client connections, the one that asked included.
    public var connections: Int
    /// The loaded scenarios' names.
    public var scenarios: [String]
    public var journal: JournalCounters
}

/// The journal's counters, exact when old entries are evicted or the journal is cleared.
public struct JournalCounters: Sendable, Equatable, Decodable {
    /// Every request ever recorded, evicted and cleared ones included.
    public var totalRecorded: Int
    /// Entries kept now.
    public var retained: Int
    /// Entries dropped because the journal was full.
    public var evicted: Int
    /// How many entries the journal keeps (`--max-journal`).
    public var capacity: Int
    public var malformed: Int
    public var unmatched: Int
    /// Requests recorded per route id since the start.
    public var perRoute: [String: Int]
}
