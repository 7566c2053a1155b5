"""Every named fault (README "Faults") against real clients: what goes on the wire (raw socket), what curl
reports, what Python requests raises, and what the journal says happened. The expectations are what these
clients were observed to do (versions in docs/fault-observations.md); each test gets its own server, so the
seeded faults (garbage, corrupt-json, truncated-json, bad-gzip) produce the same bytes every run."""

import json
import re
import subprocess
import zlib
from http.client import BadStatusLine, RemoteDisconnected

import pytest
import requests
import urllib3

from faults_support import (BODY, BODY_BYTES, FAULTS, exception_chain, fault_scenario, head_fields, run_curl,
                            run_json_lines, settled_entry, split_head, FinDelayProxy)

# A client timeout for the faults that never finish (hang, stall-after-headers): short, so the suite is fast.
CURL_MAX_TIME_S = 1
REQUESTS_READ_TIMEOUT_S = 0.5
GO_TIMEOUT = "1s"            # http.Client.Timeout: the whole exchange, body included
FETCH_TIMEOUT_MS = 1000      # AbortSignal.timeout: likewise
# How long a raw-socket test waits to be sure nothing more is coming.
SILENCE_S = 0.3

DATE = 37              # "Date: Tue, 01 Dec 2026 19:46:35 GMT" and CRLF, on every head the server sends
HEAD_KEEP_ALIVE = 71 + DATE   # "HTTP/1.1 200 OK", Date, Content-Type: application/json, Content-Length: 42
HEAD_CLOSE = 90 + DATE        # the same plus "Connection: close"
EXCESS = b"FAULTLINE-OVERLONG-BODY-EXCESS-BYTES\r\n"

# bytesWritten of the first request to each fault on a fresh server (seed 7), as measured on the wire by
# test_wire_bytes_and_journal: the client tests compare the journal against these.
BYTES_WRITTEN = {
    "reset": 0, "empty-reply": 0, "half-close": 0, "hang": 0,
    "close-after-headers": HEAD_KEEP_ALIVE,
    "truncate-body": HEAD_CLOSE + 21,
    "overlong-body": HEAD_CLOSE + 42 + len(EXCESS),
    "malformed-chunk": 146 + DATE,   # head with Date and Transfer-Encoding: chunked (98 + 37) + "zz\r\n" + body + "\r\n"
    "garbage": 454,           # 64–512 random bytes; 454 for seed 7 and this route id
    "stall-after-headers": HEAD_KEEP_ALIVE,
    "corrupt-json": HEAD_KEEP_ALIVE + 44,   # two bytes (0x01 "}") inserted
    "truncated-json": HEAD_KEEP_ALIVE + 20,   # cut at 20 bytes for seed 7 and this route id
    "wrong-content-type": 121 + DATE,
    "html-error-page": 226 + DATE,
    "bad-gzip": 159 + DATE,
}

# (journal response.status, response.outcome) per fault. html-error-page's status is checked separately:
# see test_journal_status_is_the_status_line_sent.
JOURNAL = {
    "reset": (None, "reset-sent"),
    "empty-reply": (None, "closed-by-fault"),
    "half-close": (None, "half-closed"),
    "close-after-headers": (200, "closed-by-fault"),
    "truncate-body": (200, "closed-by-fault"),
    "overlong-body": (200, "closed-by-fault"),
    "malformed-chunk": (200, "closed-by-fault"),
    "garbage": (None, "closed-by-fault"),
    "hang": (None, "hang-released"),
    "stall-after-headers": (200, "hang-released"),
    "corrupt-json": (200, "completed"),
    "truncated-json": (200, "completed"),
    "wrong-content-type": (200, "completed"),
    "html-error-page": (502, "completed"),
    "bad-gzip": (200, "completed"),
}

NEVER_FINISH = {"hang", "stall-after-headers"}


@pytest.fixture
def server(start_faultline, write_scenario):
    return start_faultline(write_scenario(fault_scenario()))


def check_journal(server, fault):
    """The fault's journal entry against JOURNAL and BYTES_WRITTEN; returns the entry's `response`."""
    response = settled_entry(server, fault)["response"]
    status, outcome = JOURNAL[fault]
    assert response["fault"] == fault
    assert response["outcome"] == outcome, response
    if fault != "html-error-page":
        assert response["status"] == status, response
    assert response["bytesWritten"] == BYTES_WRITTEN[fault], response
    return response


def check_released_promptly(response, client_timeout_s):
    """A hang ends when the client gives up: duration ≈ the client's timeout, not the linger or anything longer."""
    assert client_timeout_s * 1000 - 50 <= response["durationMs"] <= client_timeout_s * 1000 + 1000, response


# -- the wire (raw socket) --------------------------------------------------------------------------------


def test_every_fault_has_expectations():
    assert set(BYTES_WRITTEN) == set(JOURNAL) == set(FAULTS)


@pytest.mark.parametrize("fault", FAULTS)
def test_wire_bytes_and_journal(server, raw_connect, fault):
    """What a raw socket receives for each fault, and that bytesWritten is exactly that many bytes."""
    connection = raw_connect(server.port)
    connection.send(f"GET /{fault} HTTP/1.1\r\nHost: faultline\r\n\r\n")
    keeps_connection = JOURNAL[fault][1] == "completed"
    if keeps_connection:
        # Well framed and kept alive: one complete response, then the same connection answers again (an
        # admin call, which is not journaled).
        (response,) = connection.read_responses(1)
        data = response.head.encode("latin-1") + b"\r\n\r\n" + response.body
        connection.send("GET /__faultline/health HTTP/1.1\r\nHost: faultline\r\n\r\n")
        assert connection.read_responses(1)[0].status == 200, "the connection stays usable after the fault"
        ending = "open"
    else:
        data, closed = connection.read_until_close(timeout=SILENCE_S if fault in NEVER_FINISH else 5)
        ending = {True: "FIN", "reset": "RST", False: "silent"}[closed]
        if fault in NEVER_FINISH:
            connection.close()   # the only thing that ends a hang
    expected_ending = "open" if keeps_connection else {"reset": "RST", "hang": "silent",
                                                       "stall-after-headers": "silent"}.get(fault, "FIN")
    assert ending == expected_ending, f"{fault}: ended {ending!r}, received {data!r}"

    if fault in ("reset", "empty-reply", "half-close", "hang"):
        assert data == b""
    elif fault == "garbage":
        assert 64 <= len(data) <= 512 and not data.startswith(b"HTTP/")
    else:
        head, body = split_head(data)
        status, fields = head_fields(head)
        expected_body = {
            "close-after-headers": b"",
            "stall-after-headers": b"",
            "truncate-body": BODY_BYTES[:21],
            "overlong-body": BODY_BYTES + EXCESS,
            "malformed-chunk": b"zz\r\n" + BODY_BYTES + b"\r\n",
            "wrong-content-type": BODY_BYTES,
        }
        if fault in expected_body:
            assert body == expected_body[fault]
        if fault == "malformed-chunk":
            assert fields["transfer-encoding"] == "chunked" and "content-length" not in fields
        elif fault != "html-error-page":
            assert fields["content-length"] == str(len(BODY_BYTES) if fault not in
                                                   ("corrupt-json", "truncated-json", "bad-gzip") else len(body))
        if fault in ("truncate-body", "overlong-body", "malformed-chunk"):
            assert fields["connection"] == "close"
        if fault in ("close-after-headers", "stall-after-headers") or keeps_connection:
            assert "connection" not in fields, "the head promises a kept-alive connection"
        if fault == "corrupt-json":
            assert b"\x01" in body and body.replace(b"\x01}", b"", 1) == BODY_BYTES
        if fault == "truncated-json":
            assert 0 < len(body) < len(BODY_BYTES) and BODY_BYTES.startswith(body)
        if fault in ("corrupt-json", "truncated-json"):
            with pytest.raises(json.JSONDecodeError):
                json.loads(body)
        if fault == "wrong-content-type":
            assert fields["content-type"] == "text/html; charset=utf-8"
        if fault == "html-error-page":
            assert status == 502 and fields["content-type"] == "text/html"
            assert body.startswith(b"<html>") and b"502 Bad Gateway" in body
        if fault == "bad-gzip":
            assert fields["content-encoding"] == "gzip" and len(body) == 64 and body[0] != 0x1F
            with pytest.raises(zlib.error):
                zlib.decompress(body, 16 + zlib.MAX_WBITS)

    response = check_journal(server, fault)
    assert response["bytesWritten"] == len(data), f"bytesWritten says {response['bytesWritten']}, {len(data)} arrived"
    if fault in NEVER_FINISH:
        check_released_promptly(response, SILENCE_S)


STATUS_LINE_FAULTS = ["close-after-headers", "truncate-body", "overlong-body", "malformed-chunk",
                      "stall-after-headers", "corrupt-json", "truncated-json", "wrong-content-type",
                      "bad-gzip", "html-error-page"]


@pytest.mark.parametrize("fault", STATUS_LINE_FAULTS)
def test_journal_status_is_the_status_line_sent(server, raw_connect, fault):
    connection = raw_connect(server.port)
    connection.send(f"GET /{fault} HTTP/1.1\r\nHost: faultline\r\n\r\n")
    data = connection.read_until(lambda buffer: b"\r\n\r\n" in buffer)
    status, _ = head_fields(split_head(data)[0])
    connection.close()
    server.wait_for(1, route=fault, completed=True)
    assert server.journal(route=fault)[0]["response"]["status"] == status


KEEP_ALIVE_FAULTS = ["corrupt-json", "truncated-json", "wrong-content-type", "html-error-page", "bad-gzip"]


@pytest.mark.parametrize("fault", KEEP_ALIVE_FAULTS)
def test_head_gets_no_body_from_a_keep_alive_fault(server, raw_connect, fault):
    """RFC 9110 §9.3.2: no content in a response to HEAD. Pipelined HEAD then GET: two responses, nothing between."""
    connection = raw_connect(server.port)
    connection.send(f"HEAD /{fault} HTTP/1.1\r\nHost: faultline\r\n\r\n"
                    "GET /__faultline/health HTTP/1.1\r\nHost: faultline\r\n\r\n")
    data = connection.read_until(lambda buffer: b'"status":"ok"' in buffer)
    head, rest = split_head(data)
    assert head_fields(head)[0] == (502 if fault == "html-error-page" else 200)
    assert rest.startswith(b"HTTP/1.1 200 OK\r\n"), f"bytes between the HEAD response and the next: {rest[:60]!r}"


def test_half_close_keeps_reading_and_journaling(server, raw_connect):
    """After the half-close FIN the server still reads: requests sent afterwards are journaled, never
    answered, and end as client-closed when the client goes."""
    connection = raw_connect(server.port)
    connection.send("GET /half-close HTTP/1.1\r\nHost: faultline\r\n\r\n")
    data, ending = connection.read_until_close(timeout=5)
    assert (data, ending) == (b"", True)
    connection.send("GET /wrong-content-type HTTP/1.1\r\nHost: faultline\r\n\r\n")   # still accepted
    late = server.wait_for(1, route="wrong-content-type")[0]
    assert late["connection"] == {**late["connection"], "requestIndex": 1, "reused": True}
    assert late["response"]["outcome"] == "pending" and late["response"]["bytesWritten"] == 0
    connection.close()
    late = server.wait_for(1, route="wrong-content-type", completed=True)[0]
    assert late["response"]["outcome"] == "client-closed" and late["response"]["bytesWritten"] == 0
    assert late["response"]["status"] is None, "nothing was sent, so no status"
    assert server.journal(route="half-close")[0]["response"]["outcome"] == "half-closed"


# -- curl -------------------------------------------------------------------------------------------------

# (exit code, stderr regex, %{http_code}) as observed.
CURL = {
    "reset": (56, r"curl: \(56\) Recv failure: Connection reset by peer", 0),
    "empty-reply": (52, r"curl: \(52\) Empty reply from server", 0),
    "half-close": (52, r"curl: \(52\) Empty reply from server", 0),
    "close-after-headers": (18, r"curl: \(18\) transfer closed with 42 bytes remaining to read", 200),
    "truncate-body": (18, r"curl: \(18\) transfer closed with 21 bytes remaining to read", 200),
    "overlong-body": (0, r"", 200),
    "malformed-chunk": (56, r"curl: \(56\) Illegal or missing hexadecimal sequence in chunked-encoding", 200),
    "garbage": (1, r"curl: \(1\) Received HTTP/0\.9 when not allowed", 0),
    "hang": (28, r"curl: \(28\) Operation timed out after 1\d\d\d milliseconds with 0 bytes received", 0),
    "stall-after-headers": (28, r"curl: \(28\) Operation timed out after 1\d\d\d milliseconds with 0 out of 42 "
                                r"bytes received", 200),
    "corrupt-json": (0, r"", 200),
    "truncated-json": (0, r"", 200),
    "wrong-content-type": (0, r"", 200),
    "html-error-page": (0, r"", 502),
    "bad-gzip": (0, r"", 200),   # curl does not decode unless asked (--compressed): see the test below
}


@pytest.mark.parametrize("fault", FAULTS)
def test_curl(server, fault):
    result = run_curl(f"{server.url}/{fault}", max_time=CURL_MAX_TIME_S if fault in NEVER_FINISH else 3)
    exit_code, error, http_code = CURL[fault]
    assert (result.exit_code, result.http_code) == (exit_code, http_code), result
    assert re.fullmatch(error, result.error), result.error

    # What curl counted against what the journal says was written.
    unread = {"overlong-body": len(EXCESS), "malformed-chunk": 48}.get(fault, 0)
    if fault != "garbage":   # curl counts nothing it cannot parse as HTTP
        assert result.size_header + result.size_download + unread == BYTES_WRITTEN[fault], result
    response = check_journal(server, fault)

    if fault == "overlong-body":
        assert result.body == BODY_BYTES, "curl keeps the declared 42 bytes and drops the excess"
    if fault in ("corrupt-json", "truncated-json"):
        with pytest.raises(json.JSONDecodeError):
            json.loads(result.body)
    if fault == "wrong-content-type":
        assert json.loads(result.body) == BODY
    if fault in NEVER_FINISH:
        check_released_promptly(response, CURL_MAX_TIME_S)


def test_curl_overlong_body_warns_about_the_excess(server):
    result = run_curl(f"{server.url}/overlong-body", "-v")
    assert result.exit_code == 0
    assert f"Excess found in a read: excess = {len(EXCESS)}, size = 42" in result.error


def test_curl_compressed_rejects_bad_gzip(server):
    result = run_curl(f"{server.url}/bad-gzip", "--compressed")
    assert result.exit_code == 61, result
    assert result.error == "curl: (61) Error while processing content unencoding: incorrect header check"
    check_journal(server, "bad-gzip")


def test_curl_fail_turns_the_html_error_page_into_exit_22(server):
    result = run_curl(f"{server.url}/html-error-page", "--fail")
    assert (result.exit_code, result.http_code) == (22, 502), result
    assert result.error == "curl: (22) The requested URL returned error: 502"


# -- Python requests --------------------------------------------------------------------------------------

ConnectionError_ = requests.exceptions.ConnectionError
ProtocolError = urllib3.exceptions.ProtocolError

# (exception chain outermost first, regex on str(exception)) for the faults that raise from get().
REQUESTS_RAISES = {
    "reset": ([ConnectionError_, ProtocolError, ConnectionResetError],
              r"\('Connection aborted\.', ConnectionResetError\(104, 'Connection reset by peer'\)\)"),
    "empty-reply": ([ConnectionError_, ProtocolError, RemoteDisconnected],
                    r"\('Connection aborted\.', RemoteDisconnected\('Remote end closed connection without response'\)\)"),
    "half-close": ([ConnectionError_, ProtocolError, RemoteDisconnected],
                   r"\('Connection aborted\.', RemoteDisconnected\('Remote end closed connection without response'\)\)"),
    "close-after-headers": ([requests.exceptions.ChunkedEncodingError, ProtocolError, urllib3.exceptions.IncompleteRead],
                            r".*IncompleteRead\(0 bytes read, 42 more expected\).*"),
    "truncate-body": ([requests.exceptions.ChunkedEncodingError, ProtocolError, urllib3.exceptions.IncompleteRead],
                      r".*IncompleteRead\(21 bytes read, 21 more expected\).*"),
    "malformed-chunk": ([requests.exceptions.ChunkedEncodingError, ProtocolError,
                         urllib3.exceptions.InvalidChunkLength, ValueError],
                        r".*InvalidChunkLength\(got length b'zz\\r\\n', 0 bytes read\).*"),
    "garbage": ([ConnectionError_, ProtocolError, BadStatusLine], r"\('Connection aborted\.', BadStatusLine\(.*"),
    # No status line yet: requests' own ReadTimeout.
    "hang": ([requests.exceptions.ReadTimeout, urllib3.exceptions.ReadTimeoutError, TimeoutError],
             r".*Read timed out\. \(read timeout=0\.5\)"),
    # Headers arrived, the body read timed out: requests raises ConnectionError (not ReadTimeout) around
    # urllib3's ReadTimeoutError.
    "stall-after-headers": ([ConnectionError_, urllib3.exceptions.ReadTimeoutError, TimeoutError],
                            r".*Read timed out\."),
    "bad-gzip": ([requests.exceptions.ContentDecodingError, urllib3.exceptions.DecodeError, zlib.error],
                 r".*Received response with content-encoding: gzip, but failed to decode it\..*incorrect header check.*"),
}


@pytest.mark.parametrize("fault", sorted(REQUESTS_RAISES, key=FAULTS.index))
def test_requests_raises(server, fault):
    chain, pattern = REQUESTS_RAISES[fault]
    timeout = (3, REQUESTS_READ_TIMEOUT_S if fault in NEVER_FINISH else 3)
    with pytest.raises(requests.exceptions.RequestException) as caught:
        requests.get(f"{server.url}/{fault}", timeout=timeout)
    assert exception_chain(caught.value) == chain, f"{fault}: {caught.value!r}"
    assert re.fullmatch(pattern, str(caught.value), re.DOTALL), str(caught.value)
    response = check_journal(server, fault)
    if fault in NEVER_FINISH:
        check_released_promptly(response, REQUESTS_READ_TIMEOUT_S)


def test_requests_reset_is_a_reset_not_a_clean_close(server):
    """The RST must surface as ECONNRESET: errno 104 at the bottom of the chain."""
    with pytest.raises(requests.exceptions.ConnectionError) as caught:
        requests.get(f"{server.url}/reset", timeout=3)
    error, root = caught.value, None
    while error is not None:
        root, error = error, error.__cause__ or error.__context__
    assert isinstance(root, ConnectionResetError) and root.errno == 104, repr(caught.value)


@pytest.mark.parametrize("fault", ["overlong-body", "corrupt-json", "truncated-json", "wrong-content-type",
                                   "html-error-page"])
def test_requests_succeeds_with_unusable_data(server, fault):
    response = requests.get(f"{server.url}/{fault}", timeout=3)
    expected_status = 502 if fault == "html-error-page" else 200
    assert response.status_code == expected_status
    if fault in ("overlong-body", "wrong-content-type"):
        # requests reads exactly Content-Length bytes (the excess is discarded) and does not look at the
        # Content-Type before decoding: both parse.
        assert response.content == BODY_BYTES and response.json() == BODY
        if fault == "wrong-content-type":
            assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    else:
        with pytest.raises(requests.exceptions.JSONDecodeError) as caught:
            response.json()
        assert exception_chain(caught.value)[:2] == [requests.exceptions.JSONDecodeError, json.JSONDecodeError]
    if fault == "html-error-page":
        assert response.headers["Content-Type"] == "text/html" and response.text.startswith("<html>")
        with pytest.raises(requests.exceptions.HTTPError, match="502 Server Error: Bad Gateway"):
            response.raise_for_status()
    check_journal(server, fault)


def test_requests_stream_sees_the_status_before_the_broken_body(server):
    """With stream=True the head arrives fine; the fault surfaces when the body is read."""
    response = requests.get(f"{server.url}/truncate-body", timeout=3, stream=True)
    assert response.status_code == 200 and response.headers["Content-Length"] == "42"
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        response.content
    check_journal(server, "truncate-body")


def test_every_fault_is_covered_for_requests():
    succeeds = {"overlong-body", "corrupt-json", "truncated-json", "wrong-content-type", "html-error-page"}
    assert set(REQUESTS_RAISES) | succeeds == set(FAULTS) and not set(REQUESTS_RAISES) & succeeds
    assert set(CURL) == set(FAULTS)


# -- Go net/http ------------------------------------------------------------------------------------------

# What client.Do / io.ReadAll(resp.Body) return (Tests/Python/clients/goclient): (phase, the types errors.Unwrap
# walks outermost first, sentinels errors.Is finds, a stable fragment of the message). Phase "do" is an error
# from client.Do (no response); "body" is a response whose body read failed. An empty sentinel list means Go
# wraps nothing recognisable: the error is a bare errors.New string.
GO_FAILS = {
    "reset": ("do", ["*url.Error", "*net.OpError", "*os.SyscallError", "syscall.Errno"], ["ECONNRESET"],
              "read: connection reset by peer"),
    "empty-reply": ("do", ["*url.Error", "*errors.errorString"], ["io.EOF"], ": EOF"),
    "half-close": ("do", ["*url.Error", "*errors.errorString"], ["io.EOF"], ": EOF"),
    "close-after-headers": ("body", ["*errors.errorString"], ["io.ErrUnexpectedEOF"], "unexpected EOF"),
    "truncate-body": ("body", ["*errors.errorString"], ["io.ErrUnexpectedEOF"], "unexpected EOF"),
    "malformed-chunk": ("body", ["*errors.errorString"], [], "invalid byte in chunk length"),
    "garbage": ("do", ["*url.Error", "*errors.errorString"], [],
                "net/http: HTTP/1.x transport connection broken: malformed HTTP"),
    "hang": ("do", ["*url.Error", "*http.httpError"], [], "(Client.Timeout exceeded while awaiting headers)"),
    "stall-after-headers": ("body", ["*http.httpError"], [],
                            "(Client.Timeout or context cancellation while reading body)"),
    # Go asks for gzip itself (Accept-Encoding: gzip) and so decodes transparently: the read fails.
    "bad-gzip": ("body", ["*errors.errorString"], [], "gzip: invalid header"),
}
# (status, body bytes read, whether they parse as JSON) for the faults Go reads without an error.
GO_SUCCEEDS = {
    "overlong-body": (200, 42, True),    # reads the declared 42 bytes, drops the excess
    "corrupt-json": (200, 44, False),
    "truncated-json": (200, 20, False),
    "wrong-content-type": (200, 42, True),
    "html-error-page": (502, 152, False),
}


def test_every_fault_is_covered_for_go_and_fetch():
    assert set(GO_FAILS) | set(GO_SUCCEEDS) == set(FAULTS) and not set(GO_FAILS) & set(GO_SUCCEEDS)
    assert set(FETCH_FAILS) | set(FETCH_SUCCEEDS) == set(FAULTS) and not set(FETCH_FAILS) & set(FETCH_SUCCEEDS)


@pytest.mark.parametrize("fault", FAULTS)
def test_go_net_http(server, go_client, fault):
    (result,) = run_json_lines([go_client, "-timeout", GO_TIMEOUT, f"{server.url}/{fault}"])
    assert result["conns"] == [False], f"one fresh connection, no retry: {result}"
    if fault in GO_FAILS:
        phase, chain, sentinels, fragment = GO_FAILS[fault]
        assert (result["phase"], result["chain"]) == (phase, chain), result
        assert [name for name in result.get("is", []) if not name.startswith("net.OpError")] == sentinels, result
        assert fragment in result["error"], result
        assert result.get("timeout", False) == (fault in NEVER_FINISH), result
        if phase == "body":
            assert result["status"] == 200, "the head arrived: client.Do returned the response"
        if fault == "truncate-body":
            assert result["bodyLength"] == 21, "ReadAll returns the 21 bytes that came, with the error"
    else:
        status, length, parsed = GO_SUCCEEDS[fault]
        assert "error" not in result, result
        assert (result["status"], result["bodyLength"], result["parsed"]) == (status, length, parsed), result
        if fault == "wrong-content-type":
            assert result["contentType"] == "text/html; charset=utf-8"
    response = check_journal(server, fault)
    if fault in NEVER_FINISH:
        check_released_promptly(response, 1.0)


# -- node fetch (undici) ----------------------------------------------------------------------------------

# What fetch() / response.arrayBuffer() reject with (Tests/Python/clients/fetchclient.mjs): (phase, the error
# and its `cause` chain as (name, code) pairs, outermost first, the outer message). Phase "fetch" is a rejected
# fetch() (no Response); "body" is a Response whose body read was rejected.
FETCH_FAILS = {
    "reset": ("fetch", [("TypeError", None), ("Error", "ECONNRESET")], "fetch failed"),
    "empty-reply": ("fetch", [("TypeError", None), ("SocketError", "UND_ERR_SOCKET")], "fetch failed"),
    "half-close": ("fetch", [("TypeError", None), ("SocketError", "UND_ERR_SOCKET")], "fetch failed"),
    "close-after-headers": ("body", [("TypeError", None), ("SocketError", "UND_ERR_SOCKET")], "terminated"),
    "truncate-body": ("body", [("TypeError", None), ("ResponseContentLengthMismatchError",
                                                     "UND_ERR_RES_CONTENT_LENGTH_MISMATCH")], "terminated"),
    "malformed-chunk": ("body", [("TypeError", None), ("HTTPParserError", "HPE_INVALID_CHUNK_SIZE")], "terminated"),
    "garbage": ("fetch", [("TypeError", None), ("HTTPParserError", "HPE_INVALID_CONSTANT")], "fetch failed"),
    "hang": ("fetch", [("TimeoutError", 23)], "The operation was aborted due to timeout"),
    "stall-after-headers": ("body", [("TimeoutError", 23)], "The operation was aborted due to timeout"),
    # fetch sends Accept-Encoding: gzip, deflate (br on newer undici) and decodes: zlib fails the body.
    "bad-gzip": ("body", [("TypeError", None), ("Error", "Z_DATA_ERROR")], "terminated"),
}
FETCH_SUCCEEDS = GO_SUCCEEDS   # the same statuses, byte counts and parse results


@pytest.mark.parametrize("fault", FAULTS)
def test_node_fetch(server, node_fetch_client, fault):
    (result,) = run_json_lines([*node_fetch_client, "--timeout", FETCH_TIMEOUT_MS, f"{server.url}/{fault}"])
    if fault in FETCH_FAILS:
        phase, chain, message = FETCH_FAILS[fault]
        assert result["phase"] == phase, result
        assert [(link["name"], link.get("code")) for link in result["chain"]] == chain, result
        assert result["chain"][0]["message"] == message, result
        if phase == "body":
            assert result["status"] == 200, "the head arrived: fetch() resolved with the Response"
    else:
        status, length, parsed = FETCH_SUCCEEDS[fault]
        assert "chain" not in result, result
        assert (result["status"], result["bodyLength"], result["parsed"]) == (status, length, parsed), result
        if fault == "wrong-content-type":
            assert result["contentType"] == "text/html; charset=utf-8"
    response = check_journal(server, fault)
    if fault in NEVER_FINISH:
        # AbortSignal.timeout starts at the fetch() call, before undici (loaded lazily by the first fetch) has
        # connected: on a loaded machine the server sees the request well after the timer started.
        assert FETCH_TIMEOUT_MS - 500 <= response["durationMs"] <= FETCH_TIMEOUT_MS + 1000, response



# -- the stale keep-alive race ----------------------------------------------------------------------------

# `connections.maxRequests: 1`: the server closes every connection after its first response (FIN, no
# `Connection: close`) and journals whatever still arrives on it as `connection-closing`. Straight to the server
# a client only sometimes sends into the closed connection (it usually sees the FIN first); FinDelayProxy holds
# the FIN back, so a client that sends its next request at once always does.
RACE_FIN_DELAY_S = 0.3


@pytest.fixture
def race(start_faultline, write_scenario):
    """(server, proxy URL) for a scenario whose connections close after one response."""
    server = start_faultline(write_scenario({
        "name": "race", "connections": {"maxRequests": 1},
        "routes": [{"id": "item", "match": {"path": "/item"}, "responses": [{"json": {"ok": True}}]}],
    }))
    proxy = FinDelayProxy(server.port, RACE_FIN_DELAY_S)
    yield server, f"http://127.0.0.1:{proxy.port}"
    proxy.close()


def race_urls(base, count):
    return [f"{base}/item?n={n}" for n in range(1, count + 1)]


def race_journal(server, entries):
    """Waits for `entries` settled journal entries; returns {n: [(outcome, connection id), ...]} in order, after
    checking that every late request arrived on a connection whose last response is marked max-requests."""
    journal = server.wait_for(entries, completed=True, timeout_ms=5000)
    assert len(server.journal()) == entries, server.journal()
    closed_after = {entry["connection"]["id"] for entry in journal
                    if entry["response"].get("connectionClosedAfter") == "max-requests"}
    by_target = {}
    for entry in journal:
        response = entry["response"]
        if response["outcome"] == "connection-closing":
            assert entry["connection"]["id"] in closed_after and entry["connection"]["reused"], entry
            assert response["status"] is None and response["bytesWritten"] == 0, entry
        else:
            assert response["outcome"] == "completed" and response["connectionClosedAfter"] == "max-requests", entry
        n = int(entry["target"].rsplit("=", 1)[1])
        by_target.setdefault(n, []).append((response["outcome"], entry["connection"]["id"]))
    return by_target


def outcomes(by_target):
    return {n: [outcome for outcome, _ in attempts] for n, attempts in by_target.items()}


RETRIED = ["connection-closing", "completed"]


@pytest.mark.parametrize("how", [["-method", "GET"], ["-method", "POST", "-body", "x", "-idempotency-key", "race"]],
                         ids=["GET", "POST-with-Idempotency-Key"])
def test_race_go_retries_an_idempotent_request(race, go_client, how):
    """Go's Transport retries a request it may replay (GET, or any request with an Idempotency-Key header) when
    a reused connection dies before any response byte: the caller sees 200, the journal sees both attempts."""
    server, base = race
    results = run_json_lines([go_client, "-timeout", "3s", *how, *race_urls(base, 3)])
    assert [(r.get("status"), r["conns"]) for r in results] == [(200, [False]), (200, [True, False]),
                                                                 (200, [True, False])], results
    by_target = race_journal(server, 5)
    assert outcomes(by_target) == {1: ["completed"], 2: RETRIED, 3: RETRIED}
    for n in (2, 3):
        (_, stale), (_, fresh) = by_target[n]
        assert stale == by_target[n - 1][-1][1] and fresh != stale, "the retry took a new connection"


def test_race_go_surfaces_eof_for_a_post_without_idempotency_key(race, go_client):
    server, base = race
    results = run_json_lines([go_client, "-timeout", "3s", "-method", "POST", "-body", "x", *race_urls(base, 3)])
    first, second, third = results
    assert (first["status"], third["status"], third["conns"]) == (200, 200, [False]), results
    assert (second["phase"], second["chain"], second["is"], second["conns"]) == (
        "do", ["*url.Error", "*errors.errorString"], ["io.EOF"], [True]), second
    assert second["error"].endswith(": EOF"), second
    assert outcomes(race_journal(server, 3)) == {1: ["completed"], 2: ["connection-closing"], 3: ["completed"]}


def test_race_node_fetch_surfaces_other_side_closed(race, node_fetch_client):
    """undici does not retry: fetch() rejects with `fetch failed` <- SocketError `other side closed`. Which request
    lands on the stale connection depends on undici's pool (it does not always reuse the idle connection first),
    so the test pairs each failure with the journal's late request instead of fixing the index."""
    server, base = race
    results = run_json_lines([*node_fetch_client, "--timeout", "3000", *race_urls(base, 5)])
    failed = {n for n, result in enumerate(results, 1) if "chain" in result}
    for n in failed:
        chain = results[n - 1]["chain"]
        assert results[n - 1]["phase"] == "fetch", results[n - 1]
        assert [(link["name"], link.get("code")) for link in chain] == [("TypeError", None),
                                                                         ("SocketError", "UND_ERR_SOCKET")], chain
        assert (chain[0]["message"], chain[1]["message"]) == ("fetch failed", "other side closed"), chain
    assert all(results[n - 1]["status"] == 200 for n in set(range(1, 6)) - failed), results
    by_target = race_journal(server, 5)   # one request each: nothing retried
    late = {n for n, attempts in outcomes(by_target).items() if attempts == ["connection-closing"]}
    assert failed == late and failed, (results, by_target)


def test_race_requests_session_surfaces_remote_disconnected(race):
    """urllib3 checks that a pooled connection is not dropped before reusing it; with the FIN still in flight it
    is not, and requests (max_retries 0) raises."""
    server, base = race
    first, second, third = race_urls(base, 3)
    with requests.Session() as session:
        assert session.get(first, timeout=3).status_code == 200
        with pytest.raises(requests.exceptions.ConnectionError) as caught:
            session.get(second, timeout=3)
        assert session.get(third, timeout=3).status_code == 200
    assert exception_chain(caught.value) == [ConnectionError_, ProtocolError, RemoteDisconnected], repr(caught.value)
    assert outcomes(race_journal(server, 3)) == {1: ["completed"], 2: ["connection-closing"], 3: ["completed"]}


def test_race_curl_retries_on_a_fresh_connection(race):
    """One curl with three URLs reuses the connection; libcurl retries a request whose reused connection died
    before any response byte ("Connection died, retrying a fresh connect")."""
    server, base = race
    completed = subprocess.run(["curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-o", "/dev/null", "-o",
                                "/dev/null", "-w", "%{http_code}\n", *race_urls(base, 3)],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=15)
    assert (completed.returncode, completed.stdout.split()) == (0, ["200", "200", "200"]), completed
    assert outcomes(race_journal(server, 5)) == {1: ["completed"], 2: RETRIED, 3: RETRIED}
