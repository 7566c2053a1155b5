#!/usr/bin/env bash
# Builds Faultline's container image from dist/'s tarball without a registry (none need be reachable, and CI that
# pins its images can load a file), in dist/:
#   faultline-VERSION-oci.tar      an OCI image layout as a tar, one image named faultline:VERSION (its ref.name and
#                                  io.containerd.image.name): `podman load`, skopeo's oci-archive:, umoci
#   faultline-VERSION-docker.tar   the same image as a docker-archive (`skopeo copy`), tagged faultline:VERSION and
#                                  faultline:latest: `docker load`, `podman load`
#   and a .sha256 beside each.
# The image is distroless, one layer: /usr/bin/faultline and /scenarios (the bundled scenarios with
# faultline.schema.json) from the tarball; exactly the shared libraries `ldd` names for that binary, each in its
# canonical folder with the symlink names on the way to it, the dynamic loader included, and /bin, /lib, /lib64 as
# the symlinks into /usr this Debian has (no library list is written down here), and the copyright file of each
# Debian package they come from (/usr/share/doc/PACKAGE/copyright); Debian's Mozilla CA bundle as
# /etc/ssl/certs/ca-certificates.crt, built from the ca-certificates package's files (this machine's own bundle may
# hold local CAs) and found by OpenSSL's default paths too; /etc/passwd and /etc/group with the user faultline
# (65532:65532); /tls (the CA's folder) and /home/faultline ($HOME), 0700 and that user's, as faultline demands of
# its CA folder; /tmp (1777). No shell, no package manager.
# It runs as 65532:65532 with Entrypoint /usr/bin/faultline and Cmd serve /scenarios --host 0.0.0.0 --port 8080
# --tls-port 8443 --tls-dir /tls: HTTP/1.1 and h2c on 8080, HTTPS and h2 on 8443 (both exposed); /tls and
# /scenarios are volumes. `docker run -v VOLUME:/tls IMAGE ca --tls-dir /tls --export` prints the CA to trust.
# VERSION is the one `static let version` in Sources/ (as scripts/dist.sh). Reproducible: GNU tar writes the layer
# (sorted, numeric owners, every mtime SOURCE_DATE_EPOCH, as the image's created time and label), umoci compresses
# it and writes the JSON, the OCI archive is a sorted tar with fixed mtimes and modes, and skopeo writes the
# docker-archive with zero mtimes: two runs here give byte-identical archives. What is not pinned: the libraries
# and CA certificates are this machine's installed Debian packages (another point release, another digest), and
# umoci's and skopeo's output is only as stable as their versions.
# Needs umoci, skopeo, jq (scripts/ensure-deps.sh dist) and GNU tar; not root.
# Usage: scripts/dist-image.sh   (scripts/dist.sh runs it last; Makefile: make dist)
#   IMAGE_SOURCE=URL sets org.opencontainers.image.source (default: the git remote origin, when it is a URL);
#   IMAGE_LICENSES=SPDX sets org.opencontainers.image.licenses (default Apache-2.0, the LICENSE file's).
set -euo pipefail
cd "$(dirname "$0")/.."

# phase, timings, run, fail and apt_mirror, shared by the packaging scripts.
# shellcheck source=scripts/lib/steps.sh
source scripts/lib/steps.sh

for tool in umoci skopeo jq tar ldd readelf; do
    command -v "$tool" >/dev/null || fail "needs $tool (scripts/ensure-deps.sh dist)"
done

# The single source of truth, as scripts/dist.sh: exactly one `static let version = "X"` anywhere in Sources/.
mapfile -t versions < <(grep -rhoE 'static let version = "[^"]+"' Sources | sed -E 's/.*"([^"]+)"/\1/')
[ "${#versions[@]}" -eq 1 ] || fail "expected one 'static let version' in Sources/, found ${#versions[@]}"
version="${versions[0]}"
arch="$(uname -m)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
tarball="dist/faultline-$version-linux-$arch.tar.gz"
[ -f "$tarball" ] || fail "no $tarball (run scripts/dist.sh or make dist first)"

# The image's user: the uid/gid distroless images use for "nonroot".
user=faultline uid=65532 gid=65532
oci="dist/faultline-$version-oci.tar"
docker="dist/faultline-$version-docker.tar"

work="$(mktemp -d)"
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    set +e
    rm -rf "$work"
    phase
    timings
    if [ "$rc" -eq 0 ]; then echo "dist-image: done"; else echo "dist-image: FAIL (exit $rc)" >&2; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
umask 022

phase "binary and scenarios from the tarball"
run tar -C "$work" -xzf "$tarball" "faultline-$version/bin/faultline" "faultline-$version/share/faultline/scenarios" \
    "faultline-$version/share/doc/faultline"
binary="$work/faultline-$version/bin/faultline"
reported="$("$binary" --version)"
[ "$reported" = "faultline $version" ] || fail "$tarball's binary says '$reported', the source '$version'"
rootfs="$work/rootfs"
install -d "$rootfs/usr/bin" "$rootfs/etc/ssl/certs"
install -m 755 "$binary" "$rootfs/usr/bin/faultline"
cp -R "$work/faultline-$version/share/faultline/scenarios" "$rootfs/scenarios"
chmod -R u=rwX,go=rX "$rootfs/scenarios"
[ -f "$rootfs/scenarios/faultline.schema.json" ] || fail "the tarball's scenarios have no faultline.schema.json"
# Faultline's own licence, beside the Debian packages' copyright files.
install -d "$rootfs/usr/share/doc/faultline"
install -m 644 "$work/faultline-$version/share/doc/faultline/"{LICENSE,NOTICE} "$rootfs/usr/share/doc/faultline/"

phase "the shared libraries ldd names"
# Debian's merged /usr: /lib, /lib64 and /bin are symlinks into /usr; the image has the same ones, so the
# loader path in the binary (/lib64/ld-linux-*.so.2) and ldd's /lib/... paths resolve as they do here.
for top in bin lib lib64; do
    if [ -L "/$top" ]; then ln -s "$(readlink "/$top")" "$rootfs/$top"; install -d "$rootfs/$(realpath "/$top")"; fi
done
# copy_with_links PATH: the file PATH finally names, at its canonical place in the image, and every symlink on the
# way to it (libcurl.so.4 -> libcurl.so.4.8.0; /lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/...).
copy_with_links() {
    local path="$1" folder name link hops=0
    while :; do
        folder="$(realpath -e "$(dirname "$path")")" name="$(basename "$path")"
        install -d "$rootfs$folder"
        if [ -L "$folder/$name" ]; then
            link="$(readlink "$folder/$name")"
            [ -e "$rootfs$folder/$name" ] || [ -L "$rootfs$folder/$name" ] || ln -s "$link" "$rootfs$folder/$name"
            case "$link" in /*) path="$link" ;; *) path="$folder/$link" ;; esac
            hops=$((hops + 1))
            [ "$hops" -lt 16 ] || fail "$1: too many symlinks"
        else
            [ -f "$folder/$name" ] || fail "$1: $folder/$name is not a file"
            cp --preserve=mode "$folder/$name" "$rootfs$folder/$name"
            return
        fi
    done
}
echo "+ ldd $tarball's bin/faultline"
ldd "$binary" > "$work/ldd.txt"
sed 's/^/  /' "$work/ldd.txt"
if grep -Eqi 'swift|not found' "$work/ldd.txt"; then fail "ldd names swift or a missing library"; fi
# "libx.so.1 => /path (0x...)", the loader as "/path (0x...)", and linux-vdso (no file: the kernel's).
mapfile -t libraries < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' "$work/ldd.txt")
interpreter="$(readelf -l "$binary" | sed -n 's/.*Requesting program interpreter: \([^]]*\)].*/\1/p')"
[ -n "$interpreter" ] || fail "the binary names no program interpreter"
printf '%s\n' "${libraries[@]}" | grep -qxF "$interpreter" || libraries+=("$interpreter")
for library in "${libraries[@]}"; do copy_with_links "$library"; done
echo "  ${#libraries[@]} files (the loader $interpreter included), $(du -sm "$rootfs/usr/lib" | cut -f1) MB"
# The Debian packages those libraries come from, and each one's copyright file (their licences travel with them).
# dpkg knows each file under the path its package ships it (/lib64/ld-linux-x86-64.so.2, but
# /usr/lib/x86_64-linux-gnu/libssl.so.3): one query for each library as named, its folder resolved, and resolved.
candidates=()
for library in "${libraries[@]}"; do
    candidates+=("$library" "$(realpath -e "$(dirname "$library")")/$(basename "$library")" "$(realpath -e "$library")")
done
dpkg-query -S "${candidates[@]}" 2>/dev/null | sed -n 's/^\([^:, ]*\)\(:[^:, ]*\)\{0,1\}: \(\/.*\)$/\3 \1/p' \
    > "$work/owners" || true
packages=()
for ((i = 0; i < ${#candidates[@]}; i += 3)); do
    package="$(awk -v a="${candidates[$i]}" -v b="${candidates[$((i + 1))]}" -v c="${candidates[$((i + 2))]}" \
        '$1 == a || $1 == b || $1 == c { print $2; exit }' "$work/owners")"
    [ -n "$package" ] || fail "no Debian package ships ${candidates[$i]}"
    packages+=("$package")
done
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | LC_ALL=C sort -u)
for package in "${packages[@]}"; do
    [ -f "/usr/share/doc/$package/copyright" ] || fail "/usr/share/doc/$package/copyright is missing"
    install -D -m 644 "/usr/share/doc/$package/copyright" "$rootfs/usr/share/doc/$package/copyright"
done
echo "  from ${#packages[@]} packages, each with /usr/share/doc/PACKAGE/copyright: ${packages[*]}"

phase "CA certificates, users, /tls, /tmp"
# Debian's CA bundle as update-ca-certificates writes it from the ca-certificates package's Mozilla certificates
# that /etc/ca-certificates.conf selects (a "!" line deselects one), each checked against the package's md5sums;
# not this machine's /etc/ssl/certs/ca-certificates.crt, which also holds any local CA (a test CA, a proxy's).
sums="$(dpkg-query --control-path ca-certificates md5sums 2>/dev/null)" \
    || fail "the ca-certificates package is not installed"
sed -n 's|^\(mozilla/[^/]*\.crt\)$|  usr/share/ca-certificates/\1|p' /etc/ca-certificates.conf > "$work/ca.selected"
grep -F -f "$work/ca.selected" "$sums" | LC_ALL=C sort -k 2 > "$work/ca.md5sums" || true
[ "$(wc -l < "$work/ca.md5sums")" -eq "$(wc -l < "$work/ca.selected")" ] \
    || fail "/etc/ca-certificates.conf selects Mozilla certificates that ca-certificates does not ship"
echo "+ (cd / && md5sum -c --quiet) < the lines of $sums that /etc/ca-certificates.conf selects"
(cd / && md5sum -c --quiet) < "$work/ca.md5sums" || fail "ca-certificates' Mozilla certificates are modified"
mapfile -t certificates < <(awk '{ print "/" $2 }' "$work/ca.md5sums")
[ "${#certificates[@]}" -gt 0 ] || fail "/etc/ca-certificates.conf selects no Mozilla certificates"
# Concatenated, each ending in a newline (as update-ca-certificates does).
for certificate in "${certificates[@]}"; do
    cat "$certificate"
    [ -z "$(tail -c 1 "$certificate")" ] || echo
done > "$rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 644 "$rootfs/etc/ssl/certs/ca-certificates.crt"
echo "  ${#certificates[@]} certificates from ca-certificates $(dpkg-query -W -f '${Version}' ca-certificates)" \
    "($(grep -c '^!mozilla/' /etc/ca-certificates.conf || true) deselected in /etc/ca-certificates.conf)"
# OpenSSL's default verify paths (the proxy's https upstream without --proxy-ca-file) find the bundle through
# OPENSSLDIR, as on Debian.
openssl_dir="$(openssl version -d 2>/dev/null | sed -n 's/^OPENSSLDIR: "\(.*\)"$/\1/p')"
openssl_dir="${openssl_dir:-/usr/lib/ssl}"
install -d "$rootfs$openssl_dir"
ln -s /etc/ssl/certs "$rootfs$openssl_dir/certs"
ln -s /etc/ssl/certs/ca-certificates.crt "$rootfs$openssl_dir/cert.pem"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\n%s:x:%s:%s:faultline:/home/%s:/usr/sbin/nologin\n' \
    "$user" "$uid" "$gid" "$user" > "$rootfs/etc/passwd"
printf 'root:x:0:\n%s:x:%s:\n' "$user" "$gid" > "$rootfs/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$rootfs/etc/nsswitch.conf"
chmod 644 "$rootfs/etc/passwd" "$rootfs/etc/group" "$rootfs/etc/nsswitch.conf"
install -d -m 700 "$rootfs/tls" "$rootfs/home" "$rootfs/home/$user"
chmod 755 "$rootfs/home"
install -d -m 1777 "$rootfs/tmp"
# Owned by the user in the layer (tar's --owner, below: no chown, so no root needed).
owned=(home/"$user" tls)

phase "the layer (GNU tar)"
layer="$work/layer.tar"
tar_flags=(--format=gnu --sort=name --mtime="@$SOURCE_DATE_EPOCH" --numeric-owner)
mapfile -t tops < <(cd "$rootfs" && LC_ALL=C ls -A)
excludes=()
for path in "${owned[@]}"; do excludes+=(--exclude="$path"); done
echo "+ tar -C rootfs ${tar_flags[*]} --owner=0 --group=0 --anchored ${excludes[*]} -cf layer.tar ${tops[*]}"
tar -C "$rootfs" "${tar_flags[@]}" --owner=0 --group=0 --anchored "${excludes[@]}" -cf "$layer" "${tops[@]}"
echo "+ tar -C rootfs ${tar_flags[*]} --owner=$uid --group=$gid --no-recursion -rf layer.tar ${owned[*]}"
tar -C "$rootfs" "${tar_flags[@]}" --owner="$uid" --group="$gid" --no-recursion -rf "$layer" "${owned[@]}"
echo "  $(tar -tf "$layer" | wc -l) entries, $(du -sm "$rootfs" | cut -f1) MB unpacked"

phase "the OCI image (umoci)"
layout="$work/layout"
image="$layout:$version"
history=(--history.created "$created" --history.created_by "scripts/dist-image.sh" --history.author "Faultline")
run umoci init --layout "$layout"
run umoci new --image "$image"
run umoci raw add-layer --image "$image" "${history[@]}" \
    --history.comment "faultline $version, its shared libraries, CA certificates, scenarios" "$layer"
source_url="${IMAGE_SOURCE:-$(git config --get remote.origin.url 2>/dev/null || true)}"
case "$source_url" in https://* | http://*) ;; *) source_url="" ;; esac
labels=(
    --config.label "org.opencontainers.image.title=faultline"
    --config.label "org.opencontainers.image.description=A fault-injecting stub HTTP/1.1, HTTPS and HTTP/2 server"
    --config.label "org.opencontainers.image.version=$version"
    --config.label "org.opencontainers.image.created=$created"
    --config.label "org.opencontainers.image.licenses=${IMAGE_LICENSES:-Apache-2.0}"
)
[ -z "$source_url" ] || labels+=(--config.label "org.opencontainers.image.source=$source_url")
run umoci config --image "$image" "${history[@]}" --history.comment "the configuration" \
    --created "$created" --author "Faultline" \
    --config.user "$uid:$gid" --config.workingdir / --config.stopsignal SIGTERM \
    --config.env PATH=/usr/bin --config.env "HOME=/home/$user" \
    --config.entrypoint /usr/bin/faultline \
    --config.cmd serve --config.cmd /scenarios --config.cmd --host --config.cmd 0.0.0.0 \
    --config.cmd --port --config.cmd 8080 --config.cmd --tls-port --config.cmd 8443 \
    --config.cmd --tls-dir --config.cmd /tls \
    --config.exposedports 8080/tcp --config.exposedports 8443/tcp \
    --config.volume /tls --config.volume /scenarios \
    "${labels[@]}"
run umoci gc --layout "$layout"
run umoci stat --image "$image"

phase "the OCI archive and the docker-archive"
mkdir -p dist
rm -f "$oci" "$docker"
# skopeo checks a signature policy even between two local files; there is nothing to verify in one's own layout.
run skopeo --insecure-policy copy --quiet --additional-tag faultline:latest \
    "oci:$image" "docker-archive:$docker:faultline:$version"
# The archive names one image, faultline:VERSION: `podman load` takes that as its name (a second ref, or a bare
# "VERSION", and it refuses the archive or names the image localhost/VERSION), skopeo's oci-archive: needs no :REF,
# and io.containerd.image.name is the name containerd (docker load with the containerd store) reads.
run umoci tag --image "$image" "faultline:$version"
run umoci rm --image "$image"
echo "+ jq: index.json's manifest gets io.containerd.image.name=docker.io/library/faultline:$version"
jq --arg name "docker.io/library/faultline:$version" \
    '.manifests[0].annotations["io.containerd.image.name"] = $name' "$layout/index.json" > "$work/index.json"
mv "$work/index.json" "$layout/index.json"
mapfile -t layout_tops < <(cd "$layout" && LC_ALL=C ls -A)
archive_flags=(--format=gnu --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner
    "--mode=u=rwX,go=rX")
echo "+ tar -C layout ${archive_flags[*]} -cf $oci ${layout_tops[*]}"
tar -C "$layout" "${archive_flags[@]}" -cf "$oci" "${layout_tops[@]}"
(cd dist && sha256sum "$(basename "$oci")" > "$(basename "$oci").sha256" \
    && sha256sum "$(basename "$docker")" > "$(basename "$docker").sha256")

manifest="$(jq -r '.manifests[0].digest' "$layout/index.json")"
echo "dist-image: faultline:$version, manifest $manifest, user $uid:$gid, $(du -sm "$rootfs" | cut -f1) MB unpacked"
ls -l "$oci" "$oci.sha256" "$docker" "$docker.sha256"
