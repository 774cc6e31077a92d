"""Words for messages: a count with its noun ("1 node", "24 nodes"), a value a file gave where another was wanted.
Pure; the standard library only."""

from typing import Any, Mapping, Optional


def counted(number: int, one: str, many: Optional[str] = None) -> str:
    """``number`` and its noun, singular for exactly one: ``counted(3, "node")`` is "3 nodes";
    ``counted(2, "channel query", "channel queries")`` for a plural that is not the noun and an s."""
    return f"{number} {one if number == 1 else many or one + 's'}"


def described(value: Any) -> str:
    """What a file gave, in words fit for "..., not {}" or "got {}": "nothing (null)", "true", "empty text",
    "'abc'", "the number 12", "a list [...]", "a mapping {...}" (the value shortened)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "empty text" if not value.strip() else repr(value)
    import json  # (only for an error)

    kind = ("the number" if isinstance(value, (int, float)) else "a list" if isinstance(value, list)
            else "a mapping" if isinstance(value, Mapping) else type(value).__name__)
    return f"{kind} {json.dumps(value, default=str)[:60]}"
