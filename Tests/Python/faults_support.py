"""Helpers for test_faults.py: one scenario with a route per named fault, a curl runner that reports what
curl saw, the chain of an exception, a settled journal entry, and a proxy that delays the server's FIN (the
one deliberate wait here: it models a FIN still in flight)."""

import json
import socket
import subprocess
import threading
from dataclasses import dataclass

FAULTS = [
    "reset", "empty-reply", "half-close", "close-after-headers", "truncate-body", "overlong-body",
    "malformed-chunk", "garbage", "hang", "stall-after-headers", "corrupt-json", "truncated-json",
    "wrong-content-type", "html-error-page", "bad-gzip",
]

# The body every step scripts: 42 bytes of JSON, so the byte counts below are easy to follow.
BODY = {"id": 42, "name": "widget", "tags": ["a", "b"]}
BODY_BYTES = b'{"id":42,"name":"widget","tags":["a","b"]}'
SEED = 7


def fault_scenario():
    """A scenario with one route per fault: GET (or HEAD) /<fault> answers 200 + BODY with that fault."""
    return {
        "name": "faults",
        "seed": SEED,
        "routes": [
            {"id": fault, "match": {"method": ["GET", "HEAD"], "path": f"/{fault}"},
             "responses": [{"status": 200, "json": BODY, "fault": fault}]}
            for fault in FAULTS
        ],
    }


@dataclass
class CurlResult:
    exit_code: int
    error: str  # curl's stderr, stripped ("curl: (56) Recv failure: Connection reset by peer")
    body: bytes
    http_code: int  # 0 when no status line was received
    size_header: int
    size_download: int


WRITE_OUT = "\n%{http_code} %{size_header} %{size_download}"


def run_curl(url, *args, max_time=3):
    """curl -sS --max-time MAX_TIME [args] URL; the body and curl's own counters, separated by -w."""
    completed = subprocess.run(
        ["curl", "-sS", "--max-time", str(max_time), "-w", WRITE_OUT, *args, url],
        capture_output=True, stdin=subprocess.DEVNULL, timeout=max_time + 10)
    body, _, counters = completed.stdout.rpartition(b"\n")
    http_code, size_header, size_download = (int(value) for value in counters.split())
    return CurlResult(completed.returncode, completed.stderr.decode("utf-8", "replace").strip(), body,
                      http_code, size_header, size_download)


def run_json_lines(command, timeout=20):
    """Runs a client under Tests/Python/clients to completion (with a deadline); its stdout's JSON lines, one
    per request. The process must exit 0: failures of the requests are in the lines, not the exit code."""
    completed = subprocess.run([str(part) for part in command], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=timeout)
    assert completed.returncode == 0, f"{command}: exit {completed.returncode}\n{completed.stderr}"
    return [json.loads(line) for line in completed.stdout.splitlines() if line.strip()]


def exception_chain(error):
    """The exception and its causes (__cause__, else __context__), outermost first, as types."""
    chain, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        chain.append(type(error))
        error = error.__cause__ or error.__context__
    return chain


def settled_entry(server, fault, timeout_ms=3000):
    """The single journal entry of GET /<fault>, once its outcome is no longer `pending` (long-poll with a
    deadline). Fails unless exactly one request reached the route: no client retried behind our back."""
    server.wait_for(1, timeout_ms=timeout_ms, route=fault, completed=True)
    entries = server.journal(route=fault)
    assert len(entries) == 1, f"expected exactly one request for {fault}, got {entries}"
    return entries[0]


def split_head(data):
    """(head bytes including the blank line, the rest) of a raw HTTP response."""
    end = data.find(b"\r\n\r\n")
    assert end >= 0, f"no complete header section in {data!r}"
    return data[:end + 4], data[end + 4:]


def head_fields(head):
    """(status, {lowercased name: value}) of a raw header section."""
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    fields = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
    return status, fields


class FinDelayProxy:
    """A TCP proxy in front of the server that holds back the server's FIN for `delay_s`: the FIN "in flight".

    Response bytes pass at once; when the server ends a connection (a close by policy), the client learns of it
    only `delay_s` later. A keep-alive client that sends its next request straight away therefore reuses a
    connection the server already closed: the stale keep-alive race, every time instead of now and then.
    The client's bytes keep flowing to the server (which journals them as `connection-closing`) until the
    client closes. Threads poll a stop flag, so close() ends them all within a deadline.
    """

    POLL_S = 0.05

    def __init__(self, target_port, delay_s):
        self.target_port = target_port
        self.delay_s = delay_s
        self._stop = threading.Event()
        self._sockets = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(self.POLL_S)
        self.port = self._listener.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _spawn(self, target, *args):
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self):
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            for sock in (client, upstream):
                sock.settimeout(self.POLL_S)
                self._sockets.append(sock)
            self._spawn(self._pump, client, upstream, 0)
            self._spawn(self._pump, upstream, client, self.delay_s)

    def _pump(self, source, destination, fin_delay_s):
        try:
            while not self._stop.is_set():
                try:
                    data = source.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    if fin_delay_s:
                        self._stop.wait(fin_delay_s)   # the FIN in flight
                    destination.shutdown(socket.SHUT_WR)
                    return
                destination.sendall(data)
        except OSError:
            return   # the other side is gone, or close() shut everything

    def close(self):
        self._stop.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=2)
        for sock in self._sockets:
            sock.close()
        assert not any(thread.is_alive() for thread in self._threads), "proxy threads did not stop"
