#!/usr/bin/env python3
"""Soak test for `make soak` (not part of `make test`): a mixed load over every protocol the server speaks, against a
release build, for SOAK_SECONDS, then the checks below. Python 3 with h2 (4.x) and websockets (17.x), which
scripts/ensure-deps.sh installs for `make soak` and `make test`.

  load    one group of worker threads per protocol, each worker picking a kind of load at random (seeded,
          Random(SEED * 1000 + index)) after one round of every kind of its group in order, so that any run long
          enough for that round has every kind at least once. Each kind is served by routes of its own
          (scripts/soak-scenario.json and the soak-tls-*.json handshake scripts) or by connection entries the kind
          alone makes, and has the outcome(s) its kind expects:
          http/1.1  (SOAK_WORKERS threads) plain 200s on a kept-alive connection and on new ones, pipelined batches,
                    POSTs, scripted delays, slow drips, every connection fault, clients that give up mid-response,
                    hangs and stalls left after 100 ms, 503 + Retry-After, a rate-limited route, unmatched paths and
                    malformed requests (garbage bytes, broken heads, requests cut short);
          https     HTTP/1.1 over TLS, kept alive and a new connection per request, faults (reset, truncate-body,
                    no-close-notify) and the TLS faults: handshake reset, alert, hang, slow handshake, an expired
                    certificate the client refuses and a handshake with no request after it — each attempt that
                    never becomes a request is a `kind: connection` entry;
          h2, h2c   the h2 package on a raw socket (TLS with ALPN h2, or prior knowledge): batches of concurrent
                    streams on a kept connection — 200s, delays, RST_STREAM REFUSED_STREAM, RST_STREAM after body
                    bytes, truncate-body, an HTTP/1.1-only route (HTTP_1_1_REQUIRED), the client's own RST_STREAM on
                    a hanging stream — and, each on a connection of its own, GOAWAY (previous and current,
                    graceful), bad HPACK, the client's GOAWAY on a hanging stream and on a connection with no
                    stream, and the TCP reset;
          ws, wss   websockets' asyncio client: echo, a dropped session, server close codes 1001/1011/4000, a 1 MiB
                    `generated` message and a 2 MiB one the client refuses with 1009;
          proxy     forwarded to an upstream in this process (a ThreadingHTTPServer): buffered (body with its head),
                    streamed (512 KiB arriving after its head), streamed and cut by truncate-body, corrupt-json, a
                    drip, and an upstream that refuses (502); the upstream's own count of what reached it must match;
          resource  a 1 MiB download in full, cut at 300,000 bytes and resumed with Range + If-Range, the two parts
                    byte-identical to the full one;
          network   a second server (scripts/soak-network.json) whose network a worker changes through its admin
                    port, one change at a time on a seeded timeline: conditions (latency, a downlink cap), a freeze of
                    an open connection, a drop of a connection with a request in flight, a refusing listener,
                    reset-on-accept and a stalled listener then brought back. Network changes act on every
                    connection of a server, so they get a server of their own: on one server they would turn other
                    kinds' requests written but not yet read into nothing at all, and no count could be exact.
  counts  a request counts as sent once its bytes were fully written to the socket (sendall returned); a connection
          attempt once the TCP connect succeeded. After the load, once nothing is pending, each server's journal
          totalRecorded must equal the total its clients sent, and its per-route, malformed and unmatched counters
          the per-kind counts — exactly (the ring buffer is full long before the end, so the counters are compared,
          not the entries kept). Every entry also reaches the --journal NDJSON file with a final outcome: it must
          hold exactly as many lines, none pending, and, counted by (route or connection, protocol) — h2 and h2c
          share routes —, exactly each kind's count, with only the outcomes the kind expects (the outcome column:
          the journal's outcome, with the TLS handshake's end, the WebSocket end, the proxy's streamed/buffered and
          failure, an HTTP/2 client's RST_STREAM or GOAWAY, the network event).
  fds     each server's open descriptors (/proc/PID/fd) return to the count before the load within 5 s of the
          clients closing.
  RSS     VmRSS is sampled throughout. The journal ring and the Retry-After judgements are filled before the
          clock starts, so after warm-up (the first 25 % of the run) nothing the server keeps should grow: the
          mean of the last three samples may exceed the mean of the first three after warm-up by at most
          SOAK_RSS_LIMIT_MB (4 MB): room for allocator noise (a transparent huge page is 2 MB) that still fails a
          leak of a few tens of bytes per request over the default 180 s run. A leak confined to one rare kind of
          request can stay under it: the bytes per request are printed.
  stop    SIGTERM: each server exits 0 and writes no entry as pending.

Prints a table (per kind, per protocol) and writes it to SOAK_RESULTS (bench-results/soak.txt); exits 1 if a check
fails.
  SOAK_SECONDS=180 SOAK_WORKERS=12 SOAK_SEED=1 FAULTLINE_BIN=.build/release/faultline scripts/soak.py
SOAK_PROTOCOL_WORKERS sets the workers of each other group (default 1; https gets twice as many), SOAK_MAX_JOURNAL
--max-journal (default: the server's 10,000), SOAK_RETRY_AFTER_PREFILL the 503s that fill the Retry-After
judgements before the clock starts (20,000); SOAK_KEEP=1 keeps the journal files and the servers' stderr of a
failed run.
"""
import asyncio
import collections
import contextlib
import hashlib
import http.client
import http.server
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
from websockets.exceptions import ConnectionClosed
from websockets.asyncio.client import connect as websocket_connect

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("FAULTLINE_BIN", os.path.join(ROOT, ".build/release/faultline"))
SCENARIO = os.path.join(ROOT, "scripts/soak-scenario.json")
TLS_SCENARIOS = [os.path.join(ROOT, f"scripts/soak-tls-{name}.json") for name in ("reset", "alert", "hang", "slow")]
NETWORK_SCENARIO = os.path.join(ROOT, "scripts/soak-network.json")
SECONDS = float(os.environ.get("SOAK_SECONDS", "180"))
WORKERS = int(os.environ.get("SOAK_WORKERS", "12"))
PROTOCOL_WORKERS = int(os.environ.get("SOAK_PROTOCOL_WORKERS", "1"))
SEED = int(os.environ.get("SOAK_SEED", "1"))
RESULTS = os.environ.get("SOAK_RESULTS", os.path.join(ROOT, "bench-results/soak.txt"))
RSS_LIMIT_MB = float(os.environ.get("SOAK_RSS_LIMIT_MB", "4"))
# The journal's capacity (--max-journal); empty for the server's default. The short run in Tests/Python uses a
# small one, so that filling it before the clock starts is quick on a debug build.
MAX_JOURNAL = os.environ.get("SOAK_MAX_JOURNAL", "")
# The network server's journal: small, filled before the clock starts like the main one.
NETWORK_MAX_JOURNAL = 500
# 503s with Retry-After sent before the clock starts, to fill the server's store of Retry-After judgements.
RETRY_AFTER_PREFILL = int(os.environ.get("SOAK_RETRY_AFTER_PREFILL", "20000"))
FD_DEADLINE_S = 5.0
QUIET_DEADLINE_S = 15.0
# How long a client waits before giving up: shorter than the delay (300 ms) or the drip (960 ms) it leaves.
GIVE_UP_S = 0.05
HANG_WAIT_S = 0.1
# A generous ceiling for anything that should answer; a kind that hits it counts as unexpected.
IO_TIMEOUT_S = 10.0
# The network worker's freeze, and the least a request written on the frozen connection must wait for its answer.
FREEZE_MS = 300
FREEZE_FLOOR_S = 0.2
# Bodies of the proxy's upstream and of the resource.
STREAMED_BODY = bytes(range(256)) * 2048  # 512 KiB, written after the head in 64 KiB pieces
STREAMED_CUT = 100000
RESOURCE_SIZE = 1048576
RESOURCE_CUT = 300000


class Kind:
    """A kind of load: its group (the protocol its worker speaks), its weight within the group, the journal keys it
    is counted under (route ids, `malformed`, `unmatched`, or `connection:NAME` for connection entries), the
    protocol its entries carry (`journal_protocol` below) and the outcomes they may end with."""

    def __init__(self, group, weight, keys, protocol, outcomes):
        self.group, self.weight, self.keys, self.protocol, self.outcomes = group, weight, keys, protocol, set(outcomes)


KINDS = {}


def kind(name, group, weight, keys, protocol, *outcomes):
    KINDS[name] = Kind(group, weight, keys, protocol, outcomes)


# -- http/1.1: the kinds the soak began with ---------------------------------------------------------------------
H1 = "http/1.1"
kind("prefill", "prefill", 0, ["prefill"], H1, "completed")
kind("prefill-retry-after", "prefill", 0, ["prefill-retry-after"], H1, "completed")
kind("keep-alive", H1, 24, ["plain"], H1, "completed")
kind("new-connection", H1, 10, ["fresh"], H1, "completed")
kind("pipelined", H1, 6, ["pipelined"], H1, "completed")
kind("post", H1, 8, ["post"], H1, "completed")
kind("delay", H1, 5, ["delay"], H1, "completed")
kind("drip", H1, 3, ["drip"], H1, "completed")
kind("retry-after", H1, 4, ["retry-after"], H1, "completed")
kind("rate-limited", H1, 4, ["limited", "rate-limit:soak-limit"], H1, "completed")
kind("unmatched", H1, 2, ["unmatched"], H1, "completed")
kind("give-up-delay", H1, 2, ["give-up-delay"], H1, "client-closed")
kind("give-up-drip", H1, 2, ["give-up-drip"], H1, "client-closed")
kind("reset", H1, 3, ["reset"], H1, "reset-sent")
kind("empty-reply", H1, 2, ["empty-reply"], H1, "closed-by-fault")
kind("truncate-body", H1, 2, ["truncate-body"], H1, "closed-by-fault")
kind("close-after-headers", H1, 2, ["close-after-headers"], H1, "closed-by-fault")
kind("half-close", H1, 2, ["half-close"], H1, "half-closed")
kind("bad-chunk", H1, 2, ["bad-chunk"], H1, "closed-by-fault")
kind("truncated-chunk", H1, 2, ["truncated-chunk"], H1, "closed-by-fault")
kind("garbage-reply", H1, 2, ["garbage-reply"], H1, "closed-by-fault")
kind("hang", H1, 1, ["hang"], H1, "hang-released")
kind("stall", H1, 1, ["stall"], H1, "hang-released")
kind("malformed", H1, 5, ["malformed"], H1, "completed", "rejected", "client-closed")
# -- https: HTTP/1.1 over TLS and the TLS handshake faults ----------------------------------------------------
HTTPS = "https"
kind("tls-keep-alive", HTTPS, 12, ["tls-plain"], HTTPS, "completed")
kind("tls-post", HTTPS, 4, ["tls-post"], HTTPS, "completed")
kind("tls-new-connection", HTTPS, 8, ["tls-fresh"], HTTPS, "completed")
kind("tls-reset", HTTPS, 2, ["tls-reset"], HTTPS, "reset-sent")
kind("tls-truncate-body", HTTPS, 2, ["tls-truncate-body"], HTTPS, "closed-by-fault")
kind("tls-no-close-notify", HTTPS, 2, ["tls-no-close-notify"], HTTPS, "closed-by-fault")
kind("tls-handshake-reset", HTTPS, 2, ["connection:soak-reset.localhost"], "tls", "reset-sent (handshake reset-sent)")
kind("tls-alert", HTTPS, 2, ["connection:soak-alert.localhost"], "tls", "rejected (handshake alert-sent)")
kind("tls-hang", HTTPS, 1, ["connection:soak-hang.localhost"], "tls", "hang-released (handshake hang-released)")
kind("tls-slow-handshake", HTTPS, 1, ["tls-slow-handshake"], HTTPS, "completed (slow-handshake)")
kind("tls-expired", HTTPS, 2, ["connection:expired.localhost"], "tls", "rejected (handshake client-alert)")
kind("tls-idle", HTTPS, 2, ["connection:localhost"], "tls", "client-closed (handshake completed)")
# -- h2 and h2c: the same routes, told apart by the journal's protocol -----------------------------------------
# Streams multiplexed on a kept connection, in batches: (path, journal key, outcome).
H2_STREAMS = {
    "streams": ("/h2/plain", "h2-plain", "completed", 16),
    "delay": ("/h2/delay", "h2-delay", "completed", 4),
    "refused": ("/h2/refused", "h2-refused", "not-processed", 2),
    "rst-body": ("/h2/rst-body", "h2-rst-body", "stream-reset", 2),
    "truncate-body": ("/h2/truncate-body", "h2-truncate-body", "closed-by-fault", 2),
    "http1-only": ("/h2/http1-only", "h2-http1-only", "stream-reset", 1),
    "client-reset": ("/h2/hang/reset", "h2-client-reset", "hang-released (client RST_STREAM CANCEL)", 2),
}
# Kinds on a connection of their own.
H2_CONNECTIONS = {
    "goaway-previous": ("/h2/goaway/previous", "h2-goaway-previous", "not-processed", 1),
    "goaway-current": ("/h2/goaway/current", "h2-goaway-current", "completed", 1),
    "bad-hpack": ("/h2/bad-hpack", "h2-bad-hpack", "hang-released", 1),
    "client-goaway": ("/h2/hang/goaway", "h2-client-goaway", "hang-released (client GOAWAY ENHANCE_YOUR_CALM)", 1),
    "tcp-reset": ("/h2/fault/reset", "h2-reset", "reset-sent", 1),
    "goaway-idle": (None, None, "client-closed (client GOAWAY NO_ERROR)", 1),
}
for protocol in ("h2", "h2c"):
    for name, (_, key, outcome, weight) in {**H2_STREAMS, **H2_CONNECTIONS}.items():
        if key is None:  # a connection on which the client opened no stream: a connection entry of its own
            key = "connection:localhost" if protocol == "h2" else "connection:-"
        if protocol == "h2" and outcome.startswith("client-closed"):  # its connection entry carries the handshake
            outcome = outcome.replace("(", "(handshake completed, ")
        kind(f"{protocol}-{name}", protocol, weight, [key], protocol, outcome)
# -- WebSocket: ws on the plain port, wss on the TLS port -----------------------------------------------------
WS_CLOSE_CODES = (1001, 1011, 4000)
for protocol in ("ws", "wss"):
    kind(f"{protocol}-echo", protocol, 6, ["ws-echo"], protocol, "completed (client 1000)")
    kind(f"{protocol}-drop", protocol, 2, ["ws-drop"], protocol, "closed-by-fault (server drop)")
    kind(f"{protocol}-close", protocol, 3, [f"ws-close-{code}" for code in WS_CLOSE_CODES], protocol,
         *[f"completed (server {code})" for code in WS_CLOSE_CODES])
    kind(f"{protocol}-large", protocol, 1, ["ws-large"], protocol, "completed (client 1000)")
    kind(f"{protocol}-too-large", protocol, 1, ["ws-too-large"], protocol, "completed (client 1009)")
# -- proxy: HTTP/1.1 to the server, forwarded to the soak's upstream ---------------------------------------------
PROXY = "proxy"
kind("proxy-buffered", PROXY, 6, ["proxy-buffered"], H1, "completed (buffered)")
kind("proxy-streamed", PROXY, 3, ["proxy-streamed"], H1, "completed (streamed)")
kind("proxy-streamed-cut", PROXY, 2, ["proxy-streamed-cut"], H1, "closed-by-fault (streamed)")
kind("proxy-corrupt", PROXY, 2, ["proxy-corrupt"], H1, "completed (buffered)")
kind("proxy-drip", PROXY, 1, ["proxy-drip"], H1, "completed (buffered)")
kind("proxy-refused", PROXY, 1, ["proxy-refused"], H1, "completed (buffered, upstream refused)")
# -- resources ------------------------------------------------------------------------------------------------
RESOURCE = "resource"
kind("resource-full", RESOURCE, 1, ["resource-full"], H1, "completed (full)")
kind("resource-cut", RESOURCE, 3, ["resource-cut"], H1, "closed-by-fault (full)")
kind("resource-resume", RESOURCE, 0, ["resource:blob"], H1, "completed (partial)")  # follows every resource-cut
# -- network: on a server of its own; `net:` keys are that server's ---------------------------------------------
NETWORK = "network"
kind("net-change", NETWORK, 0, ["net:network"], "-", "change")  # each POST /__faultline/network
kind("net-conditions", NETWORK, 4, ["net:net-shaped"], H1, "completed (network shaped)")
kind("net-freeze", NETWORK, 3, ["net:net-plain"], H1, "completed")
kind("net-drop", NETWORK, 2, ["net:net-hang"], H1, "reset-sent")
kind("net-refuse", NETWORK, 2, [], "-")  # refused by the kernel: nothing reaches the server
kind("net-reset-on-accept", NETWORK, 2, ["net:connection:-"], "tcp", "reset-sent (network attempt)")
kind("net-stall", NETWORK, 2, ["net:net-stalled"], H1, "completed")
kind("net-stall-attempt", NETWORK, 0, ["net:connection:stalled"], "tcp", "completed (network attempt)")
kind("net-prefill", "prefill", 0, ["net:prefill"], H1, "completed")
GROUPS = [H1, HTTPS, "h2", "h2c", "ws", "wss", PROXY, RESOURCE, NETWORK]

# Kinds served on the worker's kept-alive http.client connection, with the status each must get.
KEPT_ALIVE = {"keep-alive": ("GET", "/plain", {200}), "post": ("POST", "/post", {201}),
              "delay": ("GET", "/delay", {200}), "drip": ("GET", "/drip", {200}),
              "retry-after": ("GET", "/unavailable", {503}), "rate-limited": ("GET", "/limited/search", {200, 429}),
              "unmatched": ("GET", "/nowhere", {404})}
# Kinds on a new connection of their own: path, and how long the client waits before giving up (None: until
# the server closes, or IO_TIMEOUT_S).
ONE_SHOT = {"give-up-delay": ("/give-up/delay", GIVE_UP_S), "give-up-drip": ("/give-up/drip", GIVE_UP_S * 2),
            "reset": ("/fault/reset", None), "empty-reply": ("/fault/empty-reply", None),
            "truncate-body": ("/fault/truncate-body", None),
            "close-after-headers": ("/fault/close-after-headers", None),
            "half-close": ("/fault/half-close", None), "bad-chunk": ("/fault/bad-chunk", None),
            "truncated-chunk": ("/fault/truncated-chunk", None), "garbage-reply": ("/fault/garbage", None),
            "hang": ("/fault/hang", HANG_WAIT_S), "stall": ("/fault/stall", HANG_WAIT_S)}
# Requests that are not valid HTTP, each journaled once as malformed: answered 4xx/5xx and closed, or (a request
# cut short) journaled when the client's FIN arrives. Random garbage is added by the worker.
MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET /plain HTTP/1.1\r\nHost: soak\r\nBad Header\r\n\r\n",
    b"GET /plain HTTP/1.1\r\n\r\n",
    b"GET /plain HTTP/2.0\r\nHost: soak\r\n\r\n",
    b"POST /post HTTP/1.1\r\nHost: soak\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST /post HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: soak\r\n\r\n",
    b"GET /plain HTTP/1.1\r\nHost: soak\r\n",
    b"POST /post HTTP/1.1\r\nHost: soak\r\nContent-Length: 100\r\n\r\nonly part of it",
]


# -- the journal's view of an entry ----------------------------------------------------------------------------


def journal_protocol(entry):
    """http/1.1, https, h2, h2c, ws, wss; `tls` or `tcp` for a connection entry that never chose a protocol;
    `-` for a network change."""
    if entry.get("kind") == "network":
        return "-"
    protocol, tls = entry.get("protocol"), entry.get("tls")
    if protocol is None:
        return "tls" if tls else "tcp"
    if protocol == "http/1.1":
        return "https" if tls else "http/1.1"
    if protocol == "websocket":
        return "wss" if tls else "ws"
    return protocol


def journal_key(entry, prefix=""):
    """The key an entry is counted under: its route, malformed, unmatched, `network` for a change, or
    `connection:NAME` (the TLS server name, `stalled` for a stalled listener's attempt, else `-`)."""
    if entry.get("kind") == "network":
        return prefix + "network"
    if entry.get("kind") == "connection":
        tls, network = entry.get("tls"), entry.get("network") or {}
        if tls:
            return f"{prefix}connection:{tls.get('serverName') or '-'}"
        if network.get("event") == "attempt" and network.get("listener") == "stall":
            return prefix + "connection:stalled"
        return prefix + "connection:-"
    if entry.get("malformed"):
        return prefix + "malformed"
    return prefix + (entry.get("route") or "unmatched")


def journal_outcome(entry):
    """The journal's outcome, with what tells a kind's entries apart: the TLS handshake's end on a connection entry
    (and a slow handshake's fault on a request), the WebSocket end, the proxy's streamed/buffered and failure, the
    resource's decision, an HTTP/2 client's RST_STREAM or GOAWAY, the network event."""
    if entry.get("kind") == "network":
        return "change"
    outcome = entry["response"]["outcome"]
    details = []
    tls = entry.get("tls")
    if entry.get("kind") == "connection" and tls:
        details.append(f"handshake {tls.get('handshake')}")
    elif tls and tls.get("fault"):
        details.append(tls["fault"])
    if entry.get("websocket"):
        end = entry["websocket"].get("end") or {}
        details.append(f"{end.get('by')} {end.get('fault') or end.get('code')}")
    if entry.get("proxy"):
        proxy = entry["proxy"]
        details.append("streamed" if proxy.get("streamed") else "buffered")
        if proxy.get("failure"):
            details.append(f"upstream {proxy['failure']}")
    if entry.get("resource"):
        details.append(entry["resource"].get("decision"))
    if entry.get("clientReset"):
        details.append(f"client RST_STREAM {entry['clientReset']['code']}")
    if entry.get("clientGoaway"):
        details.append(f"client GOAWAY {entry['clientGoaway']['code']}")
    network = entry.get("network") or {}
    if entry.get("kind") != "network" and network.get("event"):
        details.append(f"network {network['event']}")
    return outcome + (f" ({', '.join(details)})" if details else "")


# -- the servers -----------------------------------------------------------------------------------------------


def proc_status_kb(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def fd_count(pid):
    """Open descriptors, not counting `anon_inode:` ones (epoll, eventfd, timerfd): the Swift runtime's Dispatch
    opens its own whenever it chooses, and nothing per connection ever does."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("anon_inode:"):
                count += 1
        except FileNotFoundError:
            pass
    return count


def admin(port, path, body=None):
    """GET (or POST `body` as JSON) /__faultline/<path> on a new connection to the admin port, read to the end."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=IO_TIMEOUT_S * 2)
    try:
        if body is None:
            connection.request("GET", f"/__faultline/{path}")
        else:
            connection.request("POST", f"/__faultline/{path}", body=json.dumps(body),
                               headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        if response.status >= 300:
            raise RuntimeError(f"admin {path}: {response.status} {data[:200]!r}")
        return json.loads(data)
    finally:
        connection.close()


def settled_fd_count(pid, interval=0.2, timeout=5.0):
    """The descriptor count once it stops changing (an admin connection just closed may still be open)."""
    deadline = time.monotonic() + timeout
    last = fd_count(pid)
    while time.monotonic() < deadline:
        time.sleep(interval)
        now = fd_count(pid)
        if now == last:
            return now
        last = now
    return last


class Server:
    """A `faultline serve` with --admin-port (every admin call of the soak goes there, out of reach of network
    changes and not counted among the data port's connections) and --journal."""

    def __init__(self, name, folder, paths, tls=False, extra=()):
        self.name = name
        self.journal_path = os.path.join(folder, f"{name}-journal.ndjson")
        self.stderr_path = os.path.join(folder, f"{name}-stderr.txt")
        self.stderr = open(self.stderr_path, "wb")
        command = [BINARY, "serve", *paths, "--port", "0", "--admin-port", "0", "--quiet",
                   "--journal", self.journal_path, *extra]
        if tls:
            self.tls_dir = os.path.join(folder, "tls")
            command += ["--tls-port", "0", "--tls-dir", self.tls_dir]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr, stdin=subprocess.DEVNULL)
        self.port = self.tls_port = self.admin_port = None
        for _ in range(3 if tls else 2):
            line = self.process.stdout.readline().decode()
            if not line:
                raise RuntimeError(f"{name} server exited at start: {open(self.stderr_path).read()[-2000:]}")
            port = int(line.rsplit(":", 1)[1])
            if line.startswith("listening on https://"):
                self.tls_port = port
            elif line.startswith("listening on http://"):
                self.port = port
            elif line.startswith("admin on http://"):
                self.admin_port = port
        self.pid = self.process.pid

    def admin(self, path, body=None):
        return admin(self.admin_port, path, body)

    def recorded(self):
        """The sequence number of the latest entry: entries after it are `since` it."""
        return self.admin("health")["journal"]["totalRecorded"]

    def wait_for(self, count, **query):
        """Long-polls the journal until `count` entries match `query` (give `since`: the wait sees only the entries
        the ring still keeps); raises if they do not within IO_TIMEOUT_S."""
        params = "&".join(f"{key}={value}" for key, value in query.items())
        answer = self.admin(f"requests/wait?count={count}&{params}&timeoutMs={int(IO_TIMEOUT_S * 1000)}")
        if not answer["satisfied"]:
            raise RuntimeError(f"journal: {answer['count']} of {count} entries for {query}")

    def quiet(self):
        """Waits until only this admin call's connection is open and no kept entry is pending; returns (client
        connections, pending)."""
        deadline = time.monotonic() + QUIET_DEADLINE_S
        while True:
            connections = self.admin("health")["connections"]
            pending = self.admin("requests/count?completed=false")["count"]
            if (connections <= 1 and pending == 0) or time.monotonic() > deadline:
                return max(0, connections - 1), pending
            time.sleep(0.05)

    def stop(self):
        """SIGTERM; returns the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=10)

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stderr.close()


def prefill(port, path, count, status):
    """`count` requests for `path` in pipelined batches of 500, before the clock starts."""
    sent = 0
    while sent < count:
        batch = min(500, count - sent)
        data = f"GET {path} HTTP/1.1\r\nHost: soak\r\n\r\n".encode() * (batch - 1)
        data += f"GET {path} HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n".encode()
        with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as client:
            client.sendall(data)
            sent += batch
            answers, ended = read_until_closed(client, IO_TIMEOUT_S)
            answered = answers.count(f"HTTP/1.1 {status} ".encode())
            if answered != batch:
                raise RuntimeError(f"prefill {path}: {answered} of {batch} answered ({ended})")
    return sent


# -- the proxy's upstream --------------------------------------------------------------------------------------


class Upstream(http.server.ThreadingHTTPServer):
    """The proxied routes' upstream, in this process: counts what reached it per path."""
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), UpstreamHandler)
        self.received = collections.Counter()
        self.lock = threading.Lock()
        self.connections = set()
        self.thread = threading.Thread(target=self.serve_forever, name="soak-upstream", daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request, client_address):
        """A connection the proxy reset or closed (a cut stream, its pool closing an idle one) is expected: no
        traceback on stderr. What reached the upstream is counted by the handler, and compared."""

    def process_request_thread(self, request, client_address):
        with self.lock:
            self.connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.lock:
                self.connections.discard(request)

    def close_connections(self):
        """Ends every connection the server's pool keeps to us: after the load, so that its descriptors go too."""
        with self.lock:
            connections = list(self.connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.shutdown()
        self.close_connections()
        self.server_close()


UPSTREAM_BODIES = {
    "/proxy/buffered": (b'{"upstream": true, "items": [1, 2, 3]}', "application/json"),
    "/proxy/corrupt": (b'{"upstream": true, "items": [1, 2, 3], "name": "corrupt me"}', "application/json"),
    "/proxy/drip": (b"0123456789abcdef" * 32, "text/plain"),
}


class UpstreamHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with self.server.lock:
            self.server.received[self.path] += 1
        try:
            if self.path in ("/proxy/streamed", "/proxy/streamed-cut"):
                # The head alone, then the body in pieces: larger than any one read of the server, so it streams.
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(STREAMED_BODY))
                self.wfile.flush()
                for offset in range(0, len(STREAMED_BODY), 65536):
                    self.wfile.write(STREAMED_BODY[offset:offset + 65536])
                self.wfile.flush()
            elif self.path in UPSTREAM_BODIES:
                body, content_type = UPSTREAM_BODIES[self.path]
                # Head and body in one write: the server reads them together and takes the whole path.
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                                 % (content_type.encode(), len(body), body))
                self.wfile.flush()
            else:
                self.send_error(404)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # a cut stream: the server closed its upstream connection


# -- the clients -----------------------------------------------------------------------------------------------


def read_until_closed(sock, seconds):
    """Reads until the server closes, resets, or `seconds` pass; returns (bytes, how it ended)."""
    data = b""
    deadline = time.monotonic() + seconds
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return data, "timeout"
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                return data, "closed"
            data += chunk
    except socket.timeout:
        return data, "timeout"
    except ConnectionResetError:
        return data, "reset"
    except ssl.SSLError as error:
        return data, f"ssl: {error.reason}"


def split_response(data):
    """(status, headers as a lower-cased dict, body) of one HTTP/1.1 response read whole."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/1.1 ") else None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


class Worker(threading.Thread):
    """One client thread: picks kinds of its group (each once in order, then at random by weight) until `stop`."""

    def __init__(self, group, index, servers, stop):
        super().__init__(name=f"soak-{group}-{index}", daemon=True)
        self.group = group
        self.servers = servers
        self.main = servers["main"]
        self.stop = stop
        self.random = random.Random(SEED * 1000 + index)
        self.sent = collections.Counter()       # requests and attempts made, per kind
        self.expected = collections.Counter()   # journal entries they must have made, per kind
        self.unexpected = collections.Counter()
        self.examples = []
        self.kinds = [name for name, spec in KINDS.items() if spec.group == group and spec.weight > 0]
        self.weights = [KINDS[name].weight for name in self.kinds]

    def run(self):
        first_round = list(self.kinds)
        while not self.stop.is_set():
            kind = first_round.pop(0) if first_round else self.random.choices(self.kinds, self.weights)[0]
            try:
                self.play(kind)
            except Exception as error:  # noqa: BLE001 — counted and shown; the worker goes on with a new connection
                self.fail(kind, f"{type(error).__name__}: {error}")
                self.drop_connection()
        self.drop_connection()

    def count(self, kind, requests=1, entries=None):
        self.sent[kind] += requests
        self.expected[kind] += requests if entries is None else entries

    def fail(self, kind, message):
        self.unexpected[kind] += 1
        if len(self.examples) < 5:
            self.examples.append(f"{kind}: {message}")

    def drop_connection(self):
        pass


def client_context(alpn, check_hostname=True, ca=None):
    context = ssl.create_default_context(cafile=ca)
    context.check_hostname = check_hostname
    context.set_alpn_protocols(alpn)
    return context


class HTTP1Worker(Worker):
    """HTTP/1.1 on the plain port: the kinds the soak began with."""

    def __init__(self, *args):
        super().__init__(*args)
        self.port = self.main.port
        self.connection = None
        self.kept_alive_reused = 0
        self.kept_alive_opened = 0

    def play(self, kind):
        if kind in KEPT_ALIVE:
            self.kept_alive(kind)
        elif kind in ONE_SHOT:
            self.one_shot(kind)
        else:
            getattr(self, kind.replace("-", "_"))(kind)

    def drop_connection(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def kept_alive(self, kind):
        method, path, statuses = KEPT_ALIVE[kind]
        if self.connection is None:
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=IO_TIMEOUT_S)
            self.connection.connect()
            self.kept_alive_opened += 1
        else:
            self.kept_alive_reused += 1
        body = None
        headers = {"X-Kind": kind}
        if method == "POST":
            body = json.dumps({"note": "x" * self.random.randint(16, 1024)}).encode()
            headers["Content-Type"] = "application/json"
        # request() returns once http.client has written the request with sendall: sent.
        self.connection.request(method, path, body=body, headers=headers)
        self.count(kind)
        response = self.connection.getresponse()
        response.read()
        if response.status not in statuses:
            self.fail(kind, f"status {response.status}")
        if response.will_close:
            self.fail(kind, "the server closed a kept-alive connection")
            self.drop_connection()

    def one_shot(self, kind):
        path, give_up = ONE_SHOT[kind]
        with socket.create_connection(("127.0.0.1", self.port), timeout=IO_TIMEOUT_S) as client:
            client.sendall(f"GET {path} HTTP/1.1\r\nHost: soak\r\nX-Kind: {kind}\r\n\r\n".encode())
            self.count(kind)
            _, ended = read_until_closed(client, give_up or IO_TIMEOUT_S)
            if give_up is None and ended == "timeout":
                self.fail(kind, f"no close within {IO_TIMEOUT_S} s")
        # Leaving the with-block closes the socket: a client giving up mid-response.

    def new_connection(self, kind):
        """A new connection per request: half announce Connection: close, half half-close after sending."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=IO_TIMEOUT_S) as client:
            half_close = self.random.random() < 0.5
            close = "" if half_close else "Connection: close\r\n"
            client.sendall(f"GET /fresh HTTP/1.1\r\nHost: soak\r\n{close}\r\n".encode())
            self.count(kind)
            if half_close:
                client.shutdown(socket.SHUT_WR)
            data, ended = read_until_closed(client, IO_TIMEOUT_S)
            if not data.startswith(b"HTTP/1.1 200 ") or not data.endswith(b"fresh") or ended != "closed":
                self.fail(kind, f"{ended}: {data[:60]!r}")

    def pipelined(self, kind):
        """2–8 requests in one write; the last asks to close, so the answers end with the connection."""
        count = self.random.randint(2, 8)
        batch = b"GET /pipelined HTTP/1.1\r\nHost: soak\r\n\r\n" * (count - 1)
        batch += b"GET /pipelined HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n"
        with socket.create_connection(("127.0.0.1", self.port), timeout=IO_TIMEOUT_S) as client:
            client.sendall(batch)
            self.count(kind, count)
            data, ended = read_until_closed(client, IO_TIMEOUT_S)
            answered = data.count(b"HTTP/1.1 200 ")
            if answered != count or ended != "closed":
                self.fail(kind, f"{answered} of {count} answered, then {ended}")

    def malformed(self, kind):
        if self.random.random() < 0.3:
            # Random bytes; the first is neither CR nor LF, so it cannot be skipped as an empty line.
            payload = bytes([self.random.randrange(0x21, 0x7F)]) + self.random.randbytes(self.random.randint(15, 1023))
        else:
            payload = self.random.choice(MALFORMED)
        with socket.create_connection(("127.0.0.1", self.port), timeout=IO_TIMEOUT_S) as client:
            client.sendall(payload)
            self.count(kind)
            # Our FIN ends a request cut short (or random bytes with no line end yet): journaled as abandoned.
            client.shutdown(socket.SHUT_WR)
            data, ended = read_until_closed(client, IO_TIMEOUT_S)
            if ended == "timeout" or (data and not data.startswith((b"HTTP/1.1 4", b"HTTP/1.1 5"))):
                self.fail(kind, f"{ended}: {data[:60]!r}")


class HTTPSWorker(Worker):
    """HTTP/1.1 over TLS (ALPN http/1.1) on the TLS port, and the TLS handshake faults, each chosen by the server
    name the client asks for (soak-NAME.localhost: the soak-tls-*.json scenarios; expired.localhost: the catalogue)."""

    def __init__(self, *args):
        super().__init__(*args)
        ca = os.path.join(self.main.tls_dir, "ca.pem")
        self.context = client_context(["http/1.1"], ca=ca)
        # `*.localhost` is one label under a single-label name, which OpenSSL's host check does not match: the
        # soak-*.localhost names are checked against the CA only.
        self.context_by_ca = client_context(["http/1.1"], check_hostname=False, ca=ca)
        self.connection = None

    def drop_connection(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def connect(self, server_name="localhost", timeout=IO_TIMEOUT_S):
        """A TCP connection to the TLS port, not yet wrapped: an attempt counts once it is connected."""
        return socket.create_connection(("127.0.0.1", self.main.tls_port), timeout=timeout)

    def wrap(self, sock, server_name="localhost"):
        context = self.context if server_name == "localhost" else self.context_by_ca
        return context.wrap_socket(sock, server_hostname=server_name)

    def play(self, kind):
        if kind in ("tls-keep-alive", "tls-post"):
            self.kept_alive(kind)
        elif kind == "tls-new-connection":
            self.one_shot(kind, "/tls/fresh", b"fresh")
        elif kind == "tls-reset":
            self.one_shot(kind, "/tls/fault/reset", None, status=None)
        elif kind == "tls-truncate-body":
            self.one_shot(kind, "/tls/fault/truncate-body", b'{"id":"a-1')
        elif kind == "tls-no-close-notify":
            self.one_shot(kind, "/tls/fault/no-close-notify", b"close-delimited body")
        elif kind == "tls-slow-handshake":
            self.one_shot(kind, "/tls/slow", b"slow", server_name="soak-slow.localhost")
        else:
            self.handshake_fault(kind)

    def kept_alive(self, kind):
        if self.connection is None:
            self.connection = http.client.HTTPSConnection("127.0.0.1", self.main.tls_port, timeout=IO_TIMEOUT_S,
                                                          context=self.context)
            self.connection.connect()
        if kind == "tls-post":
            body = json.dumps({"note": "y" * self.random.randint(16, 4096)}).encode()
            self.connection.request("POST", "/tls/post", body=body, headers={"Content-Type": "application/json"})
            statuses = {201}
        else:
            self.connection.request("GET", "/tls/plain")
            statuses = {200}
        self.count(kind)
        response = self.connection.getresponse()
        response.read()
        if response.status not in statuses:
            self.fail(kind, f"status {response.status}")
        if response.will_close:
            self.fail(kind, "the server closed a kept-alive connection")
            self.drop_connection()

    def one_shot(self, kind, path, expect, server_name="localhost", status=200):
        """One request on a new connection, TLS run over memory BIOs so that the TCP end (FIN or RST) and whether
        close_notify came before it are seen as they were, not as Python's ssl module reports them."""
        raw = self.connect()
        with raw:
            context = self.context if server_name == "localhost" else self.context_by_ca
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
            while True:
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    raw.sendall(outgoing.read())
                    chunk = raw.recv(65536)
                    if not chunk:
                        raise ConnectionError("closed during the handshake")
                    incoming.write(chunk)
            tls.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
            raw.sendall(outgoing.read())
            self.count(kind)
            ciphertext, ended = read_until_closed(raw, IO_TIMEOUT_S)
        incoming.write(ciphertext)
        data, close_notify = b"", False
        while True:
            try:
                piece = tls.read(65536)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                close_notify = True
                break
            if not piece:  # SSLObject.read answers b"" for close_notify: no EOF is ever written to `incoming`
                close_notify = True
                break
            data += piece
        got, _, body = split_response(data) if data else (None, {}, b"")
        wanted_end, wanted_notify = {"tls-reset": ("reset", False), "tls-no-close-notify": ("closed", False),
                                     "tls-truncate-body": ("closed", None)}.get(kind, ("closed", True))
        if ended != wanted_end or (wanted_notify is not None and close_notify != wanted_notify):
            self.fail(kind, f"TCP ended {ended}, close_notify {close_notify}: {data[:60]!r}")
        elif status is not None and (got != status or (expect is not None and body != expect)):
            self.fail(kind, f"status {got}: {body[:60]!r}")

    def handshake_fault(self, kind):
        """An attempt that never becomes a request: a connection entry of the journal."""
        server_name, timeout, expected = {
            "tls-handshake-reset": ("soak-reset.localhost", IO_TIMEOUT_S, (ConnectionResetError,)),
            "tls-alert": ("soak-alert.localhost", IO_TIMEOUT_S, (ssl.SSLError,)),
            "tls-hang": ("soak-hang.localhost", HANG_WAIT_S, (TimeoutError, socket.timeout)),
            "tls-expired": ("expired.localhost", IO_TIMEOUT_S, (ssl.SSLCertVerificationError,)),
            "tls-idle": ("localhost", IO_TIMEOUT_S, ()),
        }[kind]
        sock = self.connect()
        self.count(kind)
        try:
            sock.settimeout(timeout)
            context = self.context if server_name in ("localhost", "expired.localhost") else self.context_by_ca
            wrapped = context.wrap_socket(sock, server_hostname=server_name)
            wrapped.close()  # completed, and left without a request
            if expected:
                self.fail(kind, "the handshake completed")
        except expected as error:
            if kind == "tls-alert" and "HANDSHAKE_FAILURE" not in str(error):
                self.fail(kind, f"{type(error).__name__}: {error}")
            elif kind == "tls-expired" and "expired" not in str(error):
                self.fail(kind, f"{type(error).__name__}: {error}")
        finally:
            sock.close()


class H2Client:
    """An HTTP/2 client connection on a raw socket (the h2 package): what each stream got, and how it ended."""

    def __init__(self, port, context=None):
        sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname="localhost")
            if sock.selected_alpn_protocol() != "h2":
                sock.close()
                raise RuntimeError(f"ALPN chose {sock.selected_alpn_protocol()}")
        self.sock = sock
        self.connection = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        self.connection.initiate_connection()
        self.streams = {}
        self.goaway = None      # (error code, last stream id) of the server's GOAWAY
        self.ended = None       # how the connection ended: eof, a reset, a protocol error
        self.pongs = 0
        self.settings = False
        self.flush()

    def flush(self):
        data = self.connection.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, path):
        stream = self.connection.get_next_available_stream_id()
        self.connection.send_headers(stream, [(":method", "GET"), (":path", path), (":scheme", "https"),
                                              (":authority", "localhost")], end_stream=True)
        self.streams[stream] = {"status": None, "data": b"", "ended": False, "reset": None}
        return stream

    def done(self, stream):
        state = self.streams[stream]
        return state["ended"] or state["reset"] is not None

    def pump(self, until, timeout=IO_TIMEOUT_S):
        """Reads and handles frames until `until()` holds, the connection ends or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while not until() and self.ended is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, ssl.SSLError) as error:
                self.ended = f"{type(error).__name__}"
                break
            if not data:
                self.ended = "eof"
                break
            try:
                events = self.connection.receive_data(data)
            except h2.exceptions.ProtocolError as error:
                self.ended = f"ProtocolError: {str(error)[:40]}"
                break
            for event in events:
                self.handle(event)
            try:
                self.flush()
            except OSError as error:
                self.ended = f"{type(error).__name__}"
        return until()

    def handle(self, event):
        stream = self.streams.get(getattr(event, "stream_id", None))
        if isinstance(event, h2.events.ResponseReceived) and stream is not None:
            stream["status"] = int(dict(event.headers)[b":status"])
        elif isinstance(event, h2.events.DataReceived) and stream is not None:
            stream["data"] += event.data
            self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded) and stream is not None:
            stream["ended"] = True
        elif isinstance(event, h2.events.StreamReset) and stream is not None:
            stream["reset"] = event.error_code
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaway = (event.error_code, event.last_stream_id)
        elif isinstance(event, h2.events.PingAckReceived):
            self.pongs += 1
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self.settings = True

    def pinged(self):
        """A PING and its ACK: every frame written before it has been read by the server."""
        before = self.pongs
        self.connection.ping(b"soaksoak")
        self.flush()
        if not self.pump(lambda: self.pongs > before):
            raise RuntimeError(f"no PING ACK ({self.ended})")

    def close(self):
        self.sock.close()


class H2Worker(Worker):
    """HTTP/2 over TLS (group h2, ALPN h2) or with prior knowledge on the plain port (group h2c)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.tls = self.group == "h2"
        self.port = self.main.tls_port if self.tls else self.main.port
        self.context = client_context(["h2"], ca=os.path.join(self.main.tls_dir, "ca.pem")) if self.tls else None
        self.client = None
        self.batches_left = 0
        self.prefix = f"{self.group}-"
        self.multiplexed = [name for name in self.kinds if name[len(self.prefix):] in H2_STREAMS]
        self.multiplexed_weights = [KINDS[name].weight for name in self.multiplexed]

    def drop_connection(self):
        if self.client is not None:
            self.client.close()
            self.client = None

    def play(self, kind):
        name = kind[len(self.prefix):]
        if name in H2_STREAMS:
            self.batch(kind)
        else:
            getattr(self, "own_" + name.replace("-", "_"))(kind, H2_CONNECTIONS[name][0])

    def batch(self, kind):
        """1–8 concurrent streams on the kept connection: `kind` and others chosen at random; kept for 1–10 batches,
        then closed without a GOAWAY (every stream on it has ended)."""
        if self.client is None:
            self.client = H2Client(self.port, self.context)
            self.batches_left = self.random.randint(1, 10)
        kinds = [kind] + self.random.choices(self.multiplexed, self.multiplexed_weights, k=self.random.randint(0, 7))
        streams = {self.client.request(H2_STREAMS[name[len(self.prefix):]][0]): name for name in kinds}
        self.client.flush()
        for name in kinds:
            self.count(name)
        resets = [stream for stream, name in streams.items() if name.endswith("client-reset")]
        if resets:
            # The server has read their HEADERS (and journaled them) once it answered a PING written after them.
            self.client.pinged()
            for stream in resets:
                self.client.connection.reset_stream(stream, error_code=h2.errors.ErrorCodes.CANCEL)
            self.client.flush()
        waited = [stream for stream in streams if stream not in resets]
        if not self.client.pump(lambda: all(self.client.done(stream) for stream in waited)):
            for stream in waited:
                if not self.client.done(stream):
                    self.fail(streams[stream], f"stream {stream} did not end ({self.client.ended})")
            self.drop_connection()
            return
        for stream in waited:
            self.judge(streams[stream], self.client.streams[stream])
        self.batches_left -= 1
        if self.batches_left <= 0:
            self.drop_connection()

    def judge(self, kind, state):
        name = kind[len(self.prefix):]
        status, data, reset = state["status"], state["data"], state["reset"]
        ok = {"streams": status == 200 and reset is None and data.startswith(b'{"id"'),
              "delay": status == 200 and reset is None,
              "refused": reset == h2.errors.ErrorCodes.REFUSED_STREAM and status is None,
              "rst-body": status == 200 and data == b"01234" and reset == h2.errors.ErrorCodes.INTERNAL_ERROR,
              "truncate-body": status == 200 and reset == h2.errors.ErrorCodes.INTERNAL_ERROR,
              "http1-only": reset == h2.errors.ErrorCodes.HTTP_1_1_REQUIRED}[name]
        if not ok:
            self.fail(kind, f"status {status}, {len(data)} bytes, reset {reset}")

    def own(self, path):
        self.drop_connection()
        client = H2Client(self.port, self.context)
        stream = client.request(path) if path else None
        client.flush()
        return client, stream

    def own_goaway_previous(self, kind, path):
        client, stream = self.own(path)
        self.count(kind)
        try:
            # GOAWAY naming stream 0 as the last processed, and then the server closes.
            client.pump(lambda: False, timeout=IO_TIMEOUT_S)
            if client.goaway is None or client.goaway[1] != 0 or client.ended is None:
                self.fail(kind, f"goaway {client.goaway}, ended {client.ended}")
        finally:
            client.close()

    def own_goaway_current(self, kind, path):
        client, stream = self.own(path)
        self.count(kind)
        try:
            client.pump(lambda: False, timeout=IO_TIMEOUT_S)  # until the server closes, once the stream is done
            # The h2 package ends its connection at the first GOAWAY (the graceful notice) and refuses the response's
            # frames after it: then it never reported the GOAWAY it had read.
            refused = (client.ended or "").startswith("ProtocolError: Invalid input ConnectionInputs.RECV_")
            if (client.goaway is None and not refused) or client.ended is None:
                self.fail(kind, f"goaway {client.goaway}, ended {client.ended}")
        finally:
            client.close()

    def own_bad_hpack(self, kind, path):
        client, stream = self.own(path)
        self.count(kind)
        try:
            # The h2 package refuses the header block; the server's stream then hangs until we close.
            client.pump(lambda: False, timeout=IO_TIMEOUT_S)
            if not (client.ended or "").startswith("ProtocolError"):
                self.fail(kind, f"ended {client.ended}")
        finally:
            client.close()

    def own_client_goaway(self, kind, path):
        client, stream = self.own(path)
        self.count(kind)
        try:
            client.pinged()
            client.connection.close_connection(error_code=h2.errors.ErrorCodes.ENHANCE_YOUR_CALM)
            client.flush()
        finally:
            client.close()

    def own_tcp_reset(self, kind, path):
        client, stream = self.own(path)
        self.count(kind)
        try:
            client.pump(lambda: False, timeout=IO_TIMEOUT_S)
            if client.ended not in ("ConnectionResetError", "eof", "SSLError", "SSLEOFError"):
                self.fail(kind, f"ended {client.ended}")
        finally:
            client.close()

    def own_goaway_idle(self, kind, path):
        """No stream, the client's GOAWAY: a connection entry of its own; the server then closes."""
        client, _ = self.own(None)
        self.count(kind)
        try:
            if not client.pump(lambda: client.settings):
                raise RuntimeError(f"no SETTINGS ({client.ended})")
            client.connection.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR)
            client.flush()
            client.pump(lambda: False, timeout=IO_TIMEOUT_S)
            if client.ended is None:
                self.fail(kind, "the server did not close")
        finally:
            client.close()


class WebSocketWorker(Worker):
    """WebSocket sessions with websockets' asyncio client: ws on the plain port, wss on the TLS port. Not its sync
    client: over TLS, its reading thread's SSL_read and the caller's SSL_write share one OpenSSL object, which is
    not thread-safe, and now and then the upgrade request is lost on the client's side (the same loop against
    `openssl s_server -www` stalled 3 times in 9 connections); asyncio's TLS runs in one thread."""

    def __init__(self, *args):
        super().__init__(*args)
        if self.group == "wss":
            self.base = f"wss://127.0.0.1:{self.main.tls_port}"
            self.context = client_context(["http/1.1"], ca=os.path.join(self.main.tls_dir, "ca.pem"))
        else:
            self.base = f"ws://127.0.0.1:{self.main.port}"
            self.context = None

    def session(self, path, **options):
        extra = {"ssl": self.context, "server_hostname": "localhost"} if self.context else {}
        return websocket_connect(self.base + path, open_timeout=IO_TIMEOUT_S, close_timeout=IO_TIMEOUT_S,
                                 ping_interval=None, proxy=None, compression=None, **extra, **options)

    def play(self, kind):
        asyncio.run(self.play_async(kind))

    @staticmethod
    async def receive(ws):
        return await asyncio.wait_for(ws.recv(), IO_TIMEOUT_S)

    async def play_async(self, kind):
        name = kind.split("-", 1)[1]
        if name == "echo":
            async with self.session("/ws/echo") as ws:
                self.count(kind)  # the upgrade was written (and answered 101)
                for _ in range(self.random.randint(1, 5)):
                    message = "e" * self.random.randint(1, 4096)
                    await ws.send(message)
                    if await self.receive(ws) != message:
                        self.fail(kind, "echo differs")
        elif name == "drop":
            async with self.session("/ws/drop") as ws:
                self.count(kind)
                try:
                    first = await self.receive(ws)
                    await self.receive(ws)
                    self.fail(kind, "no drop")
                except ConnectionClosed as closed:
                    if closed.rcvd is not None or not first.startswith("hello"):
                        self.fail(kind, f"{closed!r}")
        elif name == "close":
            code = self.random.choice(WS_CLOSE_CODES)
            async with self.session(f"/ws/close/{code}") as ws:
                self.count(kind)
                try:
                    await self.receive(ws)
                    await self.receive(ws)
                    self.fail(kind, "no close")
                except ConnectionClosed as closed:
                    if closed.rcvd is None or closed.rcvd.code != code:
                        self.fail(kind, f"{closed!r}")
        elif name == "large":
            async with self.session("/ws/large", max_size=None) as ws:
                self.count(kind)
                if len(await self.receive(ws)) != 1048576:
                    self.fail(kind, "not 1 MiB")
        elif name == "too-large":
            async with self.session("/ws/too-large", max_size=1048576) as ws:
                self.count(kind)
                try:
                    await self.receive(ws)
                    self.fail(kind, "a 2 MiB message was taken")
                except ConnectionClosed as closed:
                    if closed.sent is None or closed.sent.code != 1009:
                        self.fail(kind, f"{closed!r}")


class ProxyWorker(Worker):
    """HTTP/1.1 to the proxied routes, kept alive but for the cut stream, which ends its connection."""

    PATHS = {"proxy-buffered": "/proxy/buffered", "proxy-streamed": "/proxy/streamed",
             "proxy-corrupt": "/proxy/corrupt", "proxy-drip": "/proxy/drip", "proxy-refused": "/proxy/refused"}

    def __init__(self, *args):
        super().__init__(*args)
        self.connection = None

    def drop_connection(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def play(self, kind):
        if kind == "proxy-streamed-cut":
            with socket.create_connection(("127.0.0.1", self.main.port), timeout=IO_TIMEOUT_S) as client:
                client.sendall(b"GET /proxy/streamed-cut HTTP/1.1\r\nHost: soak\r\n\r\n")
                self.count(kind)
                data, ended = read_until_closed(client, IO_TIMEOUT_S)
            status, headers, body = split_response(data)
            if (status != 200 or ended != "closed" or headers.get("content-length") != str(len(STREAMED_BODY))
                    or body != STREAMED_BODY[:STREAMED_CUT]):
                self.fail(kind, f"status {status}, {ended}, {len(body)} bytes")
            return
        if self.connection is None:
            self.connection = http.client.HTTPConnection("127.0.0.1", self.main.port, timeout=IO_TIMEOUT_S)
            self.connection.connect()
        self.connection.request("GET", self.PATHS[kind])
        self.count(kind)
        response = self.connection.getresponse()
        body = response.read()
        if kind == "proxy-refused":
            ok = response.status == 502 and b"refused" in body
        elif kind == "proxy-streamed":
            ok = response.status == 200 and body == STREAMED_BODY
        elif kind == "proxy-corrupt":
            ok = response.status == 200 and body != UPSTREAM_BODIES["/proxy/corrupt"][0]
        else:
            ok = response.status == 200 and body == UPSTREAM_BODIES[self.PATHS[kind]][0]
        if not ok:
            self.fail(kind, f"status {response.status}, {len(body)} bytes: {body[:60]!r}")
        if response.will_close:
            self.fail(kind, "the server closed a kept-alive connection")
            self.drop_connection()


class ResourceWorker(Worker):
    """The 1 MiB resource: whole, or cut at RESOURCE_CUT and resumed with Range and If-Range (HTTP/1.1)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.whole = None

    def get(self, path, headers=""):
        with socket.create_connection(("127.0.0.1", self.main.port), timeout=IO_TIMEOUT_S) as client:
            client.sendall(f"GET {path} HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n{headers}\r\n".encode())
            return client, *read_until_closed(client, IO_TIMEOUT_S)

    def play(self, kind):
        if kind == "resource-full" or self.whole is None:
            _, data, ended = self.get("/resource/full")
            self.count("resource-full")
            status, headers, body = split_response(data)
            if status != 200 or len(body) != RESOURCE_SIZE or ended != "closed":
                self.fail("resource-full", f"status {status}, {len(body)} bytes, {ended}")
                return
            self.whole = hashlib.sha256(body).hexdigest()
            if kind == "resource-full":
                return
        _, data, ended = self.get("/resource/cut")
        self.count("resource-cut")
        status, headers, first = split_response(data)
        if status != 200 or headers.get("content-length") != str(RESOURCE_SIZE) or len(first) != RESOURCE_CUT:
            self.fail("resource-cut", f"status {status}, {len(first)} bytes, {ended}")
            return
        _, data, ended = self.get("/files/blob.bin", f"Range: bytes={len(first)}-\r\nIf-Range: {headers['etag']}\r\n")
        self.count("resource-resume")
        status, headers, rest = split_response(data)
        if (status != 206 or headers.get("content-range") != f"bytes {RESOURCE_CUT}-{RESOURCE_SIZE - 1}/{RESOURCE_SIZE}"
                or hashlib.sha256(first + rest).hexdigest() != self.whole):
            self.fail("resource-resume", f"status {status}, {len(rest)} bytes, {headers.get('content-range')}")


class NetworkWorker(Worker):
    """The network server's one client: each step changes the network through the admin port (one journal entry of
    kind network per POST), uses it, and puts it back — a seeded timeline of changes whose every effect on this
    worker's own connections is known."""

    def __init__(self, *args):
        super().__init__(*args)
        self.network = self.servers["network"]

    def change(self, **change):
        self.network.admin("network", change)
        self.count("net-change")

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.network.port), timeout=IO_TIMEOUT_S)

    def get(self, connection, path):
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()

    def play(self, kind):
        getattr(self, kind.replace("-", "_"))(kind)

    def net_conditions(self, kind):
        """Latency and a downlink cap on every connection: 1–4 requests answered, each journaled as shaped."""
        self.change(conditions={"latencyMs": self.random.choice([5, 10, 20]), "downlink": "1MiB/s",
                                "sliceBytes": 1024, "sliceIntervalMs": 1})
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.network.port, timeout=IO_TIMEOUT_S)
            with contextlib.closing(connection):
                for _ in range(self.random.randint(1, 4)):
                    connection.request("GET", "/net/shaped")
                    self.count(kind)
                    response = connection.getresponse()
                    if response.status != 200 or len(response.read()) != 4096:
                        self.fail(kind, f"status {response.status}")
        finally:
            self.change(conditions="none")

    def net_freeze(self, kind):
        """A request on a kept connection, a freeze of the connections open, another request on it: answered once
        the freeze is over."""
        connection = http.client.HTTPConnection("127.0.0.1", self.network.port, timeout=IO_TIMEOUT_S)
        with contextlib.closing(connection):
            connection.request("GET", "/net/plain")
            self.count(kind)
            if connection.getresponse().read() != b"plain":
                self.fail(kind, "before the freeze")
            self.change(connections={"freezeMs": FREEZE_MS})
            began = time.monotonic()
            connection.request("GET", "/net/plain")
            self.count(kind)
            body = connection.getresponse().read()
            waited = time.monotonic() - began
            if body != b"plain" or waited < FREEZE_FLOOR_S:
                self.fail(kind, f"answered after {waited:.3f} s: {body[:20]!r}")

    def net_drop(self, kind):
        """A request in flight (a hang, journaled), then every connection dropped: the client sees RST."""
        since = self.network.recorded()
        with self.connect() as client:
            client.sendall(b"GET /net/hang HTTP/1.1\r\nHost: soak\r\n\r\n")
            self.count(kind)
            self.network.wait_for(1, route="net-hang", since=since)
            self.change(connections="drop")
            data, ended = read_until_closed(client, IO_TIMEOUT_S)
            if ended != "reset" or data:
                self.fail(kind, f"{ended}: {data[:40]!r}")

    def net_refuse(self, kind):
        """A refusing listener: the kernel answers the connect with RST and nothing reaches the server."""
        self.change(listener="refuse")
        try:
            for _ in range(self.random.randint(1, 3)):
                try:
                    self.connect().close()
                    self.fail(kind, "connected")
                except ConnectionRefusedError:
                    self.count(kind, entries=0)
        finally:
            self.change(listener="up")

    def net_reset_on_accept(self, kind):
        """Accepted, then reset: each attempt is a connection entry."""
        self.change(listener="reset-on-accept")
        try:
            for _ in range(self.random.randint(1, 3)):
                since = self.network.recorded()
                try:
                    client = self.connect()
                except ConnectionResetError:
                    # Connected, and reset before connect() returned: an attempt the server accepted all the same.
                    self.count(kind)
                else:
                    with client:
                        self.count(kind)
                        data, ended = read_until_closed(client, IO_TIMEOUT_S)
                        if ended not in ("reset", "closed") or data:
                            self.fail(kind, f"{ended}: {data[:40]!r}")
                # Each attempt journaled before the next, so that none is still being accepted when the listener
                # comes back.
                self.network.wait_for(1, connection="true", since=since)
        finally:
            self.change(listener="up")

    def net_stall(self, kind):
        """A stalled listener: the connection is accepted (a connection entry) and frozen with the request written
        on it until the listener is up again, when the request is answered."""
        since = self.network.recorded()
        self.change(listener="stall")
        up = False
        try:
            with self.connect() as client:
                client.sendall(b"GET /net/stalled HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")
                self.count(kind)
                self.count("net-stall-attempt")
                self.network.wait_for(1, connection="true", since=since + 1)  # after the change's own entry
                self.change(listener="up")
                up = True
                data, ended = read_until_closed(client, IO_TIMEOUT_S)
                if not data.startswith(b"HTTP/1.1 200 ") or not data.endswith(b"stalled"):
                    self.fail(kind, f"{ended}: {data[:40]!r}")
        finally:
            if not up:
                self.change(listener="up")


WORKER_CLASSES = {H1: HTTP1Worker, HTTPS: HTTPSWorker, "h2": H2Worker, "h2c": H2Worker, "ws": WebSocketWorker,
                  "wss": WebSocketWorker, PROXY: ProxyWorker, RESOURCE: ResourceWorker, NETWORK: NetworkWorker}


# -- the run ---------------------------------------------------------------------------------------------------


class Sampler(threading.Thread):
    """VmRSS, descriptors and the server's own view, of each server every `interval` seconds."""

    def __init__(self, servers, began, interval):
        super().__init__(name="soak-sampler", daemon=True)
        self.servers, self.began, self.interval = servers, began, interval
        self.samples = {name: [] for name in servers}
        self.done = threading.Event()

    def sample(self):
        for name, server in self.servers.items():
            health = server.admin("health")
            self.samples[name].append({"t": time.monotonic() - self.began,
                                       "rss": proc_status_kb(server.pid, "VmRSS") / 1024,
                                       "fds": fd_count(server.pid), "connections": health["connections"],
                                       "journal": health["journal"]["totalRecorded"]})

    def run(self):
        while not self.done.wait(self.interval):
            if any(server.process.poll() is not None for server in self.servers.values()):
                return
            try:
                self.sample()
            except OSError:
                return


def scenario_copy(folder, upstream):
    """scripts/soak-scenario.json with `proxy.upstream` set to this run's upstream."""
    with open(SCENARIO) as handle:
        scenario = json.load(handle)
    scenario["proxy"]["upstream"] = upstream
    scenario.pop("$schema", None)
    path = os.path.join(folder, "soak-scenario.json")
    with open(path, "w") as handle:
        json.dump(scenario, handle)
    return path


def read_journal(path, prefix=""):
    """(lines, {(key, protocol): Counter(outcome)}) of an NDJSON journal file."""
    tally = collections.defaultdict(collections.Counter)
    lines = 0
    with open(path, "rb") as handle:
        for line in handle:
            lines += 1
            entry = json.loads(line)
            tally[(journal_key(entry, prefix), journal_protocol(entry))][journal_outcome(entry)] += 1
    return lines, tally


def rss_growth(samples):
    """(MB grown from the first three samples after warm-up to the last three, requests journaled meanwhile)."""
    window = [sample for sample in samples if sample["t"] >= SECONDS * 0.25]
    if len(window) < 2:
        return float("nan"), 0
    head, tail = window[:3], window[-3:]
    growth = sum(s["rss"] for s in tail) / len(tail) - sum(s["rss"] for s in head) / len(head)
    return growth, window[-1]["journal"] - window[0]["journal"]


def main():
    folder = tempfile.mkdtemp(prefix="faultline-soak-")
    failures = []
    lines = []
    servers = {}
    upstream = None
    try:
        upstream = Upstream()
        servers["main"] = Server("main", folder, [scenario_copy(folder, upstream.url), *TLS_SCENARIOS], tls=True,
                                 extra=["--max-journal", MAX_JOURNAL] if MAX_JOURNAL else [])
        servers["network"] = Server("network", folder, [NETWORK_SCENARIO],
                                    extra=["--max-journal", str(NETWORK_MAX_JOURNAL)])
        main_server, network = servers["main"], servers["network"]
        capacity = main_server.admin("health")["journal"]["capacity"]
        fds_before = {name: settled_fd_count(server.pid) for name, server in servers.items()}
        # The server's bounded stores are filled before the clock starts, so that after warm-up nothing it keeps
        # should grow: the journal ring, and the Retry-After judgements (kept up to twice their 10,000 before
        # being trimmed; each pipelined 503 after the first is judged as the retry of the one before).
        prefilled = collections.Counter()
        prefilled["prefill"] = prefill(main_server.port, "/prefill", capacity, 200)
        prefilled["prefill-retry-after"] = prefill(main_server.port, "/prefill/unavailable", RETRY_AFTER_PREFILL, 503)
        prefilled["net-prefill"] = prefill(network.port, "/prefill", NETWORK_MAX_JOURNAL, 200)

        interval = max(1.0, min(5.0, SECONDS / 30))
        began = time.monotonic()
        sampler = Sampler(servers, began, interval)
        sampler.sample()
        sampler.start()
        stop = threading.Event()
        workers = []
        for group in GROUPS:
            count = WORKERS if group == H1 else 1 if group == NETWORK else PROTOCOL_WORKERS * (2 if group == HTTPS else 1)
            for _ in range(count):
                workers.append(WORKER_CLASSES[group](group, len(workers), servers, stop))
        for worker in workers:
            worker.start()
        stop.wait(SECONDS)
        stop.set()
        for worker in workers:
            worker.join(timeout=IO_TIMEOUT_S * 3)
        clients_closed = time.monotonic()
        sampler.done.set()
        sampler.join(timeout=IO_TIMEOUT_S)
        load_seconds = clients_closed - began
        for server in servers.values():
            if server.process.poll() is not None:
                raise RuntimeError(f"the {server.name} server exited during the load (code {server.process.returncode})")
        stuck = [worker.name for worker in workers if worker.is_alive()]

        # Descriptors: back to the count before the load, within FD_DEADLINE_S of the clients closing — and of the
        # upstream closing the idle connections the server's pool keeps to it (up to 64, by design). Admin calls go
        # to the admin port, whose connection would count: measured before any.
        upstream.close_connections()
        fds_after = {}
        for name, server in servers.items():
            fds_after[name] = fd_count(server.pid)
            while fds_after[name] != fds_before[name] and time.monotonic() - clients_closed < FD_DEADLINE_S:
                time.sleep(0.05)
                fds_after[name] = fd_count(server.pid)
        fds_seconds = time.monotonic() - clients_closed

        quiet = {name: server.quiet() for name, server in servers.items()}
        counters = {name: server.admin("requests/count")["counters"] for name, server in servers.items()}

        sent = collections.Counter(prefilled)
        expected = collections.Counter(prefilled)
        unexpected = collections.Counter()
        examples = []
        for worker in workers:
            sent.update(worker.sent)
            expected.update(worker.expected)
            unexpected.update(worker.unexpected)
            examples += worker.examples
        upstream_received = dict(upstream.received)

        # The journal files, counted by (key, protocol), with outcomes: `net:` keys are the network server's.
        file_lines, tally = {}, collections.defaultdict(collections.Counter)
        for name, server in servers.items():
            file_lines[name], counted = read_journal(server.journal_path, "net:" if name == "network" else "")
            for key, outcomes in counted.items():
                tally[key].update(outcomes)
        owner = {(key, spec.protocol): kind for kind, spec in KINDS.items() for key in spec.keys}
        outcomes = collections.defaultdict(collections.Counter)
        others = collections.defaultdict(collections.Counter)
        for key, counts in tally.items():
            (outcomes[owner[key]] if key in owner else others[f"{key[0]} {key[1]}"]).update(counts)
        pending_in_file = sum(counts[outcome] for counts in tally.values() for outcome in counts
                              if outcome.startswith("pending"))

        growth = {name: rss_growth(sampler.samples[name]) for name in servers}
        peak = {name: proc_status_kb(server.pid, "VmHWM") / 1024 for name, server in servers.items()}
        # Stop cleanly: SIGTERM, exit 0, and no entry left for the journal file to write as pending.
        codes = {name: server.stop() for name, server in servers.items()}
        lines_after_stop = {}
        for name, server in servers.items():
            with open(server.journal_path, "rb") as handle:
                lines_after_stop[name] = sum(1 for _ in handle)

        # -- report -------------------------------------------------------------------------------------------
        def check(ok, text):
            lines.append(f"  {'PASS' if ok else 'FAIL'}  {text}")
            if not ok:
                failures.append(text)

        def server_of(kind):
            return "network" if any(key.startswith("net:") for key in KINDS[kind].keys) or kind == "net-refuse" \
                else "main"

        lines.append(f"soak: {load_seconds:.0f} s of load, {len(workers)} workers ({WORKERS} http/1.1, "
                     f"{PROTOCOL_WORKERS} per other protocol, 2 × https), seed {SEED}, {os.cpu_count()} cores, "
                     f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {BINARY}")
        lines.append(f"{'kind':<22} {'protocol':<9} {'sent':>8} {'expected':>8} {'journal':>8} {'unexp.':>6}  "
                     f"outcomes (journal files)")
        bad_outcomes, mismatched = [], []
        for kind, spec in KINDS.items():
            journaled = sum(outcomes[kind].values())
            described = ", ".join(f"{name} {count}" for name, count in
                                  sorted(outcomes[kind].items(), key=lambda item: -item[1]))
            lines.append(f"{kind:<22} {spec.protocol:<9} {sent[kind]:>8,} {expected[kind]:>8,} {journaled:>8,} "
                         f"{unexpected[kind]:>6,}  {described}")
            if journaled != expected[kind]:
                mismatched.append(f"{kind} {expected[kind]} expected, {journaled} journaled")
            wrong = {name: count for name, count in outcomes[kind].items() if name not in spec.outcomes}
            if wrong:
                bad_outcomes.append(f"{kind}: {wrong}")
        for key, counts in others.items():
            lines.append(f"{'(other) ' + key:<41} {sum(counts.values()):>8,}         {dict(counts)}")

        # Per protocol: the journal entries of the load (prefill aside), and the rate.
        per_protocol = collections.Counter()
        for kind, spec in KINDS.items():
            if spec.group != "prefill":
                per_protocol[spec.protocol] += expected[kind]
        lines.append("per protocol (journal entries of the load; connection entries under tls and tcp): " + ", ".join(
            f"{protocol} {count:,} ({count / load_seconds:,.1f}/s)" for protocol, count in per_protocol.most_common()))
        lines.append("per group (requests and attempts sent): " + ", ".join(
            f"{group} {sum(sent[kind] for kind, spec in KINDS.items() if spec.group == group):,}" for group in GROUPS))
        for name in servers:
            total = sum(expected[kind] for kind in KINDS if server_of(kind) == name)
            lines.append(f"{name} server: {total:,} entries expected, totalRecorded {counters[name]['totalRecorded']:,}; "
                         f"counters {json.dumps({k: v for k, v in counters[name].items() if k != 'perRoute'})}")
        lines.append(f"upstream received: {json.dumps(upstream_received, sort_keys=True)}")
        for name, samples in sampler.samples.items():
            lines.append(f"{name} server samples (s, VmRSS MB, fds, connections, journal total):")
            for index in range(0, len(samples), 4):
                lines.append("  " + "   ".join(f"{s['t']:5.0f}s {s['rss']:6.1f} MB {s['fds']:3} fd "
                                               f"{s['connections']:3} c {s['journal']:>8,}"
                                               for s in samples[index:index + 4]))

        lines.append("checks:")
        for name in servers:
            total = sum(expected[kind] for kind in KINDS if server_of(kind) == name)
            check(counters[name]["totalRecorded"] == total,
                  f"{name}: journal totalRecorded {counters[name]['totalRecorded']:,} == requests and connection "
                  f"attempts sent {total:,}")
        # The counters, per route set (h2 and h2c kinds share their routes: their sum is compared). Connection
        # entries and network changes have no counter: the files' counts are compared below.
        by_keys = collections.defaultdict(int)
        for kind, spec in KINDS.items():
            plain = tuple(key.removeprefix("net:") for key in spec.keys)
            if plain and not any(key.startswith("connection:") or key == "network" for key in plain):
                by_keys[("network" if spec.keys[0].startswith("net:") else "main", plain)] += expected[kind]
        counter_mismatch = []
        for (server, keys), total in by_keys.items():
            got = sum(counters[server]["malformed"] if key == "malformed" else counters[server]["unmatched"]
                      if key == "unmatched" else counters[server]["perRoute"].get(key, 0) for key in keys)
            if got != total:
                counter_mismatch.append(f"{server} {'+'.join(keys)} {total} vs {got}")
        check(not counter_mismatch, "every route's sent count == its journal counter (per route, malformed, unmatched)"
              + (": " + "; ".join(counter_mismatch) if counter_mismatch else ""))
        check(not mismatched, "every kind's expected entries == its entries in the journal files, by (route or "
              "connection, protocol)" + (": " + "; ".join(mismatched) if mismatched else ""))
        check(not others, "no journal entry outside the kinds" + (f": {dict(others)}" if others else ""))
        check(not bad_outcomes, "every entry ended with an outcome its kind expects"
              + (": " + "; ".join(bad_outcomes) if bad_outcomes else ""))
        missing = [kind for kind, spec in KINDS.items() if spec.weight > 0 and sent[kind] == 0]
        check(not missing, "every kind occurred" + (f": none of {', '.join(missing)}" if missing else ""))
        upstream_expected = {ProxyWorker.PATHS.get(kind, "/proxy/streamed-cut"): sent[kind]
                             for kind, spec in KINDS.items() if spec.group == PROXY and kind != "proxy-refused"
                             and sent[kind]}
        check(upstream_received == upstream_expected,
              f"the upstream received each proxied request once: {json.dumps(upstream_expected, sort_keys=True)}")
        for name in servers:
            connections, pending = quiet[name]
            check(connections == 0 and pending == 0,
                  f"{name}: nothing pending after the load: {connections} client connections, {pending} kept "
                  f"entries pending")
            check(file_lines[name] == counters[name]["totalRecorded"],
                  f"{name}: journal file has {file_lines[name]:,} final entries for "
                  f"{counters[name]['totalRecorded']:,} recorded")
            check(fds_after[name] == fds_before[name],
                  f"{name}: descriptors: {fds_before[name]} before the load, {fds_after[name]} {fds_seconds:.2f} s "
                  f"after the clients closed (deadline {FD_DEADLINE_S:.0f} s)")
        check(pending_in_file == 0, f"journal files: {pending_in_file} entries written as pending")
        for name in servers:
            mb, window_requests = growth[name]
            detail = ""
            if window_requests:
                detail = (f"; {window_requests:,} requests in that window, "
                          f"{mb * 1024 * 1024 / window_requests:+.1f} bytes per request")
            check(mb <= RSS_LIMIT_MB,
                  f"{name}: RSS after warm-up ({SECONDS * 0.25:.0f} s): {mb:+.1f} MB from the first to the last "
                  f"samples (limit {RSS_LIMIT_MB:.0f} MB){detail}; peak RSS {peak[name]:.1f} MB")
        for name in servers:
            check(codes[name] == 0 and lines_after_stop[name] == file_lines[name],
                  f"{name}: SIGTERM: exit code {codes[name]}, {lines_after_stop[name] - file_lines[name]} entries "
                  f"written as pending at stop")
        check(not stuck, "every worker finished within 30 s of the end" + (f": {', '.join(stuck)} did not" if stuck else ""))
        shown = collections.Counter()
        listed = []
        for example in examples:  # at most two of each kind
            name = example.split(":", 1)[0]
            shown[name] += 1
            if shown[name] <= 2:
                listed.append(example)
        check(not unexpected, f"clients saw only what their kind expects ({sum(unexpected.values())} unexpected)"
              + ("".join(f"\n        {example}" for example in listed)))
    except Exception as error:  # noqa: BLE001 — any failure of the harness is a failed soak, reported as such
        failures.append(f"{type(error).__name__}: {error}")
        lines.append(f"soak aborted: {type(error).__name__}: {error}")
    finally:
        for server in servers.values():
            server.close()
        if upstream is not None:
            upstream.stop()
        for server in servers.values():
            server_stderr = open(server.stderr_path, errors="replace").read()
            if failures and server_stderr.strip():
                lines.append(f"{server.name} server stderr (last 2,000 characters):\n" + server_stderr[-2000:])
        if not failures or not os.environ.get("SOAK_KEEP"):
            shutil.rmtree(folder, ignore_errors=True)
        else:
            lines.append(f"kept {folder} (journal files, servers' stderr)")

    lines.append("soak: " + ("PASS" if not failures else f"FAIL ({len(failures)} check(s) failed)"))
    text = "\n".join(lines)
    print(text)
    os.makedirs(os.path.dirname(RESULTS) or ".", exist_ok=True)
    with open(RESULTS, "w") as handle:
        handle.write(text + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
