import Testing
@testable import FaultlineCore

/// Fault parameters, chaos and connection policies: how they load and the wire plans they produce.
@Suite struct FaultCatalogueTests {
    static func load(_ json: String) throws -> Scenario {
        try ScenarioLoader.load(bytes: Array(json.utf8), file: "t.json", directory: nil)
    }

    static func errors(_ json: String) -> [String] {
        do {
            _ = try ScenarioLoader.load(bytes: Array(json.utf8), file: "t.json", directory: nil)
            return []
        } catch {
            return error.errors.map { "\($0.jsonPath): \($0.message)" }
        }
    }

    static func step(_ fault: String) -> String {
        #"{"name": "f", "routes": [{"id": "r", "match": {"path": "/r"}, "responses": [{"json": {"ok": true}, "fault": \#(fault)}]}]}"#
    }

    static func plan(_ fault: String, version: HTTPVersion = .http1_1) throws -> ResponseScript {
        let engine = Engine(scenarios: [try load(step(fault))])
        return engine.decide(EngineTests.request("GET", "/r", version: version), requestID: 1).script
    }

    @Test func faultObjectsLoadWithTheirParameters() throws {
        let route = try Self.load(Self.step(#"{"type": "half-close", "after": "body", "bytes": 3}"#)).routes[0]
        #expect(route.responses[0].fault == FaultSpec(.halfClose, bytes: 3, after: .body))
        let chunk = try Self.load(Self.step(#"{"type": "malformed-chunk", "variant": "missing-terminator"}"#))
        #expect(chunk.routes[0].responses[0].fault == FaultSpec(.malformedChunk, chunkBreak: .missingTerminator))
        #expect(try Self.load(Self.step(#""reset""#)).routes[0].responses[0].fault == FaultSpec(.reset))
    }

    @Test func faultObjectErrorsNameThePath() {
        #expect(Self.errors(Self.step(#"{"type": "rest"}"#))
            == [#"routes[0].responses[0].fault.type: unknown fault "rest"; did you mean "reset"?"#])
        #expect(Self.errors(Self.step(#"{"type": "reset", "bytes": 3}"#))
            == [#"routes[0].responses[0].fault.bytes: reset takes no "bytes""#])
        #expect(Self.errors(Self.step(#"{"type": "half-close", "after": "header"}"#))
            == [#"routes[0].responses[0].fault.after: unknown value "header"; did you mean "headers"?"#])
        #expect(Self.errors(Self.step(#"{"bytes": 3}"#)) == [#"routes[0].responses[0].fault: missing required key "type""#])
        #expect(Self.errors(Self.step("7")).first?.contains("expected a fault name or an object") == true)
    }

    @Test func halfCloseSendsItsPrefixThenShutsDownWriting() throws {
        #expect(try Self.plan(#""half-close""#).steps == [.abortConnection(.shutdownWrite), .hang])
        let headers = try Self.plan(#"{"type": "half-close", "after": "headers"}"#)
        #expect(EngineTests.written(headers).hasSuffix("Content-Length: 11\r\n\r\n"))
        #expect(Array(headers.steps.suffix(2)) == [.abortConnection(.shutdownWrite), .hang])
        #expect(headers.status == 200)
        let body = try Self.plan(#"{"type": "half-close", "after": "body", "bytes": 4}"#)
        #expect(EngineTests.written(body).hasSuffix("\r\n\r\n{\"ok"))
    }

    @Test func byteCountsAndChunkVariants() throws {
        #expect(EngineTests.written(try Self.plan(#"{"type": "truncate-body", "bytes": 2}"#)).hasSuffix("\r\n\r\n{\""))
        #expect(EngineTests.written(try Self.plan(#"{"type": "overlong-body", "bytes": 5}"#)).hasSuffix("{\"ok\":true}FAULT"))
        let garbage = try Self.plan(#"{"type": "garbage", "bytes": 100}"#)
        #expect(EngineTests.written(garbage).utf8.count > 0 && garbage.status == nil)
        if case .raw(let bytes)? = garbage.steps.first { #expect(bytes.count == 100) } else { Issue.record("no raw bytes") }
        let bad = EngineTests.written(try Self.plan(#""malformed-chunk""#))
        #expect(bad.contains("Transfer-Encoding: chunked\r\n") && bad.hasSuffix("\r\n\r\nzz\r\n{\"ok\":true}\r\n"))
        let noCRLF = EngineTests.written(try Self.plan(#"{"type": "malformed-chunk", "variant": "missing-crlf"}"#))
        #expect(noCRLF.hasSuffix("\r\n\r\nb\r\n{\"ok\":true}0\r\n\r\n"))
        let noEnd = EngineTests.written(try Self.plan(#"{"type": "malformed-chunk", "variant": "missing-terminator"}"#))
        #expect(noEnd.hasSuffix("\r\n\r\nb\r\n{\"ok\":true}\r\n"))
    }

    static let chaosScenario = """
        {"name": "c", "seed": SEED, "routes": [{"id": "r", "match": {"path": "/r"},
          "chaos": {"rate": RATE, "faults": ["reset", "status:503", {"type": "truncate-body", "bytes": 1}]},
          "responses": [{"status": 200, "text": "one"}, {"status": 201, "text": "two"}]}]}
        """

    static func chaosRun(seed: Int, rate: String, count: Int = 200) throws -> [String] {
        let json = chaosScenario.replacingOccurrences(of: "SEED", with: "\(seed)").replacingOccurrences(of: "RATE", with: rate)
        let engine = Engine(scenarios: [try load(json)])
        return (0..<count).map { i in
            let decision = engine.decide(EngineTests.request("GET", "/r"), requestID: i)
            return "\(decision.script.status.map(String.init) ?? "-")/\(decision.script.fault ?? "")/\(decision.chaos)"
        }
    }

    @Test func chaosIsReproducibleFromTheSeed() throws {
        let a = try Self.chaosRun(seed: 42, rate: "0.3"), b = try Self.chaosRun(seed: 42, rate: "0.3")
        let c = try Self.chaosRun(seed: 43, rate: "0.3")
        #expect(a == b)
        #expect(a != c)
        let failures = a.filter { $0.hasSuffix("/true") }
        #expect((30...90).contains(failures.count), "about 30% of 200: \(failures.count)")
        let possible: Set = ["-/reset/true", "503/status:503/true", "200/truncate-body/true", "201/truncate-body/true"]
        #expect(Set(failures).isSubset(of: possible))
        #expect(Set(failures.map { $0.split(separator: "/")[1] }) == ["reset", "status:503", "truncate-body"])
        // The script does not move for chaos: the first non-chaos answer is step 0, the next step 1.
        let scripted = a.filter { $0.hasSuffix("/false") }
        #expect(Array(scripted.prefix(2)) == ["200//false", "201//false"])
        #expect(try Self.chaosRun(seed: 1, rate: "0").allSatisfy { $0.hasSuffix("/false") })
        #expect(try Self.chaosRun(seed: 1, rate: "1").allSatisfy { $0.hasSuffix("/true") })
    }

    @Test func chaosAndConnectionErrors() {
        let base = #"{"name": "c", "routes": [{"id": "r", "match": {}, "responses": [{}], "chaos": CHAOS}]}"#
        func chaos(_ text: String) -> [String] { Self.errors(base.replacingOccurrences(of: "CHAOS", with: text)) }
        #expect(chaos(#"{"rate": 2, "faults": ["reset"]}"#) == ["routes[0].chaos.rate: must be between 0 and 1, found 2"])
        #expect(chaos(#"{"rate": 0.5, "faults": ["status:99"]}"#)
            == [#"routes[0].chaos.faults[0]: "status:99" is not "status:" followed by an HTTP status (100–599)"#])
        #expect(chaos(#"{"rate": 0.5, "faults": []}"#) == ["routes[0].chaos.faults: needs at least one fault"])
        #expect(chaos(#"{"faults": ["hang"]}"#) == [#"routes[0].chaos: missing required key "rate""#])
        let connections = #"{"name": "c", "connections": CONN, "routes": []}"#
        #expect(Self.errors(connections.replacingOccurrences(of: "CONN", with: "{}"))
            == [#"connections: give "maxRequests", "idleCloseMs" or both"#])
        #expect(Self.errors(connections.replacingOccurrences(of: "CONN", with: #"{"maxRequests": 0}"#))
            == ["connections.maxRequests: must be at least 1, found 0"])
    }

    @Test func connectionPolicyClosesWithoutAnnouncingIt() throws {
        let json = #"{"name": "c", "connections": {"maxRequests": 2, "idleCloseMs": 150}, "routes": [{"id": "r", "match": {}, "responses": [{"text": "x"}]}]}"#
        let engine = Engine(scenarios: [try Self.load(json)])
        let first = engine.decide(EngineTests.request("GET", "/"), requestID: 1, connectionRequestIndex: 0).script
        #expect(first.keepAlive && first.idleCloseMilliseconds == 150 && first.steps.count == 3)
        let second = engine.decide(EngineTests.request("GET", "/"), requestID: 2, connectionRequestIndex: 1).script
        #expect(!second.keepAlive && second.steps.last == .endConnection(.maxRequests) && second.policyClose == .maxRequests)
        #expect(!EngineTests.written(second).contains("Connection:"))
    }
}
