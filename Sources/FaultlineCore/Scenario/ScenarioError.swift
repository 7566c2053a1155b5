/// One problem in a scenario: the file, where in its JSON document, and what is wrong in words a user can act on.
public struct ScenarioError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path as given, or a label such as `<admin upload>`.
    public var file: String
    /// Where in the document, such as `routes[2].responses[0].status`; empty for the document as a whole and for
    /// JSON syntax errors (whose message carries the line and column instead).
    public var jsonPath: String
    /// What is wrong, such as `1000 is not an HTTP status (100–599)`.
    public var message: String

    /// Creates an error for `file` at `jsonPath`.
    public init(file: String, jsonPath: String, message: String) {
        self.file = file
        self.jsonPath = jsonPath
        self.message = message
    }

    /// `scenarios/orders.json: routes[2].responses[0].status: 1000 is not an HTTP status (100–599)`; the JSON path
    /// is left out when it is empty.
    public var description: String {
        jsonPath.isEmpty ? "\(file): \(message)" : "\(file): \(jsonPath): \(message)"
    }
}

/// Every problem found while loading one or more scenario files, in the order found.
public struct ScenarioLoadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Every problem, not just the first, so a user can fix them all in one pass.
    public var errors: [ScenarioError]

    /// Wraps the problems found.
    package init(errors: [ScenarioError]) {
        self.errors = errors
    }

    /// One problem per line.
    public var description: String {
        errors.map(\.description).joined(separator: "\n")
    }
}
