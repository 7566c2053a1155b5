import FaultlineCore
import Foundation
import Testing

/// The fuzzers' saved inputs, run through the same checks the fuzzers apply (FuzzChecks/), so `swift test`
/// keeps them passing without libFuzzer: every seed in Fuzz/corpus/<target> and every input in
/// Fuzz/regressions/<target>, each of which once broke a rule. The tests below them pin each fix in plain words.
private enum FuzzInputs {
    /// The repository root (the folder holding Package.swift).
    static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// Paths relative to Fuzz/, such as `regressions/http-parser/bare-cr-prefix`, sorted.
    static func files(of target: String) -> [String] {
        ["corpus", "regressions"].flatMap { folder in
            let directory = root.appendingPathComponent("Fuzz/\(folder)/\(target)")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { "\(folder)/\(target)/\($0)" }
        }
    }

    static func bytes(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: root.appendingPathComponent("Fuzz/\(path)")))
    }
}

@Suite("Fuzz inputs")
struct FuzzRegressionTests {
    @Test("the fuzzers' seed folders are found", arguments: ["http-parser", "scenario", "resource", "websocket", "upstream-response", "websocket-network"])
    func seedsArePresent(target: String) {
        #expect(FuzzInputs.files(of: target).contains { $0.hasPrefix("corpus/") })
    }

    @Test("http-parser input keeps every rule", arguments: FuzzInputs.files(of: "http-parser"))
    func httpParserInput(path: String) throws {
        let problems = HTTPParserFuzzCheck.violations(in: try FuzzInputs.bytes(path))
        #expect(problems.isEmpty, "\(problems.prefix(5))")
    }

    @Test("websocket input keeps every rule", arguments: FuzzInputs.files(of: "websocket"))
    func webSocketInput(path: String) throws {
        #expect(WebSocketFuzzCheck.violations(in: try FuzzInputs.bytes(path)) == [])
    }

    @Test("upstream-response input keeps every rule", arguments: FuzzInputs.files(of: "upstream-response"))
    func upstreamResponseInput(path: String) throws {
        let violations = UpstreamResponseFuzzCheck.violations(in: try FuzzInputs.bytes(path))
        #expect(violations.isEmpty, "\(violations)")
    }

    @Test("websocket-network input keeps every rule", arguments: FuzzInputs.files(of: "websocket-network"))
    func webSocketNetworkInput(path: String) throws {
        let violations = WebSocketNetworkFuzzCheck.violations(in: try FuzzInputs.bytes(path))
        #expect(violations.isEmpty, "\(violations)")
    }

    @Test("resource input keeps every rule", arguments: FuzzInputs.files(of: "resource"))
    func resourceInput(path: String) throws {
        #expect(ResourceFuzzCheck.violations(in: try FuzzInputs.bytes(path)) == [])
    }

    @Test("scenario input keeps every rule", arguments: FuzzInputs.files(of: "scenario"))
    func scenarioInput(path: String) throws {
        #expect(ScenarioFuzzCheck.violations(in: try FuzzInputs.bytes(path)) == [])
    }

    // MARK: What the fuzzers found

    /// The failure among the events `pieces` give, appended one by one and drained after each.
    private func failure(_ pieces: [String], limits: HTTPParserLimits = HTTPParserLimits()) -> HTTPParseError? {
        var parser = HTTPRequestParser(limits: limits)
        for piece in pieces {
            parser.append(Array(piece.utf8))
            while let event = parser.next() {
                if case .failure(let error) = event { return error }
            }
        }
        return nil
    }

    @Test("an error among the empty lines before a request line has no request-line prefix")
    func errorBeforeTheRequestLineHasNoPrefix() throws {
        // The prefix used to be whatever followed in the buffer, so it changed with how the bytes arrived.
        let whole = try #require(failure(["\r\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"]))
        let cut = try #require(failure(["\r", "\r", "\nGE", "T / HTTP/1.1\r\n"]))
        #expect(whole.status == 400 && cut.status == 400)
        #expect(whole.requestLinePrefix == "")
        #expect(cut.requestLinePrefix == "")

        let limits = HTTPParserLimits(maxRequestLineBytes: 4)
        let tooMany = try #require(failure(["\r\n\r\n\r\nGET / HTTP/1.1\r\n"], limits: limits))
        #expect(tooMany.reason.contains("too many empty lines"))
        #expect(tooMany.requestLinePrefix == "")
    }

    @Test("a request line over both limits is a 414 however it arrives")
    func requestLineOverBothLimitsIs414() throws {
        // Header section limit below the request-line limit. The 431 used to come as soon as 220 bytes of the
        // line were buffered, so the status depended on the network's cuts.
        let limits = HTTPParserLimits(maxRequestLineBytes: 400, maxHeaderSectionBytes: 220)
        let line = "GET /" + String(repeating: "a", count: 440) + " HTTP/1.1\r\nHost: h\r\n\r\n"
        let cut = line.index(line.startIndex, offsetBy: 250)
        #expect(failure([line], limits: limits)?.status == 414)
        #expect(failure([String(line[..<cut]), String(line[cut...])], limits: limits)?.status == 414)

        // A line within its limit but over the section's is a 431 once its end is seen, either way.
        let shorter = "GET /" + String(repeating: "a", count: 290) + " HTTP/1.1\r\nHost: h\r\n\r\n"
        let shorterCut = shorter.index(shorter.startIndex, offsetBy: 250)
        let shorterPieces = [String(shorter[..<shorterCut]), String(shorter[shorterCut...])]
        #expect(failure([shorter], limits: limits)?.status == 431)
        #expect(failure(shorterPieces, limits: limits)?.status == 431)
    }
}
