#!/usr/bin/env bash
# Proves dist/'s artefacts (scripts/dist.sh) where no Swift exists: a minimal Debian bookworm root
# (debootstrap --variant=minbase, from the mirror apt uses here; cached as .build/dist-check/bookworm-minbase-ARCH.tar.gz
# so later runs skip the download) installs the .deb with `apt-get install ./faultline_*.deb` (which must pull
# libevent, OpenSSL and nghttp2 from its Depends) and unpacks the tarball into /opt. For each of the two
# binaries: `ldd` inside the root must name no swift and nothing "not found"; `faultline serve` runs inside the root
# (which shares this machine's network) while curl outside sends HTTP/1.1, h2c, HTTPS and h2 requests; `verify` and
# `export --format html` run inside the root against it (Faultline's own HTTP client); SIGTERM must exit 0.
# Prints each command it runs and the time of each phase. Needs root (debootstrap, chroot, mount).
# Usage: scripts/dist-check.sh   (Makefile: make dist-check; MIRROR=URL overrides the Debian mirror)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
[ "$(id -u)" -eq 0 ] || { echo "dist-check: needs root (debootstrap, chroot, mount)" >&2; exit 1; }

# phase, timings, run, fail and apt_mirror, shared by the packaging scripts.
# shellcheck source=scripts/lib/steps.sh
source scripts/lib/steps.sh

arch="$(dpkg --print-architecture)"
shopt -s nullglob
debs=(dist/faultline_*_"$arch".deb)
tarballs=(dist/faultline-*-linux-"$(uname -m)".tar.gz)
shopt -u nullglob
[ "${#debs[@]}" -eq 1 ] && [ "${#tarballs[@]}" -eq 1 ] \
    || fail "expected one .deb and one .tar.gz for $arch in dist/ (run make dist first)"
deb="${debs[0]}"
tarball="${tarballs[0]}"
top="$(basename "$tarball" "-linux-$(uname -m).tar.gz")"

mirror="${MIRROR:-$(apt_mirror | head -n 1)}"
[ -n "$mirror" ] || fail "found no bookworm mirror in /etc/apt/sources.list{,.d}; set MIRROR"

state="$repo/.build/dist-check"
cache="$state/bookworm-minbase-$arch.tar.gz"
logs="$state/logs"
mkdir -p "$state/apt-archives/partial" "$logs"
root="$(mktemp -d "$state/root.XXXXXX")"
mounts=()
server_pid=""

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    release_root
    phase
    timings
    if [ "$rc" -eq 0 ]; then echo "dist-check: PASS"; else echo "dist-check: FAIL (exit $rc; logs in $logs)" >&2; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

phase "checksums and the artefacts' metadata"
(cd dist && run sha256sum -c "$(basename "$deb").sha256" "$(basename "$tarball").sha256")
run dpkg-deb --field "$deb" Package Version Architecture Depends
echo "+ readelf -d (RUNPATH/RPATH) of the .deb's usr/bin/faultline"
dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/bin/faultline > "$state/faultline.deb-binary"
if readelf -d "$state/faultline.deb-binary" | grep -E 'RUNPATH|RPATH'; then
    rm -f "$state/faultline.deb-binary"
    fail "the binary has a RUNPATH/RPATH"
fi
rm -f "$state/faultline.deb-binary"
echo "  none"

debian_root

# A clean environment in the root: none of this machine's PATH (its /opt/swift/usr/bin) gets in.
root_env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
    DEBIAN_FRONTEND=noninteractive)
in_root() { env -i "${root_env[@]}" chroot "$root" "$@"; }
run_in_root() { echo "+ [root] $*"; in_root "$@"; }

phase "apt-get install ./faultline_*.deb in the root"
cp "$deb" "$root/tmp/"
run_in_root apt-get update -qq > "$logs/apt-update.log" 2>&1 || { cat "$logs/apt-update.log" >&2; fail "apt-get update"; }
run_in_root apt-get install -y --no-install-recommends "./tmp/$(basename "$deb")" > "$logs/apt-install.log" 2>&1 \
    || { cat "$logs/apt-install.log" >&2; fail "apt-get install"; }
sed -n '/NEW packages will be installed/,/upgraded/p' "$logs/apt-install.log"
run_in_root dpkg-query -W -f '${Package} ${Version} ${Status}\n' faultline
run_in_root ls -l /usr/share/doc/faultline/copyright /usr/share/doc/faultline/LICENSE \
    /usr/share/bash-completion/completions/faultline /usr/share/zsh/site-functions/_faultline \
    /usr/share/fish/vendor_completions.d/faultline.fish

phase "unpack the tarball into the root's /opt"
run tar -C "$root/opt" -xzf "$tarball"
run_in_root ls -l "/opt/$top/bin/faultline" "/opt/$top/share/faultline/scenarios/faultline.schema.json" \
    "/opt/$top/share/doc/faultline/README.md" "/opt/$top/share/doc/faultline/faultline.txt" \
    "/opt/$top/share/doc/faultline/LICENSE" "/opt/$top/share/bash-completion/completions/faultline"

# expect DESCRIPTION WANT CURL-ARGUMENTS...: curl (outside the root) must print WANT for
# '%{http_version} %{http_code}'; the body goes to $body.
body="$logs/body"
expect() {
    local what="$1" want="$2" got
    shift 2
    echo "+ curl $*"
    got="$(curl -sS --max-time 10 -o "$body" -w '%{http_version} %{http_code}' "$@")" || fail "$what: curl failed"
    [ "$got" = "$want" ] || fail "$what: got '$got', want '$want'"
    echo "  $what: HTTP/$got $(head -c 80 "$body" | tr -d '\n')"
}

check_binary() {  # check_binary LABEL BINARY SCENARIOS
    local label="$1" bin="$2" scenarios="$3" line port tls_port rc i
    phase "$label: ldd inside the root"
    run_in_root ldd "$bin" | tee "$logs/$label-ldd.txt"
    if grep -Eqi 'swift|not found' "$logs/$label-ldd.txt"; then fail "$label: ldd names swift or a missing library"; fi
    run_in_root "$bin" --version

    phase "$label: serve; curl outside: HTTP/1.1, h2c, HTTPS, h2"
    rm -f "$root/tmp/port" "$root/tmp/tls-port"
    echo "+ [root] $bin serve $scenarios --port 0 --port-file /tmp/port --tls-port 0 --tls-port-file /tmp/tls-port &"
    # exec: $! is then the server itself (env and chroot exec too), so SIGTERM reaches it and wait sees its exit.
    (exec env -i "${root_env[@]}" chroot "$root" "$bin" serve "$scenarios" --port 0 --port-file /tmp/port \
        --tls-port 0 --tls-port-file /tmp/tls-port > "$logs/$label-serve.out" 2> "$logs/$label-serve.err") &
    server_pid=$!
    for ((i = 0; i < 150; i++)); do
        [ -s "$root/tmp/port" ] && [ -s "$root/tmp/tls-port" ] && break
        kill -0 "$server_pid" 2>/dev/null || { cat "$logs/$label-serve.err" >&2; fail "$label: serve exited"; }
        sleep 0.1
    done
    port="$(cat "$root/tmp/port")" tls_port="$(cat "$root/tmp/tls-port")"
    [ -n "$port" ] && [ -n "$tls_port" ] || fail "$label: no port files after 15 s"
    while read -r line; do echo "  serve: $line"; done < "$logs/$label-serve.out"
    local url="http://127.0.0.1:$port" tls_url="https://127.0.0.1:$tls_port"
    # flaky-catalogue: 503 with Retry-After: 1 twice, then 200; waiting as asked keeps verify's verdicts green.
    expect "HTTP/1.1 /v1/products/1 (1st)" "1.1 503" --http1.1 "$url/v1/products/1"
    sleep 1.1
    expect "HTTP/1.1 /v1/products/1 (2nd)" "1.1 503" --http1.1 "$url/v1/products/1"
    sleep 1.1
    expect "HTTP/1.1 /v1/products/1 (3rd)" "1.1 200" --http1.1 "$url/v1/products/1"
    grep -q '"Widget 1"' "$body" || fail "$label: /v1/products/1 body lacks \"Widget 1\""
    expect "HTTP/1.1 /healthz" "1.1 200" --http1.1 "$url/healthz"
    expect "h2c /healthz" "2 200" --http2-prior-knowledge "$url/healthz"
    expect "HTTPS (HTTP/1.1) /healthz" "1.1 200" -k --http1.1 "$tls_url/healthz"
    expect "h2 /healthz" "2 200" -k --http2 "$tls_url/healthz"
    grep -qx ok "$body" || fail "$label: /healthz body is not ok"

    phase "$label: verify, export --format html inside"
    echo "+ [root] $bin verify --url $url"
    in_root "$bin" verify --url "$url" | tee "$logs/$label-verify.txt" | sed 's/^/  /' \
        || fail "$label: verify exited ${PIPESTATUS[0]}"
    rm -f "$root/tmp/report.html"
    run_in_root "$bin" export --url "$url" --format html -o /tmp/report.html || fail "$label: export failed"
    grep -qi '<html' "$root/tmp/report.html" || fail "$label: the export is not HTML"
    echo "  /tmp/report.html: $(stat -c %s "$root/tmp/report.html") bytes"
    cp "$root/tmp/report.html" "$logs/$label-report.html"
    # Over HTTPS, the CLI's own client checks the server's certificate: trusted through SSL_CERT_FILE (the CA
    # `ca --export` prints), refused (exit 2) without it, since the root's store does not hold that CA.
    echo "+ [root] $bin ca --export > /tmp/ca.pem; SSL_CERT_FILE=/tmp/ca.pem $bin verify --url $tls_url"
    in_root "$bin" ca --export > "$root/tmp/ca.pem" || fail "$label: ca --export failed"
    in_root env SSL_CERT_FILE=/tmp/ca.pem "$bin" verify --url "$tls_url" > "$logs/$label-verify-https.txt" \
        || fail "$label: verify over HTTPS exited $?"
    echo "  $(tail -n 1 "$logs/$label-verify-https.txt")"
    rc=0
    in_root "$bin" verify --url "$tls_url" > /dev/null 2> "$logs/$label-verify-untrusted.txt" || rc=$?
    [ "$rc" -eq 2 ] || fail "$label: verify over HTTPS with no CA trusted exited $rc, not 2"
    echo "  without SSL_CERT_FILE: exit 2, $(cat "$logs/$label-verify-untrusted.txt")"

    phase "$label: SIGTERM"
    echo "+ kill -TERM $server_pid"
    kill -TERM "$server_pid"
    rc=0
    wait "$server_pid" || rc=$?
    server_pid=""
    [ "$rc" -eq 0 ] || { tail -n 20 "$logs/$label-serve.err" >&2; fail "$label: serve exited $rc after SIGTERM"; }
    echo "  exit 0"
}

check_binary deb /usr/bin/faultline /usr/share/faultline/scenarios

# The README's "Five minutes" as a new user types it, with the installed .deb and nothing else: init, validate,
# serve, `curl -sf --retry 3`, verify (must PASS), a typo that validate names, and `init --shell`'s sample test.
# Each step is timed; the user's curl is the root's own (apt-get install curl), as on a fresh Debian.
five_minutes() {
    local start line rc port i
    phase "the README's five minutes with the .deb's faultline, in the root"
    run_in_root apt-get install -y --no-install-recommends curl > "$logs/apt-curl.log" 2>&1 \
        || { cat "$logs/apt-curl.log" >&2; fail "apt-get install curl"; }
    start="$(date +%s.%N)"
    step() { printf '  %6.2f s  %s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$1"; }
    rm -rf "$root/tmp/five" && mkdir -p "$root/tmp/five"
    in_sh() { env -i "${root_env[@]}" chroot "$root" sh -c "cd /tmp/five && $1"; }
    in_sh "faultline init" > "$logs/five-init.txt" || fail "five minutes: faultline init"
    step "faultline init: $(head -n 2 "$logs/five-init.txt" | tr '\n' ' ')"
    line="$(in_sh "faultline validate scenarios")" || fail "five minutes: validate"
    [ "$line" = "ok: 1 scenario(s), 1 route(s)" ] || fail "five minutes: validate said '$line'"
    step "faultline validate scenarios: $line"
    rm -f "$root/tmp/five/port"
    (exec env -i "${root_env[@]}" chroot "$root" sh -c \
        "cd /tmp/five && exec faultline serve scenarios --port 0 --port-file port" \
        > "$logs/five-serve.out" 2> "$logs/five-serve.err") &
    server_pid=$!
    for ((i = 0; i < 150; i++)); do [ -s "$root/tmp/five/port" ] && break; sleep 0.1; done
    port="$(cat "$root/tmp/five/port")" || fail "five minutes: no port file"
    step "faultline serve scenarios: $(head -n 1 "$logs/five-serve.out")"
    line="$(in_sh "curl -sf --retry 3 http://127.0.0.1:$port/v1/items/42")" || fail "five minutes: curl --retry"
    [ "$line" = '{"id":"42","name":"Item 42"}' ] || fail "five minutes: curl printed '$line'"
    step "curl -sf --retry 3 …/v1/items/42: $line"
    in_sh "faultline verify --url http://127.0.0.1:$port" > "$logs/five-verify.txt" \
        || { cat "$logs/five-verify.txt" >&2; fail "five minutes: verify did not pass"; }
    grep -q '^PASS  example/honorsRetryAfter' "$logs/five-verify.txt" || fail "five minutes: no PASS line"
    step "faultline verify: $(tail -n 1 "$logs/five-verify.txt")"
    kill -TERM "$server_pid"; rc=0; wait "$server_pid" || rc=$?; server_pid=""
    [ "$rc" -eq 0 ] || fail "five minutes: serve exited $rc after SIGTERM"
    step "SIGTERM: exit 0; $(tail -n 1 "$logs/five-serve.err")"
    printf '{"$schema": "./faultline.schema.json", "name": "typo", "routes": [{"id": "item", "match": {"path": "/v1/items/{id}"}, "responses": [{"stauts": 503}]}]}' \
        > "$root/tmp/five/scenarios/typo.json"
    rc=0; in_sh "faultline validate scenarios/typo.json" > /dev/null 2> "$logs/five-typo.txt" || rc=$?
    [ "$rc" -eq 1 ] && grep -q 'did you mean "status"' "$logs/five-typo.txt" || fail "five minutes: the typo was not named"
    step "faultline validate scenarios/typo.json: exit 1, $(head -n 1 "$logs/five-typo.txt")"
    rm "$root/tmp/five/scenarios/typo.json"
    in_sh "faultline init --shell > /dev/null && ./faultline-example.sh" > "$logs/five-shell.txt" 2>&1 \
        || { cat "$logs/five-shell.txt" >&2; fail "five minutes: init --shell's sample failed"; }
    step "faultline init --shell; ./faultline-example.sh: $(tail -n 1 "$logs/five-shell.txt")"
}
five_minutes
check_binary tarball "/opt/$top/bin/faultline" "/opt/$top/share/faultline/scenarios"
phase "the wheel: scripts/dist-check-wheel.sh (timings of its own)"; run scripts/dist-check-wheel.sh
phase "the container image: scripts/dist-check-image.sh"; run scripts/dist-check-image.sh

phase "clean up the root"
