import FaultlineCore

/// The one long-poll on the journal: the admin API's `GET /requests/wait` and the Swift API's `waitForRequests`
/// both wait here until `count` entries match a filter, or a timer fires. Re-checked whenever the journal
/// changes; no polling. Loop thread only.
final class JournalWaits {
    private struct Wait {
        var filter: JournalFilter
        var count: Int
        /// The connection that asked (an admin long-poll); its waits end without an answer when it closes.
        var owner: Int?
        var timer: LoopTimer
        var done: (_ satisfied: Bool) -> Void
    }

    private unowned let core: ServerCore
    private var waits: [Int: Wait] = [:]
    private var nextID = 1

    init(core: ServerCore) {
        self.core = core
    }

    var isEmpty: Bool { waits.isEmpty }

    /// Calls `done(true)` as soon as `count` entries match `filter` (at once if they already do), or `done(false)`
    /// after `timeoutMilliseconds` or when the server stops.
    func wait(
        _ filter: JournalFilter, count: Int, timeoutMilliseconds: Int, owner: Int?,
        _ done: @escaping (_ satisfied: Bool) -> Void
    ) {
        if core.journal.count(filter) >= count {
            done(true)
            return
        }
        let id = nextID
        nextID += 1
        let timer = LoopTimer(loop: core.loop, milliseconds: max(0, timeoutMilliseconds)) { [unowned self] in
            waits.removeValue(forKey: id)?.done(false)
        }
        waits[id] = Wait(filter: filter, count: count, owner: owner, timer: timer, done: done)
    }

    /// Re-checks every wait after the journal changed.
    func journalChanged() {
        for (id, wait) in waits where core.journal.count(wait.filter) >= wait.count {
            waits[id] = nil
            wait.timer.cancel()
            wait.done(true)
        }
    }

    /// The connection that asked has closed: nobody is left to answer.
    func ownerGone(_ owner: Int) {
        for (id, wait) in waits where wait.owner == owner {
            wait.timer.cancel()
            waits[id] = nil
        }
    }

    /// The server is stopping: every wait is answered, unsatisfied.
    func stop() {
        let ending = waits
        waits = [:]
        for wait in ending.values {
            wait.timer.cancel()
            wait.done(false)
        }
    }
}
