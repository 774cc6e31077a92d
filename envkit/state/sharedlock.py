"""A lock held while a file others may write too (the site file) is read, changed and written back, so that two
writers at once (two `envkit survey` runs, one per partition) each keep the other's change: the second waits, then
reads the file as the first left it.

flock on a lock file beside the file (``.NAME.lock``), waited for up to a time limit; the kernel releases it when
the process dies. Where no lock can be had (a directory the user cannot write, a filesystem without flock) the
change goes on unlocked: writing the file itself then says what is wrong, or succeeds as it did before.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

from envkit.errors import EnvkitError

WAIT = 300.0  # seconds a writer waits for another to finish


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def holding(path: Path, what: str, wait: float = WAIT) -> Iterator[None]:
    """Hold the lock of ``path`` (``what`` names it in the error after ``wait`` seconds). A symbolic link is
    followed: every link to one shared file takes the same lock, beside the file itself."""
    path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except PermissionError:  # another user's lock file: flock works on a file opened for reading too
            fd = os.open(lock_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no lock to be had here: writing the file says why, if it cannot be written either
        yield
        return
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise EnvkitError(f"another envkit run kept {what} locked for {wait:g} s ({lock_path(path)})",
                                      hint="Wait for it to finish, then run this again.") from None
                time.sleep(0.05)
            except OSError as error:
                if error.errno not in (errno.ENOLCK, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                break  # a filesystem without flock: as before
        yield
    finally:
        os.close(fd)
