"""Whether a directory still holds the environment envkit recorded there: the record inside the prefix
(``PREFIX/.envkit/record.json``, see envkit.state.records) names it.

An index entry outlives its directory: the directory may be deleted, or replaced by another environment, or hold
something envkit did not make. Every command that acts on a named environment's directory (run, verify, export,
job) asks :func:`check_held` first, a record is written back only while the directory holds it (:func:`update`),
and `remove` deletes a directory only when it names the environment being removed (:func:`holding_problem`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from envkit.errors import EnvkitError
from envkit.state.records import Record, in_prefix, save


GONE = "it is gone"  # what holding_problem says of a directory that is not there


def update(record: Record, records_dir: Path) -> None:
    """Save a changed record of an environment that exists (the last check's result): only while its prefix holds
    it (:func:`check_held`), so envkit never writes its record into a directory that holds another environment, or
    none."""
    check_held(record)
    save(record, records_dir)


class NotHeld(EnvkitError):
    """An index entry's directory does not hold that environment: gone, another environment's, or holding no
    readable envkit record. envkit neither acts in it nor writes into it for that name."""


def inside_record(prefix: Path) -> dict[str, Any]:
    """The record envkit keeps inside ``prefix``, as data; ValueError saying why there is none, in words following
    "it" ("it holds no envkit record", "its envkit record ... is not valid JSON")."""
    from envkit.state.files import parse_json, read_text_file

    path = in_prefix(prefix)
    try:  # bounded, and never waiting on a FIFO: a directory being asked about may be anyone's
        text = read_text_file(path, "record")
    except FileNotFoundError:
        raise ValueError("it holds no envkit record") from None
    except ValueError as error:
        raise ValueError(f"its envkit record {path} {error}") from None
    try:
        data = parse_json(text)
    except ValueError:
        raise ValueError(f"its envkit record {path} is not valid JSON") from None
    if not isinstance(data, dict):
        raise ValueError(f"its envkit record {path} names no environment")
    return data


def holding_problem(prefix: Path, name: str) -> Optional[str]:
    """Why the directory ``prefix`` does not hold envkit's environment ``name`` (the record inside it names another
    environment, or it has none, or it cannot be read), in words following "it"; None when it does hold it."""
    if not os.path.isdir(prefix):
        return "it is not a directory" if os.path.lexists(prefix) else GONE
    try:
        other = inside_record(prefix).get("name")
    except ValueError as why:
        return str(why)
    if not isinstance(other, str):
        return f"its envkit record {in_prefix(prefix)} names no environment"
    return None if other == name else f"it holds envkit's environment {other!r}"


def check_held(record: Record, shown: Optional[str] = None, hint: Optional[str] = None) -> None:
    """Raise NotHeld unless the environment's prefix still holds it: what every command that acts on a named
    environment's directory (run, verify, export, job) checks first, and what guards writing its record there.
    ``shown``: its name as the user gives it (``site:NAME``); ``hint``: what to do instead of `envkit remove NAME`
    (a site's environment is not the user's to forget)."""
    prefix = Path(record.prefix)
    shown = shown or record.name
    forget = f"`envkit remove {record.name} --yes` forgets"
    if not os.path.exists(prefix):  # a dangling link too
        raise NotHeld(f"environment {shown} is gone from {prefix}",
                      hint=hint or f"{forget} it; {record.remake_hint()}.")
    problem = holding_problem(prefix, record.name)
    if problem is not None:
        raise NotHeld(f"{prefix} no longer holds environment {shown!r}: {problem}",
                      hint=hint or f"envkit will not use or change that directory as {record.name}: {forget} "
                                   f"{record.name} and leaves the directory alone.")


def owner(prefix: Path) -> Optional[str]:
    """The name of the environment envkit made at ``prefix``, from the record inside it; None if there is none."""
    try:
        name = inside_record(prefix).get("name")
    except ValueError:
        return None
    return name if isinstance(name, str) else None
