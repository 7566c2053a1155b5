#!/usr/bin/env python3
"""Timing benchmarks that wrk cannot measure, for `make bench` (issue: delays, start-up, many delayed
responses). Prints a table and appends it to bench-results/bench.txt.

  start-up      process start → first served request, median of 20 starts
  delay error   actual − scripted delay for 1,000 requests at 10–500 ms (client-side, loopback), p50/p99/max
  10k delayed   10,000 concurrent requests each delayed 1 s: all answered within [1.000, 1.050] s? peak RSS
"""
import json
import os
import random
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BINARY = os.environ.get("FAULTLINE_BIN", ".build/release/faultline")


def start(scenario: dict):
    folder = tempfile.mkdtemp(prefix="faultline-bench-")
    path = os.path.join(folder, "bench.json")
    with open(path, "w") as handle:
        json.dump(scenario, handle)
    began = time.monotonic()
    process = subprocess.Popen([BINARY, "serve", path, "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    line = process.stdout.readline().decode()
    port = int(line.rsplit(":", 1)[1])
    return process, port, began


def get(port: int, target: str, timeout: float = 30.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := client.recv(65536):
            data += chunk
        return data


def startup() -> float:
    scenario = {"name": "s", "routes": [{"id": "r", "match": {"path": "/r"}, "responses": [{"text": "ok"}]}]}
    samples = []
    for _ in range(20):
        process, port, began = start(scenario)
        get(port, "/r")
        samples.append((time.monotonic() - began) * 1000)
        process.terminate()
        process.wait(timeout=10)
    return statistics.median(samples)


def delay_error():
    routes = [{"id": f"d{ms}", "match": {"path": f"/d/{ms}"}, "responses": [{"delayMs": ms, "text": "x"}]}
              for ms in range(10, 501, 10)]
    process, port, _ = start({"name": "d", "routes": routes})
    errors = []
    rng = random.Random(7)
    try:
        # 1,000 requests, 50 at a time, each timed from its send to its last byte.
        pending = [rng.randrange(10, 501, 10) for _ in range(1000)]
        selector = selectors.DefaultSelector()
        while pending or selector.get_map():
            while pending and len(selector.get_map()) < 50:
                ms = pending.pop()
                client = socket.create_connection(("127.0.0.1", port))
                client.setblocking(False)
                client.sendall(f"GET /d/{ms} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                selector.register(client, selectors.EVENT_READ, (ms, time.monotonic()))
            for key, _ in selector.select(timeout=5):
                client = key.fileobj
                chunk = client.recv(65536)
                if not chunk:
                    ms, sent = key.data
                    errors.append((time.monotonic() - sent) * 1000 - ms)
                    selector.unregister(client)
                    client.close()
    finally:
        process.terminate()
        process.wait(timeout=10)
    errors.sort()
    return errors[len(errors) // 2], errors[int(len(errors) * 0.99) - 1], errors[-1], errors[0]


def ten_thousand_delayed():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    scenario = {"name": "k", "routes": [{"id": "slow", "match": {"path": "/slow"}, "responses": [{"delayMs": 1000, "text": "late"}]}]}
    process, port, _ = start(scenario)
    clients = []
    try:
        for _ in range(10_000):
            client = socket.create_connection(("127.0.0.1", port))
            clients.append(client)
        # All connected; send every request as close together as possible and time each answer.
        sent = {}
        for client in clients:
            client.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            sent[client.fileno()] = time.monotonic()
            client.setblocking(False)
        selector = selectors.DefaultSelector()
        for client in clients:
            selector.register(client, selectors.EVENT_READ)
        latencies = []
        peak_rss = 0
        while selector.get_map():
            for key, _ in selector.select(timeout=10):
                client = key.fileobj
                if not client.recv(65536):
                    latencies.append(time.monotonic() - sent[client.fileno()])
                    selector.unregister(client)
                    client.close()
            with open(f"/proc/{process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak_rss = int(line.split()[1]) // 1024
        # Server-side durations from the journal are exact; the client-side ones include this script's work.
        journal = json.loads(get(port, "/__faultline/requests?limit=10000").split(b"\r\n\r\n", 1)[1])
        durations = [entry["response"]["durationMs"] / 1000 for entry in journal["requests"]]
    finally:
        for client in clients:
            try:
                client.close()
            except OSError:
                pass
        process.terminate()
        process.wait(timeout=10)
    inside = sum(1 for d in durations if 1.0 <= d <= 1.050)
    return len(durations), inside, min(durations), max(durations), max(latencies), peak_rss


def main():
    lines = []
    lines.append(f"start-up to first served request: median {startup():.1f} ms of 20 starts (goal ≤ 50 ms)")
    p50, p99, worst, best = delay_error()
    lines.append(f"delay error (actual − scripted, 1,000 requests at 10–500 ms, client side): "
                 f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {worst:.2f} ms, min {best:.2f} ms (goal p99 ≤ 2 ms)")
    count, inside, low, high, client_worst, rss = ten_thousand_delayed()
    lines.append(f"10,000 concurrent 1 s delays: {count} journaled, {inside} finished within [1.000, 1.050] s "
                 f"(server side: {low:.3f}–{high:.3f} s; slowest seen by the client {client_worst:.3f} s); "
                 f"peak RSS {rss} MB (goal ≤ 150 MB)")
    text = "\n".join(lines)
    print(text)
    os.makedirs("bench-results", exist_ok=True)
    with open("bench-results/bench.txt", "a") as handle:
        handle.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
