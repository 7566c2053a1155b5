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


def test_no_two_paths_differ_only_in_case(tmp_path):
    check = ROOT / "scripts" / "check-case-clashes.sh"
    assert subprocess.run([str(check)], capture_output=True, text=True).returncode == 0
    # The check fails on the tree as it was (Sources/Faultline beside Sources/faultline, Tests beside tests).
    clash = tmp_path / "clash"
    for path in ["Sources/Faultline/a.swift", "Sources/faultline/main.swift", "Tests/x.swift", "tests/y.py"]:
        (clash / path).parent.mkdir(parents=True, exist_ok=True)
        (clash / path).write_text("")
    subprocess.run(["git", "init", "-q", str(clash)], check=True)
    subprocess.run(["git", "-C", str(clash), "add", "."], check=True)
    result = subprocess.run([str(check), str(clash)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "Sources/Faultline <> Sources/faultline" in result.stderr and "Tests <> tests" in result.stderr
