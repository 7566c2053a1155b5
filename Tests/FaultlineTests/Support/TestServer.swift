import Faultline
import FaultlineCore
import Foundation

/// Helpers shared by the live tests: start a server from scenario JSON, run processes, find the repo.
enum TestSupport {
    /// The repository root (the folder holding Package.swift).
    static let repositoryRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    static var scenariosFolder: String { repositoryRoot.appendingPathComponent("scenarios").path }

    /// A server on a free loopback port serving the given scenario JSON texts.
    static func server(
        _ scenarios: [String], configure: (inout FaultlineServer.Configuration) -> Void = { _ in }
    ) throws -> FaultlineServer {
        let loaded = try scenarios.enumerated().map { index, text in
            try ScenarioLoader.load(bytes: Array(text.utf8), file: "test-\(index).json", directory: nil)
        }
        var configuration = FaultlineServer.Configuration(scenarios: loaded)
        configure(&configuration)
        return try FaultlineServer(configuration: configuration)
    }

    /// A server serving the bundled scenarios/ folder.
    static func bundledServer() throws -> FaultlineServer {
        try FaultlineServer(configuration: .init(scenarios: ScenarioLoader.load(paths: [scenariosFolder])))
    }

    struct ProcessResult {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static let launchLock = NSLock()

    /// Runs a program to completion (bounded by its own options, e.g. curl's --max-time).
    static func run(_ executable: String, _ arguments: [String]) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        // stderr goes to a file, so a chatty child cannot block on a full pipe we are not reading yet.
        let errURL = FileManager.default.temporaryDirectory.appendingPathComponent("faultline-test-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let err = try FileHandle(forWritingTo: errURL)
        defer { try? FileManager.default.removeItem(at: errURL) }
        process.standardOutput = out
        process.standardError = err
        // Foundation's Process.run is not safe to call from several threads at once on Linux (it crashed in
        // memmove while parallel tests spawned curl); launches are serialized, the runs still overlap.
        try launchLock.withLock { try process.run() }
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try? err.close()
        let stderr = (try? Data(contentsOf: errURL)) ?? Data()
        return ProcessResult(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    static func curl(_ arguments: [String]) throws -> ProcessResult {
        try run("/usr/bin/curl", ["--silent", "--show-error", "--max-time", "20"] + arguments)
    }

    /// GETs an admin endpoint with curl and parses the JSON.
    static func admin(_ server: FaultlineServer, _ pathAndQuery: String, method: String = "GET") throws -> [String: Any] {
        let result = try curl(["-X", method, "\(server.baseURL.absoluteString)/__faultline/\(pathAndQuery)"])
        guard result.status == 0,
              let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else { throw RawClient.Failure(description: "admin \(pathAndQuery): \(result)") }
        return object
    }

    /// Journal entries, via the admin API (the way other languages see them).
    static func journal(_ server: FaultlineServer, _ query: String = "") throws -> [[String: Any]] {
        try admin(server, "requests" + (query.isEmpty ? "" : "?" + query))["requests"] as? [[String: Any]] ?? []
    }
}
