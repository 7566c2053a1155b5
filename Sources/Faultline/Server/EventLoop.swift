import FaultlineHTTP2
import CLibevent
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one libevent loop, run on its own thread. Other threads never touch libevent: they `post` closures,
/// which the loop picks up through its wake-up channel (`WakeChannel`: an eventfd on Linux, a pipe elsewhere)
/// and runs in order.
final class EventLoop: @unchecked Sendable {
    /// The libevent base. Only touched on the loop thread (creation happens before the thread starts).
    let base: OpaquePointer
    private let wake: WakeChannel
    private var wakeEvent: OpaquePointer?
    private let queue = Mutex<[@Sendable () -> Void]>([])
    private let finished = Mutex<[CheckedContinuation<Void, Never>]?>([])
    /// `FAULTLINE_LOOP_STATS=1`: turn lengths and exchange times, printed when the loop ends (`LoopStats`).
    /// Set before `start`; the loop thread's alone after.
    nonisolated(unsafe) var stats: LoopStats?

    init() throws(ServerError) {
        // libevent writes with writev, which cannot pass MSG_NOSIGNAL: a client that has gone would kill the
        // process with SIGPIPE. Every write error is handled as EPIPE instead (process-wide, as servers do).
        signal(SIGPIPE, SIG_IGN)
        guard let config = event_config_new() else { throw .libevent("event_config_new") }
        defer { event_config_free(config) }
        // Precise timers: delays are the product, so a coarse clock is not good enough. (Timers also refresh the
        // loop's cached time when they are added; see LoopTimer.)
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_PRECISE_TIMER.rawValue))
        guard let base = event_base_new_with_config(config) else { throw .libevent("event_base_new_with_config") }
        self.base = base
        event_base_priority_init(base, LoopPriority.count)
        do {
            wake = try WakeChannel()
        } catch {
            event_base_free(base)
            throw error
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        wakeEvent = event_new(base, wake.readFD, Int16(EV_READ | EV_PERSIST), { _, _, context in
            let loop = Unmanaged<EventLoop>.fromOpaque(context!).takeUnretainedValue()
            loop.wake.drain()
            loop.drainQueue()
        }, context)
        event_add(wakeEvent, nil)
    }

    deinit {
        if let wakeEvent { event_free(wakeEvent) }
        event_base_free(base)
        wake.close()
    }

    /// Starts the loop thread. Returns at once.
    func start() {
        // A plain pthread (not Foundation's Thread): this file must not import Foundation, whose Dispatch
        // module clashes with libevent's headers over `fd_set`.
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let created = pthread_create(&thread, nil, { context in
            let loop = Unmanaged<EventLoop>.fromOpaque(context!).takeRetainedValue()
            loop.runOnThisThread()
            return nil
        }, context)
        precondition(created == 0, "pthread_create failed: \(created)")
        pthread_detach(thread)
    }

    private func runOnThisThread() {
        if let stats {
            // A turn at a time, timed: EVLOOP_ONCE waits for events, runs every active one (and what they made
            // active) and returns; `event_base_loopbreak` ends it early and says so.
            // The turn that stops the server is not counted: it closes every connection at once, by design.
            while true {
                let start = LoopStats.threadCPUNanos()
                event_base_loop(base, Int32(EVLOOP_ONCE))
                if event_base_got_break(base) != 0 { break }
                stats.turnEnded(cpuNanos: LoopStats.threadCPUNanos() &- start)
            }
            var report = Array(stats.report.utf8)
            _ = report.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        } else {
            event_base_loop(base, 0)
        }
        // One more pass without waiting: libevent frees bufferevents and other events through finalizers that
        // run in the loop, and the loop has just been told to end.
        event_base_loop(base, Int32(EVLOOP_NONBLOCK))
        // Anything posted after the loop ended would never run; run it here so no caller waits forever.
        drainQueue()
        let waiters = finished.withLock { waiters -> [CheckedContinuation<Void, Never>] in
            defer { waiters = nil }
            return waiters ?? []
        }
        waiters.forEach { $0.resume() }
    }

    /// Runs `work` on the loop thread, soon. Safe from any thread.
    func post(_ work: @escaping @Sendable () -> Void) {
        queue.withLock { $0.append(work) }
        wake.signal()
    }

    /// Runs `work` on the loop thread and returns its result.
    func submit<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            post { continuation.resume(returning: work()) }
        }
    }

    /// Ends `event_base_loop` after the current callbacks. Call on the loop thread.
    func breakLoop() {
        event_base_loopbreak(base)
    }

    /// Returns once the loop thread has finished.
    func waitUntilFinished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyDone = finished.withLock { waiters -> Bool in
                guard waiters != nil else { return true }
                waiters!.append(continuation)
                return false
            }
            if alreadyDone { continuation.resume() }
        }
    }

    private func drainQueue() {
        while true {
            let work = queue.withLock { pending -> [@Sendable () -> Void] in
                defer { pending.removeAll() }
                return pending
            }
            if work.isEmpty { return }
            work.forEach { $0() }
        }
    }
}

/// The order in which the loop runs what is ready: libevent runs only the most urgent non-empty level in a turn,
/// then looks again. Timers and sockets share the normal level, so neither can starve the other; housekeeping
/// (closing finished connections, writing the request log) waits below them. When 10,000 delayed responses fall
/// due together, every one is sent before any of their connections is closed (a close, FIN and socket teardown,
/// costs about as much as the send). A `TurnEndAction` has a backstop, so housekeeping runs under a load that
/// never lets the loop go quiet.
enum LoopPriority {
    /// Work that must run before any socket event that became ready in the same turn: a timeline phase a request
    /// began (ARCHITECTURE §3b), so that a kept-alive client's next request, read in that turn, already meets it.
    static let urgent: Int32 = 0
    /// Timers, sockets, signals and posted work: libevent gives every new event the middle of 3 levels, so only
    /// the housekeeping backstop and urgent timers set it explicitly.
    static let normal: Int32 = 1
    static let housekeeping: Int32 = 2
    static let count: Int32 = 3
}

/// A one-shot loop timer that runs a closure on the loop thread. Cancel it, or let it fire; either way the
/// libevent event is freed by `deinit`. Loop thread only.
final class LoopTimer {
    private var event: OpaquePointer?
    private var action: (() -> Void)?
    /// Where this timer's deadline is counted while it is pending (`StepDeadlines`: a script's wait).
    private var counted: StepDeadlines?
    private var dueMilliseconds: Int64 = 0

    /// `priority`: `LoopPriority.urgent` runs the action before the socket events that became ready in the turn it
    /// falls due in; default, the normal level. `counted`: the deadline is counted there until the timer fires, is
    /// cancelled or goes away.
    init(loop: EventLoop, milliseconds: Int, priority: Int32? = nil, counted: StepDeadlines? = nil,
         _ action: @escaping () -> Void) {
        self.action = action
        // The event holds no reference to the timer: the owner keeps the timer alive while it is pending,
        // and cancelling (or deinit) removes the event before it could fire on a dead object.
        event = event_new(loop.base, -1, 0, { _, _, context in
            let timer = Unmanaged<LoopTimer>.fromOpaque(context!).takeUnretainedValue()
            timer.uncount()
            let action = timer.action
            timer.action = nil
            action?()
        }, Unmanaged.passUnretained(self).toOpaque())
        if let counted {
            self.counted = counted
            dueMilliseconds = Clock.monotonicMilliseconds() + Int64(milliseconds)
            counted.add(dueMilliseconds)
        }
        if let priority { event_priority_set(event, priority) }
        var delay = timeval(milliseconds: milliseconds)
        // Measure from now, not from the start of this loop turn: with the cached time, a timer added late in a
        // busy turn would fire early. Refreshing here costs a clock read per timer, not per event.
        event_base_update_cache_time(loop.base)
        event_add(event, &delay)
    }

    func cancel() {
        action = nil
        uncount()
        if let event { event_del(event) }
    }

    private func uncount() {
        counted?.remove(dueMilliseconds)
        counted = nil
    }

    deinit {
        uncount()
        if let event {
            event_del(event)
            event_free(event)
        }
    }
}

/// A closure that runs once the loop has nothing more urgent to do (`LoopPriority.housekeeping`): at the end of
/// the current turn, after the events already active, or later while timers and sockets keep the loop busy, but
/// never later than `maxWaitMilliseconds` after it was scheduled: a backstop timer at the normal level then runs
/// it. Scheduling again before it ran changes nothing; scheduling from inside the action runs it again on a later
/// turn, after whatever became ready meanwhile, which lets a long job go in slices. A job the backstop had to
/// start, and that is still busy, gets its next slice within `starvedIntervalMilliseconds`: steady progress in
/// small steps, not one long stall for whatever timers fall due meanwhile.
/// Loop thread only; `close()` frees the events (call it while the event base exists, when the server stops).
final class TurnEndAction {
    private var event: OpaquePointer?
    private var backstopEvent: OpaquePointer?
    private let maxWait: timeval
    private let starvedInterval: timeval
    private var scheduled = false
    private var running = false
    /// Whether the backstop started the current run.
    private var starved = false
    private let action: () -> Void

    init(loop: EventLoop, maxWaitMilliseconds: Int, starvedIntervalMilliseconds: Int? = nil,
         _ action: @escaping () -> Void) {
        self.action = action
        maxWait = timeval(milliseconds: maxWaitMilliseconds)
        starvedInterval = timeval(milliseconds: starvedIntervalMilliseconds ?? maxWaitMilliseconds)
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = event_new(loop.base, -1, 0, { _, _, context in
            Unmanaged<TurnEndAction>.fromOpaque(context!).takeUnretainedValue().run(backstop: false)
        }, context)
        event_priority_set(event, LoopPriority.housekeeping)
        backstopEvent = event_new(loop.base, -1, 0, { _, _, context in
            Unmanaged<TurnEndAction>.fromOpaque(context!).takeUnretainedValue().run(backstop: true)
        }, context)
        event_priority_set(backstopEvent, LoopPriority.normal)
    }

    /// False once closed.
    var isOpen: Bool { event != nil }

    func schedule() {
        guard !scheduled, let event, let backstopEvent else { return }
        scheduled = true
        if running {
            // Activated now, it would run again in this very pass over the active events; a zero timeout
            // makes it wait for the next turn.
            var now = timeval(milliseconds: 0)
            event_add(event, &now)
        } else {
            event_active(event, 0, 0)
        }
        var wait = running && starved ? starvedInterval : maxWait
        event_add(backstopEvent, &wait)
    }

    private func run(backstop: Bool) {
        guard scheduled else { return }
        scheduled = false
        // Whichever fired first, the other must not run the action again.
        if let event { event_del(event) }
        if let backstopEvent { event_del(backstopEvent) }
        running = true
        starved = backstop
        action()
        running = false
    }

    func close() {
        if let event { event_free(event) }
        if let backstopEvent { event_free(backstopEvent) }
        event = nil
        backstopEvent = nil
    }

    deinit { close() }
}

extension timeval {
    /// A libevent timeout of `milliseconds`.
    init(milliseconds: Int) {
        self.init(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
    }
}

/// Monotonic and wall clocks for journal times.
enum Clock {
    static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func monotonicMilliseconds() -> Int64 { Int64(monotonicNanos() / 1_000_000) }

    static func wallSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// The HTTP/2 codec schedules its timers through `HTTP2ConnectionIO`, which hands back loop timers.
extension LoopTimer: CancellableTimer {}
