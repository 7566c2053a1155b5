@testable import FaultlineCore

/// Loading a scenario from JSON text in a test, and the problems a bad one reports.
enum ScenarioTestSupport {
    static func load(_ json: String, file: String = "test.json") throws -> Scenario {
        try ScenarioLoader.load(bytes: Array(json.utf8), file: file, directory: nil)
    }

    /// "JSON.path: message" for each problem; empty when the scenario loads.
    static func errors(_ json: String, file: String = "test.json") -> [String] {
        do {
            _ = try load(json, file: file)
            return []
        } catch let error as ScenarioLoadError {
            return error.errors.map { "\($0.jsonPath): \($0.message)" }
        } catch {
            return ["\(error)"]
        }
    }
}
