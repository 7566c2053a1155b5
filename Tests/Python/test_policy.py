"""Client-policy features (ARCHITECTURE §6) against a live `faultline serve`, driven by real clients: urllib3's Retry
and curl --retry against 429/503 with Retry-After, naive and single-flight token refresh, idempotency keys with
commit-then-reset / commit-then-hang. Everything is checked through the journal and GET /__faultline/state.

Waits are the journal long-poll, thread joins with deadlines, or the clients' own Retry-After sleeps — the test
never sleeps to wait for the server."""

import email.utils
import json
import re
import socket
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"
RATE_LIMIT = SCENARIOS_DIR / "rate-limit.json"
TOKEN_REFRESH = SCENARIOS_DIR / "token-refresh.json"
ORDERS = SCENARIOS_DIR / "idempotent-orders.json"

TIMEOUT_S = 10
IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
    r"\d{2}:\d{2}:\d{2} GMT$")
EARLY_NOTE = re.compile(r"^retry-after: request came (\d+) ms after #(\d+)'s (\d+) ms: (\d+) ms early$")


# -- helpers -------------------------------------------------------------------------------------------


def state(server):
    return server.admin_json("GET", "state")


def request_header(entry, name):
    values = [value for key, value in entry["headers"] if key.lower() == name.lower()]
    return values[0] if values else None


def statuses(entries):
    return [entry["response"]["status"] for entry in entries]


def wall(entry):
    """The journal's wall-clock receive time as a UTC datetime (ISO 8601, millisecond precision)."""
    return datetime.fromisoformat(entry["receivedAt"].replace("Z", "+00:00"))


def retrying_session(seen):
    """A requests session whose urllib3 Retry honours Retry-After for 429 and 503, with no backoff of its own.

    The Retry subclass only records what each retried response said (urllib3 does not keep the headers of
    the responses it retried); the retry decision and the sleep are urllib3's own."""

    class RecordingRetry(Retry):
        def sleep_for_retry(self, response):
            seen.append({"status": response.status, "headers": dict(response.headers)})
            return super().sleep_for_retry(response)

    retry = RecordingRetry(total=3, status_forcelist=[429, 503], respect_retry_after_header=True,
                           backoff_factor=0, allowed_methods=None)
    session = requests.Session()
    session.mount("http://", HTTPAdapter(max_retries=retry))
    return session


# -- 1. Retry-After --------------------------------------------------------------------------------------


def test_urllib3_retry_waits_out_delay_seconds_retry_after_on_429(start_faultline):
    server = start_faultline(RATE_LIMIT)
    url = f"{server.url}/search-api/v1/search?q=widgets"
    seen = []
    with retrying_session(seen) as session:
        for _ in range(3):
            assert session.get(url, timeout=TIMEOUT_S).status_code == 200
        response = session.get(url, timeout=TIMEOUT_S)
    assert response.status_code == 200
    assert response.json() == {"hits": [{"id": "1"}]}
    assert [entry["status"] for entry in seen] == [429], "urllib3 retried exactly one 429"
    retry_after = seen[0]["headers"]["Retry-After"]
    assert retry_after.isdigit(), f"delay-seconds expected, got {retry_after!r}"
    advertised_ms = int(retry_after) * 1000
    assert advertised_ms == 1000

    entries = server.journal(path="/search-api/v1/search")
    assert statuses(entries) == [200, 200, 200, 429, 200]
    limited, retried = entries[3], entries[4]
    gap = retried["receivedAtMonotonicMs"] - limited["receivedAtMonotonicMs"]
    assert gap >= advertised_ms, f"the retry came {gap:.1f} ms after the 429 that asked for {advertised_ms} ms"

    judged = state(server)["retryAfter"]
    assert (judged["retries"], judged["honoured"], judged["early"]) == (1, 1, 0), judged
    observation = judged["observations"][0]
    assert observation["key"].startswith("rate-limit search [")
    assert observation["advertisedSequence"] == limited["sequence"]
    assert observation["retrySequence"] == retried["sequence"]
    assert observation["advertisedWaitMs"] == advertised_ms
    assert observation["actualWaitMs"] >= advertised_ms
    assert observation["earlyByMs"] == 0 and observation["honoured"] is True
    assert judged["pending"] == []
    assert any(note.startswith("retry-after:") and note.endswith(": honoured") for note in retried["notes"]), \
        retried["notes"]


def test_urllib3_retry_waits_out_http_date_retry_after(start_faultline):
    server = start_faultline(RATE_LIMIT)
    url = f"{server.url}/search-api/v1/export"
    seen = []
    with retrying_session(seen) as session:
        first = session.get(url, headers={"X-Api-Key": "key-a"}, timeout=TIMEOUT_S)
        assert first.status_code == 200 and first.text == "id\n1\n"
        assert first.headers["Content-Type"] == "text/csv"
        # The bucket is per X-Api-Key: another key still has its token.
        assert requests.get(url, headers={"X-Api-Key": "key-b"}, timeout=TIMEOUT_S).status_code == 200
        response = session.get(url, headers={"X-Api-Key": "key-a"}, timeout=TIMEOUT_S)
    assert response.status_code == 200
    assert [entry["status"] for entry in seen] == [429]
    retry_after = seen[0]["headers"]["Retry-After"]
    assert IMF_FIXDATE.match(retry_after), f"not an IMF-fixdate: {retry_after!r}"
    date = email.utils.parsedate_to_datetime(retry_after)
    assert date.utcoffset().total_seconds() == 0
    assert email.utils.format_datetime(date, usegmt=True) == retry_after, "weekday or fields do not round-trip"

    entries = [e for e in server.journal(path="/search-api/v1/export") if request_header(e, "X-Api-Key") == "key-a"]
    assert statuses(entries) == [200, 429, 200]
    limited, retried = entries[1], entries[2]
    # Exact milliseconds: both times are whole milliseconds, and float seconds × 1000 can land a hair under.
    date_wait_ms = (date - wall(limited)) // timedelta(milliseconds=1)
    assert 0 < date_wait_ms <= 3000, f"the date is {date_wait_ms} ms after the 429 (the bucket refills in 2 s)"
    assert wall(retried) >= date, f"retry at {retried['receivedAt']}, before the advertised {retry_after}"

    judged = state(server)["retryAfter"]
    assert (judged["retries"], judged["honoured"], judged["early"]) == (1, 1, 0), judged
    observation = judged["observations"][0]
    assert observation["key"] == "rate-limit export [key-a]"
    assert (observation["advertisedSequence"], observation["retrySequence"]) == (limited["sequence"], retried["sequence"])
    # The server's own reading of its date: the wait from when it answered (a hair after the journal's receive
    # time, which is truncated to the millisecond) to the date.
    assert 0 <= date_wait_ms - observation["advertisedWaitMs"] < 100, (date_wait_ms, observation)
    assert observation["earlyByMs"] == 0 and observation["honoured"] is True
    gap = retried["receivedAtMonotonicMs"] - limited["receivedAtMonotonicMs"]
    assert gap >= observation["advertisedWaitMs"], f"retry {gap:.1f} ms after the 429, asked {observation}"


def test_naive_client_retrying_at_once_is_judged_early(start_faultline):
    server = start_faultline(RATE_LIMIT)
    url = f"{server.url}/search-api/v1/search?q=naive"
    codes = [requests.get(url, timeout=TIMEOUT_S).status_code for _ in range(3)]
    for _ in range(4):  # the first attempt and three immediate retries, ignoring Retry-After
        codes.append(requests.get(url, timeout=TIMEOUT_S).status_code)
        if codes[-1] != 429:
            break
    assert codes == [200, 200, 200, 429, 429, 429, 429]

    judged = state(server)["retryAfter"]
    assert (judged["retries"], judged["honoured"], judged["early"]) == (3, 0, 3), judged
    for observation in judged["observations"]:
        assert observation["honoured"] is False
        assert observation["earlyByMs"] > 0
        assert observation["earlyByMs"] == observation["advertisedWaitMs"] - observation["actualWaitMs"]
    assert [p["status"] for p in judged["pending"]] == [429], "the last 429 still waits for a retry"

    entries = server.journal(path="/search-api/v1/search")
    for previous, entry in zip(entries[3:], entries[4:]):
        matches = [EARLY_NOTE.match(note) for note in entry["notes"]]
        matches = [m for m in matches if m]
        assert len(matches) == 1, f"no 'early' note on #{entry['sequence']}: {entry['notes']}"
        actual, advertised_seq, advertised, early = map(int, matches[0].groups())
        assert advertised_seq == previous["sequence"] and advertised == 1000 and early > 0 and actual + early == 1000


def run_curl_retry(url):
    started = time.monotonic()
    result = subprocess.run(["curl", "-sS", "--fail", "--retry", "2", "--max-time", "20", "-w", "\n%{http_code}", url],
                            capture_output=True, text=True, timeout=30)
    return result, time.monotonic() - started


def test_curl_retry_honours_retry_after_on_scripted_503(start_faultline):
    server = start_faultline(RATE_LIMIT)
    result, _ = run_curl_retry(f"{server.url}/search-api/v1/status")
    assert result.returncode == 0, result.stderr
    body, _, code = result.stdout.rpartition("\n")
    assert code == "200" and json.loads(body) == {"ok": True}

    entries = server.journal(route="maintenance")
    assert statuses(entries) == [503, 200]
    gap = entries[1]["receivedAtMonotonicMs"] - entries[0]["receivedAtMonotonicMs"]
    assert gap >= 1000, f"curl retried {gap:.1f} ms after Retry-After: 1"
    judged = state(server)["retryAfter"]
    assert (judged["retries"], judged["honoured"], judged["early"]) == (1, 1, 0), judged
    observation = judged["observations"][0]
    assert observation["key"] == "route maintenance []"
    assert observation["advertisedWaitMs"] == 1000 and observation["earlyByMs"] == 0


def test_curl_retry_waits_longer_than_its_own_backoff_when_retry_after_says_so(start_faultline, write_scenario):
    """curl's own first retry delay is 1 s, the same as Retry-After: 1 above; 2 s tells the two apart."""
    path = write_scenario({"name": "maintenance-2s", "routes": [{
        "id": "maintenance", "match": {"method": "GET", "path": "/status"},
        "responses": [{"status": 503, "headers": {"Retry-After": "2"}, "json": {"error": "maintenance"}},
                      {"json": {"ok": True}}]}]})
    server = start_faultline(path)
    result, _ = run_curl_retry(f"{server.url}/status")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("\n200")
    entries = server.journal(route="maintenance")
    assert statuses(entries) == [503, 200]
    gap = entries[1]["receivedAtMonotonicMs"] - entries[0]["receivedAtMonotonicMs"]
    assert gap >= 2000, f"curl retried {gap:.1f} ms after Retry-After: 2"
    observation = state(server)["retryAfter"]["observations"][0]
    assert observation["advertisedWaitMs"] == 2000 and observation["honoured"] is True


def test_ratelimit_fields_on_allowed_and_limited_responses(start_faultline):
    server = start_faultline(RATE_LIMIT)
    url = f"{server.url}/search-api/v1/search"
    responses = [requests.get(url, timeout=TIMEOUT_S) for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    field = re.compile(r'^"search";r=(\d+);t=(\d+)$')
    remaining = []
    for response in responses:
        assert response.headers["RateLimit-Policy"] == '"search";q=3;w=1'
        match = field.match(response.headers["RateLimit"])
        assert match, f"RateLimit {response.headers['RateLimit']!r}"
        remaining.append(int(match.group(1)))
        assert int(match.group(2)) == 1, "the 1 s window resets within a second, rounded up"
    assert remaining == [2, 1, 0, 0]
    limited = responses[3]
    assert limited.headers["Retry-After"] == "1"
    assert limited.json() == {"error": "rate limited", "limit": "search", "retryAfterMs": 1000}
    # The export rule does not enable the fields.
    export = requests.get(f"{server.url}/search-api/v1/export", headers={"X-Api-Key": "k"}, timeout=TIMEOUT_S)
    assert export.status_code == 200
    assert "RateLimit" not in export.headers and "RateLimit-Policy" not in export.headers
    buckets = {rule["id"]: rule["buckets"] for rule in state(server)["rateLimits"]}
    assert [(b["requests"], b["limited"], b["remaining"]) for b in buckets["search"]] == [(4, 1, 0)]


# -- 2. Token refresh ------------------------------------------------------------------------------------


def test_retry_after_judgements_stay_bounded_over_a_long_run(start_faultline, write_scenario):
    """Found by `make soak`: every judged retry after a 429/503 was kept for ever (~150 bytes each; a million
    503s grew the server by ~140 MB). /state keeps the newest 10,000 observations, as the journal keeps its newest
    entries, and its counts stay exact."""
    busy = {"name": "busy", "routes": [{"id": "busy", "match": {"path": "/busy"}, "responses": [
        {"status": 503, "headers": {"Retry-After": "1"}, "text": "busy"}]}]}
    server = start_faultline(write_scenario(busy))
    total = 10_500
    # Pipelined on one connection, so each request is the (early) retry of the one before it.
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT_S) as client:
        sent = 0
        while sent < total:
            batch = min(1000, total - sent)
            client.sendall(b"GET /busy HTTP/1.1\r\nHost: x\r\n\r\n" * batch)
            sent += batch
            received = b""
            while received.count(b"HTTP/1.1 503 ") < batch:
                chunk = client.recv(65536)
                assert chunk, "the server closed the connection"
                received += chunk
    # Every response is in, so every request has been judged.
    judged = state(server)["retryAfter"]
    assert (judged["retries"], judged["early"], judged["honoured"]) == (total - 1, total - 1, 0)
    assert len(judged["observations"]) == 10_000
    assert [o["retrySequence"] for o in judged["observations"][-2:]] == [total - 1, total]


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def token_call(base, refresh_token):
    return requests.post(f"{base}/bank/oauth/token", timeout=TIMEOUT_S,
                         data={"grant_type": "refresh_token", "refresh_token": refresh_token})


def run_concurrently(count, work):
    """Runs work(i) on `count` threads that start together; returns the results (or raises the first error)."""
    barrier = threading.Barrier(count)

    def start(i):
        barrier.wait(timeout=TIMEOUT_S)
        return work(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(start, i) for i in range(count)]
        return [future.result(timeout=30) for future in futures]


class SingleFlightClient:
    """Shares one token among threads; on a 401 only the first caller refreshes, the others wait for its result."""

    def __init__(self, base, token, refresh_token):
        self.base = base
        self.token = token
        self.refresh_token = refresh_token
        self.lock = threading.Lock()
        self.refreshing = None

    def fresh_token(self, stale):
        with self.lock:
            if self.token != stale:
                return self.token  # someone already refreshed
            owner = self.refreshing is None
            if owner:
                self.refreshing = Future()
            pending = self.refreshing
        if owner:
            try:
                response = token_call(self.base, self.refresh_token)
                assert response.status_code == 200, response.text
                grant = response.json()
                with self.lock:
                    self.token, self.refresh_token = grant["access_token"], grant["refresh_token"]
                    self.refreshing = None
                pending.set_result(grant["access_token"])
            except BaseException as error:
                with self.lock:
                    self.refreshing = None
                pending.set_exception(error)
                raise
        return pending.result(timeout=TIMEOUT_S)

    def get(self, path, token, attempts=6):
        for _ in range(attempts):
            response = requests.get(f"{self.base}{path}", headers=bearer(token), timeout=TIMEOUT_S)
            if response.status_code != 401:
                return response, token
            token = self.fresh_token(token)
        return response, token


def run_single_flight(server):
    client = SingleFlightClient(server.url, "token-1", "refresh-1")
    # Every thread takes the (expired) token before any of them sends.
    return run_concurrently(10, lambda i: client.get(f"/bank/v1/accounts/a{i}", client.token))


def test_naive_concurrent_refresh_makes_ten_refresh_calls(start_faultline):
    server = start_faultline(TOKEN_REFRESH)
    assert server.admin_json("POST", "auth/expire") == {"expired": True}
    before = state(server)["auth"]
    assert before["currentToken"] == "token-1" and before["currentTokenExpired"] is True

    def naive(i):
        token, refresh = "token-1", "refresh-1"  # what this client instance knows
        response = requests.get(f"{server.url}/bank/v1/accounts/a{i}", headers=bearer(token), timeout=TIMEOUT_S)
        if response.status_code != 401:
            return ("get", response.status_code)
        grant = token_call(server.url, refresh)  # every 401 refreshes, nobody coordinates
        if grant.status_code != 200:
            return ("refresh", grant.status_code, grant.json()["error"])
        response = requests.get(f"{server.url}/bank/v1/accounts/a{i}",
                                headers=bearer(grant.json()["access_token"]), timeout=TIMEOUT_S)
        return ("get", response.status_code)

    outcomes = run_concurrently(10, naive)
    server.wait_for(10, route="auth:token", completed=True)
    auth = state(server)["auth"]
    assert auth["refreshCalls"] == 10
    assert auth["maxRefreshesInFlight"] > 1, auth
    assert auth["refreshesInFlight"] == 0
    assert auth["staleTokenRequests"] == 10
    # Rotation punishes the stampede: one refresh wins, the other nine presented a used refresh token.
    assert auth["tokensIssued"] == 1 and auth["invalidGrants"] == 9
    assert sorted(outcomes) == [("get", 200)] + [("refresh", 400, "invalid_grant")] * 9
    assert len(server.journal(route="auth:token")) == 10


def single_flight_scenario(write_scenario):
    """token-refresh.json with no per-use expiry, so the refreshed token lasts for all ten replays."""
    scenario = json.loads(TOKEN_REFRESH.read_text())
    scenario["auth"].pop("expireAfterUses", None)
    scenario["name"] = "token-refresh-unlimited-uses"
    return write_scenario(scenario)


def test_single_flight_refresh_makes_one_refresh_call(start_faultline, write_scenario):
    server = start_faultline(single_flight_scenario(write_scenario))
    server.admin_json("POST", "auth/expire")
    results = run_single_flight(server)
    assert [(r.status_code, token) for r, token in results] == [(200, "token-2")] * 10
    assert [r.json()["id"] for r, _ in results] == [f"a{i}" for i in range(10)]

    server.wait_for(1, route="auth:token", completed=True)
    auth = state(server)["auth"]
    assert auth["refreshCalls"] == 1 and auth["maxRefreshesInFlight"] == 1, auth
    assert auth["tokensIssued"] == 1 and auth["invalidGrants"] == 0
    assert auth["staleTokenRequests"] == 10 and auth["acceptedRequests"] == 10
    assert auth["currentToken"] == "token-2"
    for i in range(10):
        attempts = server.journal(path=f"/bank/v1/accounts/a{i}")
        assert statuses(attempts) == [401, 200]
        assert [request_header(e, "Authorization") for e in attempts] == ["Bearer token-1", "Bearer token-2"]


def test_bundled_token_refresh_single_flight_ten_requests_one_refresh(start_faultline):
    server = start_faultline(TOKEN_REFRESH)
    server.admin_json("POST", "auth/expire")
    results = run_single_flight(server)
    assert [r.status_code for r, _ in results] == [200] * 10
    auth = state(server)["auth"]
    assert auth["maxRefreshesInFlight"] == 1
    assert auth["refreshCalls"] == 1, f"{auth['refreshCalls']} refresh calls"


def test_reusing_an_old_refresh_token_is_invalid_grant(start_faultline):
    server = start_faultline(TOKEN_REFRESH)
    first = token_call(server.url, "refresh-1")
    assert first.status_code == 200
    assert first.headers["Cache-Control"] == "no-store"
    assert first.json() == {"access_token": "token-2", "token_type": "Bearer", "expires_in": 300,
                            "refresh_token": "refresh-2"}
    reused = token_call(server.url, "refresh-1")
    assert reused.status_code == 400
    assert reused.json()["error"] == "invalid_grant"
    rotated = token_call(server.url, "refresh-2")
    assert rotated.status_code == 200 and rotated.json()["refresh_token"] == "refresh-3"
    auth = state(server)["auth"]
    assert (auth["refreshCalls"], auth["invalidGrants"], auth["tokensIssued"]) == (3, 1, 2)
    assert auth["currentToken"] == "token-3" and auth["currentRefreshToken"] == "refresh-3"
    entries = server.journal(route="auth:token")
    assert statuses(entries) == [200, 400, 200]
    assert any("already used" in note for note in entries[1]["notes"]), entries[1]["notes"]


def test_stale_token_requests_count_requests_with_an_old_token(start_faultline):
    server = start_faultline(TOKEN_REFRESH)
    me = f"{server.url}/bank/v1/me"
    assert [requests.get(me, headers=bearer("token-1"), timeout=TIMEOUT_S).status_code for _ in range(3)] \
        == [200, 200, 200]
    server.admin_json("POST", "auth/expire")
    assert requests.get(me, headers=bearer("token-1"), timeout=TIMEOUT_S).status_code == 401, "token-1 expired"
    auth = state(server)["auth"]
    assert (auth["acceptedRequests"], auth["staleTokenRequests"], auth["currentTokenExpired"]) == (3, 1, True)

    assert token_call(server.url, "refresh-1").json()["access_token"] == "token-2"
    assert [requests.get(me, headers=bearer("token-1"), timeout=TIMEOUT_S).status_code for _ in range(2)] == [401] * 2
    assert requests.get(me, headers=bearer("token-2"), timeout=TIMEOUT_S).status_code == 200
    assert requests.get(me, headers=bearer("never-issued"), timeout=TIMEOUT_S).status_code == 401
    assert requests.get(me, timeout=TIMEOUT_S).status_code == 401
    auth = state(server)["auth"]
    assert auth["staleTokenRequests"] == 3, "only requests with a token this server issued count as stale"
    assert auth["missingTokenRequests"] == 1 and auth["acceptedRequests"] == 4
    notes = [e["notes"] for e in server.journal(path="/bank/v1/me", status=401)]
    assert notes == [["auth: stale token, 401"]] * 3 + [["auth: unknown token, 401"], ["auth: missing token, 401"]]


def test_rotate_token_effect_invalidates_the_old_token(start_faultline):
    server = start_faultline(TOKEN_REFRESH)
    revoke = requests.post(f"{server.url}/bank/v1/sessions/revoke", headers=bearer("token-1"), timeout=TIMEOUT_S)
    assert revoke.status_code == 204
    auth = state(server)["auth"]
    assert auth["currentToken"] == "token-2" and auth["refreshCalls"] == 0 and auth["tokensIssued"] == 1
    response = requests.get(f"{server.url}/bank/v1/me", headers=bearer("token-1"), timeout=TIMEOUT_S)
    assert response.status_code == 401
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge, challenge
    assert response.json()["error"] == "invalid_token"
    assert state(server)["auth"]["staleTokenRequests"] == 1


# -- 3. Idempotency --------------------------------------------------------------------------------------


ORDER = {"sku": "widget", "quantity": 2}


def post_order(server, case, key=None, body=ORDER, **kw):
    headers = {"X-Test-Case": case}
    if key is not None:
        headers["Idempotency-Key"] = key
    kw.setdefault("timeout", TIMEOUT_S)
    return requests.post(f"{server.url}/shop/v1/orders", json=body, headers=headers, **kw)


def side_effects(server, route="create-order"):
    snapshot = state(server)
    store = snapshot["idempotency"][route]["sideEffects"]
    per_key = {item["key"]: item["count"] for item in store["perKey"]}
    return per_key, store["total"], snapshot["sideEffects"]["total"]


def records(server, route="create-order"):
    return {record["key"]: record for record in state(server)["idempotency"][route]["records"]}


def assert_problem(response, status):
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status and problem["type"] == "about:blank" and problem["title"]
    return problem


def assert_created(response, replayed):
    assert response.status_code == 201
    assert response.headers.get("Idempotent-Replayed") == ("true" if replayed else None)
    order = response.json()
    assert order["status"] == "created"
    assert response.headers["Location"] == f"/shop/v1/orders/{order['id']}"
    return order["id"]


def test_commit_then_reset_retry_with_same_key_replays_the_stored_201(start_faultline):
    server = start_faultline(ORDERS)
    with pytest.raises(requests.exceptions.ConnectionError):
        post_order(server, "same-key", "order-key-1")
    assert side_effects(server) == ({"order-key-1": 1}, 1, 1), "committed before the reset"

    retried = post_order(server, "same-key", "order-key-1")
    assert assert_created(retried, replayed=True) == "o-1"
    again = post_order(server, "same-key", "order-key-1")
    assert_created(again, replayed=True)
    assert again.content == retried.content and again.headers["Location"] == retried.headers["Location"]

    assert side_effects(server) == ({"order-key-1": 1}, 1, 1), "three attempts, one order"
    record = records(server)["order-key-1"]
    assert (record["state"], record["status"], record["replays"]) == ("completed", 201, 2)
    entries = server.journal(route="create-order")
    assert entries[0]["response"]["fault"] == "commit-then-reset"
    assert entries[0]["response"]["outcome"] == "reset-sent" and entries[0]["response"]["status"] is None
    assert "side effect: create-order created a resource" in entries[0]["notes"]
    assert [e["response"]["status"] for e in entries[1:]] == [201, 201]
    assert all("idempotency: key order-key-1 replayed the stored 201" in e["notes"] for e in entries[1:])


def test_commit_then_reset_retry_with_a_new_key_creates_a_second_order(start_faultline):
    server = start_faultline(ORDERS)
    with pytest.raises(requests.exceptions.ConnectionError):
        post_order(server, "new-key", "order-key-1")
    second = post_order(server, "new-key", "order-key-2")
    assert assert_created(second, replayed=False) == "o-2"
    assert side_effects(server) == ({"order-key-1": 1, "order-key-2": 1}, 2, 2), "a new key is a new order"
    # The first order does exist: its key replays it.
    assert assert_created(post_order(server, "new-key", "order-key-1"), replayed=True) == "o-1"


def test_same_key_with_a_different_body_is_422(start_faultline):
    server = start_faultline(ORDERS)
    with pytest.raises(requests.exceptions.ConnectionError):
        post_order(server, "mismatch", "order-key-1")
    problem = assert_problem(post_order(server, "mismatch", "order-key-1", body={"sku": "widget", "quantity": 3}), 422)
    assert "different payload" in problem["title"]
    # The record is untouched: the original payload still replays.
    assert_created(post_order(server, "mismatch", "order-key-1"), replayed=True)
    assert side_effects(server)[1:] == (1, 1)
    record = records(server)["order-key-1"]
    assert (record["mismatches"], record["replays"]) == (1, 1)


def test_missing_or_invalid_key_is_400_problem_json(start_faultline):
    server = start_faultline(ORDERS)
    problem = assert_problem(post_order(server, "missing"), 400)
    assert "missing" in problem["title"]
    assert_problem(post_order(server, "missing", '"unterminated'), 400)
    assert_problem(requests.post(f"{server.url}/shop/v1/payments", json={"amount": 5}, timeout=TIMEOUT_S), 400)
    assert side_effects(server) == ({}, 0, 0)
    assert records(server) == {}
    notes = [e["notes"] for e in server.journal(route="create-order")]
    assert notes == [["idempotency: Idempotency-Key missing, 400"], ["idempotency: invalid key, 400"]]


def test_unquoted_and_sf_string_keys_are_the_same_key(start_faultline):
    server = start_faultline(ORDERS)
    with pytest.raises(requests.exceptions.ConnectionError):
        post_order(server, "forms", "order-key-e1")
    assert assert_created(post_order(server, "forms", '"order-key-e1"'), replayed=True) == "o-1"
    # And the other way round: first as an sf-string (the script has moved on to a plain 201), then bare.
    created = assert_created(post_order(server, "forms", '"order-key-e2"'), replayed=False)
    assert assert_created(post_order(server, "forms", "order-key-e2"), replayed=True) == created == "o-2"
    assert side_effects(server) == ({"order-key-e1": 1, "order-key-e2": 1}, 2, 2)
    assert sorted(records(server)) == ["order-key-e1", "order-key-e2"]


def test_concurrent_same_key_is_409_while_the_first_is_in_flight(start_faultline):
    server = start_faultline(ORDERS)
    url = f"{server.url}/shop/v1/payments"
    headers = {"Idempotency-Key": "pay-key-1"}
    body = {"amount": 42, "currency": "EUR"}
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(requests.post, url, json=body, headers=headers, timeout=TIMEOUT_S)
        server.wait_for(1, route="create-payment")  # the first is in the server (500 ms delay) before the second goes
        second = pool.submit(requests.post, url, json=body, headers=headers, timeout=TIMEOUT_S)
        first, second = first.result(timeout=TIMEOUT_S), second.result(timeout=TIMEOUT_S)
    assert first.status_code == 201 and first.json() == {"payment": "p-1"}
    problem = assert_problem(second, 409)
    assert "being processed" in problem["title"]

    entries = server.wait_for(2, route="create-payment", completed=True)
    original, conflict = entries
    assert original["response"]["status"] == 201 and conflict["response"]["status"] == 409
    finished = original["receivedAtMonotonicMs"] + original["response"]["durationMs"]
    assert original["response"]["durationMs"] >= 500
    assert conflict["receivedAtMonotonicMs"] < finished, "the 409 came while the first was still in flight"

    third = requests.post(url, json=body, headers=headers, timeout=TIMEOUT_S)
    assert third.status_code == 201 and third.headers["Idempotent-Replayed"] == "true"
    assert third.content == first.content
    assert side_effects(server, "create-payment") == ({"pay-key-1": 1}, 1, 1)
    record = records(server, "create-payment")["pay-key-1"]
    assert (record["state"], record["conflicts"], record["replays"]) == ("completed", 1, 1)


def hang_scenario(write_scenario):
    created = {"status": 201, "headers": {"Location": "/shop/v1/orders/o-{{resource.id}}"},
               "json": {"id": "o-{{resource.id}}", "status": "created"}}
    return write_scenario({"name": "orders-hang", "routes": [{
        "id": "create-order", "match": {"method": "POST", "path": "/shop/v1/orders"},
        "idempotency": {"header": "Idempotency-Key", "required": True},
        "sequenceBy": "header:X-Test-Case",
        "responses": [dict(created, fault="commit-then-hang"), created]}]})


def post_timing_out(server, case, key):
    started = time.monotonic()
    with pytest.raises(requests.exceptions.ReadTimeout):
        post_order(server, case, key, timeout=1)
    assert time.monotonic() - started >= 1
    # The hang is released once the client has given up.
    entry = server.wait_for(1, route="create-order", completed=True)[0]
    assert entry["response"]["fault"] == "commit-then-hang"
    assert entry["response"]["outcome"] == "hang-released" and entry["response"]["status"] is None


def test_commit_then_hang_timed_out_post_retried_with_same_key_gets_the_stored_201(start_faultline, write_scenario):
    server = start_faultline(hang_scenario(write_scenario))
    post_timing_out(server, "hang", "order-key-h1")
    assert side_effects(server) == ({"order-key-h1": 1}, 1, 1)
    retried = post_order(server, "hang", "order-key-h1")
    assert assert_created(retried, replayed=True) == "o-1"
    assert side_effects(server) == ({"order-key-h1": 1}, 1, 1), "two attempts, one order"


def test_commit_then_hang_timed_out_post_retried_with_a_new_key_creates_two(start_faultline, write_scenario):
    server = start_faultline(hang_scenario(write_scenario))
    post_timing_out(server, "hang", "order-key-h1")
    assert assert_created(post_order(server, "hang", "order-key-h2"), replayed=False) == "o-2"
    assert side_effects(server) == ({"order-key-h1": 1, "order-key-h2": 1}, 2, 2)


# -- Server behaviour that contradicts ARCHITECTURE §5/§6 ------------------------------------------------------


def idempotent_route(route_id, path, responses, **extra):
    return dict({"id": route_id, "match": {"method": "POST", "path": path},
                 "idempotency": {"required": True}, "responses": responses}, **extra)


def test_plain_reset_on_an_idempotent_route_does_not_commit(start_faultline, write_scenario):
    path = write_scenario({"name": "plain-reset", "routes": [idempotent_route("plain-reset", "/orders", [
        {"status": 201, "json": {"id": "{{resource.id}}"}, "fault": "reset"},
        {"status": 201, "json": {"id": "{{resource.id}}"}}])]})
    server = start_faultline(path)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(f"{server.url}/orders", json=ORDER, headers={"Idempotency-Key": "k"}, timeout=TIMEOUT_S)
    retried = requests.post(f"{server.url}/orders", json=ORDER, headers={"Idempotency-Key": "k"}, timeout=TIMEOUT_S)
    assert retried.status_code == 201
    assert "Idempotent-Replayed" not in retried.headers, "nothing was committed, so there is nothing to replay"
    assert side_effects(server, "plain-reset")[1] == 1


def test_chaos_failure_does_not_leave_the_key_in_flight(start_faultline, write_scenario):
    path = write_scenario({"name": "chaotic", "seed": 1, "routes": [idempotent_route(
        "chaotic", "/pay", [{"status": 201, "json": {"id": "{{resource.id}}"}}],
        chaos={"rate": 1.0, "faults": ["status:503"]})]})
    server = start_faultline(path)
    first = requests.post(f"{server.url}/pay", json=ORDER, headers={"Idempotency-Key": "k"}, timeout=TIMEOUT_S)
    assert first.status_code == 503
    server.wait_for(1, route="chaotic", completed=True)
    retried = requests.post(f"{server.url}/pay", json=ORDER, headers={"Idempotency-Key": "k"}, timeout=TIMEOUT_S)
    assert retried.status_code != 409, retried.text


def test_exhausted_script_does_not_leave_the_key_in_flight(start_faultline, write_scenario):
    path = write_scenario({"name": "short", "routes": [idempotent_route(
        "short", "/pay", [{"status": 201, "json": {"id": "{{resource.id}}"}}], afterLast="fail")]})
    server = start_faultline(path)
    post = lambda key: requests.post(f"{server.url}/pay", json=ORDER, headers={"Idempotency-Key": key},
                                     timeout=TIMEOUT_S)
    assert post("k1").status_code == 201
    assert post("k2").status_code == 500
    server.wait_for(2, route="short", completed=True)
    assert post("k2").status_code != 409


# -- auth's 401s in the journal; idempotent routes that answer 503 -------------------------------------


def test_a_401_is_journaled_under_the_route_it_matched(start_faultline, write_scenario):
    server = start_faultline(write_scenario({
        "name": "guarded",
        "auth": {"tokenPath": "/oauth/token", "initialToken": "t-1", "protect": ["/v1/"]},
        "rateLimits": [{"id": "tight", "path": "/v1/limited", "limit": 1, "windowMs": 60000}],
        "routes": [
            {"id": "me", "match": {"method": "GET", "path": "/v1/me"}, "responses": [{"json": {"me": True}}]},
            {"id": "limited", "match": {"path": "/v1/limited"}, "responses": [{"text": "ok"}]},
        ]}))
    bearer = {"Authorization": "Bearer t-1"}
    with requests.Session() as session:
        assert session.get(f"{server.url}/v1/me", timeout=TIMEOUT_S).status_code == 401
        assert session.get(f"{server.url}/v1/me", headers=bearer, timeout=TIMEOUT_S).json() == {"me": True}
        assert session.get(f"{server.url}/v1/elsewhere", timeout=TIMEOUT_S).status_code == 401
        assert session.get(f"{server.url}/nope", timeout=TIMEOUT_S).status_code == 404
        assert session.get(f"{server.url}/v1/limited", headers=bearer, timeout=TIMEOUT_S).status_code == 200
        assert session.get(f"{server.url}/v1/limited", headers=bearer, timeout=TIMEOUT_S).status_code == 429
        assert session.post(f"{server.url}/oauth/token", data={"grant_type": "client_credentials"},
                            timeout=TIMEOUT_S).status_code == 200
    entries = server.wait_for(7, completed=True)
    assert [(e["route"], e["matched"], e["answeredBy"], e["step"]) for e in entries] == [
        ("me", True, "auth", None), ("me", True, None, 0), (None, False, "auth", None), (None, False, None, None),
        ("limited", True, None, 0), ("rate-limit:tight", True, "rate-limit:tight", None), ("auth:token", True, None, None)]
    assert entries[0]["scenario"] == "guarded" and entries[0]["response"]["status"] == 401
    assert entries[2]["nearest"]["route"] is not None

    # Counters, filters, health and HAR tell one story.
    counters = server.admin_json("GET", "requests/count")["counters"]
    assert counters["unmatched"] == 2 == server.count(matched=False)
    assert counters["perRoute"] == {"me": 2, "limited": 1, "rate-limit:tight": 1, "auth:token": 1}
    assert server.count(route="me") == 2 and server.count(matched=True) == 5
    assert server.admin_json("GET", "health")["journal"]["unmatched"] == 2
    har = server.admin_json("GET", "requests.har")["log"]["entries"]
    assert [(h["_route"], h["_answeredBy"]) for h in har] == [(e["route"], e["answeredBy"]) for e in entries]


def test_a_scripted_503_does_not_trap_a_retry_with_the_same_key(start_faultline, write_scenario):
    server = start_faultline(write_scenario({
        "name": "orders-503",
        "routes": [{"id": "order", "match": {"method": "POST", "path": "/orders"},
                    "idempotency": {"required": True},
                    "responses": [{"status": 503, "headers": {"Retry-After": "0"}, "json": {"error": "busy"}},
                                  {"status": 201, "json": {"id": "{{resource.id}}"}}]}]}))
    retry = Retry(total=3, status_forcelist=[503], allowed_methods=["POST"], backoff_factor=0,
                  respect_retry_after_header=True, raise_on_status=False)
    with requests.Session() as session:
        session.mount("http://", HTTPAdapter(max_retries=retry))
        response = session.post(f"{server.url}/orders", json={"item": 1},
                                headers={"Idempotency-Key": '"order-1"'}, timeout=TIMEOUT_S)
        assert response.status_code == 201, response.text
        assert "Idempotent-Replayed" not in response.headers
        again = session.post(f"{server.url}/orders", json={"item": 1},
                             headers={"Idempotency-Key": '"order-1"'}, timeout=TIMEOUT_S)
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == response.json()
    entries = server.wait_for(3, completed=True, route="order")
    assert [e["response"]["status"] for e in entries] == [503, 201, 201]
    assert "idempotency: key order-1 not stored (503), free for a retry" in entries[0]["notes"]
    assert state(server)["sideEffects"]["total"] == 1
