"""Disk usage as ``du`` counts it: blocks really allocated, each file once however many hard links it has (an
environment linked from the cache costs only what it does not share), and the number of files and directories.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, NamedTuple, Optional


class Usage(NamedTuple):
    bytes: int = 0  # allocated (st_blocks * 512), each inode once
    files: int = 0  # inodes: files, directories, links, each once

    def __add__(self, other: "Usage") -> "Usage":  # type: ignore[override]
        return Usage(self.bytes + other.bytes, self.files + other.files)


def disk_usage(root: Path, seen: Optional[set[tuple[int, int]]] = None) -> Usage:
    """What ``root`` (a directory tree; symbolic links are counted, not followed) uses on disk; an inode in
    ``seen`` (counted before, under another root) is not counted again, and each counted one is added to it. A
    tree that is gone counts zero; an entry that vanishes during the walk is skipped."""
    seen = set() if seen is None else seen
    pending = [str(root)]
    try:
        top = os.lstat(root)
    except OSError:
        return Usage()
    if (top.st_dev, top.st_ino) in seen:
        return Usage()
    seen.add((top.st_dev, top.st_ino))
    total_bytes, total_files = top.st_blocks * 512, 1
    if not os.path.isdir(root) or os.path.islink(root):
        return Usage(total_bytes, total_files)
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            key = (status.st_dev, status.st_ino)
            if key in seen:
                continue
            seen.add(key)
            total_bytes += status.st_blocks * 512
            total_files += 1
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return Usage(total_bytes, total_files)


def usage_of(roots: Iterable[Path], seen: Optional[set[tuple[int, int]]] = None) -> list[Usage]:
    """Each root's usage, in order, a file shared with an earlier root counted with that one only."""
    seen = set() if seen is None else seen
    return [disk_usage(root, seen) for root in roots]
