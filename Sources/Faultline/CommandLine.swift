import FaultlineCore

/// What the command line asked for, parsed without side effects so tests can call it directly.
public enum CommandLineRequest: Equatable, Sendable {
    case serve(ServeOptions)
    case validate(paths: [String])
    /// Fetch `/__faultline/report` from a running server; exit non-zero on any failed rule.
    case verify(url: String)
    /// Fetch a running server's journal as HAR or NDJSON and write it to a file or stdout.
    case export(ExportOptions)
    case help(topic: String?)
    case version
}

/// Options of `faultline serve`.
public struct ServeOptions: Equatable, Sendable {
    public var paths: [String] = []
    public var host = "127.0.0.1"
    public var port = 0
    public var portFile: String?
    public var journalCapacity = 10_000
    public var maxBodyBytes = 10 * 1024 * 1024
    public var headerTimeoutMilliseconds = 10_000
    /// Append each journal entry to this file as a line of JSON when its exchange ends.
    public var journalFile: String?
    /// One line per finished request on stderr; nil with `--quiet`.
    public var requestLog: RequestLogFormat? = .text
    /// Reload the scenario files when they change (inotify).
    public var watch = false

    public init() {}
}

/// Options of `faultline export`.
public struct ExportOptions: Equatable, Sendable {
    /// What `export` writes.
    public enum Format: String, Equatable, Sendable, CaseIterable {
        /// An HTTP Archive 1.2 document (`GET /__faultline/requests.har`).
        case har
        /// One journal entry per line, as `GET /__faultline/requests` gives them.
        case ndjson
    }

    /// `http://HOST:PORT` of a running faultline.
    public var url: String
    public var format: Format = .har
    /// Where to write; nil for stdout.
    public var output: String?

    public init(url: String, format: Format = .har, output: String? = nil) {
        self.url = url
        self.format = format
        self.output = output
    }
}

/// A command line that cannot be carried out; the message says what to change. Exit code 64 (EX_USAGE).
public struct CommandLineError: Error, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// The `faultline` command line (ARCHITECTURE §9).
public enum FaultlineCommandLine {
    public static let usage = """
        faultline \(Faultline.version) — a fault-injecting stub HTTP/1.1 server

        USAGE
          faultline serve [PATHS…] [--host H] [--port N] [--port-file F] [--max-journal N]
                          [--max-body BYTES] [--header-timeout MS] [--journal F]
                          [--log-format text|json] [--quiet] [--watch]
          faultline validate PATHS…
          faultline verify --url http://127.0.0.1:PORT
          faultline export --url http://127.0.0.1:PORT [--format har|ndjson] [--output F]
          faultline --help | --version

        serve      Serve the scenario files or folders given (default: ./scenarios). The first line on
                   stdout is "listening on http://HOST:PORT". Stops cleanly on SIGINT, SIGTERM or
                   POST /__faultline/shutdown. SIGHUP reloads the scenario files.
        validate   Check scenario files; print every problem with file, JSON path and message.
        verify     Print a running server's verdicts (GET /__faultline/report); exit 1 if any rule failed.
        export     Write a running server's journal as HAR 1.2 (default) or NDJSON, to --output F or stdout.

        OPTIONS
          --host H            interface to bind (default 127.0.0.1; loopback unless you say otherwise)
          --port N            port to bind (default 0: a free port, printed on the first line)
          --port-file F       also write the bound port to F (written whole, then renamed into place)
          --max-journal N     journal entries kept (default 10000; counters stay exact after eviction)
          --max-body BYTES    largest request body accepted; larger gets 413 (default 10485760)
          --header-timeout MS header section deadline; slower clients get 408 (default 10000)
          --journal F         append each journal entry to F as a line of JSON (NDJSON) when its exchange ends
          --log-format F      stderr log, one line per finished request: text (default; coloured on a
                              terminal unless NO_COLOR is set) or json (the journal entry)
          --quiet             no per-request log
          --watch             reload the scenario files when one is saved, renamed or removed; a file that
                              fails to load is reported and the previous scenarios keep serving

        EXIT CODES
          0 success · 1 scenario files invalid, a verdict failed, or the export could not be written · 2 server
          failed to start (port in use, journal file not writable) or could not be reached · 64 bad command line
        """

    public static func parse(_ arguments: [String]) throws(CommandLineError) -> CommandLineRequest {
        guard let command = arguments.first else { return .help(topic: nil) }
        let rest = Array(arguments.dropFirst())
        switch command {
        case "--help", "-h", "help": return .help(topic: rest.first)
        case "--version", "-V", "version": return .version
        case "validate":
            if rest.contains("--help") { return .help(topic: "validate") }
            if let flag = rest.first(where: { $0.hasPrefix("-") }) {
                throw CommandLineError(message: "validate: unknown option \(flag)")
            }
            guard !rest.isEmpty else { throw CommandLineError(message: "validate: give at least one file or folder") }
            return .validate(paths: rest)
        case "serve":
            return try parseServe(rest)
        case "verify":
            if rest.contains("--help") { return .help(topic: "verify") }
            guard rest.count == 2, rest[0] == "--url" || rest[0] == "-u" else {
                if rest.count == 1, rest[0].hasPrefix("--url=") { return .verify(url: String(rest[0].dropFirst(6))) }
                throw CommandLineError(message: "verify: give --url http://HOST:PORT of a running faultline")
            }
            return .verify(url: rest[1])
        case "export":
            return try parseExport(rest)
        default:
            throw CommandLineError(message: "unknown command \"\(command)\"; try serve, validate, verify, export, --help or --version")
        }
    }

    private static func parseServe(_ arguments: [String]) throws(CommandLineError) -> CommandLineRequest {
        var options = ServeOptions()
        var index = 0
        func value(_ flag: String) throws(CommandLineError) -> String {
            index += 1
            guard index < arguments.count else { throw CommandLineError(message: "serve: \(flag) needs a value") }
            return arguments[index]
        }
        func integer(_ flag: String, _ range: ClosedRange<Int>) throws(CommandLineError) -> Int {
            let text = try value(flag)
            guard let number = Int(text), range.contains(number) else {
                throw CommandLineError(message: "serve: \(flag) must be an integer in \(range.lowerBound)…\(range.upperBound), got \"\(text)\"")
            }
            return number
        }
        while index < arguments.count {
            var argument = arguments[index]
            // Accept --flag=value as well as --flag value.
            if argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") {
                let flag = String(argument[..<eq])
                var expanded = arguments
                expanded[index] = flag
                expanded.insert(String(argument[argument.index(after: eq)...]), at: index + 1)
                return try parseServe(expanded)
            }
            switch argument {
            case "--help", "-h": return .help(topic: "serve")
            case "--host": options.host = try value(argument)
            case "--port", "-p": options.port = try integer(argument, 0...65535)
            case "--port-file": options.portFile = try value(argument)
            case "--max-journal": options.journalCapacity = try integer(argument, 1...10_000_000)
            case "--max-body": options.maxBodyBytes = try integer(argument, 0...(1 << 30))
            case "--header-timeout": options.headerTimeoutMilliseconds = try integer(argument, 1...3_600_000)
            case "--journal": options.journalFile = try value(argument)
            case "--quiet", "-q": options.requestLog = nil
            case "--watch", "-w": options.watch = true
            case "--log-format":
                let text = try value(argument)
                guard let format = RequestLogFormat(rawValue: text) else {
                    throw CommandLineError(message: "serve: --log-format must be text or json, got \"\(text)\"")
                }
                if options.requestLog != nil { options.requestLog = format }
            default:
                if argument.hasPrefix("-") && argument != "-" {
                    throw CommandLineError(message: "serve: unknown option \(argument)")
                }
                options.paths.append(argument)
            }
            argument = ""
            index += 1
        }
        return .serve(options)
    }

    private static func parseExport(_ arguments: [String]) throws(CommandLineError) -> CommandLineRequest {
        var url: String?
        var format = ExportOptions.Format.har
        var output: String?
        var index = 0
        while index < arguments.count {
            var flag = arguments[index]
            var inline: String?
            if flag.hasPrefix("--"), let eq = flag.firstIndex(of: "=") {
                inline = String(flag[flag.index(after: eq)...])
                flag = String(flag[..<eq])
            }
            func value() throws(CommandLineError) -> String {
                if let inline { return inline }
                index += 1
                guard index < arguments.count else { throw CommandLineError(message: "export: \(flag) needs a value") }
                return arguments[index]
            }
            switch flag {
            case "--help", "-h": return .help(topic: "export")
            case "--url", "-u": url = try value()
            case "--output", "-o": output = try value()
            case "--format", "-f":
                let text = try value()
                guard let chosen = ExportOptions.Format(rawValue: text) else {
                    throw CommandLineError(message: "export: --format must be har or ndjson, got \"\(text)\"")
                }
                format = chosen
            default:
                throw CommandLineError(message: "export: unexpected argument \(flag)")
            }
            index += 1
        }
        guard let url else { throw CommandLineError(message: "export: give --url http://HOST:PORT of a running faultline") }
        return .export(ExportOptions(url: url, format: format, output: output))
    }
}
