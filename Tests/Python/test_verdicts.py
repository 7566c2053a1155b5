"""Verdicts (GET /__faultline/report, `faultline verify`) judged on real Python clients.

The careful client (requests + urllib3 Retry, idempotency keys, single-flight refresh; example_clients.py) passes
every verdict of the bundled scenarios and of scenarios written here; the naive one (retries everything at once,
POSTs without a key, ignores Retry-After, refreshes on every 401) fails exactly the rules it breaks, and each
failed verdict names the journal sequence numbers of the requests that broke it.

Where a bundled scenario would make a naive failure depend on the machine's speed (a 1 s Retry-After that an
"immediate" retry on a starved machine might still honour), the test loads a copy with a long Retry-After: an
immediate retry is then early however slow the machine is. The test never sleeps to wait for the server; the only
sleeps are the clients' own Retry-After and backoff waits.
"""

import json
import os
import socket
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from conftest import faultline_binary
from example_clients import CarefulClient, NaiveClient, fixed_schedule_get

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"
ORDERS = SCENARIOS_DIR / "idempotent-orders.json"
RATE_LIMIT = SCENARIOS_DIR / "rate-limit.json"
TOKEN_REFRESH = SCENARIOS_DIR / "token-refresh.json"
CATALOGUE = SCENARIOS_DIR / "flaky-catalogue.json"

TIMEOUT_S = 10
RULES = {"honorsRetryAfter", "singleFlightRefresh", "maxRefreshes", "noDuplicateSideEffects", "retriesOnlyReplayable", "retriesOnlyUnprocessed",
         "maxAttempts", "backoff", "noRetryOn4xx"}


# -- helpers -------------------------------------------------------------------------------------------


def load(path):
    return json.loads(Path(path).read_text())


def expected_rules(scenario):
    """The rules a scenario's `expect` asks the report to judge."""
    return set(scenario["expect"]) & RULES


def report(server):
    return server.admin_json("GET", "report")


def by_rule(answer):
    """The report's verdicts by rule (every server here loads one scenario with `expect`)."""
    verdicts = {verdict["rule"]: verdict for verdict in answer["verdicts"]}
    assert len(verdicts) == len(answer["verdicts"]) == answer["judged"], answer
    return verdicts


def failed(answer):
    return {verdict["rule"] for verdict in answer["verdicts"] if not verdict["passed"]}


def assert_all_pass(server, scenario):
    answer = report(server)
    assert set(by_rule(answer)) == expected_rules(scenario), answer
    assert failed(answer) == set(), json.dumps(answer, indent=1) + "\n" + json.dumps(server.journal(), indent=1)
    assert answer["passed"] is True
    return by_rule(answer)


def sequences(entries):
    return [entry["sequence"] for entry in entries]


def statuses(entries):
    return [entry["response"]["status"] for entry in entries]


def header(entry, name):
    values = [value for key, value in entry["headers"] if key.lower() == name.lower()]
    return values[0] if values else None


def verify(run_cli, server):
    """`faultline verify --url`: (exit code, stdout lines), each verdict line checked against the report."""
    answer = report(server)
    result = run_cli("verify", "--url", server.url, timeout=30)
    lines = result.stdout.splitlines()
    assert len(lines) == answer["judged"] + 1, result
    for line, verdict in zip(lines, answer["verdicts"]):
        word = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}[verdict["outcome"]]
        assert verdict["passed"] == (verdict["outcome"] != "fail")
        expected = f"{word}  {verdict['scenario']}/{verdict['rule']}: {verdict['explanation']}"
        if not verdict["passed"] and verdict["evidence"]:
            expected += "  [" + " ".join(f"#{n}" for n in verdict["evidence"]) + "]"
        assert line == expected
    passed = sum(verdict["passed"] for verdict in answer["verdicts"])
    inconclusive = f" ({answer['inconclusive']} inconclusive)" if answer["inconclusive"] else ""
    assert lines[-1] == f"{passed} of {answer['judged']} verdicts passed{inconclusive}"
    return result.returncode, lines


def run_concurrently(calls, timeout=TIMEOUT_S):
    """Runs the callables on threads released together by a barrier; returns their results."""
    barrier = threading.Barrier(len(calls))

    def together(call):
        barrier.wait(timeout=timeout)
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(together, call) for call in calls]
        return [future.result(timeout=timeout) for future in futures]


# -- idempotent-orders.json: retriesOnlyReplayable, noDuplicateSideEffects --------------------------------


def test_careful_post_with_one_key_survives_commit_then_reset(start_faultline, run_cli):
    server = start_faultline(ORDERS)
    client = CarefulClient(server.url)
    response = client.post("/shop/v1/orders", json={"sku": "w-1"}, headers={"X-Test-Case": "careful"})
    assert response.status_code == 201 and response.json()["id"] == "o-1"
    assert response.headers.get("Idempotent-Replayed") == "true"

    attempts = server.journal(route="create-order")
    assert [entry["response"]["outcome"] for entry in attempts] == ["reset-sent", "completed"]
    keys = {header(entry, "Idempotency-Key") for entry in attempts}
    assert len(keys) == 1 and None not in keys, "every retry carries the same key"

    verdicts = assert_all_pass(server, load(ORDERS))
    assert verdicts["noDuplicateSideEffects"]["explanation"] == "1 side effect(s), one per idempotency key"
    assert verdicts["noDuplicateSideEffects"]["evidence"] == [attempts[0]["sequence"]]
    assert server.admin_json("GET", "state")["sideEffects"]["total"] == 1
    code, lines = verify(run_cli, server)
    assert code == 0 and all(line.startswith("PASS") for line in lines[:-1])


def test_naive_post_without_a_key_fails_only_retries_only_replayable(start_faultline, run_cli):
    server = start_faultline(ORDERS)
    response = NaiveClient(server.url).post("/shop/v1/orders", json={"sku": "w-1"})
    assert response.status_code == 400, "the route requires a key"

    attempts = server.journal(route="create-order")
    assert statuses(attempts) == [400] * 4
    first, second = sequences(attempts)[:2]
    answer = report(server)
    assert failed(answer) == {"retriesOnlyReplayable"}, answer
    verdict = by_rule(answer)["retriesOnlyReplayable"]
    assert verdict["evidence"] == [first, second]
    assert verdict["explanation"] == (f"request #{second} repeated POST /shop/v1/orders of #{first} without an "
                                      f"Idempotency-Key (#{first}: it was answered 400): a non-idempotent request was retried")
    code, lines = verify(run_cli, server)
    assert code == 1
    # No request had a side effect (each was refused 400): noDuplicateSideEffects had nothing to judge.
    assert by_rule(answer)["noDuplicateSideEffects"]["outcome"] == "inconclusive"
    assert [line.split()[0] for line in lines[:-1]] == ["INCONCLUSIVE", "FAIL"]


# -- rate-limit.json: honorsRetryAfter, noRetryOn4xx -------------------------------------------------------


def test_careful_client_waits_out_the_rate_limit_and_the_maintenance_503(start_faultline):
    server = start_faultline(RATE_LIMIT)
    client = CarefulClient(server.url)
    for i in range(5):
        assert client.get(f"/search-api/v1/search?q=w{i}").status_code == 200
    assert client.get("/search-api/v1/status").json() == {"ok": True}

    limited = server.journal(route="rate-limit:search")
    assert statuses(limited) == [429], "the 4th search of the window was limited, once"
    observations = server.admin_json("GET", "state")["retryAfter"]["observations"]
    assert [o["advertisedSequence"] for o in observations] == [limited[0]["sequence"],
                                                              server.journal(route="maintenance")[0]["sequence"]]
    assert all(o["honoured"] and o["actualWaitMs"] >= o["advertisedWaitMs"] >= 1000 for o in observations)
    verdicts = assert_all_pass(server, load(RATE_LIMIT))
    assert verdicts["honorsRetryAfter"]["explanation"] == "2 retries after Retry-After, none early"
    assert verdicts["honorsRetryAfter"]["evidence"] == [o["retrySequence"] for o in observations]


def test_naive_client_hammering_a_rate_limit_is_judged_early_for_every_retry(start_faultline, write_scenario):
    # The bundled limits, with a 60 s window: the 429's Retry-After asks for about a minute, so the naive
    # client's immediate retries are early however slowly this machine runs.
    scenario = load(RATE_LIMIT)
    scenario["rateLimits"][0]["windowMs"] = 60000
    server = start_faultline(write_scenario(scenario))
    client = NaiveClient(server.url)
    for i in range(3):
        assert client.get(f"/search-api/v1/search?q=w{i}").status_code == 200
    assert client.get("/search-api/v1/search?q=w3").status_code == 429

    limited = sequences(server.journal(route="rate-limit:search"))
    assert len(limited) == 4, "one limited request and three immediate retries"
    answer = report(server)
    assert failed(answer) == {"honorsRetryAfter"}, answer
    verdict = by_rule(answer)["honorsRetryAfter"]
    # Each early pair, every journal number once.
    assert verdict["evidence"] == [limited[0], limited[1], limited[2], limited[3]]
    first = server.admin_json("GET", "state")["retryAfter"]["observations"][0]
    assert first["advertisedWaitMs"] >= 59000 and not first["honoured"]
    assert verdict["explanation"] == (f"request #{limited[1]} came {first['actualWaitMs']} ms after #{limited[0]}, "
                                      f"whose Retry-After asked for {first['advertisedWaitMs']} ms "
                                      "(and 2 more early retries)")


# -- token-refresh.json: singleFlightRefresh, maxRefreshes ------------------------------------------------


def test_careful_client_shares_one_refresh_among_concurrent_401s(start_faultline, run_cli):
    server = start_faultline(TOKEN_REFRESH)
    server.admin_json("POST", "auth/expire")
    client = CarefulClient(server.url, token_path="/bank/oauth/token", access_token="token-1",
                           refresh_token="refresh-1")
    responses = run_concurrently([lambda i=i: client.get(f"/bank/v1/accounts/a{i}") for i in range(6)])
    assert [r.status_code for r in responses] == [200] * 6
    assert client.token == "token-2" and client.refresh_calls == 1

    token_calls = server.journal(route="auth:token")
    assert statuses(token_calls) == [200]
    rejected = server.journal(status=401)
    assert rejected and all(header(e, "Authorization") == "Bearer token-1" for e in rejected)
    verdicts = assert_all_pass(server, load(TOKEN_REFRESH))
    assert verdicts["singleFlightRefresh"]["evidence"] == sequences(token_calls)
    assert verdicts["maxRefreshes"]["explanation"] == "1 token refresh call(s); at most 1 expected"
    code, _ = verify(run_cli, server)
    assert code == 0


def test_naive_client_refreshing_on_every_401_fails_single_flight_and_max_refreshes(start_faultline):
    server = start_faultline(TOKEN_REFRESH)
    server.admin_json("POST", "auth/expire")
    client = NaiveClient(server.url, token_path="/bank/oauth/token", access_token="token-1")
    # Each request reads the shared token-1 when it starts; all six get 401 before the first 200 ms refresh
    # ends, and each refreshes by itself.
    run_concurrently([lambda i=i: client.get(f"/bank/v1/accounts/a{i}") for i in range(6)])

    token_calls = sequences(server.journal(route="auth:token"))
    auth = server.admin_json("GET", "state")["auth"]
    assert len(token_calls) == auth["refreshCalls"] >= 6
    assert auth["maxRefreshesInFlight"] >= 2
    answer = report(server)
    assert failed(answer) == {"singleFlightRefresh", "maxRefreshes"}, answer
    verdicts = by_rule(answer)
    assert verdicts["singleFlightRefresh"]["evidence"] == token_calls
    assert verdicts["singleFlightRefresh"]["explanation"] == (
        f"{auth['maxRefreshesInFlight']} token refreshes were in flight at once ({len(token_calls)} in all): "
        "concurrent 401s each refreshed instead of sharing one refresh")
    assert verdicts["maxRefreshes"]["evidence"] == token_calls
    assert verdicts["maxRefreshes"]["explanation"] == f"{len(token_calls)} token refresh call(s); at most 1 expected"


# -- flaky-catalogue.json: honorsRetryAfter, maxAttempts, noRetryOn4xx ------------------------------------


def test_careful_client_passes_the_flaky_catalogue(start_faultline, run_cli):
    server = start_faultline(CATALOGUE)
    client = CarefulClient(server.url)
    product = client.get("/v1/products/42", headers={"X-Test-Case": "careful"})
    assert product.status_code == 200 and product.json()["id"] == "42"
    assert client.get("/v1/products?q=widget").status_code == 200
    assert client.get("/healthz").status_code == 200

    attempts = server.journal(route="product")
    assert statuses(attempts) == [503, 503, 200]
    verdicts = assert_all_pass(server, load(CATALOGUE))
    assert verdicts["honorsRetryAfter"]["explanation"] == "2 retries after Retry-After, none early"
    assert verdicts["honorsRetryAfter"]["evidence"] == sequences(attempts)[1:]
    # The catalogue never fails a product four times, nor answers a 4xx: those two rules never met their situation,
    # and say so rather than pass.
    assert verdicts["maxAttempts"]["outcome"] == "inconclusive"
    assert verdicts["maxAttempts"]["explanation"].startswith("no logical request failed 4 time(s) in a row (at most 2)")
    assert verdicts["noRetryOn4xx"]["outcome"] == "inconclusive"
    code, lines = verify(run_cli, server)
    assert code == 0 and len(lines) == 4
    assert [line.split(":")[0] for line in lines[:-1]] == [
        "PASS  flaky-catalogue/honorsRetryAfter", "INCONCLUSIVE  flaky-catalogue/maxAttempts",
        "INCONCLUSIVE  flaky-catalogue/noRetryOn4xx"]
    # --strict refuses a run in which a rule never ran.
    strict = run_cli("verify", "--url", server.url, "--strict", timeout=30)
    assert strict.returncode == 1 and strict.stdout.splitlines()[-1] == "3 of 3 verdicts passed (2 inconclusive; --strict fails them)"


def test_naive_client_ignoring_retry_after_fails_only_honors_retry_after(start_faultline, write_scenario, run_cli):
    # The bundled catalogue with Retry-After: 60 instead of 1 (see the module docstring).
    scenario = load(CATALOGUE)
    scenario["routes"][0]["responses"][0]["headers"]["Retry-After"] = "60"
    server = start_faultline(write_scenario(scenario))
    assert NaiveClient(server.url).get("/v1/products/42").status_code == 200

    first, second, third = sequences(server.journal(route="product"))
    answer = report(server)
    assert failed(answer) == {"honorsRetryAfter"}, answer
    verdict = by_rule(answer)["honorsRetryAfter"]
    assert verdict["evidence"] == [first, second, third]
    assert verdict["explanation"].startswith(f"request #{second} came ")
    assert verdict["explanation"].endswith(
        f" ms after #{first}, whose Retry-After asked for 60000 ms (and 1 more early retry)")
    code, lines = verify(run_cli, server)
    assert code == 1
    assert lines[0] == f"FAIL  flaky-catalogue/honorsRetryAfter: {verdict['explanation']}  [#{first} #{second} #{third}]"


# -- every rule a naive client breaks, in one scenario ----------------------------------------------------


def checkout(retry_after_seconds):
    """A search throttled once (429 + Retry-After), a POST that commits and then resets (the key is optional,
    so a keyless POST creates a resource too), and a coupon that does not exist (404)."""
    return {
        "name": "checkout",
        "expect": {"honorsRetryAfter": True, "noDuplicateSideEffects": True, "retriesOnlyReplayable": True,
                   "noRetryOn4xx": True, "maxAttempts": 3},
        "routes": [
            {"id": "search", "match": {"method": "GET", "path": "/search"},
             "responses": [{"status": 429, "headers": {"Retry-After": str(retry_after_seconds)}, "json": {"error": "slow down"}},
                           {"json": {"hits": []}}]},
            {"id": "create-order", "match": {"method": "POST", "path": "/orders"},
             "idempotency": {"header": "Idempotency-Key", "required": False},
             "responses": [{"status": 201, "json": {"id": "o-{{resource.id}}"}, "fault": "commit-then-reset"},
                           {"status": 201, "json": {"id": "o-{{resource.id}}"}}]},
            {"id": "coupon", "match": {"method": "GET", "path": "/coupons/{code}"},
             "responses": [{"status": 404, "json": {"error": "no such coupon"}}]},
        ],
    }


def shop(client):
    """What both clients do: search, order, look up a coupon. Returns the three final statuses."""
    search = client.get("/search")
    order = client.post("/orders", json={"sku": "w-1", "quantity": 2})
    coupon = client.get("/coupons/SAVE10")
    return [r.status_code if r is not None else None for r in (search, order, coupon)]


def test_careful_client_passes_every_checkout_rule(start_faultline, write_scenario, run_cli):
    scenario = checkout(retry_after_seconds=1)
    server = start_faultline(write_scenario(scenario))
    assert shop(CarefulClient(server.url)) == [200, 201, 404]

    assert statuses(server.journal(route="search")) == [429, 200]
    assert len(server.journal(route="create-order")) == 2
    assert statuses(server.journal(route="coupon")) == [404], "a 404 is not retried"
    verdicts = assert_all_pass(server, scenario)
    assert verdicts["noDuplicateSideEffects"]["explanation"] == "1 side effect(s), one per idempotency key"
    # No logical request failed three times, so maxAttempts: 3 was never put to the test.
    assert verdicts["maxAttempts"]["outcome"] == "inconclusive"
    code, lines = verify(run_cli, server)
    assert code == 0
    assert [line.split()[0] for line in lines[:-1]] == ["PASS", "PASS", "PASS", "INCONCLUSIVE", "PASS"]
    assert lines[-1] == "5 of 5 verdicts passed (1 inconclusive)"


def test_naive_client_fails_exactly_the_checkout_rules_it_breaks(start_faultline, write_scenario, run_cli):
    scenario = checkout(retry_after_seconds=60)
    server = start_faultline(write_scenario(scenario))
    assert shop(NaiveClient(server.url)) == [200, 201, 404]

    search = sequences(server.journal(route="search"))
    orders = server.journal(route="create-order")
    coupon = sequences(server.journal(route="coupon"))
    assert len(search) == 2 and len(orders) == 2 and len(coupon) == 4
    assert [header(entry, "Idempotency-Key") for entry in orders] == [None, None]
    order_first, order_second = sequences(orders)

    answer = report(server)
    assert failed(answer) == {"honorsRetryAfter", "noDuplicateSideEffects", "retriesOnlyReplayable", "noRetryOn4xx",
                              "maxAttempts"}, answer
    verdicts = by_rule(answer)

    assert verdicts["honorsRetryAfter"]["evidence"] == search
    assert verdicts["honorsRetryAfter"]["explanation"].startswith(f"request #{search[1]} came ")
    assert verdicts["honorsRetryAfter"]["explanation"].endswith(
        f" ms after #{search[0]}, whose Retry-After asked for 60000 ms")

    assert verdicts["noDuplicateSideEffects"]["evidence"] == [order_first, order_second]
    assert verdicts["noDuplicateSideEffects"]["explanation"].startswith("create-order without a key, request ")
    assert verdicts["noDuplicateSideEffects"]["explanation"].endswith(
        f" created 2 resources (requests #{order_first}, #{order_second})")

    assert verdicts["retriesOnlyReplayable"]["evidence"] == [order_first, order_second]
    assert verdicts["retriesOnlyReplayable"]["explanation"] == (
        f"request #{order_second} repeated POST /orders of #{order_first} without an Idempotency-Key "
        f"(#{order_first}: the connection was reset after the request arrived): a non-idempotent request was retried")

    assert verdicts["noRetryOn4xx"]["evidence"] == coupon[:2]
    assert verdicts["noRetryOn4xx"]["explanation"] == (
        f"request #{coupon[1]} retried #{coupon[0]}, which got 404: a 404 will not change by sending the same "
        "request again")

    assert verdicts["maxAttempts"]["evidence"] == coupon
    assert verdicts["maxAttempts"]["explanation"] == (
        "GET /coupons/SAVE10 was attempted 4 times, each after the previous one's answer; at most 3 expected")

    code, lines = verify(run_cli, server)
    assert code == 1
    assert [line.split()[0] for line in lines[:-1]] == ["FAIL"] * 5
    assert lines[-1] == "0 of 5 verdicts passed"


def test_verify_exits_2_when_no_server_answers(run_cli):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The port was bound but never listened on, and is closed now: connecting to it is refused.
    result = run_cli("verify", "--url", f"http://127.0.0.1:{port}", timeout=30)
    assert result.returncode == 2, result
    assert "cannot reach" in result.stderr and not result.stdout.startswith(("PASS", "FAIL"))


def test_verify_and_export_over_https_check_the_certificate(start_faultline, run_cli, tmp_path):
    # verify and export read the admin API with Faultline's own HTTP client (no URLSession, no libcurl): over
    # HTTPS it checks the certificate against the system's store, or SSL_CERT_FILE (OpenSSL's default paths).
    tls_dir = tmp_path / "tls"
    server = start_faultline(args=["--tls-port", "0", "--tls-dir", tls_dir])
    assert server.https_url and server.https_url.startswith("https://127.0.0.1:")
    exported = run_cli("ca", "--tls-dir", tls_dir, "--export")
    assert exported.returncode == 0 and "BEGIN CERTIFICATE" in exported.stdout, exported
    ca = tmp_path / "ca.pem"
    ca.write_text(exported.stdout)
    env = {**os.environ, "SSL_CERT_FILE": str(ca), "SSL_CERT_DIR": str(tmp_path / "no-such-dir")}

    def cli(*args, extra_env):
        return subprocess.run([faultline_binary(), *map(str, args)], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=30, env=extra_env)

    trusted = cli("verify", "--url", server.https_url, extra_env=env)
    assert trusted.returncode == 0, trusted
    assert "verdicts passed" in trusted.stdout.splitlines()[-1], trusted.stdout
    har = cli("export", "--url", server.https_url + "/", "--format", "har", extra_env=env)
    assert har.returncode == 0 and json.loads(har.stdout)["log"]["creator"]["name"] == "Faultline", har
    # The same server with no CA trusted for it: no answer at all (exit 2), and the reason is the certificate.
    untrusted_env = {**env, "SSL_CERT_FILE": str(tmp_path / "empty.pem")}
    (tmp_path / "empty.pem").write_text("")
    untrusted = cli("verify", "--url", server.https_url, extra_env=untrusted_env)
    assert untrusted.returncode == 2 and not untrusted.stdout, untrusted
    assert "cannot reach https://127.0.0.1:" in untrusted.stderr and "certificate" in untrusted.stderr, untrusted.stderr


# -- backoff ---------------------------------------------------------------------------------------------


BACKOFF = {
    "name": "backoff",
    "expect": {"backoff": {"jitter": True}, "maxAttempts": 4},
    "routes": [
        {"id": "report", "match": {"method": "GET", "path": "/reports/{id}"}, "sequenceBy": "path:id",
         "responses": [{"status": 503, "json": {"error": "busy"}, "times": 3}, {"json": {"id": "{{path.id}}"}}]},
    ],
}


def intervals_ms(entries):
    """Intervals between receive times, in ms, computed from whole nanoseconds as the server does."""
    nanos = [round(entry["receivedAtMonotonicMs"] * 1_000_000) for entry in entries]
    return [(later - earlier) / 1_000_000 for earlier, later in zip(nanos, nanos[1:])]


LOGICAL = 6  # the backoff rule needs at least 5 logical requests retried twice or more


def concurrently(function, count=LOGICAL):
    """Runs function(i) for i in range(count) in threads: one logical request each."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(function, range(count)))


def attempts_of(entries, i):
    return [entry for entry in entries if entry["path"] == f"/reports/{i}"]


def test_urllib3_exponential_backoff_with_jitter_passes(start_faultline, write_scenario):
    server = start_faultline(write_scenario(BACKOFF))
    # urllib3: no wait before the first retry, then backoff_factor·2^(n−1) + U(0, jitter): ≈ 0, 0.2, 0.4 s plus
    # up to 0.4 s of jitter (a jitter of 0.05 s would be under 10 % of these waits: too little to count as jitter).
    # With 0.2 s, the interquartile range of six draws fell under 10 % of the median by chance once (seen on a
    # loaded machine); 0.4 s doubles the spread, so that takes a far rarer draw, and the jitter is still urllib3's.
    client = CarefulClient(server.url, total=3, backoff_factor=0.1, backoff_jitter=0.4)
    assert all(r.status_code == 200 for r in concurrently(lambda i: client.get(f"/reports/{i}")))

    entries = server.journal(route="report")
    for i in range(LOGICAL):
        assert statuses(attempts_of(entries, i)) == [503, 503, 503, 200]
        gaps = intervals_ms(attempts_of(entries, i))
        assert gaps[1] >= 190 and gaps[2] >= 390, gaps
    verdict = assert_all_pass(server, BACKOFF)["backoff"]
    assert verdict["outcome"] == "pass", verdict
    assert verdict["explanation"].startswith(f"{LOGICAL} retried logical request(s): the upper quartile of the waits"), verdict


def test_constant_interval_retry_loops_fail_backoff(start_faultline, write_scenario, run_cli):
    server = start_faultline(write_scenario(BACKOFF))
    # Retry loops with a fixed 0.5 s pause and no backoff. The pauses are deadline-based, so the intervals
    # stay equal within scheduling noise.
    results = concurrently(lambda i: fixed_schedule_get(f"{server.url}/reports/{i}", [0.5, 0.5, 0.5],
                                                        timeout=TIMEOUT_S))
    assert all([r.status_code for r in responses] == [503, 503, 503, 200] for responses in results)

    entries = server.journal(route="report")
    gaps = [gap for i in range(LOGICAL) for gap in intervals_ms(attempts_of(entries, i))]
    assert all(450 <= gap <= 650 for gap in gaps), gaps
    answer = report(server)
    assert failed(answer) == {"backoff"}, answer
    assert answer["outcome"] == "fail" and answer["passed"] is False
    verdict = by_rule(answer)["backoff"]
    assert verdict["outcome"] == "fail"
    assert sorted(verdict["evidence"]) == sorted(sequences(entries))
    assert verdict["explanation"].startswith("the intervals do not grow: the upper quartile of the waits before retry 1: ")
    assert verdict["explanation"].endswith("at least ×1.15 expected"), verdict
    code, lines = verify(run_cli, server)
    assert code == 1 and any(line.startswith(f"FAIL  backoff/backoff: {verdict['explanation']}") for line in lines)


def test_one_retried_request_is_inconclusive_and_does_not_fail(start_faultline, write_scenario, run_cli):
    server = start_faultline(write_scenario(BACKOFF))
    # Waits 0.4 s before the first retry, then only 0.1 s. One logical request cannot tell a shrinking
    # schedule from a jittered one (full jitter often waits less the second time): too few samples.
    responses = fixed_schedule_get(f"{server.url}/reports/1", [0.4, 0.1, 0.1], timeout=TIMEOUT_S)
    assert [r.status_code for r in responses] == [503, 503, 503, 200]

    attempts = server.journal(route="report")
    answer = report(server)
    assert failed(answer) == set(), answer
    assert answer["passed"] is True and answer["outcome"] == "inconclusive" and answer["inconclusive"] == 2
    verdict = by_rule(answer)["backoff"]
    assert verdict["passed"] is True and verdict["outcome"] == "inconclusive"
    assert verdict["evidence"] == sequences(attempts)
    assert verdict["explanation"] == ("1 logical request(s) retried, 1 of them twice or more: too few to judge backoff "
                                      "(at least 5 logical requests retried twice or more are needed)")
    # Its fourth attempt succeeded: whether it would have stopped at four is not known.
    assert by_rule(answer)["maxAttempts"]["outcome"] == "inconclusive"
    code, lines = verify(run_cli, server)
    assert code == 0, lines
    assert f"INCONCLUSIVE  backoff/backoff: {verdict['explanation']}" in lines
    assert lines[-1] == "2 of 2 verdicts passed (2 inconclusive)"
