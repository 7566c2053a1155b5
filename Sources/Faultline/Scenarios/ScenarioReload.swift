import FaultlineCore

/// What a reload of the scenario files did. Reloads are all or nothing: when any file fails to load, `errors`
/// says why (file, JSON path, message) and every scenario that was serving keeps serving, unchanged.
public struct ScenarioReload: Sendable, Equatable, CustomStringConvertible {
    /// What asked for the reload.
    public enum Trigger: String, Sendable {
        /// `serve --watch` saw a scenario file change.
        case watch
        /// SIGHUP.
        case signal = "SIGHUP"
        /// `POST /__faultline/scenarios/reload`.
        case admin
        /// `FaultlineServer.reloadScenarioFiles()`.
        case api
    }

    /// A loaded scenario and its version (`Engine.versions`).
    public struct Version: Sendable, Equatable {
        public var name: String
        public var version: Int
        public var source: String

        public init(name: String, version: Int, source: String) {
            self.name = name
            self.version = version
            self.source = source
        }
    }

    public var trigger: Trigger
    /// Why the files were not loaded; empty when they were.
    public var errors: [ScenarioError] = []
    /// Scenarios that are new or whose content changed, with their new versions.
    public var changed: [Version] = []
    /// Names of scenarios that were serving and are gone from the files.
    public var removed: [String] = []
    /// Everything serving after the reload.
    public var serving: [Version] = []

    /// Whether the new files were loaded (then every script starts from the beginning).
    public var applied: Bool { errors.isEmpty && !(changed.isEmpty && removed.isEmpty) }

    /// One line for a success or no change; the error list (one problem per line) for a failure.
    public var description: String {
        if !errors.isEmpty {
            return "reload (\(trigger.rawValue)) rejected; the previous scenarios keep serving:\n"
                + errors.map { "  \($0)" }.joined(separator: "\n")
        }
        guard applied else { return "reload (\(trigger.rawValue)): no changes" }
        var parts = changed.map { "\($0.name) v\($0.version) (\($0.source))" }
        if !removed.isEmpty { parts.append("removed \(removed.joined(separator: ", "))") }
        return "reloaded (\(trigger.rawValue)): " + parts.joined(separator: "; ")
    }
}
