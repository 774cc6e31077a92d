"""Paths a user gives, read safely, and files written so that readers see the old content or the new, never half of
it: a temporary file beside it, then a rename. Records, journals, locks and cache entries are written this way."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Optional


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


# The most envkit reads of each kind of file a user names: far above any real one, far below what would take the
# memory of a login node (a lock of a whole conda environment is a few MB; a profile a few KB). A file over it is
# refused before it is read, and a pipe or device (`/dev/zero`) is read no further than it.
LIMITS = {
    "config file": 1 << 20,
    "machine profile": 1 << 20,
    "site file": 16 << 20,
    "manifest": 4 << 20,
    "lock file": 64 << 20,
    "record": 4 << 20,
    "requirements file": 4 << 20,  # envkit add -r, create -r: a requirements.txt is a few KB
    "conda-meta record": 256 << 20,  # a package's file list: tens of MB for the largest (CUDA toolkits)
    "package metadata": 16 << 20,  # a .dist-info's METADATA (its long description), INSTALLER, direct_url.json
}
PIPE_WAIT_S = 10.0  # how long a pipe (a shell's <(...)) may stay silent before reading it gives up


def size_words(size: int) -> str:
    """``1048576`` -> ``1 MiB``: a limit as the error states it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} bytes"


def read_bytes_file(path: Path, what: str = "config file") -> bytes:
    """The bytes of the file ``path`` names, bounded: at most ``LIMITS[what]`` of them, never waiting on a FIFO
    nobody writes to (it opens without waiting and reads empty) and never for long on a silent pipe.
    FileNotFoundError when there is none; ValueError, worded to follow the path ("is over 1 MiB, the most envkit
    reads of a config file"), when it is a directory, a socket, a link to nothing, too large, or cannot be read."""
    import stat

    limit = LIMITS[what]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer opens (and reads empty), not waits
    except FileNotFoundError:
        if os.path.islink(path):
            raise ValueError(f"is a symbolic link to {os.path.realpath(path)}, which does not exist") from None
        raise
    except OSError as error:
        raise ValueError(f"cannot be read: {error.strerror or error}") from None
    too_big = f"is over {size_words(limit)}, the most envkit reads of a {what}: is it the right file?"
    try:
        mode = os.fstat(fd)
        if stat.S_ISDIR(mode.st_mode):
            raise ValueError("is a directory, not a file")
        if stat.S_ISREG(mode.st_mode):
            if mode.st_size > limit:
                raise ValueError(too_big)
            os.set_blocking(fd, True)
            with open(fd, "rb", closefd=False) as stream:
                data = stream.read(limit + 1)
        else:  # a pipe or a device: read what comes, bounded in size and in silence
            data = _read_stream(fd, limit)
        if len(data) > limit:
            raise ValueError(too_big)
        return data
    except OSError as error:
        raise ValueError(f"cannot be read: {error.strerror or error}") from None
    finally:
        os.close(fd)


def _read_stream(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of a pipe or device, up to its end; ValueError when it stays silent for
    PIPE_WAIT_S."""
    import select

    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        try:  # (non-blocking: a FIFO with no writer reads as its end at once, where select would wait)
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
        except BlockingIOError:
            if not select.select([fd], [], [], PIPE_WAIT_S)[0]:
                raise ValueError(f"sent nothing for {PIPE_WAIT_S:g} seconds: give a file") from None
            continue
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_text_file(path: Path, what: str = "config file") -> str:
    """The UTF-8 text of the file ``path`` (a file a user names: /dev/null and a shell's ``<(...)`` too), bounded as
    ``read_bytes_file`` reads it. FileNotFoundError when there is none; ValueError, worded to follow the path, when
    it is a directory, a link to nothing, too large, cannot be read, holds a NUL byte, or is not UTF-8 (the line of
    the first bad byte)."""
    data = read_bytes_file(path, what)
    try:
        text = utf8_text(data)
    except NotUtf8 as error:
        raise ValueError(f"is not UTF-8 text ({error}): save it as UTF-8") from None
    if "\0" in text:
        raise ValueError(f"holds a NUL byte (line {text[:text.index(chr(0))].count(chr(10)) + 1}): it is not text")
    return text


def parse_json(text: str) -> Any:
    """``json.loads(text)``; ValueError for text that nests arrays or objects deeper than Python's recursion limit
    too (json raises RecursionError there), so that a reader's ``except ValueError`` holds for every input."""
    import json

    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("it nests arrays or objects too deeply to be read") from None


class NotUtf8(ValueError):
    """Bytes that are not UTF-8: where, as a person finds it in an editor ("byte 0xe9 at line 33")."""

    def __init__(self, byte: int, line: int) -> None:
        super().__init__(f"byte 0x{byte:02x} at line {line}")
        self.line = line


def utf8_text(data: bytes) -> str:
    """``data`` decoded as UTF-8; NotUtf8 naming the line of the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotUtf8(data[error.start], data[:error.start].count(b"\n") + 1) from None


_NAME_MAX = 255  # bytes of one file name on Linux filesystems


def plain_name_problem(name: str) -> Optional[str]:
    """Why ``name`` (a field of a file someone else wrote: a lock's hash, the last part of a URL, percent-decoded)
    cannot be one file name inside a directory of envkit's, in words following the name; None when it can. A plain
    name is not empty, not ``.`` or ``..``, holds no ``/``, NUL or other control character, and fits a filesystem,
    so that ``directory / name`` is an entry of ``directory`` and never a path elsewhere."""
    if name in ("", ".", ".."):
        return "names no file" if not name else "names a directory, not a file in it"
    if "/" in name:
        return "holds a path separator"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "holds a control character"
    if len(name.encode("utf-8", "surrogatepass")) > _NAME_MAX:
        return f"is longer than {_NAME_MAX} bytes"
    return None


def inside(directory: Path, *names: str) -> Path:
    """``directory / name / ...``, each of ``names`` proved a plain name (:func:`plain_name_problem`), so the path
    lies inside ``directory`` whatever the names say; ValueError ("'../x' holds a path separator") otherwise."""
    for name in names:
        problem = plain_name_problem(name)
        if problem is not None:
            raise ValueError(f"{name!r} {problem}")
    path = directory.joinpath(*names)
    assert os.path.normpath(path).startswith(os.path.normpath(directory) + os.sep)  # (what the names proved)
    return path


def real_path(path: Path) -> Path:
    """``path`` with its symbolic links resolved; the absolute path as given when they loop (opening it then says
    so, as the error of whatever reads it)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # "Symlink loop from ..." (RuntimeError before Python 3.13)
        return path.absolute()


def write_atomic(path: Path, data: bytes, mode: Optional[int] = None) -> None:
    """Write ``data`` to ``path`` in one step. A symbolic link is written through (its target gets the data, the
    link stays); anything there that is not a regular file (a directory, a FIFO, a device) is refused with an
    OSError, never replaced by a file. ``mode``: the file's permissions (0o600 for what may hold a secret), else
    those of the file replaced, or a new file's default."""
    path = Path(os.path.realpath(path))
    if path.is_symlink():  # what realpath leaves a link is a loop
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
    if path.exists() and not path.is_file():
        raise OSError(errno.EEXIST, "it exists and is not a regular file", str(path))
    if path.parent.exists() and not path.parent.is_dir():
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path.parent))
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # here: the list path reads this module (real_path) and never writes

    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path) if mode is None else mode)  # mkstemp's 0600 would make a shared lock or site file private
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
