"""What a run of `envkit create` changes, written down before it changes it, so that nothing is ever lost or left
half-made: a failure or Ctrl-C undoes the run at once, and a run that died (SIGKILL, a power cut) is finished or
undone by the next envkit run that finds its journal (a create of any name, or `envkit remove NAME`).

The journal (``<locks>/NAME.creating``, JSON) names the run (a random id, also in the record it writes), the prefix
it makes, what it will create besides it (a kernelspec), what it set aside to replace (--force), the index record it
may overwrite and the process groups of the installers it started. The directories it makes above the prefix, and an
empty directory the user made for it at the prefix (the backends want none there: the run removes it), are written
down first: an undo removes the first again (while empty) and puts the second back as it was (empty, its permissions
and owner). ``making_prefix`` is written before the backend starts: no prefix existed then (checked under the prefix
lock, or removed as just said), so whatever is there is the run's own. From
the moment the backend is done until its record is written the prefix also carries a stamp
(``PREFIX/.envkit/incomplete``); a prefix holding another run's record is never deleted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat as stat_
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from envkit.create.journal_file import JournalFile, restore_json
from envkit.create.jupyter import runs_in
from envkit.create.leftovers import backend_made, stop_marked
from envkit.create.lock import Busy, journal_path, name_lock, prefix_lock
from envkit.errors import EnvkitError
from envkit.state import ownership, records
from envkit.state.testpause import fault_at, pause_at
from envkit.system.process import stop_leftovers

STAMP = "incomplete"


def stamp(prefix: Path) -> None:
    fault_at("stamp", prefix / records.RECORD_DIR / STAMP)
    (prefix / records.RECORD_DIR).mkdir(exist_ok=True)
    (prefix / records.RECORD_DIR / STAMP).write_text(str(os.getpid()), encoding="utf-8")


def unstamp(prefix: Path) -> None:
    fault_at("unstamp", prefix / records.RECORD_DIR / STAMP)
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
class Journal(JournalFile):
    path: Path
    name: str
    prefix: str
    run: str = ""  # the run's id, in its record too: how recovery tells the run's environment from the one before
    making_prefix: bool = False  # the backend was started on the prefix (which did not exist before)
    stamped: bool = False  # the backend was done and the prefix stamped
    processes: list[list[int]] = field(default_factory=list)  # [process group, its leader's start time]
    kernelspec: Optional[str] = None  # the kernelspec this run will create, if any
    old_record: Optional[dict[str, Any]] = None  # the index entry before this run
    set_aside: list[list[str]] = field(default_factory=list)  # [original, aside]
    made_dirs: list[str] = field(default_factory=list)  # the directories made above the prefix, outermost first
    empty_prefix: Optional[list[int]] = None  # [mode, uid, gid] of the empty directory removed from the prefix
    made: Optional[list[int]] = None  # [st_dev, st_ino] of the prefix the backend made, once seen
    committed: bool = False

    def move_aside(self, path: Path) -> None:
        aside = aside_path(path)
        self.set_aside.append([str(path), str(aside)])
        self.save("aside")  # first: a crash after the rename still finds it
        fault_at("aside-rename", path)
        os.rename(path, aside)

    def make_room(self, prefix: Path) -> None:
        """Make the directories the prefix goes in, or remove the empty directory at the prefix (the backends make
        the prefix themselves), each written down before it is done. OSError when the system refuses."""
        if empty_directory(prefix):
            status = os.stat(prefix)
            self.empty_prefix = [stat_.S_IMODE(status.st_mode), status.st_uid, status.st_gid]
            self.save("room")
            fault_at("room-dir", prefix)
            os.rmdir(prefix)
            return
        missing = []
        for parent in prefix.parents:
            if os.path.lexists(parent):
                break
            missing.append(parent)
        for directory in reversed(missing):
            self.made_dirs.append(str(directory))
            self.save("room")
            try:
                fault_at("room-dir", directory)
                os.mkdir(directory)
            except FileExistsError:  # made meanwhile by someone else: theirs
                self.made_dirs.pop()
                self.save()

    def begin_prefix(self) -> None:
        """Said before the backend starts: from here on, what is at the prefix is this run's."""
        self.making_prefix = True
        self.save("begun")

    def mark_stamped(self, prefix: Path) -> None:
        stamp(prefix)
        self.stamped = True
        self.save("stamped")

    def stop_processes(self) -> list[str]:
        """Stop what the run's installers left running (they run in their own sessions: a SIGKILL of envkit does
        not reach them), before anything touches the prefix they write to: the process groups in the journal, and
        any process carrying the run's mark (``ENVKIT_RUN``, in every installer's environment), which finds one
        that started in the instant before the journal could name it."""
        stuck = [f"process group {pgid} of the last run of {self.name} would not stop"
                 for pgid, started in self.processes if not stop_leftovers(pgid, started)]
        if self.run and not stop_marked(self.run):
            stuck.append(f"an installer of the last run of {self.name} would not stop")
        return stuck

    def note_prefix(self, prefix: Path) -> bool:
        """Write down which directory the backend made at the prefix (its device and inode): a dead run's undo
        then deletes that one only, never one put there after it died. False while there is none yet."""
        try:
            status = os.lstat(prefix)
        except OSError:
            return False
        if self.made is None:
            self.made = [status.st_dev, status.st_ino]
            self.save("begun")
        return True

    def _ours(self, prefix: Path) -> bool:
        """Whether what is at ``prefix`` is this run's: stamped, or the backend's unfinished work (begun, never
        stamped, holding no record). Once stamped, an unstamped directory there is someone else's: the user's,
        made after the run died, is never deleted."""
        if is_stamped(prefix):
            return True
        if not self.making_prefix or self.stamped or _inside_record(prefix) is not None:
            return False
        if self.made is not None:  # the one the backend made, not one put there after the run died (a number
            status = os.lstat(prefix)  # freed is taken again: what it holds must be a backend's too)
            return [status.st_dev, status.st_ino] == self.made and backend_made(prefix, marked=True)
        return backend_made(prefix)

    def undo(self, records_dir: Path, made_prefix: Optional[bool] = None) -> list[str]:
        """Remove what the run made and put back what it set aside; returns what it could not do, one line each.

        ``made_prefix``: True when the run undoing itself had started making the prefix (so whatever is there is
        its own), False when it had not; None for a dead run's journal: its ``making_prefix`` says."""
        notes = []
        prefix = Path(self.prefix) if self.prefix else None
        if prefix is not None and made_prefix is not False and (prefix.exists() or prefix.is_symlink()):
            if made_prefix or self._ours(prefix):
                remove_tree(prefix)
            elif self.making_prefix and ownership.owner(prefix) is None:
                notes.append(f"{prefix} was left by an envkit run that was stopped while making it; envkit cannot "
                             "tell it from files of yours, so it is still there: remove it yourself")
        began = made_prefix if made_prefix is not None else self.making_prefix
        if self.kernelspec and prefix is not None and began:  # before that, a kernel there is the old one's
            spec = Path(self.kernelspec)
            if runs_in(spec, prefix):
                remove_tree(spec)
        failed = []
        for original, aside in reversed(self.set_aside):
            if not Path(aside).exists():
                continue
            if Path(original).exists():
                notes.append(f"{original} is back in use, so what envkit set aside from there stays at {aside}")
                continue
            try:
                os.rename(aside, original)
            except OSError as error:
                failed.append(f"{aside} could not be put back at {original}: {error.strerror or error}")
        notes += self._put_back(prefix)
        try:
            self._put_back_record(records_dir, prefix)
        except EnvkitError as error:
            failed.append(error.message)
        except OSError as error:
            failed.append(f"cannot write {error.filename}: {error.strerror or error}")
        if failed:  # the journal stays: the next envkit run of this name does the rest
            return notes + [f"{line}; the next `envkit create` or `envkit remove` of {self.name} tries again"
                            for line in failed]
        self.path.unlink(missing_ok=True)
        return notes

    def _put_back_record(self, records_dir: Path, prefix: Optional[Path]) -> None:
        """The index entry as it was before the run: written again only when the run had changed it (a disk that
        is full now could not take it again, and need not)."""
        if not self.name:
            return
        if self.old_record is not None:
            restore_json(records.index_path(records_dir, self.name), self.old_record, "undo-record")
        elif prefix is not None:
            current = records.load_quietly(records_dir, self.name)
            if current is not None and current.prefix == self.prefix:
                records.forget(records_dir, self.name)

    def _put_back(self, prefix: Optional[Path]) -> list[str]:
        """The empty directory that was at the prefix, as it was; the directories made above it gone (if empty)."""
        notes = []
        if prefix is not None and self.empty_prefix is not None and not os.path.lexists(prefix):
            mode, uid, gid = self.empty_prefix
            try:
                os.mkdir(prefix, mode)
                os.chmod(prefix, mode)  # (mkdir's mode is masked by the umask)
            except OSError as error:
                notes.append(f"the empty directory {prefix} that was there before could not be made again: "
                             f"{error.strerror or error}")
            else:
                with contextlib.suppress(OSError):  # (only root can give a directory away: a user's is theirs)
                    if (uid, gid) != (os.geteuid(), os.getegid()):
                        os.chown(prefix, uid, gid)
        for made in reversed(self.made_dirs):
            try:
                os.rmdir(made)
            except OSError:  # gone already, or holds something now: not envkit's to remove
                pass
        return notes

    def commit(self) -> list[str]:
        """The new environment is complete: delete what it replaced. Interrupted, or refused by the system, the
        next run finishes it (the journal stays until it is done); what could not be deleted, one line each."""
        self.committed = True
        try:
            self.save("commit")
        except EnvkitError:  # (a full disk): the record inside the prefix, this run's, tells the next run as much
            pass
        pause_at("committed")
        left = []
        for _, aside in self.set_aside:
            try:
                fault_at("commit-delete", aside)
                remove_tree(Path(aside))
            except OSError as error:
                left.append(f"{aside}: {error.strerror or error}")
            if os.path.lexists(aside) and not left:
                left.append(f"{aside}: it could not be deleted")
        if left:
            return [f"what the new {self.name} replaced could not all be deleted ({'; '.join(left)}): the next "
                    f"`envkit create` or `envkit remove` of {self.name} tries again"]
        self.path.unlink(missing_ok=True)
        return []


def empty_directory(path: Path) -> bool:
    """Whether ``path`` is a directory (not a link to one) with nothing in it."""
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def _inside_record(prefix: Path) -> Optional[dict[str, Any]]:
    try:
        return ownership.inside_record(prefix)
    except ValueError:
        return None


def _finished(journal: Journal) -> Optional[dict[str, Any]]:
    """The record inside the journal's prefix if the run completed it (unstamped, written by this very run) before
    it died; None otherwise."""
    if not journal.prefix or not journal.name or not journal.run:
        return None
    prefix = Path(journal.prefix)
    if is_stamped(prefix):
        return None
    inside = _inside_record(prefix)
    if inside is None or inside.get("run") != journal.run or inside.get("name") != journal.name:
        return None
    return inside


def _complete(journal: Optional[Journal]) -> bool:
    """Whether a dead run had made its environment (only deleting what it replaced was left): that one stands, and
    the next create or remove deletes the rest."""
    return journal is not None and (journal.committed or _finished(journal) is not None)


def recover(path: Path, records_dir: Path) -> list[str]:
    """Finish or undo what a run that died left (call it holding the name's lock); what it did, one line each."""
    journal = Journal.load(path)
    if journal is None:
        return []
    stuck = journal.stop_processes()
    if stuck:
        raise Busy(f"{stuck[0]}, so envkit cannot clean up after it yet", hint="Stop it, then run this again.")
    finished = _finished(journal)
    if journal.committed or finished is not None:
        if finished is not None:  # it died after making its environment: that one stands
            records.write_json_atomic(records.index_path(records_dir, journal.name), finished)
        journal.commit()
        return [f"finished what the last run of {journal.name} left: deleting what it replaced"]
    notes = journal.undo(records_dir)
    return [f"undid an envkit run of {journal.name or 'this environment'} that did not finish", *notes]


def recover_others(locks: Path, records_dir: Path, name: str) -> list[str]:
    """Finish or undo the dead runs of other names too (those whose locks are free: a live run is left alone)."""
    notes: list[str] = []
    for path in sorted(locks.glob("*.creating")) if locks.is_dir() else ():
        other = path.name[: -len(".creating")]
        if other == name:
            continue
        journal = Journal.load(path)
        if journal is None:
            continue
        try:
            with name_lock(locks, other), prefix_lock(locks, Path(journal.prefix or "/")):
                notes += recover(path, records_dir)
        except Busy:
            continue
    return notes


@dataclass(frozen=True)
class Interrupted:
    name: str
    prefix: str
    running: bool  # a live run holds its lock (being created now), else it died


def interrupted(locks: Path) -> list[Interrupted]:
    """The runs that have a journal: being created now, or died and not yet cleaned up (`envkit envs` shows them)."""
    out = []
    for path in sorted(locks.glob("*.creating")) if locks.is_dir() else ():
        name = path.name[: -len(".creating")]
        journal = Journal.load(path)
        running = _running(locks, name)
        if journal is not None and running is not None and (running or not _complete(journal)):
            out.append(Interrupted(name=name, prefix=journal.prefix, running=running))
    return out


def _running(locks: Path, name: str) -> Optional[bool]:
    """Whether a live run of ``name`` holds its lock (True) or its journal is a dead run's (False); None: no journal."""
    if not journal_path(locks, name).exists():
        return None
    try:
        with name_lock(locks, name):
            return False if journal_path(locks, name).exists() else None
    except Busy:
        return True


def check_settled(locks: Path, name: str) -> None:
    """Raise unless ``name`` is free of runs going on or interrupted: `envkit run` and `verify` would see a half-made
    environment, or the one a --force run has set aside."""
    running = _running(locks, name)
    if running:
        raise Busy(f"environment {name!r} is being created right now", hint="Wait for that run to finish.")
    if running is False and not _complete(Journal.load(journal_path(locks, name))):
        raise EnvkitError(f"the last `envkit create` of {name!r} was interrupted before it finished",
                          hint=f"`envkit create` of it cleans up (or `envkit remove {name} --yes` deletes it).")


def recover_name(locks: Path, records_dir: Path, name: str) -> list[str]:
    """Finish or undo a dead run of ``name`` (call it holding the name's lock): `envkit remove` does, first."""
    path = journal_path(locks, name)
    journal = Journal.load(path)
    if journal is None:
        return []
    with prefix_lock(locks, Path(journal.prefix or "/")):
        return recover(path, records_dir)
