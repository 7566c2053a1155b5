import Foundation
import Testing
@testable import FaultlineCore

/// Network conditions' pure parts (ARCHITECTURE §3b): the bandwidth budget, the timeline, the loader, the verdicts.
@Suite struct NetworkTests {
    // MARK: - ByteBudget

    @Test func aBudgetLetsTheRateThroughWithA20MillisecondBurst() {
        let rate = 256 * 1024
        var budget = ByteBudget(bytesPerSecond: rate, nowNanos: 0)
        #expect(budget.available(nowNanos: 0) == rate / 50)
        // Draining 1 MiB, taking whatever is available whenever the budget says: 4 s less the first burst.
        var now: UInt64 = 0
        var sent = 0
        while sent < 1 << 20 {
            let available = budget.available(nowNanos: now)
            if available > 0 {
                let count = min(available, (1 << 20) - sent)
                budget.spend(count, nowNanos: now)
                sent += count
            } else {
                now += UInt64(budget.millisecondsUntil(1 << 20 - sent)) * 1_000_000
            }
        }
        let seconds = Double(now) / 1e9
        #expect(seconds > 3.95 && seconds < 4.0, "1 MiB at 256 KiB/s took \(seconds) s")
    }

    @Test func aPauseSavesNothingUp() {
        var budget = ByteBudget(bytesPerSecond: 1000, nowNanos: 0)
        budget.spend(budget.available(nowNanos: 0), nowNanos: 0)
        // 10 s later the bucket holds its capacity (20 ms worth), not 10 s worth.
        #expect(budget.available(nowNanos: 10_000_000_000) == 20)
        budget.restart(nowNanos: 10_000_000_000)
        #expect(budget.available(nowNanos: 10_000_000_000) == 0)
        #expect(budget.millisecondsUntil(10) == 10)
    }

    // MARK: - Timeline

    @Test func phasesBeginInOrderByTimeAndByAnsweredRequests() {
        let phases = [
            TimelinePhase(trigger: .afterRequests(count: 3, route: "sync"),
                          change: NetworkChange(listener: .refuse, connections: .drop)),
            TimelinePhase(trigger: .afterMilliseconds(2000), change: NetworkChange(listener: .up, conditions: .some(LinkShape.preset("3g"))),
                          name: "slow"),
            TimelinePhase(trigger: .afterMilliseconds(0), change: NetworkChange(connections: .freeze(milliseconds: 10))),
        ]
        var timeline = NetworkTimeline(phases: phases, nowMilliseconds: 1000)
        #expect(timeline.countedRoutes == ["sync"])
        #expect(timeline.nextDeadline == nil)
        #expect(timeline.requestAnswered(route: "sync", nowMilliseconds: 1100).isEmpty)
        #expect(timeline.requestAnswered(route: "other", nowMilliseconds: 1150).isEmpty)
        #expect(timeline.requestAnswered(route: "sync", nowMilliseconds: 1200).isEmpty)
        let offline = timeline.requestAnswered(route: "sync", nowMilliseconds: 1300)
        #expect(offline.map(\.index) == [0])
        #expect(timeline.nextDeadline == 3300)
        #expect(timeline.due(nowMilliseconds: 3299).isEmpty)
        // The 0 ms phase after "slow" begins with it.
        let back = timeline.due(nowMilliseconds: 3350)
        #expect(back.map(\.index) == [1, 2])
        #expect(back[0].phase.name == "slow")
        #expect(timeline.nextDeadline == nil)
        timeline.reset(nowMilliseconds: 5000)
        #expect(timeline.next == 0)
        #expect(timeline.requestAnswered(route: "sync", nowMilliseconds: 5001).isEmpty)
    }

    @Test func aLatePhaseTimesTheNextFromWhenItWasDue() {
        var timeline = NetworkTimeline(phases: [
            TimelinePhase(trigger: .afterMilliseconds(100), change: NetworkChange(listener: .stall)),
            TimelinePhase(trigger: .afterMilliseconds(100), change: NetworkChange(listener: .up)),
        ], nowMilliseconds: 0)
        #expect(timeline.due(nowMilliseconds: 130).map(\.index) == [0])
        #expect(timeline.nextDeadline == 200)
    }

    // MARK: - Loader

    @Test func aTimelineLoads() throws {
        let scenario = try ScenarioTestSupport.load("""
        {"name": "net", "routes": [{"id": "sync", "match": {"path": "/sync"}, "responses": [{"status": 200}]}],
         "timeline": [
           {"after": {"requests": 3, "route": "sync"}, "name": "offline", "listener": "refuse", "connections": "drop"},
           {"after": {"ms": 2000}, "listener": "up", "conditions": "3g"},
           {"after": {"ms": 500}, "conditions": {"preset": "edge", "downlink": "256KiB/s", "latencyMs": 30}},
           {"after": {"ms": 500}, "connections": {"freezeMs": 1000}, "conditions": "none"}
         ]}
        """)
        #expect(scenario.timeline.count == 4)
        #expect(scenario.timeline[0].trigger == .afterRequests(count: 3, route: "sync"))
        #expect(scenario.timeline[0].change == NetworkChange(listener: .refuse, connections: .drop))
        #expect(scenario.timeline[1].change.conditions == .some(LinkShape.preset("3g")))
        let edge = try #require(scenario.timeline[2].change.conditions ?? nil)
        #expect(edge.name == nil)
        #expect(edge.downlinkBytesPerSecond == 262_144)
        #expect(edge.uplinkBytesPerSecond == 200_000 / 8)
        #expect(edge.downlinkLatencyMilliseconds == 30 && edge.uplinkLatencyMilliseconds == 30)
        #expect(scenario.timeline[3].change.connections == .freeze(milliseconds: 1000))
        #expect(scenario.timeline[3].change.conditions == .some(nil))
    }

    @Test func aBadTimelineNamesTheJSONPath() {
        let errors = ScenarioTestSupport.errors("""
        {"name": "net", "routes": [{"id": "sync", "match": {"path": "/sync"}, "responses": [{"status": 200}]}],
         "timeline": [
           {"after": {"requests": 3, "route": "synk"}, "listener": "refuse"},
           {"after": {"ms": 10}},
           {"after": {"ms": 10, "requests": 2}, "listener": "up"},
           {"after": {"ms": 10}, "listener": "refused"},
           {"after": {"ms": 10}, "conditions": "4g"},
           {"after": {"ms": 10}, "conditions": {"downlink": "fast", "sliceIntervalMs": 5}},
           {"after": {"ms": 10}, "connections": "drop-all"}
         ]}
        """)
        #expect(errors == [
            #"timeline[0].after.route: no route has the id "synk"; did you mean "sync"?"#,
            #"timeline[1]: the phase changes nothing: give it "listener", "connections" or "conditions""#,
            #"timeline[2].after: "ms" and "requests" cannot be combined: a phase begins on one trigger"#,
            #"timeline[3].listener: unknown listener state "refused"; did you mean "refuse"?"#,
            #"timeline[4].conditions: unknown conditions "4g"; did you mean "3g"?"#,
            #"timeline[5].conditions.downlink: "fast" is not a size: a number of bytes, or a number with KiB, MiB or GiB, then /s"#,
            #"timeline[5].conditions.sliceIntervalMs: needs "sliceBytes" (the size of the slices it spaces)"#,
            #"timeline[6].connections: unknown connections action "drop-all"; expected one of "drop", "drop-fin" or "thaw" (or {"freezeMs": N})"#,
        ])
    }

    @Test func twoTimelinesAreRefused() throws {
        let directory = FileManager.default.temporaryDirectory.path + "/faultline-network-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try #"{"name": "a", "routes": [], "timeline": [{"after": {"ms": 1}, "listener": "refuse"}]}"#
            .write(toFile: directory + "/a.json", atomically: true, encoding: .utf8)
        try #"{"name": "b", "routes": [], "timeline": [{"after": {"ms": 1}, "listener": "up"}]}"#
            .write(toFile: directory + "/b.json", atomically: true, encoding: .utf8)
        do {
            _ = try ScenarioLoader.load(paths: [directory])
            Issue.record("two timelines loaded")
        } catch {
            #expect(error.errors.map(\.jsonPath) == ["timeline"])
            #expect(error.errors.first?.message.contains("a second timeline") == true)
        }
    }

    @Test func anAdminChangeIsReadLikeAPhase() throws {
        let change = try ScenarioLoader.networkChange(JSONValue.parse(Array(#"{"listener": "stall", "connections": "thaw"}"#.utf8))).get()
        #expect(change == NetworkChange(listener: .stall, connections: .thaw))
        guard case .failure(let error) = ScenarioLoader.networkChange(try JSONValue.parse(Array(#"{"listen": "up"}"#.utf8))) else {
            Issue.record("an unknown key was accepted")
            return
        }
        #expect(error.errors.map(\.message) == [#"unknown key "listen"; did you mean "listener"?"#])
    }

    // MARK: - Verdicts

    /// A network change at `ms`.
    private func change(_ sequence: Int, at ms: Int, outage: Bool, freezeMs: Int? = nil) -> JournalEntry {
        var entry = JournalEntry(receivedAtWall: 0, receivedAtMonotonicNanos: UInt64(ms) * 1_000_000, connectionID: 0,
                                 indexOnConnection: 0, clientAddress: "", head: nil)
        entry.sequence = sequence
        var record = NetworkRecord(event: .change)
        record.outage = outage
        record.freezeMilliseconds = freezeMs
        entry.network = record
        return entry
    }

    /// A connection attempt the listener answered at `ms`.
    private func attempt(_ sequence: Int, at ms: Int) -> JournalEntry {
        var entry = JournalEntry(receivedAtWall: 0, receivedAtMonotonicNanos: UInt64(ms) * 1_000_000, connectionID: sequence,
                                 indexOnConnection: 0, clientAddress: "127.0.0.1:1", head: nil)
        entry.sequence = sequence
        entry.isConnectionEntry = true
        var record = NetworkRecord(event: .attempt)
        record.listener = .resetOnAccept
        entry.network = record
        return entry
    }

    private func request(_ sequence: Int, at ms: Int) -> JournalEntry {
        var entry = JournalEntry(receivedAtWall: 0, receivedAtMonotonicNanos: UInt64(ms) * 1_000_000, connectionID: sequence,
                                 indexOnConnection: 0, clientAddress: "127.0.0.1:1",
                                 head: HTTPRequestHead(method: "POST", target: "/sync", version: .http1_1, headers: HTTPHeaders()))
        entry.sequence = sequence
        return entry
    }

    @Test func aBurstAfterTheOutageIsAStorm() {
        var input = VerdictInput(entries: (0..<20).map { request(10 + $0, at: 3000 + $0 * 5) })
        input.network = [change(1, at: 1000, outage: true), change(2, at: 3000, outage: false)]
        let storm = NetworkVerdicts.noRequestStorm(input, max: 5, withinMilliseconds: 1000)
        #expect(storm.outcome == .fail)
        #expect(storm.explanation.contains("20 requests and connection attempts within 95 ms"), "\(storm.explanation)")
        #expect(storm.evidence.first == 2)
        // Spread over 10 s, the same 20 pass.
        input.entries = (0..<20).map { request(10 + $0, at: 3000 + $0 * 500) }
        let spread = NetworkVerdicts.noRequestStorm(input, max: 5, withinMilliseconds: 1000)
        #expect(spread.outcome == .pass, "\(spread.explanation)")
        // No outage ended: nothing to judge.
        input.network = [change(1, at: 1000, outage: true)]
        #expect(NetworkVerdicts.noRequestStorm(input, max: 5, withinMilliseconds: 1000).outcome == .inconclusive)
    }

    @Test func attemptsDuringAnOutageMustSpreadOut() {
        var input = VerdictInput(entries: [])
        input.network = [change(1, at: 0, outage: true)]
            + [100, 300, 700, 1500, 3100, 6300].enumerated().map { attempt(2 + $0.offset, at: $0.element) }
            + [change(9, at: 7000, outage: false)]
        let growing = NetworkVerdicts.backsOffDuringOutage(input)
        #expect(growing.outcome == .pass, "\(growing.explanation)")
        #expect(growing.explanation.contains("1600 ms is ×5.33 the first two's 300 ms"), "\(growing.explanation)")
        // A backoff capped at 800 ms through a long outage: most gaps sit at the cap, and that is backing off.
        input.network = [change(1, at: 0, outage: true)]
            + [0, 50, 150, 350, 750, 1550, 2350, 3150, 3950, 4750, 5550, 6350, 7150, 7950, 8750, 9550].enumerated()
                .map { attempt(2 + $0.offset, at: $0.element) }
            + [change(40, at: 10_000, outage: false)]
        let capped = NetworkVerdicts.backsOffDuringOutage(input)
        #expect(capped.outcome == .pass, "\(capped.explanation)")
        // Full jitter: each wait drawn between 0 and a doubling bound (50 ms up to 800 ms), so single gaps go down as
        // often as up; 8 attempts in each of 100 seeded outages, every one judged a backoff.
        for seed in UInt64(1)...100 {
            var random = SeededRandom(seed: seed)
            var at = 0, bound = 50.0
            var times: [Int] = []
            for _ in 0..<8 {
                times.append(at)
                at += 2 + Int(random.nextUnit() * bound)
                bound = min(800, bound * 2)
            }
            input.network = [change(1, at: 0, outage: true)]
                + times.enumerated().map { attempt(2 + $0.offset, at: $0.element) } + [change(20, at: at + 1, outage: false)]
            let jittered = NetworkVerdicts.backsOffDuringOutage(input)
            #expect(jittered.outcome == .pass, "seed \(seed): \(jittered.explanation)")
        }
        input.network = [change(1, at: 0, outage: true)]
            + (0..<8).map { attempt(2 + $0, at: 100 + $0 * 200) } + [change(20, at: 7000, outage: false)]
        let steady = NetworkVerdicts.backsOffDuringOutage(input)
        #expect(steady.outcome == .fail)
        #expect(steady.explanation.contains("200 ms, 200 ms"), "\(steady.explanation)")
        // Refuse hides attempts: nothing to judge.
        input.network = [change(1, at: 0, outage: true), change(2, at: 7000, outage: false)]
        let hidden = NetworkVerdicts.backsOffDuringOutage(input)
        #expect(hidden.outcome == .inconclusive)
        #expect(hidden.explanation.contains("use reset-on-accept or stall"))
    }

    @Test func aFreezeIsAnOutageOfItsLength() {
        let outages = NetworkVerdicts.outages([change(1, at: 100, outage: false, freezeMs: 1000)])
        #expect(outages.count == 1)
        #expect(outages[0].start == 100_000_000 && outages[0].end == 1_100_000_000)
    }

    @Test func networkRecordsSurviveTheJournalsJSON() throws {
        var entry = change(7, at: 5, outage: true, freezeMs: 250)
        entry.network?.source = "timeline"
        entry.network?.phase = "offline"
        entry.network?.listener = .refuse
        entry.network?.connections = "freeze 250 ms"
        let json = entry.json()
        #expect(json["kind"] == .string("network"))
        #expect(json["protocol"] == .null)
        let decoded = try #require(JournalEntry(json: json))
        #expect(decoded.network == entry.network)
        #expect(decoded.isNetworkChange)
        #expect(HAR.document([entry], creatorVersion: "t")["log"]?["entries"] == .array([]))
    }
}
