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
