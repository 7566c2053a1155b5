"""`Date` on every response the server originates (RFC 9110 §6.6.1), end to end over HTTP/1.1, h2c and h2:
scripted steps, 404s, admin answers, resources (200/206/304/412/416/428/405…), policy answers, malformed
requests, WebSocket refusals and the proxy's own failures; one field, IMF-fixdate, within a second of the clock.
A step's `"date": false` and the `no-date` resource deviation leave it out, a step's own `Date` is sent once as
written, `{{now.httpDate}}` renders it, and a proxied response keeps the upstream's (or gets one when the upstream
sent none, as §6.6.1 asks of a recipient that forwards it). Nothing sleeps; every read has a deadline."""

import math
import re
import socket
import ssl
import time
from email.utils import parsedate_to_datetime

import httpx
import pytest
import requests

from conftest import RawServer

IMF_FIXDATE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                         r"\d{4} \d\d:\d\d:\d\d GMT$")
OLD_DATE = "Sun, 06 Nov 1994 08:49:37 GMT"

SCENARIO = {
    "name": "dates",
    "rateLimits": [{"id": "one", "path": "/limited", "limit": 1, "windowMs": 60000}],
    "resources": [
        {"id": "doc", "path": "/doc", "text": "0123456789", "methods": ["PUT"]},
        {"id": "strict", "path": "/strict", "text": "0123456789", "methods": ["PUT"], "requireConditional": True},
        {"id": "bare", "path": "/bare", "text": "0123456789", "deviations": ["no-date"]},
    ],
    "routes": [
        {"id": "plain", "match": {"path": "/plain"}, "responses": [{"text": "hi"}]},
        {"id": "slow", "match": {"path": "/slow"}, "responses": [{"text": "late", "delayMs": 50}]},
        {"id": "limited", "match": {"path": "/limited"}, "responses": [{"status": 204}]},
        {"id": "nodate", "match": {"path": "/nodate"}, "responses": [{"text": "x", "date": False}]},
        {"id": "own", "match": {"path": "/own"}, "responses": [{"text": "x", "headers": {"Date": OLD_DATE}}]},
        {"id": "template", "match": {"path": "/template"}, "responses": [{"text": "{{now.httpDate}}"}]},
        {"id": "bare-step", "match": {"path": "/bare-step"},
         "responses": [{"resource": {"id": "doc", "deviations": ["no-date"]}}]},
        {"id": "ws", "match": {"path": "/ws"}, "responses": [{"websocket": {"script": []}}]},
    ],
}


@pytest.fixture
def server(start_faultline, write_scenario, tmp_path):
    folder = tmp_path / "tls"
    started = start_faultline(write_scenario(SCENARIO, name="dates.json"), args=["--tls-port", "0", "--tls-dir", folder])
    started.ca = folder / "ca.pem"
    return started


def assert_one_date_of_now(values, before, after, what):
    """`values` (every Date field of one response) is one IMF-fixdate between `before` and `after` (Unix seconds),
    to the second."""
    assert len(values) == 1, f"{what}: expected one Date field, got {values}"
    assert IMF_FIXDATE.match(values[0]), f"{what}: {values[0]!r} is not an IMF-fixdate"
    stamp = parsedate_to_datetime(values[0]).timestamp()
    assert math.floor(before) <= stamp <= after, f"{what}: Date {values[0]} is not the clock's ({before}–{after})"


def dates(response):
    """Every Date field of a RawResponse (conftest), in order."""
    return [value for name, value in response.headers if name.lower() == "date"]


def raw(raw_connect, server, request):
    connection = raw_connect(server.port)
    before = time.time()
    connection.send(request)
    response = connection.read_responses(1)[0]
    return response, before, time.time()


def etag_of(server, path):
    return requests.get(server.url + path, timeout=5).headers["ETag"]


def answers(server):
    """(what, method, path, headers, body, status) for answers of every kind the server originates."""
    etag = etag_of(server, "/doc")
    return [
        ("scripted step", "GET", "/plain", {}, b"", 200),
        ("delayed step", "GET", "/slow", {}, b"", 200),
        ("unmatched 404", "GET", "/nowhere", {}, b"", 404),
        ("admin answer", "GET", "/__faultline/health", {}, b"", 200),
        ("admin 404", "GET", "/__faultline/no-such-thing", {}, b"", 404),
        ("resource 200", "GET", "/doc", {}, b"", 200),
        ("resource 206", "GET", "/doc", {"Range": "bytes=0-1"}, b"", 206),
        ("resource 304", "GET", "/doc", {"If-None-Match": etag}, b"", 304),
        ("resource 412", "GET", "/doc", {"If-Match": '"other"'}, b"", 412),
        ("resource 416", "GET", "/doc", {"Range": "bytes=99-"}, b"", 416),
        ("resource 428", "PUT", "/strict", {"Content-Type": "text/plain"}, b"x", 428),
        ("resource 405", "DELETE", "/doc", {}, b"", 405),
        ("resource 204", "PUT", "/doc", {"Content-Type": "text/plain", "If-Match": etag}, b"new", 204),
        ("resource 404", "GET", "/doc/nothing", {}, b"", 404),
        ("rate limit 204", "GET", "/limited", {}, b"", 204),
        ("rate limit 429", "GET", "/limited", {}, b"", 429),
    ]


def request_text(method, path, headers, body):
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost"] + [f"{name}: {value}" for name, value in headers.items()]
    if body or method in ("PUT", "POST"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# -- HTTP/1.1 ----------------------------------------------------------------------------------------------


def test_every_answer_over_http1_carries_one_date_of_the_clock(server, raw_connect):
    for what, method, path, headers, body, status in answers(server):
        response, before, after = raw(raw_connect, server, request_text(method, path, headers, body))
        assert response.status == status, f"{what}: {response}"
        assert_one_date_of_now(dates(response), before, after, what)
        assert response.head.split("\r\n")[1].startswith("Date: "), f"{what}: Date follows the status line"


def test_a_412_carries_date_with_its_last_modified(server):
    response = requests.get(server.url + "/doc", headers={"If-Match": '"other"'}, timeout=5)
    assert response.status_code == 412
    assert "Last-Modified" in response.headers and "Date" in response.headers
    assert parsedate_to_datetime(response.headers["Last-Modified"]) <= parsedate_to_datetime(response.headers["Date"])


def test_a_malformed_request_and_a_websocket_refusal_are_dated(server, raw_connect):
    response, before, after = raw(raw_connect, server, b"GET / HTTP/1.1\r\nBad Header\r\n\r\n")
    assert response.status == 400
    assert_one_date_of_now(dates(response), before, after, "400 malformed")
    response, before, after = raw(raw_connect, server, request_text("GET", "/ws", {}, b""))
    assert response.status == 426
    assert_one_date_of_now(dates(response), before, after, "426 WebSocket refusal")


def test_plain_http_on_the_tls_port_gets_a_dated_400(server, raw_connect):
    connection = raw_connect(server.tls_port)
    before = time.time()
    connection.send(request_text("GET", "/plain", {}, b""))
    (response,) = connection.read_responses(1)
    assert response.status == 400
    assert_one_date_of_now(dates(response), before, time.time(), "the TLS port's 400")


def test_a_websocket_101_is_dated(server, raw_connect):
    connection = raw_connect(server.port)
    before = time.time()
    connection.send(request_text("GET", "/ws", {"Upgrade": "websocket", "Connection": "Upgrade",
                                                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                                "Sec-WebSocket-Version": "13"}, b""))
    head = connection.read_until(lambda data: b"\r\n\r\n" in data).split(b"\r\n\r\n")[0].decode()
    assert head.startswith("HTTP/1.1 101 ")
    values = [line[5:].strip() for line in head.split("\r\n")[1:] if line.lower().startswith("date:")]
    assert_one_date_of_now(values, before, time.time(), "101")


def test_date_false_and_no_date_leave_it_out_and_an_own_date_is_sent_once(server, raw_connect):
    for path, headers in [("/nodate", {}), ("/bare", {}), ("/bare", {"If-Match": '"other"'}),
                          ("/bare-step", {}), ("/bare-step", {"Range": "bytes=0-1"})]:
        response, _, _ = raw(raw_connect, server, request_text("GET", path, headers, b""))
        assert response.status in (200, 206, 412) and dates(response) == [], f"{path} {headers}: {response}"
    response, _, _ = raw(raw_connect, server, request_text("GET", "/own", {}, b""))
    assert dates(response) == [OLD_DATE], "the step's own Date, once"


def test_the_now_http_date_template_renders_the_date(server):
    before = time.time()
    response = requests.get(server.url + "/template", timeout=5)
    assert_one_date_of_now([response.text], before, time.time(), "{{now.httpDate}}")
    assert response.text == response.headers["Date"] or abs(
        parsedate_to_datetime(response.text).timestamp() - parsedate_to_datetime(response.headers["Date"]).timestamp()) <= 1


# -- HTTP/2 ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["h2c", "h2"])
def test_every_answer_over_http2_carries_one_date_of_the_clock(server, protocol):
    if protocol == "h2":
        client = httpx.Client(http2=True, verify=ssl.create_default_context(cafile=str(server.ca)), timeout=5)
        base = f"https://localhost:{server.tls_port}"
    else:  # prior knowledge
        client = httpx.Client(http1=False, http2=True, timeout=5)
        base = server.url
    with client:
        for what, method, path, headers, body, status in answers(server):
            before = time.time()
            response = client.request(method, base + path, headers=headers, content=body or None)
            after = time.time()
            assert response.http_version == "HTTP/2", what
            assert response.status_code == status, f"{what}: {response.status_code} {response.text}"
            assert_one_date_of_now(response.headers.get_list("date"), before, after, f"{protocol} {what}")
        for path in ["/nodate", "/bare", "/bare-step"]:
            assert client.get(base + path).headers.get_list("date") == [], path
        assert client.get(base + "/own").headers.get_list("date") == [OLD_DATE]
        rendered = client.get(base + "/template")
        assert IMF_FIXDATE.match(rendered.text), rendered.text


def test_a_body_over_the_limit_gets_a_dated_413_over_both_protocols(start_faultline, write_scenario, raw_connect):
    started = start_faultline(write_scenario(SCENARIO, name="dates.json"), args=["--max-body", "10"])
    with httpx.Client(http1=False, http2=True, timeout=5) as client:
        before = time.time()
        response = client.post(started.url + "/plain", content=b"a" * 100)
        assert response.status_code == 413
        assert_one_date_of_now(response.headers.get_list("date"), before, time.time(), "h2c 413")
    response, before, after = raw(raw_connect, started, request_text("POST", "/plain", {}, b"a" * 100))
    assert response.status == 413
    assert_one_date_of_now(dates(response), before, after, "HTTP/1.1 413")


# -- the proxy ---------------------------------------------------------------------------------------------


class DatingUpstream(RawServer):
    """/…with-date… answers with an old Date, /reset… with RST, anything else with no Date at all."""

    def __init__(self):
        super().__init__()
        self.start()

    def answer(self, client, number, head, rest):
        path = head.decode("latin-1").split("\r\n")[0].split(" ")[1]
        if "reset" in path:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            client.close()
            return None
        dated = f"Date: {OLD_DATE}\r\n".encode() if "with-date" in path else b""
        client.sendall(b"HTTP/1.1 200 OK\r\n" + dated + b"Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
        return rest


@pytest.fixture
def dating_upstream():
    upstream = DatingUpstream()
    yield upstream
    upstream.close()


def test_a_proxied_response_keeps_the_upstreams_date_or_gets_one(
        start_faultline, write_scenario, dating_upstream, raw_connect):
    scenario = {"name": "proxy", "proxy": {"upstream": dating_upstream.url},
                "routes": [{"id": "strip", "match": {"pathPrefix": "/strip/"}, "responses": [{"proxy": True, "date": False}]},
                           {"id": "own", "match": {"pathPrefix": "/own/"},
                            "responses": [{"proxy": True, "headers": {"Date": "Mon, 07 Nov 1994 08:49:37 GMT"}}]}]}
    server = start_faultline(write_scenario(scenario, name="proxy.json"))
    response, _, _ = raw(raw_connect, server, request_text("GET", "/with-date", {}, b""))
    assert response.status == 200 and dates(response) == [OLD_DATE], "the upstream's Date, once"
    response, before, after = raw(raw_connect, server, request_text("GET", "/without", {}, b""))
    assert response.status == 200
    assert_one_date_of_now(dates(response), before, after, "an upstream answer without Date")
    response, _, _ = raw(raw_connect, server, request_text("GET", "/strip/with-date", {}, b""))
    assert dates(response) == [], '"date": false on a proxy step: none at all'
    response, _, _ = raw(raw_connect, server, request_text("GET", "/own/with-date", {}, b""))
    assert dates(response) == ["Mon, 07 Nov 1994 08:49:37 GMT"], "the step's Date over the upstream's"
    response, before, after = raw(raw_connect, server, request_text("GET", "/reset", {}, b""))
    assert response.status == 502
    assert_one_date_of_now(dates(response), before, after, "the proxy's own 502")
    with httpx.Client(http1=False, http2=True, timeout=5) as client:
        assert client.get(server.url + "/with-date").headers.get_list("date") == [OLD_DATE]
        before = time.time()
        assert_one_date_of_now(client.get(server.url + "/without").headers.get_list("date"), before, time.time(),
                               "h2c, an upstream answer without Date")
