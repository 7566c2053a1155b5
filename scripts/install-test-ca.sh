#!/usr/bin/env bash
# Puts a Faultline test CA in the system's trust store, so that Tests/FaultlineTests/TLSURLSessionTests.swift can
# see URLSession succeed over HTTPS on Linux: FoundationNetworking's libcurl takes no CA in-process and reads only
# Debian's bundle /etc/ssl/certs/ca-certificates.crt. `make test` runs this after building and passes what it prints
# to `swift test` as FAULTLINE_SYSTEM_TRUSTED_TLS_DIR.
#
# It changes the trust store only when all of these hold, and otherwise prints nothing and changes nothing:
#   - it runs as root (it never calls sudo),
#   - on Debian (or a derivative) with update-ca-certificates,
#   - and CI=true or FAULTLINE_INSTALL_TEST_CA=1 is set: a throwaway CI machine, or a developer who asks for it.
# Then it uses a dedicated authority folder, $FAULTLINE_CI_TLS_DIR (default /var/tmp/faultline-ci-tls, mode 0700,
# root's own; faultline refuses a folder another user owns or may write), writes its root CA, "Faultline Local CA",
# to /usr/local/share/ca-certificates/faultline-test-ci.crt, runs update-ca-certificates, and prints the folder.
# Whoever can read that folder's ca-key.pem can mint certificates this machine trusts: use it only where that is
# acceptable. Nothing else in Faultline touches the system's trust store.
#
# When FAULTLINE_SYSTEM_TRUSTED_TLS_DIR is already set (you trusted a CA yourself), it prints that and does nothing.
#
# Usage: scripts/install-test-ca.sh [--remove]
#   --remove  takes faultline-test-ci.crt out of the store again (update-ca-certificates --fresh) and deletes the
#             authority folder.
set -euo pipefail
cd "$(dirname "$0")/.."
folder="${FAULTLINE_CI_TLS_DIR:-/var/tmp/faultline-ci-tls}"
anchor=/usr/local/share/ca-certificates/faultline-test-ci.crt

if [ "${1:-}" = --remove ]; then
    if [ -e "$anchor" ]; then
        rm -f "$anchor"
        update-ca-certificates --fresh >/dev/null
        echo "install-test-ca: removed $anchor from the system's trust store" >&2
    fi
    rm -rf "$folder"
    exit 0
fi

if [ -n "${FAULTLINE_SYSTEM_TRUSTED_TLS_DIR:-}" ]; then
    echo "$FAULTLINE_SYSTEM_TRUSTED_TLS_DIR"
    exit 0
fi
if [ "${CI:-}" != true ] && [ "${FAULTLINE_INSTALL_TEST_CA:-}" != 1 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ] || [ ! -f /etc/debian_version ] || ! command -v update-ca-certificates >/dev/null; then
    echo "install-test-ca: not root on Debian with update-ca-certificates; the URLSession HTTPS success test" \
        "is skipped" >&2
    exit 0
fi

binary="${FAULTLINE_BIN:-.build/debug/faultline}"
[ -d "$folder" ] || mkdir -m 0700 "$folder"
# faultline checks the folder (ours, not writable by others) and creates the authority on first use.
"$binary" ca --tls-dir "$folder" --export --out "$anchor.tmp" 2>/dev/null
if cmp -s "$anchor.tmp" "$anchor" && grep -qF "$(sed -n 2p "$anchor")" /etc/ssl/certs/ca-certificates.crt; then
    rm -f "$anchor.tmp"
else
    mv "$anchor.tmp" "$anchor"
    update-ca-certificates >/dev/null
    echo "install-test-ca: trusting $folder/ca.pem system-wide as $anchor" >&2
fi
echo "$folder"
