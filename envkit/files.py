"""Paths a user gives, read safely, and files written so that readers see the old content or the new, never half of
it: a temporary file beside it, then a rename. Records, journals, locks and cache entries are written this way."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def user_path(text: str) -> Path:
    """``text`` (a path from an option, a variable or a file) as a Path, with ``~`` and ``~user`` expanded.
    ValueError, worded to follow the path, when no path can be made of it: empty, a NUL byte, a ``~user`` with no
    home directory."""
    if not text.strip():
        raise ValueError("is empty: give a path")
    if "\0" in text:
        raise ValueError("holds a NUL byte, which no path can")
    try:
        return Path(text).expanduser()
    except RuntimeError:  # pathlib's "Could not determine home directory"
        raise ValueError(f"names no home directory: {text.split('/')[0]} is not a user here") from None


def real_path(path: Path) -> Path:
    """``path`` with its symbolic links resolved; the absolute path as given when they loop (opening it then says
    so, as the error of whatever reads it)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # "Symlink loop from ..." (RuntimeError before Python 3.13)
        return path.absolute()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` in one step. A symbolic link is written through (its target gets the data, the
    link stays); anything there that is not a regular file (a directory, a FIFO, a device) is refused with an
    OSError, never replaced by a file."""
    path = Path(os.path.realpath(path))
    if path.is_symlink():  # what realpath leaves a link is a loop
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
    if path.exists() and not path.is_file():
        raise OSError(errno.EEXIST, "it exists and is not a regular file", str(path))
    if path.parent.exists() and not path.parent.is_dir():
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path.parent))
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # here: the list path reads files.py (real_path) and never writes

    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp's 0600 would make a shared lock or site file private
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _mode_for(path: Path) -> int:
    """The permissions of the file being replaced, or a new file's (0666 less the umask, as open() makes it)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without changing it (os.umask can only be read by setting it, which another
    thread's file would see); 022 where /proc does not tell."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
