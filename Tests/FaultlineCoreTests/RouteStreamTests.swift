import Testing
@testable import FaultlineCore

/// Every seeded choice (chaos, delay distributions, `garbage` bytes) comes from one stream per route and
/// `sequenceBy` partition: a route's n-th request gets the same choices whatever other traffic came in between.
@Suite struct RouteStreamTests {
    static let scenario = """
        {"name": "s", "seed": 11, "routes": [
          {"id": "chaos", "match": {"path": "/chaos"},
           "chaos": {"rate": 0.5, "faults": ["reset", "status:503", "garbage"]},
           "responses": [{"status": 200, "delay": {"uniform": [1, 1000]}}]},
          {"id": "garbage", "match": {"path": "/garbage"}, "responses": [{"fault": "garbage"}]},
          {"id": "cases", "match": {"path": "/cases"}, "sequenceBy": "header:X-Case",
           "chaos": {"rate": 0.5, "faults": ["status:503", "reset"]},
           "responses": [{"status": 200, "delay": {"lognormal": {"medianMs": 50, "sigma": 1}}}, {"status": 201}],
           "afterLast": "cycle"},
          {"id": "other", "match": {"path": "/other"},
           "chaos": {"rate": 0.5, "faults": ["status:500"]},
           "responses": [{"delay": {"uniform": [1, 1000]}}, {"fault": "garbage"}], "afterLast": "cycle"}
        ]}
        """

    static func engine() throws -> Engine {
        Engine(scenarios: [try ScenarioLoader.load(bytes: Array(scenario.utf8), file: "s.json", directory: nil)])
    }

    /// What a decision chose: status, fault, chaos, and every script step (waits with their milliseconds, raw
    /// bytes), so any seeded choice shows.
    static func signature(_ decision: Decision) -> String {
        let steps = decision.script.steps.map { step -> String in
            switch step {
            case .wait(let ms): return "wait \(ms)"
            case .raw(let bytes): return "raw \(bytes)"
            case .body(let bytes): return "body \(bytes)"
            case .head: return "head"
            default: return "\(step)"
            }
        }
        return "\(decision.script.status.map(String.init) ?? "-")|\(decision.script.fault ?? "")|\(decision.chaos)|"
            + steps.joined(separator: ",")
    }

    /// Sends `targets` in order (a target with `#CASE` sends header `X-Case: CASE`) and returns each route's
    /// (and partition's) signatures in order.
    static func run(_ engine: Engine, _ targets: [String]) -> [String: [String]] {
        var byRoute: [String: [String]] = [:]
        for (i, target) in targets.enumerated() {
            let parts = target.split(separator: "#", maxSplits: 1).map(String.init)
            let headers = parts.count == 2 ? [("X-Case", parts[1])] : []
            let decision = engine.decide(EngineTests.request("GET", parts[0], headers: headers), requestID: i + 1)
            byRoute[target, default: []].append(signature(decision))
        }
        return byRoute
    }

    @Test func unrelatedTrafficDoesNotChangeARoutesSeededChoices() throws {
        let alone = Array(repeating: "/chaos", count: 40) + Array(repeating: "/garbage", count: 10)
        var mixed: [String] = []
        for i in 0..<40 {
            if i % 3 == 0 { mixed.append("/other") }
            if i % 7 == 0 { mixed += ["/garbage", "/other", "/cases#x"] }
            mixed.append("/chaos")
        }
        // /garbage got 6 above; 4 more after unrelated traffic.
        mixed += ["/other", "/garbage", "/garbage", "/other", "/garbage", "/garbage"]
        let first = Self.run(try Self.engine(), alone)
        let second = Self.run(try Self.engine(), mixed)
        #expect(first["/chaos"]!.count == 40 && second["/chaos"]!.count == 40)
        #expect(first["/chaos"] == second["/chaos"])
        #expect(first["/garbage"] == second["/garbage"])
        // The sequence is a real mix: chaos took some requests and not others, delays vary, garbage varies.
        let chaosOutcomes = Set(first["/chaos"]!.map { $0.split(separator: "|", omittingEmptySubsequences: false)[2] })
        #expect(chaosOutcomes == ["true", "false"])
        #expect(Set(first["/chaos"]!.filter { $0.contains("|false|") }).count > 5)
        #expect(Set(first["/garbage"]!).count == 10)
    }

    @Test func aPartitionsChoicesDoNotDependOnOtherPartitions() throws {
        let alone = Array(repeating: "/cases#a", count: 30)
        var mixed: [String] = []
        for i in 0..<30 {
            mixed.append(i % 2 == 0 ? "/cases#b" : "/chaos")
            if i % 5 == 0 { mixed.append("/cases#c") }
            mixed.append("/cases#a")
        }
        let first = Self.run(try Self.engine(), alone)
        let second = Self.run(try Self.engine(), mixed)
        #expect(first["/cases#a"] == second["/cases#a"])
        // Partitions have streams of their own, not copies of one another.
        let onlyB = Self.run(try Self.engine(), Array(repeating: "/cases#b", count: 30))
        #expect(onlyB["/cases#b"] != first["/cases#a"])
        #expect(Set(first["/cases#a"]!.map { $0.split(separator: "|", omittingEmptySubsequences: false)[2] }) == ["true", "false"])
    }

    @Test func resetRestartsEveryStream() throws {
        let targets = ["/chaos", "/cases#a", "/garbage", "/other", "/cases#b"].flatMap { Array(repeating: $0, count: 8) }
        let engine = try Self.engine()
        let before = Self.run(engine, targets)
        engine.reset()
        #expect(Self.run(engine, targets) == before)
        engine.load(engine.scenarios)
        #expect(Self.run(engine, targets) == before)
        #expect(Self.run(try Self.engine(), targets) == before)
    }

    @Test func theSeedAndTheRouteIDChooseTheStream() throws {
        func chaos(seed: Int, id: String) throws -> [String] {
            let json = Self.scenario.replacingOccurrences(of: #""seed": 11"#, with: #""seed": \#(seed)"#)
                .replacingOccurrences(of: #""id": "chaos""#, with: #""id": "\#(id)""#)
            let engine = Engine(scenarios: [try ScenarioLoader.load(bytes: Array(json.utf8), file: "s.json", directory: nil)])
            // Status, fault and chaos only: the chaos body names the route id, which would differ anyway.
            return Self.run(engine, Array(repeating: "/chaos", count: 30))["/chaos"]!.map {
                $0.split(separator: "|", omittingEmptySubsequences: false).prefix(3).joined(separator: "|")
            }
        }
        #expect(try chaos(seed: 11, id: "chaos") == chaos(seed: 11, id: "chaos"))
        #expect(try chaos(seed: 11, id: "chaos") != chaos(seed: 12, id: "chaos"))
        #expect(try chaos(seed: 11, id: "chaos") != chaos(seed: 11, id: "chaos2"))
    }
}
