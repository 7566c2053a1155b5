"""Finding the `faultline` executable."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

#: Where a wheel that bundles the server places it. Absent in a source checkout and in the pure-Python wheel.
BUNDLED = Path(__file__).resolve().parent / "bin" / "faultline"

# The pytest plugin sets this from `--faultline-binary` while a session runs, so that binary_path() called from a
# test honours the option too.
_pytest_option: Optional[str] = None


class BinaryNotFound(FileNotFoundError):
    """No faultline executable was found; the message names every place looked in."""


def _executable(path) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def binary_path(option: Optional[str] = None) -> str:
    """The faultline executable, the first of:

    1. ``option`` (the pytest option ``--faultline-binary PATH``; inside a pytest session it defaults to it),
    2. the environment's ``$FAULTLINE_BIN``,
    3. a binary bundled in this package (``faultline/bin/faultline``),
    4. ``faultline`` on ``PATH``.

    A path given by 1 or 2 that is not an executable file is an error, rather than a reason to use another binary.
    Raises BinaryNotFound, naming all four, when none gives one.
    """
    if option is None:
        option = _pytest_option
    env = os.environ.get("FAULTLINE_BIN") or None
    on_path = shutil.which("faultline")

    def places(problem):
        return (
            f"{problem}; looked in, in order:\n"
            f"  1. --faultline-binary: {option if option else 'not given'}\n"
            f"  2. $FAULTLINE_BIN: {env if env else 'not set'}\n"
            f"  3. the binary bundled in the package: {BUNDLED} ({'present' if BUNDLED.exists() else 'absent'})\n"
            f"  4. faultline on PATH: {on_path if on_path else 'not found'}\n"
            "Install a faultline binary (`make install` in the Faultline repository) or point FAULTLINE_BIN at one."
        )

    if option:
        if _executable(option):
            return os.path.abspath(option)
        raise BinaryNotFound(places(f"--faultline-binary {option} is not an executable file"))
    if env:
        if _executable(env):
            return os.path.abspath(env)
        raise BinaryNotFound(places(f"$FAULTLINE_BIN={env} is not an executable file"))
    if _executable(BUNDLED):
        return str(BUNDLED)
    if on_path:
        return on_path
    raise BinaryNotFound(places("no faultline executable found"))
