#!/usr/bin/env bash
# What an open dashboard costs the serving path: wrk on GET /item (HTTP/1.1, keep-alive) against nginx and
# against Faultline with no watcher and with one watcher of GET /__faultline/events (a long-poll loop, as the page
# runs it), in rounds that alternate, so the machine's drift falls on every row alike. BASELINE=PATH adds a row for
# another build of Faultline (e.g. the commit before the feed). Prints requests/s per row and the median ratio to
# nginx. Not part of `make test` (`make bench` runs the full table).
# PIN=1 puts the servers on CPU 0 and wrk and the watcher on CPU 1 (as `make bench`'s pinned run).
#   DURATION=5s ROUNDS=5 CONNECTIONS=50 PIN=1 BASELINE=/path/to/old/faultline scripts/bench_dashboard.sh
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${DURATION:-5s}"
rounds="${ROUNDS:-5}"
connections="${CONNECTIONS:-50}"
binary="${FAULTLINE:-.build/release/faultline}"
baseline="${BASELINE:-}"
server_cpu=(); client_cpu=()
if [ "${PIN:-0}" = 1 ]; then server_cpu=(taskset -c 0); client_cpu=(taskset -c 1); fi
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
body='{"id":"1","name":"widget","price":9.99}'
nginx_port=$(free_port)
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
    server { listen 127.0.0.1:$nginx_port; location /item { default_type application/json; return 200 '$body'; } }
}
NGINX
"${server_cpu[@]}" nginx -c "$work/nginx.conf" -e "$work/nginx/error.log"

start() {  # start NAME BINARY: a server on a free port; its port in $work/NAME.port
    "${server_cpu[@]}" "$2" serve bench/plain-json.json --port 0 --port-file "$work/$1.port" --quiet >"$work/$1.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 200); do [ -s "$work/$1.port" ] && break; sleep 0.05; done
}
start new "$binary"
start watched "$binary"
[ -n "$baseline" ] && start baseline "$baseline"

# The watcher: the page's loop, a long-poll on the events feed for as long as the script runs.
"${client_cpu[@]}" python3 - "$(cat "$work/watched.port")" >"$work/watcher.log" 2>&1 <<'PY' &
import json, sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}/__faultline/events"
cursor, answers, entries = None, 0, 0
while True:
    url = base + ("" if cursor is None else f"?cursor={cursor}&timeoutMs=25000")
    answer = json.load(urllib.request.urlopen(url, timeout=60))
    cursor, answers, entries = answer["cursor"], answers + 1, entries + len(answer["entries"])
    print(answers, entries, flush=True)
PY
pids+=($!)

rows=(nginx new watched)
[ -n "$baseline" ] && rows=(nginx baseline new watched)
declare -A results
for round in $(seq 1 "$rounds"); do
    for row in "${rows[@]}"; do
        port=$nginx_port
        [ "$row" != nginx ] && port=$(cat "$work/$row.port")
        rps=$("${client_cpu[@]}" wrk -t1 -c"$connections" -d"$duration" "http://127.0.0.1:$port/item" | awk '/Requests\/sec/ {print $2}')
        results[$row]+="$rps "
        echo "round $round $row $rps"
    done
done
echo
echo "row        requests/s per round                      median   ratio to nginx (median of rounds)"
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
read -ra nginx_rounds <<<"${results[nginx]}"
for row in "${rows[@]}"; do
    read -ra these <<<"${results[$row]}"
    ratios=""
    for i in "${!these[@]}"; do ratios+="$(python3 -c "print(${these[$i]}/${nginx_rounds[$i]})") "; done
    printf "%-10s %-45s %-8s %.3f\n" "$row" "${results[$row]}" "$(echo "${results[$row]}" | median)" "$(echo "$ratios" | median)"
done
echo "watcher: $(tail -1 "$work/watcher.log" | awk '{print $1" answers carrying "$2" entries"}')"
