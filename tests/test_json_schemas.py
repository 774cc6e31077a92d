"""The JSON Schemas of envkit's --json outputs (schemas/) and the check that holds every output the suite produces
to them (tests/support/json_outputs.py, run at the end of every session by tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from support.json_outputs import SCHEMAS, problems, schema_path
from tests.test_readme import envkit_command


def commands_with_json(command=None, path=("envkit",)):
    command = command or envkit_command()
    if any("--json" in getattr(param, "opts", ()) for param in command.params):
        yield " ".join(path)
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands_with_json(sub, (*path, name))


@pytest.mark.parametrize("command", sorted(set(commands_with_json())))
def test_every_command_that_prints_json_has_its_schema(command):
    path = schema_path(command)
    assert path.exists(), f"{command} --json has no schema: write {path.relative_to(SCHEMAS.parent)}"


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.schema.json")), ids=lambda p: p.name)
def test_each_schema_is_a_valid_schema_that_says_what_it_describes(path):
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["title"].endswith("--json") and len(schema["description"]) > 40
    assert schema["properties"]["schema_version"] == {"const": 1} and "schema_version" in schema["required"]


def keep(directory: Path, command: str, output: object) -> None:
    """As envkit.commands.output.keep_json_for_tests keeps one."""
    (directory / f"{len(list(directory.iterdir())):03d}.out").write_text(f"{command}\n{json.dumps(output)}")


def test_the_check_finds_what_is_wrong_with_an_output(tmp_path):
    good = {"schema_version": 1, "manifests": [], "machines": []}
    keep(tmp_path, "envkit list", good)
    assert problems(tmp_path) == (1, [])
    keep(tmp_path, "envkit list", {"manifests": [], "machines": [], "schema_version": 1})  # not first
    keep(tmp_path, "envkit list", [good])  # not an object
    keep(tmp_path, "envkit list", {**good, "schema_version": 2})
    keep(tmp_path, "envkit list", {**good, "manifests": "torch"})
    keep(tmp_path, "envkit list", {"schema_version": 1, "machines": []})
    keep(tmp_path, "envkit frobnicate", {"schema_version": 1})
    checked, found = problems(tmp_path)
    assert checked == 7
    assert found == [
        "envkit list: the output is not an object whose first key is schema_version",
        "envkit list: schema_version 2, envkit's is 1",
        "envkit list: schema_version: 1 was expected",
        "envkit list: manifests: 'torch' is not of type 'array'",
        "envkit list: (top): 'manifests' is a required property",
        "envkit frobnicate: no schema for its output (schemas/frobnicate.schema.json)",
    ]
