"""The generated reference pages (docs/reference/, scripts/gen-reference.py) against the program they describe.

--check regenerates every page in memory from the schema, the OpenAPI document and the binary's --help; a committed
page that differs fails it with a diff. The other tests prove the generator drops nothing: every schema property,
every OpenAPI query parameter and every long option `faultline --help` lists appears on its page.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import faultline_binary

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "gen-reference.py"
DOCS = REPO_ROOT / "docs" / "reference"


def run_generator(*arguments):
    environment = dict(os.environ, FAULTLINE_BIN=faultline_binary())
    return subprocess.run([sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True,
                          env=environment, cwd=REPO_ROOT, timeout=120)


def test_committed_pages_match_the_program():
    result = run_generator("--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_stale_page_fails_check_with_a_diff(tmp_path):
    copy = tmp_path / "reference"
    shutil.copytree(DOCS, copy)
    page = copy / "admin-api.md"
    page.write_text(page.read_text().replace("Journal entries, oldest first", "Journal entries, newest first", 1))
    result = run_generator("--check", "--docs", str(copy))
    assert result.returncode == 1
    assert "-| [`GET`](#get-__faultlinerequests) | `/__faultline/requests` | Journal entries, newest first |" in result.stdout
    assert "+| [`GET`](#get-__faultlinerequests) | `/__faultline/requests` | Journal entries, oldest first |" in result.stdout
    assert "python3 scripts/gen-reference.py" in result.stderr


def test_every_query_parameter_is_on_the_admin_page():
    document = json.loads((REPO_ROOT / "Sources" / "Faultline" / "Resources" / "openapi.json").read_text())
    page = (DOCS / "admin-api.md").read_text()
    names = {parameter["name"] for parameter in document["components"]["parameters"].values()}
    for item in document["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                if "name" in parameter:
                    names.add(parameter["name"])
    missing = [name for name in sorted(names) if f"| `{name}` |" not in page]
    assert not missing, f"parameters missing from admin-api.md: {missing}"
    for path, item in document["paths"].items():
        for method in item:
            assert f"## `{method.upper()} {path}`" in page


def test_every_long_option_is_on_the_cli_page():
    usage = subprocess.run([faultline_binary(), "--help"], capture_output=True, text=True, check=True).stdout
    options = set(re.findall(r"--[a-z][a-z0-9-]*", usage))
    assert "--port" in options
    page = (DOCS / "cli.md").read_text()
    missing = sorted(option for option in options if not re.search(re.escape(option) + r"\b", page))
    assert not missing, f"options missing from cli.md: {missing}"
    commands = re.findall(r"^  faultline ([a-z][a-z0-9-]*)", usage, re.MULTILINE)
    for command in commands:
        assert f"## faultline {command}" in page


def test_every_schema_property_is_on_the_fields_page():
    schema = json.loads((REPO_ROOT / "scenarios" / "faultline.schema.json").read_text())
    page = (DOCS / "scenario-fields.md").read_text()
    names = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    names.update(value)
                    for sub in value.values():
                        walk(sub)
                elif key not in ("if",):
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    missing = sorted(name for name in names
                     if not re.search(r"[`.]" + re.escape(name) + r"[`]", page.replace("<code>", "`")))
    assert not missing, f"schema properties missing from scenario-fields.md: {missing}"
