#!/usr/bin/env bash
# Proves dist/'s wheel (scripts/dist-wheel.sh) where no Swift exists, as a Python user would meet it:
# - here: its checksum, `auditwheel show` (its JSON: the overall tag is the one in its name, no external library),
#   faultline/bin/faultline stored executable beside faultline.libs/;
# - in a minimal Debian bookworm root (the debootstrap --variant=minbase tarball dist-check.sh caches as
#   .build/dist-check/bookworm-minbase-ARCH.tar.gz; made here too when absent), with python3, python3-venv and curl
#   from apt: a fresh venv gets `pip install faultline-*.whl pytest` (pytest from PyPI; the root shares this
#   machine's network) and nothing else; the bundled binary must be what binary_path() finds, load only libraries
#   from faultline.libs/ or the policy's, and serve. Then pytest runs there, with a PATH that has no swift and no
#   faultline, in a project holding packaging/python/README.md's three-line test, its client and the repository's
#   scenarios/flaky-catalogue.json: it must pass; a test whose client ignores Retry-After must fail on the
#   honorsRetryAfter verdict (assert_verdicts); --faultline-binary and $FAULTLINE_BIN must override the bundled binary.
# Prints each command it runs and the time of each phase. Needs root (debootstrap, chroot, mount). dist-check.sh
# runs it last; it runs alone too.
# Usage: scripts/dist-check-wheel.sh   (MIRROR=URL overrides the Debian mirror; PYTHON=python3.X is the Python with
# auditwheel)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
[ "$(id -u)" -eq 0 ] || { echo "dist-check-wheel: needs root (debootstrap, chroot, mount)" >&2; exit 1; }
python="${PYTHON:-python3}"

# phase, timings, run, fail and apt_mirror, shared by the packaging scripts.
# shellcheck source=scripts/lib/steps.sh
source scripts/lib/steps.sh

arch="$(dpkg --print-architecture)"
shopt -s nullglob
wheels=(dist/faultline-*-py3-none-manylinux_*_"$(uname -m)".whl)
shopt -u nullglob
[ "${#wheels[@]}" -eq 1 ] \
    || fail "expected one faultline-*-py3-none-manylinux_*_$(uname -m).whl in dist/, found ${#wheels[@]} (make dist)"
wheel="${wheels[0]}"
name="$(basename "$wheel")"
tag="${name%.whl}"
tag="${tag##*-}"

# The Debian mirror apt uses here (as dist-check.sh finds it): the URIs of the deb822 stanza, or the one-line
# entry, that serves bookworm.
mirror="${MIRROR:-$(apt_mirror | head -n 1)}"
[ -n "$mirror" ] || fail "found no bookworm mirror in /etc/apt/sources.list{,.d}; set MIRROR"

state="$repo/.build/dist-check"
cache="$state/bookworm-minbase-$arch.tar.gz"
logs="$state/logs"
mkdir -p "$state/apt-archives/partial" "$state/pip-cache" "$logs"
root="$(mktemp -d "$state/wheel-root.XXXXXX")"
mounts=()

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    release_root
    phase
    timings wheel
    if [ "$rc" -eq 0 ]; then
        echo "dist-check-wheel: PASS"
    else
        echo "dist-check-wheel: FAIL (exit $rc; logs in $logs)" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

phase "the wheel: checksum, auditwheel show, its files"
(cd dist && run sha256sum -c "$name.sha256")
run "$python" -m auditwheel show "$wheel"
# The JSON says it without line wrapping: the overall tag (the most compatible policy whose symbol versions and
# library list the wheel meets) and the external libraries (those the policy does not allow), which must be none.
echo "+ $python -m auditwheel show --json $wheel"
mapfile -t shown < <("$python" -m auditwheel show --json "$wheel" 2>/dev/null | "$python" -c '
import json, sys
show = json.load(sys.stdin)
print(show["overall_tag"])
print(" ".join(sorted(show["external_libs"])))' \
    || echo "auditwheel show --json failed (--json needs a recent auditwheel: scripts/ensure-deps.sh dist)" >&2)
[ "${shown[0]:-}" = "$tag" ] || fail "auditwheel show's overall tag is '${shown[0]:-}', the wheel's name says $tag"
echo "  overall tag $tag, the tag in its name"
[ -z "${shown[1]:-}" ] || fail "$name needs external libraries outside $tag's policy: ${shown[1]}"
echo "  external libraries: none beyond $tag's policy"
echo "+ the wheel's faultline/bin/faultline, faultline.libs/, WHEEL"
"$python" - "$wheel" <<'EOF' || fail "the wheel's contents"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as archive:
    names = archive.namelist()
    binary = archive.getinfo("faultline/bin/faultline")
    mode = binary.external_attr >> 16
    libs = sorted(n.split("/", 1)[1] for n in names if n.startswith("faultline.libs/") and not n.endswith("/"))
    wheel_file = archive.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
print(f"  faultline/bin/faultline: {binary.file_size} bytes, mode {mode & 0o7777:o}")
print(f"  faultline.libs/: {len(libs)}: {' '.join(libs)}")
print("  WHEEL: " + "; ".join(line for line in wheel_file.splitlines() if line.startswith(("Root-Is-Purelib", "Tag"))))
assert mode & 0o111, "faultline/bin/faultline is not stored executable"
assert libs, "no faultline.libs/"
assert "Root-Is-Purelib: false" in wheel_file, "the wheel is pure"
EOF

debian_root
# pip's downloads persist between runs too.
mount_into /root/.cache/pip --bind "$state/pip-cache"

# A clean environment in the root: none of this machine's PATH (its /opt/swift/usr/bin) or pip settings get in.
root_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
root_env=(PATH="$root_path" HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)
# pip in a venv trusts only its own CA bundle (certifi), not the system store; where this machine reaches PyPI
# through a CA of its own (a proxy's), pip in the root is given this machine's store, as its network is.
host_ca=/etc/ssl/certs/ca-certificates.crt
if [ -f "$host_ca" ]; then
    cp "$host_ca" "$root/etc/host-ca-certificates.crt"
    root_env+=(PIP_CERT=/etc/host-ca-certificates.crt)
fi
in_root() { env -i "${root_env[@]}" chroot "$root" "$@"; }
run_in_root() { echo "+ [root] $*"; in_root "$@"; }

phase "apt-get install python3 python3-venv curl in the root"
run_in_root apt-get update -qq > "$logs/wheel-apt-update.log" 2>&1 \
    || { cat "$logs/wheel-apt-update.log" >&2; fail "apt-get update"; }
run_in_root apt-get install -y --no-install-recommends python3 python3-venv curl > "$logs/wheel-apt-install.log" 2>&1 \
    || { cat "$logs/wheel-apt-install.log" >&2; fail "apt-get install"; }
sed -n '/NEW packages will be installed/,/upgraded/p' "$logs/wheel-apt-install.log"
run_in_root python3 --version

phase "a fresh venv: pip install the wheel and pytest"
cp "$wheel" "$root/tmp/"
venv=/opt/venv
run_in_root python3 -m venv "$venv"
run_in_root "$venv/bin/pip" install -q --disable-pip-version-check --no-input "/tmp/$name" pytest \
    > "$logs/wheel-pip-install.log" 2>&1 || { cat "$logs/wheel-pip-install.log" >&2; fail "pip install"; }
echo "+ [root] $venv/bin/pip list"
in_root "$venv/bin/pip" list --disable-pip-version-check > "$logs/wheel-pip-list.txt"
sed 's/^/  /' "$logs/wheel-pip-list.txt"
requires="$(in_root "$venv/bin/pip" show --disable-pip-version-check faultline | sed -n 's/^Requires: *//p')"
[ -z "$requires" ] || fail "the installed faultline requires $requires"
echo "  faultline requires nothing (pip show: Requires is empty)"

# The venv's bin/ first, as after `source venv/bin/activate`; nothing of this machine's. No swift, no faultline.
venv_env=(PATH="$venv/bin:$root_path" HOME=/root LANG=C.UTF-8)
in_venv() { env -i "${venv_env[@]}" chroot "$root" "$@"; }
run_in_venv() { echo "+ [root, venv] $*"; in_venv "$@"; }
if in_venv /bin/sh -c 'command -v swift swiftc faultline' >/dev/null 2>&1; then
    fail "the venv's PATH finds a swift or a faultline"
fi
echo "  the venv's PATH ($venv/bin:$root_path) finds no swift, swiftc or faultline"

phase "the bundled binary: found, loads from faultline.libs/, runs"
bundled="$(in_venv python -c 'import faultline; print(faultline.binary_path())')" || fail "binary_path() failed"
echo "  faultline.binary_path(): $bundled"
case "$bundled" in
    "$venv"/lib/python3*/site-packages/faultline/bin/faultline) ;;
    *) fail "binary_path() is not the venv's bundled binary" ;;
esac
run_in_root ls -l "$bundled"
echo "+ [root] ldd $bundled"
in_root ldd "$bundled" > "$logs/wheel-ldd.txt"
sed 's/^/  /' "$logs/wheel-ldd.txt"
if grep -q 'not found' "$logs/wheel-ldd.txt"; then fail "the bundled binary misses a library in the root"; fi
if grep -qi swift "$logs/wheel-ldd.txt"; then fail "the bundled binary needs a Swift library"; fi
policy_libs="$("$python" - "${tag%_"$(uname -m)"}" <<'EOF'
import json, pathlib, sys, auditwheel
policies = json.loads((pathlib.Path(auditwheel.__file__).parent / "policy" / "manylinux-policy.json").read_text())
[policy] = [p for p in policies if p["name"] == sys.argv[1] or sys.argv[1] in p["aliases"]]
print(" ".join(policy["lib_whitelist"]))
EOF
)" || fail "no auditwheel policy for $tag"
outside="$(awk -v keep="$policy_libs" 'BEGIN { n = split(keep, k, " "); for (i = 1; i <= n; i++) ok[k[i]] = 1 }
    $2 == "=>" && $3 ~ /^\// && $3 !~ /\/faultline\.libs\// && !($1 in ok) { print "  " $1 " => " $3 }' \
    "$logs/wheel-ldd.txt")"
[ -z "$outside" ] || fail "the bundled binary loads the root's libraries outside $tag's policy:
$outside"
echo "  every library is from faultline.libs/ or in $tag's policy"
run_in_venv "$bundled" --version

# The project: the README's three-line test, the client it names, the repository's scenario.
project="$root/tmp/project"
mkdir -p "$project/scenarios"
cp scenarios/flaky-catalogue.json "$project/scenarios/"
awk '/^```python$/ { inside = 1; next } inside && /^```/ { exit } inside' packaging/python/README.md \
    > "$project/test_readme_sample.py"
grep -q '^def test_.*(faultline):' "$project/test_readme_sample.py" \
    || fail "no test in packaging/python/README.md's sample"
cat > "$project/my_client.py" <<'EOF'
"""The client under test: GET a product, retrying 503s; `patient` waits as Retry-After asks."""
import json
import time
import urllib.error
import urllib.request


def get_product(base_url, product_id, attempts=4, patient=True):
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(f"{base_url}/v1/products/{product_id}", timeout=5) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            if error.code != 503:
                raise
            if patient:
                time.sleep(float(error.headers.get("Retry-After", "1")))
    raise RuntimeError("gave up")
EOF

# pytest_in_venv LOG WANT-EXIT ARGUMENTS...: pytest (plugins autoloaded: the wheel's pytest11 entry point) in the
# project, with the venv's environment and extra_env's, whose output goes to LOG and is printed.
extra_env=()
pytest_in_venv() {
    local log="$logs/$1" want="$2" rc=0
    shift 2
    echo "+ [root, venv] cd /tmp/project && ${extra_env[*]}${extra_env[*]:+ }python -m pytest $*"
    env -i "${venv_env[@]}" "${extra_env[@]}" chroot "$root" \
        /bin/sh -c 'cd /tmp/project && exec python -m pytest "$@"' pytest "$@" \
        > "$log" 2>&1 || rc=$?
    sed 's/^/  | /' "$log"
    [ "$rc" -eq "$want" ] || fail "pytest exited $rc, not $want"
}

phase "pytest in the root: the README's three-line test passes"
echo "+ cat /tmp/project/test_readme_sample.py"
sed 's/^/  | /' "$project/test_readme_sample.py"
pytest_in_venv wheel-pytest-pass.txt 0 -p no:cacheprovider -v test_readme_sample.py
grep -q 'plugins:.*faultline' "$logs/wheel-pytest-pass.txt" || fail "pytest's header does not list the faultline plugin"
grep -Eq '^=+ 1 passed' "$logs/wheel-pytest-pass.txt" || fail "not '1 passed'"

phase "pytest in the root: assert_verdicts fails an impatient client"
cat > "$project/test_impatient.py" <<'EOF'
import pytest
from my_client import get_product


@pytest.mark.faultline("scenarios/flaky-catalogue.json")
def test_an_impatient_client_is_caught(faultline):
    assert get_product(faultline.url, "7", patient=False)["id"] == "7"
    faultline.assert_verdicts(strict=False)
EOF
pytest_in_venv wheel-pytest-fail.txt 1 -p no:cacheprovider test_impatient.py
grep -q 'AssertionError: faultline: 1 of 3 verdict(s) failed' "$logs/wheel-pytest-fail.txt" \
    || fail "the failure is not assert_verdicts' 'faultline: 1 of 3 verdict(s) failed'"
grep -q 'FAIL  flaky-catalogue/honorsRetryAfter: request #2 came' "$logs/wheel-pytest-fail.txt" \
    || fail "the failure does not name the honorsRetryAfter verdict"
grep -Eq '^=+ 1 failed' "$logs/wheel-pytest-fail.txt" || fail "not '1 failed'"
rm "$project/test_impatient.py"

phase "pytest in the root: --faultline-binary and \$FAULTLINE_BIN"
# A wrapper that notes each run, then is the bundled binary; the test asserts the fixture's server is its child.
cat > "$root/tmp/wrapped-faultline" <<EOF
#!/bin/sh
echo "\$0 \$*" >> /tmp/wrapped-faultline.log
exec $bundled "\$@"
EOF
chmod 755 "$root/tmp/wrapped-faultline"
cat > "$project/test_override.py" <<'EOF'
import os

import faultline as package


def test_the_override_runs(faultline):
    assert package.binary_path() == os.environ.get("WANT_BINARY"), package.binary_path()
    assert faultline.health()["status"] == "ok"
EOF
rm -f "$root/tmp/wrapped-faultline.log"
extra_env=(WANT_BINARY=/tmp/wrapped-faultline)
pytest_in_venv wheel-pytest-option.txt 0 -p no:cacheprovider -q --faultline-binary /tmp/wrapped-faultline \
    test_override.py
extra_env=(WANT_BINARY=/tmp/wrapped-faultline FAULTLINE_BIN=/tmp/wrapped-faultline)
pytest_in_venv wheel-pytest-env.txt 0 -p no:cacheprovider -q test_override.py
echo "+ cat /tmp/wrapped-faultline.log"
sed 's/^/  | /' "$root/tmp/wrapped-faultline.log"
[ "$(grep -c ' serve ' "$root/tmp/wrapped-faultline.log")" -eq 2 ] || fail "the wrapper did not serve twice"
extra_env=(FAULTLINE_BIN=/tmp/nowhere)
pytest_in_venv wheel-pytest-env-missing.txt 1 -p no:cacheprovider -q --tb=line test_override.py
grep -q 'FAULTLINE_BIN=/tmp/nowhere is not an executable file' "$logs/wheel-pytest-env-missing.txt" \
    || fail "a FAULTLINE_BIN that is not there is not named as the error"

phase "clean up the root"
