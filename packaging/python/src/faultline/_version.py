# The package's version: the same as the Swift side's `Faultline.version` (Sources/Faultline/Server/FaultlineServer.swift),
# which `faultline --version` prints. Tests/Python/test_python_package.py fails when the two disagree; to bump
# both, edit the Swift constant and run `python3 packaging/python/sync_version.py`.
__version__ = "0.1.0"
