import Faultline
import FaultlineCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The logic of `faultline init`, apart from the process: the executable prints the outcome and exits with its code.
/// Exit codes: 0 written, 1 a file exists with other contents (without `--force`) or cannot be written. Nothing is
/// written unless every file can be: the existing ones are named first, all of them; one that already holds what
/// init would write is kept. The texts are `InitTemplates`, the schema is the
/// repository's `scenarios/faultline.schema.json` compiled into the binary.
package enum InitCommand {
    struct File {
        /// Inside the target folder: `scenarios/example.json`.
        var name: String
        var bytes: [UInt8]
        var mode: mode_t = 0o644
    }

    static let pytestFile = "test_faultline_example.py"
    static let shellFile = "faultline-example.sh"
    static let swiftFile = "FaultlineExampleTests.swift"

    /// What `options` asks for, in the order they are written.
    static func files(_ options: InitOptions) -> [File] {
        var files = [
            File(name: "scenarios/faultline.schema.json", bytes: PackageResources.faultline_schema_json),
            File(name: "scenarios/example.json", bytes: Array(InitTemplates.exampleScenario.utf8)),
        ]
        if options.pytest { files.append(File(name: pytestFile, bytes: Array(InitTemplates.pytest.utf8))) }
        if options.shell { files.append(File(name: shellFile, bytes: Array(InitTemplates.shell.utf8), mode: 0o755)) }
        if options.swift { files.append(File(name: swiftFile, bytes: Array(InitTemplates.swift.utf8))) }
        return files
    }

    /// `name` inside `directory` as the user would type it: `scenarios` for `.`, `demo/scenarios` for `demo/`.
    static func path(_ name: String, in directory: String) -> String {
        var folder = directory
        while folder.count > 1, folder.hasSuffix("/") { folder.removeLast() }
        if folder == "." || folder.isEmpty { return name }
        return folder == "/" ? "/" + name : folder + "/" + name
    }

    package static func run(_ options: InitOptions) -> CommandOutcome {
        let directory = options.directory
        // A file that already holds what init would write is kept as it is, so `init --shell` after `init` adds
        // the sample without --force; one that differs (an edited example.json) is never overwritten silently.
        var files: [File] = []
        var kept: [String] = []
        var existing: [String] = []
        for file in Self.files(options) {
            let target = path(file.name, in: directory)
            guard access(target, F_OK) == 0 else {
                files.append(file)
                continue
            }
            if options.force {
                files.append(file)
            } else if (try? ScenarioLoader.readFile(atPath: target, limit: file.bytes.count).get()) == file.bytes {
                kept.append(target)
            } else {
                existing.append(target)
            }
        }
        if !options.force, !existing.isEmpty {
            let list = existing.count == 1 ? existing[0]
                : existing.dropLast().joined(separator: ", ") + " and " + existing.last!
            return .failure("init: \(list) exist\(existing.count == 1 ? "s" : "") already with other contents; not "
                + "overwriting (give --force to overwrite)", 1)
        }
        for folder in [directory, path("scenarios", in: directory)] {
            if let problem = makeFolders(folder) { return .failure("init: \(problem)", 1) }
        }
        var stdout = kept.map { "kept \($0) (unchanged)\n" }.joined()
        for file in files {
            let target = path(file.name, in: directory)
            if let problem = writeFile(file.bytes, to: target, mode: file.mode) {
                return CommandOutcome(stdout: stdout, stderr: "faultline: init: cannot write \(target): \(problem)\n",
                                      exitCode: 1)
            }
            stdout += "wrote \(target)\n"
        }
        return CommandOutcome(stdout: stdout + nextSteps(options))
    }

    /// What to run now: serve the folder, run the sample tests written, and for Swift what Package.swift needs.
    static func nextSteps(_ options: InitOptions) -> String {
        let directory = options.directory
        var lines = ["", "next steps:",
                     "  faultline serve \(path("scenarios", in: directory)) --port 8080    "
                        + "# then: curl -sf --retry 3 http://127.0.0.1:8080/v1/items/1"]
        if options.pytest { lines.append("  python3 -m pytest \(path(pytestFile, in: directory))") }
        if options.shell {
            let script = path(shellFile, in: directory)
            lines.append("  " + (script.contains("/") ? script : "./" + script))
        }
        if options.swift {
            lines += [
                "  swift test, once \(swiftFile) and scenarios/ are in a test target's folder together (the test finds",
                "  scenarios/example.json next to its source file; add exclude: [\"scenarios\"] to that target) and",
                "  Package.swift has, in the package's dependencies (or the git URL, https://github.com/faultline-dev/faultline.git):",
                "    .package(path: \"../faultline\"),",
                "  and in the test target's dependencies:",
                "    .product(name: \"Faultline\", package: \"faultline\"), .product(name: \"FaultlineCore\", package: \"faultline\"),",
            ]
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `mkdir -p folder` (mode 0755, less the umask); nil when it is there, else what is wrong.
    private static func makeFolders(_ folder: String) -> String? {
        var prefix = folder.hasPrefix("/") ? "/" : ""
        for component in folder.split(separator: "/") {
            prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + component
            if mkdir(prefix, 0o755) == 0 { continue }
            let code = errno
            var info = stat()
            if code == EEXIST, stat(prefix, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { continue }
            if code == EEXIST { return "\(prefix) is not a folder" }
            return "cannot create the folder \(prefix): \(String(cString: strerror(code)))"
        }
        return nil
    }

    /// Writes `bytes` to `path` whole (a file beside it, renamed into place) with exactly `mode`, whatever the
    /// umask; nil on success, else what failed.
    private static func writeFile(_ bytes: [UInt8], to path: String, mode: mode_t) -> String? {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                let problem = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                return problem
            }
            written += count
        }
        let modeSet = fchmod(fd, mode) == 0 ? nil : String(cString: strerror(errno))
        let closed = close(fd) == 0 ? nil : String(cString: strerror(errno))
        if let problem = modeSet ?? closed {
            unlink(temporary)
            return problem
        }
        guard rename(temporary, path) == 0 else {
            let problem = String(cString: strerror(errno))
            unlink(temporary)
            return problem
        }
        return nil
    }
}
