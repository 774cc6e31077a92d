"""The room a new environment needs against the room its filesystems have.

The size comes from a measurement: after each create, the environment's size and file count (counted on their own,
as if it shared nothing with the cache) are kept per build, Python and backend in ``sizes.json`` in envkit's data
directory. The next environment of the same build is within a few percent of it (unless the build's unpinned
dependencies moved since); a build never made on this machine has no estimate: the plan says so and create goes on.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import NamedTuple, Optional

from envkit.storage.links import nearest_existing
from envkit.storage.usage import Usage
from envkit.text.words import size_text


class Free(NamedTuple):
    where: Path  # the directory asked (the nearest that exists)
    bytes: int  # free to an unprivileged user (f_bavail)
    files: int  # free inodes to an unprivileged user (f_favail)
    device: int  # st_dev of `where`: whether two places count against one filesystem's free space


def free_space(path: Path) -> Optional[Free]:
    where = nearest_existing(path)
    try:
        stats = os.statvfs(where)
        device = os.stat(where).st_dev
    except OSError:
        return None
    return Free(where, stats.f_bavail * stats.f_frsize, stats.f_favail, device)


def size_key(build: str, python: str, backend: str) -> str:
    return f"{build} python{python} {backend}"


def recorded_size(data_dir: Path, key: str) -> Optional[Usage]:
    """The size kept for ``key``, or None (never measured, or the file cannot be read: no estimate, never an error)."""
    try:
        entry = json.loads((data_dir / "sizes.json").read_text(encoding="utf-8"))[key]
        return Usage(int(entry["bytes"]), int(entry["files"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


MEASURE_AGAIN_AFTER = timedelta(days=7)


def measurement_due(data_dir: Path, key: str, now: Optional[datetime] = None) -> bool:
    """Whether a new environment of ``key`` is to be measured: none is kept for it (or it cannot be read), or the
    one kept is older than MEASURE_AGAIN_AFTER (the build's unpinned dependencies may have moved). Measuring walks
    every file of the environment (0.17 s for the 15,000 files of the real torch CPU build: most of what `create`
    adds to the installer's own time), so the same build made again within a week keeps its measurement."""
    try:
        entry = json.loads((data_dir / "sizes.json").read_text(encoding="utf-8"))[key]
        int(entry["bytes"]), int(entry["files"])
        measured = datetime.fromisoformat(entry["measured"])
    except (OSError, ValueError, KeyError, TypeError):
        return True
    if measured.tzinfo is None:
        return True
    age = (now or datetime.now(timezone.utc)) - measured
    return not timedelta(0) <= age < MEASURE_AGAIN_AFTER  # (a time ahead of now: a clock that moved, measure)


def record_size(data_dir: Path, key: str, usage: Usage) -> None:
    """Keep ``usage`` for ``key`` (best effort: a file that cannot be written loses an estimate, nothing else)."""
    from envkit.state.files import write_atomic

    path = data_dir / "sizes.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[key] = {"bytes": usage.bytes, "files": usage.files,
                 "measured": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        write_atomic(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))
    except OSError:
        pass


class Need(NamedTuple):
    what: str  # "the environment", "the cache"
    free: Free
    usage: Usage  # what it needs there


def needs(size: Usage, target: Free, cache: Optional[Free], links: bool) -> list[Need]:
    """What each filesystem must have free for a new environment of ``size``, counting the cache as cold (an upper
    bound): one copy where the cache and the environment share a filesystem and hard links work, two where they share
    one and links fail, one on each when they are apart. Pure."""
    if cache is None:
        return [Need("the environment", target, size)]
    if cache.device == target.device:
        times = 1 if links else 2
        return [Need("the environment and the cache", target, Usage(size.bytes * times, size.files * times))]
    return [Need("the environment", target, size), Need("the cache", cache, size)]


def shortfalls(wanted: list[Need]) -> list[str]:
    """Each need its filesystem cannot meet, in words with the numbers; empty when all fit. Pure."""
    out = []
    for need in wanted:
        short = []
        if need.usage.bytes > need.free.bytes:
            short.append(f"{size_text(need.usage.bytes)} needed, {size_text(need.free.bytes)} free")
        if need.usage.files > need.free.files:
            short.append(f"{need.usage.files:,} files needed, {need.free.files:,} free (inodes)")
        if short:
            out.append(f"{need.what} on {need.free.where}: {'; '.join(short)}")
    return out
