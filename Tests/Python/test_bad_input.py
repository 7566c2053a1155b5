"""Bad input over raw sockets (RFC 9112), each while a well-behaved requests.Session keeps being served."""

import json
import os
import threading
import time

import pytest
import requests


class Bystander:
    """A keep-alive requests.Session in a thread, GETting /healthz back to back until stopped."""

    def __init__(self, url):
        self.url = url
        self.statuses = []
        self.error = None
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            with requests.Session() as session:
                while not self._stop.is_set():
                    status = session.get(f"{self.url}/healthz", timeout=5).status_code
                    with self._changed:
                        self.statuses.append(status)
                        self._changed.notify_all()
        except Exception as error:  # reported by the test, not swallowed
            with self._changed:
                self.error = error
                self._changed.notify_all()

    def start(self):
        self._thread.start()
        return self

    def wait_for(self, count, timeout=5.0):
        with self._changed:
            self._changed.wait_for(lambda: len(self.statuses) >= count or self.error is not None, timeout)
            assert self.error is None, f"the bystander failed: {self.error!r}"
            assert len(self.statuses) >= count, f"the bystander made {len(self.statuses)} requests, wanted {count}"
            return len(self.statuses)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), "the bystander did not stop"
        assert self.error is None, f"the bystander failed: {self.error!r}"


BIG_HEADERS = "".join(f"X-Fill-{i}: {'y' * 1000}\r\n" for i in range(70))

CASES = [
    pytest.param("GARBAGE\r\n\r\n", 400, [], "request line", id="bad-request-line-400"),
    pytest.param("GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400, [], "HTTP version", id="space-in-target-400"),
    pytest.param("GET /" + "a" * 9000 + " HTTP/1.1\r\nHost: x\r\n\r\n", 414, [], "8192", id="request-line-over-8KiB-414"),
    pytest.param("GET /healthz HTTP/1.1\r\nHost: x\r\n" + BIG_HEADERS + "\r\n", 431, [], "65536", id="headers-over-64KiB-431"),
    pytest.param("POST /v1/quotes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n",
                 413, ["--max-body", "1024"], "1024", id="content-length-over-max-body-413"),
    pytest.param("POST /v1/quotes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n",
                 413, ["--max-body", "1024"], "1024", id="chunk-size-over-max-body-413"),
    pytest.param("POST /v1/quotes HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 400, [], "Content-Length and Transfer-Encoding", id="content-length-and-transfer-encoding-400"),
    pytest.param("GET /healthz HTTP/1.1\r\nHost: x\r\n", 408, ["--header-timeout", "300"], "300 ms", id="header-timeout-408"),
    pytest.param("POST /v1/quotes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                 501, [], "transfer coding", id="unsupported-transfer-coding-501"),
    # RFC 9112 §6.3: a request whose final transfer coding is not chunked cannot be framed: 400, then close.
    pytest.param(
        "POST /v1/quotes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400, [], "not chunked",
        id="transfer-encoding-gzip-alone-400"),
]


@pytest.mark.parametrize("request_text, status, args, reason", CASES)
def test_bad_input_is_rejected_while_others_are_served(start_faultline, raw_connect, request_text, status, args, reason):
    server = start_faultline(args=args)
    bystander = Bystander(server.url).start()
    try:
        bystander.wait_for(1)

        bad = raw_connect(server.port)
        started = time.monotonic()
        bad.send(request_text)
        data, closed = bad.read_until_close(timeout=5)
        elapsed = time.monotonic() - started
        assert closed is True, f"the server must close after a bad request; closed={closed}, got {data!r}"
        responses, rest = bad.parse(data)
        assert len(responses) == 1 and rest == b"", f"exactly one response expected, got {data!r}"
        response = responses[0]
        assert response.status == status, response
        assert response.header("Connection") == "close"
        assert response.header("Content-Type") == "application/json"
        error = json.loads(response.body)
        assert error["status"] == status
        assert reason in error["reason"]
        if status == 408:
            assert elapsed >= 0.3 - 0.01, f"408 after {elapsed:.3f} s, before the 300 ms header timeout"

        bystander.wait_for(len(bystander.statuses) + 2)
    finally:
        bystander.stop()
    assert set(bystander.statuses) == {200}

    malformed = server.journal(malformed=True)
    assert len(malformed) == 1, malformed
    entry = malformed[0]
    assert entry["malformed"] is True
    assert entry["response"]["status"] == status
    assert reason in entry["error"]
    assert entry["matched"] is False
    assert request_text.startswith(entry["requestLine"][:40])

    served = server.journal(malformed=False)
    assert len(served) == len(bystander.statuses)
    assert {e["route"] for e in served} == {"health"}
    assert len({e["connection"]["id"] for e in served}) == 1, "the bystander's connection survived"
    assert any(e["sequence"] < entry["sequence"] for e in served), "served before the bad request"
    assert any(e["sequence"] > entry["sequence"] for e in served), "served after the bad request"
    counters = server.admin_json("GET", "health")["journal"]
    assert counters["malformed"] == 1


def test_request_cut_short_is_journaled_as_rejected(faultline, raw_connect):
    conn = raw_connect(faultline.port)
    conn.send("POST /v1/quotes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":")
    conn.shutdown_write()
    data, closed = conn.read_until_close(timeout=5)
    assert closed is True and data == b"", "no answer is possible for a request cut short"
    entry, = faultline.wait_for(1, malformed=True)
    assert entry["requestLine"].startswith("POST /v1/quotes")
    assert entry["response"]["outcome"] == "rejected"
    assert entry["response"]["status"] is None


def test_special_files_are_refused_without_blocking(run_cli, start_faultline, tmp_path):
    """A FIFO would block the loop on open or read, /dev/zero would never end: only regular files are read."""
    fifo = tmp_path / "scenario.json"
    os.mkfifo(fifo)
    result = run_cli("validate", fifo, "/dev/zero", timeout=10)
    assert result.returncode == 1
    assert f"{fifo}: cannot read: it is not a regular file" in result.stderr
    assert "/dev/zero: cannot read: it is not a regular file" in result.stderr

    server = start_faultline()
    before = server.admin_json("GET", "scenarios")
    answer = server.admin_json("POST", "scenarios", expect=400, json={"paths": [str(fifo)]}, timeout=10)
    assert answer["errors"][0]["message"] == "cannot read: it is not a regular file"
    assert server.admin_json("GET", "scenarios") == before, "the loaded scenarios keep serving"
