"""One `envkit create` (or `remove`) per environment name, and per prefix, at a time: advisory lock files.

flock is released by the kernel when the process dies, so a killed run never leaves a stale lock. On a filesystem
without flock (some Lustre or GPFS homes), a lock file created exclusively, holding host and process id, stands in:
one left by a dead process of this host is taken over.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import zlib
from pathlib import Path
from typing import Iterator

from envkit.errors import EnvkitError
from envkit.versions import is_ascii_number


class Busy(EnvkitError):
    """Another envkit run holds the lock."""


def _host() -> str:
    return os.uname().nodename  # what socket.gethostname() returns, without importing socket


def _holder() -> str:
    return f"{_host()}:{os.getpid()}"


def _busy(what: str, holder: str) -> Busy:
    host, _, pid = holder.rpartition(":")  # "HOST:PID"
    by = f" (process {pid} on {host})" if host and pid else (f" (process {holder})" if holder else "")
    return Busy(f"another envkit run is working on {what}{by}", hint="Wait for it to finish, then run this again.")


@contextlib.contextmanager
def exclusive(locks: Path, key: str, what: str, mode: int = 0o644) -> Iterator[None]:
    """Held while the block runs; Busy (naming ``what`` and the holder) when another process holds it. ``mode``: the
    lock file's (0o664 for one a group shares, in a setgid directory of the group: another member's lock file is
    opened to read where it cannot be written, which flock needs no more than)."""
    locks.mkdir(parents=True, exist_ok=True)
    path = locks / f"{key}.lock"
    writable = True
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
    except PermissionError:
        fd = os.open(path, os.O_RDONLY)
        writable = False
    try:
        info = os.fstat(fd)
        if writable and mode != 0o644 and info.st_uid == os.geteuid() and info.st_mode & 0o777 != mode:
            os.fchmod(fd, mode)  # a group's lock file: whatever the umask
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(what, os.pread(fd, 256, 0).decode("utf-8", "replace").strip()) from None
        except OSError as error:
            if error.errno not in (errno.ENOLCK, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            with _exclusive_file(locks / f"{key}.lock.excl", what):
                yield
            return
        if writable:
            os.ftruncate(fd, 0)
            os.pwrite(fd, _holder().encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock


@contextlib.contextmanager
def _exclusive_file(path: Path, what: str) -> Iterator[None]:
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            holder = path.read_text(encoding="utf-8", errors="replace").strip()
            if not _dead_here(holder):
                raise _busy(what, holder) from None
            path.unlink(missing_ok=True)  # its process is gone: take it over
    else:
        raise _busy(what, "")
    try:
        os.write(fd, _holder().encode())
        os.close(fd)
        yield
    finally:
        path.unlink(missing_ok=True)


def _dead_here(holder: str) -> bool:
    host, _, pid = holder.rpartition(":")
    if host != _host() or not is_ascii_number(pid):
        return False  # another machine's, or unreadable: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def name_lock(locks: Path, name: str) -> contextlib.AbstractContextManager[None]:
    return exclusive(locks, name, f"environment {name!r}")


def prefix_lock(locks: Path, prefix: Path) -> contextlib.AbstractContextManager[None]:
    key = f"prefix-{zlib.crc32(str(prefix).encode('utf-8')):08x}"  # two prefixes sharing a lock only wait in turn
    return exclusive(locks, key, str(prefix))


def journal_path(locks: Path, name: str) -> Path:
    return locks / f"{name}.creating"
