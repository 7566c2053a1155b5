"""HTTP/2 abuse over h2c, frames written by hand: the denial-of-service patterns production servers were patched
against (rapid reset, CVE-2023-44487; CONTINUATION flood, CVE-2024-27316 and nghttp2's CVE-2024-28182; PING,
SETTINGS, empty-DATA, WINDOW_UPDATE and PRIORITY floods; a client that never reads; a zero window that holds streams).

Each test runs one attack while a well-behaved client on another connection (HTTP/1.1 keep-alive, GET every 10 ms)
measures its latency, samples the server's RSS, then asserts the answer RFC 9113 allows (GOAWAY with the error
named, where the attack ends the connection), the journal's connection entry, a memory bound, the good client's
latency and that the server still serves. The latency bound is 60 ms at p99 and no error: on this 2-core machine
the good client's p99 is about 1–2 ms when nothing else runs, and the worst attack (rapid reset, before reads were
spread over loop turns) put it at 140–220 ms per attacking connection. `docs/http2.md` ("Abuse") has the table
beside nginx's. Every socket has a deadline; the whole file takes about 30 s.
"""

import json
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

import pytest

from test_http2 import PREFACE, ERROR_CODES, frames

ROUTES = {"name": "abuse-h2", "routes": [
    {"id": "ok", "match": {"path": "/ok"}, "responses": [{"text": "still here"}]},
    {"id": "slow", "match": {"path": "/slow"}, "responses": [{"delayMs": 60000, "text": "late"}]},
], "resources": [{"id": "big", "path": "/big", "generated": {"size": "64MiB"}}]}

ATTACK_S = 2.0
P99_BOUND_MS = 60.0
RSS_GROWTH_BOUND_MB = 48


def frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def settings(**values):
    ids = {"INITIAL_WINDOW_SIZE": 0x4, "MAX_FRAME_SIZE": 0x5}
    return frame(0x4, 0, 0, b"".join(ids[k].to_bytes(2, "big") + v.to_bytes(4, "big") for k, v in values.items()))


def get_block(path):
    """HPACK: :method GET, :scheme http, :path literal, :authority literal "x"."""
    return bytes([0x82, 0x86, 0x44, len(path)]) + path + bytes([0x41, 0x01]) + b"x"


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        return int(re.search(r"VmRSS:\s+(\d+)", status.read()).group(1)) / 1024


GOOD_CLIENT = r"""
import json, socket, sys, threading, time
port, latencies, errors, done = int(sys.argv[1]), [], [0], threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), done.set()), daemon=True).start()
sock = None
while not done.is_set():
    started = time.monotonic()
    try:
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while not received.endswith(b"still here"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            received += chunk
        latencies.append((time.monotonic() - started) * 1000)
    except OSError:
        errors[0] += 1
        sock = None
    time.sleep(0.01)
print(json.dumps({"latencies": latencies, "errors": errors[0]}))
"""


class GoodClient:
    """HTTP/1.1 keep-alive GET /ok every 10 ms until stopped, in a process of its own (in this one, the attack's
    frame building would hold the GIL and count as the server's latency); latencies in ms, errors counted."""

    def __init__(self, port):
        self.process = subprocess.Popen([sys.executable, "-c", GOOD_CLIENT, str(port)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.latencies, self.errors = [], 0

    def stop(self):
        out, _ = self.process.communicate("stop\n", timeout=30)
        result = json.loads(out)
        self.latencies, self.errors = result["latencies"], result["errors"]

    def p99(self):
        ordered = sorted(self.latencies)
        return ordered[max(0, int(len(ordered) * 0.99) - 1)]


class Attack:
    """One attacking connection: sends with `send(sock)` for up to ATTACK_S while a reader thread drains (or,
    with read=False, nothing is ever read). Collects the frames the server sent."""

    def __init__(self, port, read=True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.read, self.chunks, self.closed, self.stop = read, [], False, threading.Event()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        if read:
            self.reader.start()

    def _drain(self):
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except OSError:
                self.closed = True
                return
            if not chunk:
                self.closed = True
                return
            self.chunks.append(chunk)

    def run(self, send):
        deadline = time.monotonic() + ATTACK_S
        sent = 0
        try:
            while time.monotonic() < deadline:
                if send(self.sock) is False:
                    break
                sent += 1
        except OSError:
            self.closed = True
        return sent

    def finish(self, wait_close=True):
        """Waits up to 2 s for the server to close (a reading attack that it ends), then closes; the frames
        received."""
        if self.read:
            deadline = time.monotonic() + (2 if wait_close else 0.2)
            while not self.closed and time.monotonic() < deadline:
                time.sleep(0.02)
            self.stop.set()
            self.reader.join()
        self.sock.close()
        return frames(b"".join(self.chunks))


def goaway_of(received):
    goaways = [payload for kind, _, _, payload in received if kind == 0x7]
    if not goaways:
        return None
    return int.from_bytes(goaways[0][:4], "big") & 0x7FFFFFFF, ERROR_CODES.get(int.from_bytes(goaways[0][4:8], "big"))


@pytest.fixture
def under_attack(start_faultline, write_scenario):
    """under_attack(attack) -> (result, good, rss_growth_mb, server): runs attack(server) while the good client
    runs and the server's RSS is sampled; checks the server still serves afterwards."""

    def run(attack):
        server = start_faultline(write_scenario(ROUTES), args=["--quiet"])
        pid = server.proc.pid
        good = GoodClient(server.port)
        time.sleep(0.3)
        baseline, peak, sampling = rss_mb(pid), [0.0], threading.Event()

        def sample():
            while not sampling.is_set():
                peak[0] = max(peak[0], rss_mb(pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            result = attack(server)
        finally:
            time.sleep(0.3)
            good.stop()
            sampling.set()
            sampler.join()
        print(f"good client: {len(good.latencies)} requests, p50 {statistics.median(good.latencies):.2f} ms, "
              f"p99 {good.p99():.2f} ms, max {max(good.latencies):.1f} ms, {good.errors} errors; "
              f"RSS {baseline:.0f} → peak {peak[0]:.0f} MB")
        assert good.errors == 0
        assert len(good.latencies) >= 20, "the good client was served throughout"
        assert good.p99() <= P99_BOUND_MS, f"p99 {good.p99():.1f} ms during the attack"
        assert peak[0] - baseline <= RSS_GROWTH_BOUND_MB, f"RSS {baseline:.0f} → {peak[0]:.0f} MB"
        assert b"still here" in server_get(server.port, b"/ok")
        return result, server

    return run


def server_get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def connection_errors(server):
    return [entry["error"] for entry in server.journal(connection="true") if entry.get("error")]


def test_rapid_reset_is_ended_with_goaway_and_others_are_served(under_attack):
    """HEADERS then RST_STREAM CANCEL, 100 pairs per write, on ten connections one after another. nghttp2 (1.52 with
    Debian's CVE-2023-44487 fix) allows a burst of 1,000 resets, then GOAWAY INTERNAL_ERROR. Each stream that
    began reached the server, so it is journaled, `client-closed`; no answer ever goes out."""

    def attack(server):
        outcomes = []
        for _ in range(10):
            connection = Attack(server.port)
            connection.sock.sendall(PREFACE + settings())
            stream = [1]

            def burst(sock):
                batch = b""
                for _ in range(100):
                    batch += frame(0x1, 0x5, stream[0], get_block(b"/slow")) + frame(0x3, 0, stream[0], (8).to_bytes(4, "big"))
                    stream[0] += 2
                sock.sendall(batch)

            connection.run(burst)
            outcomes.append(goaway_of(connection.finish()))
        return outcomes

    outcomes, server = under_attack(attack)
    assert all(outcome is not None and outcome[1] == "INTERNAL_ERROR" for outcome in outcomes), outcomes
    errors = connection_errors(server)
    assert len(errors) == 10 and all(error == "HTTP/2 connection error: INTERNAL_ERROR" for error in errors), errors
    slow = server.journal(route="slow")
    assert slow and all(entry["response"]["outcome"] == "client-closed" for entry in slow)
    # At most what the GOAWAYs allowed, give or take the one read slice nghttp2 was in when it decided.
    assert len(slow) <= sum(last // 2 + 1 + 64 for last, _ in outcomes), (len(slow), outcomes)


def test_continuation_flood_is_ended_with_goaway(under_attack):
    """HEADERS without END_HEADERS, then CONTINUATION frames that never end the block: nghttp2 stops at 8
    CONTINUATION frames (CVE-2024-28182) with GOAWAY INTERNAL_ERROR; no request was ever complete."""

    def attack(server):
        connection = Attack(server.port)
        connection.sock.sendall(PREFACE + settings() + frame(0x1, 0x1, 1, get_block(b"/ok")))
        literal = b"\x00\x05x-pad\x05vvvvv"
        connection.run(lambda sock: sock.sendall(frame(0x9, 0, 1, literal * 100) * 100))
        return goaway_of(connection.finish())

    outcome, server = under_attack(attack)
    assert outcome is not None and outcome[1] == "INTERNAL_ERROR", outcome
    assert any("Too many CONTINUATION frames" in error for error in connection_errors(server)), connection_errors(server)


@pytest.mark.parametrize("kind", ["ping", "settings"])
def test_an_unread_ping_or_settings_flood_is_ended_with_enhance_your_calm(under_attack, kind):
    """PINGs (or SETTINGS) faster than acknowledged, never reading the acknowledgements: nghttp2 queues at most
    1,000, then the connection ends (GOAWAY ENHANCE_YOUR_CALM, RFC 9113 §10.5; the client, not reading, may see only
    the reset)."""
    one = frame(0x6, 0, 0, b"12345678") if kind == "ping" else frame(0x4, 0, 0, b"\x00\x03\x00\x00\x00\x64")

    def attack(server):
        connection = Attack(server.port, read=False)
        connection.sock.sendall(PREFACE + settings())
        connection.run(lambda sock: sock.sendall(one * 1000))
        connection.finish()

    _, server = under_attack(attack)
    errors = connection_errors(server)
    assert len(errors) == 1 and errors[0].startswith("HTTP/2 connection error: ENHANCE_YOUR_CALM: Flooding"), errors


def test_a_read_ping_flood_is_answered_then_ended_with_enhance_your_calm(under_attack):
    """A client that reads but sends PINGs 1,000 a write: one 64 KiB read holds some 3,600, more acknowledgements
    than nghttp2 queues (1,000): GOAWAY ENHANCE_YOUR_CALM."""

    def attack(server):
        connection = Attack(server.port)
        connection.sock.sendall(PREFACE + settings())
        connection.run(lambda sock: sock.sendall(frame(0x6, 0, 0, b"12345678") * 1000))
        return connection.finish()

    received, server = under_attack(attack)
    assert goaway_of(received)[1] == "ENHANCE_YOUR_CALM"
    assert any("ENHANCE_YOUR_CALM" in error for error in connection_errors(server))


@pytest.mark.parametrize("flood", ["empty-data", "window-update", "priority"])
def test_floods_of_frames_that_cost_nothing_do_not_starve_others(under_attack, flood):
    """Valid frames that ask for no work — empty DATA on an open upload, WINDOW_UPDATE by 1, PRIORITY for idle
    streams — at whatever rate the socket takes (millions in the attack): the connection is allowed to go on, as
    nghttp2 and nginx do, while the good client keeps its latency and the memory stays flat."""
    post = bytes([0x83, 0x86, 0x44, 0x03]) + b"/ok" + bytes([0x41, 0x01]) + b"x"
    streams = [1]

    def send(sock):
        if flood == "empty-data":
            sock.sendall(frame(0x0, 0, 1) * 1000)
        elif flood == "window-update":
            sock.sendall(frame(0x8, 0, 0, (1).to_bytes(4, "big")) * 1000)
        else:
            batch = b""
            for _ in range(1000):
                batch += frame(0x2, 0, streams[0], (streams[0] + 2).to_bytes(4, "big") + b"\x10")
                streams[0] += 2
            sock.sendall(batch)

    def attack(server):
        connection = Attack(server.port)
        connection.sock.sendall(PREFACE + settings() + (frame(0x1, 0x4, 1, post) if flood == "empty-data" else b""))
        sent = connection.run(send)
        connection.finish(wait_close=False)
        return sent

    sent, server = under_attack(attack)
    assert sent >= 100, "the attack got its frames in"


def test_a_client_that_never_reads_a_hundred_large_downloads_holds_bounded_memory(under_attack):
    """A window of 2^31 − 1 and a hundred 64 MiB downloads, never read: the server writes until the socket's
    buffer and its own 256 KiB queue are full, then stops reading and writing on that connection."""

    def attack(server):
        connection = Attack(server.port, read=False)
        connection.sock.sendall(PREFACE + settings(INITIAL_WINDOW_SIZE=2**31 - 1)
                                + frame(0x8, 0, 0, (2**31 - 1 - 65535).to_bytes(4, "big"))
                                + b"".join(frame(0x1, 0x5, 2 * i + 1, get_block(b"/big")) for i in range(100)))
        time.sleep(ATTACK_S)
        connection.finish()

    _, server = under_attack(attack)
    assert len(server.journal(route="resource:big")) == 100


def test_a_zero_window_holds_streams_without_cost(under_attack):
    """SETTINGS_INITIAL_WINDOW_SIZE 0 and a hundred downloads: each gets its HEADERS, no DATA can go, and the
    streams wait at no cost to anyone else."""

    def attack(server):
        connection = Attack(server.port)
        connection.sock.sendall(PREFACE + settings(INITIAL_WINDOW_SIZE=0)
                                + b"".join(frame(0x1, 0x5, 2 * i + 1, get_block(b"/big")) for i in range(100)))
        time.sleep(ATTACK_S)
        return connection.finish(wait_close=False)

    received, server = under_attack(attack)
    assert sum(1 for kind, *_ in received if kind == 0x1) == 100, "every stream got its HEADERS"
    assert not any(kind == 0x0 and payload for kind, _, _, payload in received), "no DATA through a zero window"
