/// The values a response template may refer to (ARCHITECTURE §2): `{{path.x}}`, `{{query.x}}`, `{{header.X}}`,
/// `{{request.id}}`, `{{resource.id}}`, `{{token}}`, `{{now.httpDate}}`.
package struct TemplateContext {
    package var pathParameters: [String: String]
    /// Read only when a template asks for `{{query.…}}`, so the query string is parsed lazily.
    private let input: MatchInput
    package var query: [(name: String, value: String)] { input.query }
    package var headers: HTTPHeaders { input.request.headers }
    package var requestID: Int
    /// The current access token when a scenario declares auth, for `{{token}}`.
    package var token: String?
    /// Drawn lazily: a step that never mentions `{{resource.id}}` does not consume an id.
    package var resourceID: () -> Int
    /// The engine's clock when it decided the request (Unix seconds), for `{{now.httpDate}}`.
    package var wallSeconds: Double
    /// Where `{{now.httpDate}}` is formatted: the engine's cache, the one the codecs date heads from.
    package let dates: HTTPDateCache

    package init(
        pathParameters: [String: String], input: MatchInput, requestID: Int, wallSeconds: Double,
        dates: HTTPDateCache, resourceID: @escaping () -> Int
    ) {
        self.pathParameters = pathParameters
        self.input = input
        self.requestID = requestID
        self.wallSeconds = wallSeconds
        self.dates = dates
        self.resourceID = resourceID
    }
}

/// Expands `{{…}}` placeholders. An unknown placeholder is left as written so the mistake is visible in the
/// response; a known one whose value is missing (an absent header) becomes the empty string.
package enum Template {
    /// Whether `text` contains a placeholder at all; steps without any are pre-rendered once at load time.
    package static func hasPlaceholders(_ text: String) -> Bool {
        text.utf8.firstRange(of: "{{".utf8) != nil
    }

    package static func render(_ text: String, _ context: TemplateContext, resourceID: inout Int?) -> String {
        guard hasPlaceholders(text) else { return text }
        var out = ""
        var rest = Substring(text)
        while let open = rest.firstRange(of: "{{") {
            out += rest[..<open.lowerBound]
            guard let close = rest[open.upperBound...].firstRange(of: "}}") else {
                rest = rest[open.lowerBound...]
                break
            }
            let name = rest[open.upperBound..<close.lowerBound].trimmingWhitespace()
            out += value(of: name, context, resourceID: &resourceID) ?? "{{\(name)}}"
            rest = rest[close.upperBound...]
        }
        out += rest
        return out
    }

    private static func value(of name: String, _ context: TemplateContext, resourceID: inout Int?) -> String? {
        if name == "request.id" { return String(context.requestID) }
        if name == "token" { return context.token ?? "" }
        // The decision's time, before the step's delay; `Date` is the time the head is written.
        if name == "now.httpDate" { return context.dates.value(atWall: context.wallSeconds) }
        if name == "resource.id" {
            let id = resourceID ?? context.resourceID()
            resourceID = id
            return String(id)
        }
        if name.hasPrefix("path.") { return context.pathParameters[String(name.dropFirst(5))] ?? "" }
        if name.hasPrefix("query.") {
            let key = name.dropFirst(6)
            return context.query.first(where: { $0.name == key })?.value ?? ""
        }
        if name.hasPrefix("header.") { return context.headers[String(name.dropFirst(7))] ?? "" }
        return nil
    }

    /// Renders every string inside a JSON value (keys stay as written).
    package static func render(_ value: JSONValue, _ context: TemplateContext, resourceID: inout Int?) -> JSONValue {
        switch value {
        case .string(let s): return .string(render(s, context, resourceID: &resourceID))
        case .array(let items): return .array(items.map { render($0, context, resourceID: &resourceID) })
        case .object(let members):
            return .object(members.map { ($0.key, render($0.value, context, resourceID: &resourceID)) })
        default: return value
        }
    }

    /// Whether any string in the JSON value holds a placeholder.
    package static func hasPlaceholders(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let s): return hasPlaceholders(s)
        case .array(let items): return items.contains(where: hasPlaceholders)
        case .object(let members): return members.contains(where: { hasPlaceholders($0.value) })
        default: return false
        }
    }
}
