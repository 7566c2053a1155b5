import FaultlineCore

/// What must hold for any request to a resource: the contract checks of the `resource` fuzzer
/// (Fuzz/entries/resource/ResourceFuzzer.swift), which compiles this file, and of FuzzRegressionTests, which runs the saved inputs
/// through it. Returns the broken rules; [] when all hold.
///
/// An input is text: a first line `METHOD PATH` (PATH one of the scenario's resources), then `Name: value` lines
/// for the conditional, range and content-type fields (any bytes in the values), an empty line, and the body.
/// Every input is sent twice, to one engine, so a write's new version is read back, and the answers must keep
/// RFC 9110's framing: a 206's Content-Range inside the representation with the bytes it names, a 416's
/// `bytes */N`, no body on 304 and HEAD, Content-Length equal to what follows.
///
/// No `import Testing` here: the fuzzer is built by swiftc alone, without the test libraries.
enum ResourceFuzzCheck {
    static let scenario = #"""
        {"name": "fuzz", "seed": 1, "resources": [
          {"id": "text", "path": "/text", "text": "0123456789abcdefghij", "methods": ["PUT", "PATCH", "DELETE"]},
          {"id": "json", "path": "/json/{id}", "json": {"a": [1, 2], "b": null}, "methods": ["PUT", "PATCH", "DELETE"],
           "requireConditional": true, "etag": "weak"},
          {"id": "blob", "path": "/blob", "generated": {"size": 5000}, "cacheControl": "max-age=5"},
          {"id": "odd", "path": "/odd", "text": "xyz", "etag": false,
           "deviations": ["wrong-content-range", "304-changed-headers", "weak-etag-on-206"]}
        ]}
        """#

    static let loaded = try! ScenarioLoader.load(bytes: Array(scenario.utf8), file: "fuzz.json", directory: nil)

    static func violations(in input: [UInt8]) -> [String] {
        guard let request = request(input) else { return [] }
        // A fresh engine per input: an input is reproducible alone, and the regression tests run in parallel.
        let engine = Engine(scenarios: [loaded], now: EngineInstant(monotonicMilliseconds: 0, wallSeconds: 1_800_000_000))
        var problems: [String] = []
        for round in 0..<2 {
            let now = EngineInstant(monotonicMilliseconds: UInt64(round), wallSeconds: 1_800_000_001 + Double(round))
            let decision = engine.decide(request, requestID: round + 1, now: now)
            problems += answerViolations(request, decision)
        }
        return problems
    }

    /// The request the input describes; nil when its first line names no method and path.
    static func request(_ input: [UInt8]) -> HTTPRequest? {
        let text = String(decoding: input, as: UTF8.self)
        let (headPart, body) = text.firstRange(of: "\n\n").map { (String(text[..<$0.lowerBound]), String(text[$0.upperBound...])) }
            ?? (text, "")
        var lines = headPart.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty else { return nil }
        let first = lines.removeFirst().split(separator: " ", maxSplits: 1).map(String.init)
        guard first.count == 2, ["GET", "HEAD", "PUT", "PATCH", "DELETE", "POST"].contains(first[0]),
              first[1].hasPrefix("/") else { return nil }
        var headers = HTTPHeaders([("Host", "fuzz")])
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = String(line[..<colon])
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x3A }) else { continue }
            headers.append(name: name, value: String(line[line.index(after: colon)...]).trimmingCharacters())
        }
        return HTTPRequest(
            head: HTTPRequestHead(method: first[0], target: first[1], version: .http1_1, headers: headers),
            body: Array(body.utf8))
    }

    private static func answerViolations(_ request: HTTPRequest, _ decision: Decision) -> [String] {
        var problems: [String] = []
        let wire = HTTP1Renderer.bytes(decision.script)
        guard let split = wire.firstRange(of: [13, 10, 13, 10]) else {
            return decision.script.status == nil ? [] : ["a response without a complete head"]
        }
        let head = String(decoding: wire[..<split.lowerBound], as: UTF8.self)
        let body = Array(wire[split.upperBound...])
        func field(_ name: String) -> String? {
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name + ": ") }.map { String($0.dropFirst(name.count + 2)) }
        }
        guard let status = decision.script.status else { return ["no status for \(request.method) \(request.path)"] }
        guard let record = decision.resource else {
            return request.path == "/text" || request.path == "/blob" || request.path == "/odd" || request.path.hasPrefix("/json/")
                && request.path.count > 6 && !request.path.dropFirst(6).contains("/")
                ? ["\(request.method) \(request.path) → \(status) without a resource record"] : []
        }
        let length = field("content-length").flatMap(Int.init)
        if status == 304 || request.method == "HEAD" || status == 204 {
            if !body.isEmpty { problems.append("\(status) to \(request.method) has a body of \(body.count) bytes") }
        } else if length != body.count {
            problems.append("Content-Length \(length.map(String.init) ?? "none") but \(body.count) body bytes (\(status))")
        }
        switch status {
        case 206:
            if record.ranges.isEmpty { problems.append("206 without ranges in the record") }
            for range in record.ranges where range.lowerBound < 0 || range.upperBound >= record.size {
                problems.append("206 range \(range) outside \(record.size) bytes")
            }
            if record.ranges.count == 1, record.deviations.isEmpty {
                let range = record.ranges[0]
                if field("content-range") != "bytes \(range.lowerBound)-\(range.upperBound)/\(record.size)" {
                    problems.append("206 Content-Range \(field("content-range") ?? "none") for \(range)")
                }
                if body.count != range.count { problems.append("206 of \(range) with \(body.count) bytes") }
            } else if record.ranges.count > 1, field("content-type")?.hasPrefix("multipart/byteranges; boundary=") != true {
                problems.append("several ranges without multipart/byteranges")
            }
        case 416:
            if field("content-range") != "bytes */\(record.size)" { problems.append("416 without bytes */\(record.size)") }
        case 200 where request.method == "GET" && record.decision == .full:
            if body.count != record.size { problems.append("a full 200 of \(body.count) bytes, size \(record.size)") }
        default:
            break
        }
        let expected: [ResourceDecision: Set<Int>] = [
            .full: [200], .partial: [206], .notModified: [304], .preconditionFailed: [412], .preconditionRequired: [428],
            .rangeNotSatisfiable: [416], .created: [201], .updated: [200, 204], .deleted: [204], .notFound: [404],
            .methodNotAllowed: [405], .unsupportedMediaType: [415], .insufficientStorage: [507],
        ]
        if expected[record.decision]?.contains(status) != true {
            problems.append("decision \(record.decision.rawValue) answered \(status)")
        }
        return problems
    }
}

private extension String {
    func trimmingCharacters() -> String {
        var scalars = Substring(self)
        while scalars.first == " " || scalars.first == "\t" { scalars = scalars.dropFirst() }
        while scalars.last == " " || scalars.last == "\t" { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
