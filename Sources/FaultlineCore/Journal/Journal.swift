/// Which journal entries a query wants (admin API `GET /requests` and friends).
public struct JournalFilter: Sendable, Equatable {
    /// Only entries whose journal `route` field (`DecisionSource.description`) is this text: a route id, or
    /// `auth:token` / `rate-limit:ID` for the policy layer's own answers.
    public var route: String?
    public var method: String?
    public var path: String?
    public var status: Int?
    /// Only entries with a sequence number above this.
    public var since: Int?
    /// Only unmatched (`false`) or matched (`true`) requests.
    public var matched: Bool?
    /// Only malformed (`true`) or well-formed (`false`) requests.
    public var malformed: Bool?
    /// Only entries whose exchange has ended (`true`) or is still pending (`false`).
    public var completed: Bool?
    /// Only connection entries (`true`: handshakes that produced no request) or request entries (`false`).
    public var connection: Bool?
    /// Only entries whose exchange ended this way (`ExchangeOutcome`, the journal's `outcome`).
    public var outcome: ExchangeOutcome?

    public init(
        route: String? = nil, method: String? = nil, path: String? = nil, status: Int? = nil, since: Int? = nil,
        matched: Bool? = nil, malformed: Bool? = nil, completed: Bool? = nil
    ) {
        self.route = route
        self.method = method
        self.path = path
        self.status = status
        self.since = since
        self.matched = matched
        self.malformed = malformed
        self.completed = completed
    }

    public func accepts(_ entry: JournalEntry) -> Bool {
        if let route, entry.route?.description != route { return false }
        if let method, entry.method != method.uppercased() { return false }
        if let path, entry.path != path { return false }
        if let status, entry.status != status { return false }
        if let since, entry.sequence <= since { return false }
        if let matched, (entry.route != nil) != matched { return false }
        if let malformed, (entry.malformed != nil) != malformed { return false }
        if let completed, (entry.outcome != .pending) != completed { return false }
        if let connection, entry.isConnectionEntry != connection { return false }
        if let outcome, entry.outcome != outcome { return false }
        return true
    }
}

/// The request journal: the most recent `capacity` entries plus counters that stay exact after eviction.
///
/// Confined to the server's loop thread. Sequence numbers start at 1 and are never reused, even across
/// `clear()`, so a test can tell "before" from "after".
package struct Journal: Sendable {
    package let capacity: Int
    /// Request bodies are kept up to this many bytes each.
    package let maxBodyBytes: Int
    /// A ring: once full, each new entry overwrites the oldest, so recording costs the same every time
    /// (no periodic mass eviction to stall the loop). `ring[(start + i) % capacity]` is the i-th oldest.
    private var ring: [JournalEntry] = []
    private var start = 0
    /// Sequence number of the oldest kept entry.
    private var firstSequence = 1
    package private(set) var nextSequence = 1
    /// Every request ever recorded, including evicted and cleared ones.
    package private(set) var totalRecorded = 0
    package private(set) var evicted = 0
    package private(set) var totalMalformed = 0
    package private(set) var totalUnmatched = 0
    /// Requests recorded per route since start, exact regardless of eviction, keyed as the journal prints the
    /// route (`DecisionSource.description`), as `/stats` shows them.
    package var perRoute: [String: Int] {
        var counts: [String: Int] = [:]
        for (route, count) in earlierRoutes { counts[route.description, default: 0] += count }
        if let currentRoute { counts[currentRoute.description, default: 0] += currentRouteCount }
        return counts
    }
    /// `perRoute` in two parts: the run of consecutive requests to one route is counted without hashing its id
    /// (the common case under load), and folded into the dictionary when another route comes.
    private var earlierRoutes: [DecisionSource: Int] = [:]
    private var currentRoute: DecisionSource?
    private var currentRouteCount = 0
    /// How the request entries no longer kept (evicted or cleared) had ended when they went, by
    /// `ExchangeOutcome.counterIndex`: with the kept ones, `requestOutcomes`. An array, not a dictionary, since an
    /// eviction is on the request path once the journal is full.
    private var droppedOutcomes = [Int](repeating: 0, count: ExchangeOutcome.allCases.count)

    package init(capacity: Int = 10_000, maxBodyBytes: Int = 64 * 1024) {
        self.capacity = max(capacity, 1)
        self.maxBodyBytes = max(maxBodyBytes, 0)
        ring.reserveCapacity(min(self.capacity, 1024))
    }

    /// The kept entries, oldest first.
    package var entries: [JournalEntry] {
        Array(ring[start...] + ring[..<start])
    }

    /// How many entries are kept.
    package var retainedCount: Int { ring.count }

    /// Records a new entry, assigning its sequence number, which it returns. The body is capped here.
    @discardableResult
    package mutating func record(_ entry: consuming JournalEntry) -> Int {
        let sequence = nextSequence
        entry.sequence = sequence
        nextSequence += 1
        if entry.body.count > maxBodyBytes { entry.body = Array(entry.body.prefix(maxBodyBytes)) }
        if ring.isEmpty { firstSequence = sequence }
        if entry.malformed != nil { totalMalformed += 1 }
        if let route = entry.route {
            if route == currentRoute {
                currentRouteCount += 1
            } else {
                if let currentRoute { earlierRoutes[currentRoute, default: 0] += currentRouteCount }
                currentRoute = route
                currentRouteCount = 1
            }
        }
        if entry.unmatched != nil { totalUnmatched += 1 }
        totalRecorded += 1
        if ring.count < capacity {
            ring.append(entry)
        } else {
            if ring[start].isRequestEntry { droppedOutcomes[ring[start].outcome.counterIndex] += 1 }
            ring[start] = entry
            start = (start + 1) % capacity
            firstSequence += 1
            evicted += 1
        }
        return sequence
    }

    private func slot(_ sequence: Int) -> Int? {
        let offset = sequence - firstSequence
        guard offset >= 0, offset < ring.count else { return nil }
        return (start + offset) % capacity
    }

    /// Changes the entry with this sequence number, if it is still kept (how its exchange ended, bytes
    /// written). Which route took it is fixed at `record` time, so the counters need no update.
    package mutating func update(_ sequence: Int, _ change: (inout JournalEntry) -> Void) {
        guard let index = slot(sequence) else { return }
        change(&ring[index])
    }

    package func entry(_ sequence: Int) -> JournalEntry? {
        slot(sequence).map { ring[$0] }
    }

    /// Matching entries, oldest first, at most `limit` (the newest ones when limited).
    package func query(_ filter: JournalFilter, limit: Int? = nil) -> [JournalEntry] {
        var found = entries.filter(filter.accepts)
        if let limit, found.count > limit { found.removeFirst(found.count - limit) }
        return found
    }

    package func count(_ filter: JournalFilter) -> Int {
        ring.reduce(0) { $0 + (filter.accepts($1) ? 1 : 0) }
    }

    /// Forgets every kept entry; counters and sequence numbers carry on.
    package mutating func clear() {
        for entry in ring where entry.isRequestEntry { droppedOutcomes[entry.outcome.counterIndex] += 1 }
        ring.removeAll(keepingCapacity: true)
        start = 0
        firstSequence = nextSequence
    }

    /// Every request entry ever recorded (not connection attempts or network changes), by how its exchange ended:
    /// the kept entries as they are now, the evicted and cleared ones as they were when they went (one still
    /// pending then is counted `pending`: its end was never journaled). Outcomes with no request are left out.
    package func requestOutcomes() -> [(outcome: ExchangeOutcome, count: Int)] {
        var counts = droppedOutcomes
        for entry in ring where entry.isRequestEntry { counts[entry.outcome.counterIndex] += 1 }
        return ExchangeOutcome.allCases.compactMap { outcome in
            counts[outcome.counterIndex] > 0 ? (outcome, counts[outcome.counterIndex]) : nil
        }
    }

    /// The counters as the admin API shows them.
    package func countersJSON() -> JSONValue {
        .object([
            ("totalRecorded", .int(totalRecorded)),
            ("retained", .int(ring.count)),
            ("evicted", .int(evicted)),
            ("capacity", .int(capacity)),
            ("malformed", .int(totalMalformed)),
            ("unmatched", .int(totalUnmatched)),
            ("perRoute", .object(perRoute.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.int($0.value)) })),
        ])
    }
}

extension JournalEntry {
    /// A request's entry, not a connection's (an attempt, a TLS handshake) or a network change.
    package var isRequestEntry: Bool { !isConnectionEntry && !isNetworkChange }
}

extension ExchangeOutcome {
    /// The case's place in `allCases`, without hashing its raw value.
    var counterIndex: Int {
        switch self {
        case .pending: 0
        case .completed: 1
        case .clientClosed: 2
        case .resetSent: 3
        case .closedByFault: 4
        case .halfClosed: 5
        case .hangReleased: 6
        case .cancelled: 7
        case .rejected: 8
        case .connectionClosing: 9
        case .streamReset: 10
        case .notProcessed: 11
        }
    }
}
