"""Every command's --help reads cleanly in an 80-column terminal: no line past the edge, and the options' help in a
column wide enough to read (a long metavar or option name squeezed it into a ragged strip of a few words a line)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from support.cli_tree import envkit_command

WIDTH = 80
HELP_COLUMN_AT_MOST = 40  # the options' help starts by this column: at least 38 characters a line


def commands(command=None, path=()):
    command = command or envkit_command()
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from commands(sub, (*path, name))


def help_column(text: str) -> int:
    """Where the options' and arguments' help starts: the indentation of a panel's continuation lines (a line of a
    panel that does not begin with an option or argument)."""
    starts = [0]
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        inner = line[1:].rstrip("│").rstrip()
        text_at = len(inner) - len(inner.lstrip(" "))
        if inner.strip() and not inner.lstrip().startswith(("-", "[", "*")) and text_at > 3:
            starts.append(text_at + 1)
    return max(starts)


@pytest.mark.parametrize("path", list(commands()), ids=lambda p: " ".join(p) or "envkit")
def test_help_fits_80_columns_with_a_readable_help_column(path):
    shown = subprocess.run([sys.executable, "-m", "envkit", *path, "--help"], capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": str(WIDTH), "NO_COLOR": "1"}, timeout=60)
    assert shown.returncode == 0, shown.stderr
    too_long = [line for line in shown.stdout.splitlines() if len(line) > WIDTH]
    assert not too_long, too_long
    assert help_column(shown.stdout) <= HELP_COLUMN_AT_MOST, shown.stdout
