"""Words for messages: a count with its noun ("1 node", "24 nodes"). Pure; the standard library only."""

from typing import Optional


def counted(number: int, one: str, many: Optional[str] = None) -> str:
    """``number`` and its noun, singular for exactly one: ``counted(3, "node")`` is "3 nodes";
    ``counted(2, "channel query", "channel queries")`` for a plural that is not the noun and an s."""
    return f"{number} {one if number == 1 else many or one + 's'}"
