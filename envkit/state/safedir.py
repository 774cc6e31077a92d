"""Directories opened and made, and files written in them, without following a link another user planted.

A path is walked from ``/`` one component at a time, each opened relative to the directory opened before it
(``openat``), so that what is checked is what is used. A component that another user owns inside a directory others
may write (sticky ``/tmp``, a group-writable directory) is refused, a link as much as a directory: root writing
``-o /tmp/mods`` must not follow ``/tmp/mods/envkit -> /victim`` that a user made. Trusted there: root, this user,
the directory's owner, and, in a directory only its group may write, anyone when this user is of that group (a
shared directory of the admins: each could replace the others' files anyway). A trusted link is followed by walking
its target the same way.

Below a directory so opened, :func:`open_child` opens or makes one directory (never through a link, with its mode
and group set explicitly, whatever the umask) and :func:`write_in` writes a file: a new file made exclusively beside
it, then renamed over the name, so that a reader sees the old file or the new, and a link at the name is replaced,
never followed. Every refusal is UnsafePath (exit 2), naming the component, its owner and the directory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

from envkit.errors import BadInputError

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_MAX_LINKS = 40  # as the kernel's own path walk


class UnsafePath(BadInputError):
    """A path envkit will not write through: a component another user could have planted, a link where none may
    be, something that is not a directory."""


def owner_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def group_name(gid: int) -> str:
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return f"gid {gid}"


def others_may_write(info: os.stat_result) -> bool:
    """Whether users other than the owner may add entries to the directory ``info`` describes."""
    return bool(info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def trusted_in(parent: os.stat_result, entry: os.stat_result) -> bool:
    """Whether an entry owned as ``entry`` may be used inside the directory ``parent`` (see the module's
    docstring)."""
    if not others_may_write(parent) or entry.st_uid in (0, os.geteuid(), parent.st_uid):
        return True
    return not parent.st_mode & stat.S_IWOTH and os.geteuid() != 0 and \
        (parent.st_gid == os.getegid() or parent.st_gid in os.getgroups())


def _refusal(shown: str, entry: os.stat_result, parent_shown: str, parent: os.stat_result) -> UnsafePath:
    kind = "a symbolic link" if stat.S_ISLNK(entry.st_mode) else "a directory" if stat.S_ISDIR(entry.st_mode) \
        else "a file"
    who = "everyone" if parent.st_mode & stat.S_IWOTH else f"the group {group_name(parent.st_gid)}"
    return UnsafePath(f"{shown} is {kind} of {owner_name(entry.st_uid)}'s in {parent_shown}, which {who} may "
                      "write: envkit does not write through what another user could have put there",
                      hint=f"Use a directory of your own, or have {shown} removed.")


def open_dir(path: Path, create: bool = False, mode: int = 0o755, gid: Optional[int] = None) -> int:
    """A descriptor of the directory ``path`` (absolute, or from the working directory), walked as the module's
    docstring says; the caller closes it. With ``create``, missing components are made with ``mode`` (and group
    ``gid``) set explicitly. UnsafePath for a component refused or not a directory; FileNotFoundError (``create``
    False) for one that is missing; OSError for one that cannot be opened or made."""
    pending = list(Path(os.path.join(os.getcwd(), path)).parts[1:])
    stack = [os.open("/", _DIRECTORY)]
    names: list[str] = []
    links = 0
    try:
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                    names.pop()
                continue
            here = stack[-1]
            parent = os.fstat(here)
            shown, parent_shown = "/" + "/".join([*names, name]), "/" + "/".join(names)
            try:
                entry = os.stat(name, dir_fd=here, follow_symlinks=False)
            except FileNotFoundError:
                if not create:
                    raise
                stack.append(_make(here, name, shown, mode, gid))
                names.append(name)
                continue
            if not trusted_in(parent, entry):
                raise _refusal(shown, entry, parent_shown, parent)
            if stat.S_ISLNK(entry.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    raise UnsafePath(f"{path}: too many symbolic links on the way")
                target = os.readlink(name, dir_fd=here)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names.clear()
                pending[:0] = [part for part in target.split("/") if part]
                continue
            stack.append(_open_same(here, name, shown, entry))
            names.append(name)
        result = stack.pop()
        return result
    finally:
        for fd in stack:
            os.close(fd)


def _open_same(here: int, name: str, shown: str, entry: os.stat_result) -> int:
    """``name`` in ``here`` opened as a directory, never through a link, and the very entry ``entry`` described."""
    if not stat.S_ISDIR(entry.st_mode):
        raise UnsafePath(f"{shown} is not a directory", hint="Name a directory, or move the file away.")
    fd = os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=here)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (entry.st_dev, entry.st_ino):
        os.close(fd)
        raise UnsafePath(f"{shown} was replaced while envkit opened it", hint="Run this again.")
    return fd


def _make(here: int, name: str, shown: str, mode: int, gid: Optional[int], layout: bool = False) -> int:
    """``name`` made in ``here`` (or, made meanwhile by someone else, opened as found) with ``mode`` and ``gid``."""
    try:
        os.mkdir(name, 0o700, dir_fd=here)  # nobody else's until its mode is set
    except FileExistsError:
        entry = os.stat(name, dir_fd=here, follow_symlinks=False)
        parent = os.fstat(here)
        if stat.S_ISLNK(entry.st_mode) or not (layout or trusted_in(parent, entry)):
            raise _refusal(shown, entry, str(Path(shown).parent), parent) from None
        return _open_same(here, name, shown, entry)
    fd = os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=here)
    set_mode(fd, mode, gid)
    return fd


def set_mode(fd: int, mode: int, gid: Optional[int] = None) -> None:
    """``mode`` (and group ``gid``) on what ``fd`` opened, the group first: changing a group clears setgid."""
    if gid is not None and os.fstat(fd).st_gid != gid:
        os.fchown(fd, -1, gid)
    os.fchmod(fd, mode)


def open_child(here: int, name: str, shown: Path, mode: int, gid: Optional[int] = None,
               layout: bool = False) -> int:
    """The directory ``name`` in the directory ``here`` (``shown``: its path, for messages), made with ``mode`` and
    ``gid`` when missing; a link or anything but a directory there is refused (UnsafePath), and so is one another
    user could have put there (:func:`trusted_in`). ``layout``: a directory of a layout whose writers trust each
    other (the shared directory's admins: its owner may be any of them), and an existing one of this user's gets
    ``mode`` and ``gid`` too (made under another umask)."""
    try:
        entry = os.stat(name, dir_fd=here, follow_symlinks=False)
    except FileNotFoundError:
        return _make(here, name, str(shown), mode, gid, layout)
    parent = os.fstat(here)
    if not layout and not trusted_in(parent, entry):
        raise _refusal(str(shown), entry, str(shown.parent), parent)
    if stat.S_ISLNK(entry.st_mode):
        raise UnsafePath(f"{shown} is a symbolic link (to {os.readlink(name, dir_fd=here)}): envkit makes its "
                         "directories there itself, never through a link", hint=f"Move {shown} away.")
    fd = _open_same(here, name, str(shown), entry)
    if layout and entry.st_uid == os.geteuid() and (stat.S_IMODE(entry.st_mode) != mode or
                                                    (gid is not None and entry.st_gid != gid)):
        set_mode(fd, mode, gid)
    return fd


def write_in(here: int, name: str, data: bytes, mode: int, gid: Optional[int] = None,
             shown: Optional[Path] = None) -> None:
    """``data`` written as ``name`` in the directory ``here`` in one step, with ``mode`` and ``gid`` set before it
    appears; a link at ``name`` is replaced, never followed; a directory or a special file there is refused."""
    shown = shown or Path(name)
    try:
        there = os.stat(name, dir_fd=here, follow_symlinks=False)
    except FileNotFoundError:
        there = None
    if there is not None and not (stat.S_ISREG(there.st_mode) or stat.S_ISLNK(there.st_mode)):
        raise UnsafePath(f"{shown} is not a regular file: envkit replaces only a file there",
                         hint=f"Move {shown} away.")
    temporary = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=here)
    try:
        with os.fdopen(fd, "wb") as out:
            set_mode(out.fileno(), mode, gid)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, name, src_dir_fd=here, dst_dir_fd=here)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=here)
        except FileNotFoundError:
            pass
        raise


def write_file(path: Path, data: bytes, mode: int, gid: Optional[int] = None) -> None:
    """``data`` as the file ``path``: its directory opened by :func:`open_dir`, the file by :func:`write_in`."""
    here = open_dir(path.parent)
    try:
        write_in(here, path.name, data, mode, gid, shown=path)
    finally:
        os.close(here)
