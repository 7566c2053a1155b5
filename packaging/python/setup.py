"""Only what pyproject.toml cannot say: a wheel that bundles the server binary is a platform wheel.

With src/faultline/bin/faultline present (scripts/dist-wheel.sh puts it there, in a temporary copy of this folder),
the wheel is tagged py3-none-PLATFORM rather than py3-none-any: it runs the binary, not Python extensions, so any
Python 3 will do but only one platform; `auditwheel repair` then narrows linux_x86_64 to the manylinux tag the
binary needs. Without the binary (a source checkout) the wheel stays pure, py3-none-any.
"""
from pathlib import Path

from setuptools import Distribution, setup

BUNDLED = Path(__file__).resolve().parent / "src" / "faultline" / "bin" / "faultline"

options = {}
if BUNDLED.is_file():
    try:
        from setuptools.command.bdist_wheel import bdist_wheel  # setuptools 70.1 or later
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel  # older setuptools: the wheel package's

    class BinaryDistribution(Distribution):
        """Installs into platlib and makes bdist_wheel's root impure, as an extension module would."""

        def has_ext_modules(self):
            return True

    class PlatformWheel(bdist_wheel):
        def get_tag(self):
            _, _, platform = super().get_tag()  # the platform; the interpreter's tags do not matter
            return "py3", "none", platform

    options = {"distclass": BinaryDistribution, "cmdclass": {"bdist_wheel": PlatformWheel}}

setup(**options)
