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


def logged_sequences(server):
    sequences = []
    for line in server.stderr().splitlines():
        match = re.search(r" #(\d+) ", line)
        if match:
            sequences.append(int(match.group(1)))
    return sequences


def test_lines_of_a_burst_of_delayed_responses_are_written_while_serving(start_faultline, write_scenario):
    """The lines are formatted as housekeeping, after the responses that fall due together (issue 30): each request
    still gets exactly one line, and they reach stderr while the server runs, not only when it stops."""
    import socket
    import time
    scenario = {"name": "burst", "routes": [
        {"id": "slow", "match": {"path": "/slow"}, "responses": [{"delayMs": 300, "text": "late"}]},
        {"id": "fast", "match": {"path": "/fast"}, "responses": [{"text": "now"}]},
    ]}
    server = start_faultline(write_scenario(scenario))
    clients = []
    try:
        for _ in range(400):
            client = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            client.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            clients.append(client)
        for _ in range(20):
            requests.get(f"{server.url}/fast", timeout=5)
        for client in clients:
            data = b""
            while b"late" not in data:
                chunk = client.recv(4096)
                assert chunk, data
                data += chunk
    finally:
        for client in clients:
            client.close()
    server.wait_for(420, timeout_ms=10000, completed="true")
    deadline = time.monotonic() + 5
    while len(logged_sequences(server)) < 420 and time.monotonic() < deadline:
        time.sleep(0.05)
    running = logged_sequences(server)
    assert server.proc.poll() is None
    assert sorted(running) == list(range(1, 421)), f"{len(running)} lines while serving"
    # Nothing more, and nothing twice, once it stops.
    finish(server)
    assert sorted(logged_sequences(server)) == list(range(1, 421))
