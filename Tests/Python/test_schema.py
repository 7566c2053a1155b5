"""The JSON Schema for scenario files (scenarios/faultline.schema.json) against the bundled scenarios, the
2020-12 meta-schema and the Swift loader.

The loader is the source of truth. The schema must accept what the loader accepts (the bundled scenarios and
Tests/Fixtures/valid-scenarios) and reject what it rejects (Tests/Fixtures/invalid-scenarios), with the loader's
error naming a JSON path that a jsonschema error names too.
"""

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIOS_DIR = REPO_ROOT / "scenarios"
SCHEMA_PATH = SCENARIOS_DIR / "faultline.schema.json"
FIXTURES_DIR = REPO_ROOT / "Tests" / "Fixtures"
SOURCES_DIR = REPO_ROOT / "Sources" / "FaultlineCore"

BUNDLED = sorted(p for p in SCENARIOS_DIR.glob("*.json") if not p.name.endswith(".schema.json"))
INVALID = sorted((FIXTURES_DIR / "invalid-scenarios").glob("*.json"))
VALID = sorted((FIXTURES_DIR / "valid-scenarios").glob("*.json"))


@pytest.fixture(scope="module")
def schema():
    return json.loads(SCHEMA_PATH.read_text())


@pytest.fixture(scope="module")
def validator(schema):
    return Draft202012Validator(schema)


def schema_for(document_path, document):
    """The file the document's `$schema` names, resolved against the document's folder."""
    reference = document.get("$schema")
    assert isinstance(reference, str), f"{document_path.name} has no \"$schema\""
    resolved = (document_path.parent / reference).resolve()
    assert resolved == SCHEMA_PATH.resolve(), f"{document_path.name}: \"$schema\" {reference!r} is not the schema"
    return json.loads(resolved.read_text())


# -- JSON paths --------------------------------------------------------------------------------------------

PLAIN_KEY = re.compile(r"[A-Za-z0-9_$-]+")
# A loader path at the start of a message: `routes[0].responses[1].status`, `headers["X Test"]`; then ": ".
LOADER_PATH = re.compile(
    r'^((?:[A-Za-z0-9_$-]+|\[\d+\]|\["(?:[^"\\]|\\.)*"\])(?:\.[A-Za-z0-9_$-]+|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*): ')


def loader_path(parts):
    """A jsonschema path (keys and indices) in the loader's format: `a.b[0]`, `a["not plain"]`."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif PLAIN_KEY.fullmatch(part):
            text = f"{text}.{part}" if text else part
        else:
            text += f"[{json.dumps(part, ensure_ascii=False)}]"
    return text


def schema_error_paths(validator, document):
    """The loader-format paths of every jsonschema error, nested ones (anyOf, oneOf) included.

    Errors on an object's keys (additionalProperties) name the object, as the loader does. propertyNames
    errors name the object too; the loader names the key, so those also give the object's path plus the key.
    """
    paths = set()

    def collect(error):
        parts = list(error.absolute_path)
        paths.add(loader_path(parts))
        if "propertyNames" in error.absolute_schema_path and isinstance(error.instance, str):
            paths.add(loader_path(parts + [error.instance]))
        for child in error.context or ():
            collect(child)

    errors = list(validator.iter_errors(document))
    for error in errors:
        collect(error)
    return errors, paths


def loader_error_paths(stderr, file):
    """The JSON paths of the loader's `FILE: PATH: message` lines ("" for `FILE: message`)."""
    prefix = f"{file}: "
    paths = []
    for line in stderr.splitlines():
        if line.startswith(prefix):
            match = LOADER_PATH.match(line[len(prefix):])
            paths.append(match.group(1) if match else "")
    return paths


def test_loader_path_format():
    assert loader_path([]) == ""
    assert loader_path(["routes", 0, "responses", 1, "status"]) == "routes[0].responses[1].status"
    assert loader_path(["routes", 0, "responses", 0, "headers", "X Test"]) == 'routes[0].responses[0].headers["X Test"]'
    assert loader_path(["$schema"]) == "$schema"
    assert loader_error_paths('f.json: missing required key "routes"\nf.json: a.b[2]: bad\n', "f.json") == ["", "a.b[2]"]


# -- the schema itself -------------------------------------------------------------------------------------


def test_schema_is_valid_against_the_2020_12_meta_schema(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def test_every_property_has_a_title_and_a_description(schema):
    def resolve(node):
        while isinstance(node, dict) and "$ref" in node and "title" not in node:
            node = schema["$defs"][node["$ref"].removeprefix("#/$defs/")]
        return node

    missing = []

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.get("properties", {}).items():
                target = resolve(value)
                if not (target.get("title") and target.get("description")):
                    missing.append(f"{where}/properties/{key}")
            for key, value in node.items():
                if key != "if":  # conditions, not shown to users
                    walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    walk(schema, "#")
    assert not missing, f"properties without title or description: {missing}"


def swift_enum_raw_values(file, name):
    """The raw values of `enum NAME: String` in a Swift file: `case x = "y"` gives y, a bare `case x` gives x."""
    source = (SOURCES_DIR / file).read_text()
    start = source.index(f"enum {name}: String")
    body = source[source.index("{", start) + 1:source.index("\n}", start)]
    return [raw or bare for bare, raw in re.findall(r'^\s*case (\w+)(?: = "([^"]+)")?\s*$', body, re.MULTILINE)]


@pytest.mark.parametrize("file, enum, schema_path", [
    ("Scenario/FaultName.swift", "FaultName", ["$defs", "faultName", "enum"]),
    ("Scenario/Scenario.swift", "AfterLast", ["$defs", "route", "properties", "afterLast", "enum"]),
    ("Scenario/Scenario.swift", "HalfCloseAfter", ["$defs", "faultObject", "properties", "after", "enum"]),
    ("Scenario/Scenario.swift", "ChunkBreak", ["$defs", "faultObject", "properties", "variant", "enum"]),
    ("Policy/RateLimiter.swift", "RateLimitAlgorithm", ["$defs", "rateLimit", "properties", "algorithm", "enum"]),
    ("Policy/RateLimiter.swift", "RetryAfterFormat", ["$defs", "rateLimit", "properties", "retryAfter", "enum"]),
])
def test_schema_enums_match_the_swift_enums(schema, file, enum, schema_path):
    node = schema
    for key in schema_path:
        node = node[key]
    assert node == swift_enum_raw_values(file, enum)


def test_schema_step_keys_match_the_loader(schema):
    source = (SOURCES_DIR / "Scenario" / "ScenarioLoader+Responses.swift").read_text()
    listed = re.search(r"static let stepKeys = \[(.*?)\]", source, re.DOTALL).group(1)
    assert list(schema["$defs"]["step"]["properties"]) == re.findall(r'"([^"]+)"', listed)


# -- bundled scenarios and valid fixtures ---------------------------------------------------------------------


def test_there_are_bundled_scenarios_and_fixtures():
    assert len(BUNDLED) >= 10
    assert len(INVALID) >= 12
    assert VALID


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_scenario_validates_against_the_schema(path):
    assert path.read_text().startswith('{\n  "$schema": "./faultline.schema.json",\n'), \
        "\"$schema\" is the first key of every bundled scenario"
    document = json.loads(path.read_text())
    errors = sorted(Draft202012Validator(schema_for(path, document)).iter_errors(document), key=str)
    assert not errors, "\n".join(f"{loader_path(e.absolute_path)}: {e.message}" for e in errors)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_fixture_is_accepted_by_schema_and_loader(path, run_cli):
    document = json.loads(path.read_text())
    errors = list(Draft202012Validator(schema_for(path, document)).iter_errors(document))
    assert not errors, "\n".join(f"{loader_path(e.absolute_path)}: {e.message}" for e in errors)
    result = run_cli("validate", path)
    assert result.returncode == 0, result.stderr


# -- invalid fixtures: rejected by both, at the same JSON path ----------------------------------------------


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_fixture_is_rejected_by_schema_and_loader_at_the_same_path(path, validator, run_cli):
    document = json.loads(path.read_text())
    errors, schema_paths = schema_error_paths(validator, document)
    assert errors, f"the schema accepts {path.name}"

    result = run_cli("validate", path)
    assert result.returncode == 1, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    reported = loader_error_paths(result.stderr, str(path))
    assert reported, f"no `{path}: …` line on stderr:\n{result.stderr}"
    for reported_path in reported:
        assert reported_path in schema_paths, (
            f"the loader reports {reported_path!r}; jsonschema's errors are at {sorted(schema_paths)}\n"
            f"loader:\n{result.stderr}\njsonschema:\n" + "\n".join(e.message for e in errors))
