"""Writing a file at a path someone named (``-o FILE``, the site file, a modulefile in a shared directory) so that
only that path changes, whatever is planted there.

``write_output(path, data)`` writes ``data`` into a new file beside ``path`` (created exclusively, so never through
anything already there), then renames it over ``path``: the rename replaces the directory entry itself, never what
a symbolic link at ``path`` points to. Before that, what is at ``path`` is looked at without following it:

- nothing, or a regular file: written (a replaced file keeps its permissions; a new one gets 0666 less the umask,
  or ``mode`` when the caller gives one, as 0o600 for a file that holds a secret);
- a symbolic link (dangling or not): refused with ``UnsafeOutput``, unless ``force=True``, which replaces the link
  by a regular file and leaves its target untouched (a user's ``~/.bashrc`` behind ``out.yml -> ~/.bashrc``);
- a directory, a FIFO, a device, a socket: always refused.

A link planted between the look and the rename (another user of a sticky /tmp) is replaced like any entry, so the
check is for the user's sake (say so instead of silently dropping their link), not what keeps their files safe.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

from envkit.errors import BadInputError


class UnsafeOutput(BadInputError):
    """A path envkit will not write as it is: a symbolic link (without ``force``), or not a regular file."""


def write_output(path: Path, data: bytes, *, force: bool = False, mode: Optional[int] = None,
                 gid: Optional[int] = None, what: str = "output") -> None:
    """Write ``data`` at ``path`` atomically and never through a link (see the module's docstring), with ``mode``
    (default: a replaced file's, else the umask's) and group ``gid`` set before it appears there. ``what`` names
    the file in errors ("the lock", "the site file"). UnsafeOutput (exit 2) for a link without ``force`` or
    something that is not a regular file; OSError when the directory cannot be written."""
    there = check_output(path, force=force, what=what)
    if mode is None:
        mode = stat.S_IMODE(there.st_mode) if there is not None else 0o666 & ~_umask()
    import tempfile

    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)  # (as the default site file's ~/.config/envkit may not be yet)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        if gid is not None:
            os.fchown(fd, -1, gid)
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def check_output(path: Path, *, force: bool = False, what: str = "output") -> Optional[os.stat_result]:
    """What ``write_output`` would find at ``path`` (not following a link): None for nothing there (or a link that
    ``force`` replaces), else the regular file's status. UnsafeOutput as ``write_output`` raises it: a command calls
    this before long work (a solve, a survey) so that a path it will refuse is refused first."""
    try:
        there = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(there.st_mode):
        if not force:
            raise UnsafeOutput(f"{what} {path} is a symbolic link (to {os.readlink(path)}): envkit writes a file "
                               "only where it is named, never through a link",
                               hint="Remove the link, choose another path, or give --force to replace the link "
                                    "(not its target) by the file.")
        return None  # replaced by a new file: its target's permissions are not the new file's
    if not stat.S_ISREG(there.st_mode):
        kind = "a directory" if stat.S_ISDIR(there.st_mode) else "not a regular file"
        raise UnsafeOutput(f"{what} {path} is {kind}: envkit replaces only a regular file", hint="Choose another path.")
    return there


def _umask() -> int:
    from envkit.state.files import _umask as umask

    return umask()
