import Testing
@testable import FaultlineCore

/// `faultline record`'s writer: routes per distinct request, `{param}` inference, steps in order with `times`,
/// body kinds that read back to the same bytes, redaction; and the scenario it writes loads.
@Suite struct RecordingWriterTests {
    static func exchange(
        _ method: String, _ target: String, status: Int = 200, headers: [(String, String)] = [("Content-Type", "application/json")],
        body: String = "{}", ms: Double = 12.4
    ) -> RecordedExchange {
        RecordedExchange(
            method: method, target: target, requestHeaders: [("Authorization", "Bearer secret")], status: status,
            responseHeaders: headers.map { (name: $0.0, value: $0.1) }, responseBody: Array(body.utf8), milliseconds: ms)
    }

    static func routes(_ output: RecordingWriter.Output) -> [JSONValue] {
        if case .array(let routes)? = output.scenario["routes"] { return routes }
        return []
    }

    static func loads(_ output: RecordingWriter.Output) throws -> Scenario {
        try ScenarioLoader.load(bytes: Array(output.scenario.serialized().utf8), file: "recording.json", directory: nil)
    }

    @Test func repeatedIDsBecomeOneRouteWithAParameter() throws {
        let output = RecordingWriter.write([
            Self.exchange("GET", "/orders/17", body: #"{"id":17}"#),
            Self.exchange("GET", "/orders/42", body: #"{"id":42}"#),
            Self.exchange("GET", "/orders/42", body: #"{"id":42}"#),
            Self.exchange("GET", "/users/9/orders/1"),
            Self.exchange("GET", "/users/8/orders/2"),
            Self.exchange("GET", "/items/5"),
        ], options: .init())
        let routes = Self.routes(output)
        let paths = routes.compactMap { route -> String? in
            if case .string(let path)? = route["match"]?["path"] { return path }
            return nil
        }
        // An id seen once stays literal (and literal paths come first); repeated patterns take {param}s.
        #expect(paths == ["/items/5", "/orders/{id}", "/users/{userId}/orders/{id}"])
        let orders = try #require(routes.first { $0["match"]?["path"] == .string("/orders/{id}") })
        guard case .array(let steps)? = orders["responses"] else {
            Issue.record("no responses")
            return
        }
        #expect(steps.count == 2)
        #expect(steps[1]["times"] == .int(2))
        #expect(steps[0]["json"] == .object([("id", .int(17))]))
        _ = try Self.loads(output)
    }

    @Test(arguments: [
        ("17", true), ("0042", true), ("9f86d081884c7d65", true), ("123e4567-e89b-12d3-a456-426614174000", true),
        ("ord_12345", true), ("orders", false), ("v1", false), ("abc", false), ("deadbeef", false), ("", false),
    ])
    func whatLooksLikeAnID(segment: String, isID: Bool) {
        #expect(RecordingWriter.looksLikeID(segment) == isID)
    }

    @Test func queriesSeparateRoutesAndMatchExactly() throws {
        let output = RecordingWriter.write([
            Self.exchange("GET", "/search", body: #"{"all":true}"#),
            Self.exchange("GET", "/search?q=red%20shoe", body: #"{"q":"red shoe"}"#),
        ], options: .init())
        let routes = Self.routes(output)
        #expect(routes.count == 2)
        // More query conditions first: the bare route would take both.
        #expect(routes[0]["match"]?["query"] == .object([("q", .string("red shoe"))]))
        #expect(routes[1]["match"]?["query"] == nil)
        _ = try Self.loads(output)
    }

    @Test func secretsAreRedacted() throws {
        var options = RecordingWriter.Options()
        options.redactHeaders = ["X-Api-Key"]
        options.redactFields = ["password", "token"]
        let output = RecordingWriter.write([
            Self.exchange("POST", "/login", headers: [
                ("Content-Type", "application/json"), ("Set-Cookie", "session=abc"), ("Set-Cookie", "other=def"),
                ("X-API-Key", "k"), ("Authorization", "Bearer t"), ("X-Plain", "kept"),
            ], body: #"{"user":"ann","token":"t0k3n","nested":[{"password":"hunter2"}]}"#),
        ], options: options)
        let text = output.scenario.serialized()
        for secret in ["abc", "def", "t0k3n", "hunter2", "Bearer"] {
            #expect(!text.contains(secret), "\(secret) is in \(text)")
        }
        #expect(text.contains("kept") && text.contains("ann"))
        let step = try #require(Self.routes(output).first?["responses"]?[0])
        #expect(step["headers"]?["Set-Cookie"] == .string("REDACTED, REDACTED"))
        #expect(step["headers"]?["X-API-Key"] == .string("REDACTED"))
        #expect(step["json"]?["nested"]?[0]?["password"] == .string("REDACTED"))
        _ = try Self.loads(output)
    }

    @Test func bodiesAreWrittenSoTheyReadBackToTheSameBytes() throws {
        var options = RecordingWriter.Options()
        options.inlineLimit = 32
        let output = RecordingWriter.write([
            Self.exchange("GET", "/compact", body: #"{"a":[1,2]}"#),
            // Spaced JSON would not read back byte for byte as json: text keeps it.
            Self.exchange("GET", "/spaced", body: "{ \"a\": 1 }"),
            Self.exchange("GET", "/template", headers: [("Content-Type", "text/plain")], body: "{{not a template}}"),
            Self.exchange("GET", "/binary", headers: [("Content-Type", "image/png")], body: "\u{0}\u{1}"),
            Self.exchange("GET", "/large", headers: [("Content-Type", "text/plain")], body: String(repeating: "x", count: 40)),
        ], options: options)
        let steps = Self.routes(output).map { $0["responses"]?[0] }
        #expect(steps[0]?["json"] != nil)
        #expect(steps[1]?["text"] == .string("{ \"a\": 1 }"))
        #expect(steps[2]?["base64"] != nil)
        #expect(steps[3]?["base64"] == .string("AAE="))
        #expect(steps[4]?["file"] == .string("bodies/get-large-1.bin"))
        #expect(output.files.count == 1 && output.files[0].bytes.count == 40)
    }

    @Test func delaysAreTheUpstreamsLatencyWhenAskedFor() throws {
        var options = RecordingWriter.Options()
        options.delays = true
        let output = RecordingWriter.write([Self.exchange("GET", "/slow", ms: 250.6)], options: options)
        #expect(Self.routes(output).first?["responses"]?[0]?["delayMs"] == .int(251))
        let plain = RecordingWriter.write([Self.exchange("GET", "/slow", ms: 250.6)], options: .init())
        #expect(Self.routes(plain).first?["responses"]?[0]?["delayMs"] == nil)
    }
}

fileprivate extension JSONValue {
    subscript(index: Int) -> JSONValue? {
        if case .array(let items) = self, items.indices.contains(index) { return items[index] }
        return nil
    }
}
