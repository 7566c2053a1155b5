import Faultline
import FaultlineCore
import Foundation
import Testing

/// The admin API under /__faultline/, driven over HTTP as other languages would.
@Suite struct AdminAPITests {
    static let scenario = """
        { "name": "admin", "routes": [
            { "id": "a", "match": { "path": "/a" }, "responses": [ { "status": 503 }, { "status": 200 } ] },
            { "id": "b", "match": { "method": "POST", "path": "/b" }, "responses": [ { "status": 201 } ] }
        ] }
        """

    @Test func requestsFiltersAndCounts() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let base = server.baseURL.absoluteString
        _ = try TestSupport.curl(["\(base)/a", "\(base)/a", "\(base)/nope"])
        _ = try TestSupport.curl(["-X", "POST", "-d", "x=1", "\(base)/b"])
        #expect(try TestSupport.journal(server).count == 4)
        #expect(try TestSupport.journal(server, "route=a").count == 2)
        #expect(try TestSupport.journal(server, "status=503").count == 1)
        #expect(try TestSupport.journal(server, "method=post").count == 1)
        #expect(try TestSupport.journal(server, "path=/nope").count == 1)
        #expect(try TestSupport.journal(server, "since=2").count == 2)
        #expect(try TestSupport.journal(server, "limit=1").first?["path"] as? String == "/b")
        let count = try TestSupport.admin(server, "requests/count?route=a")
        #expect(count["count"] as? Int == 2)
        let counters = try #require(count["counters"] as? [String: Any])
        #expect(counters["totalRecorded"] as? Int == 4)
        #expect(counters["unmatched"] as? Int == 1)
        let bad = try TestSupport.curl(["-w", "%{http_code}", "-o", "/dev/null", "\(base)/__faultline/requests?status=abc"])
        #expect(bad.stdout == "400")

        let cleared = try TestSupport.admin(server, "requests", method: "DELETE")
        #expect(cleared["cleared"] as? Int == 4)
        #expect(try TestSupport.journal(server).isEmpty)
        _ = try TestSupport.curl(["\(base)/a"])
        let after = try TestSupport.journal(server)
        #expect(after.first?["sequence"] as? Int == 5, "sequence numbers go on after a clear")
    }

    /// Issue #28: a misspelt parameter, route or outcome is a 400 that names the fix, not an empty answer or a wait.
    @Test func mistakesAreA400WithDidYouMean() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let base = server.baseURL.absoluteString
        _ = try TestSupport.curl(["\(base)/a"])
        func error(_ target: String) throws -> (status: String, message: String) {
            let answer = try TestSupport.curl(["-s", "-w", "\n%{http_code}", "\(base)/__faultline/\(target)"])
            let lines = answer.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            let body = lines.dropLast().joined(separator: "\n")
            let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            return (String(lines.last ?? ""), object?["error"] as? String ?? body)
        }
        #expect(try error("requests?limt=1") == ("400", #"unknown query parameter "limt"; did you mean "limit"?"#))
        #expect(try error("requests/count?rout=a").message == #"unknown query parameter "rout"; did you mean "route"?"#)
        #expect(try error("events?xyz=1").message
            == #"unknown query parameter "xyz"; this endpoint takes "cursor" or "timeoutMs""#)
        let reset = try TestSupport.curl(["-s", "-X", "POST", "\(base)/__faultline/scenarios/reset?jornal=true"])
        #expect(reset.stdout.contains(#"did you mean \"journal\"?"#))
        #expect(try error("requests?route=aa") == ("400", #"no loaded route is "aa"; did you mean "a"?"#))
        #expect(try error("requests?route=zzzz").message == #"no loaded route is "zzzz"; loaded: "a" or "b""#)
        #expect(try error("requests?outcome=complted").message == #"unknown outcome "complted"; did you mean "completed"?"#)
        #expect(try error("requests?limit=abc").message == #"limit must be an integer, got "abc""#)
        let started = ContinuousClock.now
        #expect(try error("requests/wait?count=5&route=aa&timeoutMs=5000").status == "400")
        #expect(ContinuousClock.now - started < .seconds(2), "the 400 comes at once, not after the timeout")

        // What is legitimate still answers.
        #expect(try TestSupport.journal(server, "route=a&outcome=completed&limit=5").count == 1)
        #expect(try TestSupport.journal(server, "route=auth:token").isEmpty)
        #expect(try TestSupport.journal(server, "route=rate-limit:x").isEmpty)
        // A route whose scenario has gone still filters the entries it took.
        _ = try TestSupport.curl(["-s", "-X", "POST", "-d", #"{"name": "other", "routes": [{"id": "c", "match": {"path": "/c"}, "responses": [{"status": 200}]}]}"#, "\(base)/__faultline/scenarios"])
        #expect(try error("requests?route=zzzz").message == #"no loaded route is "zzzz"; loaded: "c" or "a""#)
        #expect(try TestSupport.journal(server, "route=a").count == 1)
    }

    @Test func waitAnswersTheMomentTheConditionHolds() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let base = server.baseURL.absoluteString
        // The long-poll blocks its thread: a GCD thread, not one of the concurrency pool's (two on two cores),
        // which other tests' blocking calls can hold for seconds.
        let answered = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var waited: (satisfied: Bool?, count: Int?) = (nil, nil)
        DispatchQueue.global().async {
            let answer = try? TestSupport.admin(server, "requests/wait?count=2&route=a&timeoutMs=20000")
            waited = (answer?["satisfied"] as? Bool, answer?["count"] as? Int)
            answered.signal()
        }
        // The long-poll is registered before the requests arrive only if we wait for it; poll the server's
        // own view instead of sleeping: the wait shows up as an open connection.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let health = try TestSupport.admin(server, "health")
            if (health["connections"] as? Int ?? 0) >= 2 { break }
        }
        let start = Date()
        _ = try TestSupport.curl(["\(base)/a", "\(base)/a"])
        #expect(answered.wait(timeout: .now() + 25) == .success)
        let answer = waited
        #expect(answer.satisfied == true)
        #expect(answer.count == 2)
        #expect(Date().timeIntervalSince(start) < 5)
    }

    @Test func waitTimesOutWithWhatItSaw() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        _ = try TestSupport.curl([server.baseURL.absoluteString + "/a"])
        let start = Date()
        let answer = try TestSupport.admin(server, "requests/wait?count=3&timeoutMs=300")
        #expect(Date().timeIntervalSince(start) >= 0.29)
        #expect(answer["satisfied"] as? Bool == false)
        #expect(answer["count"] as? Int == 1)
        #expect((answer["requests"] as? [Any])?.count == 1)
    }

    @Test func loadingABadScenarioKeepsTheGoodOneServing() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let base = server.baseURL.absoluteString
        let bad = #"{"name": "broken", "routes": [ { "id": "x", "match": { "path": "/x" }, "responses": [ { "stauts": 200 } ] } ]}"#
        let rejected = try TestSupport.curl(["-w", "\n%{http_code}", "-X", "POST", "--data-binary", bad, "\(base)/__faultline/scenarios"])
        #expect(rejected.stdout.hasSuffix("\n400"))
        #expect(rejected.stdout.contains("routes[0].responses[0]"))
        #expect(rejected.stdout.contains("did you mean"))
        #expect(try TestSupport.curl(["-w", "%{http_code}", "-o", "/dev/null", "\(base)/a"]).stdout == "503")

        let good = #"{"name": "fresh", "routes": [ { "id": "x", "match": { "path": "/x" }, "responses": [ { "status": 204 } ] } ]}"#
        let loaded = try TestSupport.curl(["-X", "POST", "--data-binary", good, "\(base)/__faultline/scenarios"])
        #expect(loaded.stdout.contains(#""loaded":["fresh"]"#))
        #expect(try TestSupport.curl(["-w", "%{http_code}", "-o", "/dev/null", "\(base)/x"]).stdout == "204")
        #expect(try TestSupport.curl(["-w", "%{http_code}", "-o", "/dev/null", "\(base)/a"]).stdout == "404")
        let listed = try TestSupport.admin(server, "scenarios")
        #expect((listed["scenarios"] as? [[String: Any]])?.map { $0["name"] as? String } == ["fresh"])
    }

    @Test func resetRewindsScripts() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let url = server.baseURL.absoluteString + "/a"
        #expect(try TestSupport.curl(["-w", "%{http_code}", "-o", "/dev/null", url, "-o", "/dev/null", url]).stdout == "503200")
        let reset = try TestSupport.admin(server, "scenarios/reset?journal=true", method: "POST")
        #expect(reset["journalCleared"] as? Int == 2)
        #expect(try TestSupport.curl(["-w", "%{http_code}", "-o", "/dev/null", url]).stdout == "503")
    }

    @Test func resetCutsOffResponsesStillPendingFromTheOldScript() async throws {
        let slow = #"{"name": "slow", "routes": [ { "id": "s", "match": { "path": "/s" }, "responses": [ { "delayMs": 20000, "text": "late" } ] } ]}"#
        let server = try TestSupport.server([slow])
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        try client.send("GET /s HTTP/1.1\r\nHost: x\r\n\r\n")
        let seen = try TestSupport.admin(server, "requests/wait?count=1&timeoutMs=5000")
        #expect(seen["satisfied"] as? Bool == true)
        let start = Date()
        _ = try TestSupport.admin(server, "scenarios/reset", method: "POST")
        let result = client.readUntilClose(seconds: 10)
        #expect(result.closed || result.error != nil)
        #expect(result.bytes.isEmpty, "no byte of the old script's response may arrive")
        #expect(Date().timeIntervalSince(start) < 5)
        let entry = try #require(await server.requests().first)
        #expect(entry.outcome == .cancelled)
    }

    @Test func unknownEndpointsAndMethodsAreExplained() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let base = server.baseURL.absoluteString
        let unknown = try TestSupport.curl(["-w", "\n%{http_code}", "\(base)/__faultline/nope"])
        #expect(unknown.stdout.hasSuffix("\n404") && unknown.stdout.contains("requests/wait"))
        let wrong = try TestSupport.curl(["-i", "-X", "PUT", "\(base)/__faultline/health"])
        #expect(wrong.stdout.hasPrefix("HTTP/1.1 405"))
        #expect(wrong.stdout.contains("Allow: GET"))
        #expect(try TestSupport.journal(server).isEmpty, "admin calls are not journaled")
    }

    @Test func shutdownStopsTheServer() async throws {
        let server = try TestSupport.server([Self.scenario])
        let answer = try TestSupport.admin(server, "shutdown", method: "POST")
        #expect(answer["stopping"] as? Bool == true)
        await server.waitUntilStopped()
        let refused = try TestSupport.curl([server.baseURL.absoluteString + "/a"])
        #expect(refused.status == 7, "connection refused after shutdown")
    }
}
