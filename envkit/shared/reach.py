"""Whether the users a shared environment is published for can reach it: every directory from ``/`` to its prefix and
to the Python it runs on (a venv's base interpreter, its standard library and its libpython) entered, each file read
or run. Judged from the modes (owner, group and others bits), for everyone or for the members of one group, before a
publication is announced; and for the user at hand (their real access, ACLs included) when a `run` or `verify` of a
site environment meets a permission, so that the error names the directory and its owner.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable, NamedTuple, Optional

from envkit.state.safedir import group_name, owner_name

_MAX_LINKS = 40
ENTER, READ, RUN = "enter", "read", "run"
_BITS = {ENTER: stat.S_IXOTH, READ: stat.S_IROTH, RUN: stat.S_IXOTH}


class Audience(NamedTuple):
    """Who a shared environment is for: everyone (``gid`` None) or the members of group ``gid``."""

    gid: Optional[int] = None

    def words(self) -> str:
        return "every user" if self.gid is None else f"the group {group_name(self.gid)}"

    def who(self) -> str:
        """Who is stopped, as the subject of "cannot"."""
        return "other users" if self.gid is None else f"members of the group {group_name(self.gid)}"

    def allows(self, info: os.stat_result, need: str) -> bool:
        """Whether every one of them may ``need`` (ENTER, READ, RUN) what ``info`` describes."""
        other = _BITS[need]
        group, owner = other << 3, other << 6
        mode = info.st_mode
        if self.gid is not None and info.st_gid == self.gid:
            return bool(mode & group)
        owner_ok = info.st_uid == 0 or bool(mode & owner)  # (the owner may be one of them; root passes anyway)
        return bool(mode & other) and bool(mode & group) and owner_ok


class Blocked(NamedTuple):
    """What stops them: ``path`` they cannot ``need``."""

    path: Path
    need: str
    info: os.stat_result

    def words(self, who: str) -> str:
        kind = "directory" if stat.S_ISDIR(self.info.st_mode) else "file"
        return (f"{who} cannot {self.need} the {kind} {self.path} ({owner_name(self.info.st_uid)}'s, "
                f"group {group_name(self.info.st_gid)}, mode {stat.S_IMODE(self.info.st_mode):04o})")


Judge = Callable[[Path, os.stat_result, str], bool]


def for_audience(audience: Audience) -> Judge:
    return lambda path, info, need: audience.allows(info, need)


def for_me(path: Path, info: os.stat_result, need: str) -> bool:
    """This user's own access (os.access: ACLs and groups as the kernel judges them)."""
    return os.access(path, {ENTER: os.X_OK, READ: os.R_OK, RUN: os.X_OK}[need])


def blocked(path: Path, need: str, judge: Judge) -> Optional[Blocked]:
    """The first thing on the way to ``path`` (absolute) that ``judge`` says cannot be passed: a directory that cannot
    be entered, then ``path`` itself that cannot be ``need``-ed; links followed as the kernel follows them (their
    own directories judged too). None: nothing stops them (or ``path`` is not there: not this check's to say)."""
    pending = [part for part in str(path).split("/") if part]
    here = Path("/")
    links = 0
    while True:
        try:
            info = os.stat(here)
        except OSError:
            return None
        last = not pending
        want = need if last else ENTER
        if not judge(here, info, want):
            return Blocked(here, want, info)
        if last:
            return None
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            here = here.parent
            continue
        step = here / name
        try:
            entry = os.lstat(step)
        except OSError:
            return None
        if stat.S_ISLNK(entry.st_mode) and links < _MAX_LINKS:
            links += 1
            target = os.readlink(step)
            pending[:0] = [part for part in target.split("/") if part]
            here = Path("/") if target.startswith("/") else here
            continue
        here = step


def base_needs(base: Path, short: str) -> list[tuple[Path, str]]:
    """What an interpreter installed under ``base`` (its ``bin``'s parent) of Python ``short`` (X.Y) needs read: its
    standard library and its libpython."""
    return [(base / "lib" / f"python{short}" / "os.py", READ),
            *((library, READ) for library in sorted((base / "lib").glob(f"libpython{short}*.so*")))]


def python_needs(prefix: Path) -> list[tuple[Path, str]]:
    """What running ``prefix``'s Python needs: its ``bin/python`` run and, for a venv, its ``pyvenv.cfg`` read and
    what its base interpreter needs (:func:`base_needs`)."""
    needs = [(prefix / "bin" / "python", RUN)]
    config = prefix / "pyvenv.cfg"
    try:
        lines = config.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return needs
    needs.append((config, READ))
    values = {key.strip(): value.strip() for key, _, value in (line.partition("=") for line in lines)}
    home, version = values.get("home"), values.get("version") or values.get("version_info")
    if home and os.path.isabs(home) and version:
        needs += base_needs(Path(home).parent, ".".join(version.split(".")[:2]))
    return needs


def first_blocked(needs: list[tuple[Path, str]], judge: Judge) -> Optional[Blocked]:
    """The first thing that stops ``judge``'s users from each ``(path, need)`` of ``needs``."""
    for path, need in needs:
        found = blocked(path, need, judge)
        if found is not None:
            return found
    return None
