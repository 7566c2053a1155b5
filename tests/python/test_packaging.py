"""Packaging: another Swift package can depend on Faultline by version tag, which SwiftPM refuses while any
target uses unsafe flags."""
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_package_swift_has_no_unsafe_flags():
    assert "unsafeFlags" not in (ROOT / "Package.swift").read_text()


def test_a_package_resolves_faultline_by_version_tag():
    result = subprocess.run([str(ROOT / "scripts" / "check-tag-dependency.sh")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "resolves Faultline 9.9.9 by version" in result.stdout
