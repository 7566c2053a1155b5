#!/usr/bin/env python3
"""One table from `make bench`'s two runs: every row's throughput ratio (Faultline / nginx, the median of the
rounds' ratios) and p99s with their ratio, unpinned and pinned, as Markdown. Reads bench-results/bench.txt and
bench-results/bench-pinned.txt (scripts/bench.sh writes them), prints the table and writes
bench-results/summary.md. A p99 ratio above 1 means Faultline's tail is longer than nginx's. A row one run lacks
(ROWS= left it out) shows a dash.

Usage: scripts/bench-summary.py [RESULTS_DIR]
"""

import os
import platform
import re
import sys
from pathlib import Path

ROWS = [  # (the start of the row's title in bench.txt, the name in the table)
    ("plain HTTP, keep-alive", "plain HTTP keep-alive"),
    ("HTTPS, keep-alive", "HTTPS keep-alive"),
    ("HTTPS, new TLS connection per request", "new TLS connection per request"),
    ("HTTP/2 over TLS", "h2 over TLS"),
    ("HTTP/2 cleartext", "h2c"),
    ("download:", "download 1 MiB"),
    ("reverse proxy", "reverse proxy"),
]


def parse(path):
    """Row title prefix -> {nginx_rps, nginx_p99, faultline_rps, faultline_p99, ratio}; and the run's header."""
    if not path.exists():
        return {}, []
    lines = path.read_text().splitlines()
    header = [line for line in lines[:2] if line.startswith(("benchmark:", "date:"))]
    rows, current = {}, None
    for line in lines:
        prefix = next((prefix for prefix, _ in ROWS if line.startswith(prefix)), None)
        if prefix:
            current = rows.setdefault(prefix, {})
            continue
        if current is None:
            continue
        if match := re.match(r"^(nginx|faultline)\s+([\d.]+)\s+([\d.]+)\s*$", line):
            current[f"{match[1]}_rps"] = float(match[2])
            current[f"{match[1]}_p99"] = float(match[3])
        elif match := re.match(r"^throughput ratio .*: ([\d.]+)", line):
            current["ratio"] = float(match[1])
        elif not line.strip():
            current = None
    return rows, header


def cells(row):
    if not row or "ratio" not in row or "faultline_p99" not in row or "nginx_p99" not in row:
        return ["—", "—", "—"]
    p99_ratio = row["faultline_p99"] / row["nginx_p99"] if row["nginx_p99"] > 0 else float("inf")
    return [f"{row['ratio']:.2f}", f"{row['faultline_p99']:.2f} vs {row['nginx_p99']:.2f} ms", f"{p99_ratio:.2f}"]


def main():
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "bench-results"
    unpinned, header = parse(results / "bench.txt")
    pinned, pinned_header = parse(results / "bench-pinned.txt")
    if not unpinned and not pinned:
        sys.exit(f"bench-summary: no bench.txt or bench-pinned.txt in {results}: run `make bench` first")
    out = []
    for line in header or pinned_header:
        out.append(f"{line}  ")
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    out.append(f"machine: {platform.node()}, {cpu}, {os.cpu_count()} cores, {platform.platform(terse=True)}  ")
    out.append("ratio = Faultline / nginx requests per second (median of the rounds' ratios); p99 ratio = Faultline's "
               "p99 / nginx's (the median round's). Target: ratio ≥ 1.00, p99 ratio ≤ 1.30.")
    out.append("")
    out.append("| row | ratio unpinned | ratio pinned | p99 unpinned, Faultline vs nginx | p99 ratio unpinned "
               "| p99 pinned, Faultline vs nginx | p99 ratio pinned |")
    out.append("|---|---|---|---|---|---|---|")
    for prefix, name in ROWS:
        if prefix not in unpinned and prefix not in pinned:
            continue
        u, p = cells(unpinned.get(prefix)), cells(pinned.get(prefix))
        out.append(f"| {name} | {u[0]} | {p[0]} | {u[1]} | {u[2]} | {p[1]} | {p[2]} |")
    text = "\n".join(out) + "\n"
    print(text, end="")
    (results / "summary.md").write_text(text)


if __name__ == "__main__":
    main()
