import Faultline
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The `faultline` executable as a test suite in another language would use it: run as a process. The parser and
/// the commands, called directly, are tested in FaultlineCLITests.
@Suite struct CLITests {
    static var binary: String {
        let root = TestSupport.repositoryRoot.appendingPathComponent(".build")
        for candidate in ["debug/faultline", "release/faultline"] {
            let path = root.appendingPathComponent(candidate).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return root.appendingPathComponent("debug/faultline").path
    }

    @Test func versionHelpAndUsageErrors() throws {
        let version = try TestSupport.run(Self.binary, ["--version"])
        #expect(version.status == 0 && version.stdout == "faultline \(Faultline.version)\n")
        let help = try TestSupport.run(Self.binary, ["--help"])
        #expect(help.status == 0 && help.stdout.contains("faultline serve"))
        let bad = try TestSupport.run(Self.binary, ["serve", "--port", "nope"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--port must be an integer"))
    }

    @Test func validateExitCodes() throws {
        let good = try TestSupport.run(Self.binary, ["validate", TestSupport.scenariosFolder])
        #expect(good.status == 0, "\(good.stderr)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("faultline-validate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("bad.json")
        try Data(#"{"name": "bad", "routes": [ { "id": "r", "match": { "path": "/r" }, "responses": [ { "status": 1000 } ] } ]}"#.utf8).write(to: file)
        let bad = try TestSupport.run(Self.binary, ["validate", file.path])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("\(file.path): routes[0].responses[0].status"))
        #expect(bad.stderr.contains("1000"))
    }

    @Test func servePrintsItsURLWritesThePortFileAndStopsOnSIGTERM() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("faultline-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let portFile = folder.appendingPathComponent("port").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", TestSupport.scenariosFolder, "--port", "0", "--port-file", portFile]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try TestSupport.launchLock.withLock { try process.run() }
        defer { if process.isRunning { process.terminate() } }

        // The first line arrives as soon as the server listens; reading it is the wait.
        var firstLine = Data()
        while !firstLine.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            firstLine += chunk
        }
        let line = String(decoding: firstLine, as: UTF8.self)
        let match = try #require(line.firstMatch(of: /^listening on http:\/\/127\.0\.0\.1:(\d+)\n/))
        let port = try #require(Int(match.1))
        #expect(port > 0)
        #expect(try String(contentsOfFile: portFile, encoding: .utf8) == "\(port)\n")

        let health = try TestSupport.curl(["http://127.0.0.1:\(port)/__faultline/health"])
        #expect(health.stdout.contains(#""status":"ok""#))
        let product = try TestSupport.curl(["-H", "X-Test-Case: cli", "-w", "%{http_code}", "-o", "/dev/null",
                                            "http://127.0.0.1:\(port)/v1/products/1"])
        #expect(product.stdout == "503")

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }

    @Test func verifyExitsNonZeroOnAFailedVerdict() async throws {
        let scenario = #"{"name": "v", "expect": {"honorsRetryAfter": true, "noRetryOn4xx": true}, "routes": [ { "id": "s", "match": { "path": "/s" }, "responses": [ { "status": 503, "headers": { "Retry-After": "1" } }, { "status": 200 } ] } ] }"#
        let careful = try TestSupport.server([scenario])
        defer { Task { await careful.stop() } }
        // No request came: no rule met its situation. That is no pass — but it fails only with --strict.
        let idle = try TestSupport.run(Self.binary, ["verify", "--url", careful.baseURL.absoluteString])
        #expect(idle.status == 0, "\(idle.stdout)\(idle.stderr)")
        #expect(idle.stdout.contains("INCONCLUSIVE  v/honorsRetryAfter: no response carried Retry-After")
                && idle.stdout.hasSuffix("2 of 2 verdicts passed (2 inconclusive)\n"), "\(idle.stdout)")
        let strict = try TestSupport.run(Self.binary, ["verify", "--strict", "--url", careful.baseURL.absoluteString])
        #expect(strict.status == 1 && strict.stdout.hasSuffix("(2 inconclusive; --strict fails them)\n"), "\(strict.stdout)")

        let naive = try TestSupport.server([scenario])
        defer { Task { await naive.stop() } }
        let url = naive.baseURL.absoluteString + "/s"
        _ = try TestSupport.curl(["-o", "/dev/null", url, "-o", "/dev/null", url])  // the retry comes at once
        let failed = try TestSupport.run(Self.binary, ["verify", "--url", naive.baseURL.absoluteString])
        #expect(failed.status == 1)
        #expect(failed.stdout.contains("FAIL  v/honorsRetryAfter: request #2 came"), "\(failed.stdout)")
        #expect(failed.stdout.contains("whose Retry-After asked for 1000 ms"))
        let report = try TestSupport.admin(naive, "report")
        #expect(report["passed"] as? Bool == false)

        let unreachable = try TestSupport.run(Self.binary, ["verify", "--url", "http://127.0.0.1:1"])
        #expect(unreachable.status == 2)
    }
}
