/// What `faultline init` writes, every file but the schema (which is `scenarios/faultline.schema.json`, compiled into
/// the binary: `PackageResources.faultline_schema_json`). Kept here together, as the files' exact text: the tests
/// run each sample, and Tests/FaultlineTests/InitSample/ holds the Swift one and its scenario byte for byte, so
/// `swift test` compiles and runs what `init --swift` writes.
enum InitTemplates {
    /// `scenarios/example.json`. JSON has no comments, so the `description` explains each part (routes have no
    /// description of their own in the schema).
    static let exampleScenario = #"""
{
  "$schema": "./faultline.schema.json",
  "name": "example",
  "description": "A starter scenario written by faultline init; edit it, then check it with faultline validate scenarios. Route \"item\": GET /v1/items/{id} answers 429 Too Many Requests with Retry-After: 1, twice (\"times\": 2), then 200 with a small JSON body in which {{path.id}} is the id from the path; after its last step a route keeps answering with it (\"afterLast\": \"repeat-last\"). \"expect\" holds the rules that GET /__faultline/report and faultline verify judge against what the client did: \"honorsRetryAfter\" fails if a retry comes sooner than the Retry-After before it allowed.",
  "expect": { "honorsRetryAfter": true },
  "routes": [
    {
      "id": "item",
      "match": { "method": "GET", "path": "/v1/items/{id}" },
      "responses": [
        { "status": 429, "headers": { "Retry-After": "1" }, "json": { "error": "too many requests" }, "times": 2 },
        { "status": 200, "json": { "id": "{{path.id}}", "name": "Item {{path.id}}" } }
      ],
      "afterLast": "repeat-last"
    }
  ]
}
"""# + "\n"

    /// `test_faultline_example.py` (`--pytest`): Python's standard library only.
    static let pytest = #"""
"""A sample test written by `faultline init --pytest`.

It starts `faultline serve` on scenarios/example.json, drives a tiny client that retries each 429 after the
Retry-After it carries, checks the 200 it ends with, and asks the server for its verdicts. Run it with
`python3 -m pytest test_faultline_example.py`; the binary is $FAULTLINE_BIN, else `faultline` on PATH.
Python's standard library only: subprocess and urllib.
"""

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def faultline_binary():
    binary = os.environ.get("FAULTLINE_BIN") or shutil.which("faultline")
    assert binary, "faultline not found: set FAULTLINE_BIN or put faultline on PATH"
    return binary


def get_with_retries(url, attempts=5):
    """The client under test: GET, and on 429 wait as long as Retry-After says (in seconds), then try again."""
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            if error.code != 429:
                raise
            wait = float(error.headers.get("Retry-After", "1"))
            error.close()
            time.sleep(wait)
    raise AssertionError(f"still 429 after {attempts} attempts")


def test_client_waits_as_retry_after_asks():
    server = subprocess.Popen(
        [faultline_binary(), "serve", "scenarios/example.json", "--port", "0", "--quiet"],
        cwd=HERE, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        # The first stdout line is "listening on http://127.0.0.1:PORT".
        line = server.stdout.readline()
        assert line.startswith("listening on http://"), f"faultline did not start: {line!r}"
        url = line.split()[-1]

        status, item = get_with_retries(f"{url}/v1/items/42")
        assert status == 200 and item == {"id": "42", "name": "Item 42"}, item

        # The scenario's "expect" rules, judged against what the client did.
        with urllib.request.urlopen(f"{url}/__faultline/report", timeout=10) as response:
            report = json.loads(response.read())
        assert report["passed"], report["verdicts"]
    finally:
        server.terminate()
        code = server.wait(timeout=10)
        server.stdout.close()
    assert code == 0, f"faultline exited {code}"
"""# + "\n"

    /// `faultline-example.sh` (`--shell`, mode 0755): bash and curl.
    static let shell = #"""
#!/usr/bin/env bash
# A sample check written by `faultline init --shell`: it starts `faultline serve` on scenarios/example.json, runs a
# curl client that retries each 429 after the Retry-After it carries, then `faultline verify`, whose exit status is
# the verdict, and stops the server. The binary is $FAULTLINE_BIN, else `faultline` on PATH.
set -euo pipefail
cd "$(dirname "$0")"

faultline="${FAULTLINE_BIN:-faultline}"
work="$(mktemp -d)"
server=""
stop_server() {
    if [ -n "$server" ]; then
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop_server EXIT

"$faultline" serve scenarios/example.json --port 0 --port-file "$work/port" --quiet >"$work/stdout" &
server=$!
for _ in $(seq 100); do
    [ -s "$work/port" ] && break
    kill -0 "$server" 2>/dev/null || { echo "faultline serve exited before listening" >&2; exit 2; }
    sleep 0.1
done
[ -s "$work/port" ] || { echo "faultline serve wrote no port file within 10 s" >&2; exit 2; }
url="http://127.0.0.1:$(cat "$work/port")"

# The client under test: GET, and on 429 wait as long as Retry-After says (in seconds), then try again.
status=""
for _ in 1 2 3 4 5; do
    status="$(curl -sS -o "$work/body" -D "$work/headers" -w '%{http_code}' "$url/v1/items/42")"
    [ "$status" = 429 ] || break
    wait_s="$(tr -d '\r' <"$work/headers" | awk -F': *' 'tolower($1) == "retry-after" { print $2 }')"
    sleep "${wait_s:-1}"
done
[ "$status" = 200 ] || { echo "GET /v1/items/42: expected 200, got $status" >&2; exit 1; }
echo "GET /v1/items/42: $status $(cat "$work/body")"

# The scenario's "expect" rules, judged against what the client did: exit 1 if one failed.
verdict=0
"$faultline" verify --url "$url" || verdict=$?

# Stop the server (SIGTERM: it exits 0) before reporting.
kill "$server"
wait "$server"
server=""
exit "$verdict"
"""# + "\n"

    /// `FaultlineExampleTests.swift` (`--swift`): Swift Testing, a server per test. The same text is
    /// Tests/FaultlineTests/InitSample/InitSampleTests.swift.
    static let swift = #"""
// A sample test written by `faultline init --swift`. It starts a server for this test alone on scenarios/example.json
// (found next to this source file, whatever the working directory), drives a tiny URLSession client that retries
// each 429 after the Retry-After it carries, and asks the server for its verdicts.
import Faultline
import FaultlineCore
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking   // URLSession on Linux
#endif

private struct ExampleItem: Decodable, Equatable {
    var id: String
    var name: String
}

@Test func exampleClientWaitsAsRetryAfterAsks() async throws {
    try await FaultlineServer.with(scenarioFiles: ["scenarios/example.json"]) { server in
        let url = server.baseURL.appendingPathComponent("v1/items/42")

        // The client under test: GET, and on 429 wait as long as Retry-After says (in seconds), then try again.
        var status = 0
        var body = Data()
        for _ in 0..<5 {
            let (data, response) = try await URLSession.shared.data(from: url)
            let http = try #require(response as? HTTPURLResponse)
            (status, body) = (http.statusCode, data)
            guard status == 429 else { break }
            let wait = Int(http.value(forHTTPHeaderField: "Retry-After") ?? "") ?? 1
            try await Task.sleep(for: .seconds(wait))
        }
        #expect(status == 200)
        #expect(try JSONDecoder().decode(ExampleItem.self, from: body) == ExampleItem(id: "42", name: "Item 42"))

        let attempts = try await server.waitForRequests(count: 3, matching: JournalFilter(route: "item"))
        #expect(attempts.map(\.status) == [429, 429, 200])
        let report = await server.report()
        #expect(report.passed, "\(report)")   // the scenario's expect rules, with evidence when they fail
    }
}
"""# + "\n"
}
