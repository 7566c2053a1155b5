import FaultlineCore

/// The dashboard's change feed, `GET /__faultline/events` (ARCHITECTURE §7 "The dashboard"): a long-poll that
/// answers with the journal entries recorded or changed since the caller's cursor, and whether anything outside the
/// journal changed (scenarios loaded, reset or reloaded; the network; a token; a resource).
///
/// It costs the serving path nothing while nobody watches: the server tests one Bool (`ServerCore.feedActive`) per
/// journal change. The first call without a cursor switches the feed on; from then on each change appends one
/// integer (the sequence changed) to a log, and a caller's cursor is a position in that log. A minute without any
/// call switches it off again and forgets the log; a cursor from before (or from another server process:
/// `instance`) gets `reset: true`, meaning "fetch `/requests` again", as does a cleared journal. An answer carries at
/// most `maxEntriesPerAnswer` entries, the newest; `skipped` counts the changed ones it left out.
///
/// Answers are coalesced: the first change after a caller started waiting answers it `flushMilliseconds` later
/// (`minimumIntervalMilliseconds` after the previous round at the soonest, and never sooner than nine times that
/// round's own cost: the feed takes at most a tenth of the loop), with everything that changed meanwhile, so a burst
/// of requests costs one answer per watcher. Loop thread only.
final class EventFeed {
    /// The log's markers besides sequence numbers (which start at 1).
    private static let stateChanged = 0
    private static let journalCleared = -1
    /// A watcher that has not called for this long is gone; the feed switches off.
    static let idleNanos: UInt64 = 60_000_000_000
    /// How long after the first change a waiting watcher is answered.
    static let flushMilliseconds = 25
    /// At most one round of answers in this long: under a load test's thousands of requests a second, an open
    /// dashboard costs the loop four batches a second, not one per change.
    static let minimumIntervalMilliseconds = 250
    /// The log is trimmed to half when it grows past this; a cursor before the trimmed part gets `reset`.
    static let logCapacity = 100_000
    /// At most this many entries in one answer: the newest of those that changed; `skipped` counts the others
    /// (a load test's thousands a second are in the journal, not all on the page).
    static let maxEntriesPerAnswer = 2_000
    /// A round of answers may take at most this share of the loop: the next round waits nine times as long as
    /// the last one took to build (serializing entries is the feed's one real cost).
    static let dutyDivisor: UInt64 = 10

    private struct Wait {
        var cursor: Int
        var owner: Int
        var timer: LoopTimer
        var done: (JSONValue) -> Void
    }

    private unowned let core: ServerCore
    /// Names this server process, so a dashboard can tell a restarted server from a quiet one.
    let instance: String
    /// `log[i]` changed at stamp `base + i`: a sequence number, `stateChanged` or `journalCleared`.
    private var log: [Int] = []
    private var base = 0
    private var lastCallNanos: UInt64 = 0
    /// When the last round of coalesced answers went out, and how long it took to build and hand over.
    private var lastAnswerNanos: UInt64 = 0
    private var lastRoundNanos: UInt64 = 0
    private var waits: [Int: Wait] = [:]
    private var nextWaitID = 1
    private var flushTimer: LoopTimer?

    init(core: ServerCore) {
        self.core = core
        var random = SystemRandomNumberGenerator()
        instance = String(random.next() & 0xffff_ffff_ffff, radix: 16)
    }

    /// The next stamp: what a caller that has seen everything holds.
    private var cursor: Int { base + log.count }

    var hasWatchers: Bool { !waits.isEmpty }

    // MARK: - Changes (the server calls these only while `core.feedActive`)

    /// An entry was recorded or changed.
    func entryChanged(_ sequence: Int) { append(sequence) }

    /// Something the dashboard shows outside the journal changed.
    func stateChanged() { if core.feedActive { append(Self.stateChanged) } }

    /// The journal was cleared: every watcher starts again.
    func journalCleared() { if core.feedActive { append(Self.journalCleared) } }

    private func append(_ marker: Int) {
        if waits.isEmpty, Clock.monotonicNanos() &- lastCallNanos > Self.idleNanos {
            switchOff()
            return
        }
        log.append(marker)
        if log.count > Self.logCapacity {
            let drop = log.count / 2
            log.removeFirst(drop)
            base += drop
        }
        if !waits.isEmpty { scheduleFlush() }
    }

    /// Answers every waiting watcher `flushMilliseconds` from now, or `minimumIntervalMilliseconds` after the last
    /// round if that is later.
    private func scheduleFlush() {
        guard flushTimer == nil else { return }
        let sinceLast = Int(min((Clock.monotonicNanos() &- lastAnswerNanos) / 1_000_000, 1_000_000))
        let interval = max(Self.minimumIntervalMilliseconds, Int(lastRoundNanos * (Self.dutyDivisor - 1) / 1_000_000))
        let delay = max(Self.flushMilliseconds, interval - sinceLast)
        flushTimer = LoopTimer(loop: core.loop, milliseconds: delay) { [unowned self] in
            flushTimer = nil
            answerAll()
        }
    }

    private func switchOff() {
        core.feedActive = false
        // Stamps go on, past a gap of one: every cursor given before, the last one included, is now below `base`,
        // so it gets `reset` — the change that found the feed idle, and those after it, are not in any log.
        base += log.count + 1
        log = []
    }

    // MARK: - The endpoint

    /// Answers `GET /events?cursor=C&timeoutMs=T` through `reply`: at once without a usable cursor (`reset`) or with
    /// `timeoutMs=0`; else with the next round of answers once something changed since `C`, or after
    /// `timeoutMilliseconds` with nothing.
    func poll(cursor given: Int?, timeoutMilliseconds: Int, owner: Int, reply: @escaping (JSONValue) -> Void) {
        lastCallNanos = Clock.monotonicNanos()
        // Switched off, the log is empty: tracking starts at `base`, and earlier cursors are below it.
        core.feedActive = true
        guard let given, given >= base, given <= cursor else {
            reply(answer(entries: [], reset: true, state: true))
            return
        }
        if timeoutMilliseconds == 0 {
            reply(changes(since: given))
            return
        }
        let id = nextWaitID
        nextWaitID += 1
        let timer = LoopTimer(loop: core.loop, milliseconds: timeoutMilliseconds) { [unowned self] in
            guard let wait = waits.removeValue(forKey: id) else { return }
            lastCallNanos = Clock.monotonicNanos()
            wait.done(changes(since: wait.cursor))
        }
        waits[id] = Wait(cursor: given, owner: owner, timer: timer, done: reply)
        // Changes already waiting for this caller go out with the next round, not at once.
        if given < cursor { scheduleFlush() }
    }

    /// What changed from stamp `from` to now.
    private func changes(since from: Int) -> JSONValue {
        var sequences = Set<Int>()
        var state = false
        var reset = false
        for marker in log[(from - base)...] {
            switch marker {
            case Self.stateChanged: state = true
            case Self.journalCleared: reset = true
            default: sequences.insert(marker)
            }
        }
        if reset { return answer(entries: [], reset: true, state: true) }
        let newest = sequences.sorted().suffix(Self.maxEntriesPerAnswer)
        let entries = newest.compactMap { core.journal.entry($0)?.json() }
        return answer(entries: entries, reset: false, state: state, skipped: sequences.count - newest.count)
    }

    private func answer(entries: [JSONValue], reset: Bool, state: Bool, skipped: Int = 0) -> JSONValue {
        .object([
            ("instance", .string(instance)),
            ("cursor", .int(cursor)),
            ("reset", .bool(reset)),
            ("state", .bool(state)),
            ("skipped", .int(skipped)),
            ("entries", .array(entries)),
        ])
    }

    private func answerAll() {
        let answering = waits
        waits = [:]
        let started = Clock.monotonicNanos()
        for wait in answering.values.sorted(by: { $0.cursor < $1.cursor }) {
            wait.timer.cancel()
            wait.done(changes(since: wait.cursor))
        }
        lastCallNanos = Clock.monotonicNanos()
        lastAnswerNanos = lastCallNanos
        lastRoundNanos = lastCallNanos &- started
    }

    /// The connection that asked has closed.
    func ownerGone(_ owner: Int) {
        for (id, wait) in waits where wait.owner == owner {
            wait.timer.cancel()
            waits[id] = nil
        }
    }

    /// The server is stopping: every watcher is answered with what there is.
    func stop() {
        flushTimer?.cancel()
        flushTimer = nil
        answerAll()
    }
}
