"""The `faultline` command line as a Python test harness sees it: exit codes, stdout and stderr."""

import json
import re
import selectors
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from conftest import FaultlineProcess, faultline_binary

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"

BROKEN = """{"name": "broken", "routes": [
  { "id": "r", "match": { "path": "/r" }, "responses": [ { "status": 200 }, { "stauts": 200 } ] },
  { "id": "s", "match": { "path": "/s" }, "responses": [ { "status": 1000 } ] }
]}"""


def test_validate_a_broken_file_names_file_and_json_path(run_cli, write_scenario):
    path = write_scenario(BROKEN, name="broken.json")
    result = run_cli("validate", path)
    assert result.returncode == 1, result
    lines = result.stderr.splitlines()
    assert f'{path}: routes[0].responses[1]: unknown key "stauts"; did you mean "status"?' in lines
    assert any(line.startswith(f"{path}: routes[1].responses[0].status: 1000") for line in lines), lines
    assert lines[-1] == "faultline: 2 problem(s) found"
    assert result.stdout == ""


def test_validate_the_bundled_scenarios(run_cli):
    result = run_cli("validate", SCENARIOS_DIR)
    assert result.returncode == 0, result.stderr
    files = [f for f in Path(SCENARIOS_DIR).glob("*.json") if not f.name.endswith(".schema.json")]
    assert len(files) >= 3
    resources = sum(len(json.loads(f.read_text()).get("resources", [])) for f in files)
    assert resources > 0
    assert re.fullmatch(rf"ok: {len(files)} scenario\(s\), \d+ route\(s\), {resources} resource\(s\)\n",
                        result.stdout), result.stdout


def test_version_matches_the_running_server(run_cli, faultline):
    result = run_cli("--version")
    assert result.returncode == 0
    match = re.fullmatch(r"faultline (\S+)\n", result.stdout)
    assert match, result.stdout
    assert faultline.admin_json("GET", "health")["version"] == match.group(1)


def test_help_and_usage_errors(run_cli):
    help_ = run_cli("--help")
    assert help_.returncode == 0
    assert "faultline serve" in help_.stdout
    bad = run_cli("serve", "--port", "nope")
    assert bad.returncode == 64
    assert "--port must be an integer" in bad.stderr


def test_serve_refuses_a_broken_file_with_exit_1(run_cli, write_scenario):
    path = write_scenario(BROKEN, name="broken.json")
    result = run_cli("serve", path, "--port", "0", timeout=10)
    assert result.returncode == 1
    assert "listening on" not in result.stdout
    assert f"{path}: routes[0].responses[1]" in result.stderr


def test_serve_on_a_port_in_use_exits_2(run_cli, faultline):
    result = run_cli("serve", SCENARIOS_DIR, "--port", faultline.port, timeout=10)
    assert result.returncode == 2, result
    assert "listening on" not in result.stdout
    assert result.stderr.strip(), "the reason is on stderr"
    assert faultline.admin_json("GET", "health")["status"] == "ok", "the first server is unharmed"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_cleanly_on_signals(start_faultline, signum):
    server = start_faultline()  # the fixture has already made one admin round trip
    server.proc.send_signal(signum)
    assert server.wait_exit(timeout=10) == 0, server.stderr()


def test_signal_right_after_the_listening_line_still_exits_0(faultline_bin, tmp_path):
    codes = []
    for attempt in range(20):
        process = subprocess.Popen([faultline_bin, "serve", str(SCENARIOS_DIR), "--port", "0"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            ready = selectors.DefaultSelector()
            ready.register(process.stdout, selectors.EVENT_READ)
            assert ready.select(timeout=10), "no listening line within 10 s"
            ready.close()
            assert process.stdout.readline().startswith(b"listening on http://127.0.0.1:")
            process.send_signal(signal.SIGTERM if attempt % 2 else signal.SIGINT)
            codes.append(process.wait(timeout=10))
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
            process.stdout.close()
    assert codes == [0] * 20


def test_an_unknown_command_or_option_suggests_the_nearest(run_cli):
    command = run_cli("serv")
    assert command.returncode == 64
    assert 'unknown command "serv"; did you mean "serve"?' in command.stderr
    option = run_cli("serve", "--tls-prot", "0")
    assert option.returncode == 64
    assert option.stderr.splitlines() == ["faultline: serve: unknown option --tls-prot; did you mean --tls-port?",
                                          "(see faultline serve --help)"]
    elsewhere = run_cli("verify", "--tls-port", "0")
    assert elsewhere.returncode == 64
    assert "verify: unknown option --tls-port (an option of serve)" in elsewhere.stderr
    value = run_cli("serve", "--conditions", "edg")
    assert value.returncode == 64
    assert 'got "edg"; did you mean "edge"?' in value.stderr


def test_command_help_is_that_commands_only(run_cli):
    serve = run_cli("serve", "--help")
    assert serve.returncode == 0, serve.stderr
    assert serve.stdout.startswith("faultline serve [PATHS…]")
    for option in ("--tls-port N", "--conditions NAME", "--watch, -w", "--tls-dir DIR"):
        assert f"\n  {option}" in serve.stdout, option
    assert "--junit" not in serve.stdout and "EXIT CODES" not in serve.stdout
    assert run_cli("help", "serve").stdout == serve.stdout
    full = run_cli("--help").stdout
    assert "--junit" in full and "EXIT CODES" in full
    assert run_cli("help").stdout == full
    assert [line for line in full.splitlines() if line.startswith("  --tls-dir ")] == [
        next(line for line in serve.stdout.splitlines() if line.startswith("  --tls-dir "))]


def test_validate_the_bundled_scenarios_through_the_shell_glob(run_cli):
    files = sorted(str(f) for f in Path(SCENARIOS_DIR).glob("*.json"))
    schemas = [f for f in files if f.endswith(".schema.json")]
    assert schemas, "the bundled folder ships its schema"
    result = run_cli("validate", *files)
    assert result.returncode == 0, result.stderr
    assert result.stdout == run_cli("validate", SCENARIOS_DIR).stdout
    assert result.stderr.splitlines() == [
        f"faultline: skipped {schema}: a JSON Schema (*.schema.json), not a scenario" for schema in schemas]


SHADOWING_CATALOGUE = {"name": "catalogue", "routes": [
    {"id": "a", "match": {"method": "GET", "path": "/v1/products/{id}"}, "responses": [{"status": 200}]}]}
SHADOWED_SHOP = {"name": "shop", "routes": [
    {"id": "b", "match": {"method": "GET", "path": "/v1/products/7"}, "responses": [{"status": 404}]},
    {"id": "c", "match": {"method": "GET", "path": "/v1/products/{id}", "headers": {"X-A": "1"}},
     "responses": [{"status": 201}]},
    {"id": "d", "match": {"method": "POST", "path": "/v1/products/7"}, "responses": [{"status": 202}]}]}


def test_a_shadowed_route_is_a_warning_from_validate_and_serve(run_cli, write_scenario, start_faultline):
    catalogue = write_scenario(SHADOWING_CATALOGUE, name="catalogue.json")
    shop = write_scenario(SHADOWED_SHOP, name="shop.json")
    warnings = [f'faultline: warning: route "{route}" ({shop}) can never match: '
                f'route "a" ({catalogue}) matches every request it would' for route in ("b", "c")]
    result = run_cli("validate", catalogue, shop)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok: 2 scenario(s), 4 route(s)\n"
    assert result.stderr.splitlines() == warnings
    # The other way round, shop's routes come first and nothing is shadowed.
    assert run_cli("validate", shop, catalogue).stderr == ""
    server = start_faultline(catalogue, shop, args=["--quiet"])
    assert server.stderr().splitlines()[:2] == warnings


# -- serve with no scenarios, --empty, the summary at shutdown ------------------------------------------------------

def serve_in(folder, *args):
    return subprocess.run([faultline_binary(), "serve", "--port", "0", *map(str, args)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=10, cwd=folder)


def test_serve_with_no_scenarios_says_what_it_looked_for(tmp_path):
    missing = serve_in(tmp_path)
    assert missing.returncode == 1, missing
    assert "listening on" not in missing.stdout
    lines = missing.stderr.splitlines()
    assert lines[0] == ("faultline: not serving: no scenarios: no PATHS given, and there is no ./scenarios folder "
                        "to serve by default")
    assert "`faultline init`" in lines[1] and "`faultline serve --empty`" in lines[1], lines
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "faultline.schema.json").write_text("{}")
    empty = serve_in(tmp_path)
    assert empty.returncode == 1, empty
    assert empty.stderr.splitlines()[0] == ("faultline: not serving: found no *.json scenario in ./scenarios "
                                            "(the default) (*.schema.json files are not scenarios)")
    assert "`faultline init`" in empty.stderr
    named = serve_in("/", tmp_path / "scenarios")
    assert named.returncode == 1, named
    assert named.stderr.startswith(f"faultline: not serving: found no *.json scenario in {tmp_path}/scenarios (")
    # A folder with a broken file is a broken file, not an empty folder.
    (tmp_path / "scenarios" / "broken.json").write_text(BROKEN)
    broken = serve_in(tmp_path)
    assert broken.returncode == 1 and "routes[0].responses[1]" in broken.stderr and "init" not in broken.stderr


LATE = {"name": "late", "routes": [
    {"id": "late", "match": {"method": "GET", "path": "/late"}, "responses": [{"status": 200, "json": {"late": True}}]}]}


def test_serve_empty_starts_with_none_and_loads_over_the_admin_api(tmp_path):
    server = FaultlineProcess([faultline_binary(), "serve", "--empty", "--port", "0"], tmp_path / "empty.stderr")
    try:
        server.wait_listening()
        assert server.admin_json("GET", "scenarios")["scenarios"] == []
        assert requests.get(f"{server.url}/late", timeout=10).status_code == 404
        assert server.admin_json("POST", "scenarios", json=LATE)["loaded"] == ["late"]
        answer = requests.get(f"{server.url}/late", timeout=10)
        assert answer.status_code == 200 and answer.json() == {"late": True}
        assert "no scenarios (--empty): load them with POST" in server.stderr()
    finally:
        assert server.stop() == 0, server.stderr()


def test_serve_empty_takes_no_paths(run_cli):
    with_paths = run_cli("serve", "--empty", SCENARIOS_DIR)
    assert with_paths.returncode == 64
    assert f'serve: --empty starts with no scenarios, so it takes no PATHS; got "{SCENARIOS_DIR}"' in with_paths.stderr
    watching = run_cli("serve", "--empty", "--watch")
    assert watching.returncode == 64 and "--watch watches scenario files, and --empty has none" in watching.stderr


BUSY = {"name": "busy", "expect": {"honorsRetryAfter": True}, "routes": [
    {"id": "ok", "match": {"path": "/ok"}, "responses": [{"status": 200}]},
    {"id": "busy", "match": {"path": "/busy"},
     "responses": [{"status": 429, "headers": {"Retry-After": "5"}}, {"status": 200}]}]}


def test_serve_prints_one_summary_line_when_it_stops(start_faultline, write_scenario):
    busy = write_scenario(BUSY)
    faults = SCENARIOS_DIR / "connection-faults.json"
    for args in ([], ["--quiet"]):
        server = start_faultline(busy, faults, args=args)
        assert requests.get(f"{server.url}/ok", timeout=10).status_code == 200
        assert requests.get(f"{server.url}/busy", timeout=10).status_code == 429
        assert requests.get(f"{server.url}/busy", timeout=10).status_code == 200  # 5 s too early
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{server.url}/faults/reset", timeout=10)
        server.wait_for(4)
        assert server.stop() == 0, server.stderr()
        last = server.stderr().splitlines()[-1]
        summary = ("faultline: served 4 requests (3 completed, 1 reset-sent); "
                   "verdicts: 1 of 1 failed (honorsRetryAfter)")
        if args:
            assert summary not in server.stderr() and not last.startswith("faultline: served"), last
        else:
            assert last == summary


def test_the_summary_counts_evicted_requests_and_follows_a_shutdown_request(start_faultline):
    server = start_faultline(SCENARIOS_DIR / "flaky-catalogue.json", args=["--max-journal", "1"])
    for _ in range(3):
        assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200
    assert server.admin("POST", "shutdown").status_code == 202
    assert server.wait_exit(timeout=10) == 0, server.stderr()
    assert server.stderr().splitlines()[-1] == \
        "faultline: served 3 requests (3 completed); verdicts: all 3 passed (3 inconclusive)"


def test_the_summary_of_a_single_verdict_says_1_passed(start_faultline, write_scenario):
    server = start_faultline(write_scenario(BUSY))
    assert requests.get(f"{server.url}/ok", timeout=10).status_code == 200
    server.wait_for(1)
    assert server.stop() == 0, server.stderr()
    assert server.stderr().splitlines()[-1] == \
        "faultline: served 1 request (1 completed); verdicts: 1 passed (1 inconclusive)"
