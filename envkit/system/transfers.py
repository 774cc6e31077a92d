"""What is being fetched, how much of it so far, of how much, and how fast: what a long step's progress shows.

Each source says what it knows. envkit's own downloader (a lock's files) and the embedded conda engine (rattler
reports each download's bytes and total) say a file's bytes and total as they go (:func:`fetching`,
:func:`fetched`). uv, given a terminal, draws a bar per download ("torch ━━━━ 312.40 MiB/846.00 MiB"), which
:class:`TerminalOutput` reads from the pseudo-terminal envkit gives it; into a pipe it says only what it starts
downloading and its size ("Downloading torch (846.0MiB)"), as pip does: :func:`installer_said`. A :class:`Meter`
gathers one step's; the meters in force (:func:`metering`) get what every source says, from any thread. Pure.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import deque
from typing import Callable, Iterator, NamedTuple, Optional

_RATE_WINDOW = 5.0  # seconds of samples the rate is taken over
_SIZE = r"[0-9.]+ ?(?:[kKMGT]?i?B|bytes)"
# uv: "Downloading torch (846.0MiB)" and " Downloaded torch"; pip: "Downloading https://.../torch-2.9.1-...whl
# (846.0 MB)" (its progress bar off), each under a "Collecting" line.
_ANNOUNCED = rf"^\s*Downloading (?P<what>\S+) \((?P<size>{_SIZE})\)\s*$"
_FINISHED = r"^\s*Downloaded (?P<what>\S+)\s*$"
_ALL_DONE = r"^\s*(Prepared [0-9]+ packages?|Installing collected packages|Installed [0-9]+ packages?)\b"
# uv's bar on a terminal, its control sequences taken out: name, the bar, "312.40 MiB/846.00 MiB".
_BAR = rf"(?P<what>[A-Za-z0-9][A-Za-z0-9._+-]*) +\S{{5,}} +(?P<done>{_SIZE})/(?P<total>{_SIZE})"
_CONTROL = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_UNITS = {"bytes": 1, "B": 1, "kB": 1000, "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3, "TB": 1000 ** 4,
          "KiB": 1 << 10, "kiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


class Reading(NamedTuple):
    """A meter's state at one moment."""

    names: tuple[str, ...]  # what is being fetched now, first started first
    done: Optional[int]  # bytes fetched so far in the step; None when no source counts them
    total: Optional[int]  # bytes of everything the step said it fetches; None when none said
    rate: Optional[float]  # bytes a second over the last few seconds; None before there are two samples


class Meter:
    """One step's transfers (thread-safe): each file's bytes so far and total, as its source says them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, list[Optional[int]]] = {}  # name -> [bytes so far or None, total or None]
        self._open: dict[str, None] = {}  # names being fetched, in order
        self._samples: deque[tuple[float, int]] = deque()

    def file(self, name: str, done: Optional[int], total: Optional[int]) -> None:
        """``name`` has ``done`` bytes of ``total`` (either unknown: None); finished when all are there."""
        with self._lock:
            entry = self._files.setdefault(name, [None, None])
            if done is not None:
                entry[0] = done
            if total is not None:
                entry[1] = total
            if entry[0] is not None and entry[1] is not None and entry[0] >= entry[1]:
                self._open.pop(name, None)
            else:
                self._open.setdefault(name)

    def finished(self, name: Optional[str] = None) -> None:
        """``name`` (None: every file) is fetched: its bytes are its total, where that is known."""
        with self._lock:
            for key in [name] if name is not None else list(self._open):
                self._open.pop(key, None)
                entry = self._files.get(key)
                if entry is not None and entry[1] is not None and entry[0] is not None:
                    entry[0] = entry[1]

    def reading(self, now: Optional[float] = None) -> Reading:
        now = time.monotonic() if now is None else now
        with self._lock:
            counted = [entry[0] for entry in self._files.values() if entry[0] is not None]
            done = sum(counted) if counted else None
            totals = [entry[1] for entry in self._files.values() if entry[1] is not None]
            rate = None
            if done is not None:
                self._samples.append((now, done))
                while self._samples[0][0] < now - _RATE_WINDOW:
                    self._samples.popleft()
                first = self._samples[0]
                rate = (done - first[1]) / (now - first[0]) if now - first[0] >= 0.5 else None
            return Reading(tuple(self._open), done, sum(totals) if totals else None, rate)


_meters: list[Meter] = []


@contextlib.contextmanager
def metering(meter: Meter) -> Iterator[Meter]:
    """``meter`` gets what every source says inside the block (from any thread)."""
    _meters.append(meter)
    try:
        yield meter
    finally:
        _meters.remove(meter)


def fetching(name: str, done: Optional[int], total: Optional[int]) -> None:
    """A source's word: ``name`` has ``done`` of ``total`` bytes (envkit's downloader, rattler, uv's bars)."""
    for meter in list(_meters):
        meter.file(name, done, total)


def fetched(name: Optional[str] = None) -> None:
    """A source's word: ``name`` (None: everything it was fetching) is fetched."""
    for meter in list(_meters):
        meter.finished(name)


def installer_said(line: str) -> None:
    """What an installer's output line says of its downloads ("Downloading torch (846.0MiB)"), to the meters."""
    announced = announced_download(line)
    if announced is not None:
        fetching(announced[0], None, announced[1])
        return
    finished = re.match(_FINISHED, line)
    if finished is not None:
        fetched(finished["what"])
    elif re.match(_ALL_DONE, line):
        fetched()


def announced_download(line: str) -> Optional[tuple[str, int]]:
    """(what, bytes) of an installer's "Downloading WHAT (SIZE)" line; None for any other line. A URL is named by
    its file name."""
    found = re.match(_ANNOUNCED, line)
    if found is None:
        return None
    what = found["what"].rstrip("/").rpartition("/")[2].replace("%2B", "+").replace("%2b", "+")
    return what, size_of(found["size"])


def size_of(text: str) -> int:
    """``"846.0MiB"``, ``"2.10 MiB"``, ``"6.3 MB"``, ``"51 bytes"`` in bytes."""
    found = re.fullmatch(r"([0-9.]+) ?([kKMGT]?i?B|bytes)", text.strip())
    if found is None or found[2] not in _UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(found[1]) * _UNITS[found[2]])


class TerminalOutput:
    """An installer's output read from the pseudo-terminal it draws its bars on: each bar's bytes and total go to
    the meters (:func:`fetching`); the text, its control sequences taken out, goes on to ``text`` (a line ends at
    its last carriage return, as the terminal shows it)."""

    def __init__(self, text: Callable[[bytes], None]) -> None:
        self.text = text
        self.carry = b""  # an escape sequence cut in two by a read
        self.frame = ""  # the end of the text since the last newline, where bars are looked for
        self.seen: dict[str, int] = {}  # each bar's bytes as last drawn

    def add(self, chunk: bytes) -> bool:
        """Take what the installer drew; whether it said anything new (a line, a bar that moved), as opposed to
        drawing the same again (a spinner going round): its silence limit counts only what is new."""
        data = self.carry + chunk
        cut = data.rfind(b"\x1b")
        if cut >= 0 and not _CONTROL.match(data, cut) and len(data) - cut < 64:
            data, self.carry = data[:cut], data[cut:]
        else:
            self.carry = b""
        clean = _CONTROL.sub(b"", data)
        self.frame = (self.frame + clean.decode("utf-8", "replace"))[-4096:]
        moved = b"\n" in clean
        for found in re.finditer(_BAR, self.frame):
            try:
                done = size_of(found["done"])
                fetching(found["what"], done, size_of(found["total"]))
            except ValueError:
                continue
            moved = moved or self.seen.get(found["what"]) != done
            self.seen[found["what"]] = done
        self.frame = self.frame[-200:]  # what a bar cut by this read may continue
        self.text(clean)
        return moved


def reading_text(reading: Reading) -> str:
    """``torch: 312 MB of 846 MB, 52.1 MB/s``; ``torch (846 MB)`` where its bytes are not counted; "" when nothing
    was fetched or said."""
    from envkit.text.words import size_text

    names = reading.names
    what = names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else "") if names else ""
    if reading.done is None:
        if not what:
            return ""
        return what + (f" ({size_text(reading.total)})" if reading.total else "")
    amount = size_text(reading.done) + (f" of {size_text(reading.total)}" if reading.total else "")
    rate = f", {size_text(int(reading.rate))}/s" if reading.rate is not None else ""
    return f"{what + ': ' if what else ''}{amount}{rate}"
