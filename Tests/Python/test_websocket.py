"""WebSocket end to end (ARCHITECTURE §4c): real clients against `faultline serve` over loopback.

Coverage:
  * a scripted session with Python `websockets` 17: subprotocol selection, 101 header templating, templated text,
    receive-then-echo, repeated messages with {{n}}, a server close 1001 with its reason, and the journal's frames
    (both directions, in order) and `end`;
  * connection-keyed route steps: 503 + Retry-After for the first connection, a session for the second;
  * every session fault (drop, drop-fin, close-keep-open, truncated-frame, fragmented, masked-frame, silence,
    ignorePings, a message over the client's max_size) with what Python `websockets` reports and the journal's `end`;
  * the upgrade faults (wrong-accept, unrequested-subprotocol), a delayMs before the 101, non-101 answers;
  * protocol errors from a raw socket (unmasked frame 1002, invalid UTF-8 1007, over maxMessageBytes 1009), after
    which the server still serves;
  * client-initiated ends: a close 1000 handshake and a bare TCP drop;
  * node's `ws` 8 (Debian's /usr/share/nodejs/ws): a session with a close 1012, wrong-accept, unrequested-subprotocol
    and every session fault (what ws reports for each);
  * wss over `--tls-port` (the journal entry has `tls`);
  * the refusals (426, 426 + Sec-WebSocket-Version, 400, and HTTP/2's RST_STREAM HTTP_1_1_REQUIRED as curl sees it);
  * load: 1,000 concurrent sessions × 100 messages each, peak server RSS measured from /proc
    (FAULTLINE_WS_LOAD_SESSIONS / FAULTLINE_WS_LOAD_MESSAGES override the size).

Nothing sleeps to wait for the server: tests long-poll the journal (`completed=true` once a session has ended) or
read from sockets with deadlines. Every client outcome asserted here was observed with websockets 17.4, ws 8.11 and
curl 7.88.
"""

import asyncio
import contextlib
import base64
import hashlib
import json
import os
import resource
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests
import websockets
import websockets.asyncio.client
from websockets.exceptions import (ConnectionClosedError, ConnectionClosedOK, InvalidHeaderValue, InvalidStatus,
                                   NegotiationError)
from websockets.sync.client import connect

NODE_WS = "/usr/share/nodejs/ws"
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 §1.3's sample key


# -- helpers ---------------------------------------------------------------------------------------------------


def route(route_id, *responses, path=None):
    return {"id": route_id, "match": {"path": path or f"/{route_id}"}, "responses": list(responses)}


def ws_step(script=(), **options):
    return {"websocket": {"script": list(script), **options}}


def ws_server(start_faultline, write_scenario, *routes, args=(), name="ws"):
    return start_faultline(write_scenario({"name": name, "routes": list(routes)}), args=args)


def ws_url(server, path):
    return f"ws://127.0.0.1:{server.port}{path}"


def ended(server, route_id, count=1, timeout_ms=10000):
    """Waits until `count` sessions of the route have ended (their exchange is complete); returns the entries."""
    return server.wait_for(count, timeout_ms=timeout_ms, route=route_id, completed="true")


def frames(entry, direction=None):
    return [(f["direction"], f["opcode"], f["text"]) for f in entry["websocket"]["frames"]
            if direction is None or f["direction"] == direction]


def end_of(entry):
    end = dict(entry["websocket"]["end"])
    end.pop("atMs")
    return end


def open_session(url, **options):
    """A sync client for tests that call close() themselves mid-way; entered as websockets 17 requires (it warns
    about a connection used outside `with`)."""
    return connect(url, **options).__enter__()


def accept_for(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def frame(opcode, payload=b"", fin=True, mask=b"\x01\x02\x03\x04"):
    """A client frame; mask=None sends it unmasked (which a server must refuse)."""
    head = bytes([(0x80 if fin else 0) | opcode])
    length = len(payload)
    bit = 0x80 if mask is not None else 0
    if length < 126:
        head += bytes([bit | length])
    elif length < 1 << 16:
        head += bytes([bit | 126]) + struct.pack("!H", length)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", length)
    if mask is None:
        return head + payload
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def parse_frames(data):
    """Server frames in `data` (unmasked): a list of (fin, opcode, payload) and the rest."""
    out = []
    while len(data) >= 2:
        fin, opcode, masked, length = data[0] >> 7, data[0] & 0x0F, data[1] >> 7, data[1] & 0x7F
        at = 2
        if length == 126:
            if len(data) < 4:
                break
            length, at = struct.unpack("!H", data[2:4])[0], 4
        elif length == 127:
            if len(data) < 10:
                break
            length, at = struct.unpack("!Q", data[2:10])[0], 10
        assert not masked, "a server frame is never masked"
        if len(data) < at + length:
            break
        out.append((bool(fin), opcode, data[at:at + length]))
        data = data[at + length:]
    return out, data


def close_code(payload):
    return struct.unpack("!H", payload[:2])[0], payload[2:].decode()


class RawWebSocket:
    """A hand-made client over RawConnection (conftest): a correct handshake, then frames byte by byte."""

    def __init__(self, raw_connect, server, path, key=KEY):
        self.conn = raw_connect(server.port)
        self.conn.send(f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.conn.read_until(lambda data: b"\r\n\r\n" in data)
        head, _, rest = self.conn.buffer.partition(b"\r\n\r\n")
        self.head = head.decode("latin-1")
        self.conn.buffer = rest
        assert self.head.startswith("HTTP/1.1 101 "), self.head
        assert f"Sec-WebSocket-Accept: {accept_for(key)}" in self.head.split("\r\n"), self.head

    def send(self, data):
        self.conn.send(data)

    def read_frames(self, count, timeout=5.0):
        self.conn.read_until(lambda data: len(parse_frames(data)[0]) >= count, timeout)
        got, self.conn.buffer = parse_frames(self.conn.buffer)
        return got

    def read_until_close(self, timeout=5.0):
        """All frames until the server ends TCP; returns (frames, True on FIN / "reset" on RST / False on timeout)."""
        data, closed = self.conn.read_until_close(timeout)
        got, rest = parse_frames(data)
        assert rest == b"", f"bytes after the last whole frame: {rest!r}"
        return got, closed


def node(script, timeout=20):
    """Runs inline JS with `WS` = Debian's ws module; every `out(obj)` is one JSON line of stdout."""
    if shutil.which("node") is None or not Path(NODE_WS).exists():
        pytest.fail("node and Debian's node-ws are needed (scripts/ensure-deps.sh test)")
    prelude = f"const WS = require({json.dumps(NODE_WS)}); const out = o => console.log(JSON.stringify(o));\n"
    done = subprocess.run(["node", "-e", prelude + script], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


NODE_EVENTS = """
const ws = new WS(process.argv[1] || URL, PROTOCOLS);
const t0 = Date.now();
ws.on('open', () => out({ev: 'open', protocol: ws.protocol}));
ws.on('message', (m, binary) => { out({ev: 'message', text: m.toString(), binary}); if (REPLY) ws.send(REPLY); });
ws.on('error', e => out({ev: 'error', message: e.message, code: e.code || null}));
ws.on('close', (code, reason) => out({ev: 'close', code, reason: reason.toString(), ms: Date.now() - t0}));
"""


def node_events(url, protocols=(), reply=None):
    script = (f"const URL = {json.dumps(url)}; const PROTOCOLS = {json.dumps(list(protocols))};"
              f" const REPLY = {json.dumps(reply)};" + NODE_EVENTS)
    return node(script)


# -- 1. a scripted session ---------------------------------------------------------------------------------------


CHAT = route("chat", ws_step([
    {"text": "hi {{query.user}}"},
    {"receive": {"contains": "sub"}},
    {"echo": True},
    {"text": "tick {{n}}", "everyMs": 50, "times": 3},
    {"receive": {"equals": "last"}},
    {"close": {"code": 1001, "reason": "bye"}},
], subprotocols=["v2", "v1"], headers={"X-A": "req-{{request.id}}"}))


def test_a_scripted_session(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, CHAT)
    with connect(ws_url(server, "/chat?user=ann"), subprotocols=["v1", "v2", "v3"]) as ws:
        # The first of the route's subprotocols the client offered (not the client's first).
        assert ws.subprotocol == "v2"
        assert ws.response.status_code == 101
        assert ws.response.headers["X-A"] == "req-1"
        assert ws.recv(timeout=5) == "hi ann"
        ws.send("not yet")  # no "sub": the receive step keeps waiting, and nothing is echoed yet
        ws.send("a sub message")
        started = time.monotonic()
        assert [ws.recv(timeout=5) for _ in range(3)] == ["tick 1", "tick 2", "tick 3"]
        assert time.monotonic() - started >= 0.09, "two 50 ms intervals between three ticks"
        ws.send("echo me")
        assert ws.recv(timeout=5) == "echo me"
        ws.send("last")
        assert ws.recv(timeout=5) == "last"  # echoed: echo is on from its step on
        with pytest.raises(ConnectionClosedOK) as closed:
            ws.recv(timeout=5)
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1001, "bye")
    assert closed.value.sent.code == 1001  # the client echoes the code

    (entry,) = ended(server, "chat")
    assert entry["protocol"] == "websocket" and entry["response"]["status"] == 101
    assert entry["response"]["outcome"] == "completed"
    assert entry["websocket"]["subprotocol"] == "v2"
    assert frames(entry) == [
        ("out", "text", "hi ann"), ("in", "text", "not yet"), ("in", "text", "a sub message"),
        ("out", "text", "tick 1"), ("out", "text", "tick 2"), ("out", "text", "tick 3"),
        ("in", "text", "echo me"), ("out", "text", "echo me"), ("in", "text", "last"), ("out", "text", "last"),
        ("out", "close", "1001 bye"), ("in", "close", "1001 bye")]
    assert entry["websocket"]["framesIn"] == 5 and entry["websocket"]["framesOut"] == 7
    times = [f["atMs"] for f in entry["websocket"]["frames"]]
    assert times == sorted(times)
    assert all(f["fin"] for f in entry["websocket"]["frames"])
    assert end_of(entry) == {"by": "server", "code": 1001, "reason": "bye", "clean": True, "fault": None}


def test_a_session_that_offers_no_subprotocol_gets_none(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("plain", ws_step([{"json": {"a": [1, 2]}}],
                                                                                subprotocols=["v1"])))
    with connect(ws_url(server, "/plain")) as ws:
        assert ws.subprotocol is None
        assert "Sec-WebSocket-Protocol" not in ws.response.headers
        assert json.loads(ws.recv(timeout=5)) == {"a": [1, 2]}
    (entry,) = ended(server, "plain")
    assert entry["websocket"]["subprotocol"] is None


# -- 2. connection-keyed steps -----------------------------------------------------------------------------------


def test_first_connection_503_then_a_session(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route(
        "live", {"status": 503, "headers": {"Retry-After": "1"}}, ws_step([{"text": "welcome"}])))
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(server, "/live"), open_timeout=5)
    assert refused.value.response.status_code == 503
    assert refused.value.response.headers["Retry-After"] == "1"
    with connect(ws_url(server, "/live")) as ws:
        assert ws.recv(timeout=5) == "welcome"
    first, second = ended(server, "live", count=2)
    assert (first["step"], first["response"]["status"], first["protocol"]) == (0, 503, "http/1.1")
    assert first.get("websocket") is None
    assert (second["step"], second["response"]["status"], second["protocol"]) == (1, 101, "websocket")
    assert end_of(second)["by"] == "client" and end_of(second)["code"] == 1000


# -- 3. session faults as Python websockets sees them ------------------------------------------------------------


def test_drop_is_a_reset_and_1006(start_faultline, write_scenario, raw_connect):
    server = ws_server(start_faultline, write_scenario, route("drop", ws_step([{"text": "a"}, {"fault": "drop"}])))
    with connect(ws_url(server, "/drop")) as ws:
        assert ws.recv(timeout=5) == "a"
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd is None and closed.value.sent is None  # websockets' 1006: no close frame either way
    assert str(closed.value) == "no close frame received or sent"
    (entry,) = ended(server, "drop")
    assert end_of(entry) == {"by": "server", "code": None, "reason": "", "clean": False, "fault": "drop"}
    assert entry["response"]["outcome"] == "closed-by-fault"
    # On the wire: a RST, not a FIN.
    raw = RawWebSocket(raw_connect, server, "/drop")
    got, closed_how = raw.read_until_close()
    assert [(op, payload) for _, op, payload in got] == [(1, b"a")]
    assert closed_how == "reset"


def test_drop_fin_is_a_fin_and_1006(start_faultline, write_scenario, raw_connect):
    server = ws_server(start_faultline, write_scenario, route("dropfin", ws_step([{"fault": "drop-fin"}])))
    with connect(ws_url(server, "/dropfin")) as ws:
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd is None and closed.value.sent is None
    (entry,) = ended(server, "dropfin")
    assert end_of(entry) == {"by": "server", "code": None, "reason": "", "clean": False, "fault": "drop-fin"}
    assert entry["response"]["outcome"] == "closed-by-fault"
    raw = RawWebSocket(raw_connect, server, "/dropfin")
    assert raw.read_until_close() == ([], True)


def test_close_keep_open_leaves_the_client_waiting(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("cko", ws_step(
        [{"fault": {"type": "close-keep-open", "code": 1001, "reason": "x"}}])))
    ws = open_session(ws_url(server, "/cko"), close_timeout=0.5)
    # websockets answers the close frame, then waits for the server's TCP close, which never comes: recv() stays
    # blocked (close_timeout does not apply to a close the server started; the asyncio client gives up after ~20 s).
    with pytest.raises(TimeoutError):
        ws.recv(timeout=1)
    ws.close()  # closes TCP at once: the handshake is already under way
    with pytest.raises(ConnectionClosedOK) as closed:
        ws.recv(timeout=1)
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1001, "x")
    assert closed.value.sent.code == 1001 and closed.value.rcvd_then_sent is True
    (entry,) = ended(server, "cko")
    assert frames(entry) == [("out", "close", "1001 x"), ("in", "close", "1001 x")]  # the client's close: unanswered
    assert end_of(entry) == {"by": "client", "code": None, "reason": "", "clean": False, "fault": "close-keep-open"}
    assert entry["websocket"]["end"]["atMs"] >= 1000, "the session lasted until the client gave up"
    assert entry["response"]["outcome"] == "closed-by-fault"


def test_truncated_frame_stalls_the_client(start_faultline, write_scenario, raw_connect):
    server = ws_server(start_faultline, write_scenario, route("trunc", ws_step(
        [{"text": "before"}, {"fault": {"type": "truncated-frame", "bytes": 1000}}])))
    ws = open_session(ws_url(server, "/trunc"), close_timeout=0.5)
    assert ws.recv(timeout=5) == "before"
    with pytest.raises(TimeoutError):
        ws.recv(timeout=1)  # half a frame arrived: the client waits for the rest
    started = time.monotonic()
    ws.close()  # our close frame is never answered: websockets closes TCP after close_timeout
    assert time.monotonic() - started >= 0.45
    (entry,) = ended(server, "trunc")
    out = entry["websocket"]["frames"][1]
    assert (out["direction"], out["opcode"], out["size"], out["text"]) == (
        "out", "binary", 1000, "truncated after 500 of 1000 bytes")
    assert end_of(entry) == {"by": "client", "code": None, "reason": "", "clean": False, "fault": "truncated-frame"}
    # On the wire: a header promising 1000 bytes, 500 of them, then nothing.
    raw = RawWebSocket(raw_connect, server, "/trunc")
    raw.read_frames(1)
    raw.conn.read_until(lambda data: len(data) >= 4 + 500)
    data, closed_how = raw.conn.read_until_close(timeout=0.5)
    assert closed_how is False and len(data) == 4 + 500
    assert data[:4] == bytes([0x82, 126]) + struct.pack("!H", 1000)


def test_fragmented_arrives_whole_after_the_gaps(start_faultline, write_scenario):
    text = "0123456789abcdef"
    server = ws_server(start_faultline, write_scenario, route("frag", ws_step(
        [{"fault": {"type": "fragmented", "text": text, "fragments": 4, "gapMs": 300}}, {"text": "after"}])))
    started = time.monotonic()
    with connect(ws_url(server, "/frag")) as ws:
        assert ws.recv(timeout=5) == text
        elapsed = time.monotonic() - started
        assert ws.recv(timeout=5) == "after"
    assert elapsed >= 0.9, f"three 300 ms gaps, whole message after {elapsed:.3f} s"
    (entry,) = ended(server, "frag")
    sent = [(f["opcode"], f["fin"], f["text"]) for f in entry["websocket"]["frames"] if f["direction"] == "out"]
    assert sent[:5] == [("text", False, "0123"), ("continuation", False, "4567"), ("continuation", False, "89ab"),
                        ("continuation", True, "cdef"), ("text", True, "after")]
    gaps = [b["atMs"] - a["atMs"] for a, b in zip(entry["websocket"]["frames"][:4], entry["websocket"]["frames"][1:4])]
    assert all(gap >= 290 for gap in gaps), gaps


def test_masked_frame_is_refused_with_1002(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("masked", ws_step([{"fault": "masked-frame"}])))
    with connect(ws_url(server, "/masked")) as ws:
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=5)
    assert closed.value.sent.code == 1002 and closed.value.sent.reason == "incorrect masking"
    assert closed.value.rcvd is None  # websockets fails the connection: it closes TCP without awaiting the echo
    (entry,) = ended(server, "masked")
    assert frames(entry) == [("out", "text", "masked, which a server must not do"),
                             ("in", "close", "1002 incorrect masking"), ("out", "close", "1002 ")]
    end = end_of(entry)
    assert (end["by"], end["code"], end["reason"], end["clean"]) == ("client", 1002, "incorrect masking", True)
    assert end["fault"] == "masked-frame" and entry["response"]["outcome"] == "closed-by-fault"


def test_masked_frame_end_names_the_fault(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("masked", ws_step([{"fault": "masked-frame"}])))
    with connect(ws_url(server, "/masked")) as ws:
        with pytest.raises(ConnectionClosedError):
            ws.recv(timeout=5)
    (entry,) = ended(server, "masked")
    assert end_of(entry)["fault"] == "masked-frame"
    assert entry["response"]["outcome"] == "closed-by-fault"


def test_silence_trips_the_client_keepalive_1011(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("quiet", ws_step([{"text": "hi"}, {"fault": "silence"}])))
    ws = open_session(ws_url(server, "/quiet"), ping_interval=0.2, ping_timeout=0.3, close_timeout=0.3)
    assert ws.recv(timeout=5) == "hi"
    started = time.monotonic()
    with pytest.raises(ConnectionClosedError) as closed:
        ws.recv(timeout=5)
    elapsed = time.monotonic() - started
    ws.close()
    assert closed.value.sent.code == 1011 and closed.value.sent.reason == "keepalive ping timeout"
    assert closed.value.rcvd is None
    assert 0.4 <= elapsed < 3, elapsed
    (entry,) = ended(server, "quiet")
    received = [op for _, op, _ in frames(entry, "in")]
    assert received[-1] == "close" and set(received[:-1]) == {"ping"}, received  # unanswered pings, then 1011
    assert [op for d, op, _ in frames(entry, "out")] == ["text"]  # no pong, no close
    assert end_of(entry) == {"by": "client", "code": None, "reason": "", "clean": False, "fault": "silence"}


@pytest.mark.parametrize("ignore", [True, False])
def test_ignore_pings(start_faultline, write_scenario, ignore):
    server = ws_server(start_faultline, write_scenario, route("pings", ws_step(
        [{"receive": "any"}, {"text": "still here"}], ignorePings=ignore)))
    ws = open_session(ws_url(server, "/pings"), ping_interval=None, close_timeout=1)
    pong = ws.ping(b"p1")
    answered = pong.wait(timeout=1)
    ws.send("go")
    assert ws.recv(timeout=5) == "still here"  # messages flow either way
    ws.close()
    assert answered is (not ignore)
    (entry,) = ended(server, "pings")
    ops = [(d, op) for d, op, _ in frames(entry)]
    assert ops[0] == ("in", "ping")
    assert (("out", "pong") in ops) is (not ignore)
    assert end_of(entry)["by"] == "client" and end_of(entry)["code"] == 1000


def test_a_message_over_the_clients_max_size_1009(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("big", ws_step([{"generated": {"size": 5000}}])))
    with connect(ws_url(server, "/big"), max_size=1000) as ws:
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=5)
    assert closed.value.sent.code == 1009
    assert closed.value.sent.reason == "frame with 5000 bytes exceeds limit of 1000 bytes"
    assert closed.value.rcvd is None  # failed: TCP closed without awaiting the server's echo
    (entry,) = ended(server, "big")
    first = entry["websocket"]["frames"][0]
    assert (first["direction"], first["opcode"], first["size"]) == ("out", "binary", 5000)
    end = end_of(entry)
    assert (end["by"], end["code"], end["clean"]) == ("client", 1009, True)


def test_receive_timeout_closes_1008(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("wait", ws_step(
        [{"receive": {"contains": "hello"}, "timeoutMs": 300}])))
    with connect(ws_url(server, "/wait")) as ws:
        ws.send("something else")
        started = time.monotonic()
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=5)
        assert time.monotonic() - started >= 0.25
    assert closed.value.rcvd.code == 1008
    assert closed.value.rcvd.reason == "no matching message for script step 0"
    (entry,) = ended(server, "wait")
    assert end_of(entry) == {"by": "server", "code": 1008, "reason": "no matching message for script step 0",
                             "clean": True, "fault": None}


# -- 4. upgrade faults and non-101 answers -----------------------------------------------------------------------


def test_wrong_accept_is_refused(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("wa", ws_step([{"text": "x"}],
                                                                           upgradeFault="wrong-accept")))
    with pytest.raises(InvalidHeaderValue) as refused:
        connect(ws_url(server, "/wa"), open_timeout=5)
    assert str(refused.value).startswith("invalid Sec-WebSocket-Accept header: ")
    (entry,) = ended(server, "wa")
    assert entry["response"]["status"] == 101
    # websockets drops TCP without a close frame when the handshake fails.
    assert end_of(entry) == {"by": "client", "code": None, "reason": "", "clean": False, "fault": None}
    assert entry["response"]["outcome"] == "client-closed"


def test_unrequested_subprotocol_is_refused(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("up", ws_step(
        [], subprotocols=["v1"], upgradeFault="unrequested-subprotocol")))
    with pytest.raises(NegotiationError) as offered:
        connect(ws_url(server, "/up"), subprotocols=["v1"], open_timeout=5)
    assert str(offered.value) == "unsupported subprotocol: faultline-unrequested"
    with pytest.raises(websockets.exceptions.InvalidHandshake) as none_offered:
        connect(ws_url(server, "/up"), open_timeout=5)
    assert str(none_offered.value) == "no subprotocols supported"
    entries = ended(server, "up", count=2)
    assert [e["websocket"]["subprotocol"] for e in entries] == ["faultline-unrequested"] * 2


def test_delay_before_the_101(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("slow", {"delayMs": 500, **ws_step([{"text": "late"}])}))
    started = time.monotonic()
    with connect(ws_url(server, "/slow"), open_timeout=5) as ws:
        opened = time.monotonic() - started
        assert ws.recv(timeout=5) == "late"
    assert 0.5 <= opened < 3, opened
    (entry,) = ended(server, "slow")
    assert entry["websocket"]["frames"][0]["atMs"] >= 500


@pytest.mark.parametrize("status,headers", [(401, {"WWW-Authenticate": "Bearer"}), (403, {}),
                                            (503, {"Retry-After": "7"})])
def test_non_101_answers_are_invalid_status(start_faultline, write_scenario, status, headers):
    server = ws_server(start_faultline, write_scenario, route(
        "gate", {"status": status, "headers": headers, "text": "no"}, ws_step()))
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(server, "/gate"), open_timeout=5)
    response = refused.value.response
    assert response.status_code == status
    assert str(refused.value) == f"server rejected WebSocket connection: HTTP {status}"
    for name, value in headers.items():
        assert response.headers[name] == value
    (entry,) = server.wait_for(1, route="gate")
    assert entry["response"]["status"] == status and entry["protocol"] == "http/1.1"


# -- 5. protocol errors from a raw client ------------------------------------------------------------------------


@pytest.mark.parametrize("case,data,code", [
    ("unmasked", frame(0x1, b"hello", mask=None), 1002),
    ("invalid-utf8", frame(0x1, b"\xc3\x28 not utf-8"), 1007),
    ("oversized", frame(0x2, b"x" * 101), 1009),
    ("oversized-in-fragments", frame(0x1, b"x" * 60, fin=False) + frame(0x0, b"y" * 60), 1009),
    ("reserved-bit", bytes([0xC1]) + frame(0x1, b"hi")[1:], 1002),
    ("unknown-opcode", frame(0x3, b"?"), 1002),
])
def test_protocol_errors_close_with_the_rfc_code(start_faultline, write_scenario, raw_connect, case, data, code):
    server = ws_server(start_faultline, write_scenario,
                       route("proto", ws_step([{"echo": True}], maxMessageBytes=100)),
                       route("ok", ws_step([{"text": "fine"}])))
    raw = RawWebSocket(raw_connect, server, "/proto")
    raw.send(frame(0x1, b"valid first"))
    assert raw.read_frames(1) == [(True, 0x1, b"valid first")]
    raw.send(data)
    got, closed_how = raw.read_until_close()
    assert closed_how is True, "a FIN after the close frame"
    assert len(got) == 1 and got[0][1] == 0x8, got
    assert close_code(got[0][2])[0] == code
    (entry,) = ended(server, "proto")
    end = end_of(entry)
    assert (end["by"], end["code"], end["clean"], end["fault"]) == ("server", code, False, None)
    assert end["reason"] == close_code(got[0][2])[1]
    # The server keeps serving.
    with connect(ws_url(server, "/ok")) as ws:
        assert ws.recv(timeout=5) == "fine"


def test_a_raw_close_handshake_and_pong(start_faultline, write_scenario, raw_connect):
    server = ws_server(start_faultline, write_scenario, route("raw", ws_step([])))
    raw = RawWebSocket(raw_connect, server, "/raw")
    raw.send(frame(0x9, b"are you there"))
    assert raw.read_frames(1) == [(True, 0xA, b"are you there")]
    raw.send(frame(0x8, struct.pack("!H", 4000) + b"done"))
    got, closed_how = raw.read_until_close()
    assert got == [(True, 0x8, struct.pack("!H", 4000))] and closed_how is True
    (entry,) = ended(server, "raw")
    assert end_of(entry) == {"by": "client", "code": 4000, "reason": "done", "clean": True, "fault": None}


# -- 6. the client ends it -----------------------------------------------------------------------------------------


def test_client_close_1000(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("open", ws_step([{"text": "hello"}])))
    ws = open_session(ws_url(server, "/open"))
    assert ws.recv(timeout=5) == "hello"
    ws.close(1000, "done here")
    with pytest.raises(ConnectionClosedOK) as closed:
        ws.recv(timeout=1)
    assert closed.value.rcvd.code == 1000 and closed.value.sent.code == 1000
    assert closed.value.rcvd_then_sent is False  # we closed first
    (entry,) = ended(server, "open")
    assert end_of(entry) == {"by": "client", "code": 1000, "reason": "done here", "clean": True, "fault": None}
    assert entry["response"]["outcome"] == "completed"
    assert frames(entry)[-2:] == [("in", "close", "1000 done here"), ("out", "close", "1000 ")]


def test_client_drops_tcp(start_faultline, write_scenario, raw_connect):
    server = ws_server(start_faultline, write_scenario, route("open", ws_step([{"text": "hello"}])))
    raw = RawWebSocket(raw_connect, server, "/open")
    assert raw.read_frames(1) == [(True, 0x1, b"hello")]
    raw.conn.close()
    (entry,) = ended(server, "open")
    assert end_of(entry) == {"by": "client", "code": None, "reason": "", "clean": False, "fault": None}
    assert entry["response"]["outcome"] == "client-closed"


# -- 7. node's ws ----------------------------------------------------------------------------------------------------


def test_node_ws_session_with_server_close_1012(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("n", ws_step(
        [{"text": "one"}, {"receive": {"equals": "ack"}}, {"base64": base64.b64encode(b"\x00\x01").decode()},
         {"close": {"code": 1012, "reason": "restart"}}], subprotocols=["chat"])))
    events = node_events(ws_url(server, "/n"), protocols=["chat"], reply="ack")
    for event in events:
        event.pop("ms", None)
    assert events == [{"ev": "open", "protocol": "chat"},
                      {"ev": "message", "text": "one", "binary": False},
                      {"ev": "message", "text": "\x00\x01", "binary": True},
                      {"ev": "close", "code": 1012, "reason": "restart"}]
    (entry,) = ended(server, "n")
    assert end_of(entry) == {"by": "server", "code": 1012, "reason": "restart", "clean": True, "fault": None}
    assert frames(entry, "in")[0] == ("in", "text", "ack")


def test_node_ws_drop_is_1006(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("d", ws_step([{"text": "a"}, {"fault": "drop"}])))
    events = node_events(ws_url(server, "/d"))
    for event in events:
        event.pop("ms", None)
    # ws reports a reset as a plain 1006 close, without an error event.
    assert events == [{"ev": "open", "protocol": ""}, {"ev": "message", "text": "a", "binary": False},
                      {"ev": "close", "code": 1006, "reason": ""}]
    ended(server, "d")


def test_node_ws_wrong_accept(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("w", ws_step([], upgradeFault="wrong-accept")))
    events = node_events(ws_url(server, "/w"))
    for event in events:
        event.pop("ms", None)
    assert events == [{"ev": "error", "message": "Invalid Sec-WebSocket-Accept header", "code": None},
                      {"ev": "close", "code": 1006, "reason": ""}]
    ended(server, "w")


def test_node_ws_masked_frame_and_unrequested_subprotocol(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario,
                       route("m", ws_step([{"fault": "masked-frame"}])),
                       route("u", ws_step([], subprotocols=["v1"], upgradeFault="unrequested-subprotocol")))
    masked = node_events(ws_url(server, "/m"))
    for event in masked:
        event.pop("ms", None)
    assert masked == [{"ev": "open", "protocol": ""},
                      {"ev": "error", "message": "Invalid WebSocket frame: MASK must be clear",
                       "code": "WS_ERR_UNEXPECTED_MASK"},
                      {"ev": "close", "code": 1006, "reason": ""}]  # ws sent 1002 but reports 1006 locally
    (entry,) = ended(server, "m")
    assert frames(entry, "in") == [("in", "close", "1002 ")]
    assert end_of(entry)["code"] == 1002
    unrequested = node_events(ws_url(server, "/u"), protocols=["v1"])
    for event in unrequested:
        event.pop("ms", None)
    assert unrequested == [{"ev": "error", "message": "Server sent an invalid subprotocol", "code": None},
                           {"ev": "close", "code": 1006, "reason": ""}]


# -- 8. wss -------------------------------------------------------------------------------------------------------------


def test_wss_session(start_faultline, write_scenario, tmp_path):
    folder = tmp_path / "tls"
    server = ws_server(start_faultline, write_scenario, CHAT, args=["--tls-port", "0", "--tls-dir", folder])
    context = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    url = f"wss://localhost:{server.tls_port}/chat?user=tls"
    with connect(url, ssl=context, subprotocols=["v1"]) as ws:
        assert ws.subprotocol == "v1"
        assert ws.recv(timeout=5) == "hi tls"
        ws.send("sub")
        assert [ws.recv(timeout=5) for _ in range(3)] == ["tick 1", "tick 2", "tick 3"]
        ws.send("last")
        assert ws.recv(timeout=5) == "last"
        with pytest.raises(ConnectionClosedOK) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd.code == 1001
    (entry,) = ended(server, "chat")
    assert entry["tls"] is not None and entry["tls"]["version"].startswith("TLS")
    assert entry["protocol"] == "websocket"
    assert end_of(entry) == {"by": "server", "code": 1001, "reason": "bye", "clean": True, "fault": None}
    # An untrusting client fails the TLS handshake before any upgrade.
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(url, ssl=ssl.create_default_context(), open_timeout=5)


# -- 9. refusals ----------------------------------------------------------------------------------------------------


def test_refusals(start_faultline, write_scenario, raw_connect):
    server = ws_server(start_faultline, write_scenario, route("live", ws_step([{"text": "x"}])))
    plain = requests.get(f"{server.url}/live", timeout=5)
    assert plain.status_code == 426
    assert plain.headers["Upgrade"] == "websocket"
    assert plain.headers["Content-Type"] == "application/problem+json"
    upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": KEY}
    version = requests.get(f"{server.url}/live", headers={**upgrade, "Sec-WebSocket-Version": "8"}, timeout=5)
    assert version.status_code == 426 and version.headers["Sec-WebSocket-Version"] == "13"
    for key in ["short", base64.b64encode(b"x" * 15).decode(), ""]:
        bad = requests.get(f"{server.url}/live", headers={**upgrade, "Sec-WebSocket-Version": "13",
                                                          "Sec-WebSocket-Key": key}, timeout=5)
        assert bad.status_code == 400, key
    post = requests.post(f"{server.url}/live", headers={**upgrade, "Sec-WebSocket-Version": "13"}, timeout=5)
    assert post.status_code == 400
    # After a refusal the connection still speaks HTTP/1.1 (the parser resumed); then a real upgrade works on it.
    conn = raw_connect(server.port)
    conn.send(f"GET /live HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 8\r\n\r\n"
              f"GET /live HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n")
    refused, switched = conn.read_responses(2)
    assert refused.status == 426 and switched.status == 101
    assert switched.header("Sec-WebSocket-Accept") == accept_for(KEY)
    conn.read_until(lambda data: len(parse_frames(data)[0]) >= 1)
    assert parse_frames(conn.buffer)[0] == [(True, 0x1, b"x")]
    statuses = [e["response"]["status"] for e in server.wait_for(8, route="live")]
    assert statuses == [426, 426, 400, 400, 400, 400, 426, 101]


def test_426_reason_phrase(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("live", ws_step()))
    plain = requests.get(f"{server.url}/live", timeout=5)
    assert plain.status_code == 426
    assert (plain.reason, plain.json()["title"]) == ("Upgrade Required", "Upgrade Required")


def test_http2_answers_http_1_1_required(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario, route("live", ws_step([{"text": "x"}])))
    done = subprocess.run(["curl", "-sS", "-v", "--max-time", "2", "--http2-prior-knowledge",
                           "-H", "Upgrade: websocket", "-H", "Connection: Upgrade", "-H", f"Sec-WebSocket-Key: {KEY}",
                           "-H", "Sec-WebSocket-Version: 13", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                           f"{server.url}/live"], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    # curl 7.88 sees RST_STREAM HTTP_1_1_REQUIRED and retries on a new HTTP/1.1 connection, with the upgrade
    # fields it was given: that one gets the 101 and the session's first frame, then waits (curl does not speak
    # WebSocket here) until --max-time, exit 28.
    assert "HTTP/2 stream 1 was not closed cleanly: HTTP_1_1_REQUIRED (err 13)" in done.stderr
    assert "Downgrades to HTTP/1.1" in done.stderr
    assert "> GET /live HTTP/1.1" in done.stderr and "< HTTP/1.1 101 Switching Protocols" in done.stderr
    assert done.returncode == 28, done.stderr
    assert done.stdout == "101 1.1"
    first, second = server.wait_for(2, route="live")
    assert first["httpVersion"] == "HTTP/2" and first.get("websocket") is None
    assert (first["response"]["status"], first["response"]["outcome"]) == (None, "stream-reset")
    assert (second["httpVersion"], second["protocol"], second["response"]["status"]) == ("HTTP/1.1", "websocket", 101)
    assert frames(second)[0] == ("out", "text", "x")


# -- 10. load ------------------------------------------------------------------------------------------------------


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def fd_limit(pid):
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no Max open files")


def test_load_concurrent_sessions(start_faultline, write_scenario):
    sessions = int(os.environ.get("FAULTLINE_WS_LOAD_SESSIONS", "1000"))
    messages = int(os.environ.get("FAULTLINE_WS_LOAD_MESSAGES", "100"))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2 * sessions + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * sessions + 100), hard))
    server = ws_server(start_faultline, write_scenario, route("tick", ws_step(
        [{"text": "tick {{n}}", "everyMs": 100, "times": messages}])))
    assert fd_limit(server.proc.pid) >= sessions + 100, "the server's own fd limit"
    idle = rss_kib(server.proc.pid)
    peak = [idle]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.05):
            peak[0] = max(peak[0], rss_kib(server.proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    expected = [f"tick {n}" for n in range(1, messages + 1)]

    async def one(index):
        async with websockets.asyncio.client.connect(ws_url(server, "/tick"), open_timeout=30, ping_interval=None,
                                                     compression=None, close_timeout=5) as ws:
            got = []
            while len(got) < messages:
                got.append(await asyncio.wait_for(ws.recv(), timeout=10))
            return got

    async def run_all():
        return await asyncio.gather(*(one(i) for i in range(sessions)), return_exceptions=True)

    sampler.start()
    started = time.monotonic()
    try:
        results = asyncio.run(run_all())
    finally:
        stop.set()
        sampler.join()
    seconds = time.monotonic() - started
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, f"{len(failures)} sessions failed, e.g. {failures[:3]!r}"
    received = sum(len(r) for r in results)
    in_order = sum(r == expected for r in results)
    print(f"\nwebsocket load: {sessions} sessions x {messages} messages: {received} received in {seconds:.2f} s; "
          f"server RSS idle {idle / 1024:.1f} MiB, peak {peak[0] / 1024:.1f} MiB "
          f"(+{(peak[0] - idle) / 1024:.1f} MiB)")
    assert received == sessions * messages
    assert in_order == sessions
    assert peak[0] < 200 * 1024, f"peak RSS {peak[0] / 1024:.1f} MiB"
    ended(server, "tick", count=sessions, timeout_ms=30000)
    entries = server.journal(route="tick", limit=sessions)
    assert len(entries) == sessions
    # Each session: the messages, then the echo of the client's close 1000.
    counts = {(e["websocket"]["framesOut"], e["websocket"]["framesIn"]) for e in entries}
    assert counts == {(messages + 1, 1)}, counts
    assert {(end_of(e)["by"], end_of(e)["code"], end_of(e)["clean"]) for e in entries} == {("client", 1000, True)}


NODE_FAULTS = """
const results = {};
function run(name, options, after) {
  return new Promise(resolve => {
    const t0 = Date.now(), events = [];
    const ws = new WS(BASE + '/' + name, options);
    ws.on('open', () => { events.push(['open']); if (after) after(ws, events); });
    ws.on('message', m => events.push(['message', m.toString().slice(0, 40), Date.now() - t0]));
    ws.on('pong', () => events.push(['pong']));
    ws.on('error', e => events.push(['error', e.message, e.code || null]));
    ws.on('close', (code, reason) => { events.push(['close', code, reason.toString(), Date.now() - t0]); resolve(); });
    results[name] = events;
  });
}
Promise.all([
  run('dropfin', {}),
  run('cko', {}),
  run('frag', {}),
  run('big', {maxPayload: 1000}),
  // ws has no keepalive: a ping goes unanswered; after 1 s the test gives up with terminate().
  run('quiet', {}, (ws, events) => { ws.ping('hb'); setTimeout(() => { events.push(['terminate']); ws.terminate(); }, 1000); }),
  // ws's close waits 30 s for the server's close frame; after 1 s without one the test terminates.
  run('trunc', {}, (ws, events) => setTimeout(() => { ws.close(1000); setTimeout(() => {
    events.push(['terminate']); ws.terminate(); }, 1000); }, 500)),
]).then(() => out(results));
"""


def test_node_ws_faults(start_faultline, write_scenario):
    server = ws_server(start_faultline, write_scenario,
                       route("dropfin", ws_step([{"fault": "drop-fin"}])),
                       route("cko", ws_step([{"fault": {"type": "close-keep-open", "code": 1001, "reason": "x"}}])),
                       route("frag", ws_step([{"fault": {"type": "fragmented", "text": "0123456789abcdef",
                                                         "fragments": 4, "gapMs": 300}},
                                             {"close": {"code": 1000}}])),
                       route("big", ws_step([{"generated": {"size": 5000}}])),
                       route("quiet", ws_step([{"fault": "silence"}])),
                       route("trunc", ws_step([{"fault": {"type": "truncated-frame", "bytes": 1000}}])))
    (results,) = node(f"const BASE = {json.dumps(ws_url(server, ''))};" + NODE_FAULTS)
    strip = {name: [event[:3] if event[0] == "close" else event[:2] if event[0] == "message" else event
                    for event in events]
             for name, events in results.items()}
    assert strip == {
        "dropfin": [["open"], ["close", 1006, ""]],
        # ws answers the close frame and ends the socket itself: a clean 1001 for node.
        "cko": [["open"], ["close", 1001, "x"]],
        "frag": [["open"], ["message", "0123456789abcdef"], ["close", 1000, ""]],
        "big": [["open"], ["error", "Max payload size exceeded", "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH"],
                ["close", 1006, ""]],
        "quiet": [["open"], ["terminate"], ["close", 1006, ""]],
        "trunc": [["open"], ["terminate"], ["close", 1006, ""]],
    }
    assert results["frag"][1][2] >= 850, "the whole message after three 300 ms gaps"
    ends = {name: end_of(ended(server, name)[0]) for name in ["dropfin", "frag", "quiet", "trunc"]}
    assert ends == {
        "dropfin": {"by": "server", "code": None, "reason": "", "clean": False, "fault": "drop-fin"},
        "frag": {"by": "server", "code": 1000, "reason": "", "clean": True, "fault": "fragmented"},
        "quiet": {"by": "client", "code": None, "reason": "", "clean": False, "fault": "silence"},
        "trunc": {"by": "client", "code": None, "reason": "", "clean": False, "fault": "truncated-frame"},
    }
    (cko,) = ended(server, "cko")
    assert end_of(cko) == {"by": "client", "code": None, "reason": "", "clean": False, "fault": "close-keep-open"}
    (big,) = ended(server, "big")
    assert end_of(big)["by"] == "client" and end_of(big)["code"] == 1009


# -- verdicts with real clients ----------------------------------------------------------------------------------


def verdict(server, rule):
    report = server.admin_json("GET", "report")
    (found,) = [v for v in report["verdicts"] if v["rule"] == rule]
    return found


def reconnect_loop(url, waits, first_message=None, ping_interval=None):
    """A client that reconnects after every drop, waiting `waits[i]` seconds before reconnect i + 1; each session
    sends `first_message` (if any) and reads until the server drops it."""
    for index in range(len(waits) + 1):
        ws = open_session(url, ping_interval=ping_interval, open_timeout=5)
        try:
            if first_message:
                ws.send(first_message)
            with pytest.raises(ConnectionClosedError):
                while True:
                    ws.recv(timeout=5)
        finally:
            with contextlib.suppress(Exception):
                ws.close()
        if index < len(waits):
            time.sleep(waits[index])  # the client's own backoff: what the verdict judges


def test_reconnect_backoff_and_resubscription_judge_real_reconnect_loops(start_faultline, write_scenario):
    """Every session is dropped (RST) after one message: a client that reconnects at once fails reconnectBackoff
    with the attempts as evidence; one that backs off with jitter passes. The careful one also resubscribes first;
    the naive one does not, and `resubscribes` fails it."""
    # The server reads the client's first message before it drops the session, so that message is always sent.
    scenario = {"name": "drops", "routes": [route("live", ws_step([{"receive": "any", "timeoutMs": 5000},
                                                                  {"text": "hello"}, {"fault": "drop"}]))],
                "expect": {"reconnectBackoff": {"jitter": True}, "resubscribes": [{"contains": "subscribe"}]}}
    naive = start_faultline(write_scenario(scenario, name="naive.json"))
    reconnect_loop(ws_url(naive, "/live"), [0.0] * 6, first_message="hello?")
    ended(naive, "live", count=7)
    backoff = verdict(naive, "reconnectBackoff")
    assert backoff["outcome"] == "fail" and "do not back off" in backoff["explanation"], backoff
    assert len(backoff["evidence"]) == 7, backoff  # seven attempts, each journal number once
    assert verdict(naive, "resubscribes")["outcome"] == "fail"

    careful = start_faultline(write_scenario(scenario, name="careful.json"))
    # Exponential with jitter: base 40 ms, ×2 per reconnect, ±20 %.
    waits = [0.04 * 2 ** i * (0.8 + 0.4 * ((i * 7) % 5) / 4) for i in range(6)]
    reconnect_loop(ws_url(careful, "/live"), waits, first_message="subscribe news")
    ended(careful, "live", count=7)
    backoff = verdict(careful, "reconnectBackoff")
    assert backoff["outcome"] == "pass", backoff
    assert verdict(careful, "resubscribes")["outcome"] == "pass"

    # Plain doubling backs off but without jitter: clients dropped together would come back together.
    plain = start_faultline(write_scenario(scenario, name="plain.json"))
    # Base 80 ms: a few ms of reconnect time on top of each wait scatter the logs by about 0.01, well under 0.05.
    reconnect_loop(ws_url(plain, "/live"), [0.08 * 2 ** i for i in range(5)], first_message="subscribe news")
    ended(plain, "live", count=6)
    backoff = verdict(plain, "reconnectBackoff")
    assert backoff["outcome"] == "fail" and backoff["explanation"].startswith("no jitter"), backoff


def test_heartbeat_judges_the_clients_pings(start_faultline, write_scenario):
    """heartbeatMs 300 on a session that lasts about a second: websockets pinging every 100 ms passes; with its
    keepalive off it fails, the explanation naming the gap."""
    scenario = {"name": "beat", "routes": [route("live", ws_step([{"waitMs": 1000}, {"close": {"code": 1000}}]))],
                "expect": {"heartbeatMs": 300}}
    pinging = start_faultline(write_scenario(scenario, name="pinging.json"))
    with connect(ws_url(pinging, "/live"), ping_interval=0.1) as ws:
        with pytest.raises(ConnectionClosedOK):
            while True:
                ws.recv(timeout=5)
    ended(pinging, "live")
    assert verdict(pinging, "heartbeat")["outcome"] == "pass"

    quiet = start_faultline(write_scenario(scenario, name="quiet.json"))
    with connect(ws_url(quiet, "/live"), ping_interval=None) as ws:
        with pytest.raises(ConnectionClosedOK):
            while True:
                ws.recv(timeout=5)
    ended(quiet, "live")
    result = verdict(quiet, "heartbeat")
    assert result["outcome"] == "fail" and "without a ping from the client" in result["explanation"], result


def test_honors_retry_after_on_upgrade_judges_the_wait_after_a_refusal(start_faultline, write_scenario):
    """The first upgrade is refused with 503 and Retry-After: 1; a client that comes back at once fails the rule,
    one that waits the second passes."""
    scenario = {"name": "refused", "routes": [route("live", {"status": 503, "headers": {"Retry-After": "1"}},
                                                    ws_step([{"close": {"code": 1000}}]))],
                "expect": {"honorsRetryAfterOnUpgrade": True}}
    for name, wait, outcome in [("eager", 0.0, "fail"), ("patient", 1.05, "pass")]:
        server = start_faultline(write_scenario(scenario, name=f"{name}.json"))
        with pytest.raises(InvalidStatus) as refused:
            with connect(ws_url(server, "/live")):
                pass
        assert refused.value.response.status_code == 503
        time.sleep(wait)  # the client's own wait: what the rule judges
        with connect(ws_url(server, "/live")) as ws:
            with pytest.raises(ConnectionClosedOK):
                ws.recv(timeout=5)
        ended(server, "live", count=2)
        result = verdict(server, "honorsRetryAfterOnUpgrade")
        assert result["outcome"] == outcome, (name, result)
