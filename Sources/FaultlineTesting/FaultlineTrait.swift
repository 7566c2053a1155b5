import Faultline
import Testing

/// A Swift Testing trait that gives a test (or each test of a suite) its own Faultline server, started before
/// the test and stopped — and awaited — after it, whatever the test does:
///
///     @Test(.faultline("scenarios/orders.json"))
///     func retriesThrough503() async throws {
///         let server = try #require(FaultlineServer.current)
///         …
///     }
///
/// Scenario paths are resolved against the folder of the source file that declares the test (`#filePath`), not
/// the working directory, which under Xcode is not the package root. The server is reachable as
/// `FaultlineServer.current` (a task-local value) from the test and everything it calls.
public struct FaultlineTrait: TestTrait, SuiteTrait, TestScoping {
    public let scenarioFiles: [String]
    public let sourceFile: String

    /// On a suite, every test gets a server of its own.
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // A suite's own scope runs no test body: servers are started for the test cases only.
        guard testCase != nil else {
            try await function()
            return
        }
        try await FaultlineServer.with(scenarioFiles: scenarioFiles, relativeTo: sourceFile) { server in
            try await FaultlineServer.$current.withValue(server) { try await function() }
        }
    }
}

extension Trait where Self == FaultlineTrait {
    /// A Faultline server for the test, serving these scenario files or folders (relative to this source file).
    public static func faultline(_ scenarioFiles: String..., sourceFile: String = #filePath) -> Self {
        FaultlineTrait(scenarioFiles: scenarioFiles, sourceFile: sourceFile)
    }
}
