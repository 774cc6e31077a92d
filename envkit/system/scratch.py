"""Scratch directories in $TMPDIR that outlive no envkit.

A ``with`` block removes its directory, but a SIGKILL (or a power cut) gives it no chance: the directory an installer
was writing into stayed in $TMPDIR for good. So each directory's name says which envkit made it (its pid and that
process's start time, which a reused pid does not share), and whenever envkit makes one it first removes those of
this user whose envkit is gone. Only directories named so, owned by this user and not links are ever touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator, Optional

_NAME = re.compile(r"envkit-[a-z]+-(?P<pid>[0-9]+)-(?P<since>[0-9]+)-[A-Za-z0-9_]+")


def _owner_name() -> str:
    from envkit.system.process import start_time

    pid = os.getpid()
    return f"{pid}-{start_time(pid) or 0}"


def sweep(base: Optional[Path] = None) -> list[Path]:
    """Remove the scratch directories in ``base`` ($TMPDIR) of envkit runs that are gone; those removed."""
    from envkit.system.process import start_time

    base = Path(tempfile.gettempdir()) if base is None else base
    removed = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        match = _NAME.fullmatch(entry.name)
        if match is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        pid, since = int(match["pid"]), int(match["since"])
        if since and start_time(pid) == since:
            continue  # its envkit still runs
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def make_scratch(purpose: str) -> Path:
    """A new private directory in $TMPDIR (``purpose``: a lowercase word) for the caller to remove (``remove``); the
    leftovers of dead runs are removed first. OSError when it cannot be made."""
    if not purpose.isalpha() or not purpose.islower():
        raise ValueError(f"not a purpose word: {purpose!r}")
    sweep()
    return Path(tempfile.mkdtemp(prefix=f"envkit-{purpose}-{_owner_name()}-"))


def remove(path: Optional[Path]) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def scratch_dir(purpose: str) -> Iterator[Path]:
    """make_scratch for the block, removed after it."""
    path = make_scratch(purpose)
    try:
        yield path
    finally:
        remove(path)
