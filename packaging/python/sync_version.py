#!/usr/bin/env python3
"""Writes src/faultline/_version.py from the Swift side's `Faultline.version`, the one source of truth.

`python3 packaging/python/sync_version.py` rewrites the file; `--check` only exits 1 (naming both) when they differ.
"""
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
SWIFT = HERE.parents[1] / "Sources" / "Faultline" / "Server" / "FaultlineServer.swift"
VERSION_PY = HERE / "src" / "faultline" / "_version.py"


def swift_version():
    match = re.search(r'static let version = "([^"]+)"', SWIFT.read_text())
    if match is None:
        raise SystemExit(f"no `static let version = \"…\"` in {SWIFT}")
    return match.group(1)


def python_version():
    match = re.search(r'^__version__ = "([^"]+)"', VERSION_PY.read_text(), re.M)
    return match.group(1) if match else None


def main(argv):
    wanted = swift_version()
    if "--check" in argv:
        if python_version() != wanted:
            print(f"{VERSION_PY}: {python_version()!r}, but {SWIFT}: {wanted!r}", file=sys.stderr)
            return 1
        return 0
    text = re.sub(r'^__version__ = "[^"]*"', f'__version__ = "{wanted}"', VERSION_PY.read_text(), flags=re.M)
    VERSION_PY.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
