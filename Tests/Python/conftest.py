"""Fixtures for driving a real `faultline serve` process from Python clients.

Every test gets its own server on a port chosen by the kernel (`--port 0`); nothing here sleeps: start-up
waits on the first stdout line, and tests wait on the journal long-poll or poll with a deadline.
"""

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIOS_DIR = REPO_ROOT / "scenarios"
CLIENTS_DIR = Path(__file__).resolve().parent / "clients"
STARTUP_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 10.0


def faultline_binary():
    path = os.environ.get("FAULTLINE_BIN") or str(REPO_ROOT / ".build" / "debug" / "faultline")
    if not os.access(path, os.X_OK):
        pytest.fail(f"faultline binary not found or not executable: {path} (set FAULTLINE_BIN or run `swift build`)")
    return path


@pytest.fixture
def faultline_bin():
    """Path of the faultline executable under test ($FAULTLINE_BIN)."""
    return faultline_binary()


_go_client_lock = threading.Lock()
_go_client = None


def build_go_client(folder):
    """Builds Tests/Python/clients/goclient (Go's standard library only) once per process, in `folder` the first
    time, and returns its path: the go_client fixture and test_verdict_matrix.py (which builds it on a thread while
    other cells run) share the one build.

    GOPATH lives in `folder` and GOPROXY is off: it builds as root, offline, in CI. GOCACHE is .build/go-cache when the
    checkout has a .build (swift build's own, ignored by git), so that a second run does not compile Go's standard
    library again (some 15 s of CPU); else it is in `folder` too."""
    global _go_client
    with _go_client_lock:
        if _go_client is not None:
            return _go_client
        if shutil.which("go") is None:
            pytest.fail("go not found: install golang-go (scripts/ensure-deps.sh test)")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        cache = REPO_ROOT / ".build" / "go-cache" if (REPO_ROOT / ".build").is_dir() else folder / "cache"
        env = {**os.environ, "GOCACHE": str(cache), "GOPATH": str(folder / "gopath"), "GOPROXY": "off",
               "GOFLAGS": "", "GO111MODULE": "off", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
        binary = folder / "goclient"
        built = subprocess.run(["go", "build", "-o", str(binary), "main.go"], cwd=CLIENTS_DIR / "goclient", env=env,
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
        if built.returncode != 0:
            pytest.fail(f"go build failed:\n{built.stdout}{built.stderr}")
        _go_client = binary
        return binary


@pytest.fixture(scope="session")
def go_client(tmp_path_factory):
    """Path of Tests/Python/clients/goclient built for this session (build_go_client)."""
    return build_go_client(tmp_path_factory.mktemp("goclient"))


@pytest.fixture(scope="session")
def node_fetch_client():
    """Command prefix for Tests/Python/clients/fetchclient.mjs (node's built-in fetch, undici)."""
    if shutil.which("node") is None:
        pytest.fail("node not found (node 20 or later: its fetch is undici)")
    return ["node", str(CLIENTS_DIR / "fetchclient.mjs")]


@pytest.fixture
def run_cli():
    """run_cli(*args) runs the faultline executable to completion (validate, --version, ...)."""

    def run(*args, timeout=30):
        return subprocess.run([faultline_binary(), *map(str, args)], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)

    return run


def _query_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class FaultlineProcess:
    """A running `faultline serve` and helpers for its admin API."""

    def __init__(self, args, stderr_path, env=None):
        self.args = args
        self.stderr_path = stderr_path
        self._stderr_file = open(stderr_path, "wb")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr_file, stdin=subprocess.DEVNULL,
                                     env=None if env is None else {**os.environ, **env})
        self._lines = queue.Queue()
        # A reader thread drains stdout so the server can never block on a full pipe; the first line is
        # taken from the queue with a deadline.
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        self.url = None
        self.port = None
        self.https_url = None  # with --tls-port: the second stdout line
        self.tls_port = None
        self.stopped = False

    def _read_stdout(self):
        for raw in iter(self.proc.stdout.readline, b""):
            self._lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
        self._lines.put(None)

    def stderr(self):
        if not self._stderr_file.closed:
            self._stderr_file.flush()
        return Path(self.stderr_path).read_text(errors="replace")

    def wait_listening(self, timeout=STARTUP_TIMEOUT_S):
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            line = None
            problem = f"no stdout line within {timeout} s"
        else:
            problem = "stdout closed before the first line" if line is None else f"unexpected first line {line!r}"
        prefix = "listening on http://"
        if line is None or not line.startswith(prefix):
            self.kill()
            pytest.fail(f"faultline did not start ({problem}); command: {self.args}\nstderr:\n{self.stderr()}")
        self.url = line[len("listening on "):].strip()
        self.port = int(self.url.rsplit(":", 1)[1])
        if "--tls-port" in self.args:
            # serve --tls-port prints a second line, `listening on https://HOST:PORT`.
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                line = None
            if line is None or not line.startswith("listening on https://"):
                self.kill()
                pytest.fail(f"faultline printed no https line ({line!r}); command: {self.args}\n"
                            f"stderr:\n{self.stderr()}")
            self.https_url = line[len("listening on "):].strip()
            self.tls_port = int(self.https_url.rsplit(":", 1)[1])
        return self

    # -- admin API -------------------------------------------------------------------------------------

    def admin(self, method, path, **kw):
        """Calls /__faultline/<path> and returns the requests.Response (no status check)."""
        kw.setdefault("timeout", HTTP_TIMEOUT_S)
        return requests.request(method, f"{self.url}/__faultline/{path.lstrip('/')}", **kw)

    def admin_json(self, method, path, expect=200, **kw):
        response = self.admin(method, path, **kw)
        assert response.status_code == expect, f"{method} {path}: {response.status_code} {response.text}"
        return response.json()

    def journal(self, **filters):
        """Journal entries, oldest first (GET /__faultline/requests with the given filters)."""
        params = {name: _query_value(value) for name, value in filters.items()}
        return self.admin_json("GET", "requests", params=params)["requests"]

    def count(self, **filters):
        params = {name: _query_value(value) for name, value in filters.items()}
        return self.admin_json("GET", "requests/count", params=params)["count"]

    def wait(self, count, timeout_ms=5000, **filters):
        """Long-poll GET /__faultline/requests/wait; returns the whole answer (satisfied, count, requests)."""
        params = {name: _query_value(value) for name, value in filters.items()}
        params.update(count=str(count), timeoutMs=str(timeout_ms))
        return self.admin_json("GET", "requests/wait", params=params, timeout=timeout_ms / 1000 + HTTP_TIMEOUT_S)

    def wait_for(self, count, timeout_ms=5000, **filters):
        """Like wait(), but fails the test unless the condition held; returns the matching entries."""
        answer = self.wait(count, timeout_ms, **filters)
        assert answer["satisfied"], f"waited for {count} entries matching {filters}; saw {answer['count']}: {answer['requests']}"
        return answer["requests"]

    # -- lifecycle -------------------------------------------------------------------------------------

    def wait_exit(self, timeout=STOP_TIMEOUT_S):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        self._close_files()

    def stop(self):
        """SIGTERM, wait (kill on timeout); returns the exit code, or None if it had to be killed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.wait_exit()
        if code is None:
            self.kill()
        self._close_files()
        self.stopped = True
        return code

    def _close_files(self):
        self._reader.join(timeout=STOP_TIMEOUT_S)
        if self.proc.stdout and not self.proc.stdout.closed:
            self.proc.stdout.close()
        if not self._stderr_file.closed:
            self._stderr_file.close()


@pytest.fixture
def start_faultline(tmp_path):
    """Factory: start_faultline(*paths, args=[...]) starts `faultline serve` and waits until it listens.

    Paths default to the bundled scenarios/ folder. Every server started is stopped at teardown with SIGTERM
    and must exit 0.
    """
    started = []

    def start(*paths, args=(), env=None):
        index = len(started)
        port_file = tmp_path / f"faultline-{index}.port"
        command = [faultline_binary(), "serve", *[str(p) for p in (paths or [SCENARIOS_DIR])],
                   "--port", "0", "--port-file", str(port_file), *[str(a) for a in args]]
        server = FaultlineProcess(command, tmp_path / f"faultline-{index}.stderr", env)
        started.append(server)
        server.wait_listening()
        assert port_file.read_text().strip() == str(server.port), "the port file names the port on stdout"
        # One admin round trip before handing the server over: it proves the admin API answers, and it
        # lets the loop install its SIGTERM handler first (the listening line comes before that; see
        # test_signal_right_after_the_listening_line_still_exits_0), so teardown's SIGTERM is always clean.
        health = server.admin_json("GET", "health")
        assert health["status"] == "ok" and health["port"] == server.port
        return server

    yield start

    failures = []
    for server in started:
        already_exited = server.proc.poll() is not None
        code = server.stop()
        if code != 0:
            how = "had exited" if already_exited else "after SIGTERM"
            failures.append(f"{server.args}: exit code {code} ({how})\nstderr:\n{server.stderr()}")
    if failures:
        pytest.fail("faultline did not stop cleanly:\n" + "\n".join(failures))


@pytest.fixture(params=["linux-fast-paths", "portable"])
def start_faultline_both_paths(request, start_faultline):
    """start_faultline, once with the Linux fast paths and once with FAULTLINE_PORTABLE=1, which forces the portable
    path of every platform concern (the code a Mac runs; docs/PORTABILITY.md). `start.portable` says which."""
    env = {"FAULTLINE_PORTABLE": "1"} if request.param == "portable" else {"FAULTLINE_PORTABLE": "0"}

    def start(*paths, args=()):
        return start_faultline(*paths, args=args, env=env)

    start.portable = request.param == "portable"
    return start


@pytest.fixture
def faultline(start_faultline):
    """A server for the bundled scenarios/ folder."""
    return start_faultline()


@pytest.fixture
def write_scenario(tmp_path):
    """write_scenario(dict_or_text, name=None) -> Path of a scenario file in the test's tmp folder."""
    folder = tmp_path / "scenarios"
    folder.mkdir(exist_ok=True)

    def write(scenario, name=None):
        if name is None:
            name = (scenario.get("name", "scenario") if isinstance(scenario, dict) else "scenario") + ".json"
        path = folder / name
        path.write_text(scenario if isinstance(scenario, str) else json.dumps(scenario, indent=2))
        return path

    return write


# -- raw sockets ---------------------------------------------------------------------------------------


def start_recorder(tmp_path, upstream_url, *extra):
    """`faultline record` in front of `upstream_url`, writing to tmp_path/recorded (`.output`)."""
    output = tmp_path / "recorded"
    recorder = FaultlineProcess([faultline_binary(), "record", "--upstream", upstream_url, "--output", str(output),
                                 "--port", "0", *map(str, extra)], tmp_path / "recorder.stderr")
    recorder.wait_listening()
    recorder.output = output
    return recorder


class RawServer:
    """A loopback TCP server on threads for the proxy tests' raw upstreams, keep-alive: each request head on a
    connection (numbered from 1) goes to `answer(client, number, head, rest)`, which returns the bytes read past the
    request, or None when the connection is done; `lost` hears a connection fail. `close` closes the listener and
    every connection."""

    def __init__(self, backlog=64):
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(backlog)
        self.port = self.server.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self.open = []
        self.stopping = False

    def start(self):
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self):
        while not self.stopping:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(client)
            threading.Thread(target=self._serve, args=(client, self.connections), daemon=True).start()

    def _serve(self, client, number):
        buffer = b""
        try:
            while buffer is not None:
                received = recv_head(client, buffer)
                if received is None:
                    return
                buffer = self.answer(client, number, *received)
        except OSError:
            self.lost()

    def answer(self, client, number, head, rest):
        raise NotImplementedError

    def lost(self):
        pass

    def close(self):
        self.stopping = True
        self.server.close()
        for client in self.open:
            try:
                client.close()
            except OSError:
                pass


def recv_head(sock, buffer):
    """Reads from `sock` until `buffer` holds a whole header section: (head, the bytes after it), or None when the
    peer closed first. For the raw upstream servers the proxy tests stand up."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    head, rest = buffer.split(b"\r\n\r\n", 1)
    return head, rest


class RawResponse:
    def __init__(self, status, reason, headers, body, head):
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value)
        self.body = body
        self.head = head

    def header(self, name):
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def __repr__(self):
        return f"RawResponse({self.status} {self.reason!r}, {self.headers}, {self.body[:80]!r})"


def parse_responses(data):
    """Parses as many complete Content-Length-framed responses as `data` holds; returns (responses, rest)."""
    responses = []
    while True:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            return responses, data
        head = data[:end].decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise AssertionError(f"not an HTTP status line: {lines[0]!r}")
        headers = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.append((name, value.strip()))
        status = int(parts[1])
        length = 0
        for name, value in headers:
            if name.lower() == "content-length":
                length = int(value)
        if 100 <= status < 200:
            length = 0
        start = end + 4
        if len(data) < start + length:
            return responses, data
        responses.append(RawResponse(status, parts[2] if len(parts) > 2 else "", headers, data[start:start + length], head))
        data = data[start + length:]


class RawConnection:
    """A TCP connection with byte-exact control. Every read has a deadline."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buffer = b""
        self.closed_by_peer = False

    def send(self, data):
        self.sock.sendall(data.encode("latin-1") if isinstance(data, str) else data)

    def shutdown_write(self):
        self.sock.shutdown(socket.SHUT_WR)

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("deadline passed")
        self.sock.settimeout(remaining)
        chunk = self.sock.recv(65536)
        if not chunk:
            self.closed_by_peer = True
        self.buffer += chunk
        return chunk

    def read_until(self, predicate, timeout=5.0):
        """Reads until predicate(buffer) holds; raises on timeout or EOF before it holds."""
        deadline = time.monotonic() + timeout
        while not predicate(self.buffer):
            try:
                chunk = b"" if self.closed_by_peer else self._fill(deadline)
            except socket.timeout:
                raise AssertionError(f"no expected data within {timeout} s; got {self.buffer!r}") from None
            if not chunk:
                raise AssertionError(f"connection closed before the expected data; got {self.buffer!r}")
        return self.buffer

    def read_responses(self, count, timeout=5.0):
        """Reads until `count` complete responses arrived; consumes and returns them."""
        self.read_until(lambda data: len(parse_responses(data)[0]) >= count, timeout)
        responses, rest = parse_responses(self.buffer)
        self.buffer = rest
        assert len(responses) == count, f"more responses than expected: {responses[count:]}"
        return responses

    def read_until_close(self, timeout=5.0):
        """Reads until the server closes; returns (bytes, closed): closed is True on FIN, "reset" on RST and
        False if the deadline passed first."""
        deadline = time.monotonic() + timeout
        try:
            while not self.closed_by_peer:
                self._fill(deadline)
        except socket.timeout:
            return self.buffer, False
        except ConnectionResetError:
            return self.buffer, "reset"
        return self.buffer, True

    @staticmethod
    def parse(data):
        """parse_responses(data), for tests holding a RawConnection."""
        return parse_responses(data)

    def close(self):
        self.sock.close()


@pytest.fixture
def raw_connect():
    """raw_connect(port) -> RawConnection; all are closed at teardown."""
    opened = []

    def connect(port, timeout=5.0):
        connection = RawConnection(port, timeout)
        opened.append(connection)
        return connection

    yield connect
    for connection in opened:
        connection.close()
