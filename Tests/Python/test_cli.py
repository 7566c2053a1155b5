"""The `faultline` command line as a Python test harness sees it: exit codes, stdout and stderr."""

import json
import re
import selectors
import signal
import subprocess
from pathlib import Path

import pytest

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
