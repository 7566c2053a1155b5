"""The connection limit (`serve --max-connections`, ConnectionLimit.swift) and the descriptor limit: a client that
opens connections without end gets a clear answer and a journal entry for each, the server keeps its descriptors and
memory bounded, and the admin API keeps answering.

- Up to N connections: served. The next 32: each request gets 503 + Retry-After + close, journaled under the route
  `connection-limit`; admin calls on them are served. Past those: closed at once, a connection entry naming why.
- Out of descriptors (a limit set above `ulimit -n`): the spare descriptor is given up for the waiting connection,
  which is journaled and closed; nothing waits in the backlog for an answer that never comes.
- The default limit leaves 64 descriptors (and the 32 told with a 503) below `ulimit -n`: the admin port answers
  while the stub port is flooded.
"""
import json
import os
import selectors
import socket
import subprocess
import time
import urllib.request

import pytest

import h2_attacks
from conftest import FaultlineProcess, RawConnection, faultline_binary

OVERFLOW = 32  # ConnectionLimit.overflow
RESERVE = 64  # ConnectionLimit.reserve

SCENARIO = {"name": "limit", "routes": [
    {"id": "plain", "match": {"method": "GET", "path": "/plain"}, "responses": [{"status": 200, "text": "ok"}]},
    # h2_attacks.GoodClient's route.
    {"id": "ok", "match": {"path": "/ok"}, "responses": [{"text": "still here"}]}]}


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "limit.json"
    path.write_text(json.dumps(SCENARIO))
    return path


def serve(tmp_path, scenario, *args, nofile=None, name="server"):
    """`faultline serve` with `--admin-port`, whose connections the limit does not count: `server.admin_get(path)`
    observes without taking a place."""
    command = [faultline_binary(), "serve", str(scenario), "--port", "0", "--quiet", "--admin-port", "0",
               *map(str, args)]
    if nofile is not None:
        command = ["prlimit", f"--nofile={nofile}:{nofile}", "--", *command]
    server = FaultlineProcess(command, tmp_path / f"{name}.stderr")
    server.wait_listening()
    line = server._lines.get(timeout=10)
    assert line and line.startswith("admin on http://"), line
    admin_url = line[len("admin on "):].strip()

    def admin_get(path):
        with urllib.request.urlopen(f"{admin_url}/__faultline/{path}", timeout=5) as answer:
            return json.load(answer)

    server.admin_get = admin_get
    assert admin_get("health")["status"] == "ok"
    return server


def get(port, path, timeout=5.0):
    """One GET on a new connection: (status, headers, body, how the server ended the connection)."""
    connection = RawConnection(port, timeout=timeout)
    try:
        connection.send(f"GET {path} HTTP/1.1\r\nHost: limit\r\n\r\n")
        (response,) = connection.read_responses(1, timeout=timeout)
        _, closed = connection.read_until_close(timeout=timeout)
        return response, closed
    finally:
        connection.close()


def closed_at_once(sock):
    """Whether the server closed `sock` (EOF or RST) without a byte, within 2 s."""
    sock.settimeout(2.0)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def wait_until(predicate, timeout=10.0, what="the condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not hold within {timeout} s"
        time.sleep(0.02)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def socket_count(pid):
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:")
        except FileNotFoundError:
            pass
    return count


def settled(count, quiet_s=0.3, timeout=10.0):
    """`count()` once it has not changed for `quiet_s`."""
    deadline = time.monotonic() + timeout
    last, since = count(), time.monotonic()
    while time.monotonic() - since < quiet_s:
        assert time.monotonic() < deadline, "the count did not settle"
        time.sleep(0.05)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
    return last


def fd_count(pid):
    """The server's open descriptors other than its epoll/eventfd/timerfd ones. One closed between the listing and
    its readlink is not open any more (CI saw the race: FileNotFoundError), so it is not counted."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += not os.readlink(f"/proc/{pid}/fd/{name}").startswith("anon_inode:")
        except FileNotFoundError:
            pass
    return count


def health(server):
    return server.admin_get("health")


def journal(server, query):
    return server.admin_get(f"requests?{query}")["requests"]


def test_past_the_limit_requests_get_503_admin_calls_are_served_and_then_connections_are_closed(tmp_path, scenario):
    server = serve(tmp_path, scenario, "--max-connections", 4)
    held = []
    try:
        # Four kept-alive connections, each served: the limit.
        for _ in range(4):
            connection = RawConnection(server.port)
            connection.send("GET /plain HTTP/1.1\r\nHost: limit\r\n\r\n")
            assert connection.read_responses(1)[0].status == 200
            held.append(connection)
        # The fifth: 503 with Retry-After, closed after the answer, which names the option.
        response, closed = get(server.port, "/plain")
        assert response.status == 503, response
        assert response.header("Retry-After") == "1" and response.header("Connection") == "close", response
        reason = json.loads(response.body)["reason"]
        assert "--max-connections 4" in reason, reason
        assert closed is True, "a graceful close after the 503 (FIN, not RST)"
        # The admin API on a connection past the limit: served.
        response, _ = get(server.port, "/__faultline/health")
        assert response.status == 200 and json.loads(response.body)["status"] == "ok"
        # Fill the overflow with idle connections, then one more: closed at once, with no byte.
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(OVERFLOW)]
        wait_until(lambda: health(server)["connections"] == 4 + OVERFLOW + 1, what="the overflow connections open")
        refused = socket.create_connection(("127.0.0.1", server.port))
        assert closed_at_once(refused)
        refused.close()
        wait_until(lambda: journal(server, "route=connection-limit&connection=true"), what="the refusal journaled")
        (entry,) = journal(server, "route=connection-limit&connection=true")
        assert entry["kind"] == "connection" and entry["answeredBy"] == "connection-limit", entry
        assert entry["requestLine"] == f"(a connection, closed at once: {4 + OVERFLOW} connections open, " \
                                       f"{OVERFLOW} past --max-connections 4)", entry
        assert entry["response"]["outcome"] == "rejected", entry
        (limited,) = journal(server, "route=connection-limit&connection=false")
        assert (limited["path"], limited["response"]["status"], limited["answeredBy"]) == \
               ("/plain", 503, "connection-limit"), limited
        assert limited["response"]["outcome"] == "completed", limited
        for sock in idle:
            sock.close()
        for connection in held:
            connection.close()
        held = []
        # Their places are free again: served.
        wait_until(lambda: health(server)["connections"] == 1, what="the connections closed")
        response, _ = get(server.port, "/plain")
        assert response.status == 200 and response.body == b"ok"
        counters = server.admin_get("requests/count")["counters"]
        assert counters["perRoute"] == {"plain": 5, "connection-limit": 2}, counters
    finally:
        for connection in held:
            connection.close()
        assert server.stop() == 0, server.stderr()


def test_http2_and_tls_connections_past_the_limit_get_503_per_stream(tmp_path, scenario):
    server = serve(tmp_path, scenario, "--max-connections", 1, "--tls-port", "0", "--tls-dir", tmp_path / "tls")
    try:
        hold = RawConnection(server.port)
        hold.send("GET /plain HTTP/1.1\r\nHost: limit\r\n\r\n")
        assert hold.read_responses(1)[0].status == 200
        ca = tmp_path / "tls" / "ca.pem"
        for how in (["--http2-prior-knowledge", server.url + "/plain"],
                    ["--http2", "--cacert", str(ca), f"https://localhost:{server.tls_port}/plain"]):
            done = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", *how],
                                  capture_output=True, text=True, timeout=30)
            assert done.stdout == "2 503", (how, done.stdout, done.stderr)
        entries = journal(server, "route=connection-limit")
        assert [(e["protocol"], e["response"]["status"]) for e in entries] == [("h2c", 503), ("h2", 503)], entries
        hold.close()
    finally:
        assert server.stop() == 0, server.stderr()


def test_out_of_descriptors_each_waiting_connection_is_journaled_and_closed(tmp_path, scenario):
    """--max-connections above what `ulimit -n` allows: accept fails with EMFILE. Each connection waiting then is
    accepted on the spare descriptor, journaled and closed: every client learns at once, none waits in the backlog,
    and when connections close the server serves again."""
    server = serve(tmp_path, scenario, "--max-connections", 1000, nofile=128)
    sockets = []
    try:
        assert "--max-connections 1000 leaves fewer than 64 of the 128 descriptors" in server.stderr()
        base_rss = rss_kb(server.proc.pid)
        # The admin connections of serve() may still be closing at the server: a count that has settled.
        base_sockets = settled(lambda: socket_count(server.proc.pid))
        sockets = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(200)]
        # Out of descriptors, even the admin port cannot accept: watch from outside. Every connection is open at
        # the server (a socket descriptor of its own) or was closed by it (EOF or RST here).
        closed = set()
        watch = selectors.DefaultSelector()
        for sock in sockets:
            watch.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + 20
        while len(closed) + socket_count(server.proc.pid) - base_sockets != 200:
            assert time.monotonic() < deadline, (len(closed), socket_count(server.proc.pid) - base_sockets)
            for key, _ in watch.select(timeout=0.1):
                assert closed_at_once(key.fileobj), "no byte before the close"
                closed.add(key.fileobj)
                watch.unregister(key.fileobj)
        assert closed, "some connections were past the descriptors"
        assert fd_count(server.proc.pid) <= 128
        assert rss_kb(server.proc.pid) - base_rss < 32 * 1024, "memory bounded"
        for sock in sockets:
            sock.close()
        sockets = []
        wait_until(lambda: health(server)["connections"] == 1, what="the connections closed")
        refused = journal(server, "route=connection-limit")
        assert len(refused) == len(closed), (len(refused), len(closed))
        assert all("out of file descriptors (EMFILE: ulimit -n 128" in e["requestLine"] for e in refused), refused[:3]
        response, _ = get(server.port, "/plain")
        assert response.status == 200
    finally:
        for sock in sockets:
            sock.close()
        assert server.stop() == 0, server.stderr()


def refusals(server):
    return server.admin_get("requests/count")["counters"]["perRoute"].get("connection-limit", 0)


def test_the_default_limit_keeps_descriptors_for_the_admin_port_while_the_stub_port_is_flooded(tmp_path, scenario):
    """No --max-connections: the limit is `ulimit -n` less 96. A flood of 400 connections on the stub port (twice
    the descriptors) is served, told and refused by the limit before descriptors run out; the admin port answers
    throughout, and the journal counts every refusal."""
    nofile = 200
    limit = nofile - RESERVE - OVERFLOW
    server = serve(tmp_path, scenario, nofile=nofile)
    sockets = []
    try:
        base_rss = rss_kb(server.proc.pid)
        base_fds = settled(lambda: fd_count(server.proc.pid))
        peak = base_rss
        for _ in range(400):
            sockets.append(socket.create_connection(("127.0.0.1", server.port)))
            peak = max(peak, rss_kb(server.proc.pid))
        assert health(server)["status"] == "ok"
        wait_until(lambda: refusals(server) == 400 - limit - OVERFLOW, what="every connection past the overflow refused")
        (entry,) = journal(server, "route=connection-limit&limit=1")
        assert f"past --max-connections {limit})" in entry["requestLine"] and "EMFILE" not in entry["requestLine"]
        # The limit and the overflow, and not one more: the rest of the reserve stays free. Counted once the count
        # is still: the admin connection `journal()` just closed, or a refused connection between its accept and its
        # close, holds a descriptor for a moment (CI saw one more than the bound, 145 for 144, counted at once).
        assert settled(lambda: fd_count(server.proc.pid)) <= base_fds + limit + OVERFLOW
        assert peak - base_rss < 32 * 1024, f"RSS grew {peak - base_rss} kB"
    finally:
        for sock in sockets:
            sock.close()
        assert server.stop() == 0, server.stderr()


def test_a_client_already_connected_keeps_its_latency_while_connections_flood_the_port(tmp_path, scenario):
    """A well-behaved client on a kept-alive connection (h2_attacks.GoodClient: GET /ok every 10 ms) opened before
    the flood is one of the limit's connections: while 1,000 more are opened and held (past the limit, the overflow
    and the descriptors twice over), it is served as before, and the server's memory stays bounded."""
    server = serve(tmp_path, scenario, nofile=200)

    def flood(port):
        sockets = []
        try:
            for _ in range(1000):
                sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            time.sleep(1.0)  # the attack's length: the connections are held while the good client measures
        finally:
            for sock in sockets:
                sock.close()
        return len(sockets)

    try:
        measured = h2_attacks.measure(flood, server.port, server.port, [server.proc.pid])
        assert measured["result"] == 1000
        limit = 200 - RESERVE - OVERFLOW
        # Everything past the limit and its overflow was refused and journaled; the good client's requests are there.
        wait_until(lambda: refusals(server) >= 1000 - limit - OVERFLOW, what="the refusals journaled")
        assert server.admin_get("requests/count")["counters"]["perRoute"].get("ok", 0) >= 20
        h2_attacks.assert_unharmed(measured, 32)
    finally:
        assert server.stop() == 0, server.stderr()
