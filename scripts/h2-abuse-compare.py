#!/usr/bin/env python3
"""The HTTP/2 attacks of Tests/Python/h2_attacks.py against Faultline and against nginx (one worker, h2c with prior
knowledge, Debian's nginx-light) in the same run, one after the other, each on a fresh server: does the server
survive and keep serving, how does it answer, how much does its RSS grow, and what is a well-behaved HTTP/1.1
client's p99 on another connection meanwhile. Then the HTTP/1.1 pipelining floods (`h2_attacks.HTTP1_ATTACKS`) on
each server's plain HTTP/1.1 port. Then the slow rows (`SLOW_ATTACKS`): TLS attacks on each server's TLS port
(Tests/Python/tls_attacks.py: 300 half-open handshakes, a ClientHello dripped a byte a second on 100 connections,
TLS 1.2 renegotiation asked with `openssl s_client`'s `R`, a record of 2^14 + 1 bytes) and HTTP/1.1's slowloris and
a body dripped forever (h2_attacks.Drip) on the plain port; the attacker holds each connection at most 17 s. Prints
a Markdown table (docs/http2.md, "Abuse"). The WebSocket attacks are not here: a plain nginx serves no WebSocket
without a backend (docs/websocket.md, "Abuse", has Faultline's numbers).

The good client is plain HTTP/1.1 in every row (on the same server process; for nginx its plain server block, the
same worker). The HTTP/2 and pipelining rows run both servers with their default timeouts. For the slow rows both
get the same 5 s ones, so that each row is comparable and ends soon:
- Faultline: `--header-timeout 5000` (the whole header section from its first byte, and the whole TLS handshake)
  and `--body-timeout 5000` (the whole body, from the end of the header section); its TLS port serves the
  catalogue's `valid` certificate (P-256, with its intermediate) from a `--tls-dir` made for the run;
- nginx: `client_header_timeout 5s` (nginx arms it when the connection is accepted and applies it to the TLS
  handshake too, then to the request's header section; it is not re-armed by each byte) and `client_body_timeout
  5s` (which nginx applies between two reads, not to the whole body); a self-signed ECDSA P-256 certificate made
  with openssl for the run, `ssl_protocols TLSv1.2 TLSv1.3`, every other setting nginx's default. Its /upload reads
  the whole body before answering (the echo module's `echo_read_request_body`), as Faultline does; its error log is
  at `info` in these rows, where nginx logs what clients did ("server's record").

Usage: scripts/h2-abuse-compare.py [--binary PATH] [--only NAME]…   (Makefile: make h2-abuse-compare)
The binary defaults to FAULTLINE_BIN, else .build/release/faultline. Needs nginx (scripts/ensure-deps.sh bench).
"""

import argparse
import collections
import json
import os
import re
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
import tls_attacks  # noqa: E402

TIMEOUT_S = 5  # the slow rows' header, body and handshake timeouts, on both servers (see the docstring)

# The slow rows: on a fresh server with the TLS port and the 5 s timeouts, each attack on the TLS port ("tls") or
# the plain HTTP/1.1 port ("http1"). Each connection is held at most 17 s (3 × TIMEOUT_S + 2) by the attacker.
SLOW_ATTACKS = {
    "TLS: 300 half-open handshakes (half a ClientHello each), held": (tls_attacks.half_open, "tls"),
    "TLS: ClientHello dripped 1 byte/s, 100 connections": (tls_attacks.dripped_hello, "tls"),
    "TLS 1.2: renegotiation asked (`s_client` `R`), 10 connections": (tls_attacks.renegotiations, "tls"),
    "TLS: a record of 2¹⁴ + 1 bytes, 100 connections": (tls_attacks.oversized_records, "tls"),
    "HTTP/1.1: slowloris, 200 connections, a header byte every 300 ms": (h2_attacks.slowloris, "http1"),
    "HTTP/1.1: body dripped forever, 200 POSTs, a byte every 300 ms": (h2_attacks.dripped_body, "http1"),
}

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

    def __init__(self, binary, work, slow=False):
        """slow: the TLS port (the catalogue's `valid`, P-256, in work/../tls) and the 5 s timeouts."""
        work.mkdir(parents=True, exist_ok=True)
        scenario = work / "abuse.json"
        scenario.write_text(json.dumps(h2_attacks.ROUTES))
        self.port, self.tls_port = free_port(), None
        command = [binary, "serve", str(scenario), "--port", str(self.port), "--quiet"]
        if slow:
            self.tls_port = free_port()
            command += ["--tls-port", str(self.tls_port), "--tls-dir", str(work.parent / "tls"),
                        "--header-timeout", str(TIMEOUT_S * 1000), "--body-timeout", str(TIMEOUT_S * 1000)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        if self.tls_port:
            wait_port(self.tls_port)
        self.attack_port = self.good_port = self.http1_port = self.port
        self.pids = [self.process.pid]
        self.before = 0

    def mark(self):
        """record() counts what comes after this (not wait_port's probes: the one on the TLS port is journaled as a
        connection, `client-closed`, once the server has seen it go — waited for here)."""
        deadline = time.monotonic() + 5
        while self.tls_port and not self.journal("?connection=true") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.before = len(self.journal())

    def journal(self, query=""):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(f"GET /__faultline/requests{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                         .encode())
            received = b""
            while chunk := sock.recv(1 << 20):
                received += chunk
        return json.loads(received.split(b"\r\n\r\n", 1)[1])["requests"]

    def record(self):
        """The slow rows: every journal entry but the good client's, counted by what it says of how the
        connection or request ended — a TLS connection's handshake, the alert sent and OpenSSL's error; a
        request's status and error."""
        seen = collections.Counter()
        for entry in self.journal()[self.before:]:
            if entry.get("route") == "ok" and (entry.get("response") or {}).get("status") == 200:
                continue
            tls, response = entry.get("tls"), entry.get("response") or {}
            if entry.get("kind") == "connection" and tls:
                words = [f"handshake {tls['handshake']}"]
                if tls.get("alertSent"):
                    words.append(f"{tls['alertSent']} sent")
                if tls.get("alertReceived"):
                    words.append(f"{tls['alertReceived']} received")
                if tls.get("error"):
                    words.append(f"“{tls['error']}”")
                if response.get("outcome"):
                    words.append(response["outcome"])
                seen[", ".join(words)] += 1
            else:
                seen[f"{response.get('status') or response.get('outcome')} “{entry.get('error') or ''}”"] += 1
        return [f"{count} × {what}" for what, count in seen.most_common(2)]

    def answer(self):
        """The journal's connection errors: the server's own word on how each attacking connection ended."""
        entries = self.journal("?connection=true")
        codes = sorted({entry["error"].split(":")[1].strip() for entry in entries if entry.get("error")})
        return codes

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)


class Nginx:
    name = "nginx"

    def __init__(self, work, slow=False):
        """slow: a TLS server block (a self-signed P-256 certificate, TLS 1.2 and 1.3), client_header_timeout and
        client_body_timeout of 5 s, and the error log at `info` (where nginx logs what clients did)."""
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
        self.http1_port, self.tls_port = self.good_port, None
        load = f"load_module {ECHO_MODULE};" if ECHO_MODULE.exists() else ""
        slow_route = "echo_sleep 60; echo late;" if ECHO_MODULE.exists() else "return 200 'late';"
        # /upload reads the whole body before it answers, as Faultline does (without the echo module nginx would
        # answer at once and discard the body).
        upload = ("echo_read_request_body; echo 'still here';" if ECHO_MODULE.exists()
                  else "return 200 'still here';")
        locations = f"""
            location = /ok {{ default_type text/plain; return 200 'still here'; }}
            location = /slow {{ default_type text/plain; {slow_route} }}
            location = /big {{ root {static}; default_type application/octet-stream; }}
            location = /page64 {{ root {static}; default_type text/plain; }}
            location = /tiny {{ default_type text/plain; return 200 'tiny'; }}
            location = /upload {{ default_type text/plain; {upload} }}"""
        tls_server, timeouts, level = "", "", ""
        if slow:
            self.tls_port = free_port()
            certificate = self_signed(work.parent)
            tls_server = f"""server {{ listen 127.0.0.1:{self.tls_port} ssl; ssl_certificate {certificate[0]};
        ssl_certificate_key {certificate[1]}; ssl_protocols TLSv1.2 TLSv1.3; {locations} }}"""
            timeouts = f"client_header_timeout {TIMEOUT_S}s; client_body_timeout {TIMEOUT_S}s;"
            level = "info"
        (folder / "nginx.conf").write_text(f"""{load}
worker_processes 1;
daemon on;
pid {folder}/nginx.pid;
error_log {folder}/error.log {level};
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {folder}; proxy_temp_path {folder}; fastcgi_temp_path {folder};
    uwsgi_temp_path {folder}; scgi_temp_path {folder};
    sendfile on;
    {timeouts}
    server {{ listen 127.0.0.1:{self.good_port}; {locations} }}
    server {{ listen 127.0.0.1:{self.attack_port} http2; {locations} }}
    {tls_server}
}}
""")
        subprocess.run(["nginx", "-c", str(folder / "nginx.conf"), "-e", str(folder / "error.log")], check=True)
        self.folder = folder
        wait_port(self.good_port)
        if self.tls_port:
            wait_port(self.tls_port)
        master = int((folder / "nginx.pid").read_text())
        children = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
        self.master, self.pids = master, [master] + [int(pid) for pid in children]
        self.before = 0

    def mark(self):
        """record() counts what is logged after this (not wait_port's probes)."""
        self.before = (self.folder / "error.log").stat().st_size

    def record(self):
        """The slow rows: the error log's lines (at `info`), counted by their message (the connection number and
        the client/server suffix left out)."""
        seen = collections.Counter()
        with open(self.folder / "error.log", "rb") as log:
            log.seek(self.before)
            lines = log.read().decode(errors="replace").splitlines()
        for line in lines:
            found = re.search(r"\[(\w+)\] \d+#\d+: (?:\*\d+ )?(.*?)(?:, client: .*)?$", line)
            # notice: the workers' start and stop; the good client's keep-alive connection, closed at its end.
            if found and found.group(1) != "notice" and "closed keepalive connection" not in found.group(2):
                message = re.sub(r"error:[0-9A-F]+:SSL routines::", "", found.group(2))
                seen[f"[{found.group(1)}] {message}"] += 1
        return [f"{count} × {what}" for what, count in seen.most_common(2)]

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


def self_signed(work):
    """An ECDSA P-256 self-signed certificate for localhost and 127.0.0.1 in `work` (made once): (cert, key)."""
    cert, key = work / "nginx-cert.pem", work / "nginx-key.pem"
    if not cert.exists():
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def goaway_text(result):
    goaways = result.get("goaways") or [result.get("goaway")]
    seen = sorted({goaway[1] for goaway in goaways if goaway})
    return ("GOAWAY " + "/".join(seen)) if seen else "no GOAWAY seen"


def seconds(values):
    low, high = min(values), max(values)
    return f"{low:.1f} s" if high - low < 0.15 else f"{low:.1f}–{high:.1f} s"


def first_answer(data):
    """A word for the first thing a server sent: an HTTP status, a TLS alert, or nothing."""
    if not data:
        return "nothing sent"
    if data.startswith(b"HTTP/"):
        return data.split(b" ", 2)[1].decode()
    alert = tls_attacks.alert_of(data)
    if alert:
        return f"alert {alert[1]}" + (" (warning)" if alert[0] == "warning" else "")
    return f"{len(data)} bytes"


def drip_text(drip):
    """A drip's connections, grouped by what the server sent and how it ended them, and when (from the connection's
    first byte): "300 × closed (FIN) at 5.0 s, nothing sent"; a drip also says how many bytes it got in."""
    groups = collections.defaultdict(list)
    for index in range(drip.count):
        closed = drip.closed_at[index]
        end = "FIN" if isinstance(closed, float) else ("RST" if closed == "reset" else None)
        at = drip.answered_at[index] or (closed if isinstance(closed, float) else drip.ended_at)
        groups[(first_answer(drip.received[index]), end)].append((at - drip.first_byte[index], drip.trickled(index)))
    parts = []
    for (answer, end), found in sorted(groups.items(), key=lambda item: -len(item[1])):
        when = seconds([at for at, _ in found])
        if end is None:
            text = f"{answer}, still open when the attacker gave up at {when}"
        elif answer == "nothing sent":
            text = f"closed ({end}) at {when}, nothing sent"
        else:
            text = f"{answer} at {when}, then {end}"
        if drip.trickle:
            dripped = sorted(n for _, n in found)
            text += f", {dripped[0]}–{dripped[-1]} bytes dripped" if dripped[0] != dripped[-1] else \
                f", {dripped[0]} bytes dripped"
        parts.append(f"{len(found)} × {text}")
    return "; ".join(parts)


def answer_text(result):
    """What the attacker saw: for a pipelining flood, whether its one write went in whole (the server read every
    request) or stalled (it stopped reading); for a slow reader, the responses it got; for HTTP/2, the GOAWAY; for a
    drip, what came back and when the server closed; for an oversized record, the alert; for renegotiation, what
    `s_client` reports."""
    if isinstance(result, h2_attacks.Drip):
        return drip_text(result)
    if "answers" in result:
        seen = collections.Counter(f"{first_answer(data)}, {ended}" for data, ended in result["answers"])
        return "; ".join(f"{count} × {what}" for what, count in seen.most_common())
    if "outputs" in result:
        seen = collections.Counter(
            tls_attacks.renegotiation_answer(output) + (f"; s_client exits {status}" if took < 14
                                                        else "; s_client killed at 15 s")
            for output, status, took in result["outputs"])
        return "; ".join(f"{count} × {what}" for what, count in seen.most_common())
    if "all_sent" in result:
        return "all written" if result["all_sent"] else f"write stalled after {result['sent']:,} requests"
    if "responses" in result:
        ended = ", then the server closed" if result["responses"] < result["sent"] else ""
        return f"{result['responses']:,} of {result['sent']:,} responses, in order{ended}"
    return goaway_text(result)


def run(server_factory, name, attack, kind="h2"):
    server = server_factory()
    try:
        port = {"h2": server.attack_port, "http1": server.http1_port, "tls": server.tls_port}[kind]
        if name in SLOW_ATTACKS:
            server.mark()
        measured = h2_attacks.measure(attack, port, server.good_port, server.pids)
        good = measured["good"]
        record = ["; ".join(server.record())] if name in SLOW_ATTACKS else server.answer()
        return {"survives": server.alive() and serves(server.good_port), "goaway": answer_text(measured["result"]),
                "answer": record, "growth": measured["rss_peak"] - measured["rss_base"],
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
    attacks = {**h2_attacks.ATTACKS, **h2_attacks.HTTP1_ATTACKS,
               **{name: attack for name, (attack, _) in SLOW_ATTACKS.items()}}
    names = options.only or list(attacks)
    unknown = [name for name in names if name not in attacks]
    if unknown:
        sys.exit(f"h2-abuse-compare: no attack {unknown[0]!r}; the attacks are:\n  " + "\n  ".join(attacks))
    rows = []
    with tempfile.TemporaryDirectory(prefix="h2-abuse-") as folder:
        work = Path(folder)
        work.chmod(0o755)  # nginx's workers run as another user and must read its static file
        for index, name in enumerate(names):
            attack, slow = attacks[name], name in SLOW_ATTACKS
            kind = SLOW_ATTACKS[name][1] if slow else "http1" if name in h2_attacks.HTTP1_ATTACKS else "h2"
            results = {}
            for label, factory in (("Faultline", lambda: Faultline(options.binary, work / f"f{index}", slow)),
                                   ("nginx", lambda: Nginx(work / f"n{index}", slow))):
                results[label] = run(factory, name, attack, kind)
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
