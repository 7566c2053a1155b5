"""FaultlineClient links alone: a scratch package that depends by path on this repository's FaultlineClient
product, and on nothing else, builds an executable that drives a `faultline serve` started from the CLI, with
no libevent in the executable and without compiling the Faultline server module."""
import os
import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MANIFEST = """// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "Driver",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "{root}")],
    targets: [
        .executableTarget(name: "Driver", dependencies: [.product(name: "FaultlineClient", package: "{identity}")]),
    ]
)
"""

# Imports FaultlineClient only: JournalFilter and the other FaultlineCore types come with it.
DRIVER = """import FaultlineClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let remote = FaultlineRemote(baseURL: URL(string: CommandLine.arguments[1])!)
let cleared = try await remote.resetScenarios(journal: true)
print("cleared \\(cleared)")
let url = remote.baseURL.appendingPathComponent("v1/products/1")
let (_, response) = try await URLSession(configuration: .ephemeral).data(from: url)
print("client saw \\((response as? HTTPURLResponse)?.statusCode ?? 0)")
let seen = try await remote.waitForRequests(count: 1, matching: JournalFilter(route: "product", completed: true),
                                            timeout: .seconds(10))
print("journal \\(seen.map { "\\($0.method ?? "?") \\($0.path ?? "?") \\($0.status ?? 0)" })")
print("count \\(try await remote.count(JournalFilter(route: "product")))")
print("retryAfter pending \\(try await remote.state().retryAfter.pending.count)")
print("health \\(try await remote.health().status)")
print("report \\(try await remote.report().outcome.rawValue)")
"""


def test_a_package_links_faultline_client_alone_and_drives_a_cli_server(tmp_path, start_faultline):
    server = start_faultline()
    package = tmp_path / "driver"
    (package / "Sources" / "Driver").mkdir(parents=True)
    (package / "Package.swift").write_text(MANIFEST.format(root=ROOT, identity=ROOT.name.lower()))
    (package / "Sources" / "Driver" / "main.swift").write_text(DRIVER)

    started = time.monotonic()
    build = subprocess.run(["swift", "build"], cwd=package, capture_output=True, text=True, timeout=900)
    build_seconds = time.monotonic() - started
    log = build.stdout + build.stderr
    assert build.returncode == 0, log
    print(f"scratch build: {build_seconds:.1f} s")
    # Only FaultlineCore and FaultlineClient are compiled, never the server module (which links libevent).
    assert "Compiling FaultlineClient " in log and "Compiling FaultlineCore " in log, log  # the log names modules
    assert "Compiling Faultline " not in log, log
    assert not re.search(r"\bCLibevent\b", log), log
    # SwiftPM plans every target of the graph (Faultline.build holds an output map) but compiles only these.
    debug = package / ".build" / "debug"
    assert not list((debug / "Faultline.build").glob("*.o")) and not (debug / "Modules" / "Faultline.swiftmodule").exists()
    assert list((debug / "FaultlineCore.build").glob("*.o")) and (debug / "Modules" / "FaultlineClient.swiftmodule").exists()

    started = time.monotonic()
    run = subprocess.run([str(package / ".build" / "debug" / "Driver"), server.url], capture_output=True, text=True,
                         timeout=60)
    print(f"driver run: {time.monotonic() - started:.1f} s\n{run.stdout}")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "cleared 0",
        "client saw 503",
        'journal ["GET /v1/products/1 503"]',
        "count 1",
        "retryAfter pending 1",
        "health ok",
        # The bundled resource scenarios expect revalidation, resumes and conditional writes: with no request to a
        # resource there is nothing to judge, which is inconclusive (not a failure).
        "report inconclusive",
    ], run.stdout
    # The server's own journal agrees with what the driver printed.
    assert server.admin_json("GET", "requests/count?route=product")["count"] == 1

    # No libevent: not among the executable's shared libraries, and no libevent symbol in FaultlineClient's objects.
    ldd = subprocess.run(["ldd", str(package / ".build" / "debug" / "Driver")], capture_output=True, text=True)
    assert ldd.returncode == 0 and "libFoundation" in ldd.stdout, ldd.stdout
    assert "libevent" not in ldd.stdout, ldd.stdout
    objects = sorted((package / ".build" / "debug" / "FaultlineClient.build").glob("*.o"))
    assert objects, "no FaultlineClient objects"
    nm = subprocess.run(["nm", *map(str, objects)], capture_output=True, text=True)
    assert nm.returncode == 0, nm.stderr
    assert "FaultlineRemote" in nm.stdout
    assert not re.search(r"\b_?(event_|bufferevent_|evconnlistener_)", nm.stdout), "libevent symbols in FaultlineClient"
