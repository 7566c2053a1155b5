#!/usr/bin/env bash
# Proves packaging/homebrew/faultline.rb as far as Linux can without Homebrew:
#   1. `ruby -wc`: the formula parses, with no warning.
#   2. scripts/brew-shim.rb info: the formula loads (its class body runs) and its url's version is the one
#      `static let version` in Sources/.
#   3. A `git archive` of HEAD, as a tag's tarball would be (faultline-VERSION/ on top), in .build/brew-check/, and
#      .build/brew-check/faultline.rb: the formula with that tarball's file:// url and its sha256 in place of the
#      placeholders, the only two lines that differ (on a Mac, that file in a tap is what `brew install` can build
#      before a release exists: docs/PORTABILITY.md).
#   4. With the network cut off (a new network namespace: unshare -n, only loopback up), scripts/brew-shim.rb runs
#      the formula's own `install` (sha256 checked, tarball unpacked, SwiftPM's release build, into
#      .build/brew-check/Cellar/faultline/VERSION; then every library the binary needs must be the system's or a
#      declared dependency's) and its own `test` block (a scenario served, curl against it).
# Uncommitted changes are not in the tarball (HEAD's tree), but the formula used is the working copy's.
# The build is a full release build from scratch: about 10 minutes on 2 cores. Prints each command it runs and the
# time of each phase. Needs root, or unprivileged user namespaces (then unshare -rn).
# Usage: scripts/brew-check.sh   (Makefile: make brew-check, which installs ruby first: scripts/ensure-deps.sh brew)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
formula="packaging/homebrew/faultline.rb"

# phase, timings, run, fail and apt_mirror, shared by the packaging scripts.
# shellcheck source=scripts/lib/steps.sh
source scripts/lib/steps.sh

[ "$(uname)" = Linux ] || fail "Linux only (unshare); on a Mac, brew itself checks the formula (docs/PORTABILITY.md)"
for tool in ruby git swift curl ip unshare readelf sha256sum; do
    command -v "$tool" >/dev/null || fail "$tool not found (scripts/ensure-deps.sh brew)"
done

state="$repo/.build/brew-check"
mkdir -p "$state"

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    phase
    timings
    if [ "$rc" -eq 0 ]; then echo "brew-check: PASS"; else echo "brew-check: FAIL (exit $rc)" >&2; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

phase "syntax: ruby -wc"
# -w: a warning is a failure too (ruby -wc prints warnings to stderr and still says Syntax OK).
out="$(ruby -wc "$formula" 2>&1)" || { echo "$out" >&2; fail "ruby -wc $formula"; }
echo "+ ruby -wc $formula"
echo "$out"
[ "$out" = "Syntax OK" ] || fail "ruby -wc printed more than Syntax OK"
run ruby -wc scripts/brew-shim.rb

phase "the formula's stanzas and version"
# The single source of truth: exactly one `static let version = "X"` anywhere in Sources/ (as scripts/dist.sh).
mapfile -t versions < <(grep -rhoE 'static let version = "[^"]+"' Sources | sed -E 's/.*"([^"]+)"/\1/')
[ "${#versions[@]}" -eq 1 ] || fail "expected one 'static let version' in Sources/, found ${#versions[@]}"
version="${versions[0]}"
echo "+ ruby scripts/brew-shim.rb info $formula"
info="$(ruby -w scripts/brew-shim.rb info "$formula")" || fail "the formula does not load"
while IFS= read -r line; do echo "  $line"; done <<<"$info"
formula_version="$(sed -n 's/^version=//p' <<<"$info")"
[ "$formula_version" = "$version" ] \
    || fail "the formula's url says version $formula_version, Sources/ says $version: update its url (and sha256)"

phase "source tarball: git archive HEAD"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "  note: uncommitted changes are not in the tarball (HEAD's tree); the formula is the working copy's"
fi
name="faultline-$version"
tarball="$state/$name.tar.gz"
run git archive --format=tar.gz --prefix="$name/" -o "$tarball" HEAD
sha256="$(sha256sum "$tarball" | cut -d' ' -f1)"
echo "  $(basename "$tarball"): $(stat -c %s "$tarball") bytes, sha256 $sha256 (HEAD $(git rev-parse --short HEAD))"

# The formula with the local tarball's url and sha256: the top-level `url "…"` and `sha256 "…"` (two spaces in;
# a bottle's sha256 lines are deeper), each exactly once.
local_formula="$state/faultline.rb"
if [ "$(grep -c '^  url "' "$formula")" -ne 1 ] || [ "$(grep -c '^  sha256 "' "$formula")" -ne 1 ]; then
    fail "$formula: expected one top-level url and one sha256 line"
fi
echo "+ $formula with url file://$tarball and sha256 $sha256 > $local_formula"
sed -e "s|^  url \".*\"\$|  url \"file://$tarball\"|" -e "s|^  sha256 \".*\"\$|  sha256 \"$sha256\"|" \
    "$formula" > "$local_formula"
changed="$(diff "$formula" "$local_formula" | grep -c '^>' || true)"
[ "$changed" -eq 2 ] || fail "rewriting url and sha256 changed $changed lines, not 2"
diff "$formula" "$local_formula" | sed 's/^/  /' || true
run ruby -wc "$local_formula"

# Root: a new network namespace. Otherwise a user namespace too, mapping this user to root inside it.
offline=(unshare -n)
[ "$(id -u)" -eq 0 ] || offline=(unshare -rn)
# Inside: only loopback, brought up (the test serves on 127.0.0.1); anything else there fails the check.
in_offline='ip link set lo up && if ip -o link show | grep -qv ": lo:"; then echo "not offline" >&2; exit 1; fi && "$@"'

phase "offline: no route out"
echo "+ ${offline[*]} sh -c 'ip -br link show; curl https://pypi.org/'"
"${offline[@]}" sh -c "$in_offline" sh sh -c 'ip -br link show | sed "s/^/  /"'
if "${offline[@]}" sh -c "$in_offline" sh curl -sS --max-time 5 -o /dev/null https://pypi.org/ 2>/dev/null; then
    fail "curl reached https://pypi.org/ from inside ${offline[*]}"
fi
echo "  curl https://pypi.org/ fails inside, as it should"

phase "offline: the formula's install (SwiftPM release build)"
echo "+ ${offline[*]} ruby scripts/brew-shim.rb install $local_formula $state"
"${offline[@]}" sh -c "$in_offline" sh ruby -w scripts/brew-shim.rb install "$local_formula" "$state"

phase "offline: the formula's test block"
echo "+ ${offline[*]} ruby scripts/brew-shim.rb test $local_formula $state"
"${offline[@]}" sh -c "$in_offline" sh ruby -w scripts/brew-shim.rb test "$local_formula" "$state"
