"""Every request that reaches the server is journaled exactly once, with its outcome — for every codec.

The situations of the issue, each on every codec where it applies (HTTP/1.1 plain, HTTPS, h2c, h2 over TLS, a
WebSocket upgrade over ws:// and wss://): a request cut by a network drop (its response delayed; its body half
sent; a WebSocket session in progress), refused by REFUSED_STREAM, arriving on a connection being closed (the
connection policy's `maxRequests`; pipelined behind a response that closes), above a GOAWAY (sent before it and
after it), during a TLS alert (the alert itself; a request sent in the client's Finished flight into a refused
handshake; a client that refuses the server's certificate), inside a WebSocket upgrade that failed (non-101 answers,
a client that leaves before the 101). And one seeded random walk over codecs and situations.

How each test counts: the client keeps a ledger — a request is counted once its bytes were written (`sendall`
returned; for HTTP/2, its HEADERS), every request carries a unique tag in its query string — and the journal must
then hold exactly one entry per tag, no entry pending, and counters that match the ledger: `totalRecorded` = requests
written + the connection entries and network-change entries the test expects, `perRoute` = the requests a route
took (malformed and never-answered ones have no route, docs/admin-api.md). "Settled" is a condition, not a sleep:
the server's open connections (`GET /health` → `connections`) are back to the admin call's own, so every client
connection has been torn down and journaled everything it would journal.

What this file found, fixed with it: an HTTP/1.1 request whose body a network drop cut was not journaled at all
(HTTP1Connection.teardown now journals what the parser holds); requests pipelined behind a response that closed the
connection were dropped, and a FIN then journaled them as one malformed request (now each is `connection-closing`);
a WebSocket session cut by a drop was `completed` (now `reset-sent` or `closed-by-fault`); HTTP/2 streams a client
began after the server's GOAWAY were read and never journaled (nghttp2 ignores them without a callback; its
begin-frame callback now journals each, `not-processed`)."""

import asyncio
import collections
import itertools
import os
import random
import re
import socket
import ssl
import struct
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import pytest
import websockets.asyncio.client
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from conftest import RawConnection

KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 §1.3's sample key
SETTLE_TIMEOUT_S = 5.0


def route(route_id, *responses, method=None):
    match = {"path": f"/{route_id}"}
    if method:
        match["method"] = method
    return {"id": route_id, "match": match, "responses": list(responses)}


MAIN = {
    "name": "jo",
    "routes": [
        route("ok", {"status": 200, "text": "ok"}),
        route("slow", {"status": 200, "delayMs": 10000, "text": "late"}),
        route("upload", {"status": 200, "text": "got"}, method="POST"),
        route("closes", {"status": 200, "text": "bye", "close": True}),
        route("empty", {"status": 200, "text": "x", "fault": "empty-reply"}),
        route("truncated", {"status": 200, "text": "0123456789", "fault": "truncate-body"}),
        route("reset", {"status": 200, "text": "x", "fault": "reset"}),
        route("hang", {"status": 200, "fault": "hang"}),
        route("refused", {"status": 201, "text": "x", "fault": {"type": "rst-stream", "code": "REFUSED_STREAM"}}),
        route("goaway1", {"status": 200, "text": "x", "fault": {"type": "goaway", "lastStreamId": 1}}),
        route("goaway-prev", {"status": 200, "text": "x", "fault": {"type": "goaway", "lastStreamId": "previous"}}),
        route("live", {"websocket": {"script": [{"echo": True}]}}),
        route("busy", {"status": 503, "headers": {"Retry-After": "1"}}),
        route("late", {"websocket": {"script": [{"echo": True}]}, "delayMs": 10000}),
    ],
}
# A scenario's connection policy applies to its own routes only (Engine.decide).
POLICY = {"name": "policy", "connections": {"maxRequests": 2}, "routes": [route("capped", {"status": 200, "text": "c"})]}
# TLS sections claimed by server name: the main scenario (no tls section) decides every other handshake.
ALERT = {"name": "alert", "tls": {"serverNames": ["alert.localhost"],
                                  "handshakes": [{"fault": {"type": "alert", "alert": "handshake_failure"}}]},
         "routes": [route("alert-only", {"status": 200})]}
MTLS = {"name": "mtls", "tls": {"serverNames": ["valid.localhost"], "handshakes": [{"clientCertificate": "required"}]},
        "routes": [route("mtls-only", {"status": 200})]}


@pytest.fixture
def server(start_faultline, write_scenario, tmp_path):
    paths = [write_scenario(doc, name=f"{doc['name']}.json") for doc in (MAIN, POLICY, ALERT, MTLS)]
    folder = tmp_path / "tls"
    started = start_faultline(*paths, args=["--tls-port", "0", "--tls-dir", folder])
    started.ca = folder / "ca.pem"
    return started


_tags = itertools.count(1)


def tag():
    return f"t{next(_tags)}"


# -- the client's ledger and the journal's side -------------------------------------------------------------------

ROUTED_IF_ANSWERED = object()  # a request journaled with its route unless it was never answered


class Ledger:
    """What the client did: requests written (tag, route the request is for, or None when it can have none),
    connection entries and network-change entries it expects."""

    def __init__(self):
        self.requests = []
        # HTTP/2 streams begun after the server's GOAWAY: nghttp2 hands none of their fields up, so their entries
        # are found by stream id (their requestLine names it), not by tag.
        self.ignored_streams = []
        self.connections = 0
        self.network = 0

    def wrote(self, tag, route_id):
        self.requests.append((tag, route_id))
        return tag


def entries_of(entries, t):
    """The request entries of tag `t`: by target, or by the request line a malformed entry keeps."""
    needle = f"t={t}"
    found = []
    for e in entries:
        if e["kind"] != "request":
            continue
        text = (e.get("target") or "") + " " + (e.get("requestLine") or "")
        if needle in re.split(r"[?&\s]", text):
            found.append(e)
    return found


def settle(server, timeout=SETTLE_TIMEOUT_S):
    """Waits until the server holds no connection but the admin call's own: every client connection is torn down."""
    deadline = time.monotonic() + timeout
    while True:
        connections = server.admin_json("GET", "health")["connections"]
        if connections <= 1:
            return
        assert time.monotonic() < deadline, f"the server still holds {connections - 1} client connection(s)"
        time.sleep(0.01)


def check(server, ledger):
    """Settles, then: one entry per tag, none pending, counters as the ledger says. Returns {tag: entry}."""
    settle(server)
    answer = server.admin_json("GET", "requests")
    entries, counters = answer["requests"], answer["counters"]
    by_tag = {}
    for t, _ in ledger.requests:
        found = entries_of(entries, t)
        assert len(found) == 1, f"request {t}: {len(found)} entries, expected exactly one: {found}\njournal: {entries}"
        by_tag[t] = found[0]
    for stream in ledger.ignored_streams:
        found = [e for e in entries if e["kind"] == "request" and e["stream"] == stream and e["target"] is None]
        assert len(found) == 1, f"stream {stream}: {len(found)} entries, expected exactly one: {found}\njournal: {entries}"
        by_tag[("stream", stream)] = found[0]
    pending = [e for e in entries if e["response"]["outcome"] == "pending"]
    assert pending == [], f"entries still pending after the server settled: {pending}"
    kinds = collections.Counter(e["kind"] for e in entries)
    assert kinds["request"] == len(ledger.requests) + len(ledger.ignored_streams), \
        f"request entries {kinds}, ledger {ledger.requests} + streams {ledger.ignored_streams}: {entries}"
    assert kinds["connection"] == ledger.connections, f"connection entries: {entries}"
    assert kinds["network"] == ledger.network, f"network entries: {entries}"
    expected_total = len(ledger.requests) + len(ledger.ignored_streams) + ledger.connections + ledger.network
    assert counters["totalRecorded"] == expected_total == len(entries), (counters, expected_total, entries)
    per_route = collections.Counter()
    for t, route_id in ledger.requests:
        if route_id is ROUTED_IF_ANSWERED:
            entry = by_tag[t]
            route_id = None if entry["response"]["outcome"] == "connection-closing" else entry["route"]
        if route_id is not None:
            per_route[route_id] += 1
    assert counters["perRoute"] == dict(per_route), (counters["perRoute"], dict(per_route), entries)
    return by_tag


def drop(server, ledger, action="drop"):
    answer = server.admin_json("POST", "network", json={"connections": action})
    assert answer["change"]["connections"] == action
    ledger.network += 1


# -- clients --------------------------------------------------------------------------------------------------------

HTTP1_CODECS = ["http/1.1", "https"]
H2_CODECS = ["h2c", "h2"]


def tls_context(server, alpn):
    context = ssl.create_default_context(cafile=str(server.ca))
    context.set_alpn_protocols(alpn)
    return context


class Wire(RawConnection):
    """RawConnection (byte-exact, every read with a deadline) over a plain or TLS socket."""

    def __init__(self, sock, timeout=5.0):
        self.sock = sock
        self.sock.settimeout(timeout)
        self.buffer = b""
        self.closed_by_peer = False


def open_http1(server, codec, server_name="localhost"):
    raw = socket.create_connection(("127.0.0.1", server.tls_port if codec == "https" else server.port), timeout=5)
    if codec == "https":
        raw = tls_context(server, ["http/1.1"]).wrap_socket(raw, server_hostname=server_name)
    return Wire(raw)


def get(path, t, extra=""):
    return f"GET {path}?t={t} HTTP/1.1\r\nHost: x\r\n{extra}\r\n"


class H2Client:
    """The `h2` package over a plain (h2c, prior knowledge) or TLS (ALPN h2) socket."""

    def __init__(self, server, codec, server_name="localhost"):
        raw = socket.create_connection(("127.0.0.1", server.tls_port if codec == "h2" else server.port), timeout=5)
        if codec == "h2":
            raw = tls_context(server, ["h2"]).wrap_socket(raw, server_hostname=server_name)
            assert raw.selected_alpn_protocol() == "h2"
        self.sock = raw
        self.scheme = "https" if codec == "h2" else "http"
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.terminated = False
        self.flush()

    def headers(self, stream, path, t, method="GET", end_stream=True):
        self.conn.send_headers(stream, self.fields(path, t, method), end_stream=end_stream)

    def fields(self, path, t, method="GET"):
        return [(":method", method), (":path", f"{path}?t={t}"), (":scheme", self.scheme), (":authority", "localhost")]

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def events(self, until, timeout=5.0):
        """Reads until `until(events)` holds; fails at the deadline. "eof" / "reset" end the list."""
        seen = []
        deadline = time.monotonic() + timeout
        while not until(seen):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"not within {timeout} s; saw {seen}"
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                seen.append("reset")
                return seen
            if not data:
                seen.append("eof")
                return seen
            if self.terminated:
                continue  # after its GOAWAY the `h2` package takes no more frames: read to the close, unparsed
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                # Frames behind the server's GOAWAY in the same read (a stream it still answers): the `h2` package
                # refuses them once closed. The GOAWAY's event is lost with them; "terminated" stands for it.
                assert self.conn.state_machine.state == h2.connection.ConnectionState.CLOSED, seen
                self.terminated = True
                seen.append("terminated")
                continue
            for event in events:
                seen.append(event)
                self.terminated = self.terminated or isinstance(event, h2.events.ConnectionTerminated)
            try:
                self.flush()
            except OSError:
                seen.append("reset")
                return seen
        return seen

    def barrier(self):
        """A PING and its ACK: every frame sent before it has been read by the server."""
        self.conn.ping(b"barrier!")
        self.flush()
        self.events(lambda seen: any(isinstance(e, h2.events.PingAckReceived) for e in seen) or "eof" in seen
                    or "reset" in seen)

    def close(self):
        self.sock.close()


def of_type(kind):
    return lambda seen: any(isinstance(e, kind) for e in seen) or "eof" in seen or "reset" in seen


def raw_headers_frame(stream, fields):
    """A HEADERS frame (END_STREAM | END_HEADERS) whose block is literal fields without indexing: it leaves the
    HPACK tables alone, so it can follow frames the `h2` package encoded (which refuses to send after a GOAWAY)."""
    block = b""
    for name, value in fields:
        name, value = name.encode(), value.encode()
        block += b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value
    return struct.pack(">I", len(block))[1:] + b"\x01\x05" + struct.pack(">I", stream) + block


PING_FRAME = b"\x00\x00\x08\x06\x00\x00\x00\x00\x00" + b"afterGA!"


def read_raw_frames_until_ping_ack(sock, timeout=5.0):
    """Reads frames off the socket (after the `h2` package stopped reading) until the ACK of PING_FRAME."""
    buffer, frames = b"", []
    deadline = time.monotonic() + timeout
    while True:
        while len(buffer) >= 9:
            length = int.from_bytes(buffer[:3], "big")
            if len(buffer) < 9 + length:
                break
            kind, flags, stream = buffer[3], buffer[4], int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
            payload = buffer[9:9 + length]
            frames.append((kind, flags, stream, payload))
            buffer = buffer[9 + length:]
            if kind == 0x6 and flags & 1 and payload == b"afterGA!":
                return frames
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no PING ACK within {timeout} s; frames {frames}"
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        assert chunk, f"the server closed before the PING ACK; frames {frames}"
        buffer += chunk


def upgrade(path, t, key=KEY):
    key_line = "" if key is None else f"Sec-WebSocket-Key: {key}\r\n"
    return (f"GET {path}?t={t} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n{key_line}"
            "Sec-WebSocket-Version: 13\r\n\r\n")


def ws_base(server, codec):
    return f"ws://127.0.0.1:{server.port}" if codec == "http/1.1" else f"wss://localhost:{server.tls_port}"


# -- 1. a request cut by a network drop --------------------------------------------------------------------------


@pytest.mark.parametrize("waiting", ["slow", "hang"], ids=["delayed", "hanging"])
@pytest.mark.parametrize("codec", HTTP1_CODECS + H2_CODECS)
def test_a_request_whose_response_is_pending_cut_by_a_network_drop(server, codec, waiting):
    ledger = Ledger()
    t = tag()
    if codec in H2_CODECS:
        client = H2Client(server, codec)
        client.headers(1, f"/{waiting}", t)
        client.flush()
    else:
        client = open_http1(server, codec)
        client.send(get(f"/{waiting}", t))
    ledger.wrote(t, waiting)
    server.wait_for(1, route=waiting)
    drop(server, ledger)
    if codec in H2_CODECS:
        seen = client.events(lambda seen: False)
        assert seen[-1] in ("eof", "reset") and not any(isinstance(e, h2.events.ConnectionTerminated) for e in seen)
    else:
        data, closed = client.read_until_close()
        # Python's ssl reads the RST as a ragged EOF now and then (suppress_ragged_eofs): nothing written either way.
        assert data == b"" and closed in (("reset",) if codec == "http/1.1" else ("reset", True)), (data, closed)
    client.close()
    entry = check(server, ledger)[t]
    assert (entry["response"]["outcome"], entry["response"]["status"], entry["response"]["bytesWritten"]) == (
        "reset-sent", None, 0), entry




@pytest.mark.parametrize("codec", HTTP1_CODECS + H2_CODECS)
def test_a_request_whose_body_is_half_sent_cut_by_a_network_drop(server, codec):
    ledger = Ledger()
    t = tag()
    if codec in H2_CODECS:
        client = H2Client(server, codec)
        client.headers(1, "/upload", t, method="POST", end_stream=False)
        client.conn.send_data(1, b"u" * 100)
        client.flush()
        ledger.wrote(t, None)  # never complete: malformed, no route
        client.barrier()  # the HEADERS and the 100 bytes have been read
    else:
        client = open_http1(server, codec)
        # Expect: 100-continue: the server's 100 proves it has read the head before the body begins.
        client.send(f"POST /upload?t={t} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
        ledger.wrote(t, None)
        client.read_until(lambda data: b"HTTP/1.1 100 Continue\r\n\r\n" in data)
        client.send(b"u" * 100)
    drop(server, ledger)
    if codec in H2_CODECS:
        client.events(lambda seen: False)
    else:
        client.read_until_close()
    client.close()
    entry = check(server, ledger)[t]
    assert entry["malformed"] is True and entry["route"] is None, entry
    assert (entry["response"]["outcome"], entry["response"]["status"]) == ("reset-sent", None), entry
    assert entry["bodySize"] <= 100, entry




@pytest.mark.parametrize("codec", HTTP1_CODECS)
def test_a_websocket_session_cut_by_a_network_drop(server, codec):
    ledger = Ledger()
    t = tag()

    async def session():
        options = {} if codec == "http/1.1" else {"ssl": tls_context(server, ["http/1.1"])}
        async with websockets.asyncio.client.connect(f"{ws_base(server, codec)}/live?t={t}", **options) as ws:
            ledger.wrote(t, "live")
            await ws.send("hello")
            assert await asyncio.wait_for(ws.recv(), 5) == "hello"
            drop(server, ledger)
            with pytest.raises(ConnectionClosedError) as closed:
                await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd is None, "no close frame: the network cut it"

    asyncio.run(session())
    entry = check(server, ledger)[t]
    end = entry["websocket"]["end"]
    assert (entry["response"]["status"], entry["protocol"]) == (101, "websocket"), entry
    assert (end["by"], end["code"], end["reason"]) == ("server", None, "network drop (RST)"), end
    assert entry["response"]["outcome"] == "reset-sent", entry["response"]


# -- 2. refused by REFUSED_STREAM ---------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", H2_CODECS)
def test_a_stream_refused_with_refused_stream_is_journaled_once_not_processed(server, codec):
    ledger = Ledger()
    client = H2Client(server, codec)
    refused, after = tag(), tag()
    client.headers(1, "/refused", refused)
    client.flush()
    ledger.wrote(refused, "refused")
    seen = client.events(of_type(h2.events.StreamReset))
    (reset,) = [e for e in seen if isinstance(e, h2.events.StreamReset)]
    assert (reset.stream_id, reset.error_code) == (1, h2.errors.ErrorCodes.REFUSED_STREAM)
    client.headers(3, "/ok", after)  # the connection goes on
    client.flush()
    ledger.wrote(after, "ok")
    client.events(of_type(h2.events.StreamEnded))
    client.close()
    by_tag = check(server, ledger)
    entry = by_tag[refused]
    assert (entry["stream"], entry["response"]["outcome"], entry["response"]["status"]) == (1, "not-processed", None)
    assert (by_tag[after]["stream"], by_tag[after]["response"]["outcome"]) == (3, "completed")
    assert by_tag[after]["connection"]["id"] == entry["connection"]["id"]


# -- 3. arriving on a connection being closed ---------------------------------------------------------------------


@pytest.mark.parametrize("codec", HTTP1_CODECS)
def test_requests_after_the_max_requests_limit_are_connection_closing(server, codec):
    """maxRequests 2: four GETs in one write (the last two arrive on a connection the policy is closing), then on a
    second connection two GETs answered and a third written after both answers, into the FIN on its way."""
    ledger = Ledger()
    first = [tag() for _ in range(4)]
    client = open_http1(server, codec)
    client.send("".join(get("/capped", t) for t in first))
    for t in first:
        ledger.wrote(t, ROUTED_IF_ANSWERED)
    assert len(client.read_responses(2)) == 2
    _, closed = client.read_until_close()
    assert closed is True
    client.close()

    second = [tag() for _ in range(3)]
    client = open_http1(server, codec)
    for t in second[:2]:
        client.send(get("/capped", t))
        ledger.wrote(t, ROUTED_IF_ANSWERED)
        assert len(client.read_responses(1)) == 1
    client.send(get("/capped", second[2]))  # the server lingers, reading: it reaches the server
    ledger.wrote(second[2], ROUTED_IF_ANSWERED)
    client.read_until_close()
    client.close()

    by_tag = check(server, ledger)
    for batch in (first, second):
        outcomes = [(by_tag[t]["response"]["outcome"], by_tag[t]["response"].get("connectionClosedAfter"))
                    for t in batch]
        late = [("connection-closing", None)] * (len(batch) - 2)
        assert outcomes == [("completed", None), ("completed", "max-requests")] + late, outcomes
        assert len({by_tag[t]["connection"]["id"] for t in batch}) == 1
        for t in batch[2:]:
            assert (by_tag[t]["route"], by_tag[t]["response"]["status"], by_tag[t]["response"]["bytesWritten"]) == (
                None, None, 0), by_tag[t]
    assert server.count(route="capped") == 4




@pytest.mark.parametrize("closer", ["closes", "empty", "truncated", "reset"])
@pytest.mark.parametrize("codec", HTTP1_CODECS)
def test_requests_pipelined_behind_a_response_that_closes_are_journaled_once(server, codec, closer):
    ledger = Ledger()
    head, behind = tag(), [tag(), tag()]
    client = open_http1(server, codec)
    client.send(get(f"/{closer}", head) + "".join(get("/ok", t) for t in behind))
    ledger.wrote(head, closer)
    for t in behind:
        # Never answered: `cancelled` (queued behind the closing response) or `connection-closing`.
        ledger.wrote(t, ROUTED_IF_ANSWERED)
    client.read_until_close()
    client.close()
    by_tag = check(server, ledger)
    outcome = {"closes": "completed", "empty": "closed-by-fault", "truncated": "closed-by-fault", "reset": "reset-sent"}
    assert by_tag[head]["response"]["outcome"] == outcome[closer], by_tag[head]
    for t in behind:
        response = by_tag[t]["response"]
        assert response["outcome"] in ("cancelled", "connection-closing") and response["status"] is None, by_tag[t]
        assert by_tag[t]["connection"]["id"] == by_tag[head]["connection"]["id"]


# -- 4. above a GOAWAY ---------------------------------------------------------------------------------------------


def goaway_connection(server, codec, ledger):
    """Streams 1 (hangs), 3 (GOAWAY last-stream-id 1), 5 and 7 in one write, read until the GOAWAY; returns the
    client and {stream: tag}."""
    client = H2Client(server, codec)
    tags = {stream: tag() for stream in (1, 3, 5, 7)}
    for stream, path in [(1, "/hang"), (3, "/goaway1"), (5, "/ok"), (7, "/ok")]:
        client.headers(stream, path, tags[stream])
    client.flush()
    for stream, route_id in [(1, "hang"), (3, "goaway1"), (5, "ok"), (7, "ok")]:
        ledger.wrote(tags[stream], route_id)
    seen = client.events(of_type(h2.events.ConnectionTerminated))
    (goaway,) = [e for e in seen if isinstance(e, h2.events.ConnectionTerminated)]
    assert (goaway.last_stream_id, goaway.error_code) == (1, h2.errors.ErrorCodes.NO_ERROR)
    return client, tags


@pytest.mark.parametrize("codec", H2_CODECS)
def test_streams_above_a_goaway_are_journaled_once_not_processed(server, codec):
    """Stream 1 is processed and hangs until the client leaves; 3 (whose fault sent the GOAWAY), 5 and 7 are above
    its last stream id."""
    ledger = Ledger()
    client, tags = goaway_connection(server, codec, ledger)
    client.close()
    by_tag = check(server, ledger)
    outcomes = {stream: (by_tag[t]["stream"], by_tag[t]["response"]["outcome"]) for stream, t in tags.items()}
    assert outcomes == {1: (1, "hang-released"), 3: (3, "not-processed"), 5: (5, "not-processed"),
                        7: (7, "not-processed")}, outcomes


@pytest.mark.parametrize("codec", H2_CODECS)
def test_streams_opened_after_the_servers_goaway_are_journaled_once_not_processed(server, codec):
    """After the GOAWAY (last stream id 1) the client opens 9 and 11 anyway, then PINGs: the ACK proves the server
    read them. Each must be journaled once, not processed (ARCHITECTURE §4a: "Streams that arrive after our GOAWAY
    are journaled not-processed too")."""
    ledger = Ledger()
    client, tags = goaway_connection(server, codec, ledger)
    late = {stream: tag() for stream in (9, 11)}
    client.sock.sendall(b"".join(raw_headers_frame(s, client.fields("/ok", late[s])) for s in late) + PING_FRAME)
    ledger.ignored_streams += list(late)
    read_raw_frames_until_ping_ack(client.sock)
    client.close()
    by_tag = check(server, ledger)
    for stream in late:
        entry = by_tag[("stream", stream)]
        assert entry["response"]["outcome"] == "not-processed" and entry["route"] is None, entry
        assert entry["requestLine"] == f"(HEADERS on stream {stream} after the server's GOAWAY, last stream 1: " \
                                       "not processed)", entry


# -- 5. during a TLS alert -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpn", [["http/1.1"], ["h2"]])
def test_a_tls_alert_is_one_connection_entry_and_no_request(server, alpn):
    ledger = Ledger()
    raw = socket.create_connection(("127.0.0.1", server.tls_port), timeout=5)
    with pytest.raises(ssl.SSLError, match="SSLV3_ALERT_HANDSHAKE_FAILURE"):
        tls_context(server, alpn).wrap_socket(raw, server_hostname="alert.localhost")
    raw.close()
    ledger.connections += 1
    check(server, ledger)
    (entry,) = server.journal(connection=True)
    tls = entry["tls"]
    assert (entry["kind"], entry["response"]["outcome"]) == ("connection", "rejected"), entry
    assert (tls["handshake"], tls["alertSent"], tls["fault"], tls["serverName"]) == (
        "alert-sent", "handshake_failure", "alert", "alert.localhost"), tls


def handshake_over_memory_bios(server, alpn, server_name):
    """A client handshake driven by hand (Python ssl over memory BIOs): returns (socket, ssl object, incoming,
    outgoing) once the client's side is complete — for TLS 1.3, right after its Finished is written to `outgoing`
    and before it is sent."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = tls_context(server, alpn).wrap_bio(incoming, outgoing, server_hostname=server_name)
    sock = socket.create_connection(("127.0.0.1", server.tls_port), timeout=5)
    deadline = time.monotonic() + 5
    while True:
        try:
            tls.do_handshake()
            return sock, tls, incoming, outgoing
        except ssl.SSLWantReadError:
            pending = outgoing.read()
            if pending:
                sock.sendall(pending)
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = sock.recv(65536)
            assert chunk, "the server closed during the handshake"
            incoming.write(chunk)


@pytest.mark.parametrize("alpn", [["http/1.1"], ["h2"]])
def test_a_request_sent_with_the_clients_finished_into_a_refused_handshake_is_no_request(server, alpn):
    """TLS 1.3 with a client certificate required and none sent: the client's Finished and its request (HTTP/1.1,
    or h2's preface, SETTINGS and HEADERS) leave in one write, before the server's verdict; the server answers
    certificate_required. No request entry: the request rode a handshake that failed; one connection entry."""
    ledger = Ledger()
    sock, tls, incoming, outgoing = handshake_over_memory_bios(server, alpn, "valid.localhost")
    assert tls.version() == "TLSv1.3"
    t = tag()
    if alpn == ["h2"]:
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        conn.send_headers(1, [(":method", "GET"), (":path", f"/ok?t={t}"), (":scheme", "https"),
                              (":authority", "localhost")], end_stream=True)
        tls.write(conn.data_to_send())
    else:
        tls.write(get("/ok", t).encode())
    flight = outgoing.read()
    sock.sendall(flight)  # Finished + the request, one write
    data = b""
    deadline = time.monotonic() + 5
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            pytest.fail("RST instead of the alert: the server closed with the request unread")
        if not chunk:
            break
        data += chunk
    sock.close()
    incoming.write(data)
    with pytest.raises(ssl.SSLError, match="TLSV13_ALERT_CERTIFICATE_REQUIRED"):
        tls.read(1024)
    ledger.connections += 1
    check(server, ledger)
    journal = server.journal()
    assert entries_of(journal, t) == [] and [e["kind"] for e in journal] == ["connection"], journal
    (entry,) = journal
    assert entry["response"]["outcome"] == "rejected", entry
    assert (entry["tls"]["handshake"], entry["tls"]["alertSent"]) == ("alert-sent", "certificate_required"), entry


def test_a_client_that_refuses_the_servers_certificate_writes_no_request_and_is_one_connection_entry(server):
    """The client's side of a failed handshake: it refuses `expired` (chosen by name) with its own alert, so its
    request is never written — a client cannot send application data before it has checked the server's
    certificate, and the server offers no 0-RTT (`Max Early Data: 0`)."""
    ledger = Ledger()
    raw = socket.create_connection(("127.0.0.1", server.tls_port), timeout=5)
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate has expired"):
        tls_context(server, ["http/1.1"]).wrap_socket(raw, server_hostname="expired.localhost")
    raw.close()
    ledger.connections += 1
    check(server, ledger)
    (entry,) = server.journal()
    assert entry["kind"] == "connection" and entry["response"]["outcome"] != "pending", entry
    assert (entry["tls"]["handshake"], entry["tls"]["alertReceived"], entry["tls"]["certificate"]) == (
        "client-alert", "certificate_expired", "expired"), entry


# -- 6. inside a WebSocket upgrade that failed --------------------------------------------------------------------


@pytest.mark.parametrize("codec", HTTP1_CODECS)
def test_an_upgrade_answered_503_is_one_request_entry_and_no_session(server, codec):
    ledger = Ledger()
    t = tag()

    async def attempt():
        options = {} if codec == "http/1.1" else {"ssl": tls_context(server, ["http/1.1"])}
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.asyncio.client.connect(f"{ws_base(server, codec)}/busy?t={t}", **options):
                pass
        assert refused.value.response.status_code == 503

    asyncio.run(attempt())
    ledger.wrote(t, "busy")
    entry = check(server, ledger)[t]
    assert (entry["response"]["status"], entry["response"]["outcome"], entry["protocol"]) == (503, "completed", "http/1.1")
    assert (entry["tls"] is not None) == (codec == "https"), entry
    assert entry.get("websocket") is None, entry


@pytest.mark.parametrize("key", ["bad", None], ids=["invalid-key", "missing-key"])
@pytest.mark.parametrize("codec", HTTP1_CODECS)
def test_an_upgrade_with_a_bad_key_is_one_400_entry_and_no_session(server, codec, key):
    ledger = Ledger()
    t = tag()
    client = open_http1(server, codec)
    client.send(upgrade("/live", t, key=key))
    ledger.wrote(t, "live")
    (response,) = client.read_responses(1)
    assert response.status == 400, response
    client.close()
    entry = check(server, ledger)[t]
    assert (entry["response"]["status"], entry["response"]["outcome"], entry["protocol"]) == (400, "completed", "http/1.1")
    assert (entry["tls"] is not None) == (codec == "https"), entry
    assert entry.get("websocket") is None, entry


@pytest.mark.parametrize("codec", HTTP1_CODECS)
def test_an_upgrade_whose_client_leaves_before_the_101_is_one_client_closed_entry(server, codec):
    ledger = Ledger()
    t = tag()
    client = open_http1(server, codec)
    client.send(upgrade("/late", t))
    ledger.wrote(t, "late")
    server.wait_for(1, route="late")
    client.close()
    (entry,) = server.wait_for(1, route="late", completed="true")
    by_tag = check(server, ledger)
    assert by_tag[t]["sequence"] == entry["sequence"]
    assert (entry["response"]["status"], entry["response"]["outcome"], entry["response"]["bytesWritten"]) == (
        None, "client-closed", 0), entry
    assert entry.get("websocket") is None, entry


# -- 7. a seeded random walk ----------------------------------------------------------------------------------------

CODECS = ["http/1.1", "https", "h2c", "h2"]
# (situation, codecs it applies to). Not in the walk (tested on their own above): an HTTP/1.1 body cut by a drop,
# requests pipelined behind a closing response, streams opened after the server's GOAWAY.
SITUATIONS = [
    ("get", CODECS),
    ("delayed-drop", CODECS),
    ("max-requests", HTTP1_CODECS),
    ("tls-alert", ["https", "h2"]),
    ("ws-session-drop", HTTP1_CODECS),
    ("ws-bad-key", HTTP1_CODECS),
    ("ws-leaves-before-101", HTTP1_CODECS),
    ("refused", H2_CODECS),
    ("goaway-above", H2_CODECS),
    ("h2-half-body-drop", H2_CODECS),
]


def walk_step(server, ledger, codec, situation, rng, seen):
    """Plays one situation; adds to the ledger what the client wrote. `seen[path]` counts journaled entries per path
    so far, for waiting on this step's own request."""

    def wait_path(path):
        seen[path] = seen.get(path, 0) + 1
        server.wait_for(seen[path], path=path)

    if situation == "get":
        t = tag()
        if codec in H2_CODECS:
            client = H2Client(server, codec)
            client.headers(1, "/ok", t)
            client.flush()
            ledger.wrote(t, "ok")
            client.events(of_type(h2.events.StreamEnded))
        else:
            client = open_http1(server, codec)
            client.send(get("/ok", t))
            ledger.wrote(t, "ok")
            client.read_responses(1)
        client.close()
    elif situation == "delayed-drop":
        t = tag()
        if codec in H2_CODECS:
            client = H2Client(server, codec)
            client.headers(1, "/slow", t)
            client.flush()
        else:
            client = open_http1(server, codec)
            client.send(get("/slow", t))
        ledger.wrote(t, "slow")
        wait_path("/slow")
        drop(server, ledger)
        if codec in H2_CODECS:
            client.events(lambda s: False)
        else:
            client.read_until_close()
        client.close()
    elif situation == "max-requests":
        count = rng.randint(1, 4)
        tags = [tag() for _ in range(count)]
        client = open_http1(server, codec)
        client.send("".join(get("/capped", t) for t in tags))
        for t in tags:
            ledger.wrote(t, ROUTED_IF_ANSWERED)
        client.read_responses(min(count, 2))
        if count >= 2:
            client.read_until_close()
        client.close()
    elif situation == "tls-alert":
        raw = socket.create_connection(("127.0.0.1", server.tls_port), timeout=5)
        with pytest.raises(ssl.SSLError):
            tls_context(server, ["h2"] if codec == "h2" else ["http/1.1"]).wrap_socket(
                raw, server_hostname="alert.localhost")
        raw.close()
        ledger.connections += 1
    elif situation == "ws-session-drop":
        t = tag()

        async def session():
            options = {} if codec == "http/1.1" else {"ssl": tls_context(server, ["http/1.1"])}
            async with websockets.asyncio.client.connect(f"{ws_base(server, codec)}/live?t={t}", **options) as ws:
                ledger.wrote(t, "live")
                await ws.send("x")
                await asyncio.wait_for(ws.recv(), 5)
                drop(server, ledger)
                with pytest.raises(ConnectionClosedError):
                    await asyncio.wait_for(ws.recv(), 5)

        asyncio.run(session())
    elif situation == "ws-bad-key":
        t = tag()
        client = open_http1(server, codec)
        client.send(upgrade("/live", t, key=rng.choice(["bad", None])))
        ledger.wrote(t, "live")
        client.read_responses(1)
        client.close()
    elif situation == "ws-leaves-before-101":
        t = tag()
        client = open_http1(server, codec)
        client.send(upgrade("/late", t))
        ledger.wrote(t, "late")
        wait_path("/late")
        client.close()
    elif situation == "refused":
        t = tag()
        client = H2Client(server, codec)
        client.headers(1, "/refused", t)
        client.flush()
        ledger.wrote(t, "refused")
        client.events(of_type(h2.events.StreamReset))
        client.close()
    elif situation == "goaway-above":
        # Stream 1 answered, 3 asks for GOAWAY last-stream-id 1, 5 above it: 3 and 5 not processed.
        tags = {1: tag(), 3: tag(), 5: tag()}
        client = H2Client(server, codec)
        for stream, path in [(1, "/ok"), (3, "/goaway1"), (5, "/ok")]:
            client.headers(stream, path, tags[stream])
        client.flush()
        for stream, route_id in [(1, "ok"), (3, "goaway1"), (5, "ok")]:
            ledger.wrote(tags[stream], route_id)
        client.events(lambda s: "eof" in s or "reset" in s)
        client.close()
    elif situation == "h2-half-body-drop":
        t = tag()
        client = H2Client(server, codec)
        client.headers(1, "/upload", t, method="POST", end_stream=False)
        client.conn.send_data(1, b"u" * rng.randint(0, 200))
        client.flush()
        ledger.wrote(t, None)
        client.barrier()
        drop(server, ledger)
        client.events(lambda s: False)
        client.close()
    else:
        raise AssertionError(situation)


def test_a_seeded_random_walk_over_codecs_and_situations(server):
    seed = int(os.environ.get("FAULTLINE_WALK_SEED", "20261202"))  # another seed: FAULTLINE_WALK_SEED=N
    rng = random.Random(seed)
    ledger = Ledger()
    seen = {}
    played = collections.Counter()
    for _ in range(200):
        situation, codecs = rng.choice(SITUATIONS)
        codec = rng.choice(codecs)
        played[(situation, codec)] += 1
        walk_step(server, ledger, codec, situation, rng, seen)
    by_tag = check(server, ledger)  # one entry per request written, none pending, counters as the ledger says
    assert len(played) >= 20, played
    assert all(e["response"]["outcome"] != "pending" for e in by_tag.values())
    total = server.admin_json("GET", "requests/count")["counters"]["totalRecorded"]
    assert total == len(ledger.requests) + ledger.connections + ledger.network, (seed, played)
