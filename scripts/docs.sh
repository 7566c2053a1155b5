#!/usr/bin/env bash
# The documentation site (`make docs`; docs/ARCHITECTURE.md "Documentation site"), in OUT (default .build/docs):
#   stage    scripts/docs-stage.py: docs/ and README.md (as index.md) into OUT/src, links rewritten for the site,
#            the nav of mkdocs.yml without the pages not written yet; a broken link fails here, naming page and line
#   mkdocs   mkdocs build --strict into OUT/site: a link or an anchor mkdocs cannot resolve fails the build
#   DocC     the Swift API reference of the public modules into OUT/site/api/ (skipped with DOCC=0 or --no-docc,
#            which leaves placeholder pages there): the debug build's modules (swift build), their symbol graphs
#            (swift symbolgraph-extract), one `docc convert` per module (Sources/MODULE/MODULE.docc as its
#            catalogue), `docc merge` into one archive with a landing page, already transformed for static hosting
#   links    scripts/check-site-links.py over OUT/site: DocC's pages (routed by its JavaScript) only for their entry
#            pages
# Usage: scripts/docs.sh [--out DIR] [--source CHECKOUT] [--no-docc]
#   --source   the checkout whose README.md, docs/ and mkdocs.yml are built (default: this one); DocC always reads
#              this checkout's Sources/
# Environment: DOCC=0 (as --no-docc), SWIFT (default swift), DOCC_BIN (default: docc beside swift, or `xcrun docc`),
# DOCS_REQUIRE_ALL_PAGES=1 (fail when a nav entry has no page yet).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib/steps.sh
. "$repo/scripts/lib/steps.sh"

out="$repo/.build/docs"
source_dir="$repo"
docc="${DOCC:-1}"
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --source) source_dir="$2"; shift 2 ;;
        --no-docc) docc=0; shift ;;
        *) fail "unknown argument $1 (usage: scripts/docs.sh [--out DIR] [--source CHECKOUT] [--no-docc])" ;;
    esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
source_dir="$(cd "$source_dir" && pwd)"
swift="${SWIFT:-swift}"
# The public library modules (Package.swift's library products).
modules=(Faultline FaultlineCore FaultlineClient FaultlineTesting)
# Entry pages of the API reference: the merged landing page and each module's.
api_pages=(api/documentation/index.html)
for module in "${modules[@]}"; do api_pages+=("api/documentation/$(echo "$module" | tr '[:upper:]' '[:lower:]')/index.html"); done
export NO_MKDOCS_2_WARNING=1

phase "stage README.md and docs/ into $out/src"
DOCS_API_MODULES="${modules[*]}" python3 "$repo/scripts/docs-stage.py" "$source_dir" "$out" \
    || fail "staging: fix the links named above"

phase "mkdocs build --strict into $out/site"
python3 -m mkdocs build --strict --quiet --config-file "$out/mkdocs.yml" || fail "mkdocs build --strict"

if [ "$docc" != 0 ]; then
    phase "DocC: swift build (the modules symbolgraph-extract reads)"
    (cd "$repo" && run "$swift" build)
    bin="$(cd "$repo" && "$swift" build --show-bin-path)"
    module_dir="$bin/Modules"
    [ -d "$module_dir" ] || module_dir="$bin"  # toolchains before 6.0 put the .swiftmodule files beside the binary

    phase "DocC: symbol graphs of ${modules[*]}"
    triple="$("$swift" -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')"
    sdk=()
    [ "$(uname)" != Darwin ] || sdk=(-sdk "$(xcrun --show-sdk-path)")
    work="$out/docc"
    rm -rf "$work"
    mkdir -p "$work"
    for module in "${modules[@]}"; do
        mkdir -p "$work/graphs/$module"
        # -I Sources/C*: the system-library targets' module maps, which the modules' interfaces name.
        run "$swift" symbolgraph-extract -module-name "$module" -target "$triple" "${sdk[@]}" -I "$module_dir" \
            -I "$repo/Sources/CLibevent" -I "$repo/Sources/COpenSSL" -I "$repo/Sources/CNghttp2" \
            -minimum-access-level public -skip-synthesized-members -output-dir "$work/graphs/$module"
    done

    phase "DocC: docc convert, docc merge"
    if [ -n "${DOCC_BIN:-}" ]; then docc_bin=("$DOCC_BIN")
    elif [ -x "$(dirname "$(command -v "$swift")")/docc" ]; then docc_bin=("$(dirname "$(command -v "$swift")")/docc")
    elif command -v docc >/dev/null; then docc_bin=(docc)
    else docc_bin=(xcrun docc); fi
    # DocC's pages name their scripts and styles from the site's root: /api/, or /PATH/api/ under mkdocs.yml's
    # site_url when the site is served below a path.
    base="$(python3 -c '
import sys, urllib.parse, yaml
from mkdocs.utils.yaml import get_yaml_loader
loader = get_yaml_loader()
loader.add_constructor("!relative", lambda loader, node: loader.construct_scalar(node))
config = yaml.load(open(sys.argv[1], encoding="utf-8"), Loader=loader)
print("/".join(part for part in (urllib.parse.urlsplit(config.get("site_url") or "").path.strip("/"), "api") if part))
' "$source_dir/mkdocs.yml")"
    archives=()
    for module in "${modules[@]}"; do
        catalogue=()
        [ ! -d "$repo/Sources/$module/$module.docc" ] || catalogue=("$repo/Sources/$module/$module.docc")
        run "${docc_bin[@]}" convert "${catalogue[@]}" --additional-symbol-graph-dir "$work/graphs/$module" \
            --fallback-display-name "$module" --fallback-bundle-identifier "dev.faultline.$module" \
            --hosting-base-path "$base" --enable-experimental-external-link-support \
            --output-path "$work/$module.doccarchive" > "$work/$module.log" 2>&1 \
            || { cat "$work/$module.log" >&2; fail "docc convert $module"; }
        # What DocC had to say (unresolved symbol links in doc comments, for one) is worth reading, not failing on.
        grep -E 'warning|error' "$work/$module.log" | head -n 20 || true
        archives+=("$work/$module.doccarchive")
    done
    run "${docc_bin[@]}" merge "${archives[@]}" --synthesized-landing-page-name "Faultline Swift API" \
        --output-path "$work/api.doccarchive" > "$work/merge.log" 2>&1 \
        || { cat "$work/merge.log" >&2; fail "docc merge"; }
    rm -rf "$out/site/api"
    cp -R "$work/api.doccarchive" "$out/site/api"
fi

phase "check the site's links"
requires=()
for page in "${api_pages[@]}"; do requires+=(--require "$page"); done
python3 "$repo/scripts/check-site-links.py" "$out/site" --skip api/ "${requires[@]}" || fail "broken links in the site"
phase
timings "scripts/docs.sh"
echo "docs: $out/site/index.html"
