"""Every code sample in README.md and the manual (docs/*.md) is run or checked here, so neither can drift from the
program. (docs/reference/ is generated from the program's own tables and checked by test_reference_docs.py.)

Each fenced block must name its language; what happens to it depends on that (and on an optional `setup=NAME`
after the language, which prepares what the sample assumes, such as a running server or an empty folder):

  console  a transcript: each `$ command` runs (in a scratch folder holding a copy of scenarios/; `faultline` on
           PATH; `make serve` starts the server; `127.0.0.1:8080` means the server the section started), and its
           output must match the lines under it. `…` stands for anything; digits compare as digits of any value
           and whitespace is ignored, so timestamps, ports and durations may differ but every word, key and
           string must be there, in order.
  sh       run with `bash -e`; blocks made only of `make` commands are checked with `make -n` (they build the
           project or run this very suite).
  python   run with pytest.
  swift    must appear verbatim in Tests/FaultlineTests/ReadmeSampleTests.swift, which `swift test` runs;
           `swift file=Package.swift` is a manifest that must load, with its dependency on this checkout
           resolved and every product it names found (`swift package describe`).
  json     a scenario (or an `"expect"` fragment of one) that the loader and the JSON Schema both accept;
           `json file=PATH` also writes it to PATH in the section's folder, for the samples after it (so a reader
           sees every file a sample uses), and `json file=PATH invalid` is one the loader must refuse.
  text     the CLI synopsis must match `faultline --help`; `text layout` paths must exist; `text diagram` is a
           picture, not a sample (the one kind of block that is not checked).

Blocks are grouped by page and section (the nearest heading) and run in order, so a section's blocks share one
server and one folder.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest
import requests

from conftest import REPO_ROOT, SCENARIOS_DIR, faultline_binary

README = REPO_ROOT / "README.md"
DOCUMENTS = [README] + sorted((REPO_ROOT / "docs").glob("*.md"))
# Swift samples are compiled and run by `swift test` from these files (InitSampleTests.swift is what
# `faultline init --swift` writes, byte for byte: test_init.py).
SWIFT_SAMPLES = [REPO_ROOT / "Tests" / "FaultlineTests" / "DocSampleTests.swift",
                 REPO_ROOT / "Tests" / "FaultlineTests" / "InitSample" / "InitSampleTests.swift"]
SCHEMA = json.loads((SCENARIOS_DIR / "faultline.schema.json").read_text())
DEADLINE_S = 10.0


@dataclass
class Block:
    page: str          # the file, relative to the repository: README.md, docs/scenarios.md
    line: int
    section: str
    language: str
    attributes: dict
    text: str

    @property
    def where(self):
        return f"{self.page}:{self.line}"


def document_blocks(path):
    page = str(path.relative_to(REPO_ROOT))
    blocks, section, fence = [], "", None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if fence is None and re.match(r"#{1,2} ", line):   # a page's title or one of its sections
            section = line.lstrip("#").strip()
        if fence is None and line.lstrip().startswith("```"):
            info = line.lstrip()[3:].split()
            attributes = dict(part.split("=", 1) if "=" in part else (part, True) for part in info[1:])
            fence = Block(page, number, section, info[0] if info else "", attributes, "")
        elif fence is not None and line.lstrip().startswith("```"):
            if line != line.lstrip():   # a block inside a list item is indented with it
                fence.text = textwrap.dedent(fence.text)
            blocks.append(fence)
            fence = None
        elif fence is not None:
            fence.text += line + "\n"
    assert fence is None, f"{page}:{fence.line}: unclosed code block"
    return blocks


BLOCKS = [block for document in DOCUMENTS for block in document_blocks(document)]
SECTIONS = list(dict.fromkeys((block.page, block.section) for block in BLOCKS))


# -- matching transcripts --------------------------------------------------------------------------------

# An HTTP-date (IMF-fixdate, RFC 9110 §5.6.7): a sample's `Date: Tue, 01 Dec 2026 19:46:35 GMT` matches any date.
HTTP_DATE = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
                       r"\d\d:\d\d:\d\d GMT")


# Counts a reader checks against the program stay exact: "14 scenario(s)" must be 14.
EXACT_COUNT = re.compile(r"(\d+)(?= scenario\(s\))")


def normalized(text):
    text = EXACT_COUNT.sub(lambda m: "#" * int(m.group(1)), HTTP_DATE.sub("<http-date>", text))
    return re.sub(r"\d+", "0", re.sub(r"\s+", "", text))


def transcript_matches(expected, actual):
    """`actual` holds the pieces of `expected` between `…`, in order; an end without `…` is fixed."""
    pieces = [normalized(piece) for piece in expected.split("…")]
    actual = normalized(actual)
    if len(pieces) == 1:
        return actual == pieces[0]
    if not actual.startswith(pieces[0]):
        return False
    position = len(pieces[0])
    for piece in pieces[1:-1]:
        found = actual.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return actual.endswith(pieces[-1]) and len(actual) - len(pieces[-1]) >= position


def test_transcript_matching_is_strict_enough():
    assert transcript_matches('{"a":1,…,"c":"x"}', '{"a": 7, "b": 2, "c": "x"}')
    assert not transcript_matches('{"a":1,…,"c":"x"}', '{"a": 7, "b": 2, "c": "y"}')
    assert not transcript_matches('{"a":1}', '{"a":1,"b":2}')
    assert not transcript_matches("PASS … ok", "FAIL … ok")
    assert transcript_matches("Date: Tue, 01 Dec 2026 19:46:35 GMT", "Date: Sun, 06 Nov 1994 08:49:37 GMT")
    assert not transcript_matches("Date: Tue, 01 Dec 2026 19:46:35 GMT", "Date: yesterday")
    assert not transcript_matches("faultline: 10 scenario(s), 4 route(s)", "faultline: 14 scenario(s), 4 route(s)")
    assert transcript_matches("faultline: 14 scenario(s), 4 route(s)", "faultline: 14 scenario(s), 9 route(s)")


# -- the context a section's samples share ---------------------------------------------------------------

@dataclass
class Context:
    folder: Path
    start_faultline: object
    env: dict = field(default_factory=dict)
    server: object = None

    @property
    def port(self):
        return self.server.port if self.server else None

    def serve(self, *arguments):
        self.server = self.start_faultline(*arguments)
        self.env["PORT"] = str(self.server.port)
        return self.server

    def localize(self, command):
        """The README's fixed port 8080 becomes the port of this section's server."""
        return command.replace("127.0.0.1:8080", f"127.0.0.1:{self.port}") if self.port else command

    def shell(self, command, check=True, timeout=60):
        # A session of its own, killed afterwards: a sample that fails half-way leaves nothing running.
        # Output goes to files, not pipes: a server the sample left running would hold a pipe open.
        out, err = self.folder / ".sample.stdout", self.folder / ".sample.stderr"
        with open(out, "w") as stdout, open(err, "w") as stderr:
            process = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", command], cwd=self.folder,
                                       env=self.env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
            try:
                process.wait(timeout=timeout)
            finally:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        result = subprocess.CompletedProcess(process.args, process.returncode, out.read_text(), err.read_text())
        if check:
            assert result.returncode == 0, f"`{command}` exited {result.returncode}\n{result.stdout}\n{result.stderr}"
        return result


@pytest.fixture
def context(tmp_path, start_faultline):
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copytree(SCENARIOS_DIR, folder / "scenarios")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "faultline").symlink_to(faultline_binary())
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    previous = os.getcwd()
    os.chdir(folder)   # relative scenario paths in samples resolve against the scratch folder
    try:
        yield Context(folder, start_faultline, env)
    finally:
        os.chdir(previous)


# -- setups named by `setup=` ------------------------------------------------------------------------------

def setup_served(ctx):
    server = ctx.serve(ctx.folder / "scenarios", "--quiet")
    requests.get(f"{server.url}/v1/products/1", timeout=DEADLINE_S)


def setup_watch_edits(ctx):
    """Runs once `faultline serve … --watch` is up: one good edit, then one broken one."""
    def edit(server):
        file = ctx.folder / "scenarios" / "flaky-catalogue.json"
        document = json.loads(file.read_text())
        document["seed"] += 1
        file.write_text(json.dumps(document, indent=2))
        wait_until(lambda: "reloaded (watch)" in server.stderr(), "the good edit to load")
        document["routes"][0]["responses"][0]["status"] = 1000
        file.write_text(json.dumps(document, indent=2))
        wait_until(lambda: "1000 is not an HTTP status" in server.stderr(), "the broken edit to be reported")
    ctx.after_serve = edit


def setup_empty_folder(ctx):
    """A folder with nothing in it yet, as a new user's project starts."""
    shutil.rmtree(ctx.folder / "scenarios")


def setup_example(ctx):
    """The folder `faultline init` makes: scenarios/example.json and the schema."""
    setup_empty_folder(ctx)
    ctx.shell("faultline init")


SETUPS = {"served": setup_served,
          "watch-edits": setup_watch_edits, "empty-folder": setup_empty_folder, "example": setup_example}


def wait_until(condition, what, timeout=DEADLINE_S):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# -- runners -----------------------------------------------------------------------------------------------

def run_console(block, ctx):
    commands, current = [], None
    for line in block.text.splitlines():
        if line.startswith("$ "):
            current = [line[2:], []]
            commands.append(current)
        else:
            assert current, f"{block.where}: output before the first $ command"
            current[1].append(line)
    for command, expected_lines in commands:
        expected = "\n".join(expected_lines)
        if command.startswith("make serve"):
            ctx.serve(ctx.folder / "scenarios", "--quiet")
            actual = f"listening on {ctx.server.url}"
        elif command.startswith("faultline serve "):
            arguments = command.split()[2:]
            if "--port" in arguments:
                del arguments[arguments.index("--port"):arguments.index("--port") + 2]
            server = ctx.serve(*arguments)
            getattr(ctx, "after_serve", lambda _: None)(server)
            actual = f"listening on {server.url}\n{server.stderr()}"
        else:
            result = ctx.shell(ctx.localize(command), check=False)
            actual = result.stdout + result.stderr
        expected = ctx.localize(expected)
        assert transcript_matches(expected, actual), \
            f"{block.where}: `{command}` printed\n{actual}\nbut the README shows\n{expected}"


def run_sh(block, ctx):
    """`sh proven-by=TARGET`: a sample that needs what this machine's tests do not have (docker, Homebrew, a
    release); the make target that proves the same steps must exist. Only docs/install.md may have such blocks."""
    commands = [line for line in block.text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if "proven-by" in block.attributes:
        assert block.page == "docs/install.md", f"{block.where}: only install samples may be proven elsewhere"
        target = block.attributes["proven-by"]
        dry = subprocess.run(["make", "-n", target], cwd=REPO_ROOT, capture_output=True, text=True)
        assert dry.returncode == 0, f"{block.where}: proven-by={target} is not a make target: {dry.stderr}"
        return
    if all(line.startswith("make ") for line in commands):
        for line in commands:
            target = line.split("#")[0].split()
            dry = subprocess.run(["make", "-n", *target[1:]], cwd=REPO_ROOT, capture_output=True, text=True)
            assert dry.returncode == 0, f"{block.where}: `{line}` is not a make target: {dry.stderr}"
        return
    ctx.shell(block.text, timeout=120)
    if "kill -TERM %1" in block.text:   # the script stopped the server it started: nothing listens on its port
        port = int((ctx.folder / "faultline.port").read_text())
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    if "--output run.har" in block.text:
        har = json.loads((ctx.folder / "run.har").read_text())
        assert har["log"]["entries"], "the exported HAR holds the request the setup made"


def run_python(block, ctx):
    """`python plugin` runs with the Python package's pytest plugin (packaging/python, not installed here), its
    `faultline` fixture running the binary under test."""
    sample = ctx.folder / "test_doc_sample.py"
    sample.write_text(block.text)
    env, plugin = dict(ctx.env), []
    if "plugin" in block.attributes:
        env.update(PYTHONPATH=str(REPO_ROOT / "packaging" / "python" / "src"), FAULTLINE_BIN=str(faultline_binary()))
        plugin = ["-p", "faultline.pytest_plugin"]
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, sample.name],
                            cwd=ctx.folder, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{block.where}: the pytest sample failed\n{result.stdout}\n{result.stderr}"
    assert " passed" in result.stdout


def check_swift(block, ctx):
    if block.attributes.get("file") == "Package.swift":
        check_manifest(block, ctx)
        return
    sources = [path.read_text() for path in SWIFT_SAMPLES if path.exists()]
    assert any(block.text.strip() in source for source in sources), \
        f"{block.where}: the Swift sample must appear verbatim in one of {[str(p.relative_to(REPO_ROOT)) for p in SWIFT_SAMPLES]}"


def check_manifest(block, ctx):
    """The manifest as a user's package beside a checkout named `faultline` (this repository)."""
    (ctx.folder.parent / "faultline").symlink_to(REPO_ROOT)
    package = ctx.folder.parent / "my-client"
    for folder, file in [("Sources/MyClient", "MyClient.swift"), ("Tests/MyClientTests", "MyClientTests.swift")]:
        (package / folder).mkdir(parents=True)
        (package / folder / file).write_text("import Foundation\n")
    (package / "Package.swift").write_text(block.text)
    result = subprocess.run(["swift", "package", "describe", "--type", "json"], cwd=package, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, f"{block.where}: the manifest does not load:\n{result.stderr}"
    described = json.loads(result.stdout[result.stdout.index("{"):])
    wanted = {name for target in described["targets"] for name in target.get("product_dependencies", [])}
    ours = subprocess.run(["swift", "package", "describe", "--type", "json"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300, check=True).stdout
    products = {product["name"] for product in json.loads(ours[ours.index("{"):])["products"]}
    assert wanted and wanted <= products, f"{block.where}: {sorted(wanted - products)} are not products"


def check_json(block, ctx):
    text = block.text.strip()
    if text.startswith('"'):   # a fragment: the members of a scenario object
        text = '{"name": "readme", "routes": [{"id": "r", "match": {"path": "/r"}, "responses": [{}]}], ' + text + "}"
    document = json.loads(text)
    target = block.attributes.get("file")
    if target and (ctx.folder / target).exists():
        # A file an earlier sample made (`faultline init`): the page must show it as it is.
        assert json.loads((ctx.folder / target).read_text()) == document, \
            f"{block.where}: {target} is not what the program wrote:\n{(ctx.folder / target).read_text()}"
    elif target:
        (ctx.folder / target).parent.mkdir(parents=True, exist_ok=True)
        (ctx.folder / target).write_text(block.text)
    if "invalid" in block.attributes:
        assert target, f"{block.where}: an invalid sample names the file it is written to"
        refused = ctx.shell(f"faultline validate {target}", check=False)
        assert refused.returncode == 1, f"{block.where}: the loader accepted the invalid sample {target}"
        return
    jsonschema.validate(document, SCHEMA)
    path = ctx.folder / (target or f"doc-sample-{block.line}.json")
    if not target:
        path.write_text(json.dumps(document))
    ctx.shell(f"faultline validate {path.relative_to(ctx.folder)}")


def check_text(block, ctx):
    if "diagram" in block.attributes:
        return   # a picture drawn in text: nothing in it runs
    if "layout" in block.attributes:
        for line in block.text.splitlines():
            if line and not line.startswith(" "):
                assert (REPO_ROOT / line.split()[0]).exists(), f"{block.where}: {line.split()[0]} does not exist"
        return
    help_text = ctx.shell("faultline --help").stdout
    usage_section = help_text.split("USAGE", 1)[1].split("\n\n", 1)[0]
    usage = [" ".join(command.split()) for command in re.split(r"\n\s*(?=faultline )", usage_section.strip())]
    synopsis = [" ".join(command.split()) for command in re.split(r"\n(?=faultline )", block.text.strip())]
    # The whole synopsis, in --help's order: a command or option added to the CLI and not to the page fails.
    assert synopsis == usage, f"{block.where}: the synopsis is not faultline --help's USAGE: " \
        f"missing {[c for c in usage if c not in synopsis]}, not in --help {[c for c in synopsis if c not in usage]}"


def check_yaml(block, ctx):
    """CI steps (GitHub Actions): valid YAML, and every `faultline COMMAND --option` in a `run:` is an option that
    command has (`faultline COMMAND --help`)."""
    import yaml
    steps = yaml.safe_load(block.text)
    assert isinstance(steps, list) and steps, f"{block.where}: a list of workflow steps"
    runs = [line for step in steps for line in str(step.get("run", "")).splitlines() if line.startswith("faultline ")]
    assert runs, f"{block.where}: no step runs faultline"
    for line in runs:
        command = line.split()[1]
        usage = ctx.shell(f"faultline {command} --help").stdout
        for option in re.findall(r"(?<!\S)(--[a-z][a-z-]*|-o)(?=[\s=]|$)", line):
            assert option in usage or (option == "-o" and "--output" in usage), \
                f"{block.where}: `faultline {command}` has no option {option}"


RUNNERS = {"yaml": check_yaml, "console": run_console, "sh": run_sh, "python": run_python, "swift": check_swift, "json": check_json,
           "text": check_text}


def test_the_bundled_scenarios_table_lists_every_bundled_scenario():
    page = (REPO_ROOT / "docs" / "scenarios.md").read_text()
    table = page[page.index("## Bundled scenarios"):page.index("## Errors")]
    listed = set(re.findall(r"^\| `([\w-]+\.json)` \|", table, flags=re.M))
    bundled = {path.name for path in SCENARIOS_DIR.glob("*.json") if not path.name.endswith(".schema.json")}
    assert listed == bundled, f"docs/scenarios.md's table: missing {sorted(bundled - listed)}, stale {sorted(listed - bundled)}"
    count = re.search(r"(\w+) scenarios come with Faultline", page).group(1)
    assert count == NUMBER_WORDS[len(bundled)], f"docs/scenarios.md says {count} bundled scenarios; there are {len(bundled)}"
    assert f"ships with {NUMBER_WORDS[len(bundled)].lower()} ready-made scenarios" in README.read_text()


def test_the_admin_api_table_lists_every_endpoint_of_openapi_json():
    page = (REPO_ROOT / "docs" / "admin-api.md").read_text()
    rows = set(re.findall(r"^\| `(GET|POST|DELETE) (/[^` ?]*)", page, flags=re.M))
    spec = json.loads((REPO_ROOT / "Sources" / "Faultline" / "Resources" / "openapi.json").read_text())
    operations = {(method.upper(), path.removeprefix("/__faultline"))
                  for path, item in spec["paths"].items() for method in item if method in ("get", "post", "delete")}
    assert operations - rows == set(), f"docs/admin-api.md's endpoint table lacks {sorted(operations - rows)}"
    assert rows - operations == set(), f"docs/admin-api.md's endpoint table names {sorted(rows - operations)}, not in openapi.json"


NUMBER_WORDS = {n: word for n, word in enumerate("Zero One Two Three Four Five Six Seven Eight Nine Ten Eleven Twelve "
                                                 "Thirteen Fourteen Fifteen Sixteen Seventeen Eighteen Nineteen Twenty".split())}


def test_every_block_has_a_runner():
    for block in BLOCKS:
        assert block.language in RUNNERS, f"{block.where}: a code block needs one of {sorted(RUNNERS)}"
        setup = block.attributes.get("setup")
        assert setup is None or setup in SETUPS, f"{block.where}: unknown setup {setup}"


@pytest.mark.parametrize("page, section", SECTIONS, ids=[f"{page}#{section}" for page, section in SECTIONS])
def test_section_samples(page, section, context):
    for block in (block for block in BLOCKS if (block.page, block.section) == (page, section)):
        if "setup" in block.attributes:
            SETUPS[block.attributes["setup"]](context)
        RUNNERS[block.language](block, context)
