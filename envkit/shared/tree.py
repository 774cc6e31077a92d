"""The shared directory's own directories, made and opened so that nothing is written through a link: the root is
walked from ``/`` as envkit.state.safedir walks any path (refusing what another user could have planted on the way), and
every directory of the layout below it is opened relative to the one above it, never through a link, and made with
its mode and group set explicitly, whatever the umask of the admin who publishes.

Their mode follows the root's: a root its group may write (``chmod 2775``, the admins' group) gets directories that
group may write, setgid so that what any admin makes there stays the group's (``2775``), and the admins trust each
other's directories there; a root only its owner writes gets ``0755``. Everyone may read and enter them: what is in
them says who may read it (a ``--group`` version is its group's only).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Iterator, NamedTuple, Optional, Sequence

from envkit.shared.layout import FAMILY, SharedLayout
from envkit.state.safedir import UnsafePath, open_child, open_dir, write_in


class Modes(NamedTuple):
    directory: int  # every directory of the layout
    gid: Optional[int]  # the admins' group (the root's), when that group may write the root


def layout_modes(root: os.stat_result) -> Modes:
    """The layout's modes for a root whose status is ``root`` (see the module's docstring)."""
    if root.st_mode & stat.S_IWGRP:
        return Modes(0o2775, root.st_gid)
    return Modes(0o755, None)


def parts_of(name: str) -> list[tuple[str, ...]]:
    """Every directory of the layout a publication of ``name`` writes, relative to the root, parents first."""
    return [("envs",), ("envs", name), ("records",), ("modulefiles",), ("modulefiles", FAMILY), ("state",),
            ("state", "locks"), ("state", "runs"), ("state", "runs", name)]


@contextlib.contextmanager
def opened(layout: SharedLayout, parts: Sequence[str]) -> Iterator[int]:
    """A descriptor of the layout's directory ``root/parts...``, each component made when missing (with the
    layout's modes) or opened as it is, never through a link (UnsafePath)."""
    fds = [open_dir(layout.root)]
    try:
        modes = layout_modes(os.fstat(fds[0]))
        for depth, part in enumerate(parts, start=1):
            fds.append(open_child(fds[-1], part, layout.root.joinpath(*parts[:depth]), modes.directory, modes.gid,
                                  layout=True))
        yield fds[-1]
    finally:
        for fd in reversed(fds):
            os.close(fd)


def make_layout(layout: SharedLayout, name: str) -> None:
    """Every directory a publication of ``name`` writes, made (or its modes set again, when this admin made it
    under another umask); UnsafePath (exit 2) for a link or a file where one of them goes."""
    for parts in parts_of(name):
        with opened(layout, parts):
            pass


def check_layout(layout: SharedLayout, name: str) -> None:
    """What :func:`make_layout` would refuse, refused without writing anything (before a publication's work, and
    for a dry run): a link or a file where a directory of the layout goes."""
    for parts in parts_of(name):
        path = layout.root.joinpath(*parts)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue  # (made when publishing; nothing below it is there either)
        except NotADirectoryError:
            raise UnsafePath(f"{path.parent} is not a directory", hint=f"Move {path.parent} away.") from None
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePath(f"{path} is a symbolic link (to {os.readlink(path)}): envkit publishes only into "
                             "directories of the shared directory itself", hint=f"Move {path} away, then publish.")
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafePath(f"{path} is not a directory", hint=f"Move {path} away, then publish.")


def write_layout_file(layout: SharedLayout, parts: Sequence[str], name: str, data: bytes, mode: int,
                      gid: Optional[int] = None) -> Path:
    """``data`` as the file ``name`` in the layout's directory ``parts``, in one step, never through a link, with
    ``mode`` and ``gid``; its path."""
    path = layout.root.joinpath(*parts, name)
    with opened(layout, parts) as here:
        write_in(here, name, data, mode, gid, shown=path)
    return path
