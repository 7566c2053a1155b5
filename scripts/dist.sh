#!/usr/bin/env bash
# Packs a self-contained release binary (built by `make dist` with --static-swift-stdlib: the Swift runtime,
# FoundationEssentials and Dispatch linked in; no ICU, no libcurl: ARCHITECTURE §1) into what installs where no Swift toolchain is, in dist/:
#   faultline-VERSION-linux-ARCH.tar.gz   faultline-VERSION/{bin/faultline, share/faultline/scenarios/,
#                                          share/doc/faultline/{README.md,faultline.txt,LICENSE,NOTICE,
#                                          CHANGELOG.md}, share/bash-completion/completions/faultline,
#                                          share/zsh/site-functions/_faultline,
#                                          share/fish/vendor_completions.d/faultline.fish}
#   faultline_VERSION_DEBARCH.deb          /usr/bin/faultline, /usr/share/faultline/scenarios/,
#                                          /usr/share/doc/faultline/; Depends: from dpkg-shlibdeps
#   and a .sha256 beside each (`sha256sum -c` in dist/ checks it).
# VERSION is the one `static let version` in Sources/. The binary is stripped; the archives' timestamps are the
# last commit's (SOURCE_DATE_EPOCH), their owner root.
# Usage: scripts/dist.sh BINARY   (Makefile: make dist)
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:?usage: scripts/dist.sh BINARY (the --static-swift-stdlib release build; make dist)}"
[ -x "$binary" ] || { echo "dist: $binary is not an executable" >&2; exit 1; }

# The single source of truth: exactly one `static let version = "X"` anywhere in Sources/.
mapfile -t versions < <(grep -rhoE 'static let version = "[^"]+"' Sources | sed -E 's/.*"([^"]+)"/\1/')
if [ "${#versions[@]}" -ne 1 ]; then
    echo "dist: expected one 'static let version' in Sources/, found ${#versions[@]}" >&2
    exit 1
fi
version="${versions[0]}"
deb_arch="$(dpkg --print-architecture)"
arch="$(uname -m)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

# A binary that still needs the toolchain (a RUNPATH into it, a libswift*.so) is not what this is for.
if ldd "$binary" | grep -qi swift; then
    echo "dist: $binary still links Swift's shared libraries (build it with --static-swift-stdlib):" >&2
    ldd "$binary" | grep -i swift >&2
    exit 1
fi
reported="$("$binary" --version)"
[ "$reported" = "faultline $version" ] || { echo "dist: $binary says '$reported', the source '$version'" >&2; exit 1; }

mkdir -p dist
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
umask 022

# The tarball's tree: faultline-VERSION/ with bin/ and share/.
name="faultline-$version"
top="$work/tar/$name"
install -d "$top/bin" "$top/share/faultline" "$top/share/doc/faultline"
strip -o "$top/bin/faultline" "$binary"
chmod 755 "$top/bin/faultline"
cp -R scenarios "$top/share/faultline/scenarios"
chmod -R u=rwX,go=rX "$top/share/faultline/scenarios"
cat > "$top/share/doc/faultline/README.md" <<EOF
# Faultline $version

A fault-injecting stub HTTP server (HTTP/1.1, HTTPS, HTTP/2 as h2 and h2c), built with the Swift runtime linked
in: it needs no Swift toolchain, only libc, libstdc++, libevent, OpenSSL 3 and libnghttp2.

- \`faultline --help\`: every command and option (the same text is in faultline.txt beside this file).
- \`faultline serve PATH/share/faultline/scenarios\`: the bundled example scenarios, with faultline.schema.json.
- The full documentation is the project's README.md (and docs/) in its source repository.

Licensed under the Apache License, Version 2.0: LICENSE and NOTICE beside this file; CHANGELOG.md says what changed.
EOF
"$top/bin/faultline" --help > "$top/share/doc/faultline/faultline.txt"
cp LICENSE NOTICE CHANGELOG.md "$top/share/doc/faultline/"
# The shells' completion scripts, where each looks under a prefix (bash-completion's, zsh's and fish's own folders).
install -d "$top/share/bash-completion/completions" "$top/share/zsh/site-functions" "$top/share/fish/vendor_completions.d"
"$top/bin/faultline" completions bash > "$top/share/bash-completion/completions/faultline"
"$top/bin/faultline" completions zsh > "$top/share/zsh/site-functions/_faultline"
"$top/bin/faultline" completions fish > "$top/share/fish/vendor_completions.d/faultline.fish"
chmod 644 "$top/share/doc/faultline/"*

tarball="dist/$name-linux-$arch.tar.gz"
tar -C "$work/tar" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -cf - "$name" \
    | gzip -9n > "$tarball"

# The .deb's tree, from the same files.
root="$work/deb"
install -d "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/faultline" "$root/usr/share/doc/faultline"
cp "$top/bin/faultline" "$root/usr/bin/faultline"
cp -R "$top/share/faultline/scenarios" "$root/usr/share/faultline/scenarios"
cp "$top/share/doc/faultline/"* "$root/usr/share/doc/faultline/"
cp -R "$top/share/bash-completion" "$top/share/zsh" "$top/share/fish" "$root/usr/share/"
# Debian's place for the licence (Policy §12.5): the copyright file, machine-readable, naming LICENSE's terms.
cat > "$root/usr/share/doc/faultline/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: faultline

Files: *
Copyright: 2026 The Faultline Authors
License: Apache-2.0
 On Debian systems, the full text of the Apache License, Version 2.0 is in
 /usr/share/common-licenses/Apache-2.0 (and in LICENSE beside this file).
EOF
# dpkg-shlibdeps reads the libraries the binary needs and the packages (with minimum versions) that ship them; it
# wants a source tree's debian/control, so a stub one in a folder of its own.
mkdir -p "$work/src/debian"
printf 'Source: faultline\n\nPackage: faultline\nArchitecture: any\n' > "$work/src/debian/control"
depends="$(cd "$work/src" && dpkg-shlibdeps -O -e"$root/usr/bin/faultline" 2>"$work/shlibdeps.log" \
    | sed -n 's/^shlibs:Depends=//p')" || { cat "$work/shlibdeps.log" >&2; exit 1; }
[ -n "$depends" ] || { echo "dist: dpkg-shlibdeps found no dependencies" >&2; cat "$work/shlibdeps.log" >&2; exit 1; }
cat > "$root/DEBIAN/control" <<EOF
Package: faultline
Version: $version
Architecture: $deb_arch
Maintainer: ${DEB_MAINTAINER:-Faultline maintainers <faultline@localhost>}
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Section: devel
Priority: optional
Description: fault-injecting stub HTTP server
 A local stub HTTP/1.1, HTTPS and HTTP/2 server that fails on purpose: scenario files script each
 response (errors, delays, broken connections, corrupt bodies, refused streams) and a journal records
 what the client under test did. Example scenarios are in /usr/share/faultline/scenarios.
EOF
deb="dist/faultline_${version}_${deb_arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null

(cd dist && sha256sum "$(basename "$tarball")" > "$(basename "$tarball").sha256" \
    && sha256sum "$(basename "$deb")" > "$(basename "$deb").sha256")

echo "dist: version $version, Depends: $depends"
ls -l "$tarball" "$tarball.sha256" "$deb" "$deb.sha256"
scripts/dist-wheel.sh "$binary"  # the Python package's wheel: dist/faultline-VERSION-py3-none-manylinux_*.whl
scripts/dist-image.sh  # the container image from that tarball: dist/faultline-VERSION-{oci,docker}.tar
