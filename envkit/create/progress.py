"""Progress of a long operation, on stderr: each step as it starts and how long it took.

--verbose streams the installers' own output under the step. Otherwise a terminal shows the installer's latest line
in place (one status line, rewritten), and anything else (a log file, a Slurm job's output) gets plain lines only.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from typing import Callable, Iterator, TextIO


class Progress:
    def __init__(self, stream: TextIO, total: int, verbose: bool = False, live: bool = False) -> None:
        self.stream = stream
        self.total = total
        self.verbose = verbose
        self.live = live and not verbose  # a terminal: rewrite a status line
        self.number = 0
        self._shown = False
        self._last_draw = 0.0

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    @contextlib.contextmanager
    def step(self, title: str) -> Iterator[Callable[[str], None]]:
        """Show ``title`` as step N of the total; yields the function the step's output lines go to."""
        self.number += 1
        label = f"[{self.number}/{self.total}] {title}"
        self._write(f"{label} ...\n")
        started = time.monotonic()
        try:
            yield self._line
        except BaseException:
            self._clear()
            self._write(f"{label}: failed after {_seconds(time.monotonic() - started)}\n")
            raise
        self._clear()
        self._write(f"{label}: done in {_seconds(time.monotonic() - started)}\n")

    def note(self, text: str) -> None:
        self._clear()
        self._write(f"      {text}\n")

    def _line(self, line: str) -> None:
        if self.verbose:
            self._write(f"      | {line}\n")
        elif self.live and line.strip():
            now = time.monotonic()
            if now - self._last_draw < 0.1:
                return
            self._last_draw = now
            width = max(20, shutil.get_terminal_size((80, 24)).columns - 8)
            self._write(f"\r\033[K      {line.strip()[:width]}")
            self._shown = True

    def _clear(self) -> None:
        if self._shown:
            self._write("\r\033[K")
            self._shown = False


def _seconds(elapsed: float) -> str:
    if elapsed < 60:
        return f"{elapsed:.1f}s"
    minutes, seconds = divmod(int(elapsed), 60)
    return f"{minutes}m{seconds:02d}s"
