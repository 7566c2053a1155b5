#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns scenario files (ARCHITECTURE §2) into validated `Scenario` values, reporting every problem in every file at
/// once, each with its file, JSON path and an actionable message.
public enum ScenarioLoader {
    /// The largest scenario file read (bodies referenced with `file` have their own limit).
    package static let maxScenarioFileBytes = 16 * 1024 * 1024

    /// Loads each path: a file is one scenario; a folder contributes every `*.json` file directly inside it
    /// (not recursive, sorted by name, skipping `*.schema.json` and hidden files); only regular files are read.
    /// A file named `*.schema.json` is skipped when named explicitly too (`isSchemaFile`), so `scenarios/` and
    /// the shell's `scenarios/*.json` load the same. Problems are collected across all files and thrown together.
    public static func load(paths: [String]) throws(ScenarioLoadError) -> [Scenario] {
        var skipped: [String] = []
        return try load(paths: paths, skippedSchemas: &skipped)
    }

    /// `load(paths:)`, also giving the paths named explicitly that were skipped as JSON Schema documents
    /// (`validate` says so).
    package static func load(paths: [String], skippedSchemas: inout [String]) throws(ScenarioLoadError) -> [Scenario] {
        var scenarios: [Scenario] = []
        var errors: [ScenarioError] = []

        func loadFile(_ file: String, directory: String) {
            switch readFile(atPath: file, limit: maxScenarioFileBytes) {
            case .failure(let failure):
                errors.append(ScenarioError(file: file, jsonPath: "", message: "cannot read: \(failure)"))
            case .success(let bytes):
                do throws(ScenarioLoadError) {
                    scenarios.append(try load(bytes: bytes, file: file, directory: directory))
                } catch {
                    errors.append(contentsOf: error.errors)
                }
            }
        }

        for path in paths {
            switch fileKind(atPath: path) {
            case .failure(let failure):
                errors.append(ScenarioError(file: path, jsonPath: "", message: "cannot read: \(failure)"))
            case .success(.directory):
                switch scenarioFiles(inDirectory: path) {
                case .failure(let failure):
                    errors.append(ScenarioError(file: path, jsonPath: "", message: "cannot list folder: \(failure)"))
                case .success(let names) where names.isEmpty:
                    let message = "no scenario files (*.json) in this folder"
                    errors.append(ScenarioError(file: path, jsonPath: "", message: message))
                case .success(let names):
                    for name in names {
                        loadFile(joinPath(path, name), directory: path)
                    }
                }
            case .success(.other) where isSchemaFile(path):
                skippedSchemas.append(path)
            case .success(.other):
                loadFile(path, directory: parentDirectory(of: path))
            }
        }
        // Versions, verdicts and the admin API name scenarios: two files with one name would be ambiguous.
        var firstFileByName: [String: String] = [:]
        for scenario in scenarios {
            if let first = firstFileByName[scenario.name] {
                errors.append(ScenarioError(
                    file: scenario.sourceFile, jsonPath: "name",
                    message: "duplicate scenario name \(quoted(scenario.name)); \(first) has it too"))
            } else {
                firstFileByName[scenario.name] = scenario.sourceFile
            }
        }
        // The network is one: two timelines would fight over it.
        let timed = scenarios.filter { !$0.timeline.isEmpty }
        if timed.count > 1 {
            errors.append(ScenarioError(
                file: timed[1].sourceFile, jsonPath: "timeline",
                message: "a second timeline: \(timed[0].sourceFile) has one already, and the network is one (put the phases in one scenario)"))
        }
        if !errors.isEmpty {
            throw ScenarioLoadError(errors: errors)
        }
        return scenarios
    }

    /// Parses and validates one scenario document. `file` labels errors and becomes `Scenario.sourceFile`;
    /// `directory` is the folder that `file` bodies are read from and confined to (nil: `file` bodies are errors).
    public static func load(bytes: [UInt8], file: String, directory: String?) throws(ScenarioLoadError) -> Scenario {
        let document: JSONValue
        do throws(JSONSyntaxError) {
            document = try JSONValue.parse(bytes)
        } catch {
            throw ScenarioLoadError(errors: [ScenarioError(file: file, jsonPath: "", message: error.description)])
        }
        var reader = Reader(file: file, directory: directory)
        let scenario = reader.scenario(from: document)
        guard reader.errors.isEmpty, let scenario else {
            throw ScenarioLoadError(errors: reader.errors)
        }
        return scenario
    }
}

// MARK: - File system

extension ScenarioLoader {
    /// Why a file or folder could not be used, as the OS put it.
    package struct FileAccessFailure: Error, CustomStringConvertible {
        package var description: String

        init(_ description: String) {
            self.description = description
        }

        /// The message for the current `errno`.
        static func fromErrno() -> FileAccessFailure {
            FileAccessFailure(String(cString: strerror(errno)))
        }
    }

    enum FileKind {
        case directory
        case other
    }

    static func fileKind(atPath path: String) -> Result<FileKind, FileAccessFailure> {
        var info = stat()
        guard stat(path, &info) == 0 else { return .failure(.fromErrno()) }
        return .success(info.st_mode & S_IFMT == S_IFDIR ? .directory : .other)
    }

    /// Whether the file at `path` is a JSON Schema shipped next to the scenarios rather than a scenario, decided
    /// by its name alone: `*.schema.json`, the rule a folder's listing uses (`scenarioFiles`). By name rather than
    /// by content so that the rule is one and predictable — `scenarios/` and `scenarios/*.json` always load the
    /// same files — and so that a broken scenario can never be mistaken for a schema and silently skipped; a
    /// scenario file's name must not end in `.schema.json`.
    package static func isSchemaFile(_ path: String) -> Bool {
        let name = path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
        return name.hasSuffix(".schema.json")
    }

    /// Names of the regular `*.json` files directly in `directory`, sorted, without `*.schema.json` (the JSON
    /// Schema that ships next to scenarios) and without hidden files (editor lock files and the like), just as a
    /// shell's `*.json` would leave them out.
    static func scenarioFiles(inDirectory directory: String) -> Result<[String], FileAccessFailure> {
        guard let stream = opendir(directory) else { return .failure(.fromErrno()) }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) {
                    String(cString: $0)
                }
            }
            guard name.hasSuffix(".json"), !isSchemaFile(name), !name.hasPrefix(".") else { continue }
            var info = stat()
            guard stat(joinPath(directory, name), &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            names.append(name)
        }
        // Byte order, so the load order does not depend on the locale.
        names.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return .success(names)
    }

    /// Reads a regular file whole. With a `limit`, larger files fail without being read.
    package static func readFile(atPath path: String, limit: Int?) -> Result<[UInt8], FileAccessFailure> {
        // O_NONBLOCK: opening a FIFO must not wait for a writer (the server reads scenario files on its loop).
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return .failure(.fromErrno()) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return .failure(.fromErrno()) }
        if info.st_mode & S_IFMT == S_IFDIR {
            return .failure(FileAccessFailure("it is a folder, not a file"))
        }
        // A FIFO, socket or device (/dev/zero) could block the loop or never end: regular files only.
        if info.st_mode & S_IFMT != S_IFREG {
            return .failure(FileAccessFailure("it is not a regular file"))
        }
        let size = Int(info.st_size)
        if let limit, size > limit {
            return .failure(FileAccessFailure("it is \(size) bytes; the limit is \(limit) bytes"))
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(.fromErrno())
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            // The file may have grown since fstat.
            if let limit, bytes.count > limit {
                return .failure(FileAccessFailure("it is more than \(limit) bytes"))
            }
        }
        return .success(bytes)
    }

    /// The canonical absolute form of `path` (symlinks, `.` and `..` resolved), as `realpath(3)` gives it.
    static func canonicalPath(_ path: String) -> Result<String, FileAccessFailure> {
        guard let resolved = realpath(path, nil) else { return .failure(.fromErrno()) }
        defer { free(resolved) }
        return .success(String(cString: resolved))
    }

    static func joinPath(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// The folder part of `path`: `"."` for a bare file name, `"/"` for a file at the root.
    static func parentDirectory(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") {
            trimmed = trimmed.dropLast()
        }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }
}
