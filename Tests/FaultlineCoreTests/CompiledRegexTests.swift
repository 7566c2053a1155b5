import Testing
@testable import FaultlineCore

/// Regular expressions are compiled when the scenario is loaded and kept in its matchers.
@Suite struct CompiledRegexTests {
    static let document = """
        {"name": "r", "routes": [{"id": "tok", "match": {"method": "GET", "path": "/t",
          "headers": {"X-Token": {"matches": "^t[0-9]+$"}}}, "responses": [{"status": 200}]}]}
        """

    @Test func theLoadedMatcherHoldsTheCompiledExpression() throws {
        let scenario = try ScenarioLoader.load(bytes: Array(Self.document.utf8), file: "r.json", directory: nil)
        guard case .regex(let regex) = scenario.routes[0].match.headers.first?.matcher else {
            Issue.record("expected a regex matcher, got \(scenario.routes[0].match.headers)")
            return
        }
        #expect(regex.pattern == "^t[0-9]+$")
        #expect(regex.matches("t42") && !regex.matches("x42") && !regex.matches(""))
        #expect(RouteMatcher.miss(.regex(regex), "x42").hasSuffix("expected it to match /^t[0-9]+$/"))
    }

    @Test func scenariosCompareByPatternText() throws {
        // Hot reload keeps a scenario's version when the reloaded file is equal: two compilations of one
        // pattern are equal, a different pattern is not.
        let first = try ScenarioLoader.load(bytes: Array(Self.document.utf8), file: "r.json", directory: nil)
        let again = try ScenarioLoader.load(bytes: Array(Self.document.utf8), file: "r.json", directory: nil)
        #expect(first == again)
        let edited = Self.document.replacing("[0-9]+", with: "[0-9]*")
        #expect(try ScenarioLoader.load(bytes: Array(edited.utf8), file: "r.json", directory: nil) != first)
        #expect(try CompiledRegex("a+") == CompiledRegex("a+"))
        #expect(throws: (any Error).self) { try CompiledRegex("(unclosed") }
    }

    @Test func enginesOnSeveralThreadsMatchWithTheirOwnExpressions() async throws {
        // The old process-wide cache was written by every engine's loop thread; now each matcher reads its own
        // immutable expression.
        let scenario = try ScenarioLoader.load(bytes: Array(Self.document.utf8), file: "r.json", directory: nil)
        let counts = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    let engine = Engine(scenarios: [scenario])
                    var taken = 0
                    for index in 0..<200 {
                        let token = index % 2 == 0 ? "t\(worker)\(index)" : "x\(index)"
                        let decision = engine.decide(
                            EngineTests.request("GET", "/t", headers: [("X-Token", token)]), requestID: index + 1)
                        if decision.route == .route("tok") { taken += 1 }
                    }
                    return taken
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(counts == [100, 100, 100, 100])
    }

    @Test func theSyntaxScenariosUseStillMeansWhatItMeant() throws {
        // Swift's Regex replaced NSRegularExpression (the server links no ICU): the ICU-family syntax that
        // scenario files use keeps its meaning, unanchored, on Unicode scalars.
        let cases: [(pattern: String, matching: [String], notMatching: [String])] = [
            (#"^Bearer [A-Za-z0-9._~+/-]+=*$"#, ["Bearer abc.def-1"], ["bearer abc", "Bearer "]),
            (#"\d{3}"#, ["a123b"], ["12"]),
            (#"(?i)^application/json"#, ["Application/JSON; charset=utf-8"], ["text/json"]),
            (#"\bgzip\b"#, ["deflate, gzip"], ["xgzipx"]),
            (#"^(?!admin).*$"#, ["user"], ["admin-1"]),
            (#"^[^@\s]+@[^@\s]+\.[a-z]{2,}$"#, ["a@b.io"], ["a@b", "a b@c.de"]),
            // One dot is one Unicode scalar, as ICU's was one code point: a precomposed é is one, e + U+0301 two.
            (#"^.$"#, ["\u{E9}"], ["ab", "e\u{301}"]),
            (#"v\d+\.\d+"#, ["app/v12.3 (ios)"], ["v.3"]),
        ]
        for (pattern, matching, notMatching) in cases {
            let regex = try CompiledRegex(pattern)
            for text in matching { #expect(regex.matches(text), "\(pattern) should match \(text)") }
            for text in notMatching { #expect(!regex.matches(text), "\(pattern) should not match \(text)") }
        }
    }
}
