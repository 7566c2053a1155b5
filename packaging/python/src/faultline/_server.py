"""`faultline serve` as a child process, and its admin API over urllib."""
from __future__ import annotations

import http.client
import json
from collections import abc
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ._binary import binary_path
from ._types import Entry, Report, Verdict

ScenarioSource = Union[str, "os.PathLike[str]", Mapping[str, Any]]

HTTP_TIMEOUT_S = 10.0
STOP_STEP_TIMEOUT_S = 5.0

# Never through a proxy from the environment: the server is on loopback.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class FaultlineError(RuntimeError):
    """The server did not start, could not be reached, or refused an admin call; the message says which, with
    the server's stderr when it did not start."""


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _query(params: Mapping[str, Any]) -> str:
    pairs = [(name, _query_value(value)) for name, value in params.items() if value is not None]
    return ("?" + urllib.parse.urlencode(pairs)) if pairs else ""


class Server:
    """A `faultline serve` process on 127.0.0.1, port 0 (a free port), for as long as the ``with`` block::

        with faultline.Server(scenarios=["scenarios/flaky-catalogue.json"]) as server:
            urllib.request.urlopen(server.url + "/v1/products/1")
            server.assert_verdicts()

    ``scenarios``: files or folders (relative paths are resolved against the working directory) and scenario
    dicts, which are written to a temporary file each; none serves the binary's default, ``./scenarios``.
    ``args``: more ``serve`` options (``["--max-journal", "100"]``). ``tls=True`` also serves HTTPS on a free port
    (``https_url``). ``binary``: the executable, else :func:`faultline.binary_path`.

    The server is stopped when the block ends, however it ends: POST /__faultline/shutdown, then SIGTERM, then
    SIGKILL, each with a timeout. ``start()`` and ``stop()`` do the same by hand.
    """

    def __init__(self, scenarios: Optional[Iterable[ScenarioSource]] = None, args: Sequence[Any] = (),
                 binary: Optional[str] = None, tls: bool = False, startup_timeout: float = 10.0,
                 env: Optional[Mapping[str, str]] = None, cwd: Optional[Union[str, "os.PathLike[str]"]] = None):
        if isinstance(scenarios, (str, os.PathLike, abc.Mapping)):
            scenarios = [scenarios]
        self.scenarios = list(scenarios or [])
        self.args = [str(a) for a in args]
        self.binary = binary
        self.tls = tls or "--tls-port" in self.args or any(a.startswith("--tls-port=") for a in self.args)
        self.startup_timeout = startup_timeout
        self.env = dict(env) if env is not None else None
        self.cwd = str(cwd) if cwd is not None else None
        self.url: Optional[str] = None
        self.https_url: Optional[str] = None
        self.port: Optional[int] = None
        self.tls_port: Optional[int] = None
        self.command: List[str] = []
        self.exit_code: Optional[int] = None
        self._proc: Optional[subprocess.Popen] = None
        self._dir: Optional[str] = None
        self._stderr_file = None
        self._stderr_text: Optional[str] = None
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self._reader: Optional[threading.Thread] = None

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _scenario_paths(self, sources: Iterable[ScenarioSource]) -> List[str]:
        paths = []
        for source in sources:
            if isinstance(source, abc.Mapping):
                assert self._dir is not None
                index = len(os.listdir(self._dir))
                name = str(source.get("name", "scenario")).replace(os.sep, "_")
                path = Path(self._dir) / f"scenario-{index}-{name}.json"
                path.write_text(json.dumps(source, indent=2))
                paths.append(str(path))
            else:
                base = self.cwd or os.getcwd()
                paths.append(os.path.join(base, os.fspath(source)))
        return paths

    def start(self) -> "Server":
        """Starts the server and returns once its admin API answers; raises FaultlineError (with the server's
        stderr) if it exits or prints nothing within ``startup_timeout`` seconds."""
        if self._proc is not None:
            raise FaultlineError("this Server was already started")
        binary = self.binary or binary_path()
        self._dir = tempfile.mkdtemp(prefix="faultline-")
        try:
            port_file = Path(self._dir) / "port"
            self.command = [binary, "serve", *self._scenario_paths(self.scenarios), "--port", "0",
                            "--port-file", str(port_file)]
            if self.tls and "--tls-port" not in self.args and not any(a.startswith("--tls-port=") for a in self.args):
                self.command += ["--tls-port", "0"]
            self.command += self.args
            self._stderr_file = open(Path(self._dir) / "stderr", "wb")
            self._proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=self._stderr_file,
                                          stdin=subprocess.DEVNULL, cwd=self.cwd,
                                          env=None if self.env is None else {**os.environ, **self.env})
            # A reader thread drains stdout so that the server never blocks on a full pipe.
            self._reader = threading.Thread(target=self._read_stdout, name="faultline-stdout", daemon=True)
            self._reader.start()
            deadline = time.monotonic() + self.startup_timeout
            self.url = self._listening_line("http://", deadline)
            self.port = int(self.url.rsplit(":", 1)[1])
            if self.tls:
                self.https_url = self._listening_line("https://", deadline)
                self.tls_port = int(self.https_url.rsplit(":", 1)[1])
            written = port_file.read_text().strip() if port_file.exists() else ""
            if written != str(self.port):
                raise self._start_error(f"the port file says {written!r}, stdout said port {self.port}")
            # One admin round trip before handing the server over: it proves the admin API answers, and the
            # server installs its SIGTERM handler only after printing the listening line.
            self.health()
        except BaseException:
            self.stop()
            raise
        return self

    def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for raw in iter(self._proc.stdout.readline, b""):
            self._lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
        self._lines.put(None)

    def _listening_line(self, scheme: str, deadline: float) -> str:
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise self._start_error(f"it printed no `listening on {scheme}…` line within "
                                    f"{self.startup_timeout} s") from None
        if line is None:
            assert self._proc is not None
            try:
                code = self._proc.wait(timeout=STOP_STEP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = None
            raise self._start_error(f"it exited with code {code} before listening")
        prefix = f"listening on {scheme}"
        if not line.startswith(prefix):
            raise self._start_error(f"unexpected line on stdout {line!r} (wanted {prefix}HOST:PORT)")
        return line[len("listening on "):].strip()

    def _start_error(self, problem: str) -> FaultlineError:
        return FaultlineError(f"faultline did not start: {problem}\ncommand: {' '.join(self.command)}\n"
                              f"stderr:\n{self.stderr()}")

    def stderr(self) -> str:
        """What the server wrote on stderr so far (its log lines, and why it did not start)."""
        if self._stderr_text is not None:
            return self._stderr_text
        if self._stderr_file is None or self._dir is None:
            return ""
        if not self._stderr_file.closed:
            self._stderr_file.flush()
        return self._read_stderr_file()

    def stop(self) -> Optional[int]:
        """Stops the server (POST /__faultline/shutdown, then SIGTERM, then SIGKILL, STOP_STEP_TIMEOUT_S each)
        and cleans up; returns its exit code (negative: the signal that ended it). Safe to call twice."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            if self.port is not None:
                self._post_shutdown()
            for step in (None, signal.SIGTERM, signal.SIGKILL):
                if step is not None and proc.poll() is None:
                    try:
                        proc.send_signal(step)
                    except ProcessLookupError:
                        pass
                try:
                    proc.wait(timeout=STOP_STEP_TIMEOUT_S)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if proc is not None:
            self.exit_code = proc.poll()
            if self._reader is not None:
                self._reader.join(timeout=STOP_STEP_TIMEOUT_S)
            if proc.stdout is not None and not proc.stdout.closed:
                proc.stdout.close()
        if self._stderr_file is not None and not self._stderr_file.closed:
            self._stderr_file.close()
            self._stderr_text = self._read_stderr_file()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        return self.exit_code

    def _post_shutdown(self) -> None:
        # http.client rather than urllib: urllib sends `Connection: close`, and the server (0.1.0) crashes when it
        # answers POST /__faultline/shutdown on a connection the client asked to close. Any failure here just
        # means the next step (SIGTERM).
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2.0)
        try:
            connection.request("POST", "/__faultline/shutdown", body=b"", headers={"Content-Length": "0"})
            connection.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            connection.close()

    def _read_stderr_file(self) -> str:
        try:
            return (Path(self._dir) / "stderr").read_text(errors="replace") if self._dir else ""
        except OSError:
            return ""

    # -- admin API -----------------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, params: Optional[Mapping[str, Any]] = None, body: Any = None,
              timeout: float = HTTP_TIMEOUT_S):
        """(status, parsed JSON) of /__faultline/<path>; raises FaultlineError when the server cannot be reached."""
        if self.url is None:
            raise FaultlineError("the server is not started")
        url = f"{self.url}/__faultline/{path}{_query(params or {})}"
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data is not None else {})
        try:
            with _opener.open(request, timeout=timeout) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        except (urllib.error.URLError, OSError) as error:
            state = "running" if self.running else f"exited with code {self._proc.poll() if self._proc else None}"
            raise FaultlineError(f"{method} {url}: {error} (the server is {state})") from error
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text.decode("utf-8", "replace")

    def _ok(self, method: str, path: str, **kw) -> Any:
        status, answer = self._call(method, path, **kw)
        if status >= 400:
            raise FaultlineError(f"{method} /__faultline/{path}: {status} {_describe_error(answer)}")
        return answer

    def health(self) -> Dict[str, Any]:
        """GET /__faultline/health: status, version, port, uptimeMs, connections, scenarios, journal counters."""
        return self._ok("GET", "health")

    def requests(self, **filters: Any) -> List[Entry]:
        """Journal entries, oldest first. Filters are the admin API's query parameters: route, method, path,
        status, since, matched, malformed, completed, connection, outcome, limit (booleans as true/false)."""
        return [Entry.from_json(e) for e in self._ok("GET", "requests", params=filters)["requests"]]

    def count(self, **filters: Any) -> int:
        """How many journal entries pass the filters (as for requests())."""
        return self._ok("GET", "requests/count", params=filters)["count"]

    def wait_for(self, count: int, timeout: float = 5.0, **filters: Any) -> List[Entry]:
        """Waits (GET /__faultline/requests/wait) until ``count`` entries pass the filters and returns every entry
        that does; raises TimeoutError with what it saw if that does not happen within ``timeout`` seconds."""
        params = dict(filters, count=count, timeoutMs=int(timeout * 1000))
        answer = self._ok("GET", "requests/wait", params=params, timeout=timeout + HTTP_TIMEOUT_S)
        entries = [Entry.from_json(e) for e in answer["requests"]]
        if not answer["satisfied"]:
            seen = "".join(f"\n  {e.short()}" for e in entries) or " nothing"
            described = ", ".join(f"{k}={_query_value(v)}" for k, v in filters.items()) or "no filter"
            raise TimeoutError(f"waited {timeout} s for {count} journal entries ({described}); "
                               f"saw {answer['count']}:{seen}")
        return entries

    def clear_journal(self) -> int:
        """DELETE /__faultline/requests; returns how many entries were cleared."""
        return self._ok("DELETE", "requests").get("cleared", 0)

    def reset(self, journal: bool = True) -> Dict[str, Any]:
        """Rewinds every script and starts tokens, buckets, idempotency records and counters afresh; with
        ``journal`` (the default) clears the journal too. Responses still pending are cut off."""
        return self._ok("POST", "scenarios/reset", params={"journal": journal})

    def load(self, scenario: Union[ScenarioSource, Iterable[ScenarioSource]], add: bool = False) -> Dict[str, Any]:
        """Loads scenarios in place of the loaded ones (``add=True``: beside them): a dict, a file or folder path,
        or a list of those. Raises FaultlineError listing every problem when they do not load; the scenarios
        already loaded keep serving then."""
        sources = [scenario] if isinstance(scenario, (str, os.PathLike, abc.Mapping)) else list(scenario)
        if all(isinstance(s, abc.Mapping) for s in sources):
            body: Any = [dict(s) for s in sources]
        else:
            if self._dir is None:
                raise FaultlineError("the server is not started")
            body = {"paths": self._scenario_paths(sources)}
        return self._ok("POST", "scenarios", params={"mode": "add" if add else None}, body=body)

    def scenarios_loaded(self) -> List[Dict[str, Any]]:
        """GET /__faultline/scenarios: the loaded scenarios (name, version, description, source, routes)."""
        return self._ok("GET", "scenarios")["scenarios"]

    def report(self, scenario: Optional[str] = None) -> Report:
        """The verdicts of the loaded scenarios' `expect` rules now (or of one scenario)."""
        return Report.from_json(self._ok("GET", "report", params={"scenario": scenario}))

    def assert_verdicts(self, strict: bool = True, scenario: Optional[str] = None) -> Report:
        """Raises AssertionError unless every verdict passed — under ``strict`` (the default), an inconclusive
        verdict, whose situation never happened, fails too. The message has each such verdict's sentence and its
        evidence entries in short. Returns the Report otherwise."""
        report = self.report(scenario)
        bad = [v for v in report.verdicts if v.outcome == "fail" or (strict and v.outcome == "inconclusive")]
        if not bad:
            return report
        raise AssertionError(self._describe_verdicts(report, bad, strict))

    def _describe_verdicts(self, report: Report, bad: List[Verdict], strict: bool) -> str:
        wanted = sorted({s for v in bad for s in v.evidence})
        entries: Dict[int, Entry] = {}
        if wanted:
            try:
                entries = {e.sequence: e for e in self.requests(since=wanted[0] - 1)}
            except FaultlineError:
                pass
        failed, inconclusive = len(report.failing), len(report.inconclusive)
        head = f"faultline: {failed} of {len(report.verdicts)} verdict(s) failed"
        if strict and inconclusive:
            head += f", {inconclusive} inconclusive (strict: inconclusive fails too)"
        lines = [head]
        for verdict in bad:
            lines.append(f"{'FAIL' if verdict.outcome == 'fail' else 'INCONCLUSIVE'}  {verdict.sentence}")
            for sequence in verdict.evidence:
                entry = entries.get(sequence)
                lines.append("    " + (entry.short() if entry else
                                       f"#{sequence} is no longer in the journal (evicted or cleared)"))
        return "\n".join(lines)

    def export(self, path: Union[str, "os.PathLike[str]"], format: str = "html") -> Path:
        """Writes the run (`faultline export --format html|har|ndjson`) to ``path``; returns it."""
        if self.url is None:
            raise FaultlineError("the server is not started")
        binary = self.command[0] if self.command else (self.binary or binary_path())
        done = subprocess.run([binary, "export", "--url", self.url, "--format", format, "--output", os.fspath(path)],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        if done.returncode != 0:
            raise FaultlineError(f"faultline export exited {done.returncode}: {done.stderr.strip()}")
        return Path(path)

    def __repr__(self) -> str:
        return f"<faultline.Server {self.url or 'not started'} pid={self.pid}>"


def _describe_error(answer: Any) -> str:
    if isinstance(answer, dict):
        errors = answer.get("errors")
        if isinstance(errors, list) and errors:
            return "; ".join(str(e.get("description", e)) if isinstance(e, dict) else str(e) for e in errors)
        if "error" in answer:
            return str(answer["error"])
    return json.dumps(answer) if not isinstance(answer, str) else answer
