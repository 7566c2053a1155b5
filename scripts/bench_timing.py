#!/usr/bin/env python3
"""Timing benchmarks that wrk cannot measure, for `make bench` (issue: delays, start-up, many delayed
responses). Prints a table and appends it to bench-results/bench.txt.

  start-up      process start → first served request, median of 20 starts
  delay error   actual − scripted delay for 1,000 requests at 10–500 ms (client side, loopback, until the whole
                response; the FIN's p99 too), p50/p99/max
  10k delayed   10,000 concurrent requests each delayed 1 s: all answered within [1.000, 1.050] s? peak RSS
                (server and client pinned to separate cores; the client also times each whole response)
  journal       1,000,000 requests (wrk, keep-alive) with the default journal cap: RSS at 0, 100k, 250k, 500k,
                750k and 1M requests (flat once the ring is full?), peak RSS; the journal's counters equal the
                requests wrk wrote, exactly
"""
import json
import os
import random
import re
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BINARY = os.environ.get("FAULTLINE_BIN", ".build/release/faultline")


def start(scenario: dict, *options: str, cpu: int | None = None):
    folder = tempfile.mkdtemp(prefix="faultline-bench-")
    path = os.path.join(folder, "bench.json")
    with open(path, "w") as handle:
        json.dump(scenario, handle)
    began = time.monotonic()
    # With `cpu`, the server (every thread it starts) runs on that core only.
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    process = subprocess.Popen([BINARY, "serve", path, "--port", "0", *options], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, preexec_fn=pin)
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


def whole_response(data: bytes) -> bool:
    """Whether `data` is exactly a complete response: its head and its Content-Length body."""
    head, separator, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    return bool(separator and length and len(body) == int(length.group(1)))


def delay_error():
    routes = [{"id": f"d{ms}", "match": {"path": f"/d/{ms}"}, "responses": [{"delayMs": ms, "text": "x"}]}
              for ms in range(10, 501, 10)]
    process, port, _ = start({"name": "d", "routes": routes})
    errors = []  # until the whole response (its one-byte body) has arrived
    fin_errors = []  # until the server's FIN
    rng = random.Random(7)
    try:
        # 1,000 requests, 50 at a time, each timed from just before its send.
        pending = [rng.randrange(10, 501, 10) for _ in range(1000)]
        selector = selectors.DefaultSelector()
        while pending or selector.get_map():
            while pending and len(selector.get_map()) < 50:
                ms = pending.pop()
                client = socket.create_connection(("127.0.0.1", port))
                client.setblocking(False)
                sent = time.monotonic()
                client.sendall(f"GET /d/{ms} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                selector.register(client, selectors.EVENT_READ, [ms, sent, b""])
            for key, _ in selector.select(timeout=5):
                client = key.fileobj
                chunk = client.recv(65536)
                ms, sent, data = key.data
                if not chunk:
                    fin_errors.append((time.monotonic() - sent) * 1000 - ms)
                    selector.unregister(client)
                    client.close()
                    continue
                data += chunk
                key.data[2] = data
                if whole_response(data):
                    errors.append((time.monotonic() - sent) * 1000 - ms)
    finally:
        process.terminate()
        process.wait(timeout=10)
    errors.sort()
    fin_errors.sort()
    assert len(errors) == 1000, f"{len(errors)} whole responses of 1000"
    return (errors[len(errors) // 2], errors[int(len(errors) * 0.99) - 1], errors[-1], errors[0],
            fin_errors[int(len(fin_errors) * 0.99) - 1])


def ten_thousand_delayed():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    scenario = {"name": "k", "routes": [{"id": "slow", "match": {"path": "/slow"}, "responses": [{"delayMs": 1000, "text": "late"}]}]}
    # The server and this client each get a core of their own (with two or more): left to the scheduler, they
    # sometimes share one while the responses fall due, and the server then answers at half speed.
    cores = sorted(os.sched_getaffinity(0))
    client_cores = os.sched_getaffinity(0)
    pinned = len(cores) >= 2
    process, port, _ = start(scenario, cpu=cores[0] if pinned else None)
    if pinned:
        os.sched_setaffinity(0, {cores[1]})
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
        latencies = []  # until the whole response (head and Content-Length body) has arrived
        fin_latencies = []  # until the server's FIN
        received = {}
        peak_rss = 0
        while selector.get_map():
            for key, _ in selector.select(timeout=10):
                client = key.fileobj
                chunk = client.recv(65536)
                if not chunk:
                    fin_latencies.append(time.monotonic() - sent[client.fileno()])
                    selector.unregister(client)
                    client.close()
                    continue
                data = received.get(client.fileno(), b"") + chunk
                received[client.fileno()] = data
                if whole_response(data):
                    latencies.append(time.monotonic() - sent[client.fileno()])
        # VmHWM is the high-water mark: read once at the end, not per select() round (that would steal the CPU
        # the server needs from this same 2-core machine while it answers).
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
        os.sched_setaffinity(0, client_cores)
    inside = sum(1 for d in durations if 1.0 <= d <= 1.050)
    return len(durations), inside, min(durations), max(durations), max(latencies), max(fin_latencies), peak_rss


# wrk counts what it *received*; the server journals what it *read*. To compare them exactly, this script counts
# in each wrk thread the requests it wrote (request() runs right before wrk writes the bytes; a write error
# would show as a wrk socket error) and the responses it read, and stops the thread once it has read its
# quota. wrk's main thread only sleeps for -d, so the caller interrupts it (SIGINT) when it sees "quota".
# Before the run wrk calls request() once more on its first thread, only to check the request parses
# (script_verify_request in wrk's script.c); done() takes that call off.
WRK_QUOTA_LUA = """
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
    quota = tonumber(args[1]); sent = 0; received = 0
    item = wrk.format("GET", "/item")
end
function request() sent = sent + 1; return item end
function response(status, headers, body)
    received = received + 1
    if received == quota then io.write("quota\\n"); io.flush(); wrk.thread:stop() end
end
function done(summary, latency, requests)
    local s, r = 0, 0
    for _, t in ipairs(threads) do s = s + t:get("sent"); r = r + t:get("received") end
    s = s - 1 -- wrk's check call before the run
    io.write(string.format("lua: sent %d received %d\\n", s, r))
end
"""


def proc_status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def admin(port: int, path: str) -> dict:
    return json.loads(get(port, "/__faultline/" + path).split(b"\r\n\r\n", 1)[1])


def wrk_quota(port: int, script: str, quota: int, connections: int = 50):
    """Runs wrk until it has read `quota` responses; returns (sent, received, wrk's "N requests", errors)."""
    wrk = subprocess.Popen(["wrk", "-t1", f"-c{connections}", "-d1h", "-s", script,
                            f"http://127.0.0.1:{port}/item", "--", str(quota)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # A watchdog so a server that stops answering cannot hold the benchmark for wrk's full hour.
    watchdog = threading.Timer(max(120.0, quota / 2000), lambda: wrk.send_signal(signal.SIGINT))
    watchdog.start()
    output = []
    try:
        for line in wrk.stdout:
            output.append(line)
            if line.strip() == "quota":
                wrk.send_signal(signal.SIGINT)
        wrk.wait(timeout=30)
    finally:
        watchdog.cancel()
        if wrk.poll() is None:
            wrk.kill()
    text = "".join(output)
    lua = re.search(r"lua: sent (\d+) received (\d+)", text)
    complete = re.search(r"(\d+) requests in", text)
    if not lua or not complete:
        raise RuntimeError(f"unexpected wrk output:\n{text}")
    errors = " ".join(line.strip() for line in output if "Socket errors" in line or "Non-2xx" in line)
    return int(lua.group(1)), int(lua.group(2)), int(complete.group(1)), errors


def journal_growth(milestones=(100_000, 250_000, 500_000, 750_000, 1_000_000)):
    """Drives wrk in phases up to each milestone of journaled requests and samples VmRSS between phases, once
    the phase's connections are closed; checks the counters against what wrk wrote after every phase."""
    scenario = {"name": "j", "routes": [{"id": "item", "match": {"method": "GET", "path": "/item"},
                                         "responses": [{"json": {"id": "1", "name": "widget", "price": 9.99}}]}]}
    # --quiet as in bench.sh: the stderr request log is not what is measured here.
    process, port, _ = start(scenario, "--quiet")
    samples = [(0, proc_status_kb(process.pid, "VmRSS") / 1024)]
    sent = received = complete = 0
    problems = []
    wrk_errors = []
    script = os.path.join(tempfile.mkdtemp(prefix="faultline-bench-"), "quota.lua")
    with open(script, "w") as handle:
        handle.write(WRK_QUOTA_LUA)
    try:
        for milestone in milestones:
            before = admin(port, "requests/count")["counters"]["totalRecorded"]
            phase_sent, phase_received, phase_complete, errors = wrk_quota(port, script, milestone - before)
            sent, received, complete = sent + phase_sent, received + phase_received, complete + phase_complete
            if errors:
                wrk_errors.append(errors)
            # wrk has exited; wait until its connections are gone (only this admin call's is left).
            deadline = time.monotonic() + 10
            while admin(port, "health")["connections"] > 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            counters = admin(port, "requests/count")["counters"]
            total = counters["totalRecorded"]
            samples.append((total, proc_status_kb(process.pid, "VmRSS") / 1024))
            if total - before != phase_sent:
                problems.append(f"phase to {milestone:,}: journal +{total - before:,}, wrk wrote {phase_sent:,}")
        counters = admin(port, "requests/count")
        peak = proc_status_kb(process.pid, "VmHWM") / 1024
    finally:
        process.terminate()
        process.wait(timeout=10)
    journal = counters["counters"]
    expected = {"totalRecorded": sent, "retained": min(sent, journal["capacity"]),
                "evicted": max(0, sent - journal["capacity"]), "perRoute": {"item": sent}, "malformed": 0,
                "unmatched": 0}
    for name, value in expected.items():
        if journal[name] != value:
            problems.append(f"{name} is {journal[name]}, expected {value}")
    return {"samples": samples, "peak": peak, "sent": sent, "received": received, "complete": complete,
            "journal": journal, "count": counters["count"], "problems": problems, "wrk_errors": wrk_errors}


def main():
    lines = []
    lines.append(f"start-up to first served request: median {startup():.1f} ms of 20 starts (goal ≤ 50 ms)")
    p50, p99, worst, best, fin_p99 = delay_error()
    lines.append(f"delay error (actual − scripted, 1,000 requests at 10–500 ms, 50 at a time, client side, until the "
                 f"whole response): p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {worst:.2f} ms, min {best:.2f} ms "
                 f"(goal p99 ≤ 2 ms); until the FIN: p99 {fin_p99:.2f} ms")
    count, inside, low, high, client_worst, fin_worst, rss = ten_thousand_delayed()
    lines.append(f"10,000 concurrent 1 s delays: {count} journaled, {inside} finished within [1.000, 1.050] s "
                 f"(server side, request read to response sent: {low:.3f}–{high:.3f} s; slowest whole response "
                 f"seen by the client {client_worst:.3f} s, slowest FIN {fin_worst:.3f} s; server and client on "
                 f"cores of their own); "
                 f"peak RSS {rss} MB (goal ≤ 150 MB)")
    growth = journal_growth()
    journal = growth["journal"]
    lines.append(f"journal growth: {growth['sent']:,} requests (wrk -t1 -c50, keep-alive, default cap "
                 f"{journal['capacity']:,}); VmRSS by requests journaled:")
    lines.append("  " + "  ".join(f"{count:>9,}: {mb:5.1f} MB" for count, mb in growth["samples"][:3]))
    lines.append("  " + "  ".join(f"{count:>9,}: {mb:5.1f} MB" for count, mb in growth["samples"][3:]))
    lines.append(f"  peak RSS {growth['peak']:.1f} MB, final {growth['samples'][-1][1]:.1f} MB; "
                 f"change from 100k to the end {growth['samples'][-1][1] - growth['samples'][1][1]:+.1f} MB")
    lines.append(f"  counters: totalRecorded {journal['totalRecorded']:,} = written by wrk {growth['sent']:,}; "
                 f"retained {journal['retained']:,}, evicted {journal['evicted']:,}, perRoute item "
                 f"{journal['perRoute'].get('item', 0):,}, requests/count {growth['count']:,} (retained only)")
    lines.append(f"  wrk reported {growth['complete']:,} requests (responses read: {growth['received']:,}); "
                 f"{growth['sent'] - growth['complete']:,} were written but in flight when a phase stopped wrk "
                 f"(journaled, answered, never read)")
    if growth["wrk_errors"]:
        lines.append("  wrk errors: " + "; ".join(growth["wrk_errors"]))
    exact = "yes" if not growth["problems"] else "NO — " + "; ".join(growth["problems"])
    lines.append(f"  counters exact: {exact}")
    text = "\n".join(lines)
    print(text)
    os.makedirs("bench-results", exist_ok=True)
    with open("bench-results/bench.txt", "a") as handle:
        handle.write(text + "\n")
    return 1 if growth["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
