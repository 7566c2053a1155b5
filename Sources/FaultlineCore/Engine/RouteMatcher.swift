#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The parts of a request that matching looks at, each computed at most once per request and only when a
/// route asks for it (most requests need the path segments and nothing else).
package final class MatchInput {
    package let request: HTTPRequest

    package init(request: HTTPRequest) {
        self.request = request
    }

    /// The path part of the target, still percent-encoded.
    package var path: String {
        if !scanned { scanPath() }
        return scannedPath
    }

    /// Whether the path has no percent-escapes, so that it reads the same decoded.
    package var pathIsPlain: Bool {
        if !scanned { scanPath() }
        return scannedPathIsPlain
    }

    // One request's, on one thread: no run-time exclusivity checks.
    @exclusivity(unchecked) private var scanned = false
    @exclusivity(unchecked) private var scannedPath = ""
    @exclusivity(unchecked) private var scannedPathIsPlain = true

    /// Finds `path` and `pathIsPlain` in one pass over the target's bytes: an origin-form target without a query
    /// (most requests) is its own path, shared, not copied. Two lazy properties scanned the target twice and
    /// sliced it (~280 instructions a request, `make hotpath`).
    private func scanPath() {
        scanned = true
        let target = request.head.target
        // The index of `?` (the target's length when there is none), or -1 when the target is not origin-form.
        var percent = false
        let question: Int? = target.utf8.withContiguousStorageIfAvailable { bytes -> Int in
            guard bytes.first == UInt8(ascii: "/") else { return -1 }
            for index in bytes.indices {
                switch bytes[index] {
                case UInt8(ascii: "?"): return index
                case UInt8(ascii: "%"): percent = true
                default: break
                }
            }
            return bytes.count
        }
        guard let question, question >= 0 else {
            // Absolute-form, `*`, or a target without contiguous bytes: the general way.
            scannedPath = request.path
            scannedPathIsPlain = !scannedPath.utf8.contains(UInt8(ascii: "%"))
            return
        }
        scannedPathIsPlain = !percent
        guard question < target.utf8.count else {
            scannedPath = target
            return
        }
        scannedPath = String(target[..<target.utf8.index(target.startIndex, offsetBy: question)])
    }

    /// Percent-decoded path segments, without the leading empty one.
    package private(set) lazy var pathSegments: [String] = {
        var segments: [String] = []
        var current = Substring(path).utf8
        if current.first == UInt8(ascii: "/") { current = current.dropFirst() }
        while true {
            guard let slash = current.firstIndex(of: UInt8(ascii: "/")) else {
                segments.append(PercentDecoding.decode(Substring(current)))
                break
            }
            segments.append(PercentDecoding.decode(Substring(current[..<slash])))
            current = current[current.index(after: slash)...]
        }
        return segments
    }()

    /// Percent-decoded query parameters in order (`+` is a space, as HTML forms send it).
    package private(set) lazy var query: [(name: String, value: String)] = PercentDecoding.queryParameters(request.query)
}

/// Why a route did not take a request, and how close it came (higher is closer).
package struct MatchMiss: Sendable, Equatable {
    package var reason: String
    package var score: Int

    /// What a miss reports when nobody asked why (`explain: false`).
    static let unexplained = MatchMiss(reason: "", score: 0)
}

/// The outcome of testing one route against one request.
package enum MatchResult {
    case matched(pathParameters: [String: String])
    case missed(MatchMiss)
}

/// Route matching (ARCHITECTURE §2): every condition of `match` must hold. Pure functions, tested without sockets.
package enum RouteMatcher {
    /// Whether `route` takes `input`. With `explain` (the default) a miss says why and scores how close it came;
    /// without, misses are `MatchMiss.unexplained` and cost no string building — the engine's first pass, which
    /// only explains when no route matched at all.
    package static func match(_ route: RouteMatch, _ input: MatchInput, explain: Bool = true) -> MatchResult {
        // Score: the path counts most, then the method, then each other condition; a miss keeps the
        // score of what did match so the 404 can name the nearest route.
        var score = 0
        var parameters: [String: String] = [:]
        if let pattern = route.path {
            if let literal = pattern.literalPath, input.pathIsPlain, !explain {
                guard input.path == literal else { return .missed(.unexplained) }
                score += 100
            } else {
                switch matchPath(pattern, input) {
                case .success(let captured):
                    parameters = captured
                    score += 100
                case .failure(let matchedSegments):
                    guard explain else { return .missed(.unexplained) }
                    return .missed(MatchMiss(
                        reason: "path \(input.path) does not match \(pattern.isPrefix ? "prefix " : "")"
                            + pattern.source,
                        score: matchedSegments * 10))
                }
            }
        }
        if !route.methods.isEmpty {
            guard route.methods.contains(input.request.method) else {
                guard explain else { return .missed(.unexplained) }
                return .missed(MatchMiss(
                    reason: "method \(input.request.method) is not \(route.methods.joined(separator: " or "))",
                    score: score))
            }
            score += 50
        }
        for (name, matcher) in route.query {
            let value = input.query.first(where: { $0.name == name })?.value
            if !satisfies(matcher, value) {
                guard explain else { return .missed(.unexplained) }
                return .missed(MatchMiss(reason: "query parameter \(name) \(miss(matcher, value))", score: score))
            }
            score += 5
        }
        for (name, matcher) in route.headers {
            let values = input.request.headers.values(name)
            let value = values.isEmpty ? nil : values.joined(separator: ", ")
            if !satisfies(matcher, value) {
                guard explain else { return .missed(.unexplained) }
                return .missed(MatchMiss(reason: "header \(name) \(miss(matcher, value))", score: score))
            }
            score += 5
        }
        if let body = route.body, let problem = check(body, input.request.body) {
            return .missed(MatchMiss(reason: "body \(problem)", score: score))
        }
        return .matched(pathParameters: parameters)
    }

    private enum PathOutcome {
        case success([String: String])
        /// How many leading segments did match, for scoring the miss.
        case failure(Int)
    }

    /// Matches the request path against `pattern`, segment by segment. A path without percent-escapes is
    /// walked in place, allocating only the captured parameters; one with escapes uses its decoded segments.
    private static func matchPath(_ pattern: PathPattern, _ input: MatchInput) -> PathOutcome {
        if input.pathIsPlain {
            var rest = Substring(input.path)
            if rest.utf8.first == UInt8(ascii: "/") { rest = rest.dropFirst() }
            return matchPath(pattern, SlashSeparated(rest: rest))
        }
        return matchPath(pattern, input.pathSegments.lazy.map { Substring($0) }.makeIterator())
    }

    /// The segments between slashes, empty ones included ("a//b/" is a, "", b, "").
    private struct SlashSeparated: IteratorProtocol {
        var rest: Substring
        var done = false

        mutating func next() -> Substring? {
            guard !done else { return nil }
            guard let slash = rest.utf8.firstIndex(of: UInt8(ascii: "/")) else {
                done = true
                return rest
            }
            defer { rest = rest[rest.utf8.index(after: slash)...] }
            return rest[..<slash]
        }
    }

    private static func matchPath(_ pattern: PathPattern, _ segments: some IteratorProtocol<Substring>) -> PathOutcome {
        var segments = segments
        var wanted = pattern.segments
        // "/v1/" as a prefix means "under /v1": its trailing empty segment is not a requirement.
        if pattern.isPrefix, case .literal("")? = wanted.last { wanted.removeLast() }
        var captured: [String: String] = [:]
        for (index, segment) in wanted.enumerated() {
            guard let actual = segments.next() else { return .failure(index) }
            switch segment {
            case .literal(let text):
                guard actual.utf8.elementsEqual(text.utf8) else { return .failure(index) }
            case .parameter(let name):
                guard !actual.isEmpty else { return .failure(index) }
                captured[name] = String(actual)
            }
        }
        if !pattern.isPrefix && segments.next() != nil { return .failure(wanted.count) }
        return .success(captured)
    }

    /// Whether `value` (nil: absent) meets `matcher`.
    static func satisfies(_ matcher: ValueMatcher, _ value: String?) -> Bool {
        switch matcher {
        case .present: return value != nil
        case .absent: return value == nil
        case .equals(let expected): return value == expected
        case .contains(let part): return value?.contains(part) ?? false
        case .regex(let regex): return value.map(regex.matches) ?? false
        }
    }

    /// What is wrong with a value that does not meet `matcher`, phrased to follow a field name. Only called after
    /// `satisfies` said no, so a regex is not run twice.
    static func miss(_ matcher: ValueMatcher, _ value: String?) -> String {
        let found = value.map { "is \"\($0)\"" } ?? "is absent"
        switch matcher {
        case .present: return "is absent, expected present"
        case .absent: return "is present (\"\(value ?? "")\"), expected absent"
        case .equals(let expected): return "\(found), expected \"\(expected)\""
        case .contains(let part): return "\(found), expected it to contain \"\(part)\""
        case .regex(let regex): return "\(found), expected it to match /\(regex.pattern)/"
        }
    }

    static func check(_ matcher: BodyMatcher, _ body: [UInt8]) -> String? {
        switch matcher {
        case .equals(let expected):
            return body.elementsEqual(expected.utf8) ? nil : "differs from the expected text"
        case .contains(let part):
            let text = String(decoding: body, as: UTF8.self)
            return text.contains(part) ? nil : "does not contain \"\(part)\""
        case .jsonSubset(let expected):
            guard let actual = try? JSONValue.parse(body) else { return "is not JSON" }
            if let problem = JSONSubset.firstDifference(expected: expected, actual: actual, path: "$") {
                return "JSON \(problem)"
            }
            return nil
        }
    }
}

/// JSON subset matching: objects match when every expected member matches; everything else must be equal.
package enum JSONSubset {
    package static func firstDifference(expected: JSONValue, actual: JSONValue, path: String) -> String? {
        switch (expected, actual) {
        case (.object(let wantedMembers), .object):
            for (key, wanted) in wantedMembers {
                guard let found = actual[key] else { return "\(path).\(key) is missing" }
                if let problem = firstDifference(expected: wanted, actual: found, path: "\(path).\(key)") {
                    return problem
                }
            }
            return nil
        case (.array(let wantedItems), .array(let items)):
            guard wantedItems.count == items.count else {
                return "\(path) has \(items.count) items, expected \(wantedItems.count)"
            }
            for (index, pair) in zip(wantedItems, items).enumerated() {
                if let problem = firstDifference(expected: pair.0, actual: pair.1, path: "\(path)[\(index)]") {
                    return problem
                }
            }
            return nil
        default:
            return expected == actual ? nil : "\(path) is \(actual.serialized()), expected \(expected.serialized())"
        }
    }
}

/// A regular expression compiled once, when the scenario is loaded, and kept in the matcher that uses it, so
/// matching never compiles and no state is shared between servers. The syntax is Swift's `Regex` (the
/// PCRE/ICU/Oniguruma family: classes, `\d`, `\b`, anchors, lookaround, `(?i)`), matched unanchored on Unicode
/// scalars, as NSRegularExpression (which it replaced, so that the server links no ICU) matched them.
/// Two are equal when their pattern text is: scenarios compare by what was written (hot reload uses `==`).
package struct CompiledRegex: @unchecked Sendable, Equatable, CustomStringConvertible {
    /// The pattern as written in the scenario.
    package let pattern: String
    /// Immutable once made and only ever read, so safe to use from any thread (the standard library's `Regex` is a
    /// value with an immutable program; `AnyRegexOutput` is what keeps it from being declared Sendable).
    private let expression: Regex<AnyRegexOutput>

    /// Compiles `pattern`; throws when it is not a valid regular expression.
    package init(_ pattern: String) throws {
        self.pattern = pattern
        expression = try Regex(pattern).matchingSemantics(.unicodeScalar)
    }

    /// Whether the expression matches somewhere in `value`.
    package func matches(_ value: String) -> Bool {
        value.contains(expression)
    }

    package var description: String { pattern }

    package static func == (lhs: CompiledRegex, rhs: CompiledRegex) -> Bool { lhs.pattern == rhs.pattern }
}

/// Percent-decoding for paths and query strings (RFC 3986 §2.1). Invalid escapes are kept as written.
package enum PercentDecoding {
    package static func decode<S: StringProtocol>(_ text: S, plusIsSpace: Bool = false) -> String {
        guard text.utf8.contains(where: { $0 == 0x25 || (plusIsSpace && $0 == 0x2B) }) else { return String(text) }
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == 0x25, i + 2 < bytes.count, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) {
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(plusIsSpace && b == 0x2B ? 0x20 : b)
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    package static func queryParameters(_ query: String) -> [(name: String, value: String)] {
        guard !query.isEmpty else { return [] }
        return query.split(separator: "&").map { pair in
            if let eq = pair.firstIndex(of: "=") {
                return (decode(pair[..<eq], plusIsSpace: true), decode(pair[pair.index(after: eq)...], plusIsSpace: true))
            }
            return (decode(pair, plusIsSpace: true), "")
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        case 0x61...0x66: return byte - 0x61 + 10
        default: return nil
        }
    }
}
