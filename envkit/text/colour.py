"""Colour that carries meaning, and only that: PASS green, FAIL red, NOT RUN and warnings yellow, the pick marked.

The renderers return plain text (tests read it, and so do pipes); a command that prints a report passes it through
:func:`paint` when colour is on, which colours those words where they stand as verdicts and labels, and nothing else.
Whether colour is on is :func:`colour_wanted`: ``--color never`` (``--no-color``) or ``always`` as asked; else off
when ``NO_COLOR`` is set (to anything: https://no-color.org), on when ``FORCE_COLOR`` is set (and not empty), else
on only when stdout is a terminal.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping

CHOICES = ("auto", "always", "never")
_CODES = {"green": "32", "red": "31", "yellow": "33", "bold": "1"}

# (pattern, colour): each pattern's group "word" is what is coloured. Verdicts stand at a line's start (after an
# indent) followed by ':' or ' '; a GPU's "ok"/"FAIL" after its name; the CHECK column of `envkit envs` (PASS, FAIL,
# with * when judged from profiles); `envkit list`'s pick, marked "*" at the start of its row. Compiled on first use:
# most runs print no colour (a pipe, NO_COLOR) and need none of them.
_RULE_TEXT = (
    (r"^(?P<indent>\s*)(?P<word>PASS)(?=[:*]|\s)", "green"),
    (r"^(?P<indent>\s*)(?P<word>FAIL)(?=[:*]|\s)", "red"),
    (r"^(?P<indent>\s*)(?P<word>NOT RUN)(?=[: ])", "yellow"),
    (r"^(?P<indent>\s*)(?P<word>[Ww]arning:)", "yellow"),
    (r"(?P<indent>: )(?P<word>FAIL)(?= \()", "red"),
    (r"^(?P<indent>  )(?P<word>\* \S+)", "bold"),
)
_TABLE_CELL_TEXT = (
    (r"(?P<indent>(?<=\s))(?P<word>PASS\*?)(?=\s|$)", "green"),
    (r"(?P<indent>(?<=\s))(?P<word>FAIL\*?)(?=\s|$)", "red"),
)


@lru_cache(maxsize=2)
def _rules(table: bool) -> tuple:
    import re

    return tuple((re.compile(pattern, re.M), colour) for pattern, colour in _RULE_TEXT + (_TABLE_CELL_TEXT if table
                                                                                          else ()))


def parse_choice(value: str) -> str:
    """``--color`` WHEN, checked (ValueError with the choices otherwise)."""
    if value not in CHOICES:
        raise ValueError(f"{value!r} is not one of {', '.join(CHOICES)}")
    return value


def colour_wanted(choice: str, environ: Mapping[str, str], is_terminal: bool) -> bool:
    """Whether to colour: the option first, then NO_COLOR (any value), then FORCE_COLOR (not empty), then the
    terminal."""
    if choice != "auto":
        return choice == "always"
    if "NO_COLOR" in environ:
        return False
    if environ.get("FORCE_COLOR"):
        return True
    return is_terminal


def paint(text: str, table: bool = False) -> str:
    """``text`` with its verdicts, warnings and pick coloured (``table``: also PASS and FAIL cells of a table)."""
    for pattern, colour in _rules(table):
        text = pattern.sub(lambda m, c=colour: f"{m.group('indent')}\033[{_CODES[c]}m{m.group('word')}\033[0m", text)
    return text
