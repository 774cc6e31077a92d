"""Editing a copy of the shipped manifests in a test: load one YAML file, change its data, write it back."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import yaml


def edit(directory: Path, name: str, change: Callable[[Any], None]) -> None:
    """Apply ``change`` to the parsed ``directory/name`` and write it back (comments are not kept)."""
    path = directory / name
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def release(data: Any, version: str) -> Any:
    """The release ``version`` of a manifest's parsed data."""
    return next(r for r in data["releases"] if r["version"] == version)
