import FaultlineCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `faultline record`'s target: the folder the scenario is written into and how it is written.
package struct RecordingConfiguration: Sendable {
    package var directory: String
    package var options = RecordingWriter.Options()
    /// Told where the recording went (or why it could not be written), on the loop thread.
    package var onWritten: (@Sendable (Result<RecordingSummary, RecordingFailure>) -> Void)?

    package init(directory: String) {
        self.directory = directory
    }
}

/// What a written recording holds.
package struct RecordingSummary: Sendable, Equatable {
    package var file: String
    package var routes: Int
    package var exchanges: Int
    /// Exchanges seen past the recording's memory bound and left out.
    package var dropped: Int

    package func json() -> JSONValue {
        .object([("file", .string(file)), ("routes", .int(routes)), ("exchanges", .int(exchanges)), ("dropped", .int(dropped))])
    }
}

package struct RecordingFailure: Error, Sendable, Equatable, CustomStringConvertible {
    package var description: String
}

/// Writes a recording: `DIR/NAME.json` (indented) and its large bodies under `DIR/bodies/`, each file through a
/// temporary name and `rename`, so a reader never sees half a scenario.
enum RecordingFile {
    static func write(
        _ recording: ProxyRecording, _ configuration: RecordingConfiguration
    ) -> Result<RecordingSummary, RecordingFailure> {
        let output = RecordingWriter.write(recording.exchanges, options: configuration.options)
        let folder = URL(fileURLWithPath: configuration.directory, isDirectory: true)
        let file = folder.appendingPathComponent(configuration.options.name + ".json")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for body in output.files {
                let target = folder.appendingPathComponent(body.path)
                try FileManager.default.createDirectory(
                    at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(body.bytes).write(to: target, options: .atomic)
            }
            try Data((output.scenario.prettySerialized() + "\n").utf8).write(to: file, options: .atomic)
        } catch {
            return .failure(RecordingFailure(description: "cannot write the recording into \(configuration.directory): \(errorText(error))"))
        }
        return .success(RecordingSummary(
            file: file.path, routes: output.routes, exchanges: recording.exchanges.count, dropped: recording.dropped))
    }
}
