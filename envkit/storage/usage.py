"""Disk usage as ``du`` counts it: blocks really allocated, each file once however many hard links it has (an
environment linked from the cache costs only what it does not share), and the number of files and directories.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, Optional


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
    total_bytes = total_files = 0
    for status in _walk(root):
        key = (status.st_dev, status.st_ino)
        if key in seen:
            continue
        seen.add(key)
        total_bytes += status.st_blocks * 512
        total_files += 1
    return Usage(total_bytes, total_files)


def freed_by_removing(roots: Iterable[Path]) -> int:
    """The bytes that deleting the trees ``roots`` gives back: each inode all of whose hard links lie in them (a
    file an environment is also linked to stays on disk, and frees nothing), counted once."""
    links: dict[tuple[int, int], list[int]] = {}  # inode -> [links seen, links it has, bytes]
    for root in roots:
        for status in _walk(root):
            # (a directory's own link count counts its subdirectories' ".."; it goes with its tree)
            nlink = 1 if stat.S_ISDIR(status.st_mode) else status.st_nlink
            seen = links.setdefault((status.st_dev, status.st_ino), [0, nlink, status.st_blocks * 512])
            seen[0] += 1
    return sum(size for count, nlink, size in links.values() if count >= nlink)


def _walk(root: Path) -> Iterator[os.stat_result]:
    """The lstat of ``root`` and of everything in its tree, symbolic links not followed; what vanishes or cannot be
    read during the walk is skipped."""
    try:
        top = os.lstat(root)
    except OSError:
        return
    yield top
    if not os.path.isdir(root) or os.path.islink(root):
        return
    pending = [str(root)]
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
            yield status
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)


def usage_of(roots: Iterable[Path], seen: Optional[set[tuple[int, int]]] = None) -> list[Usage]:
    """Each root's usage, in order, a file shared with an earlier root counted with that one only."""
    seen = set() if seen is None else seen
    return [disk_usage(root, seen) for root in roots]
