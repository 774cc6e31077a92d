"""One `envkit create` (or `remove`) per environment name at a time: an advisory lock file per name.

flock is released by the kernel when the process dies, so a killed run never leaves a stale lock. The file beside it
(``NAME.creating``) says which prefix a run was building: the next run removes that debris if the run died.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator, Optional

from envkit.errors import EnvkitError


class Busy(EnvkitError):
    """Another envkit run holds the environment's lock."""


@contextlib.contextmanager
def name_lock(locks: Path, name: str) -> Iterator[None]:
    locks.mkdir(parents=True, exist_ok=True)
    path = locks / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            raise Busy(f"another envkit run is working on environment {name!r}"
                       + (f" (process {holder})" if holder else ""),
                       hint="Wait for it to finish, then run this again.") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def creating_marker(locks: Path, name: str) -> Path:
    return locks / f"{name}.creating"


def leftover_prefix(locks: Path, name: str) -> Optional[Path]:
    """The prefix a dead run was building for ``name`` (call it while holding the lock), if there is one."""
    try:
        text = creating_marker(locks, name).read_text(encoding="utf-8").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return Path(text) if text else None
