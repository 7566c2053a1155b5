"""What the dashboard reads besides the journal: the JSON index at /__faultline/, the page and its assets, the change
feed at /__faultline/events, and the report's, state's and scenarios' additions for drawing (logical requests,
Retry-After windows, route cursors). The page itself is tested in a browser in test_dashboard.py."""

import subprocess
import threading
import time

import requests

RETRY = {
    "name": "retry",
    "expect": {"honorsRetryAfter": True},
    "routes": [
        {"id": "item", "match": {"method": "GET", "path": "/item"},
         "responses": [{"status": 503, "headers": {"Retry-After": "1"}, "times": 1}, {"status": 200, "text": "ok"}]},
        {"id": "slow", "match": {"method": "GET", "path": "/slow"},
         "responses": [{"status": 200, "text": "late", "delayMs": 600}]},
        {"id": "keyed", "match": {"method": "GET", "path": "/keyed"}, "sequenceBy": "header:X-Case",
         "responses": [{"status": 500}, {"status": 200}], "afterLast": "fail"},
    ],
}


def events(server, **params):
    answer = server.admin("GET", "events", params=params, timeout=70)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_index_answers_json_and_a_browser_gets_the_page(faultline):
    index = requests.get(faultline.url + "/__faultline/", timeout=5)
    assert index.status_code == 200 and index.headers["Content-Type"] == "application/json"
    paths = {endpoint["path"] for endpoint in index.json()["endpoints"]}
    assert {"/__faultline/requests", "/__faultline/report", "/__faultline/events"} <= paths
    curl = subprocess.run(["curl", "-sS", faultline.url + "/__faultline/"], capture_output=True, text=True, timeout=10)
    assert '"endpoints"' in curl.stdout, "curl's Accept: */* gets the JSON index"

    page = requests.get(faultline.url + "/__faultline/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"},
                        timeout=5)
    assert page.status_code == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8"
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert page.headers["Vary"] == "Accept"
    assert '<script src="/__faultline/ui/dashboard.js">' in page.text and "faultline-data" not in page.text
    no_html = requests.get(faultline.url + "/__faultline/", headers={"Accept": "text/html;q=0, application/json"},
                           timeout=5)
    assert no_html.headers["Content-Type"] == "application/json", "text/html with q=0 is refused, not asked for"

    for asset, media in [("dashboard.js", "text/javascript"), ("dashboard.css", "text/css"), ("favicon.svg", "image/svg+xml")]:
        served = requests.get(f"{faultline.url}/__faultline/ui/{asset}", timeout=5)
        assert served.status_code == 200 and served.headers["Content-Type"].startswith(media), asset
        assert served.headers["X-Content-Type-Options"] == "nosniff"
    assert requests.get(faultline.url + "/__faultline/ui/nothing.js", timeout=5).status_code == 404
    assert requests.post(faultline.url + "/__faultline/ui/dashboard.js", timeout=5).status_code == 405
    assert faultline.count() == 0, "the dashboard's own requests are not journaled"


def test_events_start_with_a_reset_then_carry_new_and_changed_entries(start_faultline, write_scenario):
    server = start_faultline(write_scenario(RETRY))
    first = events(server)
    assert first["reset"] is True and first["entries"] == [] and first["instance"]
    cursor = first["cursor"]

    quiet = events(server, cursor=cursor, timeoutMs=0)
    assert quiet == {"instance": first["instance"], "cursor": cursor, "reset": False, "state": False, "skipped": 0,
                     "entries": []}

    # A long-poll that is waiting when a request arrives answers with it (recorded pending, then again finished).
    answers = []
    poller = threading.Thread(target=lambda: answers.append(events(server, cursor=cursor, timeoutMs=10000)))
    poller.start()
    started = time.monotonic()
    slow = threading.Thread(target=lambda: requests.get(server.url + "/slow", timeout=10))
    slow.start()
    poller.join(15)
    assert answers, "the long-poll answered"
    woke = answers[0]
    assert time.monotonic() - started < 5, "answered at the change, not at the timeout"
    assert [entry["sequence"] for entry in woke["entries"]] == [1]
    assert woke["entries"][0]["response"]["outcome"] == "pending", "a delayed answer is seen before it is sent"
    slow.join(10)
    done = events(server, cursor=woke["cursor"], timeoutMs=10000)
    assert [entry["sequence"] for entry in done["entries"]] == [1]
    assert done["entries"][0]["response"]["outcome"] == "completed", "the entry's change comes as the same sequence"

    # A timeout answers with nothing and the same cursor.
    timed_out = events(server, cursor=done["cursor"], timeoutMs=200)
    assert timed_out["entries"] == [] and timed_out["cursor"] == done["cursor"] and timed_out["reset"] is False

    # Outside the journal: a scenario reset says state; a cleared journal says reset.
    server.admin_json("POST", "scenarios/reset")
    reset = events(server, cursor=done["cursor"], timeoutMs=5000)
    assert reset["state"] is True and reset["reset"] is False
    assert server.admin("DELETE", "requests").status_code == 200
    cleared = events(server, cursor=reset["cursor"], timeoutMs=5000)
    assert cleared["reset"] is True


def test_events_refuse_a_bad_cursor_and_reset_a_stale_one(faultline):
    for bad in ["x", "-1"]:
        answer = faultline.admin("GET", "events", params={"cursor": bad}, timeout=5)
        assert answer.status_code == 400 and "cursor" in answer.json()["error"]
    answer = faultline.admin("GET", "events", params={"timeoutMs": "61000"}, timeout=5)
    assert answer.status_code == 400 and "timeoutMs" in answer.json()["error"]
    events(faultline)
    ahead = events(faultline, cursor=999999, timeoutMs=0)
    assert ahead["reset"] is True, "a cursor this server never gave (another process's) starts again"


def test_events_over_http2(start_faultline, write_scenario):
    server = start_faultline(write_scenario(RETRY))
    cursor = events(server)["cursor"]
    curl = subprocess.Popen(["curl", "-sS", "--http2-prior-knowledge",
                             f"{server.url}/__faultline/events?cursor={cursor}&timeoutMs=10000"],
                            stdout=subprocess.PIPE, text=True)
    requests.get(server.url + "/item", timeout=5)
    out, _ = curl.communicate(timeout=15)
    assert '"sequence":1' in out and '"reset":false' in out


def test_report_state_and_scenarios_say_what_the_timeline_draws(start_faultline, write_scenario):
    server = start_faultline(write_scenario(RETRY))
    assert requests.get(server.url + "/item", timeout=5).status_code == 503
    server.wait_for(1, completed=True)
    pending = server.admin_json("GET", "state")["retryAfter"]["pending"]
    assert len(pending) == 1 and pending[0]["windowEndMs"] - pending[0]["windowStartMs"] == 1000
    time.sleep(1.05)  # the client under test honours Retry-After: 1
    assert requests.get(server.url + "/item", timeout=5).status_code == 200
    assert requests.get(server.url + "/keyed", headers={"X-Case": "a"}, timeout=5).status_code == 500
    server.wait_for(3, completed=True)

    report = server.admin_json("GET", "report")
    chains = {chain["label"]: chain["attempts"] for chain in report["logicalRequests"]}
    assert chains == {"GET /item": [1, 2], "GET /keyed": [3]}
    assert all(chain["scenario"] == "retry" for chain in report["logicalRequests"])

    observation, = server.admin_json("GET", "state")["retryAfter"]["observations"]
    entries = {entry["sequence"]: entry for entry in server.journal()}
    assert observation["windowEndMs"] - observation["windowStartMs"] == observation["advertisedWaitMs"] == 1000
    assert entries[1]["receivedAtMonotonicMs"] <= observation["windowStartMs"] < entries[2]["receivedAtMonotonicMs"]
    assert entries[2]["receivedAtMonotonicMs"] >= observation["windowEndMs"], "the honoured retry lands after the window"

    routes = {route["id"]: route for route in server.admin_json("GET", "scenarios")["scenarios"][0]["routes"]}
    assert routes["item"]["script"][0] == {"kind": "plain", "status": 503, "headers": [["Retry-After", "1"]], "times": 1,
                                           "fault": None, "delay": None, "drip": None, "closeConnection": False}
    assert routes["slow"]["script"][0]["delay"] == "600 ms"
    assert routes["item"]["cursors"] == [{"partition": None, "served": 2, "nextStep": 1, "exhausted": True}]
    assert routes["slow"]["cursors"] == [{"partition": None, "served": 0, "nextStep": 0, "exhausted": False}]
    assert routes["keyed"]["cursors"] == [{"partition": "a", "served": 1, "nextStep": 1, "exhausted": False}]
    assert requests.get(server.url + "/keyed", headers={"X-Case": "a"}, timeout=5).status_code == 200
    requests.get(server.url + "/keyed", headers={"X-Case": "a"}, timeout=5)
    server.wait_for(5, completed=True)
    keyed = next(r for r in server.admin_json("GET", "scenarios")["scenarios"][0]["routes"] if r["id"] == "keyed")
    assert keyed["cursors"] == [{"partition": "a", "served": 3, "nextStep": None, "exhausted": True}]

    health = server.admin_json("GET", "health")
    assert health["startedAtMonotonicMs"] < entries[1]["receivedAtMonotonicMs"]
    assert health["instance"] == events(server)["instance"]


def test_a_watcher_sees_every_entry_of_a_burst_in_a_few_coalesced_answers(start_faultline, write_scenario):
    server = start_faultline(write_scenario(RETRY))
    cursor = events(server)["cursor"]
    seen, answers, stop = set(), [], threading.Event()

    def watch():
        nonlocal cursor
        with requests.Session() as session:
            while not stop.is_set() or len(seen) < 300:
                answer = session.get(server.url + "/__faultline/events", params={"cursor": cursor, "timeoutMs": 2000},
                                     timeout=10).json()
                assert answer["reset"] is False
                cursor = answer["cursor"]
                if answer["entries"]:
                    answers.append(time.monotonic())
                    seen.update(entry["sequence"] for entry in answer["entries"])
                elif stop.is_set():
                    return

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    with requests.Session() as client:
        for _ in range(300):
            client.get(server.url + "/item", timeout=5)
    stop.set()
    watcher.join(20)
    elapsed = time.monotonic() - started
    assert seen == set(range(1, 301)), "every entry of the burst reached the watcher"
    # At most four rounds a second (one every 250 ms), plus the first and the last.
    assert len(answers) <= elapsed / 0.25 + 2, (len(answers), elapsed)


def test_an_answer_carries_the_newest_entries_and_counts_the_rest(start_faultline, write_scenario):
    server = start_faultline(write_scenario(RETRY))
    cursor = events(server)["cursor"]
    with requests.Session() as client:
        for _ in range(2100):
            client.get(server.url + "/item", timeout=5)
    server.wait_for(2100, completed=True, timeout_ms=20000)
    answer = events(server, cursor=cursor, timeoutMs=0)
    assert answer["reset"] is False
    assert [entry["sequence"] for entry in answer["entries"]] == list(range(101, 2101)), "the newest 2,000"
    assert answer["skipped"] == 100


def test_the_page_and_the_feed_are_served_over_https_h2_and_the_admin_port(start_faultline, write_scenario):
    import httpx
    server = start_faultline(write_scenario(RETRY), args=["--tls-port", "0", "--admin-port", "0"])
    line = server._lines.get(timeout=10)
    assert line and line.startswith("admin on http://"), line
    admin = line[len("admin on "):].strip()
    html = {"Accept": "text/html"}
    with httpx.Client(http2=True, verify=False, timeout=10) as h2:
        page = h2.get(server.https_url + "/__faultline/", headers=html)
        assert page.http_version == "HTTP/2" and page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert h2.get(server.https_url + "/__faultline/ui/dashboard.js").status_code == 200
        first = h2.get(server.https_url + "/__faultline/events").json()
        assert first["reset"] is True
    on_admin = requests.get(admin + "/__faultline/", headers=html, timeout=5)
    assert on_admin.status_code == 200 and on_admin.headers["Content-Type"] == "text/html; charset=utf-8"
    assert requests.get(admin + "/__faultline/ui/dashboard.css", timeout=5).status_code == 200
    cursor = requests.get(admin + "/__faultline/events", timeout=5).json()["cursor"]
    requests.get(server.url + "/item", timeout=5)
    woke = requests.get(admin + "/__faultline/events", params={"cursor": cursor, "timeoutMs": 10000}, timeout=15).json()
    assert [entry["sequence"] for entry in woke["entries"]] == [1], "the admin port's feed sees the stub port's requests"
