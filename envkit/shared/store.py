"""Reading the shared records (what is written there, and how: envkit.shared.publish and envkit.shared.tree), and a
user's own checks of a shared environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from envkit.errors import EnvkitError
from envkit.shared.layout import SharedLayout, shown_name
from envkit.state import records
from envkit.state.records import Record


def shared_info(record: Record) -> dict[str, Any]:
    """What the shared record adds to an environment's own (publisher, when, version, group)."""
    info = record.extra.get("shared") if isinstance(record.extra, dict) else None
    return info if isinstance(info, dict) else {}


def is_shared(record: Record) -> bool:
    """Whether ``record`` is a published one (the site's, read from the shared directory)."""
    return bool(shared_info(record))


def load_shared(layout: SharedLayout, name: str) -> Optional[Record]:
    """The published record of ``name``, None when there is none; EnvkitError (exit 1) when it cannot be read,
    saying whose it is and asking the admins (never the hint for a user's own record: `envkit remove NAME` would
    remove the user's environment of that name)."""
    try:
        record = records.load(layout.records, name)
    except EnvkitError as error:
        path = layout.record(name)
        raise EnvkitError(f"{error.message} (the site's record of {shown_name(name)}, {_owner(path)}'s)",
                          hint=f"It is the site's, not yours: ask the site's admins ({_owner(layout.root)}, who "
                               f"publish in {layout.root}) to publish {shown_name(name)} again.") from None
    if record is not None and not Path(record.prefix).is_relative_to(layout.envs):
        raise EnvkitError(f"{layout.record(name)} names {record.prefix}, outside the shared directory's envs",
                          hint="Ask the site's admins to publish it again.")
    return record


def load_quietly(layout: SharedLayout, name: str) -> Optional[Record]:
    """The published record of ``name``; None when there is none or it cannot be read."""
    try:
        return load_shared(layout, name)
    except EnvkitError:
        return None


def _owner(path: Path) -> str:
    import os

    from envkit.state.safedir import owner_name

    try:
        return owner_name(os.lstat(path).st_uid)
    except OSError:
        try:
            return owner_name(os.lstat(path.parent).st_uid)
        except OSError:
            return "the site's admins"


def scan_shared(layout: Optional[SharedLayout]) -> tuple[list[Record], list[tuple[str, EnvkitError]]]:
    """Every published environment, by name, and (NAME, the error :func:`load_shared` gives) for each record that
    cannot be read; none without a shared directory."""
    if layout is None:
        return [], []
    try:
        names = sorted(path.stem for path in layout.records.glob("*.json"))
    except OSError:
        return [], []
    found, broken = [], []
    for name in names:
        try:
            record = load_shared(layout, name) if records.is_name(name) else None
        except EnvkitError as error:
            broken.append((name, error))
            continue
        if record is not None:
            found.append(record)
    return found, broken


def all_shared(layout: Optional[SharedLayout]) -> list[Record]:
    """Every published environment (unreadable records are left out), by name; none without a shared directory."""
    return scan_shared(layout)[0]


def republish_command(record: Record) -> str:
    """The command that publishes a shared environment again (an admin's), as it was published: its build, name,
    Python, target, manifests and group, shell-quoted."""
    import shlex

    group = shared_info(record).get("group")
    manifests = ["--manifests", record.manifests] if record.manifests is not None else []
    return shlex.join(["envkit", "create", record.manifest, "--build", record.build, "--name", record.name,
                       "--python", record.python, *record.target_options(), *manifests, "--shared", "--force",
                       *(["--group", group] if isinstance(group, str) else [])])


def ask_admins(record: Record) -> str:
    """The hint for a shared environment that cannot be used as it is: its admins publish it again (never a command
    that acts on a user's own environment of the same name)."""
    publisher = shared_info(record).get("publisher") or "the site's admins"
    return (f"It is the site's, not yours: ask its admins ({publisher} published it) to publish "
            f"{shown_name(record.name)} again (`{republish_command(record)}`).")


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
