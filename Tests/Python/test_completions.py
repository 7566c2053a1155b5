"""`faultline completions bash|zsh|fish`: the scripts are written from the CLI's own option table, and each is
loaded by its real shell. bash's and fish's are asked for completions as the shell asks when Tab is pressed; zsh's
completion needs a terminal, so its script is parsed (`zsh -n`) and loaded with compinit's `compdef`."""

import shlex
import subprocess

import pytest

from conftest import faultline_binary


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("completions")
    written = {}
    for shell in ("bash", "zsh", "fish"):
        result = subprocess.run([faultline_binary(), "completions", shell], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0 and result.stderr == "", result
        path = folder / f"faultline.{shell}"
        path.write_text(result.stdout)
        written[shell] = path
    return written


def bash_complete(script, *words):
    """What bash's completion offers for `faultline WORDS…`, the last word being the one under the cursor."""
    quoted = " ".join(shlex.quote(word) for word in ("faultline", *words))
    program = (f"source {shlex.quote(str(script))}; COMP_WORDS=({quoted}); COMP_CWORD={len(words)}; "
               'COMP_LINE="${COMP_WORDS[*]}"; _faultline; printf "%s\\n" "${COMPREPLY[@]}"')
    result = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stderr == "", result
    return [line for line in result.stdout.splitlines() if line]


def fish_complete(script, line):
    program = f"source {shlex.quote(str(script))}; complete -C {shlex.quote(line)}"
    result = subprocess.run(["fish", "--no-config", "-c", program], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stderr == "", result
    return [entry.split("\t")[0] for entry in result.stdout.splitlines()]


def test_bash_completes_commands_options_and_their_values(scripts, tmp_path):
    bash = scripts["bash"]
    assert bash_complete(bash, "") == ["serve", "record", "validate", "verify", "export", "ca", "init",
                                       "completions", "--help", "--version"]
    assert bash_complete(bash, "ve") == ["verify"]
    assert sorted(bash_complete(bash, "init", "--")) == ["--force", "--help", "--pytest", "--shell", "--swift"]
    assert sorted(bash_complete(bash, "serve", "--tls-c")) == ["--tls-cert-file", "--tls-certificate"]
    assert "expired" in bash_complete(bash, "serve", "--tls-certificate", "") and \
        bash_complete(bash, "serve", "--tls-certificate", "wr") == ["wrong-host"]
    assert bash_complete(bash, "serve", "--conditions", "") == ["3g", "edge", "lte", "very-bad", "offline"]
    assert bash_complete(bash, "export", "--format", "") == ["har", "ndjson", "html"]
    assert bash_complete(bash, "serve", "--log-format", "") == ["text", "json"]
    assert bash_complete(bash, "completions", "") == ["bash", "zsh", "fish"]
    # A value with no fixed list (a port) offers nothing; an option of another command is not offered.
    assert bash_complete(bash, "serve", "--port", "") == []
    assert bash_complete(bash, "verify", "--tls") == []
    # Files and folders where the option takes them.
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios.json").write_text("{}")
    assert sorted(bash_complete(bash, "serve", "--tls-dir", f"{tmp_path}/sc")) == [f"{tmp_path}/scenarios"]
    assert sorted(bash_complete(bash, "verify", "--junit", f"{tmp_path}/sc")) == \
        [f"{tmp_path}/scenarios", f"{tmp_path}/scenarios.json"]
    assert sorted(bash_complete(bash, "validate", f"{tmp_path}/sc")) == \
        [f"{tmp_path}/scenarios", f"{tmp_path}/scenarios.json"]


def test_every_declared_option_is_in_every_script(scripts, run_cli):
    # The usage text and the scripts come from one table: every option --help names is completed by all three.
    usage = run_cli("--help").stdout
    # An option line: "  --name, -n VALUE   help"; the names are before the first run of two spaces.
    options = {word.split()[0] for line in usage.splitlines() if line.startswith("  -")
               for word in line.strip().split("  ")[0].split(", ") if word.startswith("--")}
    assert {"--tls-certificate", "--junit", "--redact-header", "--client-cert"} <= options
    for shell, path in scripts.items():
        text = path.read_text()
        missing = sorted(option for option in options if option not in text and option[2:] not in text)
        assert not missing, f"{shell} lacks {missing}"


def test_fish_completes_as_fish_asks(scripts):
    fish = scripts["fish"]
    commands = fish_complete(fish, "faultline ")
    assert {"serve", "verify", "export", "ca", "init", "completions"} <= set(commands)
    assert sorted(fish_complete(fish, "faultline export --format ")) == ["har", "html", "ndjson"]  # fish sorts
    assert "self-signed" in fish_complete(fish, "faultline serve --tls-certificate ")
    assert "--strict" in fish_complete(fish, "faultline verify --")
    assert "--strict" not in fish_complete(fish, "faultline serve --")
    assert sorted(fish_complete(fish, "faultline completions ")) == ["bash", "fish", "zsh"]


def test_zsh_parses_and_registers_the_script(scripts):
    zsh = scripts["zsh"]
    assert zsh.read_text().startswith("#compdef faultline\n")
    parsed = subprocess.run(["zsh", "-n", str(zsh)], capture_output=True, text=True, timeout=30)
    assert parsed.returncode == 0 and parsed.stderr == "", parsed
    # Loaded the way a user's fpath loads it: compinit finds `_faultline` and binds it to the command.
    folder = zsh.parent / "zsh-site"
    folder.mkdir(exist_ok=True)
    (folder / "_faultline").write_text(zsh.read_text())
    program = (f"fpath=({shlex.quote(str(folder))} $fpath); autoload -Uz compinit; compinit -u -d "
               f"{shlex.quote(str(folder / 'zcompdump'))}; print -r -- $_comps[faultline]; "
               "autoload +X _faultline && print loaded")
    result = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result
    assert result.stdout.split() == ["_faultline", "loaded"], result


def test_completions_names_the_shells_it_knows(run_cli):
    for args in (["completions"], ["completions", "tcsh"], ["completions", "bash", "zsh"]):
        result = run_cli(*args)
        assert result.returncode == 64 and "completions: give one shell: bash, zsh, fish" in result.stderr, result
