"""A proxied body streamed as it arrives (README "Proxy and record", ARCHITECTURE §4d): the client has the head and
the first bytes while the upstream still holds the rest, a body far over `maxResponseBytes` passes through intact,
a client that stops reading stops the upstream (memory stays flat), an upstream that fails mid-body cuts the
client's response the way each protocol can say it, a client that leaves closes the upstream connection, and a
silent upstream mid-body is a timeout. curl (HTTP/1.1 and HTTP/2), requests and httpx over h2c.

Nothing sleeps to wait: the upstream's progress is waited on with deadlines (threading events), the journal is
long-polled."""

import hashlib
import json
import socket
import subprocess
import threading
import time

import h2.config
import h2.connection
import h2.settings
import httpx
import pytest
import requests
import urllib3

from conftest import RawServer, start_recorder

DEADLINE_S = 10.0
PIECE = 64 * 1024


def pattern(size):
    """`size` deterministic bytes (a repeating 251-byte cycle, so misplaced pieces show)."""
    cycle = bytes(range(251))
    return (cycle * (size // 251 + 1))[:size]


class StreamingUpstream(RawServer):
    """An HTTP/1.1 server on a thread whose paths decide how a body is sent:

    /held/N[c]    N bytes (c: chunked, else Content-Length): the first 1000 at once, the rest once `release` is set
    /big/N        N pattern bytes with Content-Length, as fast as the socket takes them; `sent` counts what the
                  kernel took
    /cut/N        announces N bytes, sends N // 4, then RST
    /stall/N      announces N bytes, sends 1000, then nothing (until the connection closes)

    `closed` is set when the proxy closes an upstream connection whose body was not finished."""

    def __init__(self):
        super().__init__(backlog=16)
        self.release = threading.Event()
        self.first_sent = threading.Event()
        self.closed = threading.Event()
        self.sent = 0
        self.start()

    def answer(self, client, number, head, rest):
        path = head.split(b" ")[1].decode()
        kind, size = path.strip("/").split("/")[:2]
        chunked = size.endswith("c")
        size = int(size.rstrip("c"))
        body = pattern(size)
        if kind == "held":
            self._held(client, body, chunked)
        elif kind == "big":
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: "
                           + str(size).encode() + b"\r\n\r\n")
            for offset in range(0, size, PIECE):
                piece = body[offset:offset + PIECE]
                client.sendall(piece)
                self.sent += len(piece)
        elif kind == "cut":
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(size).encode() + b"\r\n\r\n")
            client.sendall(body[:size // 4])
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            client.close()
            return None
        elif kind == "stall":
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(size).encode() + b"\r\n\r\n")
            client.sendall(body[:1000])
            if client.recv(1) == b"":
                self.closed.set()
            return None
        return rest

    def lost(self):
        self.closed.set()

    def _held(self, client, body, chunked):
        def frame(data):
            return (f"{len(data):x}\r\n".encode() + data + b"\r\n") if chunked else data
        framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: " + str(len(body)).encode()
        client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nX-Upstream: held\r\n"
                       + framing + b"\r\n\r\n" + frame(body[:1000]))
        self.first_sent.set()
        if not self.release.wait(DEADLINE_S):
            return
        for offset in range(1000, len(body), PIECE):
            client.sendall(frame(body[offset:offset + PIECE]))
        if chunked:
            client.sendall(b"0\r\n\r\n")

    def close(self):
        self.release.set()
        super().close()


@pytest.fixture
def streaming_upstream():
    upstream = StreamingUpstream()
    yield upstream
    upstream.close()


def proxy_server(start_faultline, write_scenario, upstream, routes=(), **proxy):
    scenario = {"name": "stream", "proxy": {"upstream": upstream.url, **proxy}, "routes": list(routes)}
    return start_faultline(write_scenario(scenario))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("framing", ["", "c"], ids=["content-length", "chunked"])
def test_the_client_has_the_first_bytes_while_the_upstream_holds_the_rest(
        start_faultline, write_scenario, streaming_upstream, framing):
    routes = [{"id": "held", "match": {"pathPrefix": "/held"},
               "responses": [{"proxy": True, "headers": {"X-Step": "set"}}]}]
    server = proxy_server(start_faultline, write_scenario, streaming_upstream, routes)
    size = 300_000
    with requests.get(f"{server.url}/held/{size}{framing}", stream=True, timeout=DEADLINE_S) as response:
        assert response.status_code == 200
        assert response.headers["X-Upstream"] == "held" and response.headers["X-Step"] == "set"
        if framing:
            assert response.headers["Transfer-Encoding"] == "chunked"
        else:
            assert response.headers["Content-Length"] == str(size)
        first = response.raw.read(1000)
        assert first == pattern(1000), "the first bytes came before the upstream sent the rest"
        assert not streaming_upstream.release.is_set()
        # The journal already knows the status while the body is on its way.
        entry = server.wait_for(1, path=f"/held/{size}{framing}")[0]
        assert entry["response"]["status"] == 200 and entry["proxy"]["streamed"] is True
        streaming_upstream.release.set()
        rest = response.raw.read()
    assert first + rest == pattern(size)
    entry = server.wait_for(1, path=f"/held/{size}{framing}", completed=True)[0]
    assert entry["proxy"]["upstreamBytes"] == size and entry["proxy"]["totalMs"] is not None
    assert entry["proxy"]["changed"] == ["headers set: X-Step"]


def test_http2_clients_get_a_streamed_body_as_it_arrives(start_faultline, write_scenario, streaming_upstream):
    server = proxy_server(start_faultline, write_scenario, streaming_upstream)
    size = 200_000
    with httpx.Client(http1=False, http2=True, timeout=DEADLINE_S) as client:
        with client.stream("GET", f"{server.url}/held/{size}") as response:
            assert response.http_version == "HTTP/2" and response.status_code == 200
            pieces = response.iter_raw()
            first = next(pieces)
            assert 0 < len(first) <= 1000 and not streaming_upstream.release.is_set()
            streaming_upstream.release.set()
            body = first + b"".join(pieces)
    assert body == pattern(size)
    entry = server.wait_for(1, completed=True)[0]
    assert entry["protocol"] == "h2c" and entry["proxy"]["streamed"] is True


def test_a_body_far_over_max_response_bytes_streams_through_intact(start_faultline, write_scenario, streaming_upstream):
    server = proxy_server(start_faultline, write_scenario, streaming_upstream, maxResponseBytes=65536)
    size = 48 * 1024 * 1024
    for argument in ([], ["--http2-prior-knowledge"]):
        done = subprocess.run(["curl", "-sS", *argument, "--max-time", "30", "-o", "-", f"{server.url}/big/{size}"],
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        assert done.returncode == 0, done.stderr
        assert len(done.stdout) == size
        assert hashlib.sha256(done.stdout).digest() == hashlib.sha256(pattern(size)).digest()
    entries = server.wait_for(2, completed=True)
    assert [e["proxy"]["upstreamBytes"] for e in entries] == [size, size]
    assert [e["proxy"]["failure"] for e in entries] == [None, None]


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "h2c"])
def test_a_client_that_stops_reading_stops_the_upstream_and_memory_stays_flat(
        start_faultline, write_scenario, streaming_upstream, http2):
    server = proxy_server(start_faultline, write_scenario, streaming_upstream)
    size = 512 * 1024 * 1024
    before = rss_kib(server.proc.pid)
    client = socket.create_connection(("127.0.0.1", server.port))
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    if http2:
        # h2c with prior knowledge, written by hand so that nothing reads: the preface, SETTINGS with a 1 GiB
        # stream window, a connection WINDOW_UPDATE to match, and one GET.
        connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        connection.initiate_connection()
        connection.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**30})
        connection.increment_flow_control_window(2**30 - 65535)
        connection.send_headers(1, [(":method", "GET"), (":path", f"/big/{size}"), (":scheme", "http"),
                                    (":authority", "localhost")], end_stream=True)
        client.sendall(connection.data_to_send())
    else:
        client.sendall(f"GET /big/{size} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    # The upstream sends until the chain fills: the kernel's buffers on both sides and Faultline's bounded queue.
    # (Its silence counts only once it has begun: a loaded machine may take a while to get there.)
    deadline = time.monotonic() + DEADLINE_S
    last, steady_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        if streaming_upstream.sent == 0:
            steady_since = time.monotonic()
        elif streaming_upstream.sent != last:
            last, steady_since = streaming_upstream.sent, time.monotonic()
        elif time.monotonic() - steady_since > 0.5:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the upstream never stopped: {streaming_upstream.sent} bytes sent")
    assert streaming_upstream.sent < 64 * 1024 * 1024, f"{streaming_upstream.sent} bytes left the upstream"
    grown = rss_kib(server.proc.pid) - before
    assert grown < 32 * 1024, f"Faultline grew by {grown} KiB while its client did not read"
    client.close()
    # The client left: the upstream connection is closed, not drained.
    entry = server.wait_for(1, path=f"/big/{size}", completed=True)[0]
    assert entry["proxy"]["streamed"] and entry["response"]["status"] == 200, json.dumps(entry)
    assert any("the client left after" in note for note in entry["proxy"]["changed"]), json.dumps(entry)


def test_an_upstream_reset_mid_body_cuts_the_clients_response(start_faultline, write_scenario, streaming_upstream):
    server = proxy_server(start_faultline, write_scenario, streaming_upstream)
    size = 4 * 1024 * 1024
    http1 = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "/dev/null", f"{server.url}/cut/{size}"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=20)
    assert http1.returncode == 18, http1.stderr  # partial file: fewer bytes than Content-Length
    http2 = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "10", "-o", "/dev/null",
                            f"{server.url}/cut/{size}"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=20)
    assert http2.returncode == 92, http2.stderr  # the stream was reset (INTERNAL_ERROR), never ended
    with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError)):
        requests.get(f"{server.url}/cut/{size}", timeout=DEADLINE_S).content
    entries = server.wait_for(3, completed=True)
    for entry in entries:
        record = entry["proxy"]
        assert record["streamed"] and record["failure"] == "reset", record
        assert "reset the connection after" in record["error"]
        # An RST throws away what the proxy's kernel had not handed over yet: at most the quarter sent arrives.
        assert 0 < record["upstreamBytes"] <= size // 4
        assert record["changed"] == [f"the body was cut short after {record['upstreamBytes']} bytes: the upstream failed"]
    # The server goes on serving.
    assert requests.get(f"{server.url}/held/10", timeout=DEADLINE_S).status_code == 200


def test_an_upstream_silent_mid_body_is_a_timeout_between_reads(start_faultline, write_scenario, streaming_upstream):
    server = proxy_server(start_faultline, write_scenario, streaming_upstream, responseTimeoutMs=300)
    started = time.monotonic()
    with requests.get(f"{server.url}/stall/100000", stream=True, timeout=DEADLINE_S) as response:
        assert response.status_code == 200
        with pytest.raises(urllib3.exceptions.ProtocolError, match=r"IncompleteRead\(1000 bytes read, 99000 more"):
            response.raw.read()
    assert time.monotonic() - started < 5
    entry = server.wait_for(1, completed=True)[0]
    assert entry["proxy"]["failure"] == "timeout"
    assert "sent nothing for 300 ms after 1000 body bytes" in entry["proxy"]["error"]
    assert streaming_upstream.closed.wait(DEADLINE_S), "the stalled upstream connection was not closed"


def test_a_delay_waits_before_the_streamed_head(start_faultline, write_scenario, streaming_upstream):
    routes = [{"id": "slow", "match": {"pathPrefix": "/held"}, "responses": [{"proxy": True, "delayMs": 300}]}]
    server = proxy_server(start_faultline, write_scenario, streaming_upstream, routes)
    started = time.monotonic()
    with requests.get(f"{server.url}/held/50000", stream=True, timeout=DEADLINE_S) as response:
        assert time.monotonic() - started >= 0.3
        assert response.raw.read(1000) == pattern(1000)
        streaming_upstream.release.set()
        assert response.raw.read() == pattern(50000)[1000:]
    entry = server.wait_for(1, completed=True)[0]
    assert entry["proxy"]["streamed"] and entry["proxy"]["changed"] == ["delay 300 ms"]


def test_a_fault_that_needs_the_whole_body_still_reads_it_whole(start_faultline, write_scenario, streaming_upstream):
    routes = [{"id": "broken", "match": {"pathPrefix": "/held"},
               "responses": [{"proxy": True, "fault": "corrupt-json"}]}]
    server = proxy_server(start_faultline, write_scenario, streaming_upstream, routes)
    streaming_upstream.release.set()
    done = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "-", f"{server.url}/held/20000"],
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=20)
    assert done.returncode == 0 and done.stdout != pattern(20000) and done.stdout[:100] == pattern(100)
    entry = server.wait_for(1, completed=True)[0]
    assert entry["proxy"]["streamed"] is False and entry["proxy"]["upstreamBytes"] == 20000
    assert entry["response"]["fault"] == "corrupt-json"


def test_a_cutting_fault_cuts_a_large_real_download_as_it_streams(start_faultline, write_scenario, streaming_upstream):
    # A download cut at byte N for a resume test, against a body far larger than the proxy would read whole.
    size, cut = 48 * 1024 * 1024, 1_000_000
    routes = [{"id": "cut", "match": {"pathPrefix": "/big"}, "protocols": ["http/1.1"],
               "responses": [{"proxy": True, "fault": {"type": "truncate-body", "bytes": cut}}]},
              {"id": "reset", "match": {"pathPrefix": "/held"}, "protocols": ["h2"],
               "responses": [{"proxy": True, "fault": {"type": "rst-stream", "after": "body", "bytes": 5000}}]}]
    server = proxy_server(start_faultline, write_scenario, streaming_upstream, routes, maxResponseBytes=65536)
    done = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "-", "-w", "%{http_code}", f"{server.url}/big/{size}"],
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=20)
    assert done.returncode == 18, done.stderr  # fewer bytes than the Content-Length announced
    assert done.stdout[:-3] == pattern(cut) and done.stdout[-3:] == b"200"
    entry = server.wait_for(1, path=f"/big/{size}", completed=True)[0]
    assert entry["proxy"]["streamed"] and entry["response"]["fault"] == "truncate-body"
    assert entry["proxy"]["changed"] == [f"truncate-body: {cut} of {size} body bytes sent",
                                         "the rest of the upstream's body was not read: its connection was closed"]
    assert cut <= entry["proxy"]["upstreamBytes"] < size, entry["proxy"]  # what was read before the close
    assert streaming_upstream.closed.wait(DEADLINE_S), "the upstream connection was not closed at the cut"
    assert streaming_upstream.sent < size

    streaming_upstream.release.set()
    reset = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "10", "-o", "/dev/null",
                            f"{server.url}/held/200000"], capture_output=True, stdin=subprocess.DEVNULL, timeout=20)
    assert reset.returncode == 92, reset.stderr  # curl may drop the DATA that came in one read with the reset
    received = b""
    with httpx.Client(http1=False, http2=True, timeout=DEADLINE_S) as client:
        with client.stream("GET", f"{server.url}/held/200000") as response:
            with pytest.raises(httpx.RemoteProtocolError, match="StreamReset"):
                for piece in response.iter_raw():
                    received += piece
    assert received == pattern(5000), len(received)
    entries = server.wait_for(2, path="/held/200000", completed=True)
    assert all(e["proxy"]["streamed"] and e["proxy"]["changed"][0] == "rst-stream: 5000 of 200000 body bytes sent"
               for e in entries), [e["proxy"] for e in entries]


def test_a_recording_keeps_a_streamed_body_and_serves_it_back(start_faultline, streaming_upstream, tmp_path):
    # `faultline record` streams too: a large download goes through as it arrives and is written as a body file.
    size = 3 * 1024 * 1024
    recorder = start_recorder(tmp_path, streaming_upstream.url)
    through = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "-", f"{recorder.url}/big/{size}"],
                             capture_output=True, stdin=subprocess.DEVNULL, timeout=20)
    assert through.returncode == 0 and through.stdout == pattern(size), through.stderr
    entry = recorder.wait_for(1, completed=True)[0]
    assert entry["proxy"]["streamed"] is True
    recorder.proc.send_signal(2)
    assert recorder.wait_exit() == 0, recorder.stderr()
    assert "recorded 1 exchange(s) as " in recorder.stderr()
    assert any(path.stat().st_size == size for path in (recorder.output / "bodies").iterdir())
    replay = start_faultline(recorder.output, args=["--quiet"])
    served = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "-", f"{replay.url}/big/{size}"],
                            capture_output=True, stdin=subprocess.DEVNULL, timeout=20)
    assert served.returncode == 0 and served.stdout == pattern(size)
