"""The admin API under /__faultline/, driven from Python with requests."""

import json
import threading
import time
from pathlib import Path

import pytest
import requests

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"

FRESH = {
    "name": "fresh",
    "routes": [
        {"id": "ping", "match": {"method": "GET", "path": "/ping"},
         "responses": [{"status": 503, "json": {"try": "again"}}, {"status": 200, "text": "pong"}]},
    ],
}


def get(server, path, **kw):
    kw.setdefault("timeout", 5)
    return requests.get(server.url + path, **kw)


def test_upload_a_scenario_then_a_bad_one_keeps_the_good_one_serving(faultline):
    assert get(faultline, "/healthz").status_code == 200

    loaded = faultline.admin_json("POST", "scenarios", json=FRESH)
    assert loaded == {"loaded": ["fresh"], "scenarios": ["fresh"]}
    assert [s["name"] for s in faultline.admin_json("GET", "scenarios")["scenarios"]] == ["fresh"]
    assert get(faultline, "/ping").status_code == 503
    assert get(faultline, "/healthz").status_code == 404, "the upload replaced the bundled scenarios"

    typo = {"name": "broken", "routes": [
        {"id": "x", "match": {"path": "/x"}, "responses": [{"status": 200}, {"stauts": 201}]}]}
    rejected = faultline.admin("POST", "scenarios", json=typo)
    assert rejected.status_code == 400
    errors = rejected.json()["errors"]
    assert len(errors) == 1
    assert errors[0]["path"] == "routes[0].responses[1]"
    assert 'unknown key "stauts"' in errors[0]["message"]
    assert 'did you mean "status"' in errors[0]["message"]

    # The previous scenario still serves, its script where it was.
    assert get(faultline, "/ping").text == "pong"
    assert get(faultline, "/x").status_code == 404
    assert [s["name"] for s in faultline.admin_json("GET", "scenarios")["scenarios"]] == ["fresh"]


def test_upload_with_mode_add_and_by_paths(faultline):
    added = faultline.admin_json("POST", "scenarios", params={"mode": "add"}, json=FRESH)
    bundled = sorted(json.loads(f.read_text())["name"] for f in SCENARIOS_DIR.glob("*.json")
                     if not f.name.endswith(".schema.json"))
    assert added["scenarios"] == sorted(bundled) + ["fresh"]
    assert get(faultline, "/healthz").status_code == 200
    assert get(faultline, "/ping").status_code == 503

    by_path = faultline.admin_json("POST", "scenarios", json={"paths": [str(SCENARIOS_DIR / "slow-endpoints.json")]})
    assert by_path == {"loaded": ["slow-endpoints"], "scenarios": ["slow-endpoints"]}
    assert get(faultline, "/ping").status_code == 404

    missing = faultline.admin("POST", "scenarios", json={"paths": ["/nonexistent/faultline.json"]})
    assert missing.status_code == 400
    assert missing.json()["errors"][0]["file"] == "/nonexistent/faultline.json"
    assert get(faultline, "/v1/search").status_code == 200


def test_reset_rewinds_scripts_and_clears_the_journal(faultline):
    assert [get(faultline, "/v1/products/1").status_code for _ in range(3)] == [503, 503, 200]
    reset = faultline.admin_json("POST", "scenarios/reset", params={"journal": "true"})
    assert reset == {"reset": True, "journalCleared": 3}
    assert faultline.journal() == []
    assert get(faultline, "/v1/products/1").status_code == 503, "the script starts over"
    entry, = faultline.journal()
    assert entry["sequence"] == 4, "sequence numbers are never reused"


def test_reset_without_journal_keeps_entries_and_cuts_off_pending_responses(faultline):
    outcome = {}

    def slow_client():
        try:
            outcome["response"] = requests.get(f"{faultline.url}/v1/reports/x", timeout=5)
        except requests.RequestException as error:
            outcome["error"] = error

    thread = threading.Thread(target=slow_client)
    thread.start()
    faultline.wait_for(1, route="report")  # the request is in, its 300 ms delay running
    assert faultline.admin_json("POST", "scenarios/reset") == {"reset": True, "journalCleared": 0}
    thread.join(timeout=10)
    assert "response" not in outcome, "a pending response must not leak past a reset"
    assert isinstance(outcome.get("error"), requests.ConnectionError)
    entry, = faultline.journal(route="report")
    assert entry["response"]["outcome"] == "cancelled"


def test_delete_requests_forgets_entries_but_counters_go_on(faultline):
    for _ in range(2):
        get(faultline, "/healthz")
    get(faultline, "/nope")
    cleared = faultline.admin_json("DELETE", "requests")
    assert cleared["cleared"] == 3
    assert cleared["counters"]["totalRecorded"] == 3
    assert cleared["counters"]["retained"] == 0
    assert faultline.journal() == []
    assert faultline.count() == 0
    get(faultline, "/healthz")
    entry, = faultline.journal()
    assert entry["sequence"] == 4
    counters = faultline.admin_json("GET", "requests/count")["counters"]
    assert counters["totalRecorded"] == 4
    assert counters["unmatched"] == 1
    assert counters["perRoute"] == {"health": 3}


def test_requests_count_and_filters(faultline):
    for path in ["/v1/products/1", "/v1/products/1", "/healthz", "/nope"]:
        get(faultline, path)
    requests.head(f"{faultline.url}/healthz", timeout=5)
    assert faultline.count() == 5
    assert faultline.count(route="product") == 2
    assert faultline.count(status=503) == 2
    assert faultline.count(method="head") == 1
    assert faultline.count(path="/nope") == 1
    assert faultline.count(matched=False) == 1
    assert faultline.count(malformed=False) == 5
    assert faultline.count(since=3) == 2
    assert [e["path"] for e in faultline.journal(limit=2)] == ["/nope", "/healthz"]
    assert faultline.admin("GET", "requests/count", params={"status": "abc"}).status_code == 400
    assert faultline.admin("GET", "requests", params={"matched": "maybe"}).status_code == 400


def test_mistakes_are_a_400_with_did_you_mean(faultline):
    """Issue #28: a misspelt parameter, route or outcome names the fix instead of answering an empty list."""
    get(faultline, "/v1/products/1")

    def error(path, **params):
        answer = faultline.admin("GET", path, params=params)
        assert answer.status_code == 400, answer.text
        assert answer.headers["Content-Type"].startswith("application/json")
        return answer.json()["error"]

    assert error("requests", route="prodcut") == 'no loaded route is "prodcut"; did you mean "product"?'
    assert error("requests", limt=1) == 'unknown query parameter "limt"; did you mean "limit"?'
    assert error("requests/count", outcome="complted") == 'unknown outcome "complted"; did you mean "completed"?'
    assert error("requests.har", outcome="nope").startswith('unknown outcome "nope"; expected one of "pending", ')
    assert error("requests", zzz=1).startswith('unknown query parameter "zzz"; this endpoint takes "route", ')
    assert error("requests", limit="abc") == 'limit must be an integer, got "abc"'
    started = time.monotonic()
    assert error("requests/wait", count=1, route="prodcut", timeoutMs=5000).endswith('did you mean "product"?')
    assert time.monotonic() - started < 2, "the 400 came at once, not after timeoutMs"

    # Legitimate filters still answer 200.
    assert faultline.count(route="product") == 1
    assert faultline.admin("GET", "requests", params={"route": "product", "outcome": "completed"}).status_code == 200
    assert faultline.admin("GET", "requests", params={"route": "auth:token"}).status_code == 200
    assert faultline.admin("GET", "requests", params={"matched": "false", "limit": 1}).status_code == 200


def test_wait_times_out_unsatisfied_with_what_it_saw(faultline):
    get(faultline, "/healthz")
    started = time.monotonic()
    answer = faultline.wait(3, timeout_ms=300, route="health")
    elapsed = time.monotonic() - started
    assert answer["satisfied"] is False
    assert answer["wanted"] == 3
    assert answer["count"] == 1
    assert len(answer["requests"]) == 1
    assert elapsed >= 0.29, f"answered after {elapsed * 1000:.0f} ms, before timeoutMs"


def test_wait_answers_as_soon_as_the_requests_arrive(faultline):
    answers = []
    waiter = threading.Thread(target=lambda: answers.append(faultline.wait(2, timeout_ms=20000, route="health")))
    waiter.start()
    # The long-poll shows up as an open connection once the server holds it (besides ours).
    deadline = time.monotonic() + 5
    while faultline.admin_json("GET", "health")["connections"] < 2 and time.monotonic() < deadline:
        pass
    started = time.monotonic()
    with requests.Session() as session:
        for _ in range(2):
            session.get(f"{faultline.url}/healthz", timeout=5)
    waiter.join(timeout=10)
    assert not waiter.is_alive()
    assert answers and answers[0]["satisfied"] is True and answers[0]["count"] == 2
    assert time.monotonic() - started < 5, "the wait answered at once, not at its 20 s timeout"


def test_wait_needs_a_count(faultline):
    assert faultline.admin("GET", "requests/wait").status_code == 400
    assert faultline.admin("GET", "requests/wait", params={"count": 1, "timeoutMs": -1}).status_code == 400


def test_unknown_admin_endpoint_and_wrong_method(faultline):
    unknown = faultline.admin("GET", "nope")
    assert unknown.status_code == 404
    assert any("requests/wait" in line for line in unknown.json()["endpoints"])
    wrong = faultline.admin("PUT", "health")
    assert wrong.status_code == 405
    assert wrong.headers["Allow"] == "GET"
    assert faultline.journal() == [], "admin calls are not journaled"


def test_shutdown_answers_202_and_the_process_exits_0(faultline):
    answer = faultline.admin("POST", "shutdown")
    assert answer.status_code == 202
    assert answer.json() == {"stopping": True}
    assert faultline.wait_exit(timeout=10) == 0, faultline.stderr()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{faultline.url}/healthz", timeout=2)


@pytest.mark.parametrize("how", [["-H", "Connection: close"], ["--http1.0"], ["--http2-prior-knowledge"], []],
                         ids=["connection-close", "http1.0", "h2c", "keep-alive"])
def test_shutdown_exits_0_however_the_request_ends_its_connection(start_faultline, how):
    # POST /shutdown with Connection: close used to crash the server (SIGILL): the response's completion stopped the
    # server, which tore the connection down, and the connection then took its finished exchange off an empty queue.
    import subprocess
    server = start_faultline()
    out = subprocess.run(["curl", "-sS", "-X", "POST", *how, server.url + "/__faultline/shutdown"],
                         capture_output=True, text=True, timeout=10)
    assert '"stopping":true' in out.stdout, out.stderr
    assert server.wait_exit(timeout=10) == 0, server.stderr()
