"""One loop thread holding a thousand connections: hung ones stay cheap and are released when their clients
go, delayed ones are all answered on time, and the admin API stays responsive throughout."""
import resource
import socket
import time

import requests

HANG = {"name": "scale", "routes": [
    {"id": "hang", "match": {"path": "/hang"}, "responses": [{"fault": "hang"}]},
    {"id": "slow", "match": {"path": "/slow"}, "responses": [{"delayMs": 1000, "text": "late"}]},
]}


def open_clients(port, count, target):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4 * count:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8 * count), hard))
    clients = []
    for _ in range(count):
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        client.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        clients.append(client)
    return clients


def test_a_thousand_hung_connections_leave_the_loop_responsive(start_faultline, write_scenario):
    server = start_faultline(write_scenario(HANG))
    clients = open_clients(server.port, 1000, "/hang")
    try:
        seen = server.wait(1000, route="hang", timeout_ms=20000)
        assert seen["satisfied"], seen["count"]
        started = time.monotonic()
        health = requests.get(f"{server.url}/__faultline/health", timeout=5).json()
        assert time.monotonic() - started < 1, "health answered while 1000 connections hang"
        assert health["connections"] >= 1000
    finally:
        for client in clients:
            client.close()
    released = server.wait(1000, route="hang", completed="true", timeout_ms=20000)
    assert released["satisfied"], released["count"]
    assert {entry["response"]["outcome"] for entry in server.journal(route="hang")} == {"hang-released"}


def test_a_thousand_one_second_delays_are_answered_on_time(start_faultline, write_scenario):
    server = start_faultline(write_scenario(HANG))
    clients = open_clients(server.port, 1000, "/slow")
    try:
        for client in clients:
            data = b""
            while b"late" not in data:
                chunk = client.recv(4096)
                assert chunk, "closed before the response"
                data += chunk
    finally:
        for client in clients:
            client.close()
    entries = server.journal(route="slow", limit=1000)
    assert len(entries) == 1000
    durations = [entry["response"]["durationMs"] for entry in entries]
    assert min(durations) >= 1000, f"a response came before its delay: {min(durations)} ms"
    assert max(durations) < 1250, f"slowest response {max(durations)} ms"


BUSY = {"name": "busy", "routes": [
    # 4,000 bytes, one every millisecond: each connection wants 1,000 timer callbacks a second for 4 s.
    {"id": "drip", "match": {"path": "/drip"},
     "responses": [{"text": "x" * 4000, "chunked": {"size": 1, "intervalMs": 1}}]},
    {"id": "plain", "match": {"path": "/plain"}, "responses": [{"text": "ok"}]},
]}


def test_closing_is_not_starved_by_a_loop_that_never_goes_quiet(start_faultline, write_scenario):
    # 200 dripping connections ask for 200,000 timer callbacks a second, more than the loop can run: it never
    # goes quiet. Closing a finished connection runs below timers and sockets (so a burst of expiring delays is
    # all sent first), but a backstop closes it within 250 ms anyway, long before the drips end.
    server = start_faultline(write_scenario(BUSY))
    drips = open_clients(server.port, 200, "/drip")
    try:
        assert server.wait(200, route="drip", timeout_ms=20000)["satisfied"]
        client = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        started = time.monotonic()
        client.sendall(b"GET /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        answered = None
        while True:
            chunk = client.recv(4096)
            if not chunk:
                break
            data += chunk
            if answered is None and data.endswith(b"ok"):
                answered = time.monotonic() - started
        closed = time.monotonic() - started
        client.close()
        assert answered is not None, data
        assert answered < 1.0, f"the request waited {answered:.3f} s behind the drips"
        assert closed < 1.5, f"FIN came {closed:.3f} s after the request"
        running = server.journal(route="drip", completed="false", limit=200)
        assert len(running) == 200, "the drips must still be running when the FIN arrives"
    finally:
        for client in drips:
            client.close()
