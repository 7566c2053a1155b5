/// What "a retry" is, defined once for every rule that speaks of retries (`honorsRetryAfter` through
/// `RetryAfterTracker`, `maxAttempts`, `noRetryOn4xx`, `backoff`, `retriesOnlyReplayable`, `retriesOnlyUnprocessed`,
/// `retriesRefusedStreams`; ARCHITECTURE §8, README "A retry" under Verdicts).
///
/// - **The same logical request**: attempts with the same `label` — method and path, plus the `Idempotency-Key`
///   when one is sent, or the value of the header `logicalKey` names.
/// - **A retry** of an attempt is a later attempt of the same logical request that arrived after the server had
///   finished the earlier one's exchange — its answer's last byte written, or the exchange failed — provably so
///   (`follows`: after a broken exchange; after an answer, on the same HTTP/1.1 connection, on a connection
///   accepted after it, or on one already open 10 ms after it, 1 ms on the same HTTP/2 connection). The server
///   cannot know whether the client read a 201 before its connection broke, so "sent again" is judged whatever the
///   earlier answer was; a client that polls one resource on purpose names its logical requests with a header
///   (`"logicalRequest": "header:X-Request-ID"`). A rule judges only where its situation arose (`invitesRetry`: an
///   attempt that failed, so that sending it again was tempting); elsewhere it is inconclusive.
/// - Requests that overlap in time are distinct requests, however alike: two views loading the same resource, an
///   HTTP/2 client multiplexing, a pool of HTTP/1.1 connections. None of them could have been sent because of
///   another's answer. (Overlapping duplicate POSTs — a double tap — are still a defect: `noDuplicateSideEffects`
///   catches them by their side effects.)
/// - Each attempt is the retry of at most one earlier attempt and has at most one retry. When several earlier
///   attempts of one logical request wait for a retry (concurrent identical requests), the next attempt is the retry
///   of the one that most invites it (`retryRank`: a broken exchange or a 5xx before a 404, a 404 before a success),
///   the earliest finished among equals. Identical requests cannot be told apart, so a staggered burst (one answered
///   early, the rest later) can be paired across: a limit, not a rule.
package enum Retries {
    /// The logical request an attempt belongs to.
    package static func label(_ head: HTTPRequestHead, _ key: LogicalRequestKey) -> String {
        if case .header(let name) = key, let value = head.headers[name] {
            return "\(name): \(value)"
        }
        var label = "\(head.method) \(head.path)"
        if let value = head.headers["idempotency-key"] {
            label += " key \(IdempotencyStore.parseKey(value) ?? value)"
        }
        return label
    }

    /// Where and when an attempt arrived.
    package struct Attempt: Sendable, Equatable {
        package var connection: Int
        /// The HTTP/2 stream; nil over HTTP/1.1.
        package var stream: Int?
        /// When the server accepted its connection (monotonic ns; 0 when unknown).
        package var connectionOpenedAtNanos: UInt64
        /// When its request arrived (monotonic ns): its head was read.
        package var arrivedAtNanos: UInt64

        package init(connection: Int, stream: Int? = nil, connectionOpenedAtNanos: UInt64 = 0, arrivedAtNanos: UInt64) {
            self.connection = connection
            self.stream = stream
            self.connectionOpenedAtNanos = connectionOpenedAtNanos
            self.arrivedAtNanos = arrivedAtNanos
        }

        package init(_ entry: JournalEntry) {
            self.init(connection: entry.connectionID, stream: entry.stream,
                      connectionOpenedAtNanos: entry.connectionOpenedAtMonotonicNanos, arrivedAtNanos: entry.receivedAtMonotonicNanos)
        }
    }

    /// Where and when an earlier attempt's exchange ended (nil: not yet), and whether it ended with an answer.
    package struct Answer: Sendable, Equatable {
        package var connection: Int
        package var stream: Int?
        package var finishedAtNanos: UInt64?
        /// A complete response went out, and no fault broke anything around it. False for an exchange that broke:
        /// refused or reset streams, a reset or closed connection, a hang the client gave up on, a GOAWAY after it.
        package var answered = true

        package init(connection: Int, stream: Int? = nil, finishedAtNanos: UInt64?, answered: Bool = true) {
            self.connection = connection
            self.stream = stream
            self.finishedAtNanos = finishedAtNanos
            self.answered = answered
        }

        package init(_ entry: JournalEntry) {
            self.init(connection: entry.connectionID, stream: entry.stream, finishedAtNanos: entry.finishedAtMonotonicNanos,
                      answered: entry.outcome == .completed && entry.status != nil && entry.fault == nil)
        }
    }

    /// How long after an answer's end (a complete response) a request on a connection that was already open —
    /// another one, or the same HTTP/2 connection — must arrive to be taken as sent because of it. The server reads
    /// requests one loop turn at a time, so a burst sent at once (HTTP/2 streams in separate packets, a pool of
    /// HTTP/1.1 connections) is read over a few milliseconds, after the first tiny answer has already gone out. The
    /// price: a client that retries an *answered* request within this window on a connection that was already open
    /// is not judged as retrying (a rule with nothing else to judge then says inconclusive, not pass).
    package static let concurrencyGraceNanos: UInt64 = 10_000_000

    /// Whether `later` was sent because of `answer` — after it, and provably so:
    /// - an exchange that broke (a refused or reset stream, a reset or closed connection, a fault): any request
    ///   after it. Clients resend those at once by design (RFC 9113 §8.7 for refused streams, a reconnect after a
    ///   reset);
    /// - an answer, on the same HTTP/1.1 connection: any request after it (no pipelining: a pipelined request's head
    ///   was read before the answer ended);
    /// - an answer, on a connection the server accepted after it ended (a client that dials anew for each request);
    /// - an answer, on a connection already open (another one, or the same HTTP/2 connection): at least
    ///   `concurrencyGraceNanos` after it.
    /// Monotonic nanoseconds, never milliseconds: a burst arrives within one millisecond. One race remains: a burst
    /// whose connections were dialled together but that the loop accepts only after it answered the first looks like
    /// retries on fresh connections.
    package static func follows(_ later: Attempt, _ answer: Answer) -> Bool {
        guard let finished = answer.finishedAtNanos, finished <= later.arrivedAtNanos else { return false }
        if !answer.answered { return true }
        if later.connection == answer.connection, later.stream == nil, answer.stream == nil { return true }
        if later.connection != answer.connection, later.connectionOpenedAtNanos >= finished { return true }
        let grace = later.connection == answer.connection ? multiplexedGraceNanos : concurrencyGraceNanos
        return later.arrivedAtNanos - finished >= grace
    }

    /// Whether `later` arrived after `answer` ended, but on a connection already open and within the grace
    /// (`follows` says no): too soon to tell a retry from a request sent alongside. Such a request is not the
    /// answer's retry, but it is no proof that the answer was *not* retried either: a rule that passes because a
    /// request was not sent again must not count an answer followed this way (seen in this project's CI: a client
    /// retrying a 503 on its HTTP/2 connection 0.8 ms after each answer, every other retry inside the 1 ms grace,
    /// passed `maxAttempts` with 5 attempts).
    package static func tooSoonToTell(_ later: Attempt, _ answer: Answer) -> Bool {
        guard let finished = answer.finishedAtNanos, finished <= later.arrivedAtNanos, answer.answered else { return false }
        return !follows(later, answer)
    }

    /// Finds, for an answer, a later attempt of the same logical request (in any chain: the pairing may have put it
    /// after another answer) that came too soon after it to tell (`tooSoonToTell`). Built once per rule: attempts
    /// sorted by arrival with their labels, so a look is a binary search and a scan of the grace window, not a pass
    /// over the journal (a report on a full journal asks for every chain).
    package struct TooSoonIndex {
        private let byArrival: [(arrived: UInt64, label: String, entry: JournalEntry)]
        private let key: LogicalRequestKey

        package init(_ chains: [[JournalEntry]], _ key: LogicalRequestKey) {
            self.key = key
            byArrival = chains.joined().compactMap { entry in
                entry.head.map { (entry.receivedAtMonotonicNanos, Retries.label($0, key), entry) }
            }.sorted { $0.arrived < $1.arrived }
        }

        package func successor(of last: JournalEntry) -> JournalEntry? {
            guard let head = last.head, let finished = last.finishedAtMonotonicNanos else { return nil }
            let name = Retries.label(head, key)
            let answer = Answer(last)
            var low = 0, high = byArrival.count
            while low < high {
                let middle = (low + high) / 2
                if byArrival[middle].arrived < finished { low = middle + 1 } else { high = middle }
            }
            let end = finished &+ max(concurrencyGraceNanos, multiplexedGraceNanos)
            var index = low
            while index < byArrival.count, byArrival[index].arrived < end {
                let candidate = byArrival[index]
                if candidate.entry.sequence > last.sequence, candidate.label == name,
                   tooSoonToTell(Attempt(candidate.entry), answer) {
                    return candidate.entry
                }
                index += 1
            }
            return nil
        }
    }

    /// Why an answer followed too soon cannot show that it was not retried, for an explanation.
    package static func tooSoonText(_ later: JournalEntry, after earlier: JournalEntry) -> String {
        let gap = Double((later.receivedAtMonotonicNanos &- (earlier.finishedAtMonotonicNanos ?? 0)) / 1_000) / 1_000
        let same = later.connectionID == earlier.connectionID
        return "request #\(later.sequence) came \(gap) ms after #\(earlier.sequence)'s answer on "
            + (same ? "the same HTTP/2 connection" : "a connection already open")
            + ", too soon to tell a retry from a request sent alongside (\(same ? "1" : "10") ms)"
    }

    /// `concurrencyGraceNanos` for a request on the same HTTP/2 connection as the answer. One client's concurrent
    /// streams leave it together — in one write, or in writes microseconds apart (0.4 ms seen on a loaded machine) —
    /// while a retry on the connection waits for the answer to be read, parsed and acted on.
    package static let multiplexedGraceNanos: UInt64 = 1_000_000

    /// Whether an attempt leaves its logical request unfinished, so that sending it again is a retry: any status
    /// of 400 or more, or an exchange that did not complete (reset, cut, refused, timed out, abandoned).
    package static func invitesRetry(_ attempt: JournalEntry) -> Bool {
        guard attempt.outcome == .completed, let status = attempt.status else { return attempt.outcome != .pending }
        return status >= 400
    }

    /// The attempts of `entries` as chains — a first attempt, its retry, that retry's retry — in the order their
    /// first attempts arrived. `label` names an attempt's logical request; nil leaves the entry out.
    package static func chains(_ entries: [JournalEntry], label: (JournalEntry) -> String?) -> [[JournalEntry]] {
        var chains: [[JournalEntry]] = []
        // Per logical request, the chains not yet retried, by when their last attempt finished (earliest first); none
        // that finished after a request arrived can be followed by it.
        var open: [String: [(finished: UInt64, chain: Int)]] = [:]
        for entry in entries.sorted(by: { $0.sequence < $1.sequence }) {
            guard let name = label(entry) else { continue }
            let attempt = Attempt(entry)
            // Among the chains it follows, the one whose last attempt most invites a retry — a client repeats a 503
            // before a 404, and a 404 before a success — and among those the earliest finished (the one that has
            // waited longest: a burst retried with the same backoff is paired in order).
            var found: (position: Int, rank: Int)?
            for (position, candidate) in (open[name] ?? []).enumerated() {
                if candidate.finished > attempt.arrivedAtNanos { break }
                let last = chains[candidate.chain][chains[candidate.chain].count - 1]
                guard follows(attempt, Answer(last)) else { continue }
                let rank = retryRank(last)
                if found == nil || rank < found!.rank { found = (position, rank) }
                if rank == 0 { break }
            }
            let index: Int
            if let found {
                index = open[name]!.remove(at: found.position).chain
                chains[index].append(entry)
            } else {
                index = chains.count
                chains.append([entry])
            }
            // A pending attempt (no end yet) sorts last: nothing can follow it.
            let finished = entry.finishedAtMonotonicNanos ?? UInt64.max
            let waiting = open[name] ?? []
            var low = 0, high = waiting.count
            while low < high {
                let middle = (low + high) / 2
                if waiting[middle].finished <= finished { low = middle + 1 } else { high = middle }
            }
            open[name, default: []].insert((finished, index), at: low)
        }
        return chains
    }

    /// How much an attempt invites a retry: 0 an exchange that broke or a status worth retrying (5xx, 408, 409, 425,
    /// 429), 1 any other 4xx, 2 a success.
    static func retryRank(_ attempt: JournalEntry) -> Int {
        guard attempt.outcome == .completed, let status = attempt.status, attempt.fault == nil else { return 0 }
        if status >= 500 || Verdicts.retryable4xx.contains(status) { return 0 }
        return status >= 400 ? 1 : 2
    }

    /// The attempts the request rules judge: answered by a route or resource (not the token endpoint, not auth's
    /// 401s, which the refresh rules judge, not the server's own connection-limit 503s), as chains by `key`.
    package static func logicalRequests(_ entries: [JournalEntry], _ key: LogicalRequestKey) -> [[JournalEntry]] {
        chains(entries) { entry in
            guard entry.route != nil, entry.route != .tokenEndpoint, entry.route != .connectionLimit,
                  entry.answeredBy != .auth, let head = entry.head
            else { return nil }
            return label(head, key)
        }
    }
}
