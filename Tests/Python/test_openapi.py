"""The admin API against its OpenAPI 3.1 description, docs/openapi.json, fuzzed with schemathesis.

Every operation but `POST /shutdown` gets a server of its own, loaded with the bundled scenarios and a journal seeded
with every kind of entry (matched, unmatched, malformed, binary and cut bodies, faults, pending exchanges, 401s, 429s,
idempotent replays) and a policy state with something in each part, so the response schemas are checked against real
data rather than an empty journal. schemathesis then sends a bounded number of generated requests per operation (its
coverage phase: boundary values, missing and malformed parameters, undocumented methods; and its fuzzing phase:
random valid and invalid data), and checks every answer with all of its checks: no 5xx, a documented status code,
content type and headers, a body that matches the response schema, invalid input refused with a 4xx, valid input
accepted, an undocumented method refused with 405 and `Allow`. `POST /shutdown` stops the server, so it is checked
once, on a server of its own.
"""

import json
import socket
import time
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings

from conftest import FaultlineProcess, faultline_binary

REPO_ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = REPO_ROOT / "docs" / "openapi.json"

# Generated requests per operation in the fuzzing phase; the coverage phase adds its own boundary and invalid-value
# cases (about 1,500 requests in all). The file runs in about half a minute on two cores.
MAX_EXAMPLES = 25
# `requests/wait` really long-polls for `timeoutMs` (absent: 5 s; the spec's maximum is the server's, 600 s). A valid
# generated timeout is cut down to this before it is sent so the run stays short; absent ones get it too. Malformed
# and out-of-range values go out as generated and must still be refused.
WAIT_CAP_MS = 20

CONFIG = schemathesis.Config.from_dict({
    # Reproducible: the same requests on every run. No example database, so nothing is written to the work tree.
    "seed": 20261129,
    "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
    # The spec has no `example`s and no links, so the examples and stateful phases would have nothing to run.
    "phases": {"examples": {"enabled": False}, "stateful": {"enabled": False}},
    "request-timeout": 10.0,
    # Every check is on (the default). positive_data_acceptance is narrowed to 2xx: the admin API never answers
    # 401, 403, 404 or 429 to a valid request, which the check would accept by default.
    "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx"]}},
    "operations": [
        # The spec gives only the outline of a scenario (`name`, `routes`) and points at
        # scenarios/faultline.schema.json: the loader checks far more than a schema can (route ids, path parameter
        # names, files on disk), so a generated outline-valid scenario is rightly refused with 400 most of the time.
        # Invalid uploads are still checked: refused with 400, with the documented error body.
        {"include-operation-id": "loadScenarios", "checks": {"positive_data_acceptance": {"enabled": False}}},
        # A schema-valid change names a resource id and a path the schema cannot know: 404 (no such resource) and
        # 400 (a path outside it, two bodies) are the right answers. Invalid changes are still refused with 400.
        {"include-operation-id": "changeResource",
         "checks": {"positive_data_acceptance": {"expected-statuses": ["200", "400", "404"]}}},
        # 409 is the documented answer while no loaded scenario declares auth.
        # A change that carries out nothing (no listener, connections or conditions) is refused with 400.
        {"include-operation-id": "changeNetwork",
         "checks": {"positive_data_acceptance": {"expected-statuses": ["200", "400"]}}},
        {"include-operation-id": "expireToken",
         "checks": {"positive_data_acceptance": {"expected-statuses": ["200", "409"]}}},
        # `?scenario=NAME` names a scenario the schema cannot know: 404 (naming the nearest loaded one) is right.
        *({"include-operation-id": operation, "checks": {"positive_data_acceptance": {"expected-statuses": ["200", "404"]}}}
          for operation in ["getReport", "headReport"]),
        # `?route=ID` names a route the schema cannot know either: 400 (naming the nearest loaded one) is right.
        *({"include-operation-id": operation, "checks": {"positive_data_acceptance": {"expected-statuses": ["200", "400"]}}}
          for operation in ["listRequests", "headRequests", "exportHAR", "headExportHAR", "countRequests",
                            "headCountRequests", "waitForRequests", "headWaitForRequests"]),
    ],
})

schema = schemathesis.openapi.from_path(SPEC_PATH, config=CONFIG)


def _send_and_drain(port, data, timeout=5.0):
    """Sends raw bytes, then reads until the server closes (it does, after a 400) or the deadline passes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not sock.recv(65536):
                    return
            except (ConnectionResetError, socket.timeout):
                return


def seed_journal(server, raw_connect):
    """Every kind of journal entry and of policy state that the response schemas describe (about 80 ms)."""
    url = server.url

    def call(method, path, **kw):
        try:
            return requests.request(method, url + path, timeout=5, **kw)
        except requests.RequestException:
            return None  # the connection faults are the point

    call("GET", "/healthz")
    call("HEAD", "/healthz")
    call("GET", "/nope?x=1&y=%C3%A9")  # unmatched, with the nearest route
    call("GET", "/v1/products/1")  # 503 with Retry-After, then an early retry: judged in state and report
    call("GET", "/v1/products/1")
    call("GET", "/bodies/corrupt")  # a fault inside a well-framed response
    for path in ["/faults/reset", "/faults/truncated", "/faults/empty-reply"]:
        call("GET", path)
    for _ in range(5):  # over the limit: 429 with Retry-After as seconds
        call("GET", "/search-api/v1/search")
    for _ in range(2):  # a token bucket keyed by a header; Retry-After as an HTTP-date, left pending
        call("GET", "/search-api/v1/export", headers={"X-Api-Key": "k1"})
    call("GET", "/bank/v1/me")  # 401: no token
    call("GET", "/bank/v1/me", headers={"Authorization": "Bearer token-1"})
    order = {"amount": 5}
    for _ in range(2):  # commit-then-reset stores the order; the retry with the same key is a replay
        call("POST", "/shop/v1/orders", json=order, headers={"Idempotency-Key": '"order-1"'})
    call("POST", "/shop/v1/orders", json=order)  # the key is required: 400
    call("POST", "/nope", data=b"\xff\xfe\x00binary")  # not UTF-8: the journal shows it as base64
    call("POST", "/nope", data=b"x" * (70 * 1024))  # over the 64 KiB the journal keeps of a body
    _send_and_drain(server.port, b"NOT HTTP AT ALL\r\n\r\n")  # malformed: no request line to show
    _send_and_drain(server.port, b"GET /x HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n")  # malformed after the line
    # Left in flight while the operation is fuzzed (raw_connect closes them at teardown): a hang, a token refresh
    # (its step waits 200 ms) and an idempotent payment (500 ms), so the journal has pending entries and the state
    # has a refresh and an idempotency record in flight.
    form = b"grant_type=refresh_token&refresh_token=refresh-1"
    in_flight = [
        b"GET /faults/hang HTTP/1.1\r\nHost: a\r\n\r\n",
        b"POST /bank/oauth/token HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(form) + form,
        b'POST /shop/v1/payments HTTP/1.1\r\nHost: a\r\nIdempotency-Key: "pay-1"\r\nContent-Type: application/json\r\n'
        + b"Content-Length: 2\r\n\r\n{}",
    ]
    for request in in_flight:
        raw_connect(server.port).send(request)
    server.wait_for(len(in_flight), completed=False)


@pytest.fixture
def seeded_server(start_faultline, raw_connect):
    server = start_faultline()
    seed_journal(server, raw_connect)
    counters = server.admin_json("GET", "requests/count")["counters"]
    assert counters["malformed"] >= 2 and counters["unmatched"] >= 3, counters
    return server


def cap_wait(case):
    """Cuts a valid `timeoutMs` (absent means 5000) down to WAIT_CAP_MS; leaves an invalid one as generated."""
    query = dict(case.query or {})
    timeout = query.get("timeoutMs", WAIT_CAP_MS)
    # The fuzzing phase draws integers; the coverage phase hands over query values already as text.
    text = str(timeout) if type(timeout) in (int, str) else ""
    if text.isascii() and text.isdigit() and int(text) <= 600_000:
        query["timeoutMs"] = min(int(text), WAIT_CAP_MS)
        case.query = query


@schema.exclude(operation_id=["shutdown", "stopRecording"]).parametrize()
# One server per operation, shared by that operation's generated requests: on purpose (a server per request would
# cost more than the requests), and each request stands alone, whatever an earlier one changed.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_admin_api_conforms_to_its_openapi_description(case, seeded_server):
    if case.operation.path in ("/__faultline/requests/wait", "/__faultline/events"):
        cap_wait(case)
    if case.operation.path == "/__faultline/network" and case.method == "POST":
        keep_reachable(case)
    case.call_and_validate(base_url=seeded_server.url)


def keep_reachable(case):
    """A valid generated network change may refuse the port or freeze every new connection, and the operation's
    next requests would find no server: every one gets `forMs` 1 (the network is back 1 ms later) and a valid listener
    other than `up` becomes `up`. Invalid bodies go out as generated and must still be refused."""
    if isinstance(case.body, dict):
        if case.body.get("listener") in ("refuse", "blackhole", "reset-on-accept", "stall"):
            case.body["listener"] = "up"
        if "forMs" not in case.body or type(case.body["forMs"]) is int and 1 <= case.body["forMs"] <= 600_000:
            case.body["forMs"] = 1


def test_shutdown_conforms_and_stops_the_server(faultline):
    case = schema["/__faultline/shutdown"]["POST"].Case()
    case.call_and_validate(base_url=faultline.url)
    assert faultline.wait_exit(timeout=10) == 0, faultline.stderr()


def test_record_stop_conforms_and_stops_the_recorder(start_faultline, tmp_path):
    """POST /record/stop exists on `faultline record` only (409 elsewhere): checked against a recorder."""
    upstream = start_faultline()
    recorder = FaultlineProcess([faultline_binary(), "record", "--upstream", upstream.url, "--output",
                                 str(tmp_path / "recorded"), "--port", "0", "--quiet"], tmp_path / "recorder.stderr")
    try:
        recorder.wait_listening()
        case = schema["/__faultline/record/stop"]["POST"].Case()
        case.call_and_validate(base_url=recorder.url)
        assert recorder.wait_exit(timeout=10) == 0, recorder.stderr()
        assert (tmp_path / "recorded" / "recording.json").is_file()
    finally:
        recorder.stop()


def test_openapi_json_is_docs_openapi_json_byte_for_byte(faultline, run_cli):
    on_disk = SPEC_PATH.read_bytes()
    served = faultline.admin("GET", "openapi.json")
    assert served.status_code == 200
    assert served.headers["Content-Type"] == "application/json"
    assert served.content == on_disk, (
        "the server's embedded copy differs from docs/openapi.json: rebuild the server")
    head = faultline.admin("HEAD", "openapi.json")
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["Content-Length"]) == len(on_disk)

    document = json.loads(on_disk)
    version = run_cli("--version").stdout.split()[-1]
    assert document["info"]["version"] == version, "info.version is the version `faultline --version` reports"
    assert document["info"]["version"] == faultline.admin_json("GET", "health")["version"]


def test_openapi_json_is_a_valid_openapi_3_1_document(faultline):
    document = faultline.admin_json("GET", "openapi.json")
    assert document["openapi"].startswith("3.1.")
    # Validates against the OpenAPI 3.1 meta-schema (with JSON Schema 2020-12 for the schemas) and fails with the
    # offending location.
    loaded = schemathesis.openapi.from_dict(document)
    loaded.validate()
    # Every endpoint the server lists on a 404 is described, with the same methods (HEAD goes with GET).
    listed = {line.split(" — ")[0] for line in faultline.admin("GET", "no-such-endpoint").json()["endpoints"]}
    described = {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
                 if method in ("get", "post", "delete", "put", "patch")}
    assert listed == described


def test_malformed_parameters_are_refused_rather_than_ignored(faultline):
    """What the fuzzing found: each of these used to be read as if absent (or as the default), with a 200."""
    assert faultline.admin("GET", "requests", params={"limit": "abc"}).status_code == 400  # was: no limit
    assert faultline.admin("GET", "requests.har", params={"limit": "9223372036854775808"}).status_code == 400
    wait = faultline.admin("GET", "requests/wait", params={"count": 1, "timeoutMs": "soon"})  # was: 5000 ms
    assert wait.status_code == 400 and "timeoutMs" in wait.json()["error"]
    typo = faultline.admin("POST", "scenarios", params={"mode": "ad"}, json={"name": "x", "routes": []})
    assert typo.status_code == 400 and "mode" in typo.json()["error"]  # was: replace every loaded scenario
    assert faultline.admin_json("GET", "health")["scenarios"] != ["x"], "the loaded scenarios keep serving"
    assert faultline.admin("POST", "scenarios/reset", params={"journal": "yes"}).status_code == 400  # was: false
    # The valid spellings still work.
    assert len(faultline.journal(limit=0)) == 0 and faultline.count() == 0
    reset = faultline.admin_json("POST", "scenarios/reset", params={"journal": "1"})
    assert reset == {"reset": True, "journalCleared": 0}
    loaded = faultline.admin_json("POST", "scenarios", params={"mode": "replace"}, json={"name": "x", "routes": []})
    assert loaded == {"loaded": ["x"], "scenarios": ["x"]}
