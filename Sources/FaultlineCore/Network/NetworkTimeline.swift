/// A scenario's `timeline` (ARCHITECTURE §3b): phases that change the network, in order, each armed once the one
/// before it began. Pure: the server feeds it the clock and finished requests and carries out what it returns.
package struct TimelinePhase: Sendable, Equatable {
    package enum Trigger: Sendable, Equatable {
        /// This long after the previous phase began (the first phase: after the load or reset).
        case afterMilliseconds(Int)
        /// Once `count` requests to route `route` have been answered since the load or reset.
        case afterRequests(count: Int, route: String)
    }

    package var trigger: Trigger
    package var change: NetworkChange
    /// A label for the journal; by default `phase N`.
    package var name: String?

    package init(trigger: Trigger, change: NetworkChange, name: String? = nil) {
        self.trigger = trigger
        self.change = change
        self.name = name
    }
}

/// Where a scenario's timeline is: which phase is armed, when the last one began, the requests counted per route.
package struct NetworkTimeline: Sendable {
    package let phases: [TimelinePhase]
    /// The next phase to begin; `phases.count` when all have.
    package private(set) var next = 0
    private var lastBeganAt: UInt64 = 0
    private var answered: [String: Int] = [:]

    package init(phases: [TimelinePhase], nowMilliseconds: UInt64) {
        self.phases = phases
        lastBeganAt = nowMilliseconds
    }

    /// Starts over: no phase has begun, no request is counted.
    package mutating func reset(nowMilliseconds: UInt64) {
        next = 0
        lastBeganAt = nowMilliseconds
        answered = [:]
    }

    /// The routes whose answered requests trigger a phase: the server counts only these.
    package var countedRoutes: Set<String> {
        Set(phases.compactMap { if case .afterRequests(_, let route) = $0.trigger { route } else { nil } })
    }

    /// When the armed phase begins by time (monotonic ms), if it is timed.
    package var nextDeadline: UInt64? {
        guard next < phases.count, case .afterMilliseconds(let delay) = phases[next].trigger else { return nil }
        return lastBeganAt + UInt64(delay)
    }

    /// A request to `route` was answered. Returns the phases that begin now, in order.
    package mutating func requestAnswered(route: String, nowMilliseconds: UInt64) -> [(index: Int, phase: TimelinePhase)] {
        answered[route, default: 0] += 1
        return due(nowMilliseconds: nowMilliseconds)
    }

    /// The phases whose trigger has come by `nowMilliseconds`, begun in order (a phase timed 0 ms after one that
    /// begins now begins with it).
    package mutating func due(nowMilliseconds: UInt64) -> [(index: Int, phase: TimelinePhase)] {
        var begun: [(index: Int, phase: TimelinePhase)] = []
        while next < phases.count {
            let phase = phases[next]
            switch phase.trigger {
            case .afterMilliseconds(let delay):
                let at = lastBeganAt + UInt64(delay)
                guard nowMilliseconds >= at else { return begun }
                // A phase that begins late (a busy loop) still times the next one from when it was due, so the
                // timeline does not drift.
                lastBeganAt = at
            case .afterRequests(let count, let route):
                guard answered[route, default: 0] >= count else { return begun }
                lastBeganAt = nowMilliseconds
            }
            begun.append((next, phase))
            next += 1
        }
        return begun
    }
}
