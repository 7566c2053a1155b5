"""The pytest plugin (entry point `pytest11`: faultline = "faultline.pytest_plugin").

Fixtures:
  faultline          a Server for one test (its scenarios: the `faultline` marker's, else `faultline_scenarios`)
  faultline_session  one Server for the whole session (scenarios: `faultline_scenarios`)

Marker: @pytest.mark.faultline("scenarios/flaky.json", "more/", args=["--max-journal", "100"]); paths are relative
to the test file's folder. Ini option: faultline_scenarios = paths relative to the rootdir. Options:
--faultline-binary PATH, --faultline-report DIR (each failing test's HTML report, `faultline export --format html`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from . import _binary
from ._server import Server

_REPORT_KEY = "_faultline_reports"


def pytest_addoption(parser):
    group = parser.getgroup("faultline", "Faultline stub server")
    group.addoption("--faultline-binary", action="store", default=None, metavar="PATH",
                    help="the faultline executable (else $FAULTLINE_BIN, the bundled binary, faultline on PATH)")
    group.addoption("--faultline-report", action="store", default=None, metavar="DIR",
                    help="write each failing test's Faultline HTML report (faultline export --format html) to DIR")
    parser.addini("faultline_scenarios", type="args", default=[],
                  help="scenario files or folders for the faultline fixtures, relative to the rootdir")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "faultline(*paths, args=[...]): the scenario files or folders (relative to the test file's folder) and extra "
        "`faultline serve` arguments for the `faultline` fixture")
    _binary._pytest_option = config.getoption("faultline_binary")


def pytest_unconfigure(config):
    _binary._pytest_option = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"_faultline_rep_{report.when}", report)


def _ini_scenarios(config) -> List[str]:
    return [str(Path(config.rootpath if hasattr(config, "rootpath") else config.rootdir) / p)
            for p in config.getini("faultline_scenarios")]


def _test_folder(request) -> Path:
    path = getattr(request, "path", None)  # pytest >= 7
    return (Path(path) if path is not None else Path(str(request.fspath))).parent


def _binary_for(config) -> str:
    return _binary.binary_path(config.getoption("faultline_binary"))


def _write_report_if_failed(request, server: Server) -> None:
    folder = request.config.getoption("faultline_report")
    if not folder:
        return
    failed = any(getattr(getattr(request.node, f"_faultline_rep_{when}", None), "failed", False)
                 for when in ("setup", "call"))
    if not failed or not server.running:
        return
    os.makedirs(folder, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_") + ".html"
    try:
        server.export(Path(folder) / name, format="html")
    except Exception as error:  # noqa: BLE001 — a report that cannot be written must not hide the test's failure
        request.node.warn(pytest.PytestWarning(f"faultline: could not write the HTML report: {error}"))


@pytest.fixture
def faultline(request) -> Iterator[Server]:
    """A `faultline serve` for this test alone on a free port, stopped when the test ends however it ends.

    Scenarios: the closest `@pytest.mark.faultline(paths…, args=[…])` marker's (paths relative to the test file's
    folder), else the `faultline_scenarios` ini option's (relative to the rootdir), else the binary's default
    (./scenarios)."""
    marker = request.node.get_closest_marker("faultline")
    args: List[str] = []
    if marker is not None and (marker.args or "scenarios" in marker.kwargs):
        folder = _test_folder(request)
        paths = list(marker.args) + list(marker.kwargs.get("scenarios", []))
        scenarios: list = [p if isinstance(p, dict) else str(folder / p) for p in paths]
    else:
        scenarios = _ini_scenarios(request.config)
    if marker is not None:
        args = [str(a) for a in marker.kwargs.get("args", [])]
        unknown = set(marker.kwargs) - {"args", "scenarios", "tls"}
        if unknown:
            raise pytest.UsageError(f"@pytest.mark.faultline: unknown argument(s) {sorted(unknown)}; "
                                    "takes paths, scenarios=[…], args=[…], tls=True")
    tls = bool(marker.kwargs.get("tls", False)) if marker is not None else False
    with Server(scenarios=scenarios, args=args, binary=_binary_for(request.config), tls=tls) as server:
        yield server
        _write_report_if_failed(request, server)


@pytest.fixture(scope="session")
def faultline_session(request) -> Iterator[Server]:
    """One `faultline serve` for the whole session (scenarios: the `faultline_scenarios` ini option's). Tests
    share its journal and scripts: call `faultline_session.reset()` where a test needs a fresh start."""
    with Server(scenarios=_ini_scenarios(request.config), binary=_binary_for(request.config)) as server:
        yield server
