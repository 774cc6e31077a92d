"""`envkit envs`: the environments envkit made, as a table and as JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from envkit.records import Record


def envs_json(found: Sequence[Record]) -> list[dict[str, Any]]:
    return [{**record.to_dict(), "exists": Path(record.prefix).is_dir()} for record in found]


def envs_text(found: Sequence[Record]) -> str:
    if not found:
        return "No environments yet: `envkit create torch` makes one."
    rows = [("NAME", "BUILD", "BACKEND", "PYTHON", "CHECK", "CREATED", "PREFIX")]
    for record in found:
        check = "-" if record.verify is None else ("PASS" if record.verify.get("ok") else "FAIL")
        if record.verify is not None and record.verify.get("on_target") is False:
            check += "*"  # judged from the profiles of the machines it is for: its GPU part did not run
        where = record.prefix if Path(record.prefix).is_dir() else f"{record.prefix} (missing)"
        rows.append((record.name, record.build, record.backend, record.python, check, record.created[:10], where))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    note = ""
    if any(row[4].endswith("*") for row in rows[1:]):
        note = "\n* judged from the profiles of the machines it is for (its GPU part can only run there)"
    table = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows)
    return table + note
