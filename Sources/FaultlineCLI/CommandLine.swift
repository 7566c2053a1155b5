import Faultline
import FaultlineCore

/// What the command line asked for, parsed without side effects so tests can call it directly.
package enum CommandLineRequest: Equatable, Sendable {
    case serve(ServeOptions)
    case validate(paths: [String])
    /// Fetch `/__faultline/report` from a running server; exit non-zero on any failed rule.
    case verify(VerifyOptions)
    /// Fetch a running server's journal as HAR or NDJSON, or all of it as an HTML report, and write it to a file or
    /// stdout.
    case export(ExportOptions)
    /// Use the local certificate authority: export its certificate, issue a client certificate, print pins.
    case ca(CAOptions)
    /// Proxy to an upstream and write what went by as a scenario (`faultline record`).
    case record(RecordOptions)
    /// Write a starter scenarios/ folder, and sample tests with `--pytest`, `--shell`, `--swift` (`faultline init`).
    case initialize(InitOptions)
    /// Print the shell's completion script (`faultline completions bash`).
    case completions(Completions.Shell)
    case help(topic: String?)
    case version
}

/// Options of `faultline serve`.
package struct ServeOptions: Equatable, Sendable {
    package var paths: [String] = []
    package var host = "127.0.0.1"
    package var port = 0
    package var portFile: String?
    package var journalCapacity = 10_000
    package var maxBodyBytes = 10 * 1024 * 1024
    package var headerTimeoutMilliseconds = 10_000
    package var bodyTimeoutMilliseconds = 60_000
    /// `--max-connections`: client connections open at once on the stub ports; nil derives it from the
    /// descriptor limit (`ConnectionLimit`).
    package var maxConnections: Int?
    /// Append each journal entry to this file as a line of JSON when its exchange ends.
    package var journalFile: String?
    /// One line per finished request on stderr; nil with `--quiet`.
    package var requestLog: RequestLogFormat? = .text
    /// Reload the scenario files when they change (inotify).
    package var watch = false
    /// Serve HTTPS too (`--tls-port`); nil for plain HTTP only.
    package var tls: TLSOptions?
    /// Also write the bound TLS port to this file.
    package var tlsPortFile: String?
    /// `--proxy URL` (and `--proxy-ca-file`): forward what no route takes (ARCHITECTURE §4d).
    package var proxy: ProxyConfig?
    /// Serve the admin API alone on this port too, out of reach of network conditions.
    package var adminPort: Int?
    /// Conditions on every connection from the start (a preset's name).
    package var conditions: LinkShape?
    /// `--empty`: start with no scenario loaded (load them later with `POST /__faultline/scenarios`).
    package var empty = false

    package init() {}
}

/// Options of `faultline init`.
package struct InitOptions: Equatable, Sendable {
    /// The folder that gets `scenarios/` (and the sample tests); `.` by default.
    package var directory = "."
    /// Also write `test_faultline_example.py` (pytest, standard library only).
    package var pytest = false
    /// Also write `faultline-example.sh` (bash and curl).
    package var shell = false
    /// Also write `FaultlineExampleTests.swift` (Swift Testing).
    package var swift = false
    /// Overwrite files that exist.
    package var force = false

    package init(directory: String = ".", pytest: Bool = false, shell: Bool = false, swift: Bool = false,
                 force: Bool = false) {
        self.directory = directory
        self.pytest = pytest
        self.shell = shell
        self.swift = swift
        self.force = force
    }
}

/// `init` while parsing: the folder may be given once.
struct InitParse {
    var options = InitOptions()
    var directoryGiven = false
}

/// Options of `faultline record`.
package struct RecordOptions: Equatable, Sendable {
    package var upstream: UpstreamURL
    /// The folder the scenario is written into.
    package var output: String
    package var host = "127.0.0.1"
    package var port = 0
    package var portFile: String?
    /// The upstream's latency as each step's `delayMs`.
    package var delays = false
    package var redactHeaders: [String] = []
    package var redactFields: [String] = []
    package var caFile: String?
    /// The scenario's name, and its file's (`NAME.json`).
    package var name = "recording"
    package var requestLog: RequestLogFormat? = .text

    package init(upstream: UpstreamURL, output: String) {
        self.upstream = upstream
        self.output = output
    }
}

/// `record` while parsing.
struct RecordParse {
    var upstream: UpstreamURL?
    var output: String?
    var options = RecordOptions(upstream: UpstreamURL(secure: false, host: "", port: 80), output: "")
    var quiet = false
}

/// Where `verify` and `export` find the server: `--url`, else the port in `--port-file` (on 127.0.0.1), else the
/// environment's `FAULTLINE_URL`. Read when the command runs (`RemoteCommands.resolve`), since a port file is
/// written by a server that may start after the command line was parsed.
package struct ServerLocation: Equatable, Sendable {
    package var url: String?
    package var portFile: String?

    package init(url: String? = nil, portFile: String? = nil) {
        self.url = url
        self.portFile = portFile
    }
}

/// Options of `faultline verify`.
package struct VerifyOptions: Equatable, Sendable {
    package var server: ServerLocation
    /// An inconclusive verdict fails the run too (a rule whose situation never happened).
    package var strict = false
    /// Judge only this scenario (`GET /__faultline/report?scenario=NAME`).
    package var scenario: String?
    /// Also write the verdicts to this file as JUnit XML (`JUnitReport`).
    package var junit: String?
    /// Also write the run to this file as the self-contained HTML report (`DashboardPage.selfContained`).
    package var html: String?

    package init(server: ServerLocation, strict: Bool = false, scenario: String? = nil, junit: String? = nil,
                 html: String? = nil) {
        self.server = server
        self.strict = strict
        self.scenario = scenario
        self.junit = junit
        self.html = html
    }
}

/// Options of `faultline export`.
package struct ExportOptions: Equatable, Sendable {
    /// What `export` writes.
    package enum Format: String, Equatable, Sendable, CaseIterable {
        /// An HTTP Archive 1.2 document (`GET /__faultline/requests.har`).
        case har
        /// One journal entry per line, as `GET /__faultline/requests` gives them.
        case ndjson
        /// The dashboard as one self-contained file, with the journal, report, state, scenarios and network
        /// conditions embedded (`DashboardPage.selfContained`).
        case html
    }

    /// Where the running faultline is.
    package var server: ServerLocation
    package var format: Format = .har
    /// Where to write; nil for stdout.
    package var output: String?

    package init(server: ServerLocation, format: Format = .har, output: String? = nil) {
        self.server = server
        self.format = format
        self.output = output
    }

    package init(url: String, format: Format = .har, output: String? = nil) {
        self.init(server: ServerLocation(url: url), format: format, output: output)
    }
}

/// Options of `faultline ca`.
package struct CAOptions: Equatable, Sendable {
    /// What `ca` does.
    package enum Action: Equatable, Sendable {
        /// Make the authority if needed and print the path of its certificate.
        case show
        /// Print the root CA certificate (PEM), or write it to `output`.
        case exportCA
        /// Print the client CA certificate (PEM), or write it to `output`.
        case exportClientCA
        /// Issue a client certificate: `NAME.pem` and `NAME-key.pem` in the folder `output` (default `.`).
        case clientCertificate(name: String)
        /// Print `NAME sha256/BASE64` for every catalogue certificate.
        case pins
    }

    package var action: Action = .show
    /// The authority's state folder; nil for `CertificateAuthority.defaultDirectory()`.
    package var directory: String?
    /// A file for the exports, a folder for a client certificate; nil for stdout or the current folder.
    package var output: String?

    package init(action: Action = .show, directory: String? = nil, output: String? = nil) {
        self.action = action
        self.directory = directory
        self.output = output
    }
}

/// A command line that cannot be carried out; the message says what to change. Exit code 64 (EX_USAGE).
package struct CommandLineError: Error, Equatable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}

/// One option of a command, declared once: its names (the long one first), the name of the value it takes (nil
/// for a flag), its help text, and what it does to the command's options. The parser and `--help` both read
/// these declarations, so the two cannot disagree.
struct OptionSpec<Options>: Sendable {
    let names: [String]
    let value: String?
    /// The values it takes, when they are a fixed list the shell completions offer (`a|b` values are one already).
    let choices: [String]?
    /// The command cannot run without it.
    let required: Bool
    let help: String
    let apply: @Sendable (inout Options, String) throws(CommandLineError) -> Void

    init(_ names: [String], value: String? = nil, choices: [String]? = nil, required: Bool = false, _ help: String,
         _ apply: @escaping @Sendable (inout Options, String) throws(CommandLineError) -> Void) {
        self.names = names
        self.value = value
        self.choices = choices ?? value.flatMap { $0.contains("|") ? $0.split(separator: "|").map(String.init) : nil }
        self.required = required
        self.help = help
        self.apply = apply
    }

    /// `--name VALUE`, `--name`, or, for a value drawn from a list, `--name a|b`.
    var synopsis: String { value.map { "\(names[0]) \($0)" } ?? names[0] }
}

/// A command: its name, its positional arguments, its options, and a one-paragraph summary for `--help`.
struct CommandSpec<Options>: Sendable {
    let name: String
    let summary: String
    /// How the positional arguments read in the synopsis (`PATHS…`), nil when the command takes none.
    let positionals: String?
    let positionalsOptional: Bool
    let options: [OptionSpec<Options>]
    let positional: @Sendable (inout Options, String) throws(CommandLineError) -> Void

    var synopsis: String {
        var parts = ["faultline", name]
        if let positionals { parts.append(positionalsOptional ? "[\(positionals)]" : positionals) }
        parts += options.map { $0.required ? $0.synopsis : "[\($0.synopsis)]" }
        return parts.joined(separator: " ")
    }

    /// Parses the words after the command name: `--opt value` and `--opt=value` alike, options and positionals
    /// in any order, `--help` anywhere. Nil means help was asked for.
    func parse(_ arguments: [String], into options: inout Options) throws(CommandLineError) -> Bool {
        var index = 0
        var given: Set<String> = []
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--help" || argument == "-h" { return false }
            guard argument.hasPrefix("-"), argument != "-" else {
                guard positionals != nil else {
                    throw CommandLineError(message: "\(name): unexpected argument \(argument)")
                }
                try positional(&options, argument)
                continue
            }
            var flag = argument
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                flag = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            guard let spec = self.options.first(where: { $0.names.contains(flag) }) else {
                throw CommandLineError(message: "\(name): unknown option \(flag)"
                    + FaultlineCommandLine.unknownOptionHint(flag, command: name, own: self.options.map(\.names)))
            }
            given.insert(spec.names[0])
            if spec.value == nil {
                if inline != nil { throw CommandLineError(message: "\(name): \(flag) takes no value") }
                try spec.apply(&options, "")
                continue
            }
            if let inline {
                try spec.apply(&options, inline)
            } else {
                guard index < arguments.count else {
                    throw CommandLineError(message: "\(name): \(flag) needs a value")
                }
                try spec.apply(&options, arguments[index])
                index += 1
            }
        }
        if let missing = self.options.first(where: { $0.required && !given.contains($0.names[0]) }) {
            throw CommandLineError(message: "\(name): give \(missing.synopsis), \(missing.help)")
        }
        return true
    }

}

/// An integer option's value, checked against its range.
private func integer(
    _ command: String, _ flag: String, _ text: String, _ range: ClosedRange<Int>
) throws(CommandLineError) -> Int {
    guard let number = Int(text), range.contains(number) else {
        throw CommandLineError(
            message: "\(command): \(flag) must be an integer in \(range.lowerBound)…\(range.upperBound), got \"\(text)\"")
    }
    return number
}

/// `serve`'s options while parsing: `--quiet` and `--log-format` are combined only at the end, so their
/// order does not matter.
struct ServeParse {
    var options = ServeOptions()
    /// The TLS options given; they take effect with `--tls-port`.
    var tls = TLSOptions()
    var tlsRequested = false
    var quiet = false
    var format = RequestLogFormat.text
    var proxyCAFile: String?
}

/// `--proxy URL`'s upstream, over what was given before.
private func proxyConfig(_ command: String, _ text: String, over base: ProxyConfig?) throws(CommandLineError) -> ProxyConfig {
    switch UpstreamURL.parse(text) {
    case .success(let url):
        var config = base ?? ProxyConfig()
        config.upstream = url
        return config
    case .failure(let error):
        throw CommandLineError(message: "\(command): --proxy: \(error.description)")
    }
}

/// `verify` and `export` while parsing.
struct RemoteParse {
    var url: String?
    var portFile: String?
    var strict = false
    var scenario: String?
    var junit: String?
    var html: String?
    var format = ExportOptions.Format.har
    var output: String?
}

/// `ca` while parsing: the flags are combined only at the end, so their order does not matter.
struct CAParse {
    var directory: String?
    var export = false
    var client = false
    var clientCertificate: String?
    var pins = false
    var output: String?
}

/// `; did you mean "edge"?` when `text` is close to one of a list's values (`ScenarioLoader.suggestion`), else "".
private func choiceHint(_ text: String, among values: [String]) -> String {
    ScenarioLoader.suggestion(for: text, among: values).map { "; did you mean \"\($0)\"?" } ?? ""
}

/// The `faultline` command line (ARCHITECTURE §9): one declarative table of commands and options.
package enum FaultlineCommandLine {
    /// `serve --tls-dir` and `ca --tls-dir` name one folder, one way: one text, so the full `--help` lists it once.
    static let tlsDirectoryHelp = """
        the certificate authority's folder, for serve --tls-port and ca (default $XDG_CACHE_HOME/faultline/tls, else \
        ~/.cache/faultline/tls, or ~/Library/Caches/faultline/tls on macOS; created 0700, refused when others can \
        write to it)
        """

    /// The commands a topic of `faultline help` or a did-you-mean can name, in `--help`'s order.
    static let commandNames = ["serve", "record", "validate", "verify", "export", "ca", "init", "completions"]

    /// Each command's option names (each option's, long name first), for saying which command has an option.
    static var optionNames: [(command: String, names: [[String]])] {
        [(serve.name, serve.options.map(\.names)), (record.name, record.options.map(\.names)),
         (validate.name, validate.options.map(\.names)), (verify.name, verify.options.map(\.names)),
         (export.name, export.options.map(\.names)), (ca.name, ca.options.map(\.names)),
         (initialize.name, initialize.options.map(\.names))]
    }

    /// What follows `COMMAND: unknown option FLAG`: ` (an option of serve)` when other commands have it, else
    /// `; did you mean --tls-port?` when one of the command's own long options is close to it, else nothing.
    static func unknownOptionHint(_ flag: String, command: String, own: [[String]]) -> String {
        let owners = optionNames.filter { $0.command != command && $0.names.contains { $0.contains(flag) } }
            .map(\.command)
        if let last = owners.last {
            let list = owners.count == 1 ? last : owners.dropLast().joined(separator: ", ") + " and " + last
            return " (an option of \(list))"
        }
        guard flag.hasPrefix("--") else { return "" }
        let candidates = own.compactMap { $0.first { $0.hasPrefix("--") } }.map { String($0.dropFirst(2)) }
        guard let match = ScenarioLoader.suggestion(for: String(flag.dropFirst(2)), among: candidates) else { return "" }
        return "; did you mean --\(match)?"
    }

    /// `unknown command "serv"; did you mean "serve"?`, or the list of commands when none is close.
    static func unknownCommand(_ word: String) -> CommandLineError {
        if let match = ScenarioLoader.suggestion(for: word, among: commandNames + ["help", "version"]) {
            return CommandLineError(message: "unknown command \"\(word)\"; did you mean \"\(match)\"?")
        }
        return CommandLineError(
            message: "unknown command \"\(word)\"; try " + commandNames.joined(separator: ", ") + ", --help or --version")
    }
    static let serve = CommandSpec<ServeParse>(
        name: "serve",
        summary: """
            Serve the scenario files or folders given (default: ./scenarios; none with --empty). The first line on \
            stdout is \
            "listening on http://HOST:PORT". Stops cleanly on SIGINT, SIGTERM or POST /__faultline/shutdown. \
            SIGHUP reloads the scenario files.
            """,
        positionals: "PATHS…", positionalsOptional: true,
        options: [
            OptionSpec(["--host"], value: "H", "interface to bind (default 127.0.0.1; loopback unless you say otherwise)") {
                $0.options.host = $1
            },
            OptionSpec(["--port", "-p"], value: "N", "port to bind (default 0: a free port, printed on the first line)") {
                (parse: inout ServeParse, text: String) throws(CommandLineError) in
                parse.options.port = try integer("serve", "--port", text, 0...65535)
            },
            OptionSpec(["--port-file"], value: "F", "also write the bound port to F (written whole, then renamed into place)") {
                $0.options.portFile = $1
            },
            OptionSpec(["--max-journal"], value: "N", "journal entries kept (default 10000; counters stay exact after eviction)") {
                (parse: inout ServeParse, text: String) throws(CommandLineError) in
                parse.options.journalCapacity = try integer("serve", "--max-journal", text, 1...10_000_000)
            },
            OptionSpec(["--max-body"], value: "BYTES", "largest request body accepted; larger gets 413 (default 10485760)") {
                (parse: inout ServeParse, text: String) throws(CommandLineError) in
                parse.options.maxBodyBytes = try integer("serve", "--max-body", text, 0...(1 << 30))
            },
            OptionSpec(["--header-timeout"], value: "MS", "header section deadline; slower clients get 408 (default 10000)") {
                (parse: inout ServeParse, text: String) throws(CommandLineError) in
                parse.options.headerTimeoutMilliseconds = try integer("serve", "--header-timeout", text, 1...3_600_000)
            },
            OptionSpec(["--body-timeout"], value: "MS",
                       "HTTP/1.1 request body deadline after its header section; 408 and close past it, 0 for none (default 60000)") {
                (parse: inout ServeParse, text: String) throws(CommandLineError) in
                parse.options.bodyTimeoutMilliseconds = try integer("serve", "--body-timeout", text, 0...3_600_000)
            },
            OptionSpec(["--max-connections"], value: "N", """
                client connections open at once on the stub ports (default: the descriptor limit less 64); past it \
                a request gets 503 and a close, and 32 past it a new connection is closed at once
                """) { (parse: inout ServeParse, text: String) throws(CommandLineError) in
                parse.options.maxConnections = try integer("serve", "--max-connections", text, 1...10_000_000)
            },
            OptionSpec(["--journal"], value: "F", "append each journal entry to F as a line of JSON (NDJSON) when its exchange ends") {
                $0.options.journalFile = $1
            },
            OptionSpec(["--log-format"], value: "text|json", """
                stderr log, one line per finished request: text (default; coloured on a terminal unless NO_COLOR \
                is set) or json (the journal entry)
                """) { (parse: inout ServeParse, text: String) throws(CommandLineError) in
                guard let format = RequestLogFormat(rawValue: text) else {
                    throw CommandLineError(message: "serve: --log-format must be text or json, got \"\(text)\""
                        + choiceHint(text, among: RequestLogFormat.allCases.map(\.rawValue)))
                }
                parse.format = format
            },
            OptionSpec(["--quiet", "-q"], "no per-request log") { parse, _ in parse.quiet = true },
            OptionSpec(["--watch", "-w"], """
                reload the scenario files when one is saved, renamed or removed; a file that fails to load is \
                reported and the previous scenarios keep serving
                """) { parse, _ in parse.options.watch = true },
            OptionSpec(["--admin-port"], value: "N", """
                serve the admin API alone on port N too (0: a free port), out of reach of network conditions; \
                the next line on stdout is "admin on http://HOST:PORT"
                """) { (parse: inout ServeParse, text: String) throws(CommandLineError) in
                parse.options.adminPort = try integer("serve", "--admin-port", text, 0...65535)
            },
            OptionSpec(["--conditions"], value: "NAME", choices: LinkShape.presets.map(\.name), """
                shape every connection from the start: 3g, edge, lte, very-bad or offline (a reset keeps them)
                """) { (parse: inout ServeParse, text: String) throws(CommandLineError) in
                guard let shape = LinkShape.preset(text) else {
                    throw CommandLineError(message: "serve: --conditions must be one of "
                        + LinkShape.presets.map(\.name).joined(separator: ", ") + "; got \"\(text)\""
                        + choiceHint(text, among: LinkShape.presets.map(\.name)))
                }
                parse.options.conditions = shape
            },
            OptionSpec(["--tls-port"], value: "N", """
                serve HTTPS on port N too (0: a free port); the second line on stdout is "listening on \
                https://HOST:PORT"
                """) { (parse: inout ServeParse, text: String) throws(CommandLineError) in
                parse.tls.port = try integer("serve", "--tls-port", text, 0...65535)
                parse.tlsRequested = true
            },
            OptionSpec(["--tls-port-file"], value: "F", "also write the bound TLS port to F") {
                parse, text in parse.options.tlsPortFile = text
            },
            OptionSpec(["--tls-dir"], value: "DIR", tlsDirectoryHelp) { parse, text in parse.tls.directory = text },
            OptionSpec(["--tls-certificate"], value: "NAME", choices: TLSCertificateName.allCases.map(\.rawValue), """
                the catalogue certificate served by default: valid (default), expired, not-yet-valid, \
                wrong-host, self-signed, untrusted-root, incomplete-chain, expired-intermediate, cn-only, \
                no-server-auth-eku, too-long-validity, weak-key, rotated
                """) { (parse: inout ServeParse, text: String) throws(CommandLineError) in
                guard let name = TLSCertificateName(rawValue: text) else {
                    throw CommandLineError(message: "serve: --tls-certificate must be one of "
                        + TLSCertificateName.allCases.map(\.rawValue).joined(separator: ", ") + "; got \"\(text)\""
                        + choiceHint(text, among: TLSCertificateName.allCases.map(\.rawValue)))
                }
                parse.tls.certificate = name
            },
            OptionSpec(["--tls-cert-file"], value: "F", "serve your own certificate (PEM: leaf, then chain) instead; needs --tls-key-file") {
                parse, text in parse.tls.certificateFile = text
            },
            OptionSpec(["--tls-key-file"], value: "F", "the private key (PEM) of --tls-cert-file") {
                parse, text in parse.tls.keyFile = text
            },
            OptionSpec(["--tls-alpn"], value: "LIST", """
                the protocols ALPN offers, in order (default h2,http/1.1); http/1.1 keeps every client on \
                HTTP/1.1, h2 alone refuses clients without HTTP/2
                """) { (parse: inout ServeParse, text: String) throws(CommandLineError) in
                let names = text.split(separator: ",").map { String($0.trimmingWhitespace()) }
                guard !names.isEmpty, names.allSatisfy(["h2", "http/1.1"].contains), Set(names).count == names.count else {
                    throw CommandLineError(message: "serve: --tls-alpn takes h2 and http/1.1, comma-separated; got \"\(text)\"")
                }
                parse.tls.alpn = names
            },
            OptionSpec(["--proxy"], value: "URL", """
                forward to this upstream (http:// or https://) every request no route takes, and the "proxy" \
                steps of scenarios that name no upstream
                """) { (parse: inout ServeParse, text: String) throws(CommandLineError) in
                parse.options.proxy = try proxyConfig("serve", text, over: parse.options.proxy)
            },
            OptionSpec(["--proxy-ca-file"], value: "F", "trust the CA certificates in F (PEM) for an https upstream") {
                parse, text in parse.proxyCAFile = text
            },
            OptionSpec(["--empty"], """
                start with no scenario loaded (no PATHS): load them later with POST /__faultline/scenarios
                """) { parse, _ in parse.options.empty = true },
        ],
        positional: { parse, path in parse.options.paths.append(path) })

    static let record = CommandSpec<RecordParse>(
        name: "record",
        summary: """
            Proxy every request to --upstream and, on SIGINT, SIGTERM or POST /__faultline/record/stop, write what \
            went by into --output as a scenario (NAME.json, large bodies beside it): one route per distinct \
            request, ids in paths as {param}s, the responses as steps in order. Authorization, Cookie, Set-Cookie \
            and Proxy-Authorization values are written as REDACTED.
            """,
        positionals: nil, positionalsOptional: true,
        options: [
            OptionSpec(["--upstream"], value: "URL", required: true, "the server to record (http:// or https://)") {
                (parse: inout RecordParse, text: String) throws(CommandLineError) in
                parse.upstream = try proxyConfig("record", text, over: nil).upstream
            },
            OptionSpec(["--output", "-o"], value: "DIR", required: true, "the folder the scenario is written into") {
                $0.output = $1
            },
            OptionSpec(["--host"], value: "H", "interface to bind (default 127.0.0.1)") { $0.options.host = $1 },
            OptionSpec(["--port", "-p"], value: "N", "port to bind (default 0: a free port, printed on the first line)") {
                (parse: inout RecordParse, text: String) throws(CommandLineError) in
                parse.options.port = try integer("record", "--port", text, 0...65535)
            },
            OptionSpec(["--port-file"], value: "F", "also write the bound port to F") { $0.options.portFile = $1 },
            OptionSpec(["--delays"], "write the upstream's latency as each step's delayMs") { parse, _ in
                parse.options.delays = true
            },
            OptionSpec(["--redact-header"], value: "NAME", "also write this response header's value as REDACTED (repeatable)") {
                $0.options.redactHeaders.append($1)
            },
            OptionSpec(["--redact-field"], value: "NAME", "write this JSON member's value as REDACTED, at any depth (repeatable)") {
                $0.options.redactFields.append($1)
            },
            OptionSpec(["--proxy-ca-file"], value: "F", "trust the CA certificates in F (PEM) for an https upstream") {
                $0.options.caFile = $1
            },
            OptionSpec(["--name"], value: "NAME", "the scenario's name and file name (default recording)") {
                (parse: inout RecordParse, text: String) throws(CommandLineError) in
                guard !text.isEmpty, !text.hasPrefix("."), !text.contains("/") else {
                    throw CommandLineError(message: "record: --name must be a plain file name, got \"\(text)\"")
                }
                parse.options.name = text
            },
            OptionSpec(["--quiet", "-q"], "no per-request log") { parse, _ in parse.quiet = true },
        ],
        positional: { _, _ in })

    static let validate = CommandSpec<[String]>(
        name: "validate",
        summary: "Check scenario files; print every problem with file, JSON path and message.",
        positionals: "PATHS…", positionalsOptional: false, options: [],
        positional: { paths, path in paths.append(path) })

    static let urlOption = OptionSpec<RemoteParse>(
        ["--url", "-u"], value: "URL",
        "http://HOST:PORT of a running faultline (verify, export); default: --port-file, else $FAULTLINE_URL") {
        $0.url = $1
    }

    static let remotePortFileOption = OptionSpec<RemoteParse>(
        ["--port-file"], value: "F", "the port file a `serve --port-file F` wrote: the server at 127.0.0.1:PORT") {
        $0.portFile = $1
    }

    static let verify = CommandSpec<RemoteParse>(
        name: "verify",
        summary: """
            Print a running server's verdicts (GET /__faultline/report); exit 1 if any rule failed. --junit and \
            --html also write them to files for CI, whatever the verdicts.
            """,
        positionals: nil, positionalsOptional: true,
        options: [
            urlOption, remotePortFileOption,
            OptionSpec(["--strict"], "an inconclusive verdict (its situation never happened) fails the run too") { parse, _ in
                parse.strict = true
            },
            OptionSpec(["--scenario"], value: "NAME", "judge only the scenario NAME") { $0.scenario = $1 },
            OptionSpec(["--junit"], value: "F", """
                also write the verdicts to F as JUnit XML: a testsuite per scenario, a testcase per rule (failed: a \
                failure listing the evidence; inconclusive: skipped, a failure with --strict)
                """) { $0.junit = $1 },
            OptionSpec(["--html"], value: "F", "also write the run to F as a self-contained HTML report (as export --format html)") {
                $0.html = $1
            },
        ],
        positional: { _, _ in })

    static let export = CommandSpec<RemoteParse>(
        name: "export",
        summary: """
            Write a running server's journal as HAR 1.2 (default) or NDJSON, or the whole run (journal, verdicts, \
            state, scenarios, network) as a self-contained HTML report, to --output F or stdout.
            """,
        positionals: nil, positionalsOptional: true,
        options: [
            urlOption, remotePortFileOption,
            OptionSpec(["--format", "-f"], value: ExportOptions.Format.allCases.map(\.rawValue).joined(separator: "|"),
                       "what export writes (default har)") {
                (parse: inout RemoteParse, text: String) throws(CommandLineError) in
                guard let format = ExportOptions.Format(rawValue: text) else {
                    let names = ExportOptions.Format.allCases.map(\.rawValue)
                    throw CommandLineError(message: "export: --format must be "
                        + names.dropLast().joined(separator: ", ") + " or \(names.last!), got \"\(text)\""
                        + choiceHint(text, among: names))
                }
                parse.format = format
            },
            OptionSpec(["--output", "-o"], value: "F", "where export writes (default stdout)") { $0.output = $1 },
        ],
        positional: { _, _ in })

    static let ca = CommandSpec<CAParse>(
        name: "ca",
        summary: """
            The local certificate authority for HTTPS: trust its certificate once in the client under test, then \
            every catalogue certificate fails it for exactly one reason. Without an option, prints where the CA \
            certificate is (made on first use).
            """,
        positionals: nil, positionalsOptional: true,
        options: [
            OptionSpec(["--tls-dir"], value: "DIR", tlsDirectoryHelp) { $0.directory = $1 },
            OptionSpec(["--export"], "print the CA certificate (PEM), or write it to --out F") { parse, _ in
                parse.export = true
            },
            OptionSpec(["--client"], "with --export: the client CA, which signs the client certificates") { parse, _ in
                parse.client = true
            },
            OptionSpec(["--client-cert"], value: "NAME", """
                issue a client certificate signed by the client CA: NAME.pem and NAME-key.pem (mode 0600) in \
                --out DIR (default .)
                """) { $0.clientCertificate = $1 },
            OptionSpec(["--pins"], "print each catalogue certificate's key pin: NAME sha256/BASE64") { parse, _ in
                parse.pins = true
            },
            OptionSpec(["--out"], value: "PATH", "where ca writes: a file for --export, a folder for --client-cert") {
                $0.output = $1
            },
        ],
        positional: { _, _ in })

    static let initialize = CommandSpec<InitParse>(
        name: "init",
        summary: """
            Write a starter DIR/scenarios/ (default DIR: .): the JSON Schema and example.json, a route that \
            answers 429 with Retry-After twice, then 200, and expects the client to wait as asked; --pytest, \
            --shell and --swift add a sample test that drives it. Refuses to overwrite a file unless --force.
            """,
        positionals: "DIR", positionalsOptional: true,
        options: [
            OptionSpec(["--pytest"], "also write DIR/test_faultline_example.py (pytest, Python's standard library only)") {
                parse, _ in parse.options.pytest = true
            },
            OptionSpec(["--shell"], "also write DIR/faultline-example.sh (bash and curl, ends with faultline verify)") {
                parse, _ in parse.options.shell = true
            },
            OptionSpec(["--swift"], """
                also write DIR/FaultlineExampleTests.swift (Swift Testing, FaultlineServer.with) and print what \
                Package.swift needs
                """) { parse, _ in parse.options.swift = true },
            OptionSpec(["--force"], "overwrite files init would write that exist already with other contents") { parse, _ in
                parse.options.force = true
            },
        ],
        positional: { (parse: inout InitParse, text: String) throws(CommandLineError) in
            guard !parse.directoryGiven else {
                throw CommandLineError(message: "init: give one folder, got \"\(parse.options.directory)\" and \"\(text)\"")
            }
            parse.options.directory = text
            parse.directoryGiven = true
        })

    /// `head` as it is, then `body` wrapped at `width` columns, continuation lines indented to `indent`.
    private static func wrap(_ head: String, _ body: String, indent: Int, width: Int = 110) -> [String] {
            var lines: [String] = []
            var current = head
            var fresh = true
            for word in body.split(separator: " ") {
                if !fresh && current.count + 1 + word.count > width {
                    lines.append(current)
                    current = String(repeating: " ", count: indent) + word
                } else {
                    current += (fresh ? "" : " ") + word
                }
                fresh = false
            }
            lines.append(current)
            return lines
    }

    private static func padded(_ text: String, _ width: Int) -> String {
        text.count < width ? text + String(repeating: " ", count: width - text.count) : text + "  "
    }

    /// An option's lines in an OPTIONS section: its names and value, then its help wrapped beside them.
    private static func optionLines(_ names: [String], _ value: String?, _ help: String) -> [String] {
        wrap("  " + padded(names.joined(separator: ", ") + (value.map { " \($0)" } ?? ""), 24), help, indent: 26)
    }

    /// A command's synopsis wrapped as in USAGE: `faultline NAME` then its arguments, continuation lines indented.
    private static func synopsisLines(_ synopsis: String, lead: String = "", indent: Int) -> [String] {
        // A bracketed option and its value ("[--admin-port N]") stay on one line: their spaces are kept from
        // the wrapping as U+001F, then put back.
        var depth = 0
        let unbroken = String(synopsis.map { character -> Character in
            if character == "[" { depth += 1 } else if character == "]" { depth -= 1 }
            return character == " " && depth > 0 ? "\u{1F}" : character
        })
        let words = unbroken.split(separator: " ", maxSplits: 2).map(String.init)
        return wrap("\(lead)\(words[0]) \(words[1]) ", words.count > 2 ? words[2] : "", indent: indent)
            .map { $0.replacing("\u{1F}", with: " ") }
    }

    /// `faultline COMMAND --help` (and `faultline help COMMAND`): that command's synopsis, summary and own options
    /// only; nil for a name that is no command.
    package static func help(for command: String) -> String? {
        func page<Options>(_ spec: CommandSpec<Options>) -> String {
            var text = synopsisLines(spec.synopsis, indent: spec.name.count + 11)
            text += [""] + wrap("", spec.summary, indent: 0)
            if !spec.options.isEmpty {
                text += ["", "OPTIONS"]
                for option in spec.options { text += optionLines(option.names, option.value, option.help) }
            }
            text += ["", "Every command: faultline --help"]
            return text.joined(separator: "\n")
        }
        switch command {
        case serve.name: return page(serve)
        case record.name: return page(record)
        case validate.name: return page(validate)
        case verify.name: return page(verify)
        case export.name: return page(export)
        case ca.name: return page(ca)
        case initialize.name: return page(initialize)
        case "completions":
            return (["faultline completions bash|zsh|fish", ""] + wrap("", Completions.summary, indent: 0)
                + ["", "Every command: faultline --help"]).joined(separator: "\n")
        default: return nil
        }
    }

    /// `--help`, generated from the declarations above.
    package static var usage: String {
        var text = ["faultline \(Faultline.version) — a fault-injecting stub HTTP/1.1 and HTTP/2 server", "", "USAGE"]
        for command in [serve.synopsis, record.synopsis, validate.synopsis, verify.synopsis, export.synopsis, ca.synopsis,
                        initialize.synopsis] {
            text += synopsisLines(command, lead: "  ", indent: 18)
        }
        text.append("  faultline completions bash|zsh|fish")
        text.append("  faultline --help | --version")
        text.append("")
        let summaries = [(serve.name, serve.summary), (record.name, record.summary), (validate.name, validate.summary),
                         (verify.name, verify.summary),
                         (export.name, export.summary), (ca.name, ca.summary), (initialize.name, initialize.summary),
                         ("completions", Completions.summary)]
        for (name, summary) in summaries {
            text += wrap("  " + padded(name, 11), summary, indent: 13)
        }
        text += ["", "OPTIONS"]
        let options = serve.options.map { ($0.names, $0.value, $0.help) }
            + record.options.filter { !["--host", "--port", "--port-file", "--quiet", "--output", "--proxy-ca-file"].contains($0.names[0]) }
                .map { ($0.names, $0.value, $0.help) }
            + export.options.map { ($0.names, $0.value, $0.help) }
            + verify.options.filter { !["--url", "--port-file"].contains($0.names[0]) }.map { ($0.names, $0.value, $0.help) }
            + ca.options.map { ($0.names, $0.value, $0.help) }
            + initialize.options.map { ($0.names, $0.value, $0.help) }
        // An option two commands share word for word (--tls-dir of serve and ca) is listed once.
        var listed: [(names: [String], value: String?, help: String)] = []
        for (names, value, help) in options where !listed.contains(where: { $0 == (names, value, help) }) {
            listed.append((names, value, help))
            text += optionLines(names, value, help)
        }
        text += ["", "EXIT CODES"]
        text += wrap("  ", """
            0 success · 1 scenario files invalid or none found, a verdict failed, or a file (export, --junit, --html, \
            init) could not be \
            written · 2 server failed to start (port in use, journal file not writable) or could not be reached, or \
            the CA's folder could not be used · 64 bad command line
            """, indent: 2)
        return text.joined(separator: "\n")
    }

    package static func parse(_ arguments: [String]) throws(CommandLineError) -> CommandLineRequest {
        guard let command = arguments.first else { return .help(topic: nil) }
        let rest = Array(arguments.dropFirst())
        switch command {
        case "--help", "-h", "help":
            // `faultline --help --version` and the like: the full usage, as before.
            guard let topic = rest.first, !topic.hasPrefix("-") else { return .help(topic: nil) }
            guard commandNames.contains(topic) else { throw unknownCommand(topic) }
            return .help(topic: topic)
        case "--version", "-V", "version": return .version
        case "completions":
            guard rest.count == 1, let shell = Completions.Shell(rawValue: rest[0]) else {
                if rest.first == "--help" || rest.first == "-h" { return .help(topic: "completions") }
                throw CommandLineError(message: "completions: give one shell: "
                    + Completions.Shell.allCases.map(\.rawValue).joined(separator: ", ")
                    + (rest.isEmpty ? "" : "; got \"\(rest.joined(separator: " "))\""))
            }
            return .completions(shell)
        case "serve":
            var parse = ServeParse()
            guard try serve.parse(rest, into: &parse) else { return .help(topic: "serve") }
            parse.options.requestLog = parse.quiet ? nil : parse.format
            if parse.tlsRequested {
                if (parse.tls.certificateFile == nil) != (parse.tls.keyFile == nil) {
                    throw CommandLineError(message: "serve: --tls-cert-file and --tls-key-file go together")
                }
                parse.options.tls = parse.tls
            } else if parse.tls != TLSOptions() || parse.options.tlsPortFile != nil {
                throw CommandLineError(message: "serve: the --tls-… options need --tls-port")
            }
            if let caFile = parse.proxyCAFile {
                guard parse.options.proxy?.upstream?.secure == true else {
                    throw CommandLineError(message: "serve: --proxy-ca-file goes with --proxy https://…")
                }
                parse.options.proxy?.caFile = caFile
            }
            if parse.options.empty {
                guard parse.options.paths.isEmpty else {
                    throw CommandLineError(message: "serve: --empty starts with no scenarios, so it takes no PATHS; got "
                        + parse.options.paths.map { "\"\($0)\"" }.joined(separator: ", "))
                }
                guard !parse.options.watch else {
                    throw CommandLineError(message: "serve: --watch watches scenario files, and --empty has none")
                }
            }
            return .serve(parse.options)
        case "record":
            var parse = RecordParse()
            guard try record.parse(rest, into: &parse) else { return .help(topic: "record") }
            guard let upstream = parse.upstream, let output = parse.output else {
                throw CommandLineError(message: "record: give --upstream URL and --output DIR")
            }
            var options = parse.options
            options.upstream = upstream
            options.output = output
            options.requestLog = parse.quiet ? nil : .text
            if options.caFile != nil, !upstream.secure {
                throw CommandLineError(message: "record: --proxy-ca-file goes with an https:// --upstream")
            }
            return .record(options)
        case "validate":
            var paths: [String] = []
            guard try validate.parse(rest, into: &paths) else { return .help(topic: "validate") }
            guard !paths.isEmpty else { throw CommandLineError(message: "validate: give at least one file or folder") }
            return .validate(paths: paths)
        case "verify":
            var parse = RemoteParse()
            guard try verify.parse(rest, into: &parse) else { return .help(topic: "verify") }
            return .verify(VerifyOptions(
                server: ServerLocation(url: parse.url, portFile: parse.portFile), strict: parse.strict,
                scenario: parse.scenario, junit: parse.junit, html: parse.html))
        case "export":
            var parse = RemoteParse()
            guard try export.parse(rest, into: &parse) else { return .help(topic: "export") }
            return .export(ExportOptions(
                server: ServerLocation(url: parse.url, portFile: parse.portFile), format: parse.format, output: parse.output))
        case "ca":
            var parse = CAParse()
            guard try ca.parse(rest, into: &parse) else { return .help(topic: "ca") }
            return .ca(try caOptions(parse))
        case "init":
            var parse = InitParse()
            guard try initialize.parse(rest, into: &parse) else { return .help(topic: "init") }
            return .initialize(parse.options)
        default:
            throw unknownCommand(command)
        }
    }

    /// `ca`'s flags as one action: at most one of --export, --client-cert and --pins; --client only with --export;
    /// --out only where something is written.
    private static func caOptions(_ parse: CAParse) throws(CommandLineError) -> CAOptions {
        let actions = [parse.export, parse.clientCertificate != nil, parse.pins].filter { $0 }.count
        guard actions <= 1 else {
            throw CommandLineError(message: "ca: give one of --export, --client-cert and --pins")
        }
        guard !parse.client || parse.export else {
            throw CommandLineError(message: "ca: --client goes with --export (it exports the client CA)")
        }
        var options = CAOptions(directory: parse.directory, output: parse.output)
        if parse.export {
            options.action = parse.client ? .exportClientCA : .exportCA
        } else if let name = parse.clientCertificate {
            // The name becomes two file names and the certificate's commonName.
            guard !name.isEmpty, !name.hasPrefix("."), !name.contains("/") else {
                throw CommandLineError(message: "ca: --client-cert NAME must be a plain file name, got \"\(name)\"")
            }
            options.action = .clientCertificate(name: name)
        } else if parse.pins {
            options.action = .pins
        }
        if parse.output != nil, options.action == .pins || options.action == .show {
            throw CommandLineError(message: "ca: --out goes with --export or --client-cert")
        }
        return options
    }
}
