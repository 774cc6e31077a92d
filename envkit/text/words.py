"""Words for messages: a count with its noun ("1 node", "24 nodes"), a value a file gave where another was wanted,
the nearest name to a typo, a size in bytes in decimal units. Pure; the standard library only."""

from typing import Any, Mapping, Optional, Sequence


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


def closest(name: str, choices: Sequence[str]) -> list[str]:
    """The ``choices`` nearest to ``name`` (a typo of one of them), nearest only and in their order: ``torhc`` ->
    ``["torch"]``, ``lsit`` -> ``["list"]`` (not ``site``). Near is at most two edits, or a third of the name's
    length for a long one, an edit being a letter added, dropped, changed, or two neighbours swapped; none is
    near: empty."""
    limit = max(2, len(name) // 3)
    distances = {choice: _edits(name.lower(), choice.lower()) for choice in dict.fromkeys(choices)}
    best = min(distances.values(), default=limit + 1)
    return [choice for choice, distance in distances.items() if distance == best <= limit and choice != name]


def _edits(a: str, b: str) -> int:
    """The optimal string alignment distance: insertions, deletions, substitutions and adjacent transpositions."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, other in enumerate(b, 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (char != other))
            if i > 1 and j > 1 and char == b[j - 2] and a[i - 2] == other:
                row[j] = min(row[j], previous2[j - 2] + 1)
        previous2, previous = previous, row
    return previous[-1]


def size_text(count: int) -> str:
    """1.5 GB, 340 MB, 12 kB: decimal units, as `df -H` and package indexes show them."""
    value = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" or value >= 100 else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"
