"""Every ``--json`` output the test suite produces, checked against its JSON Schema in schemas/.

envkit writes a copy of each JSON output it prints into ``$_ENVKIT_TEST_JSON_DIR`` (envkit.commands.output
keep_json_for_tests), one ``*.out`` file each: the command that printed it on its first line, then the output. The
suite sets that directory for itself and every envkit it
starts (tests/conftest.py), and at its end checks each output: one object, ``schema_version`` first and equal to
envkit's, valid against ``schemas/<command>.schema.json`` (``envkit manifests check`` -> manifests-check). A command
whose output has no schema is a failure too: a new output needs its schema.
"""

from __future__ import annotations

import json
from pathlib import Path

SCHEMAS = Path(__file__).resolve().parent.parent.parent / "schemas"
VARIABLE = "_ENVKIT_TEST_JSON_DIR"


def schema_path(command: str) -> Path:
    """The schema of a command's output: ``envkit manifests check`` -> schemas/manifests-check.schema.json."""
    words = command.split()[1:] or ["envkit"]
    return SCHEMAS / f"{'-'.join(words)}.schema.json"


def problems(directory: Path) -> tuple[int, list[str]]:
    """How many outputs were checked, and what is wrong with them (one line each, the same problem once)."""
    import jsonschema

    from envkit.text.jsonout import SCHEMA_VERSION

    found: dict[str, None] = {}
    validators: dict[Path, object] = {}
    checked = 0
    for kept in sorted(directory.glob("*.out")):
        command, _, text = kept.read_text(encoding="utf-8").partition("\n")
        output = json.loads(text)
        checked += 1
        if not isinstance(output, dict) or next(iter(output), None) != "schema_version":
            found[f"{command}: the output is not an object whose first key is schema_version"] = None
            continue
        if output["schema_version"] != SCHEMA_VERSION:
            found[f"{command}: schema_version {output['schema_version']!r}, envkit's is {SCHEMA_VERSION}"] = None
        path = schema_path(command)
        if not path.exists():
            found[f"{command}: no schema for its output ({path.relative_to(SCHEMAS.parent)})"] = None
            continue
        if path not in validators:
            schema = json.loads(path.read_text(encoding="utf-8"))
            jsonschema.Draft202012Validator.check_schema(schema)
            validators[path] = jsonschema.Draft202012Validator(schema)
        for error in validators[path].iter_errors(output):  # type: ignore[attr-defined]
            where = "/".join(str(part) for part in error.absolute_path) or "(top)"
            found[f"{command}: {where}: {error.message[:300]}"] = None
    return checked, list(found)
