import Foundation
import Testing
@testable import FaultlineCore

/// The problems found in `json`, or [] when it loaded.
private func loadErrors(_ json: String, directory: String? = nil) -> [ScenarioError] {
    do {
        _ = try ScenarioLoader.load(bytes: Array(json.utf8), file: "test.json", directory: directory)
        return []
    } catch {
        return error.errors
    }
}

/// The single problem found in `json`; records an issue when there is not exactly one.
private func loadError(_ json: String, directory: String? = nil, sourceLocation: SourceLocation = #_sourceLocation)
    -> ScenarioError?
{
    let errors = loadErrors(json, directory: directory)
    guard errors.count == 1 else {
        Issue.record("expected one error, got \(errors.count): \(errors)", sourceLocation: sourceLocation)
        return nil
    }
    return errors[0]
}

/// A scenario with one route whose single response step is `step` (a JSON object's text).
private func withStep(_ step: String) -> String {
    #"{"name": "s", "routes": [{"id": "r", "match": {"path": "/x"}, "responses": [\#(step)]}]}"#
}

/// A scenario with one route whose match is `match` (a JSON object's text).
private func withMatch(_ match: String, extra: String = "") -> String {
    #"{"name": "s", "routes": [{"id": "r", "match": \#(match), "responses": [{}]\#(extra)}]}"#
}

/// A fresh folder under the system temporary directory, removed when `body` returns.
private func withTemporaryDirectory(_ body: (String) throws -> Void) throws {
    let path = FileManager.default.temporaryDirectory.path + "/faultline-loader-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    try body(path)
}

private func write(_ text: String, to path: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

@Suite("Scenario loader")
struct ScenarioLoaderTests {
    // MARK: Valid scenarios

    @Test("a scenario using every field loads into the expected model")
    func fullScenario() throws {
        try withTemporaryDirectory { directory in
            try FileManager.default.createDirectory(atPath: directory + "/bodies", withIntermediateDirectories: true)
            try Data([0, 1, 2, 255]).write(to: URL(fileURLWithPath: directory + "/bodies/blob.bin"))
            let json = #"""
                {
                  "$schema": "./faultline.schema.json",
                  "name": "orders",
                  "description": "A flaky gateway",
                  "seed": 18446744073709551615,
                  "routes": [
                    {
                      "id": "product",
                      "match": {
                        "method": ["get", "HEAD"],
                        "path": "/v1/products/{id}",
                        "query": {"q": "x", "page": {"matches": "^[0-9]+$"}},
                        "headers": {"X-Test": {"contains": "abc"}, "Authorization": {"present": true},
                                    "X-Gone": {"absent": true}, "Accept": {"equals": "a/b"}}
                      },
                      "responses": [
                        {"status": 503, "headers": {"Retry-After": "1", "X-A": "{{path.id}}"}, "times": 2,
                         "delay": {"uniform": [10, 20]}},
                        {"json": {"id": "{{path.id}}", "price": 1.50}, "delayMs": 150, "close": true},
                        {"text": "hi", "delay": {"lognormal": {"medianMs": 80, "sigma": 0.5}},
                         "chunked": {"size": 3, "intervalMs": 10}},
                        {"base64": "aGVsbG8=", "fault": "truncate-body"},
                        {"file": "bodies/blob.bin", "status": 206}
                      ],
                      "afterLast": "cycle",
                      "sequenceBy": "path:id"
                    },
                    {
                      "id": "search",
                      "match": {"pathPrefix": "/v1/search", "body": {"json": {"kind": "a", "n": [1]}}},
                      "responses": [{}],
                      "afterLast": "fail",
                      "sequenceBy": "header:X-Test-Case"
                    },
                    {
                      "id": "any",
                      "match": {"method": "*", "body": {"contains": "needle"}},
                      "responses": [{"status": 204}],
                      "sequenceBy": "query:session"
                    },
                    {"id": "root", "match": {"path": "/", "body": {"equals": "exact"}}, "responses": [{}]}
                  ]
                }
                """#
            let file = directory + "/orders.json"
            let scenario = try ScenarioLoader.load(bytes: Array(json.utf8), file: file, directory: directory)

            let product = Route(
                id: "product",
                match: RouteMatch(
                    methods: ["GET", "HEAD"],
                    path: PathPattern(
                        segments: [.literal("v1"), .literal("products"), .parameter("id")], isPrefix: false,
                        source: "/v1/products/{id}"),
                    query: [(name: "q", matcher: .equals("x")), (name: "page", matcher: .regex(try CompiledRegex("^[0-9]+$")))],
                    headers: [
                        (name: "X-Test", matcher: .contains("abc")), (name: "Authorization", matcher: .present),
                        (name: "X-Gone", matcher: .absent), (name: "Accept", matcher: .equals("a/b")),
                    ]),
                responses: [
                    ResponseStep(
                        status: 503, headers: [(name: "Retry-After", value: "1"), (name: "X-A", value: "{{path.id}}")],
                        delay: .uniform(min: 10, max: 20), times: 2),
                    ResponseStep(
                        body: .json(.object([
                            (key: "id", value: .string("{{path.id}}")), (key: "price", value: .number("1.50")),
                        ])),
                        delay: .fixed(milliseconds: 150), closeConnection: true),
                    ResponseStep(
                        body: .text("hi"), delay: .logNormal(medianMilliseconds: 80, sigma: 0.5),
                        drip: DripSpec(size: 3, intervalMilliseconds: 10)),
                    ResponseStep(body: .bytes(Array("hello".utf8)), fault: FaultSpec(.truncateBody)),
                    ResponseStep(status: 206, body: .file(path: "bodies/blob.bin", bytes: [0, 1, 2, 255])),
                ],
                afterLast: .cycle,
                sequenceBy: .pathParameter("id"))
            let search = Route(
                id: "search",
                match: RouteMatch(
                    path: PathPattern(
                        segments: [.literal("v1"), .literal("search")], isPrefix: true, source: "/v1/search"),
                    body: .jsonSubset(.object([
                        (key: "kind", value: .string("a")), (key: "n", value: .array([.number("1")])),
                    ]))),
                responses: [ResponseStep()],
                afterLast: .fail,
                sequenceBy: .header("X-Test-Case"))
            let any = Route(
                id: "any", match: RouteMatch(body: .contains("needle")), responses: [ResponseStep(status: 204)],
                sequenceBy: .query("session"))
            let root = Route(
                id: "root",
                match: RouteMatch(
                    path: PathPattern(segments: [.literal("")], isPrefix: false, source: "/"), body: .equals("exact")),
                responses: [ResponseStep()])
            let expected = Scenario(
                name: "orders", description: "A flaky gateway", seed: .max, routes: [product, search, any, root],
                sourceFile: file, directory: directory)
            #expect(scenario == expected)
            // Equality ignores the literal text of numbers, so check the one that matters on the wire.
            if case .json(let body) = scenario.routes[0].responses[1].body {
                #expect(body.serialized() == #"{"id":"{{path.id}}","price":1.50}"#)
            } else {
                Issue.record("expected a JSON body")
            }
        }
    }

    @Test("defaults: seed 0, status 200, no body, repeat-last, any method, empty routes allowed")
    func defaults() throws {
        let empty = try ScenarioLoader.load(bytes: Array(#"{"name": "e", "routes": []}"#.utf8), file: "<admin upload>",
                                            directory: nil)
        #expect(empty == Scenario(name: "e", routes: [], sourceFile: "<admin upload>"))

        let scenario = try ScenarioLoader.load(
            bytes: Array(withMatch("{}").utf8), file: "f.json", directory: nil)
        #expect(scenario.seed == 0)
        #expect(scenario.description == nil)
        #expect(scenario.routes == [Route(id: "r", match: RouteMatch(), responses: [ResponseStep()])])
        let step = scenario.routes[0].responses[0]
        #expect(step.status == 200 && step.body == .empty && step.times == 1 && !step.closeConnection)
        #expect(step.delay == nil && step.drip == nil && step.fault == nil)
    }

    @Test("methods are upper-cased, deduplicated, and \"*\" means any")
    func methods() throws {
        func methods(_ json: String) throws -> [String] {
            let scenario = try ScenarioLoader.load(bytes: Array(withMatch(json).utf8), file: "f", directory: nil)
            return scenario.routes[0].match.methods
        }
        #expect(try methods(#"{"method": "post"}"#) == ["POST"])
        #expect(try methods(#"{"method": ["get", "GET", "Delete"]}"#) == ["GET", "DELETE"])
        #expect(try methods(#"{"method": "*"}"#) == [])
        #expect(try methods(#"{"method": ["GET", "*"]}"#) == [])
    }

    @Test("every fault name is accepted")
    func allFaults() throws {
        // raw-frames alone names no bytes: HTTP2PlanTests loads it with its parameters.
        for fault in FaultName.allCases where fault != .rawFrames {
            let scenario = try ScenarioLoader.load(
                bytes: Array(withStep(#"{"fault": "\#(fault.rawValue)"}"#).utf8), file: "f", directory: nil)
            #expect(scenario.routes[0].responses[0].fault == FaultSpec(fault))
        }
    }

    // MARK: Errors: the document

    @Test("a JSON syntax error reports line and column with no JSON path")
    func syntaxError() {
        let error = loadError("{\n  \"name\": \"x\"\n  \"routes\": []\n}")
        #expect(error?.jsonPath == "")
        #expect(error?.message == "line 3, column 3: expected ',' or '}'")
        #expect(error?.description == "test.json: line 3, column 3: expected ',' or '}'")
    }

    @Test("the top level must be an object with a name and routes")
    func topLevel() {
        #expect(loadError("[]")?.message == "expected an object, found an array")
        let missing = loadErrors("{}")
        #expect(missing.map(\.jsonPath) == ["", ""])
        #expect(missing.map(\.message) == [#"missing required key "name""#, #"missing required key "routes""#])
        #expect(loadError(#"{"name": "", "routes": []}"#).map { [$0.jsonPath, $0.message] }
            == ["name", "must not be empty"])
        #expect(loadError(#"{"name": 5, "routes": []}"#)?.message == "expected a string, found a number")
        #expect(loadError(#"{"name": "n", "routes": {}}"#).map { [$0.jsonPath, $0.message] }
            == ["routes", "expected an array, found an object"])
        #expect(loadError(#"{"name": "n", "routes": [], "seed": -1}"#).map { [$0.jsonPath, $0.message] }
            == ["seed", "expected a non-negative integer no larger than 18446744073709551615, found -1"])
        #expect(loadError(#"{"name": "n", "routes": [], "seed": 1.5}"#)?.jsonPath == "seed")
        #expect(loadError(#"{"name": "n", "routes": [], "$schema": 1}"#)?.jsonPath == "$schema")
    }

    @Test("expect reads its rules and names mistakes")
    func expectRules() throws {
        let json = #"{"name": "n", "routes": [], "expect": {"honorsRetryAfter": true, "maxAttempts": 3, "backoff": {"jitter": true}, "logicalRequest": "header:X-Request-ID"}}"#
        let expect = try #require(try ScenarioLoader.load(bytes: Array(json.utf8), file: "f", directory: nil).expect)
        #expect(expect.honorsRetryAfter && expect.maxAttempts == 3 && expect.backoff && expect.jitter)
        #expect(expect.logicalKey == .header("X-Request-ID") && !expect.singleFlightRefresh)
        #expect(loadError(#"{"name": "n", "routes": [], "expect": {"honorRetryAfter": true}}"#)?.message
            == #"unknown key "honorRetryAfter"; did you mean "honorsRetryAfter"?"#)
    }

    @Test("effects on a step are read, and unknown ones named")
    func stepEffects() throws {
        let json = withStep(#"{"effects": ["rotate-token", "expire-token", "reset-buckets", "reset-bucket:search"]}"#)
        let scenario = try ScenarioLoader.load(bytes: Array(json.utf8), file: "f", directory: nil)
        #expect(scenario.routes[0].responses[0].effects
            == [.rotateToken, .expireToken, .resetBuckets(nil), .resetBuckets("search")])
        let error = loadError(withStep(#"{"effects": ["rotate-tokens"]}"#))
        #expect(error.map { [$0.jsonPath, $0.message] }
            == ["routes[0].responses[0].effects[0]", #"unknown effect "rotate-tokens"; did you mean "rotate-token"?"#])
    }

    @Test("unknown keys get a did-you-mean from edit distance")
    func unknownKeys() {
        let json = #"{"name": "s", "routes": [{"id": "r", "match": {}, "responses": [{}, {"stauts": 200}]}]}"#
        let error = loadError(json)
        #expect(error?.jsonPath == "routes[0].responses[1]")
        #expect(error?.message == #"unknown key "stauts"; did you mean "status"?"#)
        #expect(error?.description
            == #"test.json: routes[0].responses[1]: unknown key "stauts"; did you mean "status"?"#)

        #expect(loadError(#"{"name": "s", "routes": [], "Seed": 1}"#)?.message
            == #"unknown key "Seed"; did you mean "seed"?"#)
        #expect(loadError(withMatch(#"{"pathprefix": "/a"}"#))?.message
            == #"unknown key "pathprefix"; did you mean "pathPrefix"?"#)
        #expect(loadError(withMatch(#"{"headers": {"X": {"equal": "y"}}}"#)).map { [$0.jsonPath, $0.message] }
            == ["routes[0].match.headers.X", #"unknown key "equal"; did you mean "equals"?"#])
        #expect(loadError(withStep(#"{"delay_ms": 5}"#))?.message
            == #"unknown key "delay_ms"; did you mean "delayMs"?"#)

        let far = loadError(withStep(#"{"zzz": 1}"#))
        #expect(far?.message.hasPrefix(#"unknown key "zzz"; expected one of "status", "headers", "#) == true)
        #expect(far?.message.hasSuffix(#""resource", "websocket", "proxy" or "date""#) == true)
    }

    @Test("a type error says what was expected and what was found")
    func typeErrors() {
        let error = loadError(withMatch(#"{"method": 5}"#))
        #expect(error?.description
            == "test.json: routes[0].match.method: expected a string or an array of strings, found a number")
        #expect(loadError(withMatch(#"{"method": ["GET", true]}"#)).map { [$0.jsonPath, $0.message] }
            == ["routes[0].match.method[1]", "expected a string, found a boolean"])
        #expect(loadError(withStep(#"{"close": "yes"}"#)).map { [$0.jsonPath, $0.message] }
            == ["routes[0].responses[0].close", "expected true or false, found a string"])
        #expect(loadError(#"{"name": "s", "routes": [null]}"#).map { [$0.jsonPath, $0.message] }
            == ["routes[0]", "expected an object, found null"])
    }

    @Test("every problem is reported at once, in document order")
    func collectsErrors() {
        let json = #"""
            {"name": "", "routes": [
              {"id": "a", "match": {"method": 1}, "responses": [{"status": 1000}, {"times": 0}]},
              {"id": "a", "match": {"path": "x"}, "responses": []},
              {"match": {}, "responses": [{"fault": "rest"}]}
            ], "expect": {"maxAttempts": 0}}
            """#
        let errors = loadErrors(json)
        #expect(errors.map(\.jsonPath) == [
            "name", "routes[0].match.method", "routes[0].responses[0].status", "routes[0].responses[1].times",
            "routes[1].id", "routes[1].match.path", "routes[1].responses", "routes[2]", "routes[2].responses[0].fault",
            "expect.maxAttempts",
        ])
        #expect(errors.allSatisfy { $0.file == "test.json" })
        let combined = ScenarioLoadError(errors: errors).description
        #expect(combined.split(separator: "\n").count == errors.count)
        #expect(combined.contains("test.json: routes[0].responses[0].status: 1000 is not an HTTP status (100–599)"))
    }

    // MARK: Errors: routes

    @Test("route ids are required and unique; a duplicate names both routes")
    func routeIDs() {
        let json = #"""
            {"name": "s", "routes": [{"id": "a", "match": {}, "responses": [{}]},
              {"id": "b", "match": {}, "responses": [{}]}, {"id": "a", "match": {}, "responses": [{}]}]}
            """#
        let error = loadError(json)
        #expect(error?.jsonPath == "routes[2].id")
        #expect(error?.message == #"duplicate route id "a"; routes[0] has it too"#)

        #expect(loadError(#"{"name": "s", "routes": [{"match": {}, "responses": [{}]}]}"#)
            .map { [$0.jsonPath, $0.message] } == ["routes[0]", #"missing required key "id""#])
        #expect(loadError(#"{"name": "s", "routes": [{"id": "r", "responses": [{}]}]}"#)?.message
            == #"missing required key "match""#)
        #expect(loadError(#"{"name": "s", "routes": [{"id": "r", "match": {}}]}"#)?.message
            == #"missing required key "responses""#)
        #expect(loadError(#"{"name": "s", "routes": [{"id": "r", "match": {}, "responses": []}]}"#)
            .map { [$0.jsonPath, $0.message] } == ["routes[0].responses", "needs at least one response step"])
    }

    @Test("afterLast must be one of the three policies")
    func afterLast() {
        let error = loadError(withMatch("{}", extra: #", "afterLast": "cycles""#))
        #expect(error.map { [$0.jsonPath, $0.message] }
            == ["routes[0].afterLast", #"unknown afterLast "cycles"; did you mean "cycle"?"#])
        #expect(loadError(withMatch("{}", extra: #", "afterLast": "never""#))?.message
            == #"unknown afterLast "never"; expected "repeat-last", "cycle" or "fail""#)
    }

    @Test("sequenceBy names a header, a query parameter, or a parameter of the route's own path")
    func sequenceBy() {
        let missingParameter = loadError(withMatch(#"{"path": "/a/{id}"}"#, extra: #", "sequenceBy": "path:name""#))
        #expect(missingParameter.map { [$0.jsonPath, $0.message] } == [
            "routes[0].sequenceBy",
            #""path:name" names no {name} parameter of this route's path; its path parameters are {id}"#,
        ])
        #expect(loadError(withMatch("{}", extra: #", "sequenceBy": "path:id""#))?.message
            == #""path:id" names no {id} parameter of this route's path; this route's path has no {param} segments"#)
        #expect(loadError(withMatch("{}", extra: #", "sequenceBy": "cookie:x""#))?.message
            == #"expected "header:NAME", "query:NAME" or "path:PARAM", found "cookie:x""#)
        #expect(loadError(withMatch("{}", extra: #", "sequenceBy": "header:X Y""#))?.message
            == #""X Y" is not a valid header name"#)
        #expect(loadError(withMatch("{}", extra: #", "sequenceBy": "query:""#))?.jsonPath == "routes[0].sequenceBy")
        // A broken path is reported once, not again through sequenceBy.
        #expect(loadError(withMatch(#"{"path": "a/{id}"}"#, extra: #", "sequenceBy": "path:id""#))?.jsonPath
            == "routes[0].match.path")
    }

    // MARK: Errors: match

    @Test("path templates are checked", arguments: [
        (#"{"path": "v1/x"}"#, "routes[0].match.path", #""v1/x" must start with "/""#),
        (#"{"path": "/x?a=1"}"#, "routes[0].match.path",
         #""/x?a=1" has a query part; match query parameters with "query" instead"#),
        (#"{"path": "/v1/{id}.json"}"#, "routes[0].match.path",
         #"in "/v1/{id}.json", "{id}.json": a {param} must be a whole segment, as in /orders/{id}"#),
        (#"{"pathPrefix": "/v1/{1x}"}"#, "routes[0].match.pathPrefix",
         #"in "/v1/{1x}", "{1x}": a parameter name must be an identifier "#
            + "(letters, digits and _, not starting with a digit)"),
        (#"{"path": "/{id}/x/{id}"}"#, "routes[0].match.path", #"in "/{id}/x/{id}", the parameter {id} appears twice"#),
        (#"{"path": "/a b"}"#, "routes[0].match.path",
         #""/a b" contains a space or control character; percent-encode it (%20)"#),
        (#"{"path": "/a", "pathPrefix": "/b"}"#, "routes[0].match", #"use either "path" or "pathPrefix", not both"#),
        (#"{"method": "GE T"}"#, "routes[0].match.method", #""GE T" is not a valid HTTP method"#),
        (#"{"method": []}"#, "routes[0].match.method", #"an empty list matches no method; use "*" for any method"#),
    ] as [(String, String, String)])
    func pathAndMethodErrors(match: String, path: String, message: String) {
        let error = loadError(withMatch(match))
        #expect(error?.jsonPath == path)
        #expect(error?.message == message)
    }

    @Test("query and header matchers are checked", arguments: [
        (#"{"query": {"q": {"matches": "(unclosed"}}}"#, "routes[0].match.query.q.matches",
         #"the regular expression "(unclosed" does not compile"#),
        (#"{"headers": {"X": {"equals": "a", "contains": "b"}}}"#, "routes[0].match.headers.X",
         #"use only one of "equals" and "contains", not several"#),
        (#"{"headers": {"X": {}}}"#, "routes[0].match.headers.X",
         #"expected exactly one of "equals", "contains", "matches", "present" or "absent""#),
        (#"{"headers": {"X": {"present": false}}}"#, "routes[0].match.headers.X.present",
         #"only true is allowed; to require the opposite, use "absent": true"#),
        (#"{"headers": {"X": 1}}"#, "routes[0].match.headers.X", "expected a string or an object, found a number"),
        (#"{"headers": {"Bad Name": "v"}}"#, #"routes[0].match.headers["Bad Name"]"#,
         #""Bad Name" is not a valid header name"#),
        (#"{"query": []}"#, "routes[0].match.query", "expected an object, found an array"),
        (#"{"body": {"json": 1, "equals": "x"}}"#, "routes[0].match.body",
         #"use only one of "equals" and "json", not several"#),
        (#"{"body": {"contains": 1}}"#, "routes[0].match.body.contains", "expected a string, found a number"),
    ] as [(String, String, String)])
    func matcherErrors(match: String, path: String, message: String) {
        let error = loadError(withMatch(match))
        #expect(error?.jsonPath == path)
        #expect(error?.message == message)
    }

    // MARK: Errors: response steps

    @Test("response steps are checked", arguments: [
        (#"{"status": 1000}"#, "routes[0].responses[0].status", "1000 is not an HTTP status (100–599)"),
        (#"{"status": 99}"#, "routes[0].responses[0].status", "99 is not an HTTP status (100–599)"),
        (#"{"status": 200.5}"#, "routes[0].responses[0].status", "200.5 is not an HTTP status (100–599)"),
        (#"{"status": "200"}"#, "routes[0].responses[0].status", "expected an integer, found a string"),
        (#"{"headers": {"X-A": "a\r\nInjected: 1"}}"#, "routes[0].responses[0].headers.X-A",
         "a header value must not contain CR, LF or NUL"),
        (#"{"headers": {"X:A": "a"}}"#, #"routes[0].responses[0].headers["X:A"]"#,
         #""X:A" is not a valid header name"#),
        (#"{"headers": {"X-A": 1}}"#, "routes[0].responses[0].headers.X-A", "expected a string, found a number"),
        (#"{"json": {}, "text": "t"}"#, "routes[0].responses[0]",
         #"a step has at most one body; found "json" and "text""#),
        (#"{"text": "t", "base64": "", "file": "f"}"#, "routes[0].responses[0]",
         #"a step has at most one body; found "text", "base64" and "file""#),
        (#"{"base64": "abc"}"#, "routes[0].responses[0].base64",
         "not valid base64 (standard alphabet, with = padding): its length 3 is not a multiple of 4"),
        (#"{"base64": "ab-_"}"#, "routes[0].responses[0].base64",
         #"not valid base64 (standard alphabet, with = padding): "-" at offset 2 is not in the base64 alphabet"#),
        (#"{"base64": "a==="}"#, "routes[0].responses[0].base64",
         #"not valid base64 (standard alphabet, with = padding): it ends with 3 "="; at most 2 are allowed"#),
        (#"{"file": "a.bin"}"#, "routes[0].responses[0].file",
         "file bodies need a scenario folder; this scenario was loaded without one"),
        (#"{"delayMs": 5, "delay": {"uniform": [1, 2]}}"#, "routes[0].responses[0]",
         #"use either "delayMs" or "delay", not both"#),
        (#"{"delayMs": 600001}"#, "routes[0].responses[0].delayMs", "must be between 0 and 600000, found 600001"),
        (#"{"delayMs": -1}"#, "routes[0].responses[0].delayMs", "must be between 0 and 600000, found -1"),
        (#"{"delay": {"uniform": [5, 1]}}"#, "routes[0].responses[0].delay.uniform",
         "the minimum 5 is greater than the maximum 1"),
        (#"{"delay": {"uniform": [5]}}"#, "routes[0].responses[0].delay.uniform",
         "expected two integers [min, max], found 1 element"),
        (#"{"delay": {"uniform": [-1, 5]}}"#, "routes[0].responses[0].delay.uniform[0]",
         "must be between 0 and 600000, found -1"),
        (#"{"delay": {"lognormal": {"medianMs": 0, "sigma": 1}}}"#, "routes[0].responses[0].delay.lognormal.medianMs",
         "must be greater than 0, found 0"),
        (#"{"delay": {"lognormal": {"medianMs": 5, "sigma": -0.5}}}"#, "routes[0].responses[0].delay.lognormal.sigma",
         "must be 0 or more, found -0.5"),
        (#"{"delay": {"lognormal": {"medianMs": 5}}}"#, "routes[0].responses[0].delay.lognormal",
         #"missing required key "sigma""#),
        (#"{"delay": {"normal": {}}}"#, "routes[0].responses[0].delay",
         #"unknown key "normal"; did you mean "lognormal"?"#),
        (#"{"chunked": {"size": 0, "intervalMs": 10}}"#, "routes[0].responses[0].chunked.size",
         "must be at least 1, found 0"),
        (#"{"chunked": {"size": 1}}"#, "routes[0].responses[0].chunked", #"missing required key "intervalMs""#),
        (#"{"times": 0}"#, "routes[0].responses[0].times", "must be at least 1, found 0"),
        (#"{"times": 1.5}"#, "routes[0].responses[0].times", "expected an integer, found 1.5"),
        (#"{"fault": "rest"}"#, "routes[0].responses[0].fault", #"unknown fault "rest"; did you mean "reset"?"#),
        (#"{"fault": "Half-Close"}"#, "routes[0].responses[0].fault",
         #"unknown fault "Half-Close"; did you mean "half-close"?"#),
    ] as [(String, String, String)])
    func stepErrors(step: String, path: String, message: String) {
        let error = loadError(withStep(step))
        #expect(error?.jsonPath == path)
        #expect(error?.message == message)
    }

    @Test("an unknown fault with no near match lists every valid fault")
    func unknownFaultListsNames() {
        let message = loadError(withStep(#"{"fault": "explode"}"#))?.message ?? ""
        #expect(message.hasPrefix(#"unknown fault "explode"; valid faults are "reset", "empty-reply", "#))
        for fault in FaultName.allCases {
            #expect(message.contains("\"\(fault.rawValue)\""))
        }
    }

    @Test("base64 decodes with and without padding")
    func base64() throws {
        #expect(try ScenarioLoader.decodeBase64("").get() == [])
        #expect(try ScenarioLoader.decodeBase64("aA==").get() == Array("h".utf8))
        #expect(try ScenarioLoader.decodeBase64("aGk=").get() == Array("hi".utf8))
        #expect(try ScenarioLoader.decodeBase64("aGVsbG8gd29ybGQh").get() == Array("hello world!".utf8))
        #expect(try ScenarioLoader.decodeBase64("+/+/").get() == [0xFB, 0xFF, 0xBF])
        #expect((try? ScenarioLoader.decodeBase64("aGk").get()) == nil)
        #expect((try? ScenarioLoader.decodeBase64("a=Gk").get()) == nil)
    }

    @Test("did-you-mean tolerates a swap or an edit, and stays quiet for unrelated words")
    func suggestions() {
        #expect(ScenarioLoader.suggestion(for: "stauts", among: ["status", "headers"]) == "status")
        #expect(ScenarioLoader.suggestion(for: "respones", among: ["responses", "routes"]) == "responses")
        #expect(ScenarioLoader.suggestion(for: "ID", among: ["id", "match"]) == "id")
        #expect(ScenarioLoader.suggestion(for: "banana", among: ["status", "headers"]) == nil)
        #expect(ScenarioLoader.editDistance(Array("ab"), Array("ba")) == 1)
        #expect(ScenarioLoader.editDistance(Array("kitten"), Array("sitting")) == 3)
    }

    // MARK: File bodies

    @Test("a file body inside the scenario folder is read at load time")
    func fileBodyInside() throws {
        try withTemporaryDirectory { directory in
            try write("payload", to: directory + "/body.txt")
            let scenario = try ScenarioLoader.load(
                bytes: Array(withStep(#"{"file": "./body.txt"}"#).utf8), file: "s.json", directory: directory)
            #expect(scenario.routes[0].responses[0].body == .file(path: "./body.txt", bytes: Array("payload".utf8)))
            #expect(scenario.directory == directory)
        }
    }

    @Test("a file body may not leave the scenario folder")
    func fileBodyEscapes() throws {
        try withTemporaryDirectory { root in
            let directory = root + "/scenarios"
            try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: true)
            try write("secret", to: root + "/secret.txt")
            let files = FileManager.default
            try files.createSymbolicLink(atPath: directory + "/link.txt", withDestinationPath: "../secret.txt")
            try files.createSymbolicLink(atPath: directory + "/sub/up", withDestinationPath: root)

            let dotDot = loadError(withStep(#"{"file": "../secret.txt"}"#), directory: directory)
            #expect(dotDot.map { [$0.jsonPath, $0.message] }
                == ["routes[0].responses[0].file", #""../secret.txt" is outside the scenario folder"#])
            #expect(loadError(withStep(#"{"file": "sub/../../x"}"#), directory: directory)?.message
                == #""sub/../../x" is outside the scenario folder"#)

            for linked in ["link.txt", "sub/up/secret.txt"] {
                let error = loadError(withStep(#"{"file": "\#(linked)"}"#), directory: directory)
                #expect(error?.jsonPath == "routes[0].responses[0].file")
                let prefix = "\"\(linked)\" is outside the scenario folder (it resolves to "
                #expect(error?.message.hasPrefix(prefix) == true)
                #expect(error?.message.hasSuffix("/secret.txt\")") == true)
            }

            #expect(loadError(withStep(#"{"file": "/etc/hostname"}"#), directory: directory)?.message
                == #""/etc/hostname" must be a path relative to the scenario folder"#)
        }
    }

    @Test("a missing or unreadable file body is an error naming it")
    func fileBodyMissing() throws {
        try withTemporaryDirectory { directory in
            let missing = loadError(withStep(#"{"file": "nope.bin"}"#), directory: directory)
            #expect(missing.map { [$0.jsonPath, $0.message] } == [
                "routes[0].responses[0].file",
                #"cannot read "nope.bin" in the scenario folder: No such file or directory"#,
            ])

            try FileManager.default.createDirectory(atPath: directory + "/folder", withIntermediateDirectories: true)
            #expect(loadError(withStep(#"{"file": "folder"}"#), directory: directory)?.message
                == #"cannot read "folder" in the scenario folder: it is a folder, not a file"#)
        }
    }

    @Test("a file body over 10 MiB is rejected")
    func fileBodyTooLarge() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/big.bin"
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            let handle = try #require(FileHandle(forWritingAtPath: path))
            try handle.truncate(atOffset: UInt64(ScenarioLoader.maxFileBodyBytes + 1))
            try handle.close()
            let message = loadError(withStep(#"{"file": "big.bin"}"#), directory: directory)?.message
            #expect(message == #"cannot read "big.bin" in the scenario folder: "#
                + "it is 10485761 bytes; the limit is 10485760 bytes")
        }
    }

    // MARK: Loading paths

    @Test("a folder loads its *.json files sorted by name, skipping schemas, hidden files and sub-folders")
    func folderLoading() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"name": "beta", "routes": []}"#, to: directory + "/b.json")
            try write(#"{"name": "alpha", "routes": []}"#, to: directory + "/a.json")
            try write(#"{"name": "upper", "routes": []}"#, to: directory + "/B2.json")
            try write("not a scenario {", to: directory + "/faultline.schema.json")
            try write("not a scenario {", to: directory + "/.hidden.json")
            try write("not a scenario {", to: directory + "/notes.txt")
            try FileManager.default.createDirectory(
                atPath: directory + "/nested.json", withIntermediateDirectories: true)
            try write("not a scenario {", to: directory + "/nested.json/c.json")

            let scenarios = try ScenarioLoader.load(paths: [directory])
            #expect(scenarios.map(\.name) == ["upper", "alpha", "beta"])
            #expect(scenarios.map(\.sourceFile) == ["B2.json", "a.json", "b.json"].map { directory + "/" + $0 })
            #expect(scenarios.allSatisfy { $0.directory == directory })
        }
    }

    @Test("a *.schema.json named explicitly is skipped as in a folder, and said so", arguments: [false, true])
    func explicitSchemaFile(throughTheGlob: Bool) throws {
        try withTemporaryDirectory { directory in
            try write(#"{"name": "alpha", "routes": []}"#, to: directory + "/a.json")
            try write(#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "properties": {}}"#,
                      to: directory + "/faultline.schema.json")
            let paths = throughTheGlob ? [directory + "/a.json", directory + "/faultline.schema.json"] : [directory]
            var skipped: [String] = []
            let scenarios = try ScenarioLoader.load(paths: paths, skippedSchemas: &skipped)
            #expect(scenarios.map(\.name) == ["alpha"])
            #expect(skipped == (throughTheGlob ? [directory + "/faultline.schema.json"] : []))
            #expect(try ScenarioLoader.load(paths: paths).map(\.name) == ["alpha"])
            #expect(ScenarioLoader.isSchemaFile("x/faultline.schema.json") && !ScenarioLoader.isSchemaFile("schema.json"))
        }
    }

    @Test("a single file's folder is its directory, and paths load in the order given")
    func fileLoading() throws {
        try withTemporaryDirectory { directory in
            try FileManager.default.createDirectory(atPath: directory + "/more", withIntermediateDirectories: true)
            try write(#"{"name": "one", "routes": []}"#, to: directory + "/one.json")
            try write(#"{"name": "two", "routes": []}"#, to: directory + "/more/two.json")
            let scenarios = try ScenarioLoader.load(paths: [directory + "/more", directory + "/one.json"])
            #expect(scenarios.map(\.name) == ["two", "one"])
            #expect(scenarios.map(\.directory) == [directory + "/more", directory])
            #expect(scenarios[1].sourceFile == directory + "/one.json")
        }
    }

    @Test("errors from every file and path are collected together")
    func pathErrors() throws {
        try withTemporaryDirectory { directory in
            try FileManager.default.createDirectory(atPath: directory + "/empty", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: directory + "/set", withIntermediateDirectories: true)
            try write(#"{"name": "ok", "routes": []}"#, to: directory + "/set/a.json")
            try write(#"{"name": "bad", "routes": [], "seeds": 1}"#, to: directory + "/set/b.json")
            try write("{\"name\": ", to: directory + "/set/c.json")
            do throws(ScenarioLoadError) {
                _ = try ScenarioLoader.load(
                    paths: [directory + "/set", directory + "/empty", directory + "/missing.json"])
                Issue.record("expected errors")
            } catch {
                #expect(error.errors == [
                    ScenarioError(file: directory + "/set/b.json", jsonPath: "",
                                  message: #"unknown key "seeds"; did you mean "seed"?"#),
                    ScenarioError(file: directory + "/set/c.json", jsonPath: "",
                                  message: "line 1, column 10: unexpected end of input; expected a value"),
                    ScenarioError(
                        file: directory + "/empty", jsonPath: "", message: "no scenario files (*.json) in this folder"),
                    ScenarioError(file: directory + "/missing.json", jsonPath: "",
                                  message: "cannot read: No such file or directory"),
                ])
            }
        }
    }

    @Test("relative file paths: folder of a bare name is the current folder")
    func parentDirectory() {
        #expect(ScenarioLoader.parentDirectory(of: "orders.json") == ".")
        #expect(ScenarioLoader.parentDirectory(of: "scenarios/orders.json") == "scenarios")
        #expect(ScenarioLoader.parentDirectory(of: "/orders.json") == "/")
        #expect(ScenarioLoader.parentDirectory(of: "/a/b/c.json") == "/a/b")
    }
}
