"""The site's shared environments in `envkit envs`: a section after the user's own (text) and entries marked
``"shared": true`` beside theirs (JSON), each with who published it, for which machines, the admins' last check,
the user's own, and (JSON) every version there is with its prefix and whether jobs may still use it; a record that
cannot be read is said with whose it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from envkit.errors import EnvkitError

from envkit.shared.layout import SharedLayout, shown_name
from envkit.shared.modulefile import check_words, fits_words
from envkit.shared.store import own_check, shared_info
from envkit.state.ownership import holding_problem
from envkit.state.records import Record


def shared_json(layout: Optional[SharedLayout], found: Sequence[Record], data_dir: Path,
                broken: Sequence[tuple[str, EnvkitError]] = ()) -> list[dict[str, Any]]:
    out = []
    for record in found:
        info = shared_info(record)
        problem = holding_problem(Path(record.prefix), record.name)
        entry = {**record.to_dict(), "name": shown_name(record.name), "shared": True,
                 "shared_dir": str(layout.root) if layout else None, "version": info.get("version"),
                 "publisher": info.get("publisher"), "published": info.get("published"), "group": info.get("group"),
                 "fits": fits_words(record.target, record.machine), "your_check": own_check(data_dir, record),
                 "module": f"envkit/{record.name}", "exists": Path(record.prefix).is_dir(),
                 "state": "ready" if problem is None else "not held",
                 "versions": versions_json(layout, record) if layout else []}
        if problem is not None:
            entry["error"] = problem
        out.append(entry)
    out += [{"name": shown_name(name), "shared": True, "shared_dir": str(layout.root) if layout else None,
             "state": "unreadable", "error": error.message, "hint": error.hint} for name, error in broken]
    return out


def versions_json(layout: SharedLayout, record: Record) -> list[dict[str, Any]]:
    """Every version of ``record``'s name there is, oldest first: its prefix, whether it is the current one, and
    whether jobs may still use it (it holds its environment and is not a publication's in progress, or a dead
    one's leftover)."""
    from envkit.shared.leftovers import marked
    from envkit.shared.publish import versions

    unfinished = set(marked(layout, record.name))
    out = []
    for version in versions(layout, record.name):
        prefix = layout.prefix(record.name, version)
        problem = holding_problem(prefix, record.name)
        current = prefix == Path(record.prefix)
        if version in unfinished and not current:
            state = "unpublished: a publication in progress, or one that died (the next publication removes it)"
        elif problem is not None:
            state = f"not usable: {problem}"
        else:
            state = "current" if current else "old: jobs that run it keep it until an admin removes it"
        out.append({"version": version, "prefix": str(prefix), "current": current,
                    "jobs_may_use": problem is None and (current or version not in unfinished), "state": state})
    return out


def shared_text(layout: Optional[SharedLayout], found: Sequence[Record], data_dir: Path,
                broken: Sequence[tuple[str, EnvkitError]] = ()) -> str:
    """The section of `envkit envs` for the site's environments; empty without a shared directory."""
    if layout is None:
        return ""
    unreadable = [f"{shown_name(name)}: {error.message}. {error.hint or ''}".rstrip() for name, error in broken]
    if not found:
        return "\n".join([f"Shared by the site ({layout.root}): none yet.", *unreadable])
    rows = [("NAME", "BUILD", "FOR", "PUBLISHED BY", "ADMINS' CHECK", "YOURS", "PREFIX")]
    for record in found:
        info = shared_info(record)
        mine = own_check(data_dir, record)
        when = str(info.get("published") or "?")[:10]
        problem = holding_problem(Path(record.prefix), record.name)
        rows.append((shown_name(record.name), record.build, fits_words(record.target, record.machine),
                     f"{info.get('publisher', '?')} {when}", check_words(record.verify),
                     check_words(mine) if mine else "-",
                     record.prefix if problem is None else f"{record.prefix} ({problem})"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in rows]
    return "\n".join([f"Shared by the site ({layout.root}); `module load envkit/NAME` or `envkit run site:NAME`:",
                      *lines, *unreadable])
