"""`envkit envs`: the environments envkit made, as a table and as JSON, with the runs that are going on or were
interrupted (state "being created" / "interrupted") and the records that cannot be read (state "unreadable", with
the reason: `envkit remove NAME` forgets them, unless what is there is not envkit's: a directory named NAME.json)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from envkit.state.ownership import GONE, holding_problem
from envkit.state.records import Record, Unreadable

if TYPE_CHECKING:
    from envkit.create.journal import Interrupted
    from envkit.storage.usage import Usage


UNREADABLE = "unreadable"  # the state of an index entry that is not a readable record
NOT_HELD = "not held"  # the state of one whose directory is gone, or holds another environment, or no record


def _not_held(record: Record) -> "str | None":
    """Why the record's directory does not hold it, in words following "it" ("it is gone"); None: it does."""
    return holding_problem(Path(record.prefix), record.name)


def _check(verify: "dict[str, Any] | None") -> str:
    """The last check's result in the CHECK column: PASS or FAIL, '?' when the record's result says neither."""
    if verify is None:
        return "-"
    ok = verify.get("ok")
    check = "PASS" if ok is True else "FAIL" if ok is False else "?"
    return check + ("*" if verify.get("on_target") is False else "")  # *: judged from the target's profiles


def _state(run: "Interrupted") -> str:
    return "being created" if run.running else "interrupted"


def envs_json(found: Sequence[Record], runs: Sequence["Interrupted"] = (), broken: Sequence[Unreadable] = (),
              sizes: Optional[Mapping[str, "Usage"]] = None,
              standing: Mapping[str, str] = {}) -> list[dict[str, Any]]:  # noqa: B006 (read only)
    """``sizes``: each environment's disk use, what it shares with the cache or another one counted once
    (envkit.storage.usage); as "disk": {"bytes", "files"}. ``standing``: a personal environment's site version
    ("current", "replaced", "removed"), as "on": {..., "state"}."""
    states = {run.name: _state(run) for run in runs}
    out = []
    for record in found:
        entry = {**record.to_dict(), "exists": Path(record.prefix).is_dir(), "state": states.pop(record.name, "ready")}
        if record.name in standing and isinstance(record.on, dict):
            entry["on"] = {**record.on, "state": standing[record.name]}
        if sizes is not None and record.name in sizes:
            entry["disk"] = {"bytes": sizes[record.name].bytes, "files": sizes[record.name].files}
        problem = _not_held(record) if entry["state"] == "ready" else None
        if problem is not None:  # run, verify, export and job refuse it; remove only forgets it
            entry.update(state=NOT_HELD, error=problem)
        out.append(entry)
    out += [{"name": entry.name, "prefix": entry.prefix, "exists": bool(entry.prefix and Path(entry.prefix).is_dir()),
             "state": states.pop(entry.name, UNREADABLE), "error": entry.reason} for entry in broken]
    for run in runs:
        if run.name in states:
            out.append({"name": run.name, "prefix": run.prefix, "exists": Path(run.prefix).is_dir() if run.prefix
                        else False, "state": states[run.name]})
    return sorted(out, key=lambda entry: entry["name"])


def envs_text(found: Sequence[Record], runs: Sequence["Interrupted"] = (), broken: Sequence[Unreadable] = (),
              sizes: Optional[Mapping[str, "Usage"]] = None, total: str = "",
              standing: Mapping[str, str] = {}) -> str:  # noqa: B006 (read only)
    """``sizes`` adds a SIZE column (envs_json); ``total``: the line that sums them up, with the caches;
    ``standing``: the personal environments' site versions (envs_json)."""
    if not found and not runs and not broken:
        return "No environments yet: `envkit create torch` makes one."
    states = {run.name: _state(run) for run in runs}
    rows = [("NAME", "BUILD", "BACKEND", "PYTHON", "CHECK", "CREATED", "PREFIX")]
    lines = []
    strays = []  # (name, prefix, why): entries whose directory no longer holds them (another environment's, ...)
    for record in found:
        check = _check(record.verify)
        settled = record.name not in states
        if not settled:
            check = states.pop(record.name)  # a --force run of it was interrupted: not PASS until that is settled
        where = record.prefix if Path(record.prefix).is_dir() else f"{record.prefix} (missing)"
        problem = _not_held(record) if settled else None  # (while a run of it goes on, or was interrupted: below)
        if problem is not None:
            if where == record.prefix:
                where = f"{record.prefix} (not {record.name}'s)"
            strays.append((record.name, record.prefix, problem))
        build = record.build + (f" +{len(record.additions)}" if record.additions else "")
        lines.append((record.name, build, record.backend, record.python, check, record.created[:10], where))
    for entry in broken:
        lines.append((entry.name, "-", "-", "-", states.pop(entry.name, UNREADABLE), "-", entry.prefix or "-"))
    for run in runs:
        if run.name in states:
            lines.append((run.name, "-", "-", "-", states[run.name], "-", run.prefix or "-"))
    rows += sorted(lines)
    if sizes is not None:  # a SIZE column before PREFIX
        from envkit.text.words import size_text

        rows = [(*row[:-1], "SIZE" if i == 0 else size_text(sizes[row[0]].bytes) if row[0] in sizes else "-", row[-1])
                for i, row in enumerate(rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    note = ""
    if any(record.additions for record in found):
        note += "\n+N: packages of your own added to the build, which stays held (`envkit envs --json` lists them)"
    if any(row[4].endswith("*") for row in rows[1:]):
        note = "\n* judged from the profiles of the machines it is for (its GPU part can only run there)"
    for run in runs:
        if not run.running:
            note += (f"\n{run.name}: its last `envkit create` was interrupted; the next create cleans up, or "
                     f"`envkit remove {run.name} --yes` deletes it.")
    for record in found:
        on = record.on if isinstance(record.on, dict) else None
        if on is not None and record.name in standing:
            said = {"current": "its current version", "replaced": "a version the site has since replaced: it keeps "
                    "running on it", "removed": "a version the site has removed: it no longer runs"}[
                        standing[record.name]]
            note += f"\n{record.name}: on {on.get('name')} {on.get('version')}, {said}"
            if standing[record.name] != "current":
                note += (f"; `envkit create --on {on.get('name')} --name {record.name} --force` moves it to the "
                         "current one")
    for name, prefix, problem in strays:
        if problem == GONE:
            note += f"\n{name}: {prefix} is gone; `envkit remove {name} --yes` forgets it."
        else:
            note += (f"\n{name}: {prefix} no longer holds it ({problem}); `envkit remove {name} --yes` forgets it "
                     "and leaves the directory alone.")
    for entry in broken:  # what to do: `envkit remove NAME` forgets it, unless it is not envkit's (a directory)
        fix = entry.hint or f"`envkit remove {entry.name} --yes` forgets it."
        note += f"\n{entry.name}: its record cannot be read ({entry.reason}); {fix[0].lower()}{fix[1:]}"
    if total:
        note += f"\n{total}"
    table = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows)
    return table + note

