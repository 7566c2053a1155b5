"""The network verdicts judged on real clients (ARCHITECTURE §3b): a retry loop that backs off passes
`backsOffDuringOutage`, one that hammers fails it with the attempts as evidence; a client that replays its outbox all
at once after recovery fails `noRequestStorm`; an outbox sent with idempotency keys through a dropped connection is
applied exactly once (`noDuplicateSideEffects`), one sent without keys is not.

The outages come from a scenario `timeline`, so every run replays the same network; the clients are Python
`requests` loops with real sockets. `reset-on-accept` is the listener state, since it lets the server see the
attempts (a refusing port hides them: the kernel answers).
"""

import random
import threading
import time
import uuid

import requests


def outage_scenario(outage_ms, expect):
    return {
        "name": "outage",
        "routes": [{"id": "ping", "match": {"method": "GET", "path": "/ping"}, "responses": [{"text": "pong"}]}],
        "timeline": [
            {"after": {"requests": 1, "route": "ping"}, "name": "offline", "listener": "reset-on-accept",
             "connections": "drop"},
            {"after": {"ms": outage_ms}, "name": "back", "listener": "up"},
        ],
        "expect": expect,
    }


def report_by_rule(server):
    report = server.admin_json("GET", "report")
    return {verdict["rule"]: verdict for verdict in report["verdicts"]}


def admin_session(server):
    """A kept-alive connection whose latest request is an admin call: drops and listener states leave it alone, so
    the test can watch the network while the stub port is away."""
    session = requests.Session()
    assert session.get(server.url + "/__faultline/health", timeout=5).status_code == 200
    return session


def wait_for_outage(server, session, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if session.get(server.url + "/__faultline/network", timeout=5).json()["listener"] == "reset-on-accept":
            return
        time.sleep(0.01)
    raise AssertionError("the timeline never went offline")


def get_until_served(url, waits, deadline_s=15):
    """GETs `url` on a new connection each time until it is answered; `waits(k)` is the pause after failure k."""
    start = time.monotonic()
    failures = 0
    while time.monotonic() - start < deadline_s:
        try:
            response = requests.get(url, timeout=2, headers={"Connection": "close"})
            return response, failures
        except requests.ConnectionError:
            failures += 1
            time.sleep(waits(failures))
    raise AssertionError(f"never served within {deadline_s} s after {failures} failures")


def test_a_client_that_backs_off_passes_and_one_that_hammers_fails(start_faultline, write_scenario):
    expect = {"backsOffDuringOutage": True, "noRequestStorm": {"max": 5, "withinMs": 500}}
    rng = random.Random(7)

    polite = start_faultline(write_scenario(outage_scenario(2000, expect), "polite.json"))
    watch = admin_session(polite)
    assert requests.get(polite.url + "/ping", timeout=5).text == "pong"
    wait_for_outage(polite, watch)
    response, failures = get_until_served(polite.url + "/ping", lambda k: 0.05 * 2 ** (k - 1) * rng.uniform(0.8, 1.2))
    assert response.status_code == 200 and failures >= 4
    verdicts = report_by_rule(polite)
    assert verdicts["backsOffDuringOutage"]["outcome"] == "pass", verdicts["backsOffDuringOutage"]
    assert verdicts["noRequestStorm"]["outcome"] == "pass", verdicts["noRequestStorm"]
    attempts = [e for e in polite.journal() if (e.get("network") or {}).get("event") == "attempt"]
    assert len(attempts) == failures, "every attempt during the outage is journaled"

    eager = start_faultline(write_scenario(outage_scenario(1000, expect), "eager.json"))
    watch = admin_session(eager)
    assert requests.get(eager.url + "/ping", timeout=5).text == "pong"
    wait_for_outage(eager, watch)
    response, failures = get_until_served(eager.url + "/ping", lambda k: 0.02)
    assert response.status_code == 200 and failures >= 10
    # Then the outbox it kept goes out all at once.
    threads = [threading.Thread(target=requests.get, args=(eager.url + "/ping",), kwargs={"timeout": 5}) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    verdicts = report_by_rule(eager)
    backoff = verdicts["backsOffDuringOutage"]
    assert backoff["outcome"] == "fail" and "no backoff while the network was away" in backoff["explanation"], backoff
    assert len(backoff["evidence"]) >= 10
    storm = verdicts["noRequestStorm"]
    assert storm["outcome"] == "fail" and "a storm after the outage" in storm["explanation"], storm
    assert len(storm["evidence"]) >= 7  # the change that ended the outage, then more than 5 arrivals


def test_a_refusing_port_hides_the_attempts_so_backoff_is_inconclusive(start_faultline, write_scenario):
    scenario = outage_scenario(800, {"backsOffDuringOutage": True})
    scenario["timeline"][0]["listener"] = "refuse"
    server = start_faultline(write_scenario(scenario))
    assert requests.get(server.url + "/ping", timeout=5).text == "pong"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            requests.get(server.url + "/ping", timeout=1)
        except requests.ConnectionError:
            break
        time.sleep(0.01)
    response, failures = get_until_served(server.url + "/ping", lambda k: 0.05 * 2 ** (k - 1))
    assert response.status_code == 200 and failures >= 3
    verdict = report_by_rule(server)["backsOffDuringOutage"]
    assert verdict["outcome"] == "inconclusive" and "use reset-on-accept or stall" in verdict["explanation"], verdict


def outbox_scenario(required_key):
    return {
        "name": "outbox",
        "routes": [{"id": "sync", "match": {"method": "POST", "path": "/sync"},
                    "idempotency": {"header": "Idempotency-Key", "required": required_key},
                    "responses": [{"status": 201, "delayMs": 150, "json": {"applied": "{{resource.id}}"}}]}],
        # The third operation is in flight (its response delayed) when every connection drops.
        "timeline": [
            {"after": {"requests": 2, "route": "sync"}, "name": "offline", "listener": "reset-on-accept"},
            {"after": {"ms": 100}, "name": "cut", "connections": "drop"},
            {"after": {"ms": 1000}, "name": "back", "listener": "up"},
        ],
        "expect": {"noDuplicateSideEffects": True},
    }


def send_outbox(url, operations, with_keys):
    """Sends each queued operation until it is answered, retrying on connection errors with backoff."""
    session = requests.Session()
    for body in operations:
        headers = {"Idempotency-Key": f'"{body["op"]}"'} if with_keys else {}
        wait = 0.05
        for _ in range(40):
            try:
                response = session.post(url + "/sync", json=body, headers=headers, timeout=2)
                assert response.status_code == 201
                break
            except requests.ConnectionError:
                time.sleep(wait)
                wait = min(wait * 2, 0.4)
        else:
            raise AssertionError(f"{body} was never answered")


def test_an_outbox_with_idempotency_keys_is_applied_exactly_once_across_the_outage(start_faultline, write_scenario):
    operations = [{"op": str(uuid.uuid4()), "n": n} for n in range(5)]

    keyed = start_faultline(write_scenario(outbox_scenario(True), "keyed.json"))
    send_outbox(keyed.url, operations, with_keys=True)
    verdict = report_by_rule(keyed)["noDuplicateSideEffects"]
    assert verdict["outcome"] == "pass", verdict
    entries = keyed.journal(route="sync")
    cut = [e for e in entries if e["response"]["outcome"] == "reset-sent"]
    assert cut, "an operation was in flight when the connections dropped"
    replayed = [e for e in entries if any("replay" in note for note in e["notes"])]
    assert replayed, "its retry was answered from the idempotency store"
    changes = [e["network"]["phase"] for e in keyed.journal() if e["kind"] == "network"]
    assert changes == ["offline", "cut", "back"]

    unkeyed = start_faultline(write_scenario(outbox_scenario(False), "unkeyed.json"))
    send_outbox(unkeyed.url, operations, with_keys=False)
    verdict = report_by_rule(unkeyed)["noDuplicateSideEffects"]
    assert verdict["outcome"] == "fail", verdict
