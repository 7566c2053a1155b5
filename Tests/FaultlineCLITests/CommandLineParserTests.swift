@testable import FaultlineCLI
import Testing

/// The command line's one dialect, tested on the parser directly: every command takes `--opt value` and
/// `--opt=value`, options in any order, and usage errors name the command and the problem.
@Suite struct CommandLineParserTests {
    static func parse(_ words: String) throws(CommandLineError) -> CommandLineRequest {
        try FaultlineCommandLine.parse(words.split(separator: " ").map(String.init))
    }

    static func error(_ words: String) -> String? {
        do {
            _ = try parse(words)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func parsesServeOptions() throws {
        let request = try FaultlineCommandLine.parse(["serve", "a.json", "dir", "--port", "0", "--port-file=/tmp/p", "--host", "::1"])
        var expected = ServeOptions()
        expected.paths = ["a.json", "dir"]
        expected.portFile = "/tmp/p"
        expected.host = "::1"
        #expect(request == .serve(expected))
        #expect(throws: CommandLineError.self) { try FaultlineCommandLine.parse(["serve", "--port", "70000"]) }
        #expect(throws: CommandLineError.self) { try FaultlineCommandLine.parse(["serve", "--bogus"]) }
        #expect(throws: CommandLineError.self) { try FaultlineCommandLine.parse(["frobnicate"]) }
        #expect(try FaultlineCommandLine.parse(["--version"]) == .version)
    }

    @Test func equalsAndSpaceFormsAreTheSameEverywhere() throws {
        let verify = CommandLineRequest.verify(VerifyOptions(server: ServerLocation(url: "http://h:1")))
        #expect(try Self.parse("verify --url=http://h:1") == verify)
        #expect(try Self.parse("verify -u http://h:1") == verify)
        #expect(try Self.parse("verify --strict --scenario=orders --port-file p") == .verify(VerifyOptions(
            server: ServerLocation(portFile: "p"), strict: true, scenario: "orders")))
        #expect(try Self.parse("export --port-file=p") == .export(ExportOptions(server: ServerLocation(portFile: "p"))))
        #expect(try Self.parse("export --format=ndjson --url http://h:1 --output=o.ndjson")
            == .export(ExportOptions(url: "http://h:1", format: .ndjson, output: "o.ndjson")))
        #expect(try Self.parse("serve --max-journal=5 dir") == Self.parse("serve dir --max-journal 5"))
    }

    @Test func verifyWritesJUnitAndHTMLAndExportWritesHTML() throws {
        #expect(try Self.parse("verify --url http://h:1 --junit out.xml --html=run.html --strict") == .verify(VerifyOptions(
            server: ServerLocation(url: "http://h:1"), strict: true, junit: "out.xml", html: "run.html")))
        #expect(try Self.parse("verify --junit=a.xml --scenario s") == .verify(VerifyOptions(
            server: ServerLocation(), scenario: "s", junit: "a.xml")))
        #expect(try Self.parse("export --format html -o run.html --url http://h:1")
            == .export(ExportOptions(url: "http://h:1", format: .html, output: "run.html")))
        #expect(try Self.parse("export -f html --url http://h:1") == .export(ExportOptions(url: "http://h:1", format: .html)))
        #expect(Self.error("verify --junit") == "verify: --junit needs a value")
        #expect(Self.error("verify --html") == "verify: --html needs a value")
        #expect(Self.error("export --html x") == "export: unknown option --html (an option of verify)")
        #expect(Self.error("export --format=HTML")
            == "export: --format must be har, ndjson or html, got \"HTML\"; did you mean \"html\"?")
        #expect(Self.error("export --format=pdf") == "export: --format must be har, ndjson or html, got \"pdf\"")
    }

    @Test func parsesInitAndServeEmpty() throws {
        #expect(try Self.parse("init") == .initialize(InitOptions()))
        #expect(try Self.parse("init --swift demo --pytest --shell --force")
            == .initialize(InitOptions(directory: "demo", pytest: true, shell: true, swift: true, force: true)))
        #expect(try Self.parse("init demo --help") == .help(topic: "init"))
        #expect(Self.error("init a b") == #"init: give one folder, got "a" and "b""#)
        #expect(Self.error("init --pytset") == "init: unknown option --pytset; did you mean --pytest?")
        #expect(Self.error("serve --force") == "serve: unknown option --force (an option of init)")
        guard case .serve(let empty) = try Self.parse("serve --empty") else { Issue.record(); return }
        #expect(empty.empty && empty.paths.isEmpty)
        #expect(Self.error("serve --empty scenarios")
            == #"serve: --empty starts with no scenarios, so it takes no PATHS; got "scenarios""#)
        #expect(Self.error("serve -w --empty") == "serve: --watch watches scenario files, and --empty has none")
    }

    @Test func quietAndLogFormatDoNotDependOnTheirOrder() throws {
        #expect(try Self.parse("serve --quiet --log-format json") == Self.parse("serve --log-format json --quiet"))
        guard case .serve(let quiet) = try Self.parse("serve --log-format=json -q") else { Issue.record(); return }
        #expect(quiet.requestLog == nil)
        guard case .serve(let json) = try Self.parse("serve --log-format=json") else { Issue.record(); return }
        #expect(json.requestLog == .json)
    }

    @Test func usageErrorsNameTheCommandAndTheProblem() {
        #expect(Self.error("serve --port") == "serve: --port needs a value")
        #expect(Self.error("serve --quiet=yes") == "serve: --quiet takes no value")
        #expect(Self.error("serve --bogus") == "serve: unknown option --bogus")
        // Without --url, verify looks for --port-file or FAULTLINE_URL when it runs (RemoteCommandsTests).
        #expect((try? Self.parse("verify")) == .verify(VerifyOptions(server: ServerLocation())))
        #expect(Self.error("verify --strict=yes") == "verify: --strict takes no value")
        #expect(Self.error("verify http://h:1") == "verify: unexpected argument http://h:1")
        #expect(Self.error("export --url h --format yaml") == "export: --format must be har, ndjson or html, got \"yaml\"")
        #expect(Self.error("validate") == "validate: give at least one file or folder")
        #expect(Self.error("serve --port=70000") == "serve: --port must be an integer in 0…65535, got \"70000\"")
    }

    @Test func helpIsGeneratedFromTheDeclarations() throws {
        let usage = FaultlineCommandLine.usage
        for option in FaultlineCommandLine.serve.options + [] {
            #expect(usage.contains(option.names.joined(separator: ", ")), "\(option.names)")
            #expect(usage.contains(option.synopsis))
        }
        for option in FaultlineCommandLine.export.options {
            #expect(usage.contains(option.names.joined(separator: ", ")), "\(option.names)")
        }
        for option in FaultlineCommandLine.verify.options {
            #expect(usage.contains(option.names.joined(separator: ", ")), "\(option.names)")
        }
        #expect(usage.contains(FaultlineCommandLine.verify.synopsis))
        #expect(usage.contains("[--junit F] [--html F]") && usage.contains("[--format har|ndjson|html]"))
        #expect(try Self.parse("serve dir --help") == .help(topic: "serve"))
        #expect(try Self.parse("verify --help") == .help(topic: "verify"))
    }

    @Test func unknownCommandsAndOptionsSuggestTheNearestOrSayWhoHasThem() {
        #expect(Self.error("serv") == #"unknown command "serv"; did you mean "serve"?"#)
        #expect(Self.error("vrify --strict") == #"unknown command "vrify"; did you mean "verify"?"#)
        #expect(Self.error("frobnicate")
            == #"unknown command "frobnicate"; try serve, record, validate, verify, export, ca, init, completions, --help or --version"#)
        #expect(Self.error("serve --tls-prot 0") == "serve: unknown option --tls-prot; did you mean --tls-port?")
        #expect(Self.error("serve --tls-prot=0") == "serve: unknown option --tls-prot; did you mean --tls-port?")
        #expect(Self.error("record --upstrem http://h:1") == "record: unknown option --upstrem; did you mean --upstream?")
        #expect(Self.error("verify --tls-port 1") == "verify: unknown option --tls-port (an option of serve)")
        #expect(Self.error("validate --port 1 x") == "validate: unknown option --port (an option of serve and record)")
        #expect(Self.error("ca --junit f") == "ca: unknown option --junit (an option of verify)")
        #expect(Self.error("serve -x") == "serve: unknown option -x")
    }

    @Test func valuesFromAListSuggestTheNearest() {
        #expect(Self.error("serve --conditions edg") == "serve: --conditions must be one of "
            + "3g, edge, lte, very-bad, offline; got \"edg\"; did you mean \"edge\"?")
        #expect(Self.error("serve --conditions moon")
            == "serve: --conditions must be one of 3g, edge, lte, very-bad, offline; got \"moon\"")
        #expect(Self.error("serve --log-format jsno") == "serve: --log-format must be text or json, got \"jsno\"; did you mean \"json\"?")
        #expect(Self.error("serve --tls-port 0 --tls-certificate expird")?
            .hasSuffix("; got \"expird\"; did you mean \"expired\"?") == true)
    }

    @Test func commandHelpIsThatCommandsOnly() throws {
        #expect(try Self.parse("help serve") == .help(topic: "serve"))
        #expect(try Self.parse("--help ca") == .help(topic: "ca"))
        #expect(try Self.parse("help") == .help(topic: nil))
        #expect(try Self.parse("--help --version") == .help(topic: nil))
        #expect(try Self.parse("completions --help") == .help(topic: "completions"))
        #expect(Self.error("help serv") == #"unknown command "serv"; did you mean "serve"?"#)
        let serve = try #require(FaultlineCommandLine.help(for: "serve"))
        #expect(serve.hasPrefix("faultline serve [PATHS…] [--host H]"))
        #expect(serve.contains(FaultlineCommandLine.serve.summary.split(separator: " ").prefix(6).joined(separator: " ")))
        for option in FaultlineCommandLine.serve.options {
            #expect(serve.contains("  " + option.names.joined(separator: ", ")), "\(option.names)")
        }
        #expect(!serve.contains("--junit") && !serve.contains("--upstream") && !serve.contains("EXIT CODES"))
        #expect(!serve.split(separator: "\n").contains { $0.count > 110 })
        // A bracketed option keeps its value on its line.
        #expect(!serve.split(separator: "\n").contains { $0.hasSuffix("[--admin-port") || $0.hasSuffix("[--tls-port") })
        let verify = try #require(FaultlineCommandLine.help(for: "verify"))
        #expect(verify.contains("--junit F") && !verify.contains("--tls-port"))
        #expect(FaultlineCommandLine.help(for: "validate")?.hasPrefix("faultline validate PATHS…\n") == true)
        #expect(FaultlineCommandLine.help(for: "completions")?.hasPrefix("faultline completions bash|zsh|fish\n") == true)
        #expect(FaultlineCommandLine.help(for: "bogus") == nil)
    }

    @Test func theFullUsageListsASharedOptionOnce() {
        let usage = FaultlineCommandLine.usage
        let lines = usage.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("  --tls-dir DIR") }.count == 1)
        #expect(usage.contains("for serve --tls-port and ca"))
        // Both commands still take it.
        #expect((try? Self.parse("ca --tls-dir /tmp/x")) == .ca(CAOptions(directory: "/tmp/x")))
    }
}
