#!/usr/bin/env bash
# Instructions per request on the request path without sockets (bench/hotpath/main.swift: parse, journal,
# decide, complete), counted by callgrind. Unlike requests/s this does not move with the machine's load, so it
# tells whether a change made the request path cheaper. The server's system calls and libevent are not in it.
#   make hotpath        (needs valgrind; scripts/ensure-deps.sh hotpath installs it)
set -euo pipefail
cd "$(dirname "$0")/.."
swiftc="${SWIFTC:-swiftc}"
build=".build/hotpath"
mkdir -p "$build"
# Built like the release server: optimized, whole module (Package.swift sets no unsafe flags). Both modules
# name one package, so main.swift sees FaultlineCore's `package` declarations (the engine, the parser) as
# SwiftPM's targets do.
flags=(-swift-version 6 -O -wmo -parse-as-library -package-name faultline)
core_sources=()
while IFS= read -r file; do core_sources+=("$file"); done < <(find Sources/FaultlineCore -name '*.swift' | sort)
root="$PWD"
(cd "$build" && "$swiftc" "${flags[@]}" -module-name FaultlineCore -emit-module \
    -emit-module-path FaultlineCore.swiftmodule -emit-library -static -o libFaultlineCore.a \
    "${core_sources[@]/#/$root/}")
"$swiftc" "${flags[@]}" -I "$build" bench/hotpath/main.swift "$build/libFaultlineCore.a" -o "$build/hotpath"

# The difference between two runs takes out start-up and loading the scenario.
count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$build/hotpath" "${scenario:-bench/plain-json.json}" "$1" ${2:-} 2>&1 \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
small=20000
large=60000
a=$(count $small)
b=$(count $large)
echo "hotpath: $(( (b - a) / (large - small) )) instructions per request (parse, journal, decide, complete; callgrind)"
a=$(count $small connection)
b=$(count $large connection)
echo "hotpath: $(( (b - a) / (large - small) )) instructions per request through the HTTP/1.1 connection machine (the same, plus its rules, rendering and the write call)"

# The other requests issue 30 asks about, each with the stub's JSON body (bench/hotpath-variants.json), decided
# and rendered as the first figure: a route step under a fault (truncate-body), and a resource GET.
scenario=bench/hotpath-variants.json
small=10000
large=30000
a=$(count $small /fault)
b=$(count $large /fault)
echo "hotpath: $(( (b - a) / (large - small) )) instructions per request under a fault (truncate-body; parse, journal, decide, complete)"
a=$(count $small /resource/item)
b=$(count $large /resource/item)
echo "hotpath: $(( (b - a) / (large - small) )) instructions per resource GET (ETag, Last-Modified; parse, journal, decide, complete)"
