#!/usr/bin/env bash
# Proves that another package can depend on Faultline by version tag: a scratch package resolves and loads
# a tagged copy of this repository (its committed HEAD) through a file:// URL, the way a user's package would
# resolve a release. SwiftPM refuses a version-based dependency whose targets use unsafe flags, so this fails
# the moment Package.swift gains one. Needs no network.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q "$root" "$work/faultline"
git -C "$work/faultline" -c user.name=check -c user.email=check@localhost tag -a 9.9.9 -m "tag dependency check"
mkdir -p "$work/user/Sources/User"
cat > "$work/user/Package.swift" <<SWIFT
// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "User",
    dependencies: [.package(url: "file://$work/faultline", from: "9.9.0")],
    targets: [.target(name: "User", dependencies: [.product(name: "Faultline", package: "faultline")])]
)
SWIFT
echo 'import Faultline' > "$work/user/Sources/User/User.swift"
cd "$work/user"
swift package resolve >"$work/resolve.log" 2>&1 || { cat "$work/resolve.log"; exit 1; }
# Loading the package graph is where SwiftPM rejects unsafe flags in a version-based dependency.
swift package describe >"$work/describe.log" 2>&1 || { cat "$work/describe.log"; exit 1; }
grep -q '"9.9.9"' .package.resolved 2>/dev/null || grep -q '9.9.9' Package.resolved
echo "tag dependency: a package resolves Faultline 9.9.9 by version and loads its graph"
