import Foundation
import Testing
@testable import FaultlineCore

/// A scenario named `name` with one route and the `tls` section `tls` (a JSON object's text).
private func scenarioJSON(_ tls: String, name: String = "s") -> String {
    #"{"name": "\#(name)", "tls": \#(tls), "routes": [{"id": "r", "match": {"path": "/x"}, "responses": [{}]}]}"#
}

private func load(_ json: String) throws -> Scenario { try ScenarioTestSupport.load(json, file: "tls.json") }

private func errors(_ json: String) -> [String] { ScenarioTestSupport.errors(json, file: "tls.json") }

@Suite("TLS sections and handshake decisions")
struct TLSPlanTests {
    @Test func aSectionLoadsEveryKindOfStep() throws {
        let scenario = try load(scenarioJSON("""
            {"serverNames": ["api.localhost", "*.test.localhost"], "resumption": false, "closeNotify": false,
             "afterLast": "cycle", "clientCertificate": "optional", "handshakes": [
               {"certificate": "expired", "times": 2},
               {"fault": "handshake-hang"},
               {"fault": "handshake-reset"},
               {"fault": {"type": "alert", "alert": "unrecognized_name"}},
               {"fault": {"type": "slow-handshake", "size": 10, "intervalMs": 5}},
               {"minVersion": "1.0", "maxVersion": "1.1", "clientCertificate": "required"}]}
            """))
        let tls = try #require(scenario.tls)
        #expect(tls.serverNames == ["api.localhost", "*.test.localhost"])
        #expect(!tls.resumption && !tls.closeNotify && tls.afterLast == .cycle)
        #expect(tls.handshakes.count == 6, "the steps given, and no default step before them")
        #expect(tls.handshakes[0].certificate == .expired && tls.handshakes[0].times == 2)
        #expect(tls.handshakes[0].clientCertificate == .optional, "the section's default applies to each step")
        #expect(tls.handshakes[1].fault == .hang && tls.handshakes[2].fault == .reset)
        #expect(tls.handshakes[3].fault == .alert(.unrecognizedName))
        #expect(tls.handshakes[4].fault == .slow(DripSpec(size: 10, intervalMilliseconds: 5)))
        #expect(tls.handshakes[5].minVersion == .tls1_0 && tls.handshakes[5].maxVersion == .tls1_1)
        #expect(tls.handshakes[5].clientCertificate == .required)
        #expect(tls.claims("API.localhost") && tls.claims("a.test.localhost") && !tls.claims("test.localhost"))
        #expect(!tls.claims(nil))
    }

    @Test func badSectionsNameThePathAndTheProblem() {
        #expect(errors(scenarioJSON(#"{"handshakes": [{"certificate": "expird"}]}"#))
            == [#"tls.handshakes[0].certificate: unknown certificate "expird"; did you mean "expired"?"#])
        #expect(errors(scenarioJSON(#"{"handshakes": [{"fault": {"type": "alert", "alert": "nope"}}]}"#)).first?
            .hasPrefix(#"tls.handshakes[0].fault.alert: unknown alert "nope""#) == true)
        #expect(errors(scenarioJSON(#"{"handshakes": [{"fault": "alert"}]}"#)).first?
            .hasPrefix("tls.handshakes[0].fault: an alert names its alert") == true)
        #expect(errors(scenarioJSON(#"{"handshakes": [{"minVersion": "1.3", "maxVersion": "1.2"}]}"#))
            == ["tls.handshakes[0]: minVersion 1.3 is above maxVersion 1.2"])
        #expect(errors(scenarioJSON(#"{"handshakes": []}"#)) == ["tls.handshakes: needs at least one handshake step"])
        #expect(errors(scenarioJSON(#"{"afterLast": "fail"}"#))
            == [#"tls.afterLast: expected "repeat-last" or "cycle", found "fail""#])
        #expect(errors(scenarioJSON(#"{"serverNames": ["a b"]}"#))
            == [#"tls.serverNames[0]: expected a host name or *.suffix, found "a b""#])
        #expect(errors(scenarioJSON(#"{"handshakes": [{"fault": "handshake-hung"}]}"#)).first?
            .contains(#"did you mean "handshake-hang"?"#) == true)
        #expect(errors(scenarioJSON(#"{"certificates": "valid"}"#)).first?.contains(#"unknown key "certificates""#) == true)
    }

    @Test func handshakesPlayTheScriptInOrderThenRepeatTheLastStep() throws {
        let scenario = try load(scenarioJSON("""
            {"handshakes": [{"certificate": "expired", "times": 2}, {"fault": "handshake-hang"}, {"certificate": "valid"}]}
            """))
        let engine = Engine(scenarios: [scenario])
        let decisions = (0..<6).map { _ in engine.decideHandshake(serverName: nil, alpnOffered: [], now: EngineInstant()) }
        #expect(decisions.map(\.step) == [0, 0, 1, 2, 2, 2])
        #expect(decisions.map(\.certificate) == [.expired, .expired, nil, .valid, .valid, .valid])
        #expect(decisions[2].fault == .hang)
        #expect(decisions.allSatisfy { $0.scenario == "s" })
        engine.reset()
        #expect(engine.decideHandshake(serverName: nil, alpnOffered: [], now: EngineInstant()).step == 0,
                "a reset rewinds the handshake script")
    }

    @Test func cycleStartsTheScriptAgain() throws {
        let scenario = try load(scenarioJSON(#"{"afterLast": "cycle", "handshakes": [{}, {"fault": "handshake-reset"}]}"#))
        let engine = Engine(scenarios: [scenario])
        let steps = (0..<5).map { _ in engine.decideHandshake(serverName: nil, alpnOffered: [], now: EngineInstant()).step }
        #expect(steps == [0, 1, 0, 1, 0])
    }

    @Test func aNamedSectionTakesItsNamesAndTheUnnamedOneTheRest() throws {
        let named = try load(scenarioJSON(#"{"serverNames": ["pinned.localhost"], "certificate": "rotated"}"#, name: "named"))
        let fallback = try load(scenarioJSON(#"{"handshakes": [{"fault": "handshake-hang"}]}"#, name: "fallback"))
        let engine = Engine(scenarios: [fallback, named])
        let pinned = engine.decideHandshake(serverName: "pinned.localhost", alpnOffered: [], now: EngineInstant())
        #expect(pinned.scenario == "named" && pinned.certificate == .rotated && pinned.fault == nil)
        let other = engine.decideHandshake(serverName: "other.localhost", alpnOffered: [], now: EngineInstant())
        #expect(other.scenario == "fallback" && other.fault == .hang)
    }

    @Test func withoutASectionTheServerNameChoosesTheCatalogueCertificate() {
        let engine = Engine(scenarios: [])
        #expect(engine.decideHandshake(serverName: "Expired.LOCALHOST", alpnOffered: [], now: EngineInstant())
            == TLSHandshakeDecision(certificate: .expired))
        #expect(engine.decideHandshake(serverName: "weak-key.localhost", alpnOffered: [], now: EngineInstant())
            .certificate == .weakKey)
        #expect(engine.decideHandshake(serverName: "api.localhost", alpnOffered: [], now: EngineInstant())
            == TLSHandshakeDecision(), "an unknown name serves the listener's certificate")
        #expect(engine.decideHandshake(serverName: nil, alpnOffered: [], now: EngineInstant()) == TLSHandshakeDecision())
    }

    @Test func theJournalKeepsTheConnectionsTLSAndReadsItBack() throws {
        var summary = TLSSummary()
        summary.version = "TLSv1.3"
        summary.serverName = "expired.localhost"
        summary.alpnOffered = ["h2", "http/1.1"]
        summary.certificate = "expired"
        summary.handshake = .clientAlert
        summary.alertReceived = "certificate_expired"
        summary.handshakeMilliseconds = 1.5
        summary.scenario = "s"
        summary.step = 3
        var entry = JournalEntry(
            receivedAtWall: 0, receivedAtMonotonicNanos: 0, connectionID: 4, indexOnConnection: 0,
            clientAddress: "127.0.0.1:1", head: nil)
        entry.isConnectionEntry = true
        entry.tls = summary
        let json = entry.json()
        #expect(json["kind"] == .string("connection"))
        #expect(json["protocol"] == .null)
        #expect(json["tls"]?["alertReceived"] == .string("certificate_expired"))
        let decoded = try #require(JournalEntry(json: json))
        #expect(decoded.isConnectionEntry && decoded.tls == summary)
        #expect(JournalFilter().accepts(decoded))
        var onlyConnections = JournalFilter()
        onlyConnections.connection = true
        #expect(onlyConnections.accepts(decoded))
        onlyConnections.connection = false
        #expect(!onlyConnections.accepts(decoded))
    }

    @Test func alertNamesAreTheRFCs() {
        #expect(TLSAlertNames.name(48) == "unknown_ca")
        #expect(TLSAlertNames.name(116) == "certificate_required")
        #expect(TLSAlertNames.name(201) == "alert_201")
        for alert in TLSAlert.allCases { #expect(TLSAlertNames.name(alert.code) == alert.rawValue) }
    }
}
