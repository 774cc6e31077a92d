"""Progress of a long operation, on stderr: each step as it starts and how long it took.

--verbose streams the installers' own output under the step. Otherwise a terminal shows each step on one line,
rewritten in place: "[1/3] Creating ... ..." with the installer's latest line after it, then "[1/3] Creating ...: done
in 2.1s". Anything else (a log file, a Slurm job's output) gets plain lines only: the step as it starts, and when it
is done.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from typing import Callable, Iterator, TextIO

from envkit.text.redact import redact
from envkit.text.terminal import printable


class Progress:
    def __init__(self, stream: TextIO, total: int, verbose: bool = False, live: bool = False) -> None:
        self.stream = stream
        self.total = total
        self.verbose = verbose
        self.live = live and not verbose  # a terminal: rewrite a status line
        self.number = 0
        self._shown = False
        self._last_draw = 0.0
        self._label = ""

    def _write(self, text: str) -> None:
        self.stream.write(redact(text))  # an index URL in a title, an installer's line: never a mirror's password
        self.stream.flush()

    @contextlib.contextmanager
    def step(self, title: str) -> Iterator[Callable[[str], None]]:
        """Show ``title`` as step N of the total; yields the function the step's output lines go to."""
        self.number += 1
        label = f"[{self.number}/{self.total}] {title}"
        self._label = label
        if self.live:
            self._draw(f"{label} ...")
        else:
            self._write(f"{label} ...\n")
        started = time.monotonic()
        try:
            yield self._line
        except BaseException:
            self._end(f"{label}: failed after {_seconds(time.monotonic() - started)}")
            raise
        self._end(f"{label}: done in {_seconds(time.monotonic() - started)}")

    def note(self, text: str) -> None:
        self._clear()
        self._write(f"      {text}\n")
        if self.live and self._label:
            self._draw(f"{self._label} ...")

    def _line(self, line: str) -> None:
        line = printable(line)  # an installer's output: its escape sequences are shown, not obeyed
        if self.verbose:
            self._write(f"      | {line}\n")
        elif self.live and line.strip():
            now = time.monotonic()
            if now - self._last_draw < 0.1:
                return
            self._last_draw = now
            self._draw(f"{self._label} ... {line.strip()}")

    def _draw(self, text: str) -> None:
        width = max(20, shutil.get_terminal_size((80, 24)).columns - 1)
        self._write(f"\r\033[K{text[:width]}")
        self._shown = True

    def _end(self, text: str) -> None:
        self._clear()
        self._label = ""
        self._write(f"{text}\n")

    def _clear(self) -> None:
        if self._shown:
            self._write("\r\033[K")
            self._shown = False


def _seconds(elapsed: float) -> str:
    if elapsed < 60:
        return f"{elapsed:.1f}s"
    minutes, seconds = divmod(int(elapsed), 60)
    return f"{minutes}m{seconds:02d}s"
