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
from typing import Callable, Optional

from envkit.errors import BadInputError
from envkit.shared.layout import CURRENT, FAMILY, SharedLayout, is_version, shown_name
from envkit.shared.modulefile import lua_text, module_info, tcl_text
from envkit.shared.tree import make_layout, opened, write_layout_file
from envkit.state.records import Record
from envkit.state.safedir import group_name
from envkit.state.testpause import pause_at

__all__ = ["make_layout", "publish", "retire", "versions", "current_version", "write_modulefiles"]


def dir_mode(gid: Optional[int]) -> int:
    return 0o2750 if gid is not None else 0o755


def file_mode(gid: Optional[int]) -> int:
    """A record's or a modulefile's mode: everyone reads it, or group ``gid`` only (a ``--group`` version's)."""
    return 0o640 if gid is not None else 0o644


def make_readable(prefix: Path, gid: Optional[int]) -> None:
    """Every file of ``prefix`` readable (and a program runnable) by everyone, or by group ``gid`` only (its
    directories setgid, so what the admins add later stays in it), and writable by nobody but its owner: modes set
    explicitly, whatever the umask it was made under."""
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


def publish(layout: SharedLayout, record: Record, version: str, gid: Optional[int], publisher: str,
            check: Optional[Callable[[Record], None]] = None) -> Record:
    """Make ``record``'s environment (a new version of its name) the current one: readable, recorded with who
    published it, its modulefiles written, its record, then the stable name pointed at it (the record is what
    publishes it: a publication killed before it left a version that the next one removes, envkit.shared.leftovers).
    ``check``, run once the version is readable and before anything names it, raises to publish nothing. Returns
    the published record."""
    name = record.name
    pause_at("publishing")
    make_layout(layout, name)
    make_readable(Path(record.prefix), gid)
    if check is not None:
        check(record)
    published = replace(record, extra={**record.extra, "shared": {
        "version": version, "publisher": publisher, "group": group_name(gid) if gid is not None else None,
        "published": datetime.now(timezone.utc).isoformat(timespec="seconds")}})
    write_modulefiles(layout, published, gid)
    write_record(layout, published, gid)
    pause_at("published-record")
    point_current(layout, name, version)
    return published


def write_record(layout: SharedLayout, record: Record, gid: Optional[int]) -> Path:
    data = (json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n").encode()
    return write_layout_file(layout, ("records",), f"{record.name}.json", data, file_mode(gid), gid)


def write_modulefiles(layout: SharedLayout, record: Record, gid: Optional[int] = None) -> list[Path]:
    """Both modulefiles of ``record`` (the Tcl one only where its path allows: envkit.shared.modulefile.check_tcl_path,
    which publishing checked first)."""
    info = module_info(shown_name(record.name), record, _publisher(record))
    return [write_layout_file(layout, ("modulefiles", FAMILY), name, text.encode(), file_mode(gid), gid)
            for name, text in ((record.name, tcl_text(info)), (f"{record.name}.lua", lua_text(info)))]


def remove_modulefiles(layout: SharedLayout, name: str) -> None:
    with opened(layout, ("modulefiles", FAMILY)) as here:
        for entry in (name, f"{name}.lua"):
            try:
                os.unlink(entry, dir_fd=here)
            except FileNotFoundError:
                pass


def _publisher(record: Record) -> Optional[str]:
    shared = record.extra.get("shared") if isinstance(record.extra, dict) else None
    return shared.get("publisher") if isinstance(shared, dict) else None


def point_current(layout: SharedLayout, name: str, version: str) -> None:
    """``envs/NAME/current`` -> VERSION, in one step (a new link renamed over the old), in the directory opened
    without following a link."""
    with opened(layout, ("envs", name)) as here:
        temporary = f".{CURRENT}.{os.getpid()}.{os.urandom(4).hex()}"
        os.symlink(version, temporary, dir_fd=here)
        try:
            os.replace(temporary, CURRENT, src_dir_fd=here, dst_dir_fd=here)
        except BaseException:
            os.unlink(temporary, dir_fd=here)
            raise


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
    remove_version(layout, name, version)
    return path


def remove_version(layout: SharedLayout, name: str, version: str) -> None:
    """Delete the version directory ``envs/NAME/VERSION``, its way there checked first (no link on it); rmtree
    follows no link inside it."""
    with opened(layout, ("envs", name)):
        pass
    shutil.rmtree(layout.prefix(name, version))


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
    gid = record_gid(layout, updated)
    write_modulefiles(layout, updated, gid)
    write_record(layout, updated, gid)
    return True


def record_gid(layout: SharedLayout, record: Record) -> Optional[int]:
    """The group a ``--group`` publication's files belong to (its record's group); None for one everyone reads."""
    return os.stat(layout.record(record.name)).st_gid if (record.extra.get("shared") or {}).get("group") else None
