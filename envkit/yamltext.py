"""Parse YAML (or JSON) text safely, with the C loader where PyYAML has one. Errors say where the problem is."""

from __future__ import annotations

from typing import Any


def parse_yaml(text: str) -> Any:
    """The data in ``text``; ValueError("<problem> at line L, column C") when it is not valid YAML."""
    import yaml  # lazy: commands that read no file do not pay for it

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "syntax error"
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{problem}{at}") from None
