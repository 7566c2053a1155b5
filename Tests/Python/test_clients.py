"""Real Python HTTP clients (requests + urllib3 Retry, requests.Session, http.client, raw sockets) against
`faultline serve`, checked through the journal: what the client actually put on the wire."""

import http.client
import json

import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

SLACK_MS = 10


def retrying_session(respect_retry_after):
    retry = Retry(
        total=3,
        status_forcelist=[503],
        respect_retry_after_header=respect_retry_after,
        allowed_methods=frozenset({"GET", "HEAD"}),
        backoff_factor=0,
        raise_on_status=True,
    )
    session = requests.Session()
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    return session


def statuses(entries):
    return [entry["response"]["status"] for entry in entries]


def test_urllib3_retry_honours_retry_after_through_503s(faultline):
    with retrying_session(respect_retry_after=True) as session:
        response = session.get(f"{faultline.url}/v1/products/42", timeout=10)
    assert response.status_code == 200
    assert response.json() == {"id": "42", "name": "Widget 42", "price": 9.99, "currency": "EUR"}
    assert len(response.raw.retries.history) == 2, "urllib3 retried twice"

    attempts = faultline.journal(route="product")
    assert statuses(attempts) == [503, 503, 200]
    assert [entry["step"] for entry in attempts] == [0, 0, 1]
    assert all(entry["target"] == "/v1/products/42" for entry in attempts)
    times = [entry["receivedAtMonotonicMs"] for entry in attempts]
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    assert all(gap >= 1000 - SLACK_MS for gap in gaps), f"Retry-After: 1 not honoured, gaps {gaps} ms"


def test_urllib3_retry_without_retry_after_hammers_the_server(faultline):
    """The control for the test above: the journal's timing does tell the two client behaviours apart."""
    with retrying_session(respect_retry_after=False) as session:
        response = session.get(f"{faultline.url}/v1/products/7", timeout=10)
    assert response.status_code == 200
    attempts = faultline.journal(route="product")
    assert statuses(attempts) == [503, 503, 200]
    times = [entry["receivedAtMonotonicMs"] for entry in attempts]
    assert times[2] - times[0] < 1000, f"no Retry-After wait expected, got {times}"


def test_retry_gives_up_when_the_script_keeps_failing(start_faultline, write_scenario):
    always_503 = write_scenario({
        "name": "down",
        "routes": [{"id": "down", "match": {"path": "/down"},
                    "responses": [{"status": 503, "json": {"error": "down"}}]}],
    })
    server = start_faultline(always_503)
    with retrying_session(respect_retry_after=True) as session:
        with pytest.raises(requests.exceptions.RetryError):
            session.get(f"{server.url}/down", timeout=10)
    assert statuses(server.journal(route="down")) == [503] * 4, "total=3 means one try plus three retries"


def test_session_reuses_one_keep_alive_connection(faultline):
    with requests.Session() as session:
        bodies = [session.get(f"{faultline.url}/healthz", timeout=5).text for _ in range(3)]
        search = session.get(f"{faultline.url}/v1/products", params={"q": "widget"}, timeout=5)
    assert bodies == ["ok\n"] * 3
    assert search.json()["query"] == "widget"

    entries = faultline.journal()
    assert len(entries) == 4
    assert len({entry["connection"]["id"] for entry in entries}) == 1
    assert [entry["connection"]["reused"] for entry in entries] == [False, True, True, True]
    assert [entry["connection"]["requestIndex"] for entry in entries] == [0, 1, 2, 3]
    assert [entry["route"] for entry in entries] == ["health", "health", "health", "product-search"]


def test_separate_requests_calls_use_separate_connections(faultline):
    for _ in range(2):
        assert requests.get(f"{faultline.url}/healthz", timeout=5).status_code == 200
    entries = faultline.journal()
    assert len({entry["connection"]["id"] for entry in entries}) == 2
    assert [entry["connection"]["reused"] for entry in entries] == [False, False]


class HTTP10Connection(http.client.HTTPConnection):
    _http_vsn = 10
    _http_vsn_str = "HTTP/1.0"


def test_http_1_0_without_keep_alive_is_answered_with_connection_close(faultline):
    conn = HTTP10Connection("127.0.0.1", faultline.port, timeout=5)
    try:
        conn.connect()
        wire = conn.sock.dup()  # a second handle on the same TCP connection, to see the server's FIN
        wire.settimeout(5)
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    try:
        assert response.status == 200
        assert body == b"ok\n"
        assert response.getheader("Connection") == "close"
        assert wire.recv(1) == b"", "the server closes the connection after an HTTP/1.0 response"
    finally:
        wire.close()
    entry, = faultline.journal()
    assert entry["httpVersion"] == "HTTP/1.0"
    assert entry["requestLine"] == "GET /healthz HTTP/1.0"
    assert entry["response"]["outcome"] == "completed"


def test_http_1_0_with_keep_alive_keeps_the_connection(faultline):
    conn = HTTP10Connection("127.0.0.1", faultline.port, timeout=5)
    try:
        replies = []
        for _ in range(2):
            conn.request("GET", "/healthz", headers={"Connection": "keep-alive"})
            response = conn.getresponse()
            replies.append((response.status, response.getheader("Connection"), response.read()))
    finally:
        conn.close()
    assert replies == [(200, "keep-alive", b"ok\n")] * 2
    entries = faultline.journal()
    assert [entry["connection"]["reused"] for entry in entries] == [False, True]


def test_expect_100_continue_is_answered_before_the_body_is_sent(faultline):
    body = json.dumps({"sku": "w-1", "qty": 3}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", faultline.port, timeout=5)
    try:
        conn.putrequest("POST", "/v1/quotes")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(body)))
        conn.putheader("Expect", "100-continue")
        conn.endheaders()
        # Nothing of the body is sent yet: the interim response must come on its own.
        conn.sock.settimeout(5)
        interim = b""
        while b"\r\n\r\n" not in interim:
            chunk = conn.sock.recv(1)
            assert chunk, f"connection closed while waiting for 100 Continue; got {interim!r}"
            interim += chunk
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        conn.send(body)
        response = conn.getresponse()
        answer = json.loads(response.read())
    finally:
        conn.close()
    assert response.status == 201
    entry, = faultline.journal(route="quote")
    assert entry["body"] == body.decode()
    assert answer == {"quote": str(entry["sequence"]), "total": 12.5}
    assert ["Expect", "100-continue"] in entry["headers"]


def test_pipelined_requests_are_answered_in_order(faultline, raw_connect):
    conn = raw_connect(faultline.port)
    # The slow report (300 ms) first: the fast ones behind it must wait their turn.
    conn.send(
        "GET /v1/reports/first HTTP/1.1\r\nHost: x\r\n\r\n"
        "GET /v1/products?q=second HTTP/1.1\r\nHost: x\r\n\r\n"
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    responses = conn.read_responses(3, timeout=5)
    assert [r.status for r in responses] == [200, 200, 200]
    assert json.loads(responses[0].body) == {"report": "first", "rows": 1200}
    assert json.loads(responses[1].body)["query"] == "second"
    assert responses[2].body == b"ok\n"

    entries = faultline.journal()
    assert [entry["route"] for entry in entries] == ["report", "product-search", "health"]
    assert len({entry["connection"]["id"] for entry in entries}) == 1
    assert [entry["connection"]["requestIndex"] for entry in entries] == [0, 1, 2]
    # The connection is still usable afterwards.
    conn.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert conn.read_responses(1)[0].body == b"ok\n"

