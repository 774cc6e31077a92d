"""What a run of `envkit create` changes, written down before it changes it, so that nothing is ever lost or left
half-made: a failure or Ctrl-C undoes the run at once, and a run that died (SIGKILL, a power cut) is undone by the
next run of the same name, which finds its journal.

The journal (``<locks>/NAME.creating``, JSON) names the prefix being made, what this run will create besides it (a
kernelspec), what it set aside to replace (--force), and the index record it may overwrite. A prefix carries a stamp
(``PREFIX/.envkit/incomplete``) from the moment it exists until its record is written: only a stamped prefix is ever
deleted by a later run, so a directory the user made at that path since is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from envkit import records
from envkit.jupyter import runs_in

STAMP = "incomplete"


def stamp(prefix: Path) -> None:
    (prefix / records.RECORD_DIR).mkdir(exist_ok=True)
    (prefix / records.RECORD_DIR / STAMP).write_text(str(os.getpid()), encoding="utf-8")


def unstamp(prefix: Path) -> None:
    (prefix / records.RECORD_DIR / STAMP).unlink(missing_ok=True)


def is_stamped(prefix: Path) -> bool:
    return (prefix / records.RECORD_DIR / STAMP).is_file()


def remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def aside_path(path: Path) -> Path:
    """Where ``path`` waits while it is being replaced: beside it (a rename, atomic, on the same filesystem), under a
    name that Jupyter does not take for a kernel ('~') and conda users will not type."""
    return path.with_name(f".{path.name}~envkit-replaced-{os.getpid()}")


@dataclass
class Journal:
    path: Path
    name: str
    prefix: str
    kernelspec: Optional[str] = None  # the kernelspec this run will create, if any
    old_record: Optional[dict[str, Any]] = None  # the index entry before this run
    set_aside: list[list[str]] = field(default_factory=list)  # [original, aside]
    committed: bool = False

    def save(self) -> None:
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        records.write_json_atomic(self.path, data)

    @classmethod
    def load(cls, path: Path) -> Optional[Journal]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(path=path, **data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError):  # unreadable: nothing can be trusted in it
            return cls(path=path, name="", prefix="")

    def move_aside(self, path: Path) -> None:
        aside = aside_path(path)
        self.set_aside.append([str(path), str(aside)])
        self.save()  # first: a crash after the rename still finds it
        os.rename(path, aside)

    def undo(self, records_dir: Path, made_prefix: Optional[bool] = None) -> list[str]:
        """Remove what the run made and put back what it set aside; returns what it could not do, one line each.

        ``made_prefix``: True when the run undoing itself had started making the prefix (so whatever is there is
        its own, stamped or not yet), False when it had not; None for a dead run's journal: only a stamped prefix
        is removed then."""
        notes = []
        prefix = Path(self.prefix) if self.prefix else None
        if prefix is not None and made_prefix is not False and (prefix.exists() or prefix.is_symlink()):
            if made_prefix or is_stamped(prefix):
                remove_tree(prefix)
            elif records.owner(prefix) != self.name:  # (envkit's complete environment of this name: untouched)
                notes.append(f"{prefix} was left by an envkit run that was stopped while making it; envkit cannot "
                             "tell it from files of yours, so it is still there: remove it yourself")
        if self.kernelspec and prefix is not None:
            spec = Path(self.kernelspec)
            if runs_in(spec, prefix):
                remove_tree(spec)
        for original, aside in reversed(self.set_aside):
            if not Path(aside).exists():
                continue
            if Path(original).exists():
                notes.append(f"{original} is back in use, so what envkit set aside from there stays at {aside}")
                continue
            os.rename(aside, original)
        if self.name:
            if self.old_record is not None:
                records.write_json_atomic(records.index_path(records_dir, self.name), self.old_record)
            elif prefix is not None:
                current = records.load_quietly(records_dir, self.name)
                if current is not None and current.prefix == self.prefix:
                    records.forget(records_dir, self.name)
        self.path.unlink(missing_ok=True)
        return notes

    def commit(self) -> None:
        """The new environment is complete: delete what it replaced. Interrupted, the next run finishes it."""
        self.committed = True
        self.save()
        for _, aside in self.set_aside:
            remove_tree(Path(aside))
        self.path.unlink(missing_ok=True)


def _finished(journal: Journal) -> Optional[dict[str, Any]]:
    """The record inside the journal's prefix if the run completed it (unstamped, its own, newer than what it
    replaced) before it died; None otherwise."""
    if not journal.prefix or not journal.name:
        return None
    prefix = Path(journal.prefix)
    if is_stamped(prefix) or records.owner(prefix) != journal.name:
        return None
    try:
        inside = json.loads(records.in_prefix(prefix).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    old = journal.old_record or {}
    if (inside.get("created"), inside.get("prefix")) == (old.get("created"), old.get("prefix")):
        return None  # the environment it was going to replace, never moved
    return inside


def recover(path: Path, records_dir: Path) -> list[str]:
    """Finish or undo what a run that died left (call it holding the name's lock); what it did, one line each."""
    journal = Journal.load(path)
    if journal is None:
        return []
    finished = _finished(journal)
    if journal.committed or finished is not None:
        if finished is not None:  # it died after making its environment: that one stands
            records.write_json_atomic(records.index_path(records_dir, journal.name), finished)
        journal.commit()
        return [f"finished what the last run of {journal.name} left: deleting what it replaced"]
    notes = journal.undo(records_dir)
    return [f"undid an envkit run of {journal.name or 'this environment'} that did not finish", *notes]
