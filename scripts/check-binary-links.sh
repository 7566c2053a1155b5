#!/usr/bin/env bash
# The `faultline` binary links FoundationEssentials and never Foundation, FoundationInternationalization, their
# ICU or FoundationNetworking (hence libcurl): ARCHITECTURE §1. A debug build links the Swift libraries dynamically,
# so its NEEDED entries name every one it uses; an `import Foundation` that creeps into the server's or the CLI's
# modules shows up here at once (the static release binary would only grow by 34 MB of ICU data).
# Usage: scripts/check-binary-links.sh [BINARY]   (make test runs it on .build/debug/faultline)
set -euo pipefail
binary="${1:-.build/debug/faultline}"
[ -x "$binary" ] || { echo "check-binary-links: no $binary (build it first)" >&2; exit 1; }
command -v readelf >/dev/null || { echo "check-binary-links: readelf not found (binutils); skipped"; exit 0; }
needed="$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
forbidden="$(grep -E '^(libFoundation\.so|libFoundationInternationalization|lib_FoundationICU|libFoundationNetworking|libFoundationXML|libcurl)' <<<"$needed" || true)"
if [ -n "$forbidden" ]; then
    echo "check-binary-links: $binary links what the server must not (ARCHITECTURE §1):" >&2
    sed 's/^/  /' <<<"$forbidden" >&2
    echo "  a module of the server or the CLI imports Foundation: use FoundationEssentials (see Sources/FaultlineCore/JSON/DecimalText.swift for the pattern)" >&2
    exit 1
fi
echo "check-binary-links: $binary needs $(wc -l <<<"$needed") libraries, no Foundation, ICU or libcurl"
