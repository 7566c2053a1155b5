/// Turns what `faultline record` saw into a scenario in Faultline's own format (ARCHITECTURE §4d). Pure: the
/// command writes `Output.files` where it is told.
///
/// - One route per distinct request: method, path and query. Paths of one shape whose differing segments look
///   like ids (`/orders/17`, `/orders/42`) become one route with `{param}`s (`/orders/{id}`); an id-like segment
///   seen with one value only stays literal.
/// - Its steps are the responses in the order they came; consecutive identical ones are one step with `times`.
/// - Bodies inline: JSON as `json` when it reads back to the same bytes, UTF-8 text as `text`, anything else (or
///   text with `{{`, which the server would take for a template) as `base64`; larger than `inlineLimit` as a
///   file beside the scenario.
/// - `Authorization`, `Cookie`, `Set-Cookie`, `Proxy-Authorization` and the configured fields are redacted (their
///   value becomes `REDACTED`), as are the configured JSON fields at any depth. The requests' own fields are
///   never written (routes match on method, path and query).
package enum RecordingWriter {
    package struct Options: Sendable {
        package var name = "recording"
        /// Where the recording came from, for the scenario's description.
        package var upstream = ""
        /// The upstream's latency as each step's `delayMs`.
        package var delays = false
        /// Header names redacted besides the four always redacted (case-insensitive).
        package var redactHeaders: [String] = []
        /// JSON member names whose values are redacted, at any depth.
        package var redactFields: [String] = []
        /// Bodies larger than this go to a file of their own.
        package var inlineLimit = 64 * 1024

        package init() {}
    }

    package struct Output: Sendable {
        /// The scenario document, ready to serialize.
        package var scenario: JSONValue
        /// Body files, by path relative to the scenario's folder.
        package var files: [(path: String, bytes: [UInt8])]
        package var routes: Int
    }

    package static let redacted = "REDACTED"
    package static let alwaysRedacted = ["authorization", "cookie", "set-cookie", "proxy-authorization"]

    /// A request's place in the recording: its method, path segments and query.
    private struct Shape: Hashable {
        var method: String
        /// Literal segments, nil where an id goes.
        var segments: [String?]
        var query: String
    }

    package static func write(_ exchanges: [RecordedExchange], options: Options) -> Output {
        // Group by shape (ids blanked), then split each group into its distinct paths unless several share it.
        var order: [Shape] = []
        var groups: [Shape: [(index: Int, segments: [String])]] = [:]
        for (index, exchange) in exchanges.enumerated() {
            let (path, query) = split(exchange.target)
            let segments = pathSegments(path)
            let shape = Shape(method: exchange.method, segments: segments.map { looksLikeID($0) ? nil : $0 }, query: query)
            if groups[shape] == nil { order.append(shape) }
            groups[shape, default: []].append((index, segments))
        }
        struct Planned {
            var pattern: String
            var parameters: Int
            var query: String
            var method: String
            var members: [Int]
        }
        var planned: [Planned] = []
        for shape in order {
            let members = groups[shape]!
            let distinct = Set(members.map(\.segments))
            if distinct.count > 1 {
                // A repeated pattern: the positions whose values differ are parameters.
                let first = members[0].segments
                var names: [String] = []
                var parts: [String] = []
                for (position, literal) in shape.segments.enumerated() {
                    let values = Set(members.map { $0.segments[position] })
                    if literal == nil && values.count > 1 {
                        names.append(parameterName(shape.segments, position, taken: names))
                        parts.append("{\(names.last!)}")
                    } else {
                        parts.append(first[position])
                    }
                }
                planned.append(Planned(
                    pattern: "/" + parts.joined(separator: "/"), parameters: names.count, query: shape.query,
                    method: shape.method, members: members.map(\.index)))
            } else {
                planned.append(Planned(
                    pattern: "/" + members[0].segments.joined(separator: "/"), parameters: 0, query: shape.query,
                    method: shape.method, members: members.map(\.index)))
            }
        }
        // First match wins: literal paths before patterns, more query conditions before fewer.
        let sorted = planned.enumerated().sorted { a, b in
            let ka = (a.element.parameters, -queryParameters(a.element.query).count, a.offset)
            let kb = (b.element.parameters, -queryParameters(b.element.query).count, b.offset)
            return ka < kb
        }.map(\.element)

        var files: [(path: String, bytes: [UInt8])] = []
        var usedIDs: Set<String> = []
        var routes: [JSONValue] = []
        for route in sorted {
            var id = routeID(route.method, route.pattern)
            var suffix = 2
            while usedIDs.contains(id) {
                id = routeID(route.method, route.pattern) + "-\(suffix)"
                suffix += 1
            }
            usedIDs.insert(id)
            var match: [(String, JSONValue)] = [("method", .string(route.method)), ("path", .string(route.pattern))]
            let query = queryParameters(route.query)
            if !query.isEmpty {
                match.append(("query", .object(query.map { ($0.name, JSONValue.string($0.value)) })))
            }
            var steps: [(step: [(String, JSONValue)], key: JSONValue, count: Int)] = []
            for index in route.members {
                let step = responseStep(exchanges[index], options: options, routeID: id, stepIndex: steps.count,
                                        files: &files)
                let key = JSONValue.object(step)
                if let last = steps.last, last.key == key {
                    steps[steps.count - 1].count += 1
                } else {
                    steps.append((step, key, 1))
                }
            }
            let responses: [JSONValue] = steps.map { entry in
                .object(entry.count > 1 ? entry.step + [("times", .int(entry.count))] : entry.step)
            }
            routes.append(.object([("id", .string(id)), ("match", .object(match)), ("responses", .array(responses))]))
        }
        var document: [(String, JSONValue)] = [("name", .string(options.name))]
        let count = exchanges.count
        document.append(("description", .string(
            "recorded by faultline record" + (options.upstream.isEmpty ? "" : " from \(options.upstream)")
                + ": \(count) exchange\(count == 1 ? "" : "s")")))
        document.append(("routes", .array(routes)))
        return Output(scenario: .object(document), files: files, routes: routes.count)
    }

    // MARK: - Steps

    private static func responseStep(
        _ exchange: RecordedExchange, options: Options, routeID: String, stepIndex: Int,
        files: inout [(path: String, bytes: [UInt8])]
    ) -> [(String, JSONValue)] {
        var step: [(String, JSONValue)] = [("status", .int(exchange.status))]
        let secret = Set(alwaysRedacted + options.redactHeaders.map { $0.lowercased() })
        var headers: [(String, JSONValue)] = []
        var contentType = ""
        for field in exchange.responseHeaders {
            let lower = field.name.lowercased()
            // The server frames the body itself, and dates each reply when it sends it (RFC 9110 §6.6.1): a recorded
            // Date would be sent frozen at the time of the recording.
            if lower == "content-length" || lower == "transfer-encoding" || lower == "date" { continue }
            if lower == "content-type" { contentType = field.value.lowercased() }
            headers.append((field.name, .string(secret.contains(lower) ? redacted : field.value)))
        }
        // A JSON object cannot hold one name twice: repeated fields (Set-Cookie) are joined, as a list.
        var merged: [(String, JSONValue)] = []
        for (name, value) in headers {
            if let at = merged.firstIndex(where: { $0.0.lowercased() == name.lowercased() }),
               case .string(let before) = merged[at].1, case .string(let now) = value {
                merged[at].1 = .string(before + ", " + now)
            } else {
                merged.append((name, value))
            }
        }
        if !merged.isEmpty { step.append(("headers", .object(merged))) }
        if let body = body(exchange.responseBody, contentType: contentType, options: options) {
            if exchange.responseBody.count > options.inlineLimit {
                // The file holds the bytes the step would have held (a redacted JSON body as redacted).
                var bytes = exchange.responseBody
                if body.key == "json" {
                    bytes = []
                    body.value.serialize(into: &bytes)
                }
                let path = "bodies/\(routeID)-\(stepIndex + 1).bin"
                files.append((path, bytes))
                step.append(("file", .string(path)))
            } else {
                step.append(body)
            }
        }
        if options.delays {
            step.append(("delayMs", .int(Int(exchange.milliseconds.rounded()))))
        }
        return step
    }

    /// The body as the step writes it: `json`, `text` or `base64`; nil when empty.
    private static func body(_ bytes: [UInt8], contentType: String, options: Options) -> (key: String, value: JSONValue)? {
        guard !bytes.isEmpty else { return nil }
        if contentType.contains("json"), let value = try? JSONValue.parse(bytes) {
            if !options.redactFields.isEmpty {
                let redactedValue = redact(value, fields: Set(options.redactFields))
                if redactedValue != value { return ("json", redactedValue) }
            }
            var again: [UInt8] = []
            value.serialize(into: &again)
            if again == bytes, !Template.hasPlaceholders(value) { return ("json", value) }
        }
        if let text = String(validating: bytes, as: UTF8.self), !text.contains("{{"), !text.contains("\0") {
            return ("text", .string(text))
        }
        return ("base64", .string(Base64.encode(bytes)))
    }

    /// `value` with every member named in `fields` (at any depth) replaced by `"REDACTED"`.
    package static func redact(_ value: JSONValue, fields: Set<String>) -> JSONValue {
        switch value {
        case .object(let members):
            return .object(members.map { member in
                (member.key, fields.contains(member.key) ? .string(redacted) : redact(member.value, fields: fields))
            })
        case .array(let items):
            return .array(items.map { redact($0, fields: fields) })
        default:
            return value
        }
    }

    // MARK: - Paths

    private static func split(_ target: String) -> (path: String, query: String) {
        guard let mark = target.firstIndex(of: "?") else { return (target, "") }
        return (String(target[..<mark]), String(target[target.index(after: mark)...]))
    }

    private static func pathSegments(_ path: String) -> [String] {
        var trimmed = Substring(path)
        if trimmed.hasPrefix("/") { trimmed = trimmed.dropFirst() }
        return trimmed.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    }

    private static func queryParameters(_ query: String) -> [(name: String, value: String)] {
        query.isEmpty ? [] : PercentDecoding.queryParameters(query)
    }

    /// Whether a path segment looks like an identifier rather than a name: digits, a UUID, a hex string of 8 or
    /// more, or a mix of letters and digits with at least 6 digits... in short, what APIs put in paths as ids.
    package static func looksLikeID(_ segment: String) -> Bool {
        guard !segment.isEmpty else { return false }
        let bytes = Array(segment.utf8)
        let digits = bytes.filter { (0x30...0x39).contains($0) }.count
        if digits == bytes.count { return true }
        let isHex = bytes.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) }
        if isHex && bytes.count >= 8 && digits > 0 { return true }
        // A UUID: 8-4-4-4-12 hex digits.
        let groups = segment.split(separator: "-", omittingEmptySubsequences: false)
        if groups.map(\.count) == [8, 4, 4, 4, 12], groups.allSatisfy({ $0.allSatisfy(\.isHexDigit) }) { return true }
        let alphanumeric = bytes.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x5F || $0 == 0x2D }
        return alphanumeric && digits >= 3 && bytes.count >= 6
    }

    /// `id` for the last parameter; `<previous segment>Id` for the others (`/users/{userId}/orders/{id}`).
    private static func parameterName(_ segments: [String?], _ position: Int, taken: [String]) -> String {
        let isLast = !segments[(position + 1)...].contains { $0 == nil }
        var name = "id"
        if !isLast, position > 0, let previous = segments[position - 1] {
            var word = String(previous.unicodeScalars.filter { $0.properties.isAlphabetic && $0.isASCII })
            if word.hasSuffix("s") && word.count > 1 { word.removeLast() }
            if let first = word.first { name = first.lowercased() + word.dropFirst() + "Id" }
        }
        var unique = name
        var number = 2
        while taken.contains(unique) {
            unique = name + String(number)
            number += 1
        }
        return unique
    }

    /// `get-orders-id`: the method and the path's words, lower-cased.
    private static func routeID(_ method: String, _ pattern: String) -> String {
        let words = pattern.split(whereSeparator: { !$0.isLetter && !$0.isNumber }).map { $0.lowercased() }
        return ([method.lowercased()] + (words.isEmpty ? ["root"] : words)).joined(separator: "-")
    }
}
