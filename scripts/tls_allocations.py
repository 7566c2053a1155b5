#!/usr/bin/env python3
"""Heap allocations per new TLS connection, Faultline against nginx (issue 30's "per-connection allocation").

Each server runs twice under bench/alloc-count/mcount.so (LD_PRELOAD), which counts malloc, calloc, realloc and the
aligned allocators and writes the total when the process exits: once with SMALL connections, once with LARGE. Each
connection is a full TLS 1.3 handshake (Python's ssl, the same ECDSA P-256 certificate for both, session tickets as
each server sends them), one `GET /item`, and the server's close. (LARGE - SMALL) / (LARGE - SMALL connections) is
what one connection costs, start-up and shutdown cancelled out.

    make tls-allocations        (a release build; nginx and a C compiler, as make bench installs them)
    python3 scripts/tls_allocations.py [--binary .build/release/faultline] [--small 200] [--large 1200]
"""
import argparse
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_counter(work):
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not compiler:
        sys.exit("tls_allocations: no C compiler (cc, gcc or clang) to build bench/alloc-count/mcount.c")
    library = os.path.join(work, "mcount.so")
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", library,
                    os.path.join(ROOT, "bench", "alloc-count", "mcount.c")], check=True)
    return library


def wait_for_file(path, what, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and open(path).read().strip():
            return open(path).read().strip()
        time.sleep(0.02)
    sys.exit(f"tls_allocations: {what} did not appear in {path} within {timeout} s")


def wait_for_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    sys.exit(f"tls_allocations: nothing listening on 127.0.0.1:{port}")


def connections(count, port, context):
    for _ in range(count):
        with context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1") as tls:
            tls.sendall(b"GET /item HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
            if not data.startswith(b"HTTP/1.1 200"):
                sys.exit(f"tls_allocations: unexpected answer {data[:60]!r}")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(server, count, args, work, library):
    run_dir = tempfile.mkdtemp(dir=work)
    os.chmod(run_dir, 0o777)  # nginx, as root, may write its exit count as another user
    counter = os.path.join(run_dir, "count")
    env = dict(os.environ, LD_PRELOAD=library, MCOUNT_FILE=counter)
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    if server == "faultline":
        port_file = os.path.join(run_dir, "tls-port")
        process = subprocess.Popen(
            [args.binary, "serve", os.path.join(ROOT, "bench", "plain-json.json"), "--port", "0", "--quiet",
             "--tls-port", "0", "--tls-port-file", port_file, "--tls-dir", os.path.join(run_dir, "tls"),
             "--tls-cert-file", cert, "--tls-key-file", key], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = int(wait_for_file(port_file, "the TLS port"))
    else:
        port = free_port()
        conf = os.path.join(run_dir, "nginx.conf")
        with open(conf, "w") as out:
            out.write(f"""worker_processes 1; master_process off; daemon off; pid {run_dir}/nginx.pid;
error_log {run_dir}/error.log;
events {{}}
http {{ access_log off;
  server {{ listen 127.0.0.1:{port} ssl; ssl_certificate {cert}; ssl_certificate_key {key};
    ssl_protocols TLSv1.2 TLSv1.3;
    location /item {{ default_type application/json; return 200 '{{"id":"1","name":"widget","price":9.99}}'; }} }} }}
""")
        process = subprocess.Popen(["nginx", "-c", conf, "-e", os.path.join(run_dir, "error.log")], env=env)
        wait_for_port(port)
    context = ssl.create_default_context(cafile=cert)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    connections(count, port, context)
    time.sleep(0.2)  # the server's last close
    process.terminate()
    process.wait(timeout=10)
    return int(wait_for_file(counter, "the allocation count"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build", "release", "faultline"))
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=1200)
    args = parser.parse_args()
    if args.large <= args.small:
        sys.exit("tls_allocations: --large must be more than --small")
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", os.path.join(work, "key.pem"), "-out", os.path.join(work, "cert.pem")],
                       check=True, capture_output=True)
        library = build_counter(work)
        figures = {}
        for server in ("nginx", "faultline"):
            small = run(server, args.small, args, work, library)
            large = run(server, args.large, args, work, library)
            figures[server] = (large - small) / (args.large - args.small)
            print(f"{server}: {figures[server]:.1f} heap allocations per TLS connection "
                  "(TLS 1.3 handshake, one GET, close)")
        print(f"faultline/nginx: {figures['faultline'] / figures['nginx']:.2f}")


if __name__ == "__main__":
    main()
