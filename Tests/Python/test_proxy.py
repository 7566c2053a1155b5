"""Proxy mode end to end (README "Proxy and record", ARCHITECTURE §4d): a real upstream — a second Faultline, or a
small raw-socket server whose every request is recorded — behind `faultline serve` with a `proxy` section or
`--proxy`. Forwarding (Host rewrite, hop-by-hop fields dropped, bodies), unmatched requests, faults on proxied
routes seen by curl, requests and httpx exactly as on scripted ones, policies in front, HTTPS upstreams with a CA
file, upstream failures as 502/504 with the reason while other requests flow, pooled reuse, HTTP/2 clients, and
`faultline record` written, validated, served back byte for byte, with secrets redacted.

Nothing sleeps: the journal is long-polled, the raw upstream's events are waited on with deadlines."""

import json
import queue
import re
import socket
import subprocess
import threading
import time

import httpx
import jsonschema
import pytest
import requests

from conftest import SCENARIOS_DIR, RawServer, faultline_binary, start_recorder

SCHEMA = json.loads((SCENARIOS_DIR / "faultline.schema.json").read_text())
DEADLINE_S = 5.0
ITEM = {"id": "1", "name": "gadget", "price": 12.5}
ITEM_BYTES = len(json.dumps(ITEM, separators=(",", ":")))
TRUNCATED = f"truncate-body: {ITEM_BYTES // 2} of {ITEM_BYTES} body bytes sent"


# -- a raw upstream ----------------------------------------------------------------------------------------


class RawUpstream(RawServer):
    """A keep-alive HTTP/1.1 server on a thread, behaving by path:

    /echo...    200 with a JSON body naming the request line, the fields and the body it received
    /hang       reads the request, never answers
    /reset      reads the request, answers RST
    /garbage    answers bytes that are not HTTP, then closes
    /half       announces 100 bytes, sends 10, closes
    /busy       503 "busy"
    anything    200 "ok"

    Every request is put on `requests` (a queue) as (connection number, request line, [(name, value)], body)."""

    def __init__(self):
        super().__init__()
        self.requests = queue.Queue()
        self.start()

    def answer(self, client, number, head, buffer):
        lines = head.decode("latin-1").split("\r\n")
        fields = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
        length = next((int(value) for name, value in fields if name.lower() == "content-length"), 0)
        while len(buffer) < length:
            buffer += client.recv(65536)
        body, buffer = buffer[:length], buffer[length:]
        self.requests.put((number, lines[0], fields, body))
        path = lines[0].split(" ")[1]
        if path.startswith("/hang"):
            client.recv(1)  # until the proxy gives up and closes
            return None
        if path.startswith("/reset"):
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            client.close()
            return None
        if path.startswith("/garbage"):
            client.sendall(b"SSH-2.0-OpenSSH_9.0\r\n\r\n")
            client.close()
            return None
        if path.startswith("/half"):
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            client.close()
            return None
        if path.startswith("/busy"):
            client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                           b"Content-Length: 4\r\n\r\nbusy")
        elif path.startswith("/echo"):
            payload = json.dumps({"requestLine": lines[0], "fields": fields,
                                  "body": body.decode("utf-8", "replace")}).encode()
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
                           b"Keep-Alive: timeout=5\r\nX-Upstream: raw\r\nContent-Length: "
                           + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        else:
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
        return buffer

    def next_request(self, timeout=DEADLINE_S):
        try:
            return self.requests.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the upstream saw no request within {timeout} s") from None


@pytest.fixture
def raw_upstream():
    upstream = RawUpstream()
    yield upstream
    upstream.close()


def field(fields, name):
    values = [value for key, value in fields if key.lower() == name.lower()]
    return values[0] if values else None


def proxied(server, path, count=1, **filters):
    """The journal entries of `path` once `count` of them have finished."""
    return server.wait_for(count, path=path, completed=True, **filters)


# -- upstream Faultline ------------------------------------------------------------------------------------

UPSTREAM = {
    "name": "upstream",
    "routes": [
        {"id": "item", "match": {"method": "GET", "path": "/items/{id}"},
         "responses": [{"status": 200, "json": {"id": "{{path.id}}", "name": "gadget", "price": 12.5}}]},
        {"id": "orders", "match": {"method": "GET", "path": "/orders/{id}"},
         "responses": [{"status": 200, "headers": {"Set-Cookie": "session=s3cr3t; HttpOnly", "X-Order": "{{path.id}}"},
                        "json": {"id": "{{path.id}}", "token": "tok-{{path.id}}", "total": 30}}]},
        {"id": "search", "match": {"method": "GET", "path": "/search", "query": {"q": {"present": True}}},
         "responses": [{"status": 200, "text": "results for {{query.q}}"}]},
        {"id": "create", "match": {"method": "POST", "path": "/orders"},
         "responses": [{"status": 201, "headers": {"Location": "/orders/99"}, "json": {"id": "99", "created": True}}]},
        {"id": "logo", "match": {"method": "GET", "path": "/logo.png"},
         "responses": [{"status": 200, "headers": {"Content-Type": "image/png"}, "base64": "iVBORw0KGgoAAAANSUhEUg=="}]},
    ],
}


@pytest.fixture
def upstream(start_faultline, write_scenario):
    return start_faultline(write_scenario(UPSTREAM, name="upstream.json"), args=["--quiet"])


def proxy_scenario(upstream_url, routes=(), **proxy):
    return {"name": "proxy", "proxy": {"upstream": upstream_url, **proxy}, "routes": list(routes)}


# -- forwarding --------------------------------------------------------------------------------------------


def test_forwards_get_and_post_with_host_rewritten_and_hop_by_hop_fields_dropped(
        start_faultline, write_scenario, raw_upstream):
    server = start_faultline(write_scenario(proxy_scenario(raw_upstream.url)))
    response = requests.post(f"{server.url}/echo/orders?x=1", data=b'{"qty": 2}', timeout=DEADLINE_S, headers={
        "Content-Type": "application/json", "X-Trace": "t-1", "Connection": "keep-alive, X-Private",
        "X-Private": "hop", "TE": "trailers", "Proxy-Authorization": "Basic c2VjcmV0", "Upgrade": "websocket",
        "Keep-Alive": "timeout=3", "X-Forwarded-For": "10.1.2.3", "Host": "shop.example"})
    assert response.status_code == 200
    number, request_line, fields, body = raw_upstream.next_request()
    assert request_line == "POST /echo/orders?x=1 HTTP/1.1"
    assert body == b'{"qty": 2}' and field(fields, "Content-Length") == "10"
    assert field(fields, "Host") == f"127.0.0.1:{raw_upstream.port}", "Host is the upstream's by default"
    assert field(fields, "X-Forwarded-Host") == "shop.example"
    assert field(fields, "X-Trace") == "t-1" and field(fields, "Content-Type") == "application/json"
    for hop in ["Connection", "X-Private", "TE", "Proxy-Authorization", "Upgrade", "Keep-Alive", "Transfer-Encoding"]:
        assert field(fields, hop) is None, f"{hop} was forwarded: {fields}"
    assert field(fields, "Via") == "1.1 faultline"
    assert field(fields, "X-Forwarded-For") == "10.1.2.3, 127.0.0.1"
    # And the way back: the upstream's hop-by-hop fields stay behind, Via gains our hop.
    assert response.headers["X-Upstream"] == "raw" and response.headers["Via"] == "1.1 faultline"
    assert "Keep-Alive" not in response.headers
    assert response.json()["requestLine"] == "POST /echo/orders?x=1 HTTP/1.1"
    entry = proxied(server, "/echo/orders")[0]
    assert entry["route"] is None and entry["proxy"]["upstreamStatus"] == 200
    assert entry["proxy"]["upstream"] == f"{raw_upstream.url}/echo/orders?x=1"

    get = requests.get(f"{server.url}/echo/get", timeout=DEADLINE_S)
    assert get.status_code == 200
    _, request_line, fields, body = raw_upstream.next_request()
    assert request_line == "GET /echo/get HTTP/1.1" and body == b"" and field(fields, "Content-Length") is None


def test_host_client_keeps_the_clients_host_and_a_base_path_prefixes_targets(
        start_faultline, write_scenario, raw_upstream):
    scenario = proxy_scenario(raw_upstream.url + "/api", routes=[
        {"id": "kept", "match": {"pathPrefix": "/v1"}, "proxy": {"host": "client"}}])
    server = start_faultline(write_scenario(scenario))
    assert requests.get(f"{server.url}/v1/x", headers={"Host": "shop.example:8080"}, timeout=DEADLINE_S).ok
    _, request_line, fields, _ = raw_upstream.next_request()
    assert request_line == "GET /api/v1/x HTTP/1.1" and field(fields, "Host") == "shop.example:8080"
    assert requests.get(f"{server.url}/other", headers={"Host": "shop.example"}, timeout=DEADLINE_S).ok
    _, request_line, fields, _ = raw_upstream.next_request()
    assert request_line == "GET /api/other HTTP/1.1" and field(fields, "Host") == f"127.0.0.1:{raw_upstream.port}"


def test_unmatched_requests_forward_or_get_404(start_faultline, write_scenario, upstream):
    route = {"id": "local", "match": {"path": "/local"}, "responses": [{"status": 200, "text": "scripted here"}]}
    forwarding = start_faultline(write_scenario(proxy_scenario(upstream.url, [route]), name="forward.json"))
    refusing = start_faultline(write_scenario(proxy_scenario(upstream.url, [route], unmatched="404"), name="404.json"))
    assert requests.get(f"{forwarding.url}/items/7", timeout=DEADLINE_S).json() == {**ITEM, "id": "7"}
    missed = requests.get(f"{refusing.url}/items/7", timeout=DEADLINE_S)
    assert missed.status_code == 404 and missed.json()["error"] == "no route matched"
    # The scripted route beside them answers itself on both, and never reaches the upstream.
    for server in (forwarding, refusing):
        local = requests.get(f"{server.url}/local", timeout=DEADLINE_S)
        assert local.text == "scripted here" and "Via" not in local.headers
    assert upstream.count(path="/local") == 0
    assert upstream.count(path="/items/7") == 1


def test_serve_proxy_flag_forwards_what_no_route_takes(start_faultline, write_scenario, upstream):
    route = {"id": "local", "match": {"path": "/local"}, "responses": [{"status": 200, "text": "scripted"}]}
    server = start_faultline(write_scenario({"name": "plain", "routes": [route]}), args=["--proxy", upstream.url])
    assert requests.get(f"{server.url}/items/3", timeout=DEADLINE_S).json()["id"] == "3"
    assert requests.get(f"{server.url}/local", timeout=DEADLINE_S).text == "scripted"


# -- faults on proxied traffic -----------------------------------------------------------------------------


def fault_routes(upstream_url):
    """The same fault on a proxied route and on a scripted one whose body is the upstream's bytes."""
    body = json.dumps(ITEM, separators=(",", ":"))
    return [
        {"id": "proxied", "match": {"path": "/items/1"}, "responses": [{"proxy": True, "fault": "truncate-body"}]},
        {"id": "scripted", "match": {"path": "/scripted"},
         "responses": [{"status": 200, "headers": {"Content-Type": "application/json"}, "text": body,
                        "fault": "truncate-body"}]},
    ]


def test_truncate_body_on_a_proxied_route_breaks_clients_as_on_a_scripted_one(start_faultline, write_scenario, upstream):
    server = start_faultline(write_scenario(proxy_scenario(upstream.url, fault_routes(upstream.url))))
    outcomes = {}
    for path in ["/items/1", "/scripted"]:
        curl = subprocess.run(["curl", "-sS", "--max-time", "5", f"{server.url}{path}"], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=15)
        with pytest.raises(requests.exceptions.ChunkedEncodingError) as python_requests:
            requests.get(f"{server.url}{path}", timeout=DEADLINE_S)
        with pytest.raises(httpx.RemoteProtocolError) as python_httpx:
            httpx.get(f"{server.url}{path}", timeout=DEADLINE_S)
        outcomes[path] = (curl.returncode, curl.stdout, str(python_requests.value), str(python_httpx.value))
    assert outcomes["/items/1"][0] == 18, outcomes  # curl: partial file
    assert outcomes["/items/1"] == outcomes["/scripted"]
    entries = proxied(server, "/items/1", 3)
    for entry in entries:
        assert entry["response"]["fault"] == "truncate-body" and entry["response"]["outcome"] == "closed-by-fault"
        assert entry["proxy"]["changed"] == [TRUNCATED]


def test_503_with_retry_after_for_the_first_attempts_then_the_upstream(start_faultline, write_scenario, upstream):
    route = {"id": "flaky", "match": {"path": "/items/{id}"}, "responses": [
        {"status": 503, "headers": {"Retry-After": "1"}, "json": {"error": "busy"}, "times": 2},
        {"proxy": True}]}
    server = start_faultline(write_scenario(proxy_scenario(upstream.url, [route])))
    statuses = [requests.get(f"{server.url}/items/5", timeout=DEADLINE_S) for _ in range(3)]
    assert [r.status_code for r in statuses] == [503, 503, 200]
    assert statuses[0].headers["Retry-After"] == "1" and statuses[2].json()["id"] == "5"
    assert upstream.count(path="/items/5") == 1, "the scripted 503s never reached the upstream"
    entries = proxied(server, "/items/5", 3)
    assert [e.get("proxy") is not None for e in entries] == [False, False, True]
    assert [e["step"] for e in entries] == [0, 0, 1]


def test_a_proxy_steps_headers_are_templated_like_a_scripted_steps(start_faultline, write_scenario, upstream):
    route = {"id": "item", "match": {"path": "/items/{id}"},
             "responses": [{"proxy": True, "headers": {"X-Trace": "req-{{request.id}}-item-{{path.id}}"}}]}
    server = start_faultline(write_scenario(proxy_scenario(upstream.url, [route])))
    answer = requests.get(f"{server.url}/items/7", timeout=5)
    assert answer.status_code == 200 and answer.json()["id"] == "7"
    (entry,) = proxied(server, "/items/7")
    assert answer.headers["X-Trace"] == f"req-{entry['sequence']}-item-7"


def test_a_delay_on_a_proxied_step_waits_after_the_upstream_answered(start_faultline, write_scenario, upstream):
    route = {"id": "slow", "match": {"path": "/items/{id}"}, "responses": [{"proxy": True, "delayMs": 300}]}
    server = start_faultline(write_scenario(proxy_scenario(upstream.url, [route])))
    started = time.monotonic()
    assert httpx.get(f"{server.url}/items/2", timeout=DEADLINE_S).json()["id"] == "2"
    assert time.monotonic() - started >= 0.3
    entry = proxied(server, "/items/2")[0]
    assert entry["response"]["durationMs"] >= 300 and entry["proxy"]["changed"] == ["delay 300 ms"]
    assert entry["proxy"]["totalMs"] < 300, "the upstream itself was fast: the wait is ours"


def test_chaos_on_a_proxied_route_breaks_that_fraction(start_faultline, write_scenario, upstream):
    route = {"id": "chaotic", "match": {"path": "/items/{id}"}, "responses": [{"proxy": True}],
             "chaos": {"rate": 1.0, "faults": ["corrupt-json"]}}
    server = start_faultline(write_scenario(proxy_scenario(upstream.url, [route])))
    response = requests.get(f"{server.url}/items/4", timeout=DEADLINE_S)
    assert response.status_code == 200 and b"\x01" in response.content and b'"id":"4"' in response.content.replace(b"\x01}", b"")
    entry = proxied(server, "/items/4")[0]
    assert entry["response"]["chaos"] and entry["response"]["fault"] == "corrupt-json" and entry["proxy"]["upstreamStatus"] == 200


def test_auth_answers_401_in_front_of_the_proxy(start_faultline, write_scenario, upstream):
    scenario = proxy_scenario(upstream.url, [{"id": "all", "match": {"pathPrefix": "/items"}, "proxy": {}}])
    scenario["auth"] = {"tokenPath": "/token", "initialToken": "t-1", "protect": ["/items"]}
    server = start_faultline(write_scenario(scenario))
    refused = requests.get(f"{server.url}/items/1", timeout=DEADLINE_S)
    assert refused.status_code == 401 and "WWW-Authenticate" in refused.headers
    allowed = requests.get(f"{server.url}/items/1", headers={"Authorization": "Bearer t-1"}, timeout=DEADLINE_S)
    assert allowed.status_code == 200
    assert upstream.count(path="/items/1") == 1, "the refused request never reached the upstream"
    entries = proxied(server, "/items/1", 2)
    assert entries[0]["answeredBy"] == "auth" and "proxy" not in entries[0]
    assert entries[1]["proxy"]["upstreamStatus"] == 200


# -- HTTPS upstreams -----------------------------------------------------------------------------------------


@pytest.fixture
def https_upstream(start_faultline, write_scenario, tmp_path):
    server = start_faultline(write_scenario(UPSTREAM, name="upstream.json"),
                             args=["--quiet", "--tls-port", "0", "--tls-dir", tmp_path / "tls"])
    server.ca = tmp_path / "tls" / "ca.pem"
    return server


def idempotent_route(path, step=None):
    return {"id": "pay", "match": {"method": "POST", "path": path}, "idempotency": {"header": "Idempotency-Key"},
            "responses": [dict({"proxy": True}, **(step or {}))]}


def test_idempotency_sits_in_front_of_the_proxy_a_replay_never_reaches_the_upstream(
        start_faultline, write_scenario, raw_upstream):
    scenario = dict(proxy_scenario(raw_upstream.url, [idempotent_route("/echo/pay")]),
                    expect={"noDuplicateSideEffects": True})
    server = start_faultline(write_scenario(scenario))
    sent = {"Idempotency-Key": '"k-1"'}
    first = requests.post(f"{server.url}/echo/pay", data=b"amount=5", headers=sent, timeout=5)
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    raw_upstream.next_request()
    again = requests.post(f"{server.url}/echo/pay", data=b"amount=5", headers=sent, timeout=5)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content and again.headers["X-Upstream"] == "raw"
    with pytest.raises(AssertionError):
        raw_upstream.next_request(timeout=0.3)   # deliberate short wait: the replay must not have gone upstream
    # The same key with another body is refused here, as on a scripted route.
    other = requests.post(f"{server.url}/echo/pay", data=b"amount=6", headers=sent, timeout=5)
    assert other.status_code == 422
    report = server.admin("GET", "report").json()
    (verdict,) = [v for v in report["verdicts"] if v["rule"] == "noDuplicateSideEffects"]
    assert verdict["outcome"] == "pass" and verdict["explanation"].startswith("1 side effect(s)"), verdict


def test_commit_then_reset_on_a_proxied_step_stores_the_upstreams_answer_for_the_retry(
        start_faultline, write_scenario, raw_upstream):
    """The timed-out POST made safe to replay, against a real upstream: the upstream did the work, the client saw
    a reset, and its retry with the same key gets the upstream's answer from the store."""
    route = idempotent_route("/echo/pay", {"fault": "commit-then-reset", "times": 1})
    route["responses"].append({"proxy": True})
    server = start_faultline(write_scenario(proxy_scenario(raw_upstream.url, [route])))
    sent = {"Idempotency-Key": '"k-2"'}
    with pytest.raises(requests.ConnectionError):
        requests.post(f"{server.url}/echo/pay", data=b"amount=5", headers=sent, timeout=5)
    raw_upstream.next_request()
    retry = requests.post(f"{server.url}/echo/pay", data=b"amount=5", headers=sent, timeout=5)
    assert retry.status_code == 200 and retry.headers["Idempotent-Replayed"] == "true"
    assert json.loads(retry.content)["requestLine"] == "POST /echo/pay HTTP/1.1"
    with pytest.raises(AssertionError):
        raw_upstream.next_request(timeout=0.3)   # deliberate short wait: applied once upstream


def test_a_fault_that_breaks_the_answer_frees_the_key_and_the_duplicate_upstream_work_is_caught(
        start_faultline, write_scenario, raw_upstream):
    """truncate-body broke the answer after the upstream did the work: the key is free (the client cannot know the
    outcome), its retry goes upstream again, and noDuplicateSideEffects says so."""
    route = idempotent_route("/echo/pay", {"fault": "truncate-body", "times": 1})
    route["responses"].append({"proxy": True})
    scenario = dict(proxy_scenario(raw_upstream.url, [route]), expect={"noDuplicateSideEffects": True})
    server = start_faultline(write_scenario(scenario))
    sent = {"Idempotency-Key": '"k-3"'}
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        requests.post(f"{server.url}/echo/pay", data=b"amount=5", headers=sent, timeout=5)
    retry = requests.post(f"{server.url}/echo/pay", data=b"amount=5", headers=sent, timeout=5)
    assert retry.status_code == 200 and "Idempotent-Replayed" not in retry.headers
    raw_upstream.next_request()
    raw_upstream.next_request()
    report = server.admin("GET", "report").json()
    (verdict,) = [v for v in report["verdicts"] if v["rule"] == "noDuplicateSideEffects"]
    assert verdict["outcome"] == "fail", verdict


def test_an_upstream_503_or_failure_frees_the_key_for_the_retry(start_faultline, write_scenario, raw_upstream):
    server = start_faultline(write_scenario(proxy_scenario(
        raw_upstream.url, [idempotent_route("/busy"), dict(idempotent_route("/reset"), id="reset")])))
    for path in ("/busy", "/reset"):
        sent = {"Idempotency-Key": f'"k{path}"'}
        for _ in range(2):
            answer = requests.post(f"{server.url}{path}", data=b"x", headers=sent, timeout=5)
            assert answer.status_code == (503 if path == "/busy" else 502)
            assert "Idempotent-Replayed" not in answer.headers
            raw_upstream.next_request()   # each attempt went upstream: the key was free again


def test_https_upstream_verified_with_a_ca_file(start_faultline, write_scenario, https_upstream):
    upstream_url = f"https://localhost:{https_upstream.tls_port}"
    trusting = start_faultline(write_scenario(proxy_scenario(upstream_url, caFile=str(https_upstream.ca)), name="a.json"))
    response = requests.get(f"{trusting.url}/items/8", timeout=DEADLINE_S)
    assert response.status_code == 200 and response.json()["id"] == "8"
    tls = https_upstream.wait_for(1, path="/items/8")[0]["tls"]
    assert tls["serverName"] == "localhost" and tls["alpn"] == "http/1.1"
    # The command-line spelling of the same.
    flagged = start_faultline(args=["--proxy", upstream_url, "--proxy-ca-file", https_upstream.ca])
    assert requests.get(f"{flagged.url}/items/9", timeout=DEADLINE_S).json()["id"] == "9"


def test_https_upstream_that_fails_verification_is_a_502_naming_it(start_faultline, write_scenario, https_upstream):
    untrusting = start_faultline(write_scenario(proxy_scenario(f"https://localhost:{https_upstream.tls_port}")))
    response = requests.get(f"{untrusting.url}/items/8", timeout=DEADLINE_S)
    assert response.status_code == 502
    body = response.json()
    assert body["failure"] == "tls" and "certificate verify failed" in body["reason"], body
    entry = proxied(untrusting, "/items/8")[0]
    assert entry["proxy"]["failure"] == "tls" and entry["response"]["status"] == 502


def test_https_upstream_with_a_certificate_for_another_name_fails_the_host_check(
        start_faultline, write_scenario, tmp_path):
    wrong_host = start_faultline(args=["--quiet", "--tls-port", "0", "--tls-dir", tmp_path / "tls",
                                       "--tls-certificate", "wrong-host"])
    ca = tmp_path / "tls" / "ca.pem"
    server = start_faultline(write_scenario(proxy_scenario(f"https://localhost:{wrong_host.tls_port}", caFile=str(ca))))
    response = requests.get(f"{server.url}/items/8", timeout=DEADLINE_S)
    assert response.status_code == 502
    assert "certificate verify failed: hostname mismatch" in response.json()["reason"], response.json()
    # Turning verification off is explicit, and then the same upstream answers.
    lax = start_faultline(write_scenario(
        proxy_scenario(f"https://localhost:{wrong_host.tls_port}", verify=False), name="lax.json"))
    assert requests.get(f"{lax.url}/__nothing", timeout=DEADLINE_S).status_code == 404


# -- upstream failures ---------------------------------------------------------------------------------------


def test_an_upstream_that_hangs_is_a_504_while_other_requests_flow(start_faultline, write_scenario, raw_upstream):
    routes = [{"id": "local", "match": {"path": "/local"}, "responses": [{"status": 200, "text": "still here"}]}]
    server = start_faultline(write_scenario(proxy_scenario(raw_upstream.url, routes, responseTimeoutMs=800)))
    result = {}
    hanging = threading.Thread(target=lambda: result.update(
        response=requests.get(f"{server.url}/hang", timeout=DEADLINE_S)))
    hanging.start()
    raw_upstream.next_request()
    # The upstream holds /hang; the loop does not: scripted and proxied requests are answered meanwhile.
    assert requests.get(f"{server.url}/local", timeout=DEADLINE_S).text == "still here"
    assert requests.get(f"{server.url}/echo/meanwhile", timeout=DEADLINE_S).status_code == 200
    assert server.count(path="/hang", completed=True) == 0, "the hanging request is still waiting"
    hanging.join(timeout=DEADLINE_S)
    response = result["response"]
    assert response.status_code == 504
    assert response.json()["failure"] == "timeout" and "within 800 ms" in response.json()["reason"]
    entry = proxied(server, "/hang")[0]
    assert entry["proxy"]["failure"] == "timeout" and entry["response"]["status"] == 504


@pytest.mark.parametrize("path,reason", [
    ("/reset", "reset the connection"),
    ("/garbage", "not an HTTP/1.1 response"),
])
def test_upstream_resets_and_garbage_are_502_with_the_reason(start_faultline, write_scenario, raw_upstream, path, reason):
    server = start_faultline(write_scenario(proxy_scenario(raw_upstream.url)))
    response = requests.get(f"{server.url}{path}", timeout=DEADLINE_S)
    assert response.status_code == 502
    assert reason in response.json()["reason"], response.json()
    entry = proxied(server, path)[0]
    assert entry["response"]["status"] == 502 and reason in entry["proxy"]["error"]
    # The proxy keeps serving.
    assert requests.get(f"{server.url}/echo/after", timeout=DEADLINE_S).status_code == 200


def test_an_upstream_that_closes_mid_body_cuts_the_streamed_response(start_faultline, write_scenario, raw_upstream):
    # The head went to the client before the body ended (it is streamed): a 502 can no longer be sent, so the
    # client's response is cut short, as a gateway like nginx does, and the journal says why.
    server = start_faultline(write_scenario(proxy_scenario(raw_upstream.url)))
    done = subprocess.run(["curl", "-sS", "--max-time", "5", "-o", "-", "-w", "%{http_code}", f"{server.url}/half"],
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=15)
    assert done.returncode == 18 and done.stdout == b"0123456789200", (done.returncode, done.stdout, done.stderr)
    entry = proxied(server, "/half")[0]
    assert entry["response"]["status"] == 200 and entry["proxy"]["failure"] == "reset"
    assert "90 bytes before the end" in entry["proxy"]["error"] and entry["proxy"]["streamed"] is True
    assert requests.get(f"{server.url}/echo/after", timeout=DEADLINE_S).status_code == 200


def test_a_refused_connection_is_a_502(start_faultline, write_scenario):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    server = start_faultline(write_scenario(proxy_scenario(f"http://127.0.0.1:{port}")))
    response = requests.get(f"{server.url}/x", timeout=DEADLINE_S)
    assert response.status_code == 502 and response.json()["failure"] == "refused"
    assert "Connection refused" in response.json()["reason"]


def test_a_name_with_two_addresses_falls_back_to_the_one_that_listens(start_faultline, write_scenario, raw_upstream):
    """localhost is ::1 then 127.0.0.1 (RFC 6761, in getaddrinfo's order); the raw upstream listens on 127.0.0.1 only,
    so the first connect is refused and the second serves — as curl does. With nothing listening, the 502 says each
    address was tried."""
    server = start_faultline(write_scenario(proxy_scenario(f"http://localhost:{raw_upstream.port}")))
    answer = requests.get(f"{server.url}/plain", timeout=5)
    assert answer.status_code == 200 and answer.text == "ok"
    raw_upstream.next_request()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    other = start_faultline(write_scenario(proxy_scenario(f"http://localhost:{port}"), name="closed.json"))
    failed = requests.get(f"{other.url}/plain", timeout=5)
    assert failed.status_code == 502
    body = failed.json()
    assert body["failure"] == "refused" and "(each of its 2 addresses)" in body["reason"], body


def test_an_upstream_body_over_the_limit_is_a_502_naming_it(start_faultline, write_scenario, upstream):
    # The limit bounds a body read whole (a fault needs it whole); a body passed through as it comes has none.
    routes = [{"id": "broken", "match": {"path": "/items/1"}, "responses": [{"proxy": True, "fault": "corrupt-json"}]}]
    server = start_faultline(write_scenario(proxy_scenario(upstream.url, routes, maxResponseBytes=10)))
    response = requests.get(f"{server.url}/items/1", timeout=DEADLINE_S)
    assert response.status_code == 502 and response.json()["failure"] == "too-large"
    assert "limit of 10 bytes" in response.json()["reason"]
    assert requests.get(f"{server.url}/items/2", timeout=DEADLINE_S).json() == {**ITEM, "id": "2"}


# -- pooling and HTTP/2 --------------------------------------------------------------------------------------


def test_upstream_connections_are_pooled_and_reuse_is_journaled(start_faultline, write_scenario, raw_upstream):
    server = start_faultline(write_scenario(proxy_scenario(raw_upstream.url)))
    for index in range(5):
        # A new client connection each time: the upstream connection is the pool's, not the client's.
        assert requests.get(f"{server.url}/echo/{index}", timeout=DEADLINE_S).status_code == 200
    numbers = {raw_upstream.next_request()[0] for _ in range(5)}
    assert numbers == {1}, "five requests, one upstream connection"
    entries = server.wait_for(5, completed=True, matched=False)
    assert [e["proxy"]["reused"] for e in entries] == [False, True, True, True, True]
    assert entries[0]["proxy"]["connectMs"] is not None and entries[1]["proxy"]["connectMs"] is None


def test_http2_clients_go_through_the_proxy(start_faultline, write_scenario, upstream):
    routes = [{"id": "cut", "match": {"path": "/items/1"}, "responses": [{"proxy": True, "fault": "truncate-body"}]}]
    server = start_faultline(write_scenario(proxy_scenario(upstream.url, routes)))
    whole = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "5", f"{server.url}/items/6"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=15)
    assert whole.returncode == 0 and json.loads(whole.stdout)["id"] == "6"
    cut = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "5", f"{server.url}/items/1"],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=15)
    assert cut.returncode == 92, cut.stderr  # HTTP/2 stream error: the RST_STREAM after half the body
    entries = server.wait_for(2, completed=True)
    assert [e["protocol"] for e in entries] == ["h2c", "h2c"]
    assert entries[1]["proxy"]["changed"] == [TRUNCATED]


# -- record -------------------------------------------------------------------------------------------------


def raw_get(port, target, headers=""):
    """The response's exact head and body bytes, over a fresh connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as connection:
        connection.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\n{headers}Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.replace(b"Connection: close\r\n", b"").replace(b"\r\nConnection: close", b""), body


REQUESTS = ["/items/17", "/items/42", "/items/42", "/search?q=blue", "/logo.png", "/orders/5", "/orders/6"]


def test_record_writes_a_scenario_that_serves_the_same_bytes(start_faultline, upstream, tmp_path, run_cli):
    recorder = start_recorder(tmp_path, upstream.url, "--delays")
    secret = "Authorization: Bearer top-secret\r\nCookie: sid=c00kie\r\n"
    direct = {target: raw_get(upstream.port, target, secret) for target in REQUESTS if not target.startswith("/orders")}
    through = {target: raw_get(recorder.port, target, secret) for target in REQUESTS}
    created = requests.post(f"{recorder.url}/orders", json={"sku": "a"}, timeout=DEADLINE_S)
    assert created.status_code == 201
    recorder.proc.send_signal(2)  # SIGINT, as Ctrl-C
    assert recorder.wait_exit() == 0, recorder.stderr()
    assert "recorded 8 exchange(s) as " in recorder.stderr()

    document = json.loads((recorder.output / "recording.json").read_text())
    jsonschema.validate(document, SCHEMA)
    checked = run_cli("validate", recorder.output)
    assert checked.returncode == 0, checked.stderr
    text = (recorder.output / "recording.json").read_text()
    for secret_value in ["top-secret", "c00kie", "s3cr3t"]:
        assert secret_value not in text
    paths = {route["match"]["path"]: route for route in document["routes"]}
    assert {"/items/{id}", "/orders/{id}", "/search", "/logo.png", "/orders"} == set(paths)
    assert paths["/search"]["match"]["query"] == {"q": "blue"}
    steps = paths["/items/{id}"]["responses"]
    # The two identical answers for /items/42 are one step with times 2 — unless --delays measured them a millisecond
    # apart (a loaded machine), which makes them two steps that differ only in delayMs.
    times, delays = [s.get("times", 1) for s in steps], [s["delayMs"] for s in steps]
    assert all(isinstance(delay, int) for delay in delays), steps
    assert times == [1, 2] or (times == [1, 1, 1] and delays[1] != delays[2]
                                and {k: v for k, v in steps[1].items() if k != "delayMs"}
                                == {k: v for k, v in steps[2].items() if k != "delayMs"}), steps
    assert paths["/orders/{id}"]["responses"][0]["headers"]["Set-Cookie"] == "REDACTED"

    # Served back: the same requests get the upstream's bytes (Via aside, which only the proxy added), dated when
    # they are sent: the recording keeps no Date, and each answer carries one, where the upstream's was.
    def undated(head):
        assert len(re.findall(rb"\r\nDate: ", head)) == 1, head
        return re.sub(rb"\r\nDate: [^\r]*", b"\r\nDate: (now)", head)

    replay = start_faultline(recorder.output, args=["--quiet"])
    for target in REQUESTS:
        head, body = raw_get(replay.port, target)
        recorded_head, recorded_body = through[target]
        assert body == recorded_body, target
        # Set-Cookie was written REDACTED: the one field that must differ.
        seen = recorded_head.replace(b"\r\nVia: 1.1 faultline", b"").replace(b"session=s3cr3t; HttpOnly", b"REDACTED")
        assert undated(head) == undated(seen), target
        if target in direct:
            assert (undated(head), body) == (undated(direct[target][0]), direct[target][1]), \
                f"{target}: not the upstream's bytes"
    orders = raw_get(replay.port, "/orders/5")
    assert b"Set-Cookie: REDACTED" in orders[0]


def test_record_stop_endpoint_redacts_configured_fields_and_headers(start_faultline, upstream, tmp_path, run_cli):
    recorder = start_recorder(tmp_path, upstream.url, "--redact-field", "token", "--redact-header", "X-Order",
                              "--name", "shop")
    for target in ["/orders/5", "/orders/6"]:
        assert requests.get(f"{recorder.url}{target}", timeout=DEADLINE_S).json()["token"] == f"tok-{target[-1]}"
    stopped = requests.post(f"{recorder.url}/__faultline/record/stop", timeout=DEADLINE_S)
    assert stopped.status_code == 200
    summary = stopped.json()
    assert summary["routes"] == 1 and summary["exchanges"] == 2 and summary["file"].endswith("shop.json")
    assert recorder.wait_exit() == 0
    document = json.loads((recorder.output / "shop.json").read_text())
    jsonschema.validate(document, SCHEMA)
    (route,) = document["routes"]
    assert route["match"]["path"] == "/orders/{id}"
    for step in route["responses"]:
        assert step["json"]["token"] == "REDACTED" and step["headers"]["X-Order"] == "REDACTED"
    assert "tok-5" not in (recorder.output / "shop.json").read_text()


def test_record_stop_on_a_server_that_is_not_recording_is_409(faultline):
    response = faultline.admin("POST", "record/stop")
    assert response.status_code == 409 and "not recording" in response.json()["error"]
