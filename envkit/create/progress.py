"""Progress of a long operation, on stderr: each step as it starts and how long it took, and what it is doing
meanwhile.

--verbose streams the installers' own output under the step. Otherwise a terminal shows each step on one line,
rewritten in place: "[1/3] Creating ... ..." with what is being fetched after it (its bytes, their total and the
rate: envkit.system.transfers) or else the installer's latest line, then "[1/3] Creating ...: done in 2.1s". Anything else
(a log file, a pipe, a Slurm job's output, a terminal whose TERM is dumb) gets plain lines only: the step as it
starts, when it is done, and in between, whenever nothing was written for ``interval`` seconds (30;
ENVKIT_PROGRESS_INTERVAL), one line saying what is still happening. Nothing here is coloured.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from typing import Callable, Iterator, Mapping, Optional, TextIO

from envkit.system import transfers
from envkit.text.redact import redact
from envkit.text.terminal import printable

INTERVAL = 30.0  # seconds a log or a pipe may go without a line from a step that is still running
INTERVAL_VARIABLE = "ENVKIT_PROGRESS_INTERVAL"
_REDRAW = 0.5  # seconds between two drawings of a terminal's status line by the clock


def progress_interval(environ: Mapping[str, str]) -> float:
    """ENVKIT_PROGRESS_INTERVAL's seconds, or 30; BadInputError (exit 2) for a value that is not a positive number."""
    from envkit.backends.base import seconds_setting

    return seconds_setting(environ, INTERVAL_VARIABLE, INTERVAL)


def live_terminal(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Whether ``stream`` is a terminal that can have a status line rewritten in place (not TERM=dumb)."""
    try:
        return stream.isatty() and environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):  # (a closed or odd stream)
        return False


class Progress:
    def __init__(self, stream: TextIO, total: int, verbose: bool = False, live: bool = False,
                 interval: float = INTERVAL) -> None:
        self.stream = stream
        self.total = total
        self.verbose = verbose
        self.live = live and not verbose  # a terminal: rewrite a status line
        self.interval = interval
        self.number = 0
        self._shown = False
        self._last_draw = 0.0
        self._last_write = time.monotonic()
        self._label = ""
        self._said = ""  # the installer's latest line in this step
        self._meter: Optional[transfers.Meter] = None
        self._lock = threading.RLock()  # the step's clock writes from a thread of its own

    def _write(self, text: str) -> None:
        with self._lock:
            self.stream.write(redact(text))  # an index URL in a title, an installer's line: never a mirror's password
            self.stream.flush()
            self._last_write = time.monotonic()

    @contextlib.contextmanager
    def step(self, title: str) -> Iterator[Callable[[str], None]]:
        """Show ``title`` as step N of the total; yields the function the step's output lines go to."""
        self.number += 1
        label = f"[{self.number}/{self.total}] {title}"
        meter = transfers.Meter()
        with self._lock:
            self._label, self._said, self._meter = label, "", meter
        if self.live:
            self._draw(f"{label} ...")
        else:
            self._write(f"{label} ...\n")
        started = time.monotonic()
        stop = threading.Event()
        clock = threading.Thread(target=self._clock, args=(label, meter, started, stop), daemon=True,
                                 name="envkit-progress")
        try:
            with transfers.metering(meter):
                clock.start()
                try:
                    yield self._line
                finally:
                    stop.set()
                    clock.join()
        except BaseException:
            self._end(f"{label}: failed after {_seconds(time.monotonic() - started)}")
            raise
        self._end(f"{label}: done in {_seconds(time.monotonic() - started)}")

    def note(self, text: str) -> None:
        with self._lock:
            self._clear()
            self._write(f"      {text}\n")
            if self.live and self._label:
                self._draw(f"{self._label} ...")

    def _line(self, line: str) -> None:
        line = printable(line)  # an installer's output: its escape sequences are shown, not obeyed
        transfers.installer_said(line)  # "Downloading torch (846.0MiB)": what the step fetches
        if line.strip():
            self._said = line.strip()
        if self.verbose:
            self._write(f"      | {line}\n")
        elif self.live and line.strip():
            now = time.monotonic()
            if now - self._last_draw < 0.1:
                return
            self._last_draw = now
            self._draw(self._status(self._label, self._meter, now))

    def _status(self, label: str, meter: Optional[transfers.Meter], now: float) -> str:
        """The terminal's status line: what is being fetched and how far, else the installer's latest line; on a
        narrow terminal the step's title gives way (it was shown whole when the step started)."""
        fetching = transfers.reading_text(meter.reading(now)) if meter is not None else ""
        if not fetching:
            return f"{label} ... {self._said}".rstrip()
        room = _width() - len(fetching) - len(" ... ")
        if len(label) > room:
            label = label[:max(room - 3, 5)] + "..."
        return f"{label} ... {fetching}"

    def _clock(self, label: str, meter: transfers.Meter, started: float, stop: threading.Event) -> None:
        """While a step runs: a terminal's status line drawn again every half second (the bytes and the rate move
        without a line from the installer); a log or a pipe gets a line whenever none was written for
        ``interval`` seconds."""
        pause = _REDRAW if self.live else min(1.0, self.interval / 2)
        while not stop.wait(pause):
            now = time.monotonic()
            with self._lock:
                if stop.is_set() or self._label != label:
                    return
                if self.live:
                    self._last_draw = now
                    self._draw(self._status(label, meter, now))
                elif now - self._last_write >= self.interval:
                    self._write(self._still(label, meter, now - started, now))

    def _still(self, label: str, meter: transfers.Meter, elapsed: float, now: float) -> str:
        """A log's line for a step that is still running: how long so far, what is being fetched, what the installer
        said last."""
        parts = [f"      {label}: still working, {_seconds(elapsed)} so far"]
        fetching = transfers.reading_text(meter.reading(now))
        if fetching:
            parts.append(f"fetching {fetching}")
        if self._said:
            parts.append(f"last said: {self._said[:200]}")
        return "; ".join(parts) + "\n"

    def _draw(self, text: str) -> None:
        with self._lock:
            self._write(f"\r\033[K{text[:_width()]}")
            self._shown = True

    def _end(self, text: str) -> None:
        with self._lock:
            self._clear()
            self._label, self._meter = "", None
            self._write(f"{text}\n")

    def _clear(self) -> None:
        with self._lock:
            if self._shown:
                self._write("\r\033[K")
                self._shown = False


def _width() -> int:
    """The columns a status line may take: one less than the terminal's (a full line would wrap)."""
    return max(20, shutil.get_terminal_size((80, 24)).columns - 1)


def _seconds(elapsed: float) -> str:
    if elapsed < 60:
        return f"{elapsed:.1f}s"
    minutes, seconds = divmod(int(elapsed), 60)
    return f"{minutes}m{seconds:02d}s"
