"""Hot reload: `serve --watch` (inotify), SIGHUP, and POST /__faultline/scenarios/reload.

Reloads are all or nothing: a file that fails to load is reported with file, JSON path and message, and the
scenarios that were serving keep serving. Responses in flight finish as the old scripts planned them, and the
journal records which version of a scenario served each request.
"""

import json
import os
import signal
import socket
import time

import pytest
import requests


@pytest.fixture
def start_faultline(start_faultline_both_paths):
    """Every test here runs twice: with the Linux fast paths and with the portable ones (conftest.py)."""
    return start_faultline_both_paths

DEADLINE_S = 5.0


def scenario(say, name="greeting", delay_ms=0, status=200):
    step = {"status": status, "json": {"say": say}}
    if delay_ms:
        step["delayMs"] = delay_ms
    return {
        "name": name,
        "routes": [{"id": f"{name}-hello", "match": {"method": "GET", "path": f"/{name}"}, "responses": [step]}],
    }


def write_in_place(path, document):
    """Truncate and write, as `echo > file` or a plain editor save does."""
    with open(path, "w") as f:
        f.write(json.dumps(document))


def write_atomically(path, document):
    """Write a temporary file and rename it over the old one, as vim, VS Code and most tools save."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(document))
    os.replace(temporary, path)


def versions(server):
    return {s["name"]: s["version"] for s in server.admin_json("GET", "scenarios")["scenarios"]}


def wait_until(condition, what, timeout=DEADLINE_S):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.01)


def stderr_lines_with(server, text):
    return [line for line in server.stderr().splitlines() if text in line]


def get(server, path):
    return requests.get(f"{server.url}{path}", timeout=DEADLINE_S)


def test_watch_applies_an_edit_within_a_second(start_faultline, tmp_path):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    file = folder / "greeting.json"
    write_in_place(file, scenario("v1"))
    server = start_faultline(folder, args=["--watch", "--quiet"])
    assert get(server, "/greeting").json() == {"say": "v1"}
    mechanism = "polling" if start_faultline.portable else "inotify"
    # Written on stderr after the listening line on stdout: wait for it rather than read at once.
    wait_until(lambda: stderr_lines_with(server, f"watching the scenario files ({mechanism})"),
               f"the server to say it watches by {mechanism}", timeout=2.0)

    started = time.monotonic()
    write_in_place(file, scenario("v2"))
    wait_until(lambda: versions(server).get("greeting") == 2, "version 2 to be serving", timeout=1.0)
    elapsed = time.monotonic() - started
    assert get(server, "/greeting").json() == {"say": "v2"}
    assert elapsed < 1.0
    assert stderr_lines_with(server, f"reloaded (watch): greeting v2 ({file})")

    # An editor's save: a temporary file renamed over the old one.
    write_atomically(file, scenario("v3"))
    wait_until(lambda: versions(server).get("greeting") == 3, "version 3 after an atomic save", timeout=1.0)
    assert get(server, "/greeting").json() == {"say": "v3"}

    entries = server.journal(path="/greeting")
    assert [(e["response"]["status"], e["scenario"], e["scenarioVersion"]) for e in entries] == [
        (200, "greeting", 1), (200, "greeting", 2), (200, "greeting", 3)]


def test_watch_keeps_the_old_version_when_an_edit_is_broken(start_faultline, tmp_path):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    file = folder / "greeting.json"
    write_in_place(file, scenario("v1"))
    server = start_faultline(folder, args=["--watch", "--quiet"])

    write_in_place(file, scenario("broken", status=1000))
    line = wait_until(lambda: stderr_lines_with(server, "routes[0].responses[0].status"), "the error on stderr")
    assert f"{file}: routes[0].responses[0].status: 1000 is not an HTTP status" in line[0]
    assert "reload (watch) rejected; the previous scenarios keep serving" in server.stderr()
    assert get(server, "/greeting").json() == {"say": "v1"}
    assert versions(server) == {"greeting": 1}

    # Broken JSON is reported with its line and column; still the old version serves.
    file.write_text('{"name": "greeting", "routes": [')
    wait_until(lambda: stderr_lines_with(server, "line 1, column"), "the syntax error on stderr")
    assert get(server, "/greeting").json() == {"say": "v1"}

    # Fixing the file applies it.
    write_in_place(file, scenario("fixed"))
    wait_until(lambda: versions(server).get("greeting") == 2, "the fixed file to load")
    assert get(server, "/greeting").json() == {"say": "fixed"}


def test_watch_adds_and_removes_files_in_a_folder_and_ignores_other_files(start_faultline, tmp_path):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    write_in_place(folder / "greeting.json", scenario("hello"))
    server = start_faultline(folder, args=["--watch", "--quiet"])

    # Not scenario files: editor swap files, notes, schemas. None of them triggers a reload.
    (folder / ".greeting.json.swp").write_text("not json")
    (folder / "notes.txt").write_text("not a scenario")
    (folder / "faultline.schema.json").write_text("{}")
    write_in_place(folder / "farewell.json", scenario("bye", name="farewell"))
    wait_until(lambda: "farewell" in versions(server), "the new file to be served")
    assert get(server, "/farewell").json() == {"say": "bye"}
    reload_lines = stderr_lines_with(server, "reload")
    assert reload_lines == [f"faultline: reloaded (watch): farewell v1 ({folder / 'farewell.json'})"], reload_lines

    (folder / "farewell.json").unlink()
    wait_until(lambda: "farewell" not in versions(server), "the removed file's scenario to go")
    assert stderr_lines_with(server, "removed farewell")
    assert get(server, "/farewell").status_code == 404
    assert get(server, "/greeting").json() == {"say": "hello"}


def test_watching_a_single_file_ignores_its_neighbours(start_faultline, tmp_path):
    file = tmp_path / "greeting.json"
    write_in_place(file, scenario("v1"))
    server = start_faultline(file, args=["--watch", "--quiet"])
    write_in_place(tmp_path / "other.json", scenario("other", name="other"))
    write_in_place(file, scenario("v2"))
    wait_until(lambda: versions(server).get("greeting") == 2, "the watched file to reload")
    assert versions(server) == {"greeting": 2}, "a file next to the watched one is not served"


def test_a_response_in_flight_finishes_as_planned_across_a_reload(start_faultline, tmp_path):
    file = tmp_path / "greeting.json"
    write_in_place(file, scenario("old", delay_ms=1500))
    server = start_faultline(file, args=["--watch", "--quiet"])

    # Send a request whose 1.5 s delay is running while the file changes.
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE_S)
    connection.sendall(b"GET /greeting HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    server.wait_for(1, path="/greeting")
    write_in_place(file, scenario("new"))
    wait_until(lambda: versions(server).get("greeting") == 2, "the reload")
    assert get(server, "/greeting").json() == {"say": "new"}

    answer = b""
    while chunk := connection.recv(65536):
        answer += chunk
    connection.close()
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.endswith(b'{"say":"old"}')

    entries = server.wait_for(2, path="/greeting", completed=True)
    assert [(e["response"]["outcome"], e["scenarioVersion"]) for e in entries] == [("completed", 1), ("completed", 2)]


def test_sighup_reloads_on_demand_without_watch(start_faultline, tmp_path):
    file = tmp_path / "greeting.json"
    write_in_place(file, scenario("v1"))
    server = start_faultline(file, args=["--quiet"])
    write_in_place(file, scenario("v2"))
    server.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: versions(server).get("greeting") == 2, "the SIGHUP reload")
    assert get(server, "/greeting").json() == {"say": "v2"}
    assert stderr_lines_with(server, "reloaded (SIGHUP): greeting v2")

    # Nothing changed: nothing restarts, and it says so.
    server.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: stderr_lines_with(server, "reload (SIGHUP): no changes"), "the no-change line")
    assert versions(server) == {"greeting": 2}


def test_admin_reload_reports_changes_and_errors(start_faultline, tmp_path):
    file = tmp_path / "greeting.json"
    write_in_place(file, scenario("v1"))
    server = start_faultline(file, args=["--quiet"])

    unchanged = server.admin_json("POST", "scenarios/reload")
    assert unchanged == {"reloaded": False, "changed": [], "removed": [],
                         "scenarios": [{"name": "greeting", "version": 1, "source": str(file)}]}

    write_in_place(file, scenario("v2"))
    changed = server.admin_json("POST", "scenarios/reload")
    assert changed["reloaded"] is True
    assert changed["changed"] == [{"name": "greeting", "version": 2, "source": str(file)}]

    write_in_place(file, scenario("v3", status=99))
    rejected = server.admin_json("POST", "scenarios/reload", expect=400)
    assert rejected["errors"] == [{
        "file": str(file), "path": "routes[0].responses[0].status",
        "message": rejected["errors"][0]["message"],
        "description": f"{file}: routes[0].responses[0].status: {rejected['errors'][0]['message']}",
    }]
    assert "99" in rejected["errors"][0]["message"]
    assert get(server, "/greeting").json() == {"say": "v2"}

    # Going back to content seen before is a new version: versions only grow.
    write_in_place(file, scenario("v1"))
    assert server.admin_json("POST", "scenarios/reload")["changed"][0]["version"] == 3


def test_uploading_identical_content_keeps_the_version(start_faultline, tmp_path):
    file = tmp_path / "greeting.json"
    write_in_place(file, scenario("v1"))
    server = start_faultline(file, args=["--quiet"])
    server.admin_json("POST", "scenarios", json=scenario("uploaded"))
    assert versions(server) == {"greeting": 2}
    server.admin_json("POST", "scenarios", json=scenario("uploaded"))
    assert versions(server) == {"greeting": 2}, "the same document again is the same version"
    # A reload brings back the file, which differs from the upload: version 3.
    assert server.admin_json("POST", "scenarios/reload")["changed"] == [
        {"name": "greeting", "version": 3, "source": str(file)}]


def test_duplicate_scenario_names_are_rejected(run_cli, tmp_path):
    write_in_place(tmp_path / "a.json", scenario("a"))
    write_in_place(tmp_path / "b.json", scenario("b"))
    result = run_cli("validate", tmp_path)
    assert result.returncode == 1
    assert f"{tmp_path / 'b.json'}: name: duplicate scenario name \"greeting\"; {tmp_path / 'a.json'} has it too" \
        in result.stderr
