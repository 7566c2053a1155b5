#!/usr/bin/env bash
# Instructions per request on the request path without sockets (bench/hotpath/main.swift: parse, journal,
# decide, complete), counted by callgrind; then the same for a fault, a resource GET, a forwarded request and an
# HTTP/2 stream. Unlike requests/s this does not move with the machine's load, so it tells whether a change made
# the request path cheaper. The server's system calls and libevent are not in it.
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
"$swiftc" "${flags[@]}" -I "$build" bench/hotpath/main.swift bench/shared/BenchDispatcher.swift "$build/libFaultlineCore.a" \
    -o "$build/hotpath"
# The HTTP/2 codec the same way, over the system's nghttp2 (Sources/CNghttp2's module map, as SwiftPM uses it).
h2_sources=()
while IFS= read -r file; do h2_sources+=("$file"); done < <(find Sources/FaultlineHTTP2 -name '*.swift' | sort)
(cd "$build" && "$swiftc" "${flags[@]}" -I . -I "$root/Sources/CNghttp2" -module-name FaultlineHTTP2 -emit-module \
    -emit-module-path FaultlineHTTP2.swiftmodule -emit-library -static -o libFaultlineHTTP2.a \
    "${h2_sources[@]/#/$root/}")
"$swiftc" "${flags[@]}" -I "$build" -I Sources/CNghttp2 bench/hotpath-h2/main.swift bench/shared/BenchDispatcher.swift \
    "$build/libFaultlineHTTP2.a" \
    "$build/libFaultlineCore.a" -lnghttp2 -o "$build/hotpath-h2"

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
# A forwarded request (bench/hotpath-proxy.json, the proxy row's scenario): the upstream request built, a canned
# nginx answer parsed, the client's script planned from it — the proxy's own work, without its sockets.
scenario=bench/hotpath-proxy.json
a=$(count $small forward)
b=$(count $large forward)
echo "hotpath: $(( (b - a) / (large - small) )) instructions per forwarded request (proxy: parse, journal, decide, upstream request, upstream response parsed, planned, complete)"

# One HTTP/2 stream on a kept h2c connection (bench/hotpath-h2/main.swift): nghttp2 reads its HEADERS, the codec
# dispatches it as the first figure's request, submits HEADERS and DATA, and nghttp2 writes them.
h2count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$build/hotpath-h2" bench/plain-json.json "$1" 2>&1 \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
a=$(h2count $small)
b=$(h2count $large)
echo "hotpath: $(( (b - a) / (large - small) )) instructions per HTTP/2 stream (h2c; nghttp2 in and out, the codec, decide, journal)"
