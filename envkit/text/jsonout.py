"""The version of every ``--json`` output: its top-level ``"schema_version"``.

Every command that prints JSON prints one object whose first key is ``"schema_version"``: an integer that changes
only when a script reading an earlier output could misread this one (a key removed or renamed, a value whose type or
meaning changes); new keys do not change it. The JSON Schema of each output lives in the repository's ``schemas/``,
one file per command (docs/json.md), and the tests check every output they produce against it.

envkit reads some of its outputs back (`envkit detect --json` as a machine profile): there a ``schema_version``
envkit knows is accepted and a newer one is refused with the reason.
"""

from __future__ import annotations

from typing import Any, Optional

SCHEMA_VERSION = 1
KEY = "schema_version"


def versioned(data: Any) -> Any:
    """``data`` with ``"schema_version"`` first when it is an object that lacks it; anything else as it is."""
    if isinstance(data, dict) and KEY not in data:
        return {KEY: SCHEMA_VERSION, **data}
    return data


def version_problem(value: Any) -> Optional[str]:
    """Why a ``schema_version`` read back cannot be taken, or None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"{KEY}: expected a whole number from 1, got {value!r}"
    if value > SCHEMA_VERSION:
        return (f"{KEY} {value} is newer than this envkit's ({SCHEMA_VERSION}): it was written by a newer envkit; "
                "upgrade envkit here")
    return None
