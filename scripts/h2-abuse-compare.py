#!/usr/bin/env python3
"""The HTTP/2 attacks of Tests/Python/h2_attacks.py against Faultline and against nginx (one worker, h2c with prior
knowledge, Debian's nginx-light) in the same run, one after the other, each on a fresh server: does the server
survive and keep serving, how does it answer, how much does its RSS grow, and what is a well-behaved HTTP/1.1
client's p99 on another connection meanwhile. Then the HTTP/1.1 pipelining floods (`h2_attacks.HTTP1_ATTACKS`) on
each server's plain HTTP/1.1 port. Prints a Markdown table (docs/http2.md, "Abuse"). The WebSocket attacks are not
here: a plain nginx serves no WebSocket without a backend (docs/websocket.md, "Abuse", has Faultline's numbers).

Usage: scripts/h2-abuse-compare.py [--binary PATH] [--only NAME]…   (Makefile: make h2-abuse-compare)
The binary defaults to FAULTLINE_BIN, else .build/release/faultline. Needs nginx (scripts/ensure-deps.sh bench).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "Python"))

import h2_attacks  # noqa: E402  (after the path is set)

ECHO_MODULE = Path("/usr/lib/nginx/modules/ngx_http_echo_module.so")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def serves(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
            return b"still here" in received
    except OSError:
        return False


class Faultline:
    name = "Faultline"

    def __init__(self, binary, work):
        work.mkdir(parents=True, exist_ok=True)
        scenario = work / "abuse.json"
        scenario.write_text(json.dumps(h2_attacks.ROUTES))
        self.port = free_port()
        self.process = subprocess.Popen([binary, "serve", str(scenario), "--port", str(self.port), "--quiet"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        self.attack_port = self.good_port = self.http1_port = self.port
        self.pids = [self.process.pid]

    def answer(self):
        """The journal's connection errors: the server's own word on how each attacking connection ended."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(b"GET /__faultline/requests?connection=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            received = b""
            while chunk := sock.recv(1 << 20):
                received += chunk
        entries = json.loads(received.split(b"\r\n\r\n", 1)[1])["requests"]
        codes = sorted({entry["error"].split(":")[1].strip() for entry in entries if entry.get("error")})
        return codes

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)


class Nginx:
    name = "nginx"

    def __init__(self, work):
        folder = work / "nginx"
        folder.mkdir(parents=True)
        work.chmod(0o755)
        folder.chmod(0o755)
        static = folder / "static"
        static.mkdir(mode=0o755)
        with open(static / "big", "wb") as big:
            big.truncate(64 << 20)
        (static / "page64").write_bytes(b"p" * 65536)  # the 64 KiB text Faultline's /page64 answers
        self.good_port, self.attack_port = free_port(), free_port()
        self.http1_port = self.good_port
        load = f"load_module {ECHO_MODULE};" if ECHO_MODULE.exists() else ""
        slow = "echo_sleep 60; echo late;" if ECHO_MODULE.exists() else "return 200 'late';"
        locations = f"""
            location = /ok {{ default_type text/plain; return 200 'still here'; }}
            location = /slow {{ default_type text/plain; {slow} }}
            location = /big {{ root {static}; default_type application/octet-stream; }}
            location = /page64 {{ root {static}; default_type text/plain; }}
            location = /tiny {{ default_type text/plain; return 200 'tiny'; }}"""
        (folder / "nginx.conf").write_text(f"""{load}
worker_processes 1;
daemon on;
pid {folder}/nginx.pid;
error_log {folder}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {folder}; proxy_temp_path {folder}; fastcgi_temp_path {folder};
    uwsgi_temp_path {folder}; scgi_temp_path {folder};
    sendfile on;
    server {{ listen 127.0.0.1:{self.good_port}; {locations} }}
    server {{ listen 127.0.0.1:{self.attack_port} http2; {locations} }}
}}
""")
        subprocess.run(["nginx", "-c", str(folder / "nginx.conf"), "-e", str(folder / "error.log")], check=True)
        self.folder = folder
        wait_port(self.good_port)
        master = int((folder / "nginx.pid").read_text())
        children = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
        self.master, self.pids = master, [master] + [int(pid) for pid in children]

    def answer(self):
        """nginx's error log names what it objected to (info level is not logged at `error`); '—' if nothing."""
        log = (self.folder / "error.log").read_text()
        found = [line.split("] ", 1)[-1][:60] for line in log.splitlines() if "[alert]" in line or "[error]" in line]
        return found[:1]

    def alive(self):
        return all(Path(f"/proc/{pid}").exists() for pid in self.pids)

    def stop(self):
        os.kill(self.master, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{self.master}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def goaway_text(result):
    goaways = result.get("goaways") or [result.get("goaway")]
    seen = sorted({goaway[1] for goaway in goaways if goaway})
    return ("GOAWAY " + "/".join(seen)) if seen else "no GOAWAY seen"


def answer_text(result):
    """What the attacker saw: for a pipelining flood, whether its one write went in whole (the server read every
    request) or stalled (it stopped reading); for a slow reader, the responses it got; for HTTP/2, the GOAWAY."""
    if "all_sent" in result:
        return "all written" if result["all_sent"] else f"write stalled after {result['sent']:,} requests"
    if "responses" in result:
        ended = ", then the server closed" if result["responses"] < result["sent"] else ""
        return f"{result['responses']:,} of {result['sent']:,} responses, in order{ended}"
    return goaway_text(result)


def run(server_factory, name, attack, http1=False):
    server = server_factory()
    try:
        port = server.http1_port if http1 else server.attack_port
        measured = h2_attacks.measure(attack, port, server.good_port, server.pids)
        good = measured["good"]
        return {"survives": server.alive() and serves(server.good_port), "goaway": answer_text(measured["result"]),
                "answer": server.answer(), "growth": measured["rss_peak"] - measured["rss_base"],
                "p99": good.p99(), "max": max(good.latencies), "errors": good.errors}
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=os.environ.get("FAULTLINE_BIN", str(REPO / ".build/release/faultline")))
    parser.add_argument("--only", action="append", help="an attack, by its name in the table (repeatable)")
    options = parser.parse_args()
    if not shutil.which("nginx"):
        sys.exit("h2-abuse-compare: nginx is not installed (scripts/ensure-deps.sh bench)")
    attacks = {**h2_attacks.ATTACKS, **h2_attacks.HTTP1_ATTACKS}
    names = options.only or list(attacks)
    rows = []
    with tempfile.TemporaryDirectory(prefix="h2-abuse-") as folder:
        work = Path(folder)
        work.chmod(0o755)  # nginx's workers run as another user and must read its static file
        for index, name in enumerate(names):
            attack, http1 = attacks[name], name in h2_attacks.HTTP1_ATTACKS
            results = {}
            for label, factory in (("Faultline", lambda: Faultline(options.binary, work / f"f{index}")),
                                   ("nginx", lambda: Nginx(work / f"n{index}"))):
                results[label] = run(factory, label, attack, http1)
                print(f"{name} / {label}: {results[label]}", file=sys.stderr, flush=True)
            rows.append((name, results))
    print("| attack | server | survives, serves | answer seen by the attacker | server's record | RSS growth | "
          "good client p99 (max), errors |")
    print("|---|---|---|---|---|---|---|")
    for name, results in rows:
        for label, result in results.items():
            answer = ", ".join(result["answer"]) or "—"
            print(f"| {name} | {label} | {'yes' if result['survives'] else '**no**'} | {result['goaway']} | {answer} | "
                  f"{result['growth']:.0f} MB | {result['p99']:.1f} ms ({result['max']:.0f} ms), {result['errors']} |")


if __name__ == "__main__":
    main()
