"""Processes the tests start and look for: one reaped whatever the test met, and the live processes whose command
line names something (an srun by its job's name, a uv by its scratch directory)."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def reaped(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """``process`` for the block; killed and waited for afterwards if the test left it running."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def naming(text: str, program: str = "") -> list[int]:
    """The pids of the processes whose command line holds ``text`` (and whose program's path ends in ``program``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(program.encode()) and any(text.encode() in part for part in argv):
            out.append(int(entry.name))
    return out


def read_terminal(master: int) -> bytes:
    """All that a pseudo-terminal's other side writes, until it is closed (reading the master then fails: EIO)."""
    import os

    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)
