"""The exchange layer's two correctness fixes, end to end with real clients: a client that leaves during a
delay is noticed when it leaves, and requests that reach a connection the policy is closing are journaled."""
import json
import subprocess
import time

import pytest


@pytest.fixture
def start_faultline(start_faultline_both_paths):
    """Every test here runs twice: with the Linux fast paths and with the portable ones (conftest.py)."""
    return start_faultline_both_paths


@pytest.fixture
def delayed(start_faultline, write_scenario):
    path = write_scenario({
        "name": "delays",
        "routes": [
            {"id": "slow", "match": {"path": "/slow"}, "responses": [{"delayMs": 5000, "json": {"ok": True}}]},
            {"id": "quick-slow", "match": {"path": "/quick-slow"},
             "responses": [{"delayMs": 400, "text": "slow"}]},
        ],
    })
    return start_faultline(path)


def test_curl_that_times_out_during_a_delay_is_journaled_as_client_closed_when_it_leaves(delayed):
    started = time.monotonic()
    result = subprocess.run(["curl", "-s", "-m", "1", f"http://127.0.0.1:{delayed.port}/slow"],
                            capture_output=True, timeout=10)
    assert result.returncode == 28, result  # curl: operation timed out
    entry, = delayed.wait_for(1, route="slow", completed=True, timeout_ms=3000)
    noticed = time.monotonic() - started
    assert noticed < 3, f"noticed after {noticed:.1f} s: the server waited out the 5 s delay"
    response = entry["response"]
    assert response["outcome"] == "client-closed"
    assert response["bytesWritten"] == 0 and response["status"] is None, "nothing was written"
    assert 900 <= response["durationMs"] < 1500, response


def test_a_client_that_half_closes_during_a_delay_still_gets_its_response(delayed, raw_connect):
    connection = raw_connect(delayed.port)
    connection.send("GET /quick-slow HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.1)  # FIN arrives during the delay, not with the request (not a wait for a condition)
    connection.shutdown_write()
    data, closed = connection.read_until_close(timeout=5)
    assert closed is True
    responses, rest = connection.parse(data)
    assert [r.body for r in responses] == [b"slow"] and rest == b""
    entry, = delayed.wait_for(1, route="quick-slow", completed=True)
    assert entry["response"]["outcome"] == "completed"


@pytest.fixture
def policy(start_faultline, write_scenario):
    path = write_scenario({
        "name": "policy",
        "connections": {"maxRequests": 1},
        "routes": [{"id": "item", "match": {"path": "/item"}, "responses": [{"json": {"ok": True}}]}],
    })
    return start_faultline(path)


def test_requests_on_a_connection_closed_by_policy_are_journaled_and_the_last_response_is_marked(
        policy, raw_connect):
    # Two requests in one write: the second reaches the server after the policy decided to close.
    connection = raw_connect(policy.port)
    connection.send("GET /item?n=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /item?n=2 HTTP/1.1\r\nHost: x\r\n\r\n")
    data, closed = connection.read_until_close(timeout=5)
    assert closed is True
    responses, rest = connection.parse(data)
    assert len(responses) == 1 and rest == b"", "one answer: the connection closed after its first request"
    first, second = policy.wait_for(2, timeout_ms=5000)
    assert first["target"] == "/item?n=1" and first["response"]["outcome"] == "completed"
    assert first["response"]["connectionClosedAfter"] == "max-requests"
    assert second["target"] == "/item?n=2"
    assert second["response"]["outcome"] == "connection-closing"
    assert second["response"]["status"] is None and second["response"]["bytesWritten"] == 0
    assert second["connection"]["id"] == first["connection"]["id"]


def test_node_keep_alive_agent_race_is_visible_in_the_journal(policy, tmp_path):
    """node's keep-alive agent reuses the connection the server just closed by policy: the request it sent
    into the closing connection is in the journal, so a test can prove the race from the journal alone."""
    script = tmp_path / "race.mjs"
    script.write_text(f"""
import http from 'node:http';
const agent = new http.Agent({{ keepAlive: true, maxSockets: 1 }});
function get(n) {{
  return new Promise((resolve) => {{
    const req = http.get({{ host: '127.0.0.1', port: {policy.port}, path: '/item?n=' + n, agent }}, (res) => {{
      res.resume(); res.on('end', () => resolve('ok'));
    }});
    req.on('error', (e) => resolve(e.code || String(e)));
  }});
}}
const results = [];
for (let n = 1; n <= 6; n++) results.push(await get(n));
console.log(JSON.stringify(results));
agent.destroy();
""")
    result = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    entries = policy.journal()
    marked = [e for e in entries if e["response"].get("connectionClosedAfter") == "max-requests"]
    assert marked, "every policy close is marked on its last response"
    late = [e for e in entries if e["response"]["outcome"] == "connection-closing"]
    errors = [r for r in json.loads(result.stdout) if r != "ok"]
    # Each failed request of node's is one the server journaled as arriving on a closing connection.
    assert len(late) == len(errors), (errors, [e["target"] for e in late])
