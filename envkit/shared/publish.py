"""Publishing a version that `envkit create --shared` made: everyone (or one group) may read it, nobody but the
admins write it; its record, its modulefiles and the stable name then point at it, in that order, each in one step.

A published version is never changed again: a replacement is a new version beside it, and the stable name
(``envs/NAME/current``) and the record are repointed, so a job that runs the old one keeps running it. Old versions
are removed explicitly (:func:`retire`), never the current one.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from envkit.errors import BadInputError, EnvkitError
from envkit.shared.layout import CURRENT, SharedLayout, is_version, shown_name
from envkit.shared.modulefile import lua_text, module_info, tcl_text
from envkit.shared.store import write_file
from envkit.state.records import Record


def dir_mode(gid: Optional[int]) -> int:
    return 0o2750 if gid is not None else 0o755


def make_layout(layout: SharedLayout, name: str) -> None:
    """The layout's directories, readable by everyone (what is in them says who may read it)."""
    for path in (layout.envs, layout.records, layout.modulefiles, layout.modulefiles / "envkit", layout.state,
                 layout.versions_dir(name)):
        path.mkdir(mode=0o755, exist_ok=True)
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise EnvkitError(f"{path} is not a directory", hint="Move it away, then publish again.")


def make_readable(prefix: Path, gid: Optional[int]) -> None:
    """Every file of ``prefix`` readable (and a program runnable) by everyone, or by group ``gid`` only (its
    directories setgid, so what the admins add later stays in it), and writable by nobody but its owner."""
    def fix(path: Path, is_dir: bool) -> None:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return
        if gid is not None:
            os.lchown(path, -1, gid)
        if is_dir:
            os.chmod(path, dir_mode(gid))
            return
        runnable = bool(info.st_mode & stat.S_IXUSR)
        reader = 0o5 if runnable else 0o4
        os.chmod(path, (0o700 if runnable else 0o600) | (reader << 3) | (0 if gid is not None else reader))

    fix(prefix, True)
    for directory, dirs, files in os.walk(prefix):
        for entry in dirs:
            fix(Path(directory) / entry, True)
        for entry in files:
            fix(Path(directory) / entry, False)


def publish(layout: SharedLayout, record: Record, version: str, gid: Optional[int], publisher: str) -> Record:
    """Make ``record``'s environment (a new version of its name) the current one: readable, recorded with who
    published it, its modulefiles written, the stable name pointed at it. Returns the published record."""
    name = record.name
    make_readable(Path(record.prefix), gid)
    published = replace(record, extra={**record.extra, "shared": {
        "version": version, "publisher": publisher, "group": _group_name(gid),
        "published": datetime.now(timezone.utc).isoformat(timespec="seconds")}})
    file_mode = 0o640 if gid is not None else 0o644
    write_modulefiles(layout, published, gid)
    write_file(layout.record(name), (json.dumps(published.to_dict(), indent=2, sort_keys=True) + "\n").encode(),
               file_mode, gid)
    point_current(layout, name, version)
    return published


def write_modulefiles(layout: SharedLayout, record: Record, gid: Optional[int] = None) -> list[Path]:
    info = module_info(shown_name(record.name), record, _publisher(record))
    tcl, lua = layout.module_files(record.name)
    mode = 0o640 if gid is not None else 0o644
    write_file(tcl, tcl_text(info).encode(), mode, gid)
    write_file(lua, lua_text(info).encode(), mode, gid)
    return [tcl, lua]


def _publisher(record: Record) -> Optional[str]:
    shared = record.extra.get("shared") if isinstance(record.extra, dict) else None
    return shared.get("publisher") if isinstance(shared, dict) else None


def point_current(layout: SharedLayout, name: str, version: str) -> None:
    """``envs/NAME/current`` -> VERSION, in one step (a new link renamed over the old)."""
    link = layout.current(name)
    temporary = link.parent / f".{CURRENT}.{os.getpid()}.{os.urandom(4).hex()}"
    os.symlink(version, temporary)
    try:
        os.replace(temporary, link)
    except BaseException:
        os.unlink(temporary)
        raise


def _group_name(gid: Optional[int]) -> Optional[str]:
    if gid is None:
        return None
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def current_version(layout: SharedLayout, name: str) -> Optional[str]:
    try:
        return os.readlink(layout.current(name))
    except OSError:
        return None


def versions(layout: SharedLayout, name: str) -> list[str]:
    """The versions of ``name`` there are, oldest first (their names end with their time)."""
    try:
        found = [entry.name for entry in os.scandir(layout.versions_dir(name))
                 if entry.is_dir(follow_symlinks=False) and is_version(entry.name)]
    except OSError:
        return []
    return sorted(found, key=lambda v: v.rsplit("-", 1)[-1])


def retire(layout: SharedLayout, name: str, version: str) -> Path:
    """Delete an old version of ``name`` (never the current one); its path. BadInputError (exit 2) for a version
    that is not there or is current."""
    path = check_retirable(layout, name, version)
    shutil.rmtree(path)
    return path


def check_retirable(layout: SharedLayout, name: str, version: str) -> Path:
    """The directory of an old version of ``name``, which may be removed; BadInputError (exit 2) otherwise."""
    if not is_version(version) or version not in versions(layout, name):
        there = ", ".join(versions(layout, name)) or "none"
        raise BadInputError(f"{shown_name(name)} has no version {version!r}", hint=f"Its versions: {there}.")
    if version == current_version(layout, name):
        raise BadInputError(f"{version} is the current version of {shown_name(name)}: envkit removes only old ones",
                            hint="Publish a replacement first (`envkit create ... --shared --force`).")
    return layout.prefix(name, version)


def record_admin_check(layout: SharedLayout, record: Record, verify: dict) -> bool:
    """An admin's check of the current version becomes the site's "last check" (its record and modulefiles; the
    version itself is not touched). False, changing nothing, for another user or a version no longer current."""
    from envkit.shared.access import is_admin
    from envkit.shared.store import load_shared

    if not is_admin(layout.root) or not os.access(layout.records, os.W_OK):
        return False
    current = load_shared(layout, record.name)
    if current is None or current.prefix != record.prefix:
        return False
    updated = replace(current, verify=verify)
    info = os.stat(layout.record(record.name))
    gid = info.st_gid if (updated.extra.get("shared") or {}).get("group") else None
    write_modulefiles(layout, updated, gid)
    write_file(layout.record(record.name), (json.dumps(updated.to_dict(), indent=2, sort_keys=True) + "\n").encode(),
               info.st_mode & 0o777, gid)
    return True
