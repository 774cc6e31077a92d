"""What a publication that died (SIGKILL, a power cut, SIGTERM while it published) left in the shared directory, and
its removal by the next publication of the name or an admin's `envkit envs`.

A publication marks its version before making it: ``state/runs/NAME/VERSION/`` (also where its create keeps its
journal and records) is made first and removed last. The version is published once its record names it (the record
is written before ``current`` is repointed, so a publication killed between the two is published, and ``current``
is set right). A run's mark found while nobody publishes the name (its publication lock is free) is therefore a
dead run's: an unpublished version of it is deleted, with its mark, and the modulefiles are written again from the
record (they may name the dead version), or removed when the name has no record.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

from envkit.shared.layout import SharedLayout, is_version
from envkit.shared.tree import opened


def run_mark(layout: SharedLayout, name: str, version: str) -> Path:
    return layout.state / "runs" / name / version


def begin(layout: SharedLayout, name: str, version: str) -> Path:
    """Mark the run that is about to make ``version`` of ``name`` (its directory: the run's own data directory)."""
    with opened(layout, ("state", "runs", name, version)):
        pass
    return run_mark(layout, name, version)


def marked(layout: SharedLayout, name: str) -> list[str]:
    """The versions of ``name`` a run has marked and not finished."""
    try:
        return sorted(entry.name for entry in os.scandir(layout.state / "runs" / name)
                      if is_version(entry.name) and entry.is_dir(follow_symlinks=False))
    except OSError:
        return []


def names_marked(layout: SharedLayout) -> list[str]:
    """The names with a run's mark (only an admin may read ``state/``: none for anyone else)."""
    try:
        return sorted(entry.name for entry in os.scandir(layout.state / "runs")
                      if entry.is_dir(follow_symlinks=False) and marked(layout, entry.name))
    except OSError:
        return []


def finish(layout: SharedLayout, name: str, version: str) -> Optional[Path]:
    """The end of the run that made ``version`` (the caller holds the name's publication lock): unless its record
    names it, the version is deleted; then its mark. The deleted version's path, or None."""
    from envkit.shared.publish import current_version, point_current, remove_version
    from envkit.shared.store import load_quietly

    record = load_quietly(layout, name)
    published = record is not None and Path(record.prefix) == layout.prefix(name, version)
    removed = None
    if published:
        if current_version(layout, name) != version:
            point_current(layout, name, version)
    elif os.path.lexists(layout.prefix(name, version)):
        remove_version(layout, name, version)
        removed = layout.prefix(name, version)
    shutil.rmtree(run_mark(layout, name, version), ignore_errors=True)
    return removed


def sweep(layout: SharedLayout, name: str) -> list[Path]:
    """Every dead run's leftovers of ``name`` removed (the caller holds the name's publication lock: no run of it
    is alive); the versions deleted. When one was, the modulefiles are written again from the record (or removed:
    no record)."""
    from envkit.shared.publish import record_gid, remove_modulefiles, write_modulefiles
    from envkit.shared.store import load_quietly

    removed = [path for version in marked(layout, name) for path in [finish(layout, name, version)]
               if path is not None]
    if removed:
        record = load_quietly(layout, name)
        if record is None:
            remove_modulefiles(layout, name)
        else:
            write_modulefiles(layout, record, record_gid(layout, record))
    return removed
