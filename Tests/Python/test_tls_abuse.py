"""TLS abuse on the TLS port: many half-open handshakes, a ClientHello dripped a byte at a time, a record larger
than TLS allows. Each runs while a well-behaved client in another process is served over plain HTTP (Tests/Python/
h2_attacks.py's GoodClient), and asserts the answer RFC 8446 names, the journal's connection entry for every
attempt, RSS growth and the good client's p99 (60 ms, no error). A renegotiation attempt (TLS 1.2; TLS 1.3 has none)
is driven by `openssl s_client`, whose `R` command asks for one (Python's ssl cannot): the server sets
SSL_OP_NO_RENEGOTIATION. The attacks are Tests/Python/tls_attacks.py's (scripts/h2-abuse-compare.py runs them against
nginx too). Every socket has a deadline."""

import subprocess

import pytest

import tls_attacks
from h2_attacks import ROUTES, assert_unharmed, measure


@pytest.fixture
def tls_server(start_faultline, write_scenario, tmp_path):
    def start(*args):
        server = start_faultline(write_scenario(ROUTES), args=["--quiet", "--tls-port", "0", "--tls-dir",
                                                                tmp_path / "tls", *args])
        return server
    return start


def test_a_record_larger_than_tls_allows_gets_record_overflow(tls_server):
    """A handshake record whose length is 2^14 + 1 (RFC 8446 §5.1: a record_overflow alert, fatal)."""
    server = tls_server()
    answer, ended = tls_attacks.oversized_record(server.tls_port)
    # An alert record (21), level fatal (2), record_overflow (22); then the server closes.
    assert answer[:1] == b"\x15" and answer[5:7] == b"\x02\x16", answer.hex()
    assert tls_attacks.alert_of(answer) == ("fatal", "record_overflow") and ended in ("FIN", "RST"), (answer, ended)
    (entry,) = server.wait_for(1, connection="true")
    assert entry["tls"]["handshake"] == "alert-sent" and entry["tls"]["alertSent"] == "record_overflow", entry
    assert entry["tls"]["error"] == "data length too long", entry


def test_three_hundred_half_open_handshakes_time_out_while_others_are_served(tls_server):
    """300 connections that send half a ClientHello and wait: each is cut at the handshake deadline (the header
    timeout, here 1 s) and journaled `timed-out`; meanwhile the good client keeps its latency."""
    server = tls_server("--header-timeout", "1000")
    measured = measure(lambda port: tls_attacks.half_open(port, 300, hold_s=3.0), server.tls_port, server.port,
                       [server.proc.pid])
    assert_unharmed(measured)
    entries = server.wait_for(300, connection="true", timeout_ms=10_000)
    assert len(entries) == 300
    assert all(entry["tls"]["handshake"] == "timed-out" and entry["tls"]["handshakeMs"] >= 990 for entry in entries)
    held = measured["result"]
    closed = sum(held.closed_at[index] is not None and not held.received[index] for index in range(300))
    assert closed == 300, "every half-open handshake was closed by the server, nothing sent"


def test_a_client_hello_dripped_a_byte_at_a_time_is_cut_at_the_deadline(tls_server):
    """One byte every 20 ms: the deadline is for the whole handshake, not for silence, so a drip that never stops
    still ends at 1 s — 50 bytes in, far from a whole ClientHello."""
    server = tls_server("--header-timeout", "1000")
    drip = tls_attacks.dripped_hello(server.tls_port, count=1, pace_s=0.02, hold_s=4.0)
    assert drip.closed_at[0] is not None, "the drip was never cut"
    elapsed = (drip.closed_at[0] if drip.closed_at[0] != "reset" else drip.ended_at) - drip.first_byte[0]
    assert elapsed < 3, f"the drip went on for {elapsed:.1f} s"
    assert drip.trickled(0) < len(tls_attacks.client_hello()), "the ClientHello never got whole"
    (entry,) = server.wait_for(1, connection="true")
    assert entry["tls"]["handshake"] == "timed-out" and 990 <= entry["tls"]["handshakeMs"] < 2500, entry


def test_a_renegotiation_attempt_gets_no_renegotiation_and_the_server_serves_on(tls_server, tmp_path):
    """TLS 1.2, then the client asks to renegotiate (a new ClientHello on the established connection, RFC 5746).
    The server refuses with the no_renegotiation alert (100, RFC 5246 §7.2.2); OpenSSL's client ends the connection
    on it. The journal has the connection entry — handshake completed, `no_renegotiation` sent — and no request;
    the next client is served."""
    server = tls_server()
    output, _, _ = tls_attacks.renegotiation(server.tls_port, cafile=tmp_path / "tls" / "ca.pem")
    assert b"RENEGOTIATING" in output and b"no renegotiation" in output, output[-600:]
    assert tls_attacks.renegotiation_answer(output) == \
        "alert no_renegotiation (warning) received, handshake_failure (fatal) sent", output[-600:]
    (entry,) = server.wait_for(1, connection="true")
    tls = entry["tls"]
    assert (tls["version"], tls["handshake"], tls["alertSent"]) == ("TLSv1.2", "completed", "no_renegotiation"), tls
    assert entry["response"]["outcome"] == "client-closed", entry
    assert server.count(connection="false") == 0, "no request entry"
    command = ["openssl", "s_client", "-connect", f"127.0.0.1:{server.tls_port}", "-tls1_2", "-servername",
               "localhost", "-CAfile", str(tmp_path / "tls" / "ca.pem")]
    done = subprocess.run([*command, "-ign_eof"], input=b"GET /ok HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                          capture_output=True, timeout=30)
    assert b"still here" in done.stdout, done.stdout[-400:]
