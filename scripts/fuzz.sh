#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ and runs each in turn for FUZZ_SECONDS, one process at a time.
#   http-parser  HTTPRequestParser: one append against random pieces, framing, state queries
#   scenario     JSONValue.parse and ScenarioLoader.load: round trips, error paths
#   websocket    a WebSocket session (WebSocketSession and its frame parser) playing a script: a client's bytes in
#                random reads, with the clock moving; the output must be whole, well-formed server frames
#   tls-accept   the TLS accept path over memory BIOs (TLSSession, TLSServerContext and its ClientHello callback):
#                a client byte stream in random pieces under each kind of handshake decision
#   resource     a resource's answer (Engine with resources): conditional, range and content-type fields with any
#                values, writes and versions carried over, RFC 9110 framing of 206, 416, 304 and HEAD
#   h2-frames    the HTTP/2 codec (HTTP2Connection on nghttp2) over a fake transport, loop and Dispatcher: a
#                preface and frames in random pieces, timers, drains, scripted responses, resets and GOAWAYs
#   upstream-response  the proxy's reading of a hostile upstream's answer (HTTPResponseParser): any bytes, in
#                random reads and whole, must give the same response RFC 9112 allows or a failure (a 502)
#   websocket-network  a WebSocket session while the network misbehaves: a client's bytes cut anywhere, output
#                that backs up and drains, drops, FINs and teardowns in between; bounded, live, whole frames
# Usage: scripts/fuzz.sh [target...]   (default: all targets)
# Environment: FUZZ_SECONDS (default 60) per target; FUZZ_OPTIMIZE (default -O; -Onone builds in about a third
# of the time but executes inputs four to eight times slower); SWIFTC (default swiftc); FUZZ_RUNS: run exactly
# that many inputs from seed 1 instead (FUZZ_SECONDS is then only a cap), so a run is repeatable — what CI uses.
#
# Not built by SwiftPM: `-sanitize=fuzzer` links libFuzzer's own main, and the package's normal build must stay
# free of sanitizers. Everything is built from the package's folders, never from a list of files:
# - the modules under test are SwiftPM targets, each compiled whole from its folder with coverage and
#   AddressSanitizer into .build/fuzz/<O>/<Module>: FaultlineCore (every fuzzer), FaultlineHTTP2 (h2-frames, on
#   the system's libnghttp2) and FaultlineTLS (tls-accept, on the system's libssl and libcrypto);
# - each fuzzer is its entry point, the folder Fuzz/entries/<target>, plus its checks: the folder FuzzChecks of
#   the test target that owns them (FaultlineCoreTests for the core's fuzzers, FaultlineHTTP2Tests for h2-frames,
#   where the codec tests share its fake IO; tls-accept's checks need OpenSSL and sit with its entry point).
#   FuzzRegressionTests and HTTP2FuzzInputTests run the same checks on every file in Fuzz/corpus and
#   Fuzz/regressions. The core's checks get no coverage, so libFuzzer's coverage counts only FaultlineCore.
#
# New corpus entries go to .build/fuzz/corpus/<target> (Fuzz/corpus is only read). A failing input is saved in
# Fuzz/crashes/<target>/ and the script exits non-zero; `.build/fuzz/O/<target> <input>` replays it. Once fixed,
# move the input to Fuzz/regressions/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-60}"
runs=()
[ -n "${FUZZ_RUNS:-}" ] && runs=(-runs="$FUZZ_RUNS" -seed=1)
optimize="${FUZZ_OPTIMIZE:--O}"
swiftc="${SWIFTC:-swiftc}"
# One build folder per optimization level, so switching between `make fuzz` and `make fuzz-ci` rebuilds nothing.
build=".build/fuzz/${optimize#-}"
all_targets=(http-parser scenario resource websocket tls-accept h2-frames upstream-response websocket-network)
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=("${all_targets[@]}")

# The Swift name of a target: its fuzzer module is <Name>Fuzzer, its checks the enum <Name>FuzzCheck.
swift_name() {
    case "$1" in
        http-parser) echo HTTPParser ;;
        scenario) echo Scenario ;;
        resource) echo Resource ;;
        websocket) echo WebSocket ;;
        tls-accept) echo TLSAccept ;;
        h2-frames) echo HTTP2Frames ;;
        upstream-response) echo UpstreamResponse ;;
        websocket-network) echo WebSocketNetwork ;;
        *) echo "fuzz: unknown target $1 (targets: ${all_targets[*]})" >&2; exit 2 ;;
    esac
}

# Options per target: inputs start small and grow to max_len; scenario seeds are a few KB.
run_options() {
    case "$1" in
        http-parser) echo "-dict=Fuzz/http.dict -max_len=4096" ;;
        scenario) echo "-dict=Fuzz/json.dict -max_len=8192" ;;
        resource) echo "-dict=Fuzz/resource.dict -max_len=1024" ;;
        websocket) echo "-max_len=2048" ;;
        tls-accept) echo "-max_len=4096" ;;
        h2-frames) echo "-max_len=4096" ;;
        upstream-response) echo "-dict=Fuzz/http.dict -max_len=2048" ;;
        websocket-network) echo "-max_len=4096" ;;
    esac
}

# libFuzzer ships with the Linux Swift toolchain (Debian has nothing to add); say so plainly if it is missing.
resources="$("$swiftc" -print-target-info | sed -n 's/.*"runtimeResourcePath": "\(.*\)".*/\1/p')"
if ! compgen -G "$resources/clang/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null; then
    echo "fuzz: no libFuzzer runtime (libclang_rt.fuzzer) in $resources/clang/lib/linux of $swiftc" >&2
    exit 1
fi

# One package name for FaultlineCore and the fuzzers, so the fuzzers see its `package` declarations (the
# parser) as the test target does.
flags=(-swift-version 6 "$optimize" -g -parse-as-library -package-name faultline)
# No cross-module optimization: FaultlineCore code inlined into the uninstrumented checks would be invisible
# to libFuzzer's coverage (small public helpers, generic functions such as PercentDecoding.decode).
core_flags=("${flags[@]}" -sanitize=fuzzer,address -Xfrontend -disable-cmo)
root="$PWD"

# A target's module, compiled whole from Sources/<Module> with coverage into $build/<Module>, rebuilt when one of
# its files, a module it imports or the flags changed. Extra arguments go to swiftc (include paths).
build_module() {
    local module="$1"; shift
    local folder="Sources/$module" out="$build/$module"
    local library="$out/lib$module.a" stamp="$out/flags"
    local sources=()
    while IFS= read -r file; do sources+=("$PWD/$file"); done < <(find "$folder" -name '*.swift' | sort)
    mkdir -p "$out"
    if [ ! -f "$library" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${core_flags[*]} $*" ] \
        || [ -n "$(find "$folder" -name '*.swift' -newer "$library" | head -n 1)" ] \
        || { [ "$module" != FaultlineCore ] && [ "$build/FaultlineCore/libFaultlineCore.a" -nt "$library" ]; }; then
        echo "fuzz: building $module ($optimize)" >&2
        # In the build folder, where whole-module compilation leaves its object file.
        (cd "$out" && "$swiftc" "${core_flags[@]}" -module-name "$module" -I "$PWD/.." -I "$PWD/../FaultlineCore" "$@" \
            -emit-module -emit-module-path "$module.swiftmodule" -emit-library -static -o "lib$module.a" "${sources[@]}")
        echo "${core_flags[*]} $*" >"$stamp"
    fi
}

nghttp2_cflags=()
for flag in $(pkg-config --cflags-only-I libnghttp2); do nghttp2_cflags+=(-Xcc "$flag"); done
build_module FaultlineCore

status=0
for target in "${targets[@]}"; do
    name="$(swift_name "$target")"
    binary="$build/$target"
    # What the fuzzer links beside FaultlineCore, and the folders of its own module.
    modules=(); libraries=(); checks=""; fuzzer_flags=("${flags[@]}" -sanitize=address)
    case "$target" in
        h2-frames)
            build_module FaultlineHTTP2 -I "$root/Sources/CNghttp2" "${nghttp2_cflags[@]}"
            modules=(FaultlineHTTP2); checks=Tests/FaultlineHTTP2Tests/FuzzChecks
            fuzzer_flags=("${core_flags[@]}" -I Sources/CNghttp2 "${nghttp2_cflags[@]}")
            for flag in $(pkg-config --libs libnghttp2); do libraries+=("$flag"); done ;;
        tls-accept)
            build_module FaultlineTLS -I "$root/Sources/COpenSSL"
            modules=(FaultlineTLS)
            fuzzer_flags=("${core_flags[@]}" -I Sources/COpenSSL)
            libraries=(-lssl -lcrypto) ;;
        *)
            checks=Tests/FaultlineCoreTests/FuzzChecks ;;
    esac
    sources=()
    while IFS= read -r file; do sources+=("$file"); done < <(find "Fuzz/entries/$target" ${checks:+"$checks"} -name '*.swift' | sort)
    archives=()
    includes=(-I "$build/FaultlineCore")
    for module in "${modules[@]}"; do archives+=("$build/$module/lib$module.a"); includes+=(-I "$build/$module"); done
    archives+=("$build/FaultlineCore/libFaultlineCore.a")
    stale=0
    [ -x "$binary" ] || stale=1
    for file in "${sources[@]}" "${archives[@]}"; do [ "$file" -nt "$binary" ] && stale=1; done
    if [ "$stale" = 1 ]; then
        echo "fuzz: building $binary" >&2
        "$swiftc" "${fuzzer_flags[@]}" -wmo -module-name "${name}Fuzzer" "${includes[@]}" \
            -c "${sources[@]}" -o "$build/$target.o"
        "$swiftc" -sanitize=fuzzer,address -use-ld=lld "$build/$target.o" "${archives[@]}" "${libraries[@]}" -o "$binary"
    fi

    corpus=".build/fuzz/corpus/$target"
    crashes="Fuzz/crashes/$target"
    mkdir -p "$corpus" "$crashes"
    # The inputs that once broke a rule are replayed too (read like the seeds; new units go to $corpus).
    regressions=""
    [ -d "Fuzz/regressions/$target" ] && regressions="Fuzz/regressions/$target"
    echo "fuzz: running $target for ${FUZZ_RUNS:+$FUZZ_RUNS inputs, at most }${seconds}s" >&2
    # Swift's own crash backtracer would fight AddressSanitizer for the crash signal; libFuzzer reports instead.
    # shellcheck disable=SC2046
    if ! SWIFT_BACKTRACE=enable=no "$binary" $(run_options "$target") "${runs[@]}" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" "Fuzz/corpus/$target" $regressions; then
        echo "fuzz: $target failed; the input is in $crashes/" >&2
        status=1
    fi
done
exit "$status"
