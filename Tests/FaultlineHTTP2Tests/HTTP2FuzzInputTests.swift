import Foundation
import Testing

/// The h2-frames fuzzer's saved inputs (Fuzz/corpus/h2-frames, and Fuzz/regressions/h2-frames: each once broke a
/// rule) through the fuzzer's own checks, so `swift test` keeps them passing without libFuzzer.
@Suite("HTTP/2 fuzz inputs")
struct HTTP2FuzzInputTests {
    /// Paths relative to Fuzz/, sorted.
    static let files: [String] = {
        ["corpus", "regressions"].flatMap { folder in
            let directory = root.appendingPathComponent("Fuzz/\(folder)/h2-frames")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { "\(folder)/h2-frames/\($0)" }
        }
    }()

    /// The repository root (the folder holding Package.swift).
    static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    @Test("the seed and regression folders are found")
    func seedsArePresent() {
        #expect(Self.files.contains { $0.hasPrefix("corpus/") })
        #expect(Self.files.contains { $0.hasPrefix("regressions/") })
    }

    @Test("h2-frames input keeps every rule", arguments: files)
    func input(path: String) throws {
        let bytes = Array(try Data(contentsOf: Self.root.appendingPathComponent("Fuzz/\(path)")))
        #expect(HTTP2FramesFuzzCheck.violations(in: bytes) == [])
    }
}
