"""The dashboard at /__faultline/ in a real headless Chromium (Selenium), live and as a self-contained report.

One browser for the module; each test starts its own server (start_faultline). Nothing sleeps to synchronise:
every wait is a WebDriverWait on a condition in the page, with timeouts sized for a 2-core CI machine running the
whole suite. The only time.sleep is a client honouring Retry-After, which is the behaviour under test.

Screenshots go to bench-results/screenshots/ (git-ignored).
"""

import asyncio
import base64
import json
import re
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import requests
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait
from websockets.sync.client import connect as ws_connect

from conftest import faultline_binary

REPO_ROOT = Path(__file__).resolve().parents[2]
RESOURCES = REPO_ROOT / "Sources" / "Faultline" / "Resources"
SHOTS = REPO_ROOT / "bench-results" / "screenshots"
PAGE_LOAD_S = 10.0
UI_WAIT_S = 10.0

FILE_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
            "base-uri 'none'; form-action 'none'")


# -- browser ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    options = Options()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1440,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    except WebDriverException as error:
        pytest.fail(f"cannot start headless Chromium with /usr/bin/chromedriver: {error}")
    driver.set_page_load_timeout(PAGE_LOAD_S)
    yield driver
    driver.quit()


def wait(driver, condition, timeout=UI_WAIT_S, message="", poll=0.05):
    return WebDriverWait(driver, timeout, poll_frequency=poll,
                         ignored_exceptions=(StaleElementReferenceException,)).until(condition, message)


def click(driver, css):
    """Clicks what `css` finds; the page redraws its rows and verdicts on every update, so a stale element is
    found again."""
    wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, css).click() or True, message=f"cannot click {css}")


def js_true(script, *args):
    return lambda driver: driver.execute_script(script, *args)


def leave_page(driver):
    """Unloads the page before dropping what it logged: a dashboard still open after its server stopped polls it
    and logs the refused fetches, and could log one more after a drain that came first."""
    driver.get("about:blank")
    driver.get_log("browser")


def open_dashboard(driver, server, rows=0):
    leave_page(driver)
    driver.get(server.url + "/__faultline/")
    wait(driver, js_true("return document.body.dataset.ready === 'true'"), PAGE_LOAD_S, "the dashboard never loaded its data")
    wait(driver, js_true("return document.querySelectorAll('tr.row').length >= arguments[0]", rows),
         message=f"the journal table never showed {rows} rows")


def severe_logs(driver):
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def seqs(driver, selector):
    return sorted({int(x) for x in driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.dataset.seq)", selector)})


def shot(driver, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    driver.save_screenshot(str(path))
    return path


def set_theme(driver, theme):
    """Click the theme toggle until it says `theme` (auto → light → dark)."""
    button = driver.find_element(By.CSS_SELECTOR, "header.top button[aria-label^='Colour theme']")
    for _ in range(3):
        if button.text == f"Theme: {theme}":
            return
        button.click()
    assert button.text == f"Theme: {theme}"


# -- scenarios and clients -------------------------------------------------------------------------------


def retry_scenario(name="retry-story", retry_after="1"):
    return {
        "name": name,
        "expect": {"honorsRetryAfter": True},
        "routes": [
            {"id": "item", "match": {"method": "GET", "path": "/v1/items/{id}"}, "sequenceBy": "header:X-Case",
             "responses": [
                 {"status": 503, "headers": {"Retry-After": retry_after}, "json": {"error": "busy"}},
                 {"status": 200, "json": {"id": "{{path.id}}"}}],
             "afterLast": "repeat-last"},
            {"id": "other", "match": {"path": "/other"}, "responses": [{"status": 200, "text": "ok"}]},
            {"id": "slow", "match": {"path": "/slow"}, "responses": [{"status": 200, "delayMs": 150, "text": "slow"}]},
            {"id": "broken", "match": {"path": "/broken"}, "responses": [{"fault": "reset"}]},
            {"id": "ws", "match": {"path": "/ws"}, "responses": [{"websocket": {"script": [
                {"text": "hello"}, {"receive": {"contains": "ping"}, "timeoutMs": 3000}, {"text": "pong"},
                {"close": {"code": 1000, "reason": "done"}}]}}]},
        ],
    }


def polite_client(server, path, case):
    """Retries a 503 after the Retry-After it was given."""
    for _ in range(3):
        response = requests.get(server.url + path, headers={"X-Case": case}, timeout=10)
        if response.status_code != 503:
            return response
        time.sleep(float(response.headers["Retry-After"]))  # the client honouring it: the behaviour under test
    return response


def impatient_client(server, path, case):
    """Retries a 503 at once, ignoring Retry-After."""
    for _ in range(3):
        response = requests.get(server.url + path, headers={"X-Case": case}, timeout=10)
        if response.status_code != 503:
            return response
    return response


def http2_three_streams(server, path):
    async def run():
        async with httpx.AsyncClient(http1=False, http2=True, timeout=10) as client:
            answers = await asyncio.gather(*[client.get(server.url + path) for _ in range(3)])
            assert [a.http_version for a in answers] == ["HTTP/2"] * 3
    asyncio.run(run())


def websocket_session(server):
    with ws_connect(server.url.replace("http://", "ws://") + "/ws", open_timeout=10) as ws:
        assert ws.recv(timeout=5) == "hello"
        ws.send("ping")
        assert ws.recv(timeout=5) == "pong"


def static_data(server):
    """What `faultline export --format html` embeds: each endpoint's JSON answer."""
    get = lambda path: server.admin_json("GET", path)  # noqa: E731
    return {"generatedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "server": server.url,
            "health": get("health"), "requests": get("requests"), "report": get("report"), "state": get("state"),
            "scenarios": get("scenarios"), "network": get("network")}


def self_contained_html(data):
    """Mimics DashboardPage.selfContained(data:): the template's slots filled, the assets inlined and the data
    embedded with every `<` as \\u003c."""
    page = (RESOURCES / "dashboard.html").read_text()
    icon = base64.b64encode((RESOURCES / "favicon.svg").read_bytes()).decode()
    embedded = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    slots = {
        "csp": f'<meta http-equiv="Content-Security-Policy" content="{FILE_CSP}">',
        "icon": f'<link rel="icon" type="image/svg+xml" href="data:image/svg+xml;base64,{icon}">',
        "style": "<style>\n" + (RESOURCES / "dashboard.css").read_text() + "</style>",
        "data": '<script type="application/json" id="faultline-data">' + embedded + "</script>",
        "script": "<script>\n" + (RESOURCES / "dashboard.js").read_text() + "</script>",
    }
    for name, value in slots.items():
        page = page.replace(f"<!--faultline:{name}-->", value)
    return page


# -- tests: files ----------------------------------------------------------------------------------------


def test_the_three_files_stay_small():
    sizes = {name: (RESOURCES / name).stat().st_size for name in ("dashboard.html", "dashboard.js", "dashboard.css")}
    assert sum(sizes.values()) < 150 * 1024, sizes


def test_the_assets_avoid_markup_sinks_and_element_enders():
    js = (RESOURCES / "dashboard.js").read_text()
    css = (RESOURCES / "dashboard.css").read_text()
    for forbidden in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert forbidden not in js, forbidden
    assert "</script" not in js.lower()
    assert "</style" not in css.lower()
    assert not re.search(r"setAttribute\(\s*['\"]style", js), "style attributes are forbidden by the page's CSP"


# -- tests: live -----------------------------------------------------------------------------------------


def test_dashboard_loads_without_errors_or_foreign_requests(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    requests.get(server.url + "/other", timeout=10)
    open_dashboard(browser, server, rows=1)
    assert browser.current_url.startswith(server.url)
    assert severe_logs(browser) == []
    names = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert names, "the page fetched its script, style and API"
    assert all(name.startswith(server.url + "/") for name in names), names
    assert browser.find_element(By.CSS_SELECTOR, ".status").text == "● live"
    # Without Accept: text/html the same URL is the JSON index.
    index = requests.get(server.url + "/__faultline/", timeout=10)
    assert index.headers["Content-Type"].startswith("application/json") and "endpoints" in index.json()
    curl = subprocess.run(["curl", "-sS", server.url + "/__faultline/"], capture_output=True, text=True, timeout=10)
    assert json.loads(curl.stdout)["name"] == "faultline admin API"
    page = requests.get(server.url + "/__faultline/", headers={"Accept": "text/html"}, timeout=10)
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]


def test_retry_after_window_lies_between_the_attempts(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    assert polite_client(server, "/v1/items/1", "polite").status_code == 200
    first, retry = server.journal(route="item")
    verdict = [v for v in server.admin_json("GET", "report")["verdicts"] if v["rule"] == "honorsRetryAfter"][0]
    assert verdict["outcome"] == "pass", verdict
    open_dashboard(browser, server, rows=2)
    wait(browser, js_true("return document.querySelector('.retry-after-window') !== null"), message="no Retry-After window")
    found = browser.execute_script("""
        const [a, b] = arguments;
        const bar = (q) => document.querySelector('.timeline .bar[data-seq="' + q + '"]');
        const lane = (q) => bar(q).closest('[data-lane]');
        const w = document.querySelector('.retry-after-window[data-advertised="' + a + '"]');
        const box = (el) => el.getBoundingClientRect();
        return {laneA: lane(a).dataset.lane, laneB: lane(b).dataset.lane, kind: lane(a).dataset.laneKind,
                windowLane: w.closest('[data-lane]').dataset.lane, retry: w.dataset.retry,
                wStart: +w.dataset.startMs, wEnd: +w.dataset.endMs, bStart: +bar(b).dataset.startMs, aStart: +bar(a).dataset.startMs,
                wx0: box(w).left, wx1: box(w).right, ax: box(bar(a).querySelector('rect.body')).left,
                bx: box(bar(b).querySelector('rect.body')).left};
    """, first["sequence"], retry["sequence"])
    assert found["kind"] == "logical"
    assert found["laneA"] == found["laneB"] == found["windowLane"], found
    assert int(found["retry"]) == retry["sequence"]
    assert found["aStart"] <= found["wStart"] < found["wEnd"] <= found["bStart"], found
    assert abs(found["bStart"] - retry["receivedAtMonotonicMs"]) < 0.01
    assert found["ax"] <= found["wx0"] + 0.5 and found["wx1"] <= found["bx"] + 0.5, found
    assert "1 s" in browser.execute_script("return document.querySelector('.window-label').textContent")


def test_a_new_request_appears_within_a_second(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    requests.get(server.url + "/other", timeout=10)
    open_dashboard(browser, server, rows=1)
    before = seqs(browser, "tr.row")
    requests.get(server.url + "/other?fresh=1", timeout=10)
    done = time.monotonic()
    wait(browser, js_true("return [...document.querySelectorAll('tr.row')].some(r => r.textContent.includes('fresh=1'))"),
         timeout=UI_WAIT_S, message="the new request never appeared in the table")
    latency = time.monotonic() - done
    assert latency <= 1.5, f"the new row took {latency:.2f} s"
    entry = server.journal(path="/other")[-1]
    assert entry["sequence"] not in before
    wait(browser, js_true("return document.querySelector('.timeline .bar[data-seq=\"' + arguments[0] + '\"]') !== null",
                          entry["sequence"]), message="the new request never appeared in the timeline")
    assert time.monotonic() - done <= 3.0
    assert browser.execute_script("return performance.getEntriesByType('navigation').length") == 1, "no reload"


def test_a_failing_verdict_highlights_exactly_its_evidence(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    requests.get(server.url + "/other", timeout=10)
    impatient_client(server, "/v1/items/2", "impatient")
    requests.get(server.url + "/other", timeout=10)
    verdict = [v for v in server.admin_json("GET", "report")["verdicts"] if v["rule"] == "honorsRetryAfter"][0]
    assert verdict["outcome"] == "fail" and verdict["evidence"], verdict
    total = len(server.journal())
    open_dashboard(browser, server, rows=total)
    first = browser.execute_script("const li = document.querySelector('ol.verdicts li[data-verdict]'); return [li.dataset.outcome, li.dataset.verdict]")
    assert first == ["fail", "retry-story/honorsRetryAfter"], "failing verdicts come first"
    assert seqs(browser, "[data-highlighted]") == []
    click(browser, "ol.verdicts li[data-verdict]")
    evidence = sorted(verdict["evidence"])
    wait(browser, lambda d: seqs(d, ".timeline .bar.highlighted[data-highlighted]") == evidence,
         message="the timeline did not highlight the evidence")
    assert seqs(browser, "tr.row.highlighted[data-highlighted]") == evidence
    assert seqs(browser, "[data-highlighted]") == evidence, "and nothing else"
    # one evidence link highlights that entry alone
    click(browser, f'ol.verdicts li[data-outcome="fail"] .evidence a[data-seq="{evidence[-1]}"]')
    wait(browser, lambda d: seqs(d, "[data-highlighted]") == [evidence[-1]], message="the link did not narrow the highlight")
    browser.find_element(By.XPATH, "//button[text()='Clear highlight']").click()
    wait(browser, lambda d: seqs(d, "[data-highlighted]") == [], message="the highlight was not cleared")
    assert severe_logs(browser) == []


def test_http2_streams_get_lanes_and_websocket_frames_show_in_the_detail(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    http2_three_streams(server, "/slow")
    websocket_session(server)
    h2 = server.journal(route="slow")
    assert len(h2) == 3 and {e["protocol"] for e in h2} == {"h2c"}
    connection = h2[0]["connection"]["id"]
    assert {e["connection"]["id"] for e in h2} == {connection}
    ws = server.journal(route="ws")[0]
    frames = ws["websocket"]["frames"]
    assert len(frames) >= 4
    open_dashboard(browser, server, rows=4)
    browser.find_element(By.XPATH, "//button[text()='By connection']").click()
    lanes = wait(browser, js_true("""
        const lanes = [...document.querySelectorAll('.lane-plot[data-lane-kind="stream"]')].map(g => g.dataset.lane);
        return lanes.length >= 3 ? lanes : false;"""), message="no stream lanes")
    mine = sorted(lane for lane in lanes if lane.startswith(f"conn {connection} · stream "))
    assert len(mine) == 3, lanes
    assert browser.execute_script("return document.querySelectorAll('.lane-plot[data-lane-kind=\"websocket\"]').length") == 1
    # open the WebSocket entry from the table with the keyboard: newest first, so it is the first row
    table = browser.find_element(By.CSS_SELECTOR, ".table-wrap")
    newest = seqs(browser, "tr.row")[-1]
    assert newest == ws["sequence"]
    browser.execute_script("arguments[0].focus()", table)
    ActionChains(browser).send_keys(Keys.ARROW_DOWN).perform()
    wait(browser, js_true("return document.querySelector('tr.row.selected') !== null"), message="arrow keys select no row")
    assert browser.execute_script("return document.querySelector('tr.row.selected').dataset.seq") == str(ws["sequence"])
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    wait(browser, js_true("return document.querySelector('dialog.detail').open"), message="Enter did not open the detail")
    shown = browser.find_elements(By.CSS_SELECTOR, "dialog.detail .ws-frame")
    assert len(shown) == len(frames)
    assert "hello" in shown[0].text and "ping" in " ".join(f.text for f in shown)
    shot(browser, "detail-websocket.png")
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    wait(browser, js_true("return !document.querySelector('dialog.detail').open"), message="Escape did not close the detail")
    assert browser.execute_script("return document.activeElement.classList.contains('table-wrap')"), "focus returns"
    assert severe_logs(browser) == []


def test_the_state_actions_ask_first(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    requests.get(server.url + "/other", timeout=10)
    open_dashboard(browser, server, rows=1)
    browser.find_element(By.XPATH, "//button[text()='Clear journal']").click()
    wait(browser, js_true("return document.querySelector('dialog.confirm').open"), message="no confirmation dialog")
    browser.find_element(By.XPATH, "//dialog[contains(@class,'confirm')]//button[text()='Cancel']").click()
    assert len(server.journal()) == 1, "cancel did nothing"
    browser.find_element(By.XPATH, "//button[text()='Clear journal']").click()
    wait(browser, js_true("return document.querySelector('dialog.confirm').open"), message="no confirmation dialog")
    browser.find_element(By.XPATH, "//dialog[contains(@class,'confirm')]//button[text()='Clear journal']").click()
    wait(browser, lambda d: server.journal() == [], message="the journal was not cleared")
    wait(browser, js_true("return document.querySelectorAll('tr.row').length === 0"), message="the table kept the entry")


def test_screenshots_of_the_retry_story(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    requests.get(server.url + "/other", timeout=10)
    polite_client(server, "/v1/items/1", "polite")
    impatient_client(server, "/v1/items/2", "impatient")
    try:
        requests.get(server.url + "/broken", timeout=10)
    except requests.RequestException:
        pass
    http2_three_streams(server, "/slow")
    total = len(server.journal())
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        open_dashboard(browser, server, rows=total)
        assert browser.find_element(By.CSS_SELECTOR, "header.top button[aria-label^='Colour theme']").text == "Theme: auto"
        assert browser.execute_script("return document.documentElement.dataset.theme") == "dark", "auto follows the system"
        background = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
        assert sum(int(x) for x in re.findall(r"\d+", background)[:3]) < 150, background
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    set_theme(browser, "light")
    assert browser.execute_script("return document.documentElement.dataset.theme") == "light"
    wait(browser, js_true("return document.querySelectorAll('.retry-after-window').length >= 3"), message="no windows")
    assert shot(browser, "dashboard-light.png").stat().st_size > 10000
    set_theme(browser, "dark")
    assert shot(browser, "dashboard-dark.png").stat().st_size > 10000
    browser.find_element(By.XPATH, "//button[text()='By connection']").click()
    shot(browser, "dashboard-dark-connections.png")
    set_theme(browser, "light")
    browser.find_element(By.XPATH, "//button[text()='By logical request']").click()
    click(browser, "ol.verdicts li[data-outcome='fail']")
    wait(browser, js_true("return document.querySelectorAll('[data-highlighted]').length > 0"), message="no highlight")
    shot(browser, "dashboard-light-highlighted.png")
    retry = server.journal(route="item")[-1]["sequence"]
    click(browser, f'tr.row[data-seq="{retry}"]')
    wait(browser, js_true("return document.querySelector('dialog.detail').open"), message="no detail")
    shot(browser, "detail-light.png")
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    assert severe_logs(browser) == []


def test_the_static_report_shows_the_run_offline(browser, start_faultline, write_scenario, tmp_path):
    server = start_faultline(write_scenario(retry_scenario()))
    requests.get(server.url + "/other", timeout=10)
    polite_client(server, "/v1/items/1", "polite")
    impatient_client(server, "/v1/items/2", "impatient")
    report = server.admin_json("GET", "report")
    journal = [e["sequence"] for e in server.journal()]
    failing = [v for v in report["verdicts"] if v["outcome"] == "fail"]
    assert failing
    page = tmp_path / "report.html"
    exported = subprocess.run([faultline_binary(), "export", "--format", "html", "-o", str(page), "--url", server.url],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)
    assert exported.returncode == 0, exported.stderr
    assert 'id="faultline-data"' in page.read_text()
    assert server.stop() == 0
    browser.set_network_conditions(offline=True, latency=0, download_throughput=0, upload_throughput=0)
    try:
        leave_page(browser)
        browser.get(page.as_uri())
        wait(browser, js_true("return document.body.dataset.ready === 'true'"), PAGE_LOAD_S, "the report never rendered")
        assert seqs(browser, "tr.row") == sorted(journal)
        assert browser.find_element(By.CSS_SELECTOR, ".status").text.startswith("report generated at ")
        if browser.find_elements(By.CSS_SELECTOR, "li.verdict-more button"):
            click(browser, "li.verdict-more button")
        shown = browser.execute_script("""return [...document.querySelectorAll('ol.verdicts li[data-verdict]')]
            .map(li => [li.dataset.verdict, li.dataset.outcome])""")
        expected = [[f"{v['scenario']}/{v['rule']}", v["outcome"]] for v in report["verdicts"]]
        assert sorted(shown) == sorted(expected)
        order = {"fail": 0, "inconclusive": 1, "pass": 2}
        assert [order[o] for _, o in shown] == sorted(order[o] for _, o in shown), "failing first"
        # zoomed on the first failing verdict's evidence, which is highlighted
        assert seqs(browser, ".timeline .bar.highlighted") == sorted(failing[0]["evidence"])
        assert not browser.find_elements(By.XPATH, "//button[text()='Clear journal']"), "no actions in a report"
        names = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert all(name.startswith("data:") for name in names), names
        assert severe_logs(browser) == []
        shot(browser, "static-report.png")
        set_theme(browser, "dark")
        shot(browser, "static-report-dark.png")
        set_theme(browser, "auto")
    finally:
        browser.delete_network_conditions()


def test_ten_thousand_entries_stay_fast(browser, tmp_path):
    """A synthetic journal of 10,000 entries as a static report: the page renders in time and keeps the DOM small."""
    base = 1_000_000.0
    entries = []
    for i in range(10_000):
        status = 503 if i % 7 == 0 else 200
        entries.append({
            "sequence": i + 1, "kind": "request", "receivedAt": "2026-01-01T00:00:00.000Z",
            "receivedAtMonotonicMs": base + i * 3.0, "connection": {"id": 1 + i // 50, "requestIndex": i % 50, "reused": i % 50 > 0, "client": "x"},
            "method": "GET", "target": f"/v1/items/{i % 40}", "path": f"/v1/items/{i % 40}", "httpVersion": "HTTP/1.1",
            "requestLine": f"GET /v1/items/{i % 40} HTTP/1.1", "protocol": "http/1.1", "stream": None, "http2": None, "tls": None,
            "headers": [["Host", "x"]], "body": "", "bodyEncoding": "utf8", "bodySize": 0, "bodyTruncated": False,
            "malformed": False, "scenario": "s", "route": "item", "step": 0, "matched": True, "answeredBy": None, "notes": [],
            "response": {"status": status, "fault": None, "chaos": False, "bytesWritten": 10, "outcome": "completed", "durationMs": 1.5}})
    data = {"generatedAt": "2026-01-01T00:01:00Z", "server": "http://x", "health": {"version": "t"},
            "requests": {"requests": entries, "counters": {}}, "report": {"passed": True, "outcome": "pass", "verdicts": []},
            "state": {}, "scenarios": {"scenarios": []}, "network": {}}
    page = tmp_path / "big.html"
    page.write_text(self_contained_html(data))
    leave_page(browser)
    began = time.monotonic()
    browser.get(page.as_uri())
    wait(browser, js_true("return document.body.dataset.ready === 'true'"), 20, "the big report never rendered")
    wait(browser, js_true("return document.querySelectorAll('.timeline [data-lane]').length > 0"), message="no lanes")
    elapsed = time.monotonic() - began
    assert elapsed < 8, f"10,000 entries took {elapsed:.1f} s"
    counts = browser.execute_script("""return {rows: document.querySelectorAll('tr.row').length,
        bars: document.querySelectorAll('.timeline .bar, .timeline .cluster').length}""")
    assert counts["rows"] < 200 and counts["bars"] < 1500, counts
    browser.find_element(By.XPATH, "//button[text()='By connection']").click()
    zoom_in = browser.find_element(By.CSS_SELECTOR, "button[aria-label='Zoom in']")
    began = time.monotonic()
    for _ in range(5):
        zoom_in.click()
    browser.execute_script("return 1")
    assert time.monotonic() - began < 5
    assert severe_logs(browser) == []


def test_a_network_change_is_a_band_and_filters_narrow_the_table(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    impatient_client(server, "/v1/items/3", "filters")
    requests.get(server.url + "/other", headers={"X-Marker": "needle-42"}, timeout=10)
    failed = [e["sequence"] for e in server.journal(status=503)]
    other = server.journal(route="other")[0]["sequence"]
    assert len(failed) == 1
    open_dashboard(browser, server, rows=3)
    # The listener refuses new connections (the admin API's too) until forMs puts it back: the page sees the
    # change and the restore on its long-poll connection, which the outage leaves alone.
    server.admin_json("POST", "network", json={"listener": "refuse", "forMs": 300})
    wait(browser, js_true("return document.querySelectorAll('.timeline .net-band').length >= 1"), message="no network band")
    labels = browser.execute_script("return [...document.querySelectorAll('.axis text.net-label')].map(t => t.textContent)")
    assert any("outage" in label for label in labels), labels
    wait(browser, js_true("return document.querySelectorAll('tr.row').length === 5"), 15, "no restore entry")
    status = browser.find_element(By.CSS_SELECTOR, "input[aria-label^='Status filter']")
    status.send_keys("503")
    wait(browser, lambda d: seqs(d, "tr.row") == failed, message="the status filter did not narrow the table")
    # One script call reads every row: the table re-renders when a live entry arrives, so elements found by one
    # call can be gone by the next (a StaleElementReferenceException, not a wrong page).
    texts = browser.execute_script("return [...document.querySelectorAll('tr.row')].map(r => r.innerText)")
    assert texts and all("503" in text for text in texts), texts
    status.send_keys(Keys.BACKSPACE * 3)
    wait(browser, lambda d: len(seqs(d, "tr.row")) >= 4, message="clearing the filter did not bring the rows back")
    search = browser.find_element(By.CSS_SELECTOR, "input[type='search']")
    search.send_keys("needle-42")
    wait(browser, lambda d: seqs(d, "tr.row") == [other], message="the search did not find the header")
    browser.get_log("browser")  # fetches refused during the outage are expected


def test_a_stopped_server_shows_reconnecting(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    open_dashboard(browser, server)
    assert server.stop() == 0
    wait(browser, js_true("return document.querySelector('.status').textContent.includes('reconnecting')"),
         message="the page did not notice the server stopped")
    browser.get("about:blank")
    browser.get_log("browser")  # the failed fetches are expected here


def test_the_detail_shows_bodies_as_json_or_hex_and_the_timeline_steps_by_keyboard(browser, start_faultline, write_scenario):
    server = start_faultline(write_scenario(retry_scenario()))
    requests.post(server.url + "/other", json={"order": {"id": 7, "items": [1, 2]}, "note": "<b>not markup</b>"}, timeout=10)
    requests.post(server.url + "/other", data=bytes(range(256)) * 2, headers={"Content-Type": "application/octet-stream"}, timeout=10)
    json_entry, binary_entry = server.journal(route="other")
    assert binary_entry["bodyEncoding"] == "base64"
    open_dashboard(browser, server, rows=2)

    def detail_of(seq):
        click(browser, f'tr.row[data-seq="{seq}"]')
        wait(browser, js_true("return document.querySelector('dialog.detail').open"), message="no detail")
        text = browser.execute_script("return [...document.querySelectorAll('dialog.detail pre')].map(p => p.textContent).join('\\n')")
        ActionChains(browser).send_keys(Keys.ESCAPE).perform()
        wait(browser, js_true("return !document.querySelector('dialog.detail').open"), message="Escape did not close it")
        return text

    pretty = detail_of(json_entry["sequence"])
    assert '\n  "order": {\n    "id": 7,' in pretty, pretty
    assert "<b>not markup</b>" in pretty and not browser.find_elements(By.CSS_SELECTOR, "dialog.detail b")
    hexdump = detail_of(binary_entry["sequence"])
    assert "000000  00 01 02 03 04 05 06 07  08 09 0a 0b" in hexdump, hexdump[:200]
    # the raw JSON toggle shows the entry as the API gave it
    click(browser, f'tr.row[data-seq="{json_entry["sequence"]}"]')
    wait(browser, js_true("return document.querySelector('dialog.detail').open"), message="no detail")
    browser.find_element(By.XPATH, "//dialog//button[text()='Raw JSON']").click()
    raw = browser.find_element(By.CSS_SELECTOR, "dialog.detail pre.raw-json").text
    assert json.loads(raw)["sequence"] == json_entry["sequence"]
    browser.find_element(By.XPATH, "//dialog//button[text()='Raw JSON']").click()
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    wait(browser, js_true("return !document.querySelector('dialog.detail').open"), message="Escape did not close it")
    # The dialog's `close` event, a task queued after it closes, gives focus back to the table that opened it: wait
    # for that before focusing the timeline, or it takes the focus back from under the keys below (CI saw `]` go to
    # the table once).
    wait(browser, js_true("return document.activeElement.classList.contains('table-wrap')"),
         message="focus did not return to the table after Escape")
    # [ and ] walk the timeline's entries; Enter opens the selected one
    browser.execute_script("document.querySelector('.timeline').focus()")
    assert browser.execute_script("return document.activeElement.classList.contains('timeline')"), "timeline focus"
    selected = "return (document.querySelector('.timeline .bar.selected') || {dataset: {}}).dataset.seq === arguments[0]"
    assert browser.execute_script(selected, str(json_entry["sequence"])), "the entry last opened is selected"
    ActionChains(browser).send_keys("]").perform()
    wait(browser, js_true(selected, str(binary_entry["sequence"])), message="] did not step to the next entry")
    ActionChains(browser).send_keys("[").perform()
    wait(browser, js_true(selected, str(json_entry["sequence"])), message="[ did not step back")
    assert json_entry["sequence"] == 1 and "#1 POST /other" in browser.find_element(By.CSS_SELECTOR, ".tl-status").text
    ActionChains(browser).send_keys("]").perform()
    wait(browser, js_true("return document.querySelector('.timeline .bar.selected').dataset.seq === arguments[0]",
                          str(binary_entry["sequence"])), message="] did not step to the next entry")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    wait(browser, js_true("return document.querySelector('dialog.detail').open"), message="Enter did not open the entry")
    assert browser.find_element(By.ID, "detail-title").text.startswith(f"#{binary_entry['sequence']} POST /other")
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    wait(browser, js_true("return document.activeElement.classList.contains('timeline')"), message="focus did not return")
    assert severe_logs(browser) == []


def test_a_pending_exchange_grows_then_settles(browser, start_faultline, write_scenario):
    scenario = retry_scenario()
    scenario["routes"].append({"id": "hang", "match": {"path": "/hang"}, "responses": [{"fault": "hang"}]})
    server = start_faultline(write_scenario(scenario))
    requests.get(server.url + "/other", timeout=10)
    open_dashboard(browser, server, rows=1)
    client = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        client.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        entry = server.wait_for(1, route="hang")[0]
        assert entry["response"]["outcome"] == "pending"
        bar = f'.timeline .bar.pending[data-seq="{entry["sequence"]}"] rect.body'
        width = "return (document.querySelector(arguments[0]) || {getBBox: () => ({width: -1})}).getBBox().width"
        wait(browser, lambda d: d.execute_script(width, bar) > 0, message="no pending bar")
        first = browser.execute_script(width, bar)
        wait(browser, lambda d: d.execute_script(width, bar) > first + 2, message="the pending bar did not grow")
        assert browser.execute_script("return document.querySelector('tr.row[data-seq=\"' + arguments[0] + '\"]').textContent",
                                      entry["sequence"]).count("pending")
        click(browser, f'tr.row[data-seq="{entry["sequence"]}"]')
        wait(browser, js_true("return document.querySelector('dialog.detail').open"), message="no detail")
        assert "pending" in browser.find_element(By.ID, "detail-title").text
    finally:
        client.close()
    wait(browser, lambda d: "hang-released" in d.find_element(By.ID, "detail-title").text,
         message="the open detail did not follow the entry's change")
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    settled = f'.timeline .bar[data-seq="{entry["sequence"]}"]'
    wait(browser, js_true("const b = document.querySelector(arguments[0]); return b && !b.classList.contains('pending')", settled),
         message="the released hang still shows as pending")
    assert browser.execute_script("return document.querySelector(arguments[0]).dataset.outcome", settled) == "hang-released"
    # newest first
    shown = [int(x) for x in browser.execute_script("return [...document.querySelectorAll('tr.row')].map(r => r.dataset.seq)")]
    assert shown == sorted(shown, reverse=True) and len(shown) == 2
    assert severe_logs(browser) == []


def test_a_restarted_server_is_reloaded_without_reloading_the_page(browser, start_faultline, write_scenario):
    path = write_scenario(retry_scenario())
    first = start_faultline(path)
    requests.get(first.url + "/other?run=first", timeout=10)
    open_dashboard(browser, first, rows=1)
    instance = first.admin_json("GET", "health")["instance"]
    assert first.stop() == 0
    wait(browser, js_true("return document.querySelector('.status').textContent.includes('reconnecting')"),
         message="the page did not notice the server stopped")
    second = start_faultline(path, args=["--port", first.port])  # the later --port wins: the same origin
    assert second.port == first.port and second.admin_json("GET", "health")["instance"] != instance
    requests.get(second.url + "/other?run=second", timeout=10)
    # backoff tops out at 5 s between attempts
    wait(browser, js_true("""return document.querySelector('.status').textContent.includes('live') &&
        [...document.querySelectorAll('tr.row')].map(r => r.textContent).join('|').includes('run=second') &&
        ![...document.querySelectorAll('tr.row')].some(r => r.textContent.includes('run=first'))"""), 15,
         "the page did not reload the new server's data")
    assert browser.execute_script("return performance.getEntriesByType('navigation').length") == 1
    browser.get_log("browser")  # fetches refused while the server was down are expected


def test_the_detail_shows_the_step_that_answered_as_scripted(browser, start_faultline, write_scenario):
    # The journal keeps the request, not the response's headers: the detail shows the answering step as written.
    server = start_faultline(write_scenario(retry_scenario(retry_after="7")))
    assert requests.get(server.url + "/v1/items/1", headers={"X-Case": "a"}, timeout=10).status_code == 503
    entry, = server.journal(route="item")
    open_dashboard(browser, server, rows=1)
    click(browser, f'tr.row[data-seq="{entry["sequence"]}"]')
    wait(browser, js_true("return document.querySelector('dialog.detail').open"), message="no detail")
    text = browser.execute_script("""
        const h = [...document.querySelectorAll('dialog.detail h3')].find(x => x.textContent === 'Scripted step');
        if (!h) return null;
        let out = '', n = h.nextElementSibling;
        while (n && n.tagName !== 'H3') { out += n.textContent + '\\n'; n = n.nextElementSibling; }
        return out;""")
    assert text is not None, "no Scripted step section"
    assert "item · step 0" in text and "503" in text and "Retry-After7" in text.replace(" ", ""), text
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()


CONTRAST_JS = r"""
const parse = (c) => { const m = c.match(/[\d.]+/g) || []; return m.length >= 3 ? [+m[0], +m[1], +m[2], m.length > 3 ? +m[3] : 1] : null; };
const blend = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
function background(el) {
  const layers = [];
  for (let n = el; n && n.nodeType === 1; n = n.parentElement) {
    const c = parse(getComputedStyle(n).backgroundColor);
    if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
  }
  let colour = [255, 255, 255, 1];
  if (layers.length && layers[layers.length - 1][3] >= 1) colour = layers.pop();
  while (layers.length) colour = blend(layers.pop(), colour);
  return colour;
}
const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
const worst = [];
for (const el of document.querySelectorAll('body *:not(svg):not(svg *)')) {
  const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  if (!own) continue;
  const r = el.getBoundingClientRect(), style = getComputedStyle(el);
  if (!r.width || !r.height || style.visibility === 'hidden' || el.closest('.hidden, [hidden]')) continue;
  const fg = parse(style.color); if (!fg) continue;
  const bg = background(el);
  const value = ratio(fg[3] < 1 ? blend(fg, bg) : fg, bg);
  if (value < 4.5) worst.push([el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ').join('.') : ''),
                               el.textContent.trim().slice(0, 30), Math.round(value * 100) / 100]);
}
return worst;
"""


def test_text_has_readable_contrast_in_light_and_dark(browser, start_faultline, write_scenario):
    # WCAG 2's AA ratio for body text (4.5:1) on every visible HTML text element of the page, both themes; the SVG
    # labels sit on bars and windows of their own colours and are checked by eye in the screenshots.
    server = start_faultline(write_scenario(retry_scenario()))
    polite_client(server, "/v1/items/1", "polite")
    impatient_client(server, "/v1/items/2", "impatient")
    open_dashboard(browser, server, rows=len(server.journal()))
    for theme in ("light", "dark"):
        set_theme(browser, theme)
        low = browser.execute_script(CONTRAST_JS)
        assert not low, f"{theme}: text below 4.5:1 — {low[:10]}"
    set_theme(browser, "light")
