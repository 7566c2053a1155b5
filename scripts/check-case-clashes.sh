#!/usr/bin/env bash
# Fails when two paths in the repository differ only in case: on a case-insensitive file system (macOS's
# default, APFS) they would be one file or folder. Checks every tracked file and every folder above one, in this
# repository or the one given: scripts/check-case-clashes.sh [REPO]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
clashes=$(git ls-files | awk -F/ '{ path = ""; for (i = 1; i <= NF; i++) { path = (i == 1 ? $i : path "/" $i); print path } }' \
    | sort -u | awk '{ lower = tolower($0); if (lower in seen && seen[lower] != $0) print seen[lower] " <> " $0; seen[lower] = $0 }')
if [ -n "$clashes" ]; then
    echo "check-case-clashes: paths that differ only in case (one path on macOS):" >&2
    echo "$clashes" >&2
    exit 1
fi
echo "check-case-clashes: no two paths differ only in case"
