import Faultline

/// `faultline completions bash|zsh|fish`: the shell completion scripts, written from the same declarations the parser
/// and `--help` read (`FaultlineCommandLine`'s `CommandSpec`s), so a new option completes the day it is declared.
/// What completes: the commands (with their summaries where the shell shows them), each command's options, and an
/// option's value when it is a fixed list (`--tls-certificate`, `--conditions`, `--format`, `--log-format`), a file
/// (`F`, `PATH`) or a folder (`DIR`); the scenario paths of `serve` and `validate` as files. The tarball and the
/// `.deb` carry the three scripts where each shell looks; Homebrew's `generate_completions_from_executable` runs this.
package enum Completions {
    package enum Shell: String, CaseIterable, Sendable {
        case bash, zsh, fish
    }

    static let summary = """
        Print the completion script of bash, zsh or fish: `source <(faultline completions bash)`, or install it where \
        the shell looks (the tarball and the .deb carry all three)
        """

    /// One option as the completions see it.
    struct Option {
        var names: [String]
        var value: String?
        var choices: [String]?
        var help: String

        /// What its value completes to.
        var kind: Kind {
            guard let value else { return .flag }
            if let choices { return .words(choices) }
            switch value {
            case "F", "PATH": return .file
            case "DIR": return .directory
            default: return .free
            }
        }

        /// The help's first clause, short enough for a completion menu.
        var brief: String {
            var text = Substring(help.split(separator: "\n").joined(separator: " "))
            if let stop = text.firstIndex(where: { $0 == ";" || $0 == "(" || $0 == ":" }) { text = text[..<stop] }
            var words = text.split(separator: " ")
            var out = ""
            while let word = words.first, out.count + word.count < 70 {
                out += (out.isEmpty ? "" : " ") + word
                words.removeFirst()
            }
            return out
        }

        var repeatable: Bool { help.contains("(repeatable)") }
    }

    enum Kind: Equatable {
        case flag, file, directory, free
        case words([String])
    }

    struct Command {
        var name: String
        var summary: String
        /// Takes paths (scenario files or folders) as its positional arguments.
        var paths: Bool
        var options: [Option]
    }

    static func entry<Options>(_ spec: CommandSpec<Options>) -> Command {
        Command(
            name: spec.name, summary: Option(names: [], help: spec.summary).brief, paths: spec.positionals != nil,
            options: spec.options.map { Option(names: $0.names, value: $0.value, choices: $0.choices, help: $0.help) })
    }

    static var commands: [Command] {
        typealias Line = FaultlineCommandLine
        return [entry(Line.serve), entry(Line.record), entry(Line.validate), entry(Line.verify), entry(Line.export),
                entry(Line.ca), entry(Line.initialize),
                Command(name: "completions", summary: Option(names: [], help: summary).brief, paths: false, options: [])]
    }

    package static func script(_ shell: Shell) -> String {
        switch shell {
        case .bash: return bash()
        case .zsh: return zsh()
        case .fish: return fish()
        }
    }

    private static var header: String {
        "faultline \(Faultline.version): written by `faultline completions` from the command line's own declarations"
    }

    // MARK: - bash

    private static func bash() -> String {
        let commands = Self.commands
        var lines = [
            "# bash completion for \(header).",
            "_faultline() {",
            "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" command=\"${COMP_WORDS[1]}\"",
            "    COMPREPLY=()",
            "    if [ \"$COMP_CWORD\" -eq 1 ]; then",
            "        mapfile -t COMPREPLY < <(compgen -W \"\(commands.map(\.name).joined(separator: " ")) --help --version\" -- \"$cur\")",
            "        return",
            "    fi",
            "    if [ \"$command\" = completions ]; then",
            "        [ \"$COMP_CWORD\" -eq 2 ] && mapfile -t COMPREPLY < <(compgen -W \"\(Shell.allCases.map(\.rawValue).joined(separator: " "))\" -- \"$cur\")",
            "        return",
            "    fi",
            "    case \"$command:$prev\" in",
        ]
        for command in commands {
            for option in command.options {
                let patterns = option.names.map { "\(command.name):\($0)" }.joined(separator: "|")
                switch option.kind {
                case .flag: continue
                case .file: lines.append("        \(patterns)) mapfile -t COMPREPLY < <(compgen -f -- \"$cur\"); return ;;")
                case .directory: lines.append("        \(patterns)) mapfile -t COMPREPLY < <(compgen -d -- \"$cur\"); return ;;")
                case .free: lines.append("        \(patterns)) return ;;")
                case .words(let words):
                    lines.append("        \(patterns)) mapfile -t COMPREPLY < <(compgen -W \"\(words.joined(separator: " "))\" -- \"$cur\"); return ;;")
                }
            }
        }
        lines += ["    esac", "    local options=\"--help\" paths=no", "    case \"$command\" in"]
        for command in commands {
            let names = command.options.flatMap(\.names).joined(separator: " ")
            lines.append("        \(command.name)) options=\"\(names) --help\"\(command.paths ? "; paths=yes" : "") ;;")
        }
        lines += [
            "    esac",
            "    if [[ \"$cur\" == -* ]]; then",
            "        mapfile -t COMPREPLY < <(compgen -W \"$options\" -- \"$cur\")",
            "    elif [ \"$paths\" = yes ]; then",
            "        mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")",
            "    fi",
            "}",
            "complete -o filenames -o bashdefault -F _faultline faultline",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - zsh

    /// `text` inside a single-quoted zsh word, with `_arguments`' brackets and colons escaped.
    private static func zshQuoted(_ text: String) -> String {
        text.replacing("\\", with: "\\\\").replacing("'", with: "'\\''").replacing("[", with: "\\[")
            .replacing("]", with: "\\]").replacing(":", with: "\\:")
    }

    private static func zsh() -> String {
        let commands = Self.commands
        var lines = [
            "#compdef faultline",
            "# zsh completion for \(header).",
            "_faultline() {",
            "    local context state state_descr line",
            "    typeset -A opt_args",
            "    local -a commands",
            "    commands=(",
        ]
        for command in commands { lines.append("        '\(command.name):\(zshQuoted(command.summary))'") }
        lines += [
            "    )",
            "    _arguments -C '(- 1 *)--help[print the usage]' '(- 1 *)--version[print the version]' \\",
            "        '1:command:->command' '*::argument:->argument'",
            "    case $state in",
            "    command) _describe -t commands 'faultline command' commands ;;",
            "    argument)",
            "        case $line[1] in",
        ]
        for command in commands {
            var specs: [String] = []
            for option in command.options {
                let action: String
                switch option.kind {
                case .flag: action = ""
                case .file: action = ":\(option.value!):_files"
                case .directory: action = ":\(option.value!):_directories"
                case .free: action = ":\(option.value!): "
                case .words(let words): action = ":\(option.value!):(\(words.joined(separator: " ")))"
                }
                let names = option.names.count > 1
                    ? "(\(option.names.joined(separator: " ")))'{\(option.names.joined(separator: ","))}'"
                    : (option.repeatable ? "*" : "") + option.names[0]
                specs.append("'\(names)[\(zshQuoted(option.brief))]\(action)'")
            }
            specs.append("'--help[print the usage]'")
            if command.paths { specs.append("'*:path:_files'") }
            if command.name == "completions" { specs.append("'1:shell:(\(Shell.allCases.map(\.rawValue).joined(separator: " ")))'") }
            lines.append("        \(command.name))")
            lines.append("            _arguments \\")
            lines += specs.enumerated().map { index, spec in
                "                \(spec)" + (index == specs.count - 1 ? "" : " \\")
            }
            lines.append("            ;;")
        }
        lines += ["        esac", "        ;;", "    esac", "}", "_faultline \"$@\""]
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - fish

    /// `text` inside a single-quoted fish word.
    private static func fishQuoted(_ text: String) -> String {
        "'" + text.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
    }

    private static func fish() -> String {
        let commands = Self.commands
        var lines = [
            "# fish completion for \(header).",
            "complete -c faultline -f",
            "complete -c faultline -n __fish_use_subcommand -l help -d 'print the usage'",
            "complete -c faultline -n __fish_use_subcommand -l version -d 'print the version'",
        ]
        for command in commands {
            lines.append("complete -c faultline -n __fish_use_subcommand -a \(command.name) -d \(fishQuoted(command.summary))")
        }
        for command in commands {
            let condition = "-n '__fish_seen_subcommand_from \(command.name)'"
            for option in command.options {
                var parts = ["complete -c faultline", condition]
                for name in option.names {
                    parts.append(name.hasPrefix("--") ? "-l \(name.dropFirst(2))" : "-s \(name.dropFirst())")
                }
                switch option.kind {
                case .flag: break
                case .file: parts.append("-r -F")
                case .directory: parts.append("-x -a '(__fish_complete_directories)'")
                case .free: parts.append("-x")
                case .words(let words): parts.append("-x -a \(fishQuoted(words.joined(separator: " ")))")
                }
                parts.append("-d \(fishQuoted(option.brief))")
                lines.append(parts.joined(separator: " "))
            }
            lines.append("complete -c faultline \(condition) -l help -d 'print the usage'")
            if command.paths { lines.append("complete -c faultline \(condition) -F") }
        }
        lines.append("complete -c faultline -n '__fish_seen_subcommand_from completions' -x -a "
            + fishQuoted(Shell.allCases.map(\.rawValue).joined(separator: " ")))
        return lines.joined(separator: "\n") + "\n"
    }
}
