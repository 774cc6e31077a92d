"""What envkit made: a small record inside each environment (``PREFIX/.envkit/record.json``) and a copy in the
index under the user data dir (``records/NAME.json``), which `envkit envs`, `run`, `remove` and `verify` read.

Records are written atomically (a temporary file, then a rename), so a crash never leaves half a record.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from envkit.errors import BadInputError, EnvkitError
from envkit.files import write_atomic

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SCHEMA = 1
RECORD_DIR = ".envkit"
RECORD_FILE = "record.json"


@dataclass(frozen=True)
class Record:
    name: str
    prefix: str
    kind: str  # "venv" or "conda": how the environment is activated
    backend: str  # conda, rattler or venv
    manifest: str
    build: str  # the build id
    python: str
    created: str  # ISO 8601, UTC
    machine: dict[str, Any]  # the profile it was made for (MachineProfile.to_dict())
    on_target: bool  # whether that profile was this machine's
    installer: Optional[str] = None  # uv or pip, when pip packages were installed
    kernel: Optional[str] = None  # the Jupyter kernelspec name, with --jupyter
    verify: Optional[dict[str, Any]] = None  # the last check: {"ok", "time", "causes", "judged"}
    target: Optional[dict[str, Any]] = None  # the machines it is for (envkit.target); None: the machine it was made on
    run: Optional[str] = None  # the id of the create run that made it (its journal's)
    schema: int = SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_name(name: str) -> str:
    """``name`` if it can name an environment: a directory name and a conda env name, safe in any shell."""
    if ".." in name or not _NAME.match(name):
        raise BadInputError(
            f"{name!r} cannot name an environment",
            hint="Use letters, digits, '.', '_' and '-' (up to 64, starting with a letter or digit), "
                 "no '..', no path separators or shell characters.",
        )
    return name


def record_from_dict(data: Any, origin: str) -> Record:
    if not isinstance(data, dict):
        raise BadInputError(f"{origin}: not an envkit record")
    try:
        known = {k: data[k] for k in Record.__dataclass_fields__ if k in data}
        return Record(**known)
    except TypeError as error:
        raise BadInputError(f"{origin}: not an envkit record ({error})") from None


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def in_prefix(prefix: Path) -> Path:
    return prefix / RECORD_DIR / RECORD_FILE


def index_path(records_dir: Path, name: str) -> Path:
    return records_dir / f"{name}.json"


def save(record: Record, records_dir: Path) -> None:
    """Into the environment first, then the index: an index entry always has its environment's record."""
    write_json_atomic(in_prefix(Path(record.prefix)), record.to_dict())
    write_json_atomic(index_path(records_dir, record.name), record.to_dict())


def load(records_dir: Path, name: str) -> Optional[Record]:
    path = index_path(records_dir, name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise EnvkitError(f"cannot read {path}: {error}") from None
    try:
        record = record_from_dict(json.loads(text), str(path))
    except ValueError:
        raise BadInputError(f"{path} is not valid JSON", hint="Delete it: `envkit envs` lists what is left.") from None
    if record.name != name or not os.path.isabs(record.prefix):
        raise BadInputError(f"{path} is not the record of an environment named {name!r}",
                            hint="Delete it: `envkit envs` lists what is left.")
    return record


def load_quietly(records_dir: Path, name: str) -> Optional[Record]:
    """The record, or None when there is none or it cannot be read."""
    try:
        return load(records_dir, name)
    except EnvkitError:
        return None


def owner(prefix: Path) -> Optional[str]:
    """The name of the environment envkit made at ``prefix``, from the record inside it; None if there is none."""
    try:
        name = json.loads(in_prefix(prefix).read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def load_all(records_dir: Path) -> list[Record]:
    """Every recorded environment, by name; unreadable entries are skipped (the envs listing says so)."""
    out = []
    try:
        names = sorted(p.stem for p in records_dir.glob("*.json"))
    except OSError:
        return []
    for name in names:
        record = load_quietly(records_dir, name)
        if record is not None:
            out.append(record)
    return out


def forget(records_dir: Path, name: str) -> None:
    try:
        index_path(records_dir, name).unlink()
    except FileNotFoundError:
        pass


def with_verify(record: Record, verify: dict[str, Any]) -> Record:
    return replace(record, verify=verify)
