@testable import FaultlineCLI
import Faultline
import FaultlineCore
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `faultline verify` and `faultline export`, called directly against an in-process server: the same logic the
/// executable runs, without a process in between.
@Suite struct RemoteCommandsTests {
    static let scenario = """
        {"name": "v", "routes": [{"id": "r", "match": {"path": "/r"}, "responses": [{"status": 503, "headers": {"Retry-After": "3600"}, "times": 1}, {"text": "ok"}]}],
         "expect": {"honorsRetryAfter": true, "noRetryOn4xx": true}}
        """

    static func server() throws -> FaultlineServer {
        let scenario = try ScenarioLoader.load(bytes: Array(scenario.utf8), file: "v.json", directory: nil)
        return try FaultlineServer(configuration: .init(scenarios: [scenario]))
    }

    static func get(_ server: FaultlineServer, _ path: String) async throws {
        _ = try await URLSession.shared.data(from: server.baseURL.appendingPathComponent(path))
    }

    @Test func verifyPassesAndFailsWithTheDocumentedExitCodes() async throws {
        let server = try Self.server()
        try await Self.get(server, "r")
        // At once: an hour earlier than Retry-After asked, however long a loaded parallel run stalls this task.
        try await Self.get(server, "r")
        let failing = await RemoteCommands.verify(url: server.baseURL.absoluteString + "/")
        #expect(failing.exitCode == 1)
        #expect(failing.stdout.contains("FAIL  v/honorsRetryAfter: "))
        // No 4xx was answered: the rule never met its situation.
        #expect(failing.stdout.contains("INCONCLUSIVE  v/noRetryOn4xx: no request was answered with a 4xx"))
        #expect(failing.stdout.hasSuffix("1 of 2 verdicts passed (1 inconclusive)\n"))
        await server.resetScenarios()
        await server.clearJournal()
        let passing = await RemoteCommands.verify(url: server.baseURL.absoluteString)
        #expect(passing.exitCode == 0 && passing.stdout.hasSuffix("2 of 2 verdicts passed (2 inconclusive)\n"), "\(passing)")
        #expect(passing.stdout.contains("INCONCLUSIVE  v/honorsRetryAfter: no response carried Retry-After"))
        // --strict: a rule that never ran fails the run.
        let strict = await RemoteCommands.verify(url: server.baseURL.absoluteString, strict: true)
        #expect(strict.exitCode == 1 && strict.stdout.hasSuffix("2 of 2 verdicts passed (2 inconclusive; --strict fails them)\n"))
        await server.stop()
        let started = Date()
        let gone = await RemoteCommands.verify(url: server.baseURL.absoluteString)
        #expect(gone.exitCode == 2 && gone.stderr.contains("verify: cannot reach"), "\(gone)")
        #expect(Date().timeIntervalSince(started) < 5, "\(Date().timeIntervalSince(started)) s")
        #expect(await RemoteCommands.verify(url: "ftp://x").exitCode == 64)
    }

    @Test func verifyFindsTheServerByPortFileOrEnvironmentAndJudgesOneScenario() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        try await Self.get(server, "r")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("port-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        try Data("\(server.port)\n".utf8).write(to: URL(fileURLWithPath: file))
        let byFile = await RemoteCommands.verify(VerifyOptions(server: ServerLocation(portFile: file)), environment: [:])
        #expect(byFile.exitCode == 0 && byFile.stdout.contains("v/honorsRetryAfter"), "\(byFile)")
        let byEnvironment = await RemoteCommands.verify(
            VerifyOptions(server: ServerLocation(), scenario: "v"), environment: ["FAULTLINE_URL": server.baseURL.absoluteString])
        #expect(byEnvironment.stdout == byFile.stdout, "\(byEnvironment)")
        let nowhere = await RemoteCommands.verify(VerifyOptions(server: ServerLocation()), environment: [:])
        #expect(nowhere.exitCode == 64 && nowhere.stderr.contains("give --url http://HOST:PORT, --port-file F"), "\(nowhere)")
        let missing = await RemoteCommands.verify(VerifyOptions(server: ServerLocation(portFile: file + ".none")), environment: [:])
        #expect(missing.exitCode == 2 && missing.stderr.contains("cannot read the port file"), "\(missing)")
        let typo = await RemoteCommands.verify(url: server.baseURL.absoluteString, scenario: "w")
        #expect(typo.exitCode == 64 && typo.stderr == "faultline: verify: scenario: no loaded scenario is named \"w\"; did you mean \"v\"?\n",
                "\(typo)")
        let export = await RemoteCommands.export(
            ExportOptions(server: ServerLocation(), format: .ndjson), environment: ["FAULTLINE_URL": server.baseURL.absoluteString])
        #expect(export.exitCode == 0 && export.stdout.hasPrefix("{\"sequence\":1,"), "\(export)")
    }

    @Test func exportWritesHARAndNDJSON() async throws {
        let server = try Self.server()
        defer { Task { await server.stop() } }
        try await Self.get(server, "r")
        try await Self.get(server, "r")
        let url = server.baseURL.absoluteString
        let ndjson = await RemoteCommands.export(ExportOptions(url: url, format: .ndjson))
        #expect(ndjson.exitCode == 0)
        let lines = ndjson.stdout.split(separator: "\n")
        #expect(lines.count == 2 && lines.allSatisfy { $0.hasPrefix("{\"sequence\":") })
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID()).har").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let har = await RemoteCommands.export(ExportOptions(url: url, format: .har, output: file))
        #expect(har.exitCode == 0 && har.stdout.isEmpty)
        let document = try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        if case .array(let entries)? = document["log"]?["entries"] { #expect(entries.count == 2) } else {
            Issue.record("no HAR entries")
        }
        let unwritable = await RemoteCommands.export(ExportOptions(url: url, output: "/nonexistent/dir/x.har"))
        #expect(unwritable.exitCode == 1 && unwritable.stderr.contains("export: cannot write"))
    }
}

/// `verify --junit` / `--html` and `export --format html`, in process.
@Suite struct ReportFileTests {
    static func temporary(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID())").path
    }

    @Test func verifyWritesBothFilesWhateverTheVerdictsAndNothingWhenTheServerIsGone() async throws {
        let server = try RemoteCommandsTests.server()
        try await RemoteCommandsTests.get(server, "r")
        try await RemoteCommandsTests.get(server, "r")
        let junit = Self.temporary("junit.xml")
        let html = Self.temporary("run.html")
        defer { for file in [junit, html] { try? FileManager.default.removeItem(atPath: file) } }
        let url = server.baseURL.absoluteString
        let plain = await RemoteCommands.verify(url: url)
        let outcome = await RemoteCommands.verify(
            VerifyOptions(server: ServerLocation(url: url), junit: junit, html: html), environment: [:])
        #expect(outcome.exitCode == 1 && outcome.stdout == plain.stdout && outcome.stderr.isEmpty, "\(outcome)")
        let xml = try String(contentsOfFile: junit, encoding: .utf8)
        #expect(xml.hasPrefix(#"<?xml version="1.0" encoding="UTF-8"?>"# + "\n" + #"<testsuites name="faultline" tests="2" failures="1" errors="0" skipped="1""#))
        #expect(xml.contains(#"<failure message="request #2 came"#) && xml.contains("#1 GET /r → 503 · completed"))
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.hasPrefix("<!doctype html>") && page.contains(#"id="faultline-data""#))

        // export --format html: the same page, with the report asked for now.
        let exported = await RemoteCommands.export(ExportOptions(url: url, format: .html))
        #expect(exported.exitCode == 0 && exported.stdout.hasPrefix("<!doctype html>") && exported.stdout.contains(#""sequence":2,"#))

        // A file that cannot be written turns a passing run into exit 1; the verdicts are still printed.
        let unwritable = await RemoteCommands.verify(
            VerifyOptions(server: ServerLocation(url: url), scenario: "v", junit: "/nonexistent/dir/j.xml"), environment: [:])
        #expect(unwritable.exitCode == 1 && unwritable.stdout == plain.stdout
                && unwritable.stderr.hasPrefix("faultline: verify: cannot write /nonexistent/dir/j.xml"), "\(unwritable)")

        await server.stop()
        try FileManager.default.removeItem(atPath: junit)
        try FileManager.default.removeItem(atPath: html)
        let gone = await RemoteCommands.verify(
            VerifyOptions(server: ServerLocation(url: url), junit: junit, html: html), environment: [:])
        #expect(gone.exitCode == 2 && gone.stderr.contains("verify: cannot reach"), "\(gone)")
        #expect(!FileManager.default.fileExists(atPath: junit) && !FileManager.default.fileExists(atPath: html))
        let exportGone = await RemoteCommands.export(ExportOptions(url: url, format: .html, output: html))
        #expect(exportGone.exitCode == 2 && exportGone.stderr.contains("export: cannot reach") && !FileManager.default.fileExists(atPath: html))
    }

    @Test func theAdminClientParsesTheURLsVerifyAndExportAreGiven() throws {
        // verify and export read the admin API with Faultline's own client (no URLSession, no libcurl).
        let plain = try #require(LoopHTTPClient.Target("http://127.0.0.1:8080/__faultline/report?scenario=a%20b"))
        #expect(plain == LoopHTTPClient.Target("HTTP://127.0.0.1:8080/__faultline/report?scenario=a%20b#frag"))
        #expect(!plain.secure && plain.host == "127.0.0.1" && plain.port == 8080)
        #expect(plain.path == "/__faultline/report?scenario=a%20b" && plain.authority == "127.0.0.1:8080")
        let secure = try #require(LoopHTTPClient.Target("https://[::1]/x"))
        #expect(secure.secure && secure.host == "::1" && secure.port == 443 && secure.authority == "[::1]")
        let bare = try #require(LoopHTTPClient.Target("http://localhost?q=1"))
        #expect(bare.port == 80 && bare.path == "/?q=1" && bare.authority == "localhost")
        #expect(LoopHTTPClient.Target("http://user@h:81/")?.host == "h")
        for bad in ["ftp://x/", "http://", "http://h:0/", "http://h:65536/", "http://h:x/", "http://[::1/", "127.0.0.1:8080", ""] {
            #expect(LoopHTTPClient.Target(bad) == nil, "\(bad)")
        }
        #expect(RemoteCommands.percentEncoded("a b&c=d/é~") == "a%20b%26c%3Dd%2F%C3%A9~")
    }
}
