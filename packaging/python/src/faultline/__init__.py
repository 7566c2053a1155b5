"""Faultline from Python: start a fault-injecting stub HTTP server, point the client under test at it, then read
the journal and the verdicts.

    import faultline, urllib.request

    with faultline.Server(scenarios=["scenarios/flaky-catalogue.json"]) as server:
        urllib.request.urlopen(server.url + "/v1/products/1")
        server.assert_verdicts()

Under pytest, the plugin (registered by this package's `pytest11` entry point) gives the `faultline` fixture.
"""
from ._binary import BUNDLED, BinaryNotFound, binary_path
from ._server import FaultlineError, Server
from ._types import Entry, Report, Verdict
from ._version import __version__

__all__ = ["BUNDLED", "BinaryNotFound", "Entry", "FaultlineError", "Report", "Server", "Verdict", "__version__",
           "binary_path"]
