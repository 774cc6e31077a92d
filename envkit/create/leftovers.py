"""What a run that died left behind, told apart from what is not its own: the processes it started (every
installer's environment carries the run's mark, ``ENVKIT_RUN=<run id>``, so one that started in the instant before
the journal could name it is found too), and a directory at the prefix that its backend made before the journal could
note which one it was."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from envkit.state.records import RECORD_DIR

MARK = "ENVKIT_RUN"

# What the backends make at the top of a prefix (venv, uv, conda, micromamba, the embedded engine): a dead run whose
# backend made its directory before the journal could note it owns a prefix holding only these.
_BACKEND_NAMES = frozenset(("bin", "lib", "lib64", "include", "share", "etc", "conda-meta", "pyvenv.cfg",
                            ".gitignore", "CACHEDIR.TAG", ".lock", RECORD_DIR, "man", "ssl", "libexec",
                            "sbin", "var", "compiler_compat", "x86_64-conda-linux-gnu", "aarch64-conda-linux-gnu",
                            "info", "doc", "docs", "licenses", ".nonadmin"))


def backend_made(prefix: Path, marked: bool = False) -> bool:
    """Whether a directory at a dead run's prefix holds only what a backend makes there (or nothing), or, with
    ``marked`` (it is the directory the journal noted), a venv's or conda's own mark (whose packages may add any
    name): files the user put there after the run died are not deleted."""
    try:
        if not os.path.isdir(prefix) or os.path.islink(prefix):
            return False
        names = set(os.listdir(prefix))
    except OSError:
        return False
    return names <= _BACKEND_NAMES or (marked and bool(names & {"pyvenv.cfg", "conda-meta"}))


def stop_marked(run: str, wait: float = 10.0) -> bool:
    """SIGKILL every process whose environment carries ``ENVKIT_RUN=run`` (the run's installers and theirs) and
    wait until none is left; False if one still was after ``wait`` seconds."""
    mark = f"{MARK}={run}".encode()
    deadline = time.monotonic() + wait
    while True:
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    with open(os.path.join(entry.path, "environ"), "rb") as environ:
                        if mark in environ.read().split(b"\0"):
                            found.append(int(entry.name))
                except OSError:  # gone, or another user's
                    continue
        found = [pid for pid in found if not _zombie(pid)]
        if not found:
            return True
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return True


