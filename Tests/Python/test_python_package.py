"""The Python package in packaging/python: the library API, the pytest plugin (run in pytester's subprocesses, with
the package on PYTHONPATH, not installed), its version against the Swift side's, a wheel built and installed
into a fresh venv, and dist/'s platform wheel (when `make dist` has made one) running its bundled binary.

Only this file loads pytester (`pytest_plugins` below); the other test files neither use nor see its fixtures."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from conftest import faultline_binary

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "packaging" / "python"
SRC = PACKAGE / "src"
SWIFT_VERSION_FILE = ROOT / "Sources" / "Faultline" / "Server" / "FaultlineServer.swift"

sys.path.insert(0, str(SRC))
import faultline  # noqa: E402  (the package under test, from the source tree)

# A scenario whose verdicts a well-behaved client passes conclusively: /v1/products/{id} answers 503 with
# Retry-After: 0 once, then 200; /v1/busy/{id} asks for 5 s, which an impatient client does not wait.
CATALOGUE = {
    "name": "catalogue",
    "expect": {"honorsRetryAfter": True},
    "routes": [
        {"id": "product", "match": {"method": "GET", "path": "/v1/products/{id}"},
         "responses": [{"status": 503, "headers": {"Retry-After": "0"}, "json": {"error": "busy"}, "times": 1},
                       {"status": 200, "json": {"id": "{{path.id}}"}}],
         "afterLast": "repeat-last"},
        {"id": "busy", "match": {"method": "GET", "path": "/v1/busy/{id}"},
         "responses": [{"status": 503, "headers": {"Retry-After": "5"}, "json": {"error": "busy"}, "times": 1},
                       {"status": 200, "json": {"id": "{{path.id}}"}}],
         "afterLast": "repeat-last"},
    ],
}

# The inner suites' client under test: `get` waits as Retry-After asks, `get_impatiently` does not.
CLIENT_CONFTEST = '''
import time
import urllib.error
import urllib.request


def get(url, attempts=3, patient=True):
    for _ in range(attempts):
        try:
            return urllib.request.urlopen(url, timeout=5).status
        except urllib.error.HTTPError as error:
            if error.code != 503:
                return error.code
            if patient:
                time.sleep(float(error.headers.get("Retry-After", "1")))
    return 503


def get_impatiently(url):
    return get(url, patient=False)
'''

PLUGIN_ARGS = ("-p", "faultline.pytest_plugin", "-p", "no:cacheprovider")
# The inner pytests load no plugin by entry point: importing the installed ones (schemathesis, hypothesis) costs
# seconds per run, and the plugin under test is named with -p.
NO_AUTOLOAD = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
_binary = None


def binary():
    """$FAULTLINE_BIN as the suite was started with (tests below unset it)."""
    global _binary
    if _binary is None:
        _binary = faultline_binary()
    return _binary


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: /proc says so (Linux); elsewhere, kill(0) succeeding is taken as alive.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True


@pytest.fixture
def suite(pytester, monkeypatch):
    """A pytester folder with the client helpers (conftest.py) and scenarios/catalogue.json, and the package on
    PYTHONPATH for the inner pytest's subprocess. `suite.run(*args)` runs it with the plugin."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("FAULTLINE_BIN", binary())
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(CLIENT_CONFTEST)
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "catalogue.json").write_text(json.dumps(CATALOGUE))

    def run(*args, timeout=60):
        return pytester.runpytest_subprocess(*PLUGIN_ARGS, *args, timeout=timeout)

    pytester.run_suite = run
    return pytester


def read_pids(path):
    return [int(line.split()[0]) for line in Path(path).read_text().splitlines()]


# -- the version ------------------------------------------------------------------------------------------------


def test_the_package_version_is_the_swift_version_and_the_binarys(run_cli):
    swift = re.search(r'static let version = "([^"]+)"', SWIFT_VERSION_FILE.read_text()).group(1)
    assert faultline.__version__ == swift, (
        f"packaging/python/src/faultline/_version.py says {faultline.__version__}, {SWIFT_VERSION_FILE.name} "
        f"says {swift}: run `python3 packaging/python/sync_version.py`")
    printed = run_cli("--version")
    assert printed.returncode == 0 and printed.stdout.split() == ["faultline", swift], printed.stdout
    check = subprocess.run([sys.executable, str(PACKAGE / "sync_version.py"), "--check"], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr
    # pyproject.toml reads the version from that one file, not a copy of its own.
    assert 'version = { attr = "faultline._version.__version__" }' in (PACKAGE / "pyproject.toml").read_text()


# -- the library, without pytest's plugin -----------------------------------------------------------------------


def fetch(url):
    try:
        return urllib.request.urlopen(url, timeout=5).status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_library_api_starts_serves_judges_and_stops(tmp_path):
    with faultline.Server(scenarios=[CATALOGUE], tls=True) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.https_url.startswith("https://127.0.0.1:")
        assert server.health()["status"] == "ok"
        assert [fetch(server.url + "/v1/products/1") for _ in range(2)] == [503, 200]
        entries = server.wait_for(2, route="product", completed=True)
        first = entries[0]
        assert isinstance(first, faultline.Entry)
        assert (first.sequence, first.method, first.path, first.status, first.route, first.step, first.outcome) == (
            1, "GET", "/v1/products/1", 503, "product", 0, "completed")
        assert first.header("user-agent").startswith("Python-urllib") and ("Host", first.header("Host")) in first.headers
        assert first.protocol == "http/1.1" and isinstance(first.connection, int) and first.raw["sequence"] == 1
        assert re.fullmatch(r"#1 GET /v1/products/1 → 503 · completed · \d+\.\d ms · connection \d+", first.short())
        assert [e.status for e in server.requests(matched=True, status=200)] == [200]
        with pytest.raises(TimeoutError, match=r"(?s)waited 0.2 s for 3 journal entries \(route=product\); saw 2:"
                                               r".*#1 GET /v1/products/1 → 503"):
            server.wait_for(3, timeout=0.2, route="product")

        report = server.assert_verdicts()
        assert isinstance(report, faultline.Report) and report.passed and report.outcome == "pass"
        assert [(v.rule, v.outcome) for v in report.verdicts] == [("honorsRetryAfter", "pass")]

        # load: a dict replaces (add=False), a path adds; a bad one is refused with its problem, and keeps serving.
        server.load({"name": "other", "routes": [{"id": "ok", "match": {"path": "/ok"}, "responses": [{"status": 204}]}]})
        assert [s["name"] for s in server.scenarios_loaded()] == ["other"]
        path = tmp_path / "catalogue.json"
        path.write_text(json.dumps(CATALOGUE))
        server.load(path, add=True)
        assert [s["name"] for s in server.scenarios_loaded()] == ["other", "catalogue"]
        with pytest.raises(faultline.FaultlineError, match="is not an HTTP status"):
            server.load({"name": "bad", "routes": [{"id": "x", "match": {"path": "/x"}, "responses": [{"status": 1000}]}]})
        assert fetch(server.url + "/ok") == 204

        server.reset()
        assert server.requests() == []
        assert server.report().verdicts[0].outcome == "inconclusive"
        with pytest.raises(AssertionError, match="INCONCLUSIVE  catalogue/honorsRetryAfter"):
            server.assert_verdicts()
        assert server.assert_verdicts(strict=False).outcome == "inconclusive"
        pid = server.pid
    assert server.exit_code == 0, server.stderr()
    assert not alive(pid)


def test_a_server_that_cannot_start_says_why_with_its_stderr():
    bad = {"name": "bad", "routes": [{"id": "x", "match": {"path": "/x"}, "responses": [{"status": 1000}]}]}
    with pytest.raises(faultline.FaultlineError) as raised:
        with faultline.Server(scenarios=[bad]):
            pass
    message = str(raised.value)
    assert "faultline did not start: it exited with code 1" in message
    assert "routes[0].responses[0].status: 1000 is not an HTTP status" in message  # from its stderr


# -- the plugin -------------------------------------------------------------------------------------------------


def test_a_three_line_test_passes(suite):
    suite.makepyfile(test_client='''
        import pytest
        from conftest import get

        @pytest.mark.faultline("scenarios/catalogue.json")
        def test_client_retries_through_503(faultline):
            assert get(faultline.url + "/v1/products/1") == 200
            faultline.assert_verdicts()
    ''')
    result = suite.run_suite()
    result.assert_outcomes(passed=1)


def test_a_violated_verdict_fails_with_its_sentence_and_evidence_and_the_server_is_stopped(suite, tmp_path):
    pids = tmp_path / "pids"
    reports = tmp_path / "reports"
    suite.makepyfile(test_client=f'''
        import pytest
        from conftest import get_impatiently

        @pytest.mark.faultline("scenarios/catalogue.json")
        def test_client_waits_as_asked(faultline):
            open({str(pids)!r}, "a").write(f"{{faultline.pid}}\\n")
            get_impatiently(faultline.url + "/v1/busy/1")
            faultline.assert_verdicts()

        @pytest.mark.faultline("scenarios/catalogue.json")
        def test_that_raises(faultline):
            open({str(pids)!r}, "a").write(f"{{faultline.pid}}\\n")
            raise RuntimeError("the client under test blew up")
    ''')
    result = suite.run_suite("--faultline-report", str(reports))
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*AssertionError: faultline: 1 of 1 verdict(s) failed",
        "*FAIL  catalogue/honorsRetryAfter: request #2 came * ms after #1, whose Retry-After asked for 5000 ms",
        "*    #1 GET /v1/busy/1 → 503 · completed · * ms · connection *",
        "*    #2 GET /v1/busy/1 → 200 · completed · * ms · connection *",
    ])
    result.stdout.fnmatch_lines(["*RuntimeError: the client under test blew up"])
    started = read_pids(pids)
    assert len(started) == 2 and len(set(started)) == 2
    assert [pid for pid in started if alive(pid)] == [], "a server outlived its failing test"
    # --faultline-report: each failing test's HTML report.
    written = sorted(p.name for p in reports.iterdir())
    assert written == ["test_client.py_test_client_waits_as_asked.html", "test_client.py_test_that_raises.html"]
    assert "<html" in (reports / written[0]).read_text()[:2000].lower()


def test_marker_paths_are_relative_to_the_test_file_and_args_reach_serve(suite):
    folder = suite.path / "tests" / "api"
    (folder / "scen").mkdir(parents=True)
    (folder / "scen" / "flaky.json").write_text(json.dumps(CATALOGUE))
    (folder / "more").mkdir()
    other = {"name": "other", "routes": [{"id": "ok", "match": {"path": "/ok"}, "responses": [{"status": 204}]}]}
    (folder / "more" / "other.json").write_text(json.dumps(other))
    (folder / "test_marker.py").write_text('''
import urllib.request
import pytest

@pytest.mark.faultline("scen/flaky.json", "more/", args=["--max-journal", "2"])
def test_both_scenarios_and_a_journal_of_two(faultline):
    assert sorted(s["name"] for s in faultline.scenarios_loaded()) == ["catalogue", "other"]
    for _ in range(3):
        urllib.request.urlopen(faultline.url + "/ok")
    assert [e.sequence for e in faultline.requests()] == [2, 3]
''')
    result = suite.run_suite()  # from the pytester folder: the paths must not be read against the cwd
    result.assert_outcomes(passed=1)


def test_the_ini_option_and_the_session_fixture_share_one_server(suite, tmp_path):
    pids = tmp_path / "pids"
    suite.makeini("[pytest]\nfaultline_scenarios = scenarios\n")
    folder = suite.path / "tests"
    folder.mkdir()
    (folder / "test_session.py").write_text(f'''
import pytest
from conftest import get

@pytest.mark.parametrize("product", ["1", "2", "3"])
def test_each_product(faultline_session, product):
    open({str(pids)!r}, "a").write(f"{{faultline_session.pid}} {{faultline_session.url}}\\n")
    assert get(faultline_session.url + "/v1/products/" + product) == 200

def test_the_journal_holds_every_tests_requests(faultline_session):
    # one 503 (the route's script is shared: only its first request gets it), then a 200 for each
    assert [e.status for e in faultline_session.requests(route="product")] == [503, 200, 200, 200]
    faultline_session.assert_verdicts()

def test_the_function_fixture_reads_the_ini_option_too(faultline):
    assert [s["name"] for s in faultline.scenarios_loaded()] == ["catalogue"]
''')
    result = suite.run_suite()
    result.assert_outcomes(passed=5)
    lines = Path(pids).read_text().splitlines()
    assert len(lines) == 3 and len(set(lines)) == 1, lines
    assert not alive(read_pids(pids)[0]), "the session's server outlived the session"


def test_no_binary_is_an_error_naming_the_four_places(suite, tmp_path, monkeypatch):
    binary()
    monkeypatch.delenv("FAULTLINE_BIN")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    suite.makepyfile(test_client='''
        def test_uses_the_fixture(faultline):
            pass
    ''')
    result = suite.run_suite()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "*BinaryNotFound: no faultline executable found; looked in, in order:",
        "*1. --faultline-binary: not given",
        "*2. $FAULTLINE_BIN: not set",
        "*3. the binary bundled in the package: */faultline/bin/faultline (absent)",
        "*4. faultline on PATH: not found",
    ])
    # A path that is named but not there is an error too, rather than a fall-through to another binary.
    result = suite.run_suite("--faultline-binary", str(tmp_path / "nowhere"))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*--faultline-binary {tmp_path / 'nowhere'} is not an executable file*"])
    # --faultline-binary comes first, and binary_path() in a test sees it.
    suite.makepyfile(test_client=f'''
        import faultline as package

        def test_uses_the_option(faultline):
            assert package.binary_path() == {binary()!r}
            assert faultline.health()["status"] == "ok"
    ''')
    result = suite.run_suite("--faultline-binary", binary())
    result.assert_outcomes(passed=1)


def test_binary_path_order(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "faultline"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.delenv("FAULTLINE_BIN", raising=False)
    assert faultline.binary_path() == str(fake)                      # 4: PATH
    monkeypatch.setenv("FAULTLINE_BIN", binary())
    assert faultline.binary_path() == binary()              # 2 before 4
    assert faultline.binary_path(str(fake)) == str(fake)              # 1 before 2
    assert not faultline.BUNDLED.exists(), "a binary in the source tree's src/faultline/bin would shadow PATH"


MY_CLIENT = '''
import json
import time
import urllib.error
import urllib.request


def get_product(base_url, product_id, attempts=4):
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(f"{base_url}/v1/products/{product_id}", timeout=5) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            if error.code != 503:
                raise
            time.sleep(float(error.headers.get("Retry-After", "1")))
    raise RuntimeError("gave up")
'''


def package_readme_sample():
    """The first python block of packaging/python/README.md. (docs/testing.md's plugin sample is run by
    test_doc_samples.py, with the package on PYTHONPATH.)"""
    package = (PACKAGE / "README.md").read_text()
    return package.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_package_readme_sample_passes_against_the_bundled_scenario(suite):
    sample = package_readme_sample()
    assert sample.count("\n") <= 10 and "faultline.assert_verdicts" in sample
    shutil.copy(ROOT / "scenarios" / "flaky-catalogue.json", suite.path / "scenarios")
    suite.makepyfile(my_client=MY_CLIENT, test_sample=sample)
    result = suite.run_suite()
    result.assert_outcomes(passed=1)


# -- the wheel --------------------------------------------------------------------------------------------------


def test_the_wheel_installs_into_a_fresh_venv_and_its_plugin_loads_by_entry_point(tmp_path):
    missing = [name for name in ("setuptools", "wheel") if subprocess.run(
        [sys.executable, "-c", f"import {name}"], capture_output=True).returncode != 0]
    assert not missing, f"{missing} not importable: run scripts/ensure-deps.sh test"
    # Built from a copy, so that setuptools' build/ and *.egg-info never land in the checkout.
    source = tmp_path / "source"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", str(source), "-w", str(wheels)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = list(wheels.glob("faultline-*.whl"))
    assert wheel.name == f"faultline-{faultline.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "[pytest11]\nfaultline = faultline.pytest_plugin" in entry_points
    assert "faultline/pytest_plugin.py" in names and "faultline/py.typed" in names
    assert "Requires-Dist" not in metadata and "Requires-Python: >=3.9" in metadata

    # A fresh venv that sees this Python's pytest (--system-site-packages) but not the source tree; pip from the
    # base installation where the venv has none of its own (--without-pip needs no ensurepip: Debian's python3-venv).
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(NO_AUTOLOAD, FAULTLINE_BIN=binary())
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-deps", "-q",
                                "--disable-pip-version-check", str(wheel)],
                               capture_output=True, text=True, env=env, timeout=120)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    where = subprocess.run([str(python), "-c", "import faultline; print(faultline.__file__)"], capture_output=True,
                           text=True, env=env, cwd=tmp_path)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr

    project = tmp_path / "project"
    (project / "scenarios").mkdir(parents=True)
    ping = {"name": "ping", "routes": [{"id": "ping", "match": {"path": "/ping"}, "responses": [{"status": 204}]}]}
    (project / "scenarios" / "ping.json").write_text(json.dumps(ping))
    (project / "test_installed.py").write_text('''import urllib.request

def test_the_fixture_from_the_installed_wheel(faultline):
    assert urllib.request.urlopen(faultline.url + "/ping").status == 204
    assert [entry.route for entry in faultline.requests()] == ["ping"]
''')
    # `-p faultline` names the wheel's pytest11 entry point (autoloading is off, as above): without the entry point
    # pytest would import the package itself as the plugin, which has no fixtures. The fixture serves ./scenarios,
    # the binary's default.
    ran = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "faultline", "-p", "no:cacheprovider"],
                         capture_output=True, text=True, env=env, cwd=project, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout


def test_the_dist_wheel_runs_its_bundled_binary_in_a_fresh_venv(tmp_path):
    """dist/'s platform wheel (scripts/dist-wheel.sh, `make dist`), where there is one of this version: installed into
    a fresh venv, the fixture runs the binary it bundles, with no $FAULTLINE_BIN and no faultline or swift on PATH.
    scripts/dist-check-wheel.sh proves the same wheel in a Debian root without Swift; this is the quick look."""
    wheels = sorted((ROOT / "dist").glob("faultline-*-py3-none-manylinux_*.whl"))
    if not wheels:
        pytest.skip("no dist/faultline-*-py3-none-manylinux_*.whl: `make dist` builds it (not part of make test)")
    ours = [w for w in wheels if w.name.startswith(f"faultline-{faultline.__version__}-")]
    if not ours:
        pytest.skip(f"dist/ has {[w.name for w in wheels]}, none of version {faultline.__version__}: a stale "
                    "`make dist`")
    [wheel] = ours
    with zipfile.ZipFile(wheel) as archive:
        stored = archive.getinfo("faultline/bin/faultline").external_attr >> 16
        assert stored & 0o111, f"faultline/bin/faultline is stored with mode {stored & 0o7777:o}"
        assert any(n.startswith("faultline.libs/") for n in archive.namelist())

    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    # PATH: the venv's bin/ and the system's, none of whose folders has a faultline or a swift.
    path = os.pathsep.join(str(d) for d in [venv / "bin", Path("/usr/bin"), Path("/bin")]
                           if not any((d / name).exists() for name in ("faultline", "swift")))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "FAULTLINE_BIN")}
    env.update(NO_AUTOLOAD, PATH=path)
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-deps", "-q",
                                "--disable-pip-version-check", str(wheel)],
                               capture_output=True, text=True, env=env, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    found = subprocess.run([str(python), "-c", "import faultline; print(faultline.binary_path())"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    bundled = found.stdout.strip()
    assert found.returncode == 0 and bundled.startswith(str(venv)) and bundled.endswith("faultline/bin/faultline"), (
        found.stdout + found.stderr)
    assert os.access(bundled, os.X_OK)

    project = tmp_path / "project"
    (project / "scenarios").mkdir(parents=True)
    shutil.copy(ROOT / "scenarios" / "flaky-catalogue.json", project / "scenarios")
    (project / "my_client.py").write_text(MY_CLIENT)
    sample = package_readme_sample()
    (project / "test_sample.py").write_text(sample)
    ran = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "faultline", "-p", "no:cacheprovider"],
                         capture_output=True, text=True, env=env, cwd=project, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout


# -- found while writing the package ----------------------------------------------------------------------------


# urllib sends Connection: close, which once crashed the server answering shutdown (fixed in HTTP1Connection.perform).
def test_shutdown_on_a_connection_the_client_closes_exits_0(tmp_path):
    with faultline.Server(scenarios=[CATALOGUE]) as server:
        request = urllib.request.Request(server.url + "/__faultline/shutdown", data=b"", method="POST")
        urllib.request.urlopen(request, timeout=5).read()   # urllib always sends Connection: close
        server._proc.wait(timeout=10)
        code = server._proc.returncode
    assert code == 0
