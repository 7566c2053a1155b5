"""TLS attacks on a TLS port, shared by Tests/Python/test_tls_abuse.py (against Faultline, with assertions) and
scripts/h2-abuse-compare.py (the same attacks against Faultline and nginx, side by side): many half-open handshakes,
a ClientHello dripped a byte at a time (both h2_attacks.Drip), a record larger than TLS allows, renegotiation
attempts (TLS 1.2, driven by `openssl s_client`, whose `R` command asks for one: Python's ssl cannot)."""

import re
import socket
import ssl
import subprocess
import threading
import time

from h2_attacks import Drip

# RFC 8446 §6 and RFC 5246 §7.2 (no_renegotiation, 100, is TLS 1.2's).
ALERTS = {0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 22: "record_overflow",
          40: "handshake_failure", 42: "bad_certificate", 47: "illegal_parameter", 50: "decode_error",
          51: "decrypt_error", 70: "protocol_version", 80: "internal_error", 86: "inappropriate_fallback",
          90: "user_canceled", 100: "no_renegotiation", 109: "missing_extension", 112: "unrecognized_name",
          120: "no_application_protocol"}


def client_hello(server_hostname="localhost"):
    """The bytes of a real ClientHello (Python's ssl over memory BIOs)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        return outgoing.read()
    raise AssertionError("a handshake completed without a server")


def alert_of(data):
    """The first record of `data` if it is an alert: ("fatal" | "warning", its name); else None."""
    if len(data) >= 7 and data[0] == 0x15:
        return ("fatal" if data[5] == 2 else "warning"), ALERTS.get(data[6], str(data[6]))
    return None


def half_open(port, count=300, hold_s=17.0):
    """`count` connections that each send the first half of a ClientHello and hold."""
    hello = client_hello()
    return Drip(port, count, hello[: len(hello) // 2], b"", 1.0, hold_s).run()


def dripped_hello(port, count=100, pace_s=1.0, hold_s=17.0):
    """`count` connections that each send a ClientHello one byte every `pace_s`."""
    return Drip(port, count, b"", client_hello(), pace_s, hold_s).run()


OVERSIZED_RECORD = b"\x16\x03\x01" + (2**14 + 1).to_bytes(2, "big") + b"\x01" + bytes(2**14)


def oversized_record(port, timeout=5.0):
    """A handshake record whose length is 2^14 + 1 (RFC 8446 §5.1: record_overflow, fatal). Returns the bytes the
    server sent until it closed (or `timeout`), and how it closed: "FIN", "RST" or "open"."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(OVERSIZED_RECORD)
        received, ended = b"", "open"
        try:
            while chunk := sock.recv(65536):
                received += chunk
            ended = "FIN"
        except ConnectionResetError:
            ended = "RST"
        except socket.timeout:
            pass
    return received, ended


def oversized_records(port, count=100):
    """`count` connections, one after another, each sending the oversized record: [(received, ended)]."""
    return {"answers": [oversized_record(port) for _ in range(count)]}


def renegotiation(port, cafile=None, timeout=15.0, ign_eof=False, then=b""):
    """`openssl s_client -tls1_2` to `port`, then `R` (renegotiate) and `then`. stdin stays open: at its end s_client
    would leave before the server's answer; it exits on a fatal alert or the server's close (at `timeout` it is
    killed). `-msg` has it print every TLS message it sends (>>>) and receives (<<<). Returns (its output, its exit
    status, seconds)."""
    command = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2", "-servername", "localhost", "-msg"]
    if cafile:
        command += ["-CAfile", str(cafile)]
    if ign_eof:
        command.append("-ign_eof")
    started = time.monotonic()
    client = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = threading.Timer(timeout, client.kill)  # the read below ends when s_client does, or at this deadline
    deadline.start()
    try:
        client.stdin.write(b"R\n" + then)
        client.stdin.flush()
        output = client.stdout.read()  # to the end: s_client has exited
        status = client.wait(timeout=10)
    finally:
        deadline.cancel()
        client.kill()
        client.wait()
    return output, status, time.monotonic() - started


def renegotiations(port, count=10):
    """`count` connections, one after another, each asking to renegotiate once: {"outputs": [(output, status, s)]}."""
    return {"outputs": [renegotiation(port) for _ in range(count)]}


def renegotiation_answer(output):
    """What s_client reports after its renegotiation request: the alerts it received and sent (from `-msg`), e.g.
    "alert no_renegotiation (warning) received, handshake_failure (fatal) sent", else its last error."""
    after = output.split(b"RENEGOTIATING", 1)[-1].decode("latin-1")
    alerts = [(direction, name, level) for direction, level, name in
              re.findall(r"^(<<<|>>>) [^,]+, Alert \[length \d+\], (\w+) (\w+)", after, re.M)]
    if alerts:
        return "alert " + ", ".join(f"{name} ({level}) {'received' if direction == '<<<' else 'sent'}"
                                    for direction, name, level in alerts)
    error = re.search(r":error:[0-9A-F]+:[^:]*:[^:]*:([^:\n]+)", after)
    return error.group(1) if error else "no alert, no error"
