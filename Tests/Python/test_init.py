"""`faultline init`: the starter folder it writes loads, and each sample test it writes runs and passes.

The Swift sample cannot be built here cheaply (a scratch package resolving this checkout), so the same text is
Tests/FaultlineTests/InitSample/InitSampleTests.swift with its scenarios/example.json, which `swift test` compiles
and runs; these tests check that `init --swift` writes those two files byte for byte."""

import json
import os
import stat
import subprocess
import sys

import jsonschema

from conftest import REPO_ROOT, SCENARIOS_DIR, faultline_binary

SWIFT_SAMPLE = REPO_ROOT / "Tests" / "FaultlineTests" / "InitSample"
WRITTEN = ["scenarios/faultline.schema.json", "scenarios/example.json", "test_faultline_example.py",
           "faultline-example.sh", "FaultlineExampleTests.swift"]


def init(*args, cwd=None):
    return subprocess.run([faultline_binary(), "init", *map(str, args)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=30, cwd=cwd)


def test_init_writes_the_starter_folder_and_every_sample(tmp_path):
    project = tmp_path / "project"
    result = init(project, "--pytest", "--shell", "--swift")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[:len(WRITTEN)] == [f"wrote {project}/{name}" for name in WRITTEN]
    assert f"  faultline serve {project}/scenarios --port 8080" in result.stdout
    assert f"  python3 -m pytest {project}/test_faultline_example.py" in result.stdout
    assert f"  {project}/faultline-example.sh" in result.stdout
    assert '.product(name: "Faultline", package: "faultline")' in result.stdout
    assert ".package(path: " in result.stdout

    assert (project / "scenarios" / "faultline.schema.json").read_bytes() == \
        (SCENARIOS_DIR / "faultline.schema.json").read_bytes()
    example = json.loads((project / "scenarios" / "example.json").read_text())
    assert list(example)[0] == "$schema" and example["$schema"] == "./faultline.schema.json"
    jsonschema.validate(example, json.loads((SCENARIOS_DIR / "faultline.schema.json").read_text()))
    route = example["routes"][0]
    assert route["match"] == {"method": "GET", "path": "/v1/items/{id}"}
    assert route["responses"][0]["status"] == 429 and route["responses"][0]["times"] == 2
    assert route["responses"][0]["headers"] == {"Retry-After": "1"}
    assert route["responses"][1]["status"] == 200 and "{{path.id}}" in json.dumps(route["responses"][1])
    assert example["expect"]["honorsRetryAfter"] is True and "noRetryOn4xx" not in example["expect"]
    assert stat.S_IMODE((project / "faultline-example.sh").stat().st_mode) == 0o755

    # The Swift sample is the one `swift test` runs, byte for byte, and so is its scenario.
    assert (project / "FaultlineExampleTests.swift").read_bytes() == (SWIFT_SAMPLE / "InitSampleTests.swift").read_bytes()
    assert (project / "scenarios" / "example.json").read_bytes() == \
        (SWIFT_SAMPLE / "scenarios" / "example.json").read_bytes()

    validated = subprocess.run([faultline_binary(), "validate", project / "scenarios"], capture_output=True, text=True,
                               timeout=30)
    assert validated.returncode == 0, validated.stderr
    assert validated.stdout == "ok: 1 scenario(s), 1 route(s)\n"


def test_the_written_pytest_sample_passes(tmp_path):
    assert init(tmp_path, "--pytest").returncode == 0
    env = {**os.environ, "FAULTLINE_BIN": faultline_binary()}
    # Run from elsewhere: the sample finds its scenarios next to itself.
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
                          str(tmp_path / "test_faultline_example.py")],
                         capture_output=True, text=True, timeout=120, env=env, cwd="/")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout, run.stdout


def test_the_written_shell_sample_passes(tmp_path):
    assert init(tmp_path, "--shell").returncode == 0
    env = {**os.environ, "FAULTLINE_BIN": faultline_binary()}
    run = subprocess.run([str(tmp_path / "faultline-example.sh")], capture_output=True, text=True, timeout=120,
                         env=env, cwd="/")
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'GET /v1/items/42: 200 {"id":"42","name":"Item 42"}' in run.stdout, run.stdout
    assert "PASS  example/honorsRetryAfter:" in run.stdout, run.stdout
    assert not list(tmp_path.glob("tmp*")), "the script cleans up after itself"


def test_init_refuses_to_overwrite_unless_forced(tmp_path):
    assert init(tmp_path).returncode == 0
    example = tmp_path / "scenarios" / "example.json"
    example.write_text("{}")
    refused = init(tmp_path, "--pytest")
    assert refused.returncode == 1
    assert refused.stdout == ""
    # The schema is as init writes it, so it is kept; the edited example blocks the whole run.
    assert refused.stderr == (f"faultline: init: {example} exists already with other contents; "
                              "not overwriting (give --force to overwrite)\n")
    assert example.read_text() == "{}", "nothing is written when one file exists"
    assert not (tmp_path / "test_faultline_example.py").exists()

    forced = init(tmp_path, "--pytest", "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"wrote {example}" in forced.stdout.splitlines()
    assert example.read_bytes() == (SWIFT_SAMPLE / "scenarios" / "example.json").read_bytes()
    assert (tmp_path / "test_faultline_example.py").exists()


def test_init_again_keeps_unchanged_files_and_adds_a_sample(tmp_path):
    # `faultline init`, then `faultline init --shell` as the README's reader would: no --force needed, and an
    # unchanged example is kept rather than rewritten.
    assert init(cwd=tmp_path).returncode == 0
    example = tmp_path / "scenarios" / "example.json"
    before = example.stat().st_mtime_ns
    again = init("--shell", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:3] == ["kept scenarios/faultline.schema.json (unchanged)",
                                             "kept scenarios/example.json (unchanged)", "wrote faultline-example.sh"]
    assert example.stat().st_mtime_ns == before
    assert os.access(tmp_path / "faultline-example.sh", os.X_OK)


def test_init_defaults_to_the_current_folder(tmp_path):
    result = init(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["wrote scenarios/faultline.schema.json", "wrote scenarios/example.json"]
    assert "  faultline serve scenarios --port 8080" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scenarios"]


def test_init_help_and_usage_errors(run_cli):
    help_ = run_cli("init", "--help")
    assert help_.returncode == 0, help_.stderr
    assert help_.stdout.startswith("faultline init [DIR] [--pytest] [--shell] [--swift] [--force]\n")
    for option in ("--pytest", "--shell", "--swift", "--force"):
        assert f"\n  {option} " in help_.stdout, option
    assert run_cli("help", "init").stdout == help_.stdout
    assert "faultline init [DIR]" in run_cli("--help").stdout
    typo = run_cli("init", "--pytset")
    assert typo.returncode == 64
    assert "init: unknown option --pytset; did you mean --pytest?" in typo.stderr
    assert 'did you mean "init"?' in run_cli("inti").stderr
    two = run_cli("init", "a", "b")
    assert two.returncode == 64 and 'init: give one folder, got "a" and "b"' in two.stderr
