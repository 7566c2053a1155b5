"""The per-request log on stderr: readable text by default, JSON lines with --log-format json, none with --quiet."""
import json
import re

import requests

SCENARIO = {"name": "logs", "routes": [
    {"id": "item", "match": {"path": "/items/{id}"}, "responses": [{"status": 503}, {"json": {"ok": True}}]},
]}


def finish(server):
    server.proc.terminate()
    assert server.wait_exit(timeout=10) == 0
    return server.stderr()


def test_text_log_has_one_line_per_request(start_faultline, write_scenario):
    server = start_faultline(write_scenario(SCENARIO))
    for _ in range(2):
        requests.get(f"{server.url}/items/7", timeout=5)
    requests.get(f"{server.url}/missing", timeout=5)
    server.wait_for(3, completed="true")
    lines = [line for line in finish(server).splitlines() if " #" in line]
    assert len(lines) == 3, lines
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} #1 GET /items/7 → 503 item\[0\] [\d.]+ ms completed", lines[0]), lines[0]
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} #2 GET /items/7 → 200 item\[1\] [\d.]+ ms completed", lines[1]), lines[1]
    assert "#3 GET /missing → 404 unmatched" in lines[2]
    assert "\x1b[" not in "".join(lines), "no colour when stderr is not a terminal"


def test_json_log_lines_are_journal_entries(start_faultline, write_scenario):
    server = start_faultline(write_scenario(SCENARIO), args=["--log-format", "json"])
    requests.get(f"{server.url}/items/1", timeout=5)
    server.wait_for(1, completed="true")
    entries = [json.loads(line) for line in finish(server).splitlines() if line.startswith("{")]
    assert [(e["sequence"], e["route"], e["response"]["status"], e["response"]["outcome"]) for e in entries] \
        == [(1, "item", 503, "completed")]


def test_quiet_logs_nothing_per_request(start_faultline, write_scenario):
    server = start_faultline(write_scenario(SCENARIO), args=["--quiet"])
    requests.get(f"{server.url}/items/1", timeout=5)
    server.wait_for(1, completed="true")
    assert " #1 " not in finish(server)
