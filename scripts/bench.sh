#!/usr/bin/env bash
# Throughput and p99 latency: wrk against Faultline and against nginx (one worker) in the same run, both
# returning the same small JSON body on loopback. Faultline runs with its journal on (the default).
# Three rows, each a table: plain HTTP keep-alive; HTTPS keep-alive (wrk over TLS); new TLS connections
# (`Connection: close`, so wrk reconnects and both servers do a full handshake for every request). Both servers
# serve one ECDSA P-256 certificate made here with the openssl CLI, TLS 1.2 and 1.3 (1.3 is negotiated).
# Two HTTP/2 rows, measured with h2load (nghttp2-client) instead of wrk: h2 over TLS (ALPN) and h2c with prior
# knowledge on the plain port, H2_CONNECTIONS connections x H2_STREAMS concurrent streams each. h2load prints no
# percentiles, so their p99 is computed from its --log-file (one line per request: microseconds to the end of
# the response); the mean is h2load's own "time for request" mean.
# Results are printed as tables and written to bench-results/bench.txt.
# The two servers take turns for ROUNDS rounds (nginx, Faultline, nginx, ...): on a shared 2-core machine a
# single run can differ by 20 % either way. The table shows each one's median round; the ratio is the median of
# the rounds' ratios, each from two runs back to back, so a slow stretch of the machine weighs on both sides.
# PIN=1 pins both servers to core 0 and wrk to core 1 (taskset), so server and client never share a core;
# unpinned, the scheduler places them. FAULTLINE=path benchmarks another build (e.g. an older commit's).
#   DURATION=10s CONNECTIONS=50 THREADS=1 ROUNDS=5 PIN=0 H2_CONNECTIONS=50 H2_STREAMS=10 scripts/bench.sh
# A download row: GET of a 1 MiB body, keep-alive — a generated resource streamed by Faultline, the same bytes as a
# static file with sendfile for nginx (what a real server would use), DOWNLOAD_CONNECTIONS connections.
# A proxy row: GET /item through a reverse proxy to an upstream (a second nginx, one worker, serving the same body):
# nginx's proxy_pass with a keepalive upstream pool against Faultline's `serve --proxy` (unmatched requests
# forwarded, journal on). When pinned, the upstream shares the client's core, so each proxy has core 0 to itself.
# ROWS="h2 h2c" runs only those rows (names: plain https handshake h2 h2c download proxy; default all).
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${DURATION:-10s}"
connections="${CONNECTIONS:-50}"
threads="${THREADS:-1}"
rounds="${ROUNDS:-5}"
h2_connections="${H2_CONNECTIONS:-50}"
h2_streams="${H2_STREAMS:-10}"
rows="${ROWS:-plain https handshake h2 h2c download proxy}"
download_connections="${DOWNLOAD_CONNECTIONS:-10}"
binary="${FAULTLINE:-.build/release/faultline}"
pin="${PIN:-0}"
server_cpu=(); client_cpu=()
if [ "$pin" = 1 ]; then server_cpu=(taskset -c 0); client_cpu=(taskset -c 1); fi
work="$(mktemp -d)"
out_dir="bench-results"
suffix=""; [ "$pin" = 1 ] && suffix="-pinned"
mkdir -p "$out_dir"
body='{"id":"1","name":"widget","price":9.99}'

cleanup() {
    [ -n "${faultline_pid:-}" ] && kill "$faultline_pid" 2>/dev/null || true
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    [ -n "${proxy_pid:-}" ] && kill "$proxy_pid" 2>/dev/null || true
    [ -f "$work/upstream.pid" ] && kill "$(cat "$work/upstream.pid")" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# One certificate and key for both servers: ECDSA P-256, SAN 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

# nginx: one worker, no access log, the same body and content type.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
nginx_port=$(free_port)
nginx_tls_port=$(free_port)
nginx_h2_port=$(free_port)
nginx_h2c_port=$(free_port)
nginx_proxy_port=$(free_port)
upstream_port=$(free_port)
mkdir -p "$work/nginx"
cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
daemon on;
pid $work/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx;
    uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;
    keepalive_requests 1000000;
    sendfile on;
    server {
        listen 127.0.0.1:$nginx_port;
        location /item { default_type application/json; return 200 '$body'; }
        location = /download.bin { root $work/static; default_type application/octet-stream; }
    }
    server {
        listen 127.0.0.1:$nginx_tls_port ssl;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location /item { default_type application/json; return 200 '$body'; }
    }
    # HTTP/2: h2 over TLS (ALPN), and h2c with prior knowledge (a plain listen with http2 takes only that).
    server {
        listen 127.0.0.1:$nginx_h2_port ssl http2;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location /item { default_type application/json; return 200 '$body'; }
    }
    server {
        listen 127.0.0.1:$nginx_h2c_port http2;
        location /item { default_type application/json; return 200 '$body'; }
    }
    # The proxy row: proxy_pass to the upstream nginx, HTTP/1.1 with a pool of kept-alive connections.
    upstream backend { server 127.0.0.1:$upstream_port; keepalive 64; }
    server {
        listen 127.0.0.1:$nginx_proxy_port;
        location /item { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
}
NGINX
# The upstream both proxies forward to: another nginx, one worker, the same body.
mkdir -p "$work/upstream"
cat > "$work/upstream.conf" <<NGINX
worker_processes 1;
daemon on;
pid $work/upstream.pid;
error_log $work/upstream/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/upstream; proxy_temp_path $work/upstream; fastcgi_temp_path $work/upstream;
    uwsgi_temp_path $work/upstream; scgi_temp_path $work/upstream;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$upstream_port;
        location /item { default_type application/json; return 200 '$body'; }
    }
}
NGINX
"${client_cpu[@]}" nginx -c "$work/upstream.conf" -e "$work/upstream/error.log"
"${server_cpu[@]}" nginx -c "$work/nginx.conf" -e "$work/nginx/error.log"

# --quiet: the per-request stderr log is a debugging aid, not part of serving (its cost is in the README).
"${server_cpu[@]}" "$binary" serve bench/plain-json.json --port 0 --port-file "$work/port" --quiet \
    --tls-port 0 --tls-port-file "$work/tls-port" --tls-dir "$work/tls" \
    --tls-cert-file "$work/cert.pem" --tls-key-file "$work/key.pem" >"$out_dir/faultline$suffix.log" 2>&1 &
faultline_pid=$!
for _ in $(seq 1 200); do [ -s "$work/port" ] && [ -s "$work/tls-port" ] && break; sleep 0.05; done
faultline_port=$(cat "$work/port")
faultline_tls_port=$(cat "$work/tls-port")
# The proxy row's Faultline: no routes, every request forwarded to the upstream (journal on, as above).
printf '{"name": "proxy-bench", "proxy": {"upstream": "http://127.0.0.1:%s"}, "routes": []}\n' "$upstream_port" \
    > "$work/proxy.json"
"${server_cpu[@]}" "$binary" serve "$work/proxy.json" --port 0 --port-file "$work/proxy-port" --quiet \
    >"$out_dir/faultline-proxy$suffix.log" 2>&1 &
proxy_pid=$!
for _ in $(seq 1 200); do [ -s "$work/proxy-port" ] && break; sleep 0.05; done
faultline_proxy_port=$(cat "$work/proxy-port")

check() {
    local got
    got=$(curl -s --cacert "$work/cert.pem" "$1")
    [ "$got" = "$body" ] || { echo "bench: $1 returned '$got', expected '$body'" >&2; exit 1; }
}
check "http://127.0.0.1:$faultline_port/item"
# nginx's download is Faultline's generated resource, saved as a file: the same 1 MiB on both sides.
mkdir -p "$work/static"
curl -sf -o "$work/static/download.bin" "http://127.0.0.1:$faultline_port/download.bin"
# nginx's workers run as nobody when it is started as root: the file and the folders above it must be readable.
chmod 755 "$work" "$work/static"; chmod 644 "$work/static/download.bin"
[ "$(curl -s "http://127.0.0.1:$nginx_port/download.bin" | sha256sum)" = "$(sha256sum < "$work/static/download.bin")" ] \
    && [ "$(stat -c %s "$work/static/download.bin")" = 1048576 ] \
    || { echo "bench: nginx and faultline do not serve the same 1 MiB download" >&2; exit 1; }
check "http://127.0.0.1:$nginx_port/item"
check "http://127.0.0.1:$nginx_proxy_port/item"
check "http://127.0.0.1:$faultline_proxy_port/item"
check "https://127.0.0.1:$faultline_tls_port/item"
check "https://127.0.0.1:$nginx_tls_port/item"
# HTTP/2: nghttp fails unless it gets the body over h2 (ALPN) or h2c (prior knowledge).
check_h2() {
    local got
    # (A failing substitution would end the script silently under set -e: say which check failed instead.)
    got=$(nghttp "$1") || got="(nghttp exited $?)"
    [ "$got" = "$body" ] || { echo "bench: HTTP/2 $1 returned '$got', expected '$body'" >&2; exit 1; }
}
check_h2 "https://127.0.0.1:$faultline_tls_port/item"
check_h2 "https://127.0.0.1:$nginx_h2_port/item"
check_h2 "http://127.0.0.1:$faultline_port/item"
check_h2 "http://127.0.0.1:$nginx_h2c_port/item"
# The TLS version each server negotiates with the default client settings.
tls_version() {
    openssl s_client -connect "127.0.0.1:$1" -CAfile "$work/cert.pem" </dev/null 2>/dev/null \
        | awk '/^New, / {print $2}' | tr -d ,
}
nginx_tls=$(tls_version "$nginx_tls_port"); faultline_tls=$(tls_version "$faultline_tls_port")

run_wrk() {
    # Warm up briefly, then measure. Arguments after the URL go to wrk (a header).
    if ! "${client_cpu[@]}" wrk -t"$threads" -c"$connections" -d2s "${@:2}" "$1" >/dev/null \
        || ! "${client_cpu[@]}" wrk -t"$threads" -c"$connections" -d"$duration" --latency "${@:2}" "$1"; then
        echo "bench: wrk failed against $1; faultline $(kill -0 "$faultline_pid" 2>/dev/null && echo running \
            || echo "has exited"), nginx $(kill -0 "$(cat "$work/nginx.pid")" 2>/dev/null && echo running \
            || echo "has exited"); faultline's output is in $out_dir/faultline$suffix.log" >&2
        exit 1
    fi
}

run_h2load() {
    # Warm up briefly, then measure with a per-request log. h2load's report, then the same summary lines wrk
    # prints (Requests/sec, 99%, Non-2xx), so the rows share one report. The log's third column is microseconds
    # from a request's start to the end of its response.
    local log="$work/h2load.log" output
    if ! "${client_cpu[@]}" h2load -c"$h2_connections" -m"$h2_streams" -D2 "$1" >/dev/null \
        || ! output=$("${client_cpu[@]}" h2load -c"$h2_connections" -m"$h2_streams" -D"$duration" \
            --log-file="$log" "$1") || ! grep -q '^finished in' <<<"$output"; then
        echo "bench: h2load failed against $1; faultline $(kill -0 "$faultline_pid" 2>/dev/null && echo running \
            || echo "has exited"); faultline's output is in $out_dir/faultline$suffix.log" >&2
        exit 1
    fi
    echo "$output"
    python3 - "$log" "$output" <<'PY'
import re, sys
times = sorted(int(line.split("\t")[2]) for line in open(sys.argv[1]) if line.count("\t") >= 2)
out = sys.argv[2]
rate = re.search(r"finished in ([\d.]+)s, ([\d.]+) req/s", out).group(2)
print(f"Requests/sec: {rate}")
if times:
    print(f"  99% {times[min(len(times) - 1, int(len(times) * 0.99))] / 1000:.3f}ms")
mean = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out)
print(f"h2load mean: {mean.group(1) if mean else '?'}")
done = re.search(r"(\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", out)
codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
bad = int(done.group(2)) + int(done.group(3)) + int(done.group(4)) if done else 0
non2xx = sum(int(codes.group(i)) for i in (2, 3, 4)) if codes else 0
if bad or non2xx:
    print(f"Non-2xx or 3xx responses: {non2xx}, h2load failed {bad}")
PY
    rm -f "$log"
}

to_ms() {
    # wrk prints latencies like 512.00us, 1.23ms, 2.01s
    python3 -c 'import sys,re
v=sys.argv[1]; m=re.match(r"([\d.]+)(us|ms|s)$", v)
n=float(m.group(1)); print(round(n/1000 if m.group(2)=="us" else n*1000 if m.group(2)=="s" else n, 3))' "$1"
}

rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
p99() { to_ms "$(awk '$1=="99%" {print $2}' "$1")"; }
errors() { awk '/Non-2xx|Socket errors/' "$1" | tr '\n' ' '; }

# A row: ROUNDS rounds of nginx then Faultline. Files $work/<row>-nginx.<round>.txt, $work/<row>-faultline.<round>.txt.
# The client is wrk, or h2load for the HTTP/2 rows (CLIENT=run_h2load).
selected() { [[ " $rows " == *" $1 "* ]]; }
measure() {
    local row=$1 nginx_url=$2 faultline_url=$3 client="${CLIENT:-run_wrk}"
    shift 3
    selected "$row" || return 0
    for round in $(seq 1 "$rounds"); do
        "$client" "$nginx_url" "$@" > "$work/$row-nginx.$round.txt"
        "$client" "$faultline_url" "$@" > "$work/$row-faultline.$round.txt"
    done
}
measure plain "http://127.0.0.1:$nginx_port/item" "http://127.0.0.1:$faultline_port/item"
measure https "https://127.0.0.1:$nginx_tls_port/item" "https://127.0.0.1:$faultline_tls_port/item"
measure handshake "https://127.0.0.1:$nginx_tls_port/item" "https://127.0.0.1:$faultline_tls_port/item" \
    -H "Connection: close"
CLIENT=run_h2load measure h2 "https://127.0.0.1:$nginx_h2_port/item" "https://127.0.0.1:$faultline_tls_port/item"
CLIENT=run_h2load measure h2c "http://127.0.0.1:$nginx_h2c_port/item" "http://127.0.0.1:$faultline_port/item"
connections=$download_connections measure download "http://127.0.0.1:$nginx_port/download.bin" \
    "http://127.0.0.1:$faultline_port/download.bin"
measure proxy "http://127.0.0.1:$nginx_proxy_port/item" "http://127.0.0.1:$faultline_proxy_port/item"

# The round with the median requests/s (its p99 goes with it).
median_round() {
    for round in $(seq 1 "$rounds"); do echo "$(rps "$work/$1.$round.txt") $round"; done \
        | sort -n | awk '{a[NR]=$2} END {print a[int((NR+1)/2)]}'
}
all_rounds() { for round in $(seq 1 "$rounds"); do printf '%s ' "$(rps "$work/$1.$round.txt")"; done; }

# One row's table, as the plain row has always been printed.
report() {
    local row=$1 title=$2
    selected "$row" || return 0
    local nginx_median faultline_median nginx_rps faultline_rps nginx_p99 faultline_p99 round_ratios ratio
    nginx_median="$work/$row-nginx.$(median_round "$row-nginx").txt"
    faultline_median="$work/$row-faultline.$(median_round "$row-faultline").txt"
    nginx_rps=$(rps "$nginx_median"); faultline_rps=$(rps "$faultline_median")
    nginx_p99=$(p99 "$nginx_median"); faultline_p99=$(p99 "$faultline_median")
    round_ratios=$(for round in $(seq 1 "$rounds"); do
        python3 -c "print(round($(rps "$work/$row-faultline.$round.txt") / $(rps "$work/$row-nginx.$round.txt"), 3), end=' ')"
    done)
    ratio=$(python3 -c "import statistics, sys; print(statistics.median(float(r) for r in sys.argv[1:]))" $round_ratios)
    echo "$title"
    printf '%-12s %14s %10s\n' server "requests/s" "p99 ms"
    printf '%-12s %14s %10s\n' nginx "$nginx_rps" "$nginx_p99"
    printf '%-12s %14s %10s\n' faultline "$faultline_rps" "$faultline_p99"
    echo "throughput ratio faultline/nginx (median of the rounds' ratios): $ratio"
    if grep -q '^h2load mean' "$nginx_median"; then
        echo "mean time for request (h2load, median rounds): nginx $(awk '/^h2load mean/ {print $3}' "$nginx_median"), faultline $(awk '/^h2load mean/ {print $3}' "$faultline_median")"
    fi
    echo "rounds, requests/s: nginx $(all_rounds "$row-nginx")| faultline $(all_rounds "$row-faultline")| ratio per round $round_ratios"
    for round in $(seq 1 "$rounds"); do
        [ -n "$(errors "$work/$row-faultline.$round.txt")" ] \
            && echo "faultline wrk errors, round $round: $(errors "$work/$row-faultline.$round.txt")"
        [ -n "$(errors "$work/$row-nginx.$round.txt")" ] \
            && echo "nginx wrk errors, round $round: $(errors "$work/$row-nginx.$round.txt")"
    done
    true
}
journal=$(curl -s "http://127.0.0.1:$faultline_port/__faultline/requests/count")

{
    echo "benchmark: wrk -t$threads -c$connections -d$duration, GET /item (${#body}-byte JSON), loopback, $(nproc) cores, $([ "$pin" = 1 ] && echo "servers pinned to core 0, wrk and h2load to core 1" || echo "unpinned"), median of $rounds rounds; HTTP/2 rows: h2load -t1 -c$h2_connections -m$h2_streams -D$duration"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  nginx: $(nginx -v 2>&1 | sed 's/.*\///')  faultline: $("$binary" --version)  $(openssl version | cut -d' ' -f1-2)"
    report plain "plain HTTP, keep-alive"
    echo
    report https "HTTPS, keep-alive (ECDSA P-256; negotiated: nginx $nginx_tls, faultline $faultline_tls)"
    echo
    report handshake "HTTPS, new TLS connection per request (Connection: close: a full handshake each)"
    echo
    report h2 "HTTP/2 over TLS (h2 by ALPN), h2load -c$h2_connections -m$h2_streams (p99 from h2load's --log-file)"
    echo
    report h2c "HTTP/2 cleartext (h2c, prior knowledge), h2load -c$h2_connections -m$h2_streams (p99 from h2load's --log-file)"
    echo
    report download "download: GET of a 1 MiB body, keep-alive, wrk -c$download_connections (faultline: a generated resource streamed 64 KiB at a time; nginx: the same bytes as a static file, sendfile on)"
    echo
    report proxy "reverse proxy, keep-alive: GET /item forwarded to an upstream nginx (nginx: proxy_pass, keepalive 64; faultline: serve --proxy, pooled)"
    echo
    echo "faultline journal after the run: $journal"
} | tee "$out_dir/bench$suffix.txt"
