# Sourced by the packaging scripts (dist-*.sh, brew-check.sh): what each prints of itself, the same way.
#   phase NAME       ends the phase before (its time kept) and prints "== NAME"; `phase` alone ends the last
#   timings [WHAT]   prints every phase's time, "== timings (WHAT)"
#   run CMD...       prints "+ CMD..." and runs it
#   fail MESSAGE     prints "SCRIPT: FAIL: MESSAGE" on stderr and exits 1 (SCRIPT: the sourcing script's name)
#   apt_mirror       the Debian mirror apt uses here for bookworm (deb822 stanzas first, then one-line entries)
# shellcheck shell=bash disable=SC2154  # root, cache, mirror, state, logs: the sourcing script's
phase_names=()
phase_times=()
phase_name=""
phase_start=0
phase() {
    local now
    now="$(date +%s.%N)"
    if [ -n "$phase_name" ]; then
        phase_names+=("$phase_name")
        phase_times+=("$(awk -v a="$phase_start" -v b="$now" 'BEGIN { printf "%.1f", b - a }')")
    fi
    phase_name="${1:-}"
    phase_start="$now"
    [ -z "$phase_name" ] || echo "== $phase_name"
}
# shellcheck disable=SC2120  # WHAT is optional
timings() {
    local i
    echo "== timings${1:+ ($1)}"
    for i in "${!phase_names[@]}"; do printf '  %-64s %6s s\n' "${phase_names[$i]}" "${phase_times[$i]}"; done
}
run() { echo "+ $*"; "$@"; }
fail() { echo "$(basename "$0" .sh): FAIL: $*" >&2; exit 1; }
apt_mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'BEGIN { RS = "" }
            /(^|\n)Types:[^\n]*deb([ \t]|\n|$)/ && /(^|\n)Suites:[^\n]*[ \t]bookworm([ \t]|\n|$)/ {
                if (match($0, /(^|\n)URIs:[ \t]*[^ \t\n]+/)) {
                    s = substr($0, RSTART, RLENGTH); sub(/.*URIs:[ \t]*/, "", s); print s; exit
                }
            }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '$1 == "deb" && / bookworm( |$)/ {
                for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit }
            }' "$f"
    done
}

# The Debian roots of the dist checks. They use the caller's `root` (an empty folder), `cache` (the minbase tarball),
# `mirror`, `state` (with apt-archives/) and `logs`, and append what they mount to `mounts`, which the caller's
# cleanup unmounts in reverse.
#   mount_into TARGET MOUNT-ARGUMENTS...   mounts onto $root/TARGET
#   debian_root                            fills $root with bookworm minbase (unpacked from $cache, else
#                                          debootstrap'd from $mirror and cached), checks it has no swift and no
#                                          faultline, and mounts /proc (the binary needs it to see its arguments),
#                                          /sys, /dev and apt's download cache; copies resolv.conf in
mount_into() {
    local target="$root$1"
    shift
    mkdir -p "$target"
    run mount "$@" "$target"
    mounts+=("$target")
}
debian_root() {
    if [ -f "$cache" ]; then
        phase "Debian root: unpack the cached tarball"
        run tar -C "$root" --numeric-owner -xzpf "$cache"
    else
        phase "Debian root: debootstrap (first run)"
        echo "  --variant=minbase bookworm from $mirror"
        run debootstrap --variant=minbase bookworm "$root" "$mirror" > "$logs/debootstrap.log" 2>&1 \
            || { tail -n 30 "$logs/debootstrap.log" >&2; fail "debootstrap"; }
        echo "+ tar -C $root -czf $cache ."
        tar -C "$root" --numeric-owner -czf "$cache.tmp" . && mv "$cache.tmp" "$cache"
    fi
    [ ! -e "$root/opt/swift" ] || fail "the root has /opt/swift"
    if chroot "$root" /bin/sh -c 'command -v swift swiftc faultline' >/dev/null 2>&1; then
        fail "the root has a swift or a faultline"
    fi
    echo "  no /opt/swift, and no swift or faultline on the root's PATH"
    mount_into /proc -t proc proc
    mount_into /sys -t sysfs sysfs
    mount_into /dev --bind /dev
    # apt's downloads persist between runs (shared by the checks), so a later run fetches only the package lists.
    mount_into /var/cache/apt/archives --bind "$state/apt-archives"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
}
# release_root: the other half of debian_root, for the caller's cleanup: kills what still runs inside $root (by
# each process's root), unmounts `mounts` in reverse, and removes $root, unless something is still mounted under it
# (/dev is bound in: never delete through a mount).
release_root() {
    local i
    for i in /proc/[0-9]*; do
        [ "$(readlink "$i/root" 2>/dev/null)" = "$root" ] && kill -KILL "${i#/proc/}" 2>/dev/null
    done
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount "${mounts[$i]}" 2>/dev/null || umount -l "${mounts[$i]}" || true
    done
    if grep -q " $root/" /proc/mounts; then
        echo "$(basename "$0" .sh): still mounted under $root; left in place" >&2
    else
        rm -rf --one-file-system "$root"
    fi
}
