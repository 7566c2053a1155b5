"""The soak (`make soak`, scripts/soak.py) run for a few seconds against $FAULTLINE_BIN, so that the script
cannot rot between the occasional full runs. The full run is 180 s against a release build; this one checks
the same things (exact counts, descriptors back to their baseline, RSS, a clean SIGTERM) on a short mixed load.
About 10 s on a debug build."""
import os
import subprocess
import sys

from conftest import REPO_ROOT, faultline_binary


def test_a_short_soak_passes(tmp_path):
    results = tmp_path / "soak.txt"
    # A 1,000-entry journal and no Retry-After prefill: the soak fills both before the clock starts, which takes
    # a while on a debug build.
    env = dict(os.environ, FAULTLINE_BIN=faultline_binary(), SOAK_SECONDS="8", SOAK_WORKERS="8",
               SOAK_MAX_JOURNAL="1000", SOAK_RETRY_AFTER_PREFILL="0", SOAK_RESULTS=str(results))
    run = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "soak.py")], env=env, capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, timeout=90)
    assert run.returncode == 0, f"soak failed:\n{run.stdout}\n{run.stderr}"
    report = results.read_text()
    assert "soak: PASS" in report
    assert "FAIL" not in report
