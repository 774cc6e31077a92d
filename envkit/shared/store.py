"""Reading the shared records, and the one function that writes a file into the shared directory (a modulefile, a
record): a new file beside it, then a rename over the old one (envkit.state.output), so a reader sees the old file or
the new, never half of one, and a link at the path is replaced, never followed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from envkit.errors import EnvkitError
from envkit.shared.layout import SharedLayout, shown_name
from envkit.state import records
from envkit.state.records import Record


def write_file(path: Path, data: bytes, mode: int = 0o644, gid: Optional[int] = None) -> None:
    """Write ``data`` to ``path`` in one step, with ``mode`` (and group ``gid``) set before it appears there, never
    through a link (envkit.state.output.write_output, as every file envkit writes where it is told to)."""
    from envkit.state.output import write_output

    write_output(path, data, force=True, mode=mode, gid=gid, what="the shared file")  # a link: replaced, unfollowed


def shared_info(record: Record) -> dict[str, Any]:
    """What the shared record adds to an environment's own (publisher, when, version, group)."""
    info = record.extra.get("shared") if isinstance(record.extra, dict) else None
    return info if isinstance(info, dict) else {}


def is_shared(record: Record) -> bool:
    """Whether ``record`` is a published one (the site's, read from the shared directory)."""
    return bool(shared_info(record))


def load_shared(layout: SharedLayout, name: str) -> Optional[Record]:
    """The published record of ``name``, None when there is none; EnvkitError when it cannot be read."""
    record = records.load(layout.records, name)
    if record is not None and not Path(record.prefix).is_relative_to(layout.envs):
        raise EnvkitError(f"{layout.record(name)} names {record.prefix}, outside the shared directory's envs",
                          hint="Ask the site's admins to publish it again.")
    return record


def all_shared(layout: Optional[SharedLayout]) -> list[Record]:
    """Every published environment (unreadable records are left out), by name; none without a shared directory."""
    if layout is None:
        return []
    return [r for r in records.load_all(layout.records) if Path(r.prefix).is_relative_to(layout.envs)]


def own_checks_path(data_dir: Path, name: str) -> Path:
    """Where a user keeps their own check of a shared environment (in their data directory, never the shared one)."""
    return data_dir / "shared-checks" / f"{name}.json"


def own_check(data_dir: Path, record: Record) -> Optional[dict[str, Any]]:
    """The user's last check of the shared environment's current version, if they made one."""
    try:
        data = json.loads(own_checks_path(data_dir, record.name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("prefix") != record.prefix or not isinstance(data.get("verify"), dict):
        return None
    return data["verify"]


def save_own_check(data_dir: Path, record: Record, verify: dict[str, Any]) -> None:
    path = own_checks_path(data_dir, record.name)
    records.write_json_atomic(path, {"name": shown_name(record.name), "prefix": record.prefix, "verify": verify})
