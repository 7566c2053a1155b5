"""Finding the `faultline` executable."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

#: Where the platform wheel (scripts/dist-wheel.sh) places the server it bundles; the shared libraries it needs are
#: in ``faultline.libs/`` beside the package, found by its RUNPATH. Absent in a source checkout and the pure wheel.
BUNDLED = Path(__file__).resolve().parent / "bin" / "faultline"

# The pytest plugin sets this from `--faultline-binary` while a session runs, so that binary_path() called from a
# test honours the option too.
_pytest_option: Optional[str] = None


class BinaryNotFound(FileNotFoundError):
    """No faultline executable was found; the message names every place looked in."""


def _executable(path) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _bundled() -> Optional[str]:
    """The bundled binary, made executable if an installer dropped the mode the wheel stores (pip keeps it)."""
    if not BUNDLED.is_file():
        return None
    if not os.access(BUNDLED, os.X_OK):
        try:
            mode = BUNDLED.stat().st_mode
            BUNDLED.chmod(mode | ((mode & 0o444) >> 2))  # x wherever r
        except OSError:
            return None
    return str(BUNDLED) if os.access(BUNDLED, os.X_OK) else None


def _bundled_state() -> str:
    if not BUNDLED.exists():
        return "absent"
    return "present" if os.access(BUNDLED, os.X_OK) else "present but not executable"


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
            f"  3. the binary bundled in the package: {BUNDLED} ({_bundled_state()})\n"
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
    bundled = _bundled()
    if bundled:
        return bundled
    if on_path:
        return on_path
    raise BinaryNotFound(places("no faultline executable found"))
