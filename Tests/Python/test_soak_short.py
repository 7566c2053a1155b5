"""The soak (`make soak`, scripts/soak.py) run for a few seconds against $FAULTLINE_BIN, so that the script
cannot rot between the occasional full runs. The full run is 180 s against a release build; this one checks
the same things on a short mixed load over every protocol — HTTP/1.1, HTTPS with the TLS handshake faults, h2 and
h2c, ws and wss, the proxy, a resumed download and the network server: exact counts per kind, route and protocol,
each kind's outcomes, descriptors back to their baseline, RSS, a clean SIGTERM. Every worker plays each kind of
its group once before choosing at random, so 8 s has every kind; the soak fails a run in which one never occurred,
and this test checks the table for it too. About 20 s on a debug build."""
import os
import re
import subprocess
import sys

from conftest import REPO_ROOT, faultline_binary

GROUP_KINDS = ["keep-alive", "tls-handshake-reset", "tls-alert", "tls-hang", "tls-slow-handshake", "h2-streams",
               "h2c-client-reset", "h2-goaway-previous", "h2c-client-goaway", "ws-echo", "wss-too-large",
               "proxy-streamed", "proxy-streamed-cut", "resource-resume", "net-freeze", "net-drop", "net-refuse",
               "net-stall"]


def test_a_short_soak_passes(tmp_path):
    results = tmp_path / "soak.txt"
    # A 1,000-entry journal and no Retry-After prefill: the soak fills both before the clock starts, which takes
    # a while on a debug build.
    env = dict(os.environ, FAULTLINE_BIN=faultline_binary(), SOAK_SECONDS="8", SOAK_WORKERS="6",
               SOAK_MAX_JOURNAL="1000", SOAK_RETRY_AFTER_PREFILL="0", SOAK_RESULTS=str(results))
    run = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "soak.py")], env=env, capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, timeout=150)
    assert run.returncode == 0, f"soak failed:\n{run.stdout}\n{run.stderr}"
    report = results.read_text()
    assert "soak: PASS" in report
    assert "FAIL" not in report
    assert "PASS  every kind occurred" in report
    for kind in GROUP_KINDS:
        row = re.search(rf"^{re.escape(kind)} +\S+ +([\d,]+) ", report, re.MULTILINE)
        assert row and int(row.group(1).replace(",", "")) > 0, f"{kind} never occurred:\n{report}"
