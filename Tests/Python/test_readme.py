"""Every code sample in README.md is run or checked here, so the manual cannot drift from the program.

Each fenced block must name its language; what happens to it depends on that (and on an optional `setup=NAME`
after the language, which prepares what the sample assumes, such as a running server or a broken file):

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
  json     a scenario (or an `"expect"` fragment of one) that the loader and the JSON Schema both accept.
  text     the CLI synopsis must match `faultline --help`; `text layout` paths must exist.

Blocks are grouped by README section and run in order, so a section's blocks share one server and one folder.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest
import requests

from conftest import REPO_ROOT, SCENARIOS_DIR, faultline_binary

README = REPO_ROOT / "README.md"
SWIFT_SAMPLES = REPO_ROOT / "Tests" / "FaultlineTests" / "ReadmeSampleTests.swift"
SCHEMA = json.loads((SCENARIOS_DIR / "faultline.schema.json").read_text())
DEADLINE_S = 10.0


@dataclass
class Block:
    line: int
    section: str
    language: str
    attributes: dict
    text: str


def readme_blocks():
    blocks, section, fence = [], "", None
    for number, line in enumerate(README.read_text().splitlines(), start=1):
        if fence is None and line.startswith("#"):
            section = line.lstrip("#").strip()
        if fence is None and line.startswith("```"):
            info = line[3:].split()
            attributes = dict(part.split("=", 1) if "=" in part else (part, True) for part in info[1:])
            fence = Block(number, section, info[0] if info else "", attributes, "")
        elif fence is not None and line.startswith("```"):
            blocks.append(fence)
            fence = None
        elif fence is not None:
            fence.text += line + "\n"
    assert fence is None, f"README.md:{fence.line}: unclosed code block"
    return blocks


BLOCKS = readme_blocks()
SECTIONS = list(dict.fromkeys(block.section for block in BLOCKS))


# -- matching transcripts --------------------------------------------------------------------------------

# An HTTP-date (IMF-fixdate, RFC 9110 §5.6.7): a sample's `Date: Tue, 01 Dec 2026 19:46:35 GMT` matches any date.
HTTP_DATE = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
                       r"\d\d:\d\d:\d\d GMT")


def normalized(text):
    return re.sub(r"\d+", "0", re.sub(r"\s+", "", HTTP_DATE.sub("<http-date>", text)))


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

def setup_broken_json(ctx):
    document = {"name": "broken", "routes": [
        {"id": "a", "match": {"path": "/a"}, "responses": [{"status": 200}, {"stauts": 201}]},
        {"id": "b", "match": {"path": "/b"}, "responses": [{"status": 200}]},
        {"id": "c", "match": {"path": "/c"}, "responses": [{"status": 1000}]},
    ]}
    (ctx.folder / "broken.json").write_text(json.dumps(document, indent=2))


def setup_verify_orders(ctx):
    """A client that retries a 503 too early (#7 after #6), and does not retry a 404 (#8)."""
    scenario = {"name": "orders", "expect": {"honorsRetryAfter": True, "noRetryOn4xx": True}, "routes": [
        {"id": "list", "match": {"path": "/orders"}, "responses": [{"json": []}]},
        {"id": "order", "match": {"path": "/orders/1"},
         "responses": [{"status": 503, "headers": {"Retry-After": "1"}}, {"json": {"id": 1}}]},
        {"id": "coupon", "match": {"path": "/coupons/{code}"}, "responses": [{"status": 404}]},
    ]}
    path = ctx.folder / "orders.json"
    path.write_text(json.dumps(scenario))
    server = ctx.serve(path, "--quiet")
    for _ in range(5):
        requests.get(f"{server.url}/orders", timeout=DEADLINE_S)
    assert requests.get(f"{server.url}/orders/1", timeout=DEADLINE_S).status_code == 503
    assert requests.get(f"{server.url}/orders/1", timeout=DEADLINE_S).status_code == 200
    assert requests.get(f"{server.url}/coupons/SAVE10", timeout=DEADLINE_S).status_code == 404  # and not retried


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


SETUPS = {"broken-json": setup_broken_json, "verify-orders": setup_verify_orders, "served": setup_served,
          "watch-edits": setup_watch_edits}


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
            assert current, f"README.md:{block.line}: output before the first $ command"
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
            f"README.md:{block.line}: `{command}` printed\n{actual}\nbut the README shows\n{expected}"


def run_sh(block, ctx):
    commands = [line for line in block.text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if all(line.startswith("make ") for line in commands):
        for line in commands:
            target = line.split("#")[0].split()
            dry = subprocess.run(["make", "-n", *target[1:]], cwd=REPO_ROOT, capture_output=True, text=True)
            assert dry.returncode == 0, f"README.md:{block.line}: `{line}` is not a make target: {dry.stderr}"
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
    sample = ctx.folder / "test_readme_sample.py"
    sample.write_text(block.text)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", sample.name],
                            cwd=ctx.folder, env=ctx.env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"README.md:{block.line}: the pytest sample failed\n{result.stdout}\n{result.stderr}"
    assert " passed" in result.stdout


def check_swift(block, ctx):
    if block.attributes.get("file") == "Package.swift":
        check_manifest(block, ctx)
        return
    source = SWIFT_SAMPLES.read_text()
    assert block.text.strip() in source, \
        f"README.md:{block.line}: the Swift sample must appear verbatim in {SWIFT_SAMPLES.relative_to(REPO_ROOT)}"


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
    assert result.returncode == 0, f"README.md:{block.line}: the manifest does not load:\n{result.stderr}"
    described = json.loads(result.stdout[result.stdout.index("{"):])
    wanted = {name for target in described["targets"] for name in target.get("product_dependencies", [])}
    ours = subprocess.run(["swift", "package", "describe", "--type", "json"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300, check=True).stdout
    products = {product["name"] for product in json.loads(ours[ours.index("{"):])["products"]}
    assert wanted and wanted <= products, f"README.md:{block.line}: {sorted(wanted - products)} are not products"


def check_json(block, ctx):
    text = block.text.strip()
    if text.startswith('"'):   # a fragment: the members of a scenario object
        text = '{"name": "readme", "routes": [{"id": "r", "match": {"path": "/r"}, "responses": [{}]}], ' + text + "}"
    document = json.loads(text)
    jsonschema.validate(document, SCHEMA)
    path = ctx.folder / f"readme-{block.line}.json"
    path.write_text(json.dumps(document))
    ctx.shell(f"faultline validate {path.name}")


def check_text(block, ctx):
    if "layout" in block.attributes:
        for line in block.text.splitlines():
            if line and not line.startswith(" "):
                assert (REPO_ROOT / line.split()[0]).exists(), f"README.md:{block.line}: {line.split()[0]} does not exist"
        return
    usage = " ".join(ctx.shell("faultline --help").stdout.split())
    synopsis = re.split(r"\n(?=faultline )", block.text.strip())
    for command in synopsis:
        assert " ".join(command.split()) in usage, f"README.md:{block.line}: `{command}` is not in faultline --help"


RUNNERS = {"console": run_console, "sh": run_sh, "python": run_python, "swift": check_swift, "json": check_json,
           "text": check_text}


def test_every_block_has_a_runner():
    for block in BLOCKS:
        assert block.language in RUNNERS, f"README.md:{block.line}: a code block needs one of {sorted(RUNNERS)}"
        setup = block.attributes.get("setup")
        assert setup is None or setup in SETUPS, f"README.md:{block.line}: unknown setup {setup}"


@pytest.mark.parametrize("section", SECTIONS)
def test_readme_section_samples(section, context):
    for block in (block for block in BLOCKS if block.section == section):
        if "setup" in block.attributes:
            SETUPS[block.attributes["setup"]](context)
        RUNNERS[block.language](block, context)
