#!/usr/bin/env bash
# Installs what building and testing Faultline needs on Debian, only when it is missing:
#   libevent-dev (the server), curl (live tests), Python's requests + pytest + jsonschema (client and schema tests).
# Usage: scripts/ensure-deps.sh [build|test|bench]
set -euo pipefail
need="${1:-build}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

apt_packages=()
pkg-config --exists libevent 2>/dev/null || apt_packages+=(libevent-dev pkg-config)
if [ "$need" != build ]; then
    command -v curl >/dev/null || apt_packages+=(curl)
fi
if [ "$need" = bench ]; then
    command -v wrk >/dev/null || apt_packages+=(wrk)
    command -v nginx >/dev/null || apt_packages+=(nginx-light)
fi
if [ "${#apt_packages[@]}" -gt 0 ]; then
    echo "ensure-deps: installing ${apt_packages[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_packages[@]}" >/dev/null
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
fi
