#!/usr/bin/env bash
# Proves dist/'s container image (scripts/dist-image.sh) without a registry or a container engine: `umoci unpack`
# turns the OCI archive into a runtime bundle, and what the image says about itself is read from it (the bundle's
# config.json: entrypoint + cmd, user, env, cwd; the image config: ports, volumes, labels), never assumed. The user
# must not be root and must own /tls (mode 0700, as faultline demands of the CA's folder); the loader inside the
# rootfs (`ld.so --list`) must find every library there and none named swift. The server then runs inside the rootfs
# as that uid:gid (chroot --userspec: no capabilities, no group but its own), /proc and /dev mounted, a tmpfs on /tls
# owned as the image's /tls is (what a docker or podman volume copies), in a network namespace of its own (so the
# image's fixed ports 8080 and 8443 never collide with this machine's): curl from outside the rootfs, in that
# namespace, sends HTTP/1.1, h2c, and HTTPS and h2 trusting the CA that `faultline ca --tls-dir /tls --export` prints
# inside; `verify` and `export --format html` run inside; SIGTERM must exit 0. The docker-archive must be readable
# (skopeo inspect: the same image config, tags faultline:VERSION and faultline:latest).
# Where podman is installed it loads both archives into a private store (--root under the work folder, not this
# machine's), runs faultline:VERSION with -p and a volume on /tls, gets the CA with `podman run ... ca --export` on
# that volume, sends the same four kinds of request and stops it (SIGTERM, exit 0). If podman cannot start a
# container at all here, that part is reported and skipped, not failed. On cgroup v1 (hybrid) crun refuses ("cgroups
# in hybrid mode not supported"), so podman gets --runtime runc where runc is installed; podman's default nofile and
# nproc limits exceed this sandbox's hard limits (setrlimit: EPERM), so --ulimit passes the hard limits (nproc at
# most kernel.pid_max: runc refuses more here). Prints each command it runs and the time of each phase. Needs root
# (chroot, mount, ip netns), umoci, skopeo, jq (scripts/ensure-deps.sh dist); podman and runc are optional.
# Usage: scripts/dist-check-image.sh   (scripts/dist-check.sh runs it; Makefile: make dist-check)
#   PODMAN=1: podman must run the image (a skip fails); PODMAN=0: podman is not tried.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
[ "$(id -u)" -eq 0 ] || { echo "dist-check-image: needs root (chroot, mount, ip netns)" >&2; exit 1; }

# phase, timings, run, fail and apt_mirror, shared by the packaging scripts.
# shellcheck source=scripts/lib/steps.sh
source scripts/lib/steps.sh
run_to() { local out="$1"; shift; echo "+ $* > $(basename "$out")"; "$@" > "$out"; }  # run_to FILE COMMAND...

for tool in umoci skopeo jq curl chroot ip readelf; do
    command -v "$tool" >/dev/null || fail "needs $tool (scripts/ensure-deps.sh dist)"
done
shopt -s nullglob
ocis=(dist/faultline-*-oci.tar)
dockers=(dist/faultline-*-docker.tar)
shopt -u nullglob
if [ "${#ocis[@]}" -ne 1 ] || [ "${#dockers[@]}" -ne 1 ]; then
    fail "expected one faultline-*-oci.tar and one faultline-*-docker.tar in dist/ (run make dist first)"
fi
oci="${ocis[0]}"
docker="${dockers[0]}"

state="$repo/.build/dist-check"
logs="$state/logs/image"
mkdir -p "$logs"
work="$(mktemp -d "$state/image.XXXXXX")"
bundle="$work/bundle"
rootfs="$bundle/rootfs"
netns="faultline-check-$$"
netns_made=""
mounts=()
server_pid=""
podman_args=()
podman_container=""
podman_volume="faultline-check-tls-$$"
podman_runroot="/run/faultline-check-$$"  # podman wants a --runroot of at most 50 characters

cleanup() {
    local rc=$? i
    trap - EXIT INT TERM
    set +e  # every step of the cleanup runs, whatever an earlier one did
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    # Anything else this run left running inside the rootfs (its pids only: their root is $rootfs).
    for i in /proc/[0-9]*; do
        [ "$(readlink "$i/root" 2>/dev/null)" = "$rootfs" ] && kill -KILL "${i#/proc/}" 2>/dev/null
    done
    if [ "${#podman_args[@]}" -gt 0 ]; then
        if [ -n "$podman_container" ]; then
            pm rm -f -t 0 "$podman_container" >/dev/null 2>&1
        fi
        pm volume rm -f "$podman_volume" >/dev/null 2>&1
        pm rmi -a -f >/dev/null 2>&1
        # Whatever the private store still has mounted (overlay layers, its own shm).
        grep -oE " ($work/podman|$podman_runroot)/[^ ]+" /proc/mounts | sort -r \
            | while read -r i; do umount -l "$i"; done
        grep -q " $podman_runroot/" /proc/mounts || rm -rf --one-file-system "$podman_runroot"
    fi
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount "${mounts[$i]}" 2>/dev/null || umount -l "${mounts[$i]}" || true
    done
    [ -z "$netns_made" ] || ip netns delete "$netns" 2>/dev/null || true
    # Never delete through a mount that is still there (/dev is bound into the rootfs).
    if grep -q " $work/" /proc/mounts; then
        echo "dist-check-image: still mounted under $work; left in place" >&2
    else
        rm -rf --one-file-system "$work"
    fi
    phase
    timings
    if [ "$rc" -eq 0 ]; then
        echo "dist-check-image: PASS"
    else
        echo "dist-check-image: FAIL (exit $rc; logs in $logs)" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

phase "checksums; skopeo inspect of both archives"
(cd dist && run sha256sum -c "$(basename "$oci").sha256" "$(basename "$docker").sha256")
layout="$work/layout"
mkdir -p "$layout"
run tar -C "$layout" -xf "$oci"
mapfile -t refs < <(jq -r '.manifests[].annotations["org.opencontainers.image.ref.name"] // empty' "$layout/index.json")
[ "${#refs[@]}" -eq 1 ] || fail "$oci: expected one image (one ref.name) in index.json, found ${#refs[@]}"
ref="${refs[0]}"
version="${ref#faultline:}"
if [ "$ref" != "faultline:$version" ] || [ -z "$version" ]; then
    fail "$oci: its image is named '$ref', not faultline:VERSION"
fi
[ "$oci" = "dist/faultline-$version-oci.tar" ] || fail "$oci holds faultline:$version"
echo "  $oci: one image, $ref"
run_to "$logs/inspect-oci.json" skopeo inspect "oci-archive:$oci"
run_to "$logs/inspect-docker.json" skopeo inspect "docker-archive:$docker"
jq -r '"  \(.Architecture)/\(.Os), layers \(.Layers | length), created \(.Created)"' "$logs/inspect-docker.json"
skopeo inspect --config --raw "oci-archive:$oci" > "$logs/config-oci.json"
skopeo inspect --config --raw "docker-archive:$docker" > "$logs/config-docker.json"
cmp -s "$logs/config-oci.json" "$logs/config-docker.json" || fail "the two archives' image configs differ"
echo "  the same image config in both: sha256:$(sha256sum < "$logs/config-oci.json" | cut -d' ' -f1)"
echo "+ tar -xOf $docker manifest.json (RepoTags)"
tags="$(tar -xOf "$docker" manifest.json | jq -r '.[].RepoTags[]' | sort | tr '\n' ' ')"
echo "  $tags"
for tag in "faultline:$version" faultline:latest; do
    case " $tags" in *" docker.io/library/$tag "* | *" $tag "*) ;; *) fail "$docker is not tagged $tag" ;; esac
done

phase "umoci unpack"
run umoci unpack --image "$layout:$ref" "$bundle"
echo "  rootfs: $(du -sm "$rootfs" | cut -f1) MB, $(find "$rootfs" | wc -l) entries"

phase "the image's configuration (bundle config.json, image config)"
config="$bundle/config.json"
mapfile -t args < <(jq -r '.process.args[]' "$config")
mapfile -t image_env < <(jq -r '.process.env[]' "$config")
uid="$(jq -r '.process.user.uid' "$config")" gid="$(jq -r '.process.user.gid' "$config")"
extra_gids="$(jq -r '.process.user.additionalGids // [] | join(",")' "$config")"
cwd="$(jq -r '.process.cwd' "$config")"
echo "  args: ${args[*]}"
echo "  user: $uid:$gid (additional gids: ${extra_gids:-none}), cwd $cwd"
echo "  env: ${image_env[*]}"
jq -c '{ExposedPorts: .config.ExposedPorts, Volumes: .config.Volumes, StopSignal: .config.StopSignal}' \
    "$logs/config-oci.json" | sed 's/^/  /'
jq -r '.config.Labels // {} | to_entries[] | "  label \(.key)=\(.value)"' "$logs/config-oci.json"
if [ "$uid" = 0 ] || [ "$gid" = 0 ]; then fail "the image runs as $uid:$gid: root"; fi
[ -z "$extra_gids" ] || fail "the image adds supplementary groups $extra_gids"
[ "$cwd" = / ] || fail "the image's working directory is $cwd; this check runs it from / (chroot)"
name="$(awk -F: -v uid="$uid" '$3 == uid { print $1 }' "$rootfs/etc/passwd")"
[ -n "$name" ] || fail "the rootfs's /etc/passwd has no user $uid"
echo "  /etc/passwd: $uid is $name"
# option NAME: the value after NAME in the args (the image's own choice of port, TLS port, TLS folder).
option() {
    local i
    for ((i = 0; i < ${#args[@]} - 1; i++)); do
        [ "${args[$i]}" != "$1" ] || { echo "${args[$((i + 1))]}"; return; }
    done
}
[ "${args[1]:-}" = serve ] || fail "the image's command is not 'faultline serve' (${args[*]})"
port="$(option --port)" tls_port="$(option --tls-port)" tls_dir="$(option --tls-dir)" host="$(option --host)"
if [ -z "$port" ] || [ -z "$tls_port" ] || [ -z "$tls_dir" ]; then
    fail "the command names no --port, --tls-port or --tls-dir"
fi
[ "$host" = 0.0.0.0 ] || fail "the command binds --host '$host', not 0.0.0.0: unreachable from outside a container"
for p in "$port" "$tls_port"; do
    jq -e --arg p "$p/tcp" '.config.ExposedPorts | has($p)' "$logs/config-oci.json" >/dev/null \
        || fail "port $p is served but not in ExposedPorts"
done
jq -e --arg d "$tls_dir" '.config.Volumes | has($d)' "$logs/config-oci.json" >/dev/null \
    || fail "--tls-dir $tls_dir is not a volume"
owner="$(stat -c '%u:%g %a' "$rootfs$tls_dir")"
[ "$owner" = "$uid:$gid 700" ] || fail "$tls_dir in the image is $owner, not $uid:$gid 700"
echo "  serves $port (HTTP/1.1, h2c) and $tls_port (HTTPS, h2); $tls_dir is a volume, $owner"
[ "$(stat -c %a "$rootfs/tmp")" = 1777 ] || fail "/tmp is not 1777"

phase "rootfs: the loader's --list; no swift, no shell"
entrypoint="$rootfs${args[0]}"
if [ ! -x "$entrypoint" ] || [ -L "$entrypoint" ]; then fail "the entrypoint ${args[0]} is not an executable file"; fi
interpreter="$(readelf -l "$entrypoint" | sed -n 's/.*Requesting program interpreter: \([^]]*\)].*/\1/p')"
[ -n "$interpreter" ] || fail "${args[0]} names no program interpreter"
run_to "$logs/ldd.txt" chroot "$rootfs" "$interpreter" --list "${args[0]}"
sed 's/^/  /' "$logs/ldd.txt"
if grep -Eqi 'swift|not found' "$logs/ldd.txt"; then fail "the loader names swift or a missing library"; fi
echo "  $(grep -c '=> /' "$logs/ldd.txt") libraries, all inside the rootfs"
swift="$(find "$rootfs" -iname '*swift*' | sed "s|^$rootfs||")"
[ -z "$swift" ] || fail "the rootfs has swift files: $swift"
echo "  no file named *swift* in the rootfs"
[ ! -e "$rootfs/bin/sh" ] || fail "the rootfs has /bin/sh (a distroless image has no shell)"
echo "  no /bin/sh; $(grep -c 'BEGIN CERTIFICATE' "$rootfs/etc/ssl/certs/ca-certificates.crt") CA certificates"

mount_into() {  # mount_into TARGET MOUNT-ARGUMENTS...
    local target="$rootfs$1"
    shift
    mkdir -p "$target"
    run mount "$@" "$target"
    mounts+=("$target")
}
mount_into /proc -t proc proc
mount_into /dev --bind /dev
mount_into "$tls_dir" -t tmpfs -o "uid=$uid,gid=$gid,mode=700,size=16m" tmpfs
run ip netns add "$netns"
netns_made=1
run ip -n "$netns" link set lo up
# as_image ARGUMENTS...: in the namespace, inside the rootfs, as the image's user with the image's environment.
as_image() {
    env -i "${image_env[@]}" "$(command -v ip)" netns exec "$netns" \
        "$(command -v chroot)" --userspec="$uid:$gid" --groups="$gid" "$rootfs" "$@"
}
run_as_image() { echo "+ [image $uid:$gid] $*"; as_image "$@"; }
# Where curl runs: in the server's network namespace (for podman: this machine's, through its port mappings).
curl_via=(ip netns exec "$netns")
run_as_image "${args[0]}" --version

phase "serve (the image's entrypoint + cmd); curl: HTTP/1.1, h2c, HTTPS, h2"
echo "+ [image $uid:$gid] ${args[*]} &"
rm -f "$logs/serve.out" "$logs/serve.err"  # not a previous run's "listening on" lines
# exec: $! is then the server itself (env, ip netns exec and chroot exec too), so SIGTERM reaches it.
(exec env -i "${image_env[@]}" "$(command -v ip)" netns exec "$netns" \
    "$(command -v chroot)" --userspec="$uid:$gid" --groups="$gid" "$rootfs" "${args[@]}" \
    > "$logs/serve.out" 2> "$logs/serve.err") &
server_pid=$!
for ((i = 0; i < 150; i++)); do
    [ -f "$logs/serve.out" ] && [ "$(grep -c '^listening on' "$logs/serve.out")" -ge 2 ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$logs/serve.err" >&2; fail "serve exited"; }
    sleep 0.1
done
[ "$(grep -c '^listening on' "$logs/serve.out")" -ge 2 ] || fail "serve did not listen on both ports in 15 s"
while read -r line; do echo "  serve: $line"; done < "$logs/serve.out"
grep -qx "listening on http://0.0.0.0:$port" "$logs/serve.out" || fail "not listening on 0.0.0.0:$port"
grep -qx "listening on https://0.0.0.0:$tls_port" "$logs/serve.out" || fail "not listening on 0.0.0.0:$tls_port"
echo "+ grep Uid/Gid/Groups/CapEff /proc/$server_pid/status; readlink /proc/$server_pid/root"
grep -E '^(Uid|Gid|Groups|CapEff):' "/proc/$server_pid/status" | tr -s '\t' ' ' | sed 's/^/  /' \
    | tee "$logs/serve.status"
grep -q "^  Uid: $uid $uid $uid $uid$" "$logs/serve.status" || fail "the server does not run as uid $uid"
grep -q "^  Gid: $gid $gid $gid $gid$" "$logs/serve.status" || fail "the server does not run as gid $gid"
grep -Eq "^  Groups: ?($gid ?)?$" "$logs/serve.status" || fail "the server has supplementary groups"
grep -q '^  CapEff: 0000000000000000$' "$logs/serve.status" || fail "the server has capabilities"
[ "$(readlink "/proc/$server_pid/root")" = "$rootfs" ] || fail "the server's root is not the rootfs"
echo "  root $rootfs"

# expect DESCRIPTION WANT CURL-ARGUMENTS...: curl (outside the rootfs, in its network namespace) must print WANT
# for '%{http_version} %{http_code}'; the body goes to $body.
body="$logs/body"
expect() {
    local what="$1" want="$2" got
    shift 2
    echo "+ ${curl_via[*]:+[netns] }curl $*"
    got="$("${curl_via[@]}" curl -sS --max-time 10 -o "$body" -w '%{http_version} %{http_code}' "$@")" \
        || fail "$what: curl failed"
    [ "$got" = "$want" ] || fail "$what: got '$got', want '$want'"
    echo "  $what: HTTP/$got $(head -c 80 "$body" | tr -d '\n')"
}
url="http://127.0.0.1:$port" tls_url="https://127.0.0.1:$tls_port"
# flaky-catalogue: 503 with Retry-After: 1 twice, then 200; waiting as asked keeps verify's verdicts green.
expect "HTTP/1.1 /v1/products/1 (1st)" "1.1 503" --http1.1 "$url/v1/products/1"
sleep 1.1
expect "HTTP/1.1 /v1/products/1 (2nd)" "1.1 503" --http1.1 "$url/v1/products/1"
sleep 1.1
expect "HTTP/1.1 /v1/products/1 (3rd)" "1.1 200" --http1.1 "$url/v1/products/1"
grep -q '"Widget 1"' "$body" || fail "/v1/products/1 body lacks \"Widget 1\""
expect "HTTP/1.1 /healthz" "1.1 200" --http1.1 "$url/healthz"
expect "h2c /healthz" "2 200" --http2-prior-knowledge "$url/healthz"
# The CA to trust, as a user gets it: `faultline ca --tls-dir /tls --export` in the image.
echo "+ [image $uid:$gid] ${args[0]} ca --tls-dir $tls_dir --export > ca.pem"
as_image "${args[0]}" ca --tls-dir "$tls_dir" --export > "$logs/ca.pem"
grep -q 'BEGIN CERTIFICATE' "$logs/ca.pem" || fail "ca --export printed no certificate"
cmp -s "$logs/ca.pem" "$rootfs$tls_dir/ca.pem" || fail "ca --export is not $tls_dir/ca.pem"
echo "  $(openssl x509 -in "$logs/ca.pem" -noout -subject 2>/dev/null || echo "a certificate"), = $tls_dir/ca.pem"
expect "HTTPS (HTTP/1.1) /healthz" "1.1 200" --cacert "$logs/ca.pem" --http1.1 "$tls_url/healthz"
expect "h2 /healthz" "2 200" --cacert "$logs/ca.pem" --http2 "$tls_url/healthz"
grep -qx ok "$body" || fail "/healthz body is not ok"
echo "  $tls_dir (tmpfs) now holds: $(cd "$rootfs$tls_dir" && echo *)"

phase "verify, export --format html inside the image"
echo "+ [image $uid:$gid] ${args[0]} verify --url $url"
as_image "${args[0]}" verify --url "$url" | tee "$logs/verify.txt" | sed 's/^/  /' \
    || fail "verify exited ${PIPESTATUS[0]}"
rm -f "$rootfs/tmp/report.html"
run_as_image "${args[0]}" export --url "$url" --format html -o /tmp/report.html || fail "export failed"
grep -qi '<html' "$rootfs/tmp/report.html" || fail "the export is not HTML"
echo "  /tmp/report.html: $(stat -c '%s bytes, owner %u:%g' "$rootfs/tmp/report.html")"
cp "$rootfs/tmp/report.html" "$logs/report.html"

phase "SIGTERM"
echo "+ kill -TERM $server_pid"
kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
[ "$rc" -eq 0 ] || { tail -n 20 "$logs/serve.err" >&2; fail "serve exited $rc after SIGTERM"; }
echo "  exit 0; its log (stderr), last lines:"
tail -n 4 "$logs/serve.err" | sed 's/^/  /'

# podman_skip REASON: podman could not run a container here at all; fatal only with PODMAN=1.
podman_skip() {
    echo "  podman: SKIPPED: $*"
    [ "${PODMAN:-}" != 1 ] || fail "podman: $* (PODMAN=1)"
}
pm() { podman "${podman_args[@]}" "$@"; }  # podman with the private store (and runtime)
run_pm() { echo "+ podman $*"; pm "$@"; }
if [ "${PODMAN:-}" = 0 ]; then
    echo "== podman: not tried (PODMAN=0)"
elif ! command -v podman >/dev/null; then
    phase "podman"
    podman_skip "not installed (apt-get install podman runc)"
else
    phase "podman: load both archives, run with -p and a /tls volume"
    podman_args=(--root "$work/podman/root" --runroot "$podman_runroot")
    # crun, podman's default runtime here, refuses cgroup v1 hybrid mode; runc runs there.
    if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ] && command -v runc >/dev/null; then
        podman_args+=(--runtime runc)
    fi
    echo "  podman $(podman --version | sed 's/.* //') with a private store: ${podman_args[*]}"
    run_pm load -i "$docker" 2>&1 | grep -v '^Copying\|^Writing\|^Storing\|^Getting' | sed 's/^/  /'
    run_pm load -i "$oci" 2>&1 | grep -v '^Copying\|^Writing\|^Storing\|^Getting' | sed 's/^/  /'
    run_pm images --format '{{.Repository}}:{{.Tag}} {{.ID}} {{.Size}}' | sed 's/^/  /'
    # podman's defaults exceed this machine's hard limits (setrlimit: EPERM), and conmon, which starts runc, gets
    # at most kernel.pid_max processes (measured: runc refuses nproc above it).
    nproc="$(ulimit -Hu)" pid_max="$(cat /proc/sys/kernel/pid_max)"
    if [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pid_max" ]; then nproc="$pid_max"; fi
    limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc")
    run_pm volume create "$podman_volume" >/dev/null
    run_args=(run -d --name "faultline-check-$$" "${limits[@]}" -p "127.0.0.1::$port" -p "127.0.0.1::$tls_port"
        -v "$podman_volume:$tls_dir" "faultline:$version")
    echo "+ podman ${run_args[*]}"
    if ! podman_container="$(pm "${run_args[@]}" 2> "$logs/podman-run.err")"; then
        podman_container=""
        podman_skip "podman run: $(tr '\n' ' ' < "$logs/podman-run.err")"
    else
        for ((i = 0; i < 150; i++)); do
            [ "$(pm logs "$podman_container" 2>/dev/null | grep -c '^listening on')" -ge 2 ] && break
            [ "$(pm inspect -f '{{.State.Running}}' "$podman_container")" = true ] \
                || { pm logs "$podman_container" >&2; fail "podman: the container exited"; }
            sleep 0.1
        done
        pm logs "$podman_container" 2>&1 | sed 's/^/  podman logs: /'
        p_port="$(pm port "$podman_container" "$port/tcp" | sed 's/.*://')"
        p_tls_port="$(pm port "$podman_container" "$tls_port/tcp" | sed 's/.*://')"
        echo "  $port/tcp -> 127.0.0.1:$p_port, $tls_port/tcp -> 127.0.0.1:$p_tls_port"
        pid="$(pm inspect -f '{{.State.Pid}}' "$podman_container")"
        echo "  Config.User $(pm inspect -f '{{.Config.User}}' "$podman_container"); /proc/$pid/status:" \
            "$(grep -E '^(Uid|Gid|Groups|CapEff):' "/proc/$pid/status" | tr -s '\t' ' ' | tr '\n' ' ')"
        grep -q "^Uid:	$uid	$uid	" "/proc/$pid/status" || fail "podman: the container does not run as $uid"
        grep -q '^CapEff:	0000000000000000$' "/proc/$pid/status" || fail "podman: the container has capabilities"
        curl_via=()
        expect "podman HTTP/1.1 /healthz" "1.1 200" --http1.1 "http://127.0.0.1:$p_port/healthz"
        expect "podman h2c /healthz" "2 200" --http2-prior-knowledge "http://127.0.0.1:$p_port/healthz"
        echo "+ podman run --rm ${limits[*]} -v $podman_volume:$tls_dir faultline:$version ca --tls-dir $tls_dir" \
            "--export > podman-ca.pem"
        pm run --rm "${limits[@]}" -v "$podman_volume:$tls_dir" "faultline:$version" \
            ca --tls-dir "$tls_dir" --export > "$logs/podman-ca.pem" || fail "podman: ca --export failed"
        expect "podman HTTPS /healthz" "1.1 200" --cacert "$logs/podman-ca.pem" --http1.1 \
            "https://localhost:$p_tls_port/healthz"
        expect "podman h2 /healthz" "2 200" --cacert "$logs/podman-ca.pem" --http2 \
            "https://localhost:$p_tls_port/healthz"
        run_pm stop -t 10 "$podman_container" >/dev/null
        p_rc="$(pm inspect -f '{{.State.ExitCode}}' "$podman_container")"
        [ "$p_rc" = 0 ] || fail "podman: the container exited $p_rc after podman stop (SIGTERM)"
        echo "  podman stop (SIGTERM): exit 0"
    fi
fi

phase "clean up"
