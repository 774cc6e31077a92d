"""Whether a package cache is this user's alone: nobody else may put or swap anything in it (issue #40).

Environments are hard-linked from the cache and their Python may live in it (``uv-python/``), so whoever can write
there can change what every environment runs; and `envkit cache clean` deletes in it, so a link planted there would
send the deletion elsewhere. The rules, checked before a create, a lock or a clean uses a cache:

- every directory from ``/`` down to the cache (its symbolic links resolved) belongs to this user or to root, and
  no one else may write it unless it is sticky (``/tmp``: others may add entries, never move or replace this
  user's); a symbolic link on the way that someone else owns is refused, as the kernel's ``protected_symlinks``
  would refuse it in a sticky directory;
- in the cache, envkit's parts (``uv/``, ``pip/``, ``conda-pkgs/``, ``uv-python/``) and its lock file
  (``.envkit-cache.lock``) are real directories and a regular file, never symbolic links, owned by this user and
  writable by nobody else. Where they do not exist yet, envkit makes them so (``claim``): in a sticky cache that
  another user shares, what they made first is refused, never used.

"Others may write" is a directory's mode for everyone (o+w), or for a group that has a member besides this user
(g+w): a user's private group (named as the user, with no other members) is the user alone.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable, Optional

from envkit.errors import ConfigError

_FIX = ("Give a cache that is yours alone (`cache_dir:` in envkit's config, or $ENVKIT_CACHE_DIR): a directory you "
        "own, in directories only you or root may change (chmod go-w), or under a sticky one such as /tmp.")


class UnsafeCache(ConfigError):
    """A package cache, or a part of it, that someone else owns, may write, or has put a link in (exit 2)."""


def _owner(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _group_is_mine(gid: int) -> bool:
    """Whether the group ``gid`` is this user's private group: their primary group, named as they are, no other
    members listed."""
    import grp

    try:
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    me = _owner(os.geteuid())
    return gid == os.getegid() and group.gr_name == me and set(group.gr_mem) <= {me}


def others_may_write(info: os.stat_result) -> Optional[str]:
    """Who besides this user and root may write a directory of this status, in words ("everyone", "the group
    lab"); None when nobody else may."""
    if info.st_mode & stat.S_IWOTH:
        return "everyone"
    if info.st_mode & stat.S_IWGRP and not _group_is_mine(info.st_gid):
        import grp

        try:
            name = grp.getgrgid(info.st_gid).gr_name
        except KeyError:
            name = str(info.st_gid)
        return f"the group {name}"
    return None


def _mode(info: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(info.st_mode):04o}"


def path_problem(path: Path) -> Optional[str]:
    """Why someone other than this user and root could replace ``path`` or what is in it, judged on the way to it
    (the nearest part that exists, when the rest is still to be made); None when nobody could."""
    me = os.geteuid()
    trusted = (me, 0)
    absolute = Path(os.path.abspath(path))
    walked = Path("/")
    for part in absolute.parts[1:]:  # the links on the way, as written
        walked = walked / part
        try:
            info = os.lstat(walked)
        except FileNotFoundError:
            break
        except OSError as error:
            return f"{walked} cannot be looked at ({error.strerror or error})"
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in trusted:
            return f"{walked} is a symbolic link that {_owner(info.st_uid)} owns"
        walked = Path(os.path.realpath(walked))
    real = Path(os.path.realpath(absolute))
    chain = [real, *real.parents]
    for directory in reversed(chain):  # from / down
        try:
            info = os.stat(directory)
        except FileNotFoundError:
            break
        except OSError as error:
            return f"{directory} cannot be looked at ({error.strerror or error})"
        if info.st_uid not in trusted:
            return f"{directory} belongs to {_owner(info.st_uid)}"
        others = others_may_write(info)
        if others is not None and not info.st_mode & stat.S_ISVTX:
            return f"{directory} may be written by {others} ({_mode(info)}, not sticky)"
    return None


def part_problem(path: Path, directory: bool = True) -> Optional[str]:
    """Why the cache's part ``path`` (a directory, or with ``directory`` False its lock file) is not this user's
    alone; None when it is, or when it does not exist."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path} cannot be looked at ({error.strerror or error})"
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link (to {os.readlink(path)}), which envkit never follows in a cache"
    if not (stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)):
        return f"{path} is not a {'directory' if directory else 'regular file'}"
    if info.st_uid != os.geteuid():
        return f"{path} belongs to {_owner(info.st_uid)}"
    others = others_may_write(info)
    if others is not None:
        return f"{path} may be written by {others} ({_mode(info)})"
    return None


def check_cache(root: Path, parts: Iterable[str], lock: str) -> None:
    """UnsafeCache (exit 2) naming what someone else could change: the way to ``root``, ``root`` itself, one of its
    ``parts`` or its ``lock`` file (see the module's rules). Reads only."""
    problem = path_problem(root)
    if problem is None:
        checked = [(root / part, True) for part in parts] + [(root / lock, False)]
        problem = next((found for found in (part_problem(path, is_dir) for path, is_dir in checked) if found), None)
    if problem is not None:
        raise UnsafeCache(f"the package cache {root} is not yours alone: {problem}; another user could change "
                          "what your environments run, or what envkit deletes, so envkit does not use it", hint=_FIX)


def claim(root: Path, parts: Iterable[str]) -> None:
    """Make ``root`` and each of ``parts`` in it that does not exist, writable by this user alone (a directory
    envkit makes is not left group-writable by a umask of 002), then check them (check_cache's rules for the parts):
    what someone else made first, in a cache they may add to, is refused, never used."""
    made = []
    for directory in (root, *(root / part for part in parts)):
        try:
            os.mkdir(directory, 0o755)
        except FileExistsError:
            continue
        except FileNotFoundError:  # the root's parents: made as `mkdir -p` makes them
            directory.mkdir(parents=True, mode=0o755)
        made.append(directory)
    for directory in made:
        info = os.lstat(directory)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and info.st_mode & 0o022:
            os.chmod(directory, stat.S_IMODE(info.st_mode) & ~0o022)


def open_lock(path: Path) -> int:
    """The cache's lock file, opened (made if needed, 0644) without following a link, and proved a regular file of
    this user's; UnsafeCache otherwise (nothing is created through a link someone planted)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError:  # a link (ELOOP), or another user's file in a sticky directory (EACCES): else as it is
        problem = part_problem(path, directory=False)
        if problem is None:
            raise
        raise UnsafeCache(f"the package cache's lock: {problem}", hint=_FIX) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        raise UnsafeCache(f"the package cache's lock: {part_problem(path, directory=False) or path}", hint=_FIX)
    return fd
