"""What a run of `envkit add` changes in an environment, written down before it changes it, so that a failure, Ctrl-C
or a failed check puts the environment back as it was, and a run that died (SIGKILL, a power cut) is put back by the
next envkit command that uses the environment (envkit.create.add_recover).

The journal (``<locks>/NAME.adding``, JSON) names the run, the environment's prefix, the distributions installed
before (their ``*.dist-info`` directories), the installers' process groups, the record before, and the distributions
set aside: hard links to every file of those an installer may replace (their RECORD's files), in
``PREFIX/.envkit/aside-RUN/DIST-INFO/``. Undoing deletes every distribution that was not there before (the files its RECORD
lists, inside the prefix only), links the set-aside ones back, and writes the old record again. The build's own
packages are held: no installer ever touches them, so they are never set aside, and never at risk.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from envkit.create.journal_file import JournalFile, restore_json
from envkit.errors import EnvkitError
from envkit.state import records
from envkit.system.process import stop_leftovers

SUFFIX = ".adding"


def journal_path(locks: Path, name: str) -> Path:
    return locks / f"{name}{SUFFIX}"


def dist_infos(site: Optional[Path]) -> list[str]:
    """The ``*.dist-info`` directories in ``site`` (site-packages), by name."""
    if site is None or not site.is_dir():
        return []
    return sorted(entry.name for entry in os.scandir(site) if entry.name.endswith(".dist-info") and entry.is_dir())


def recorded_files(prefix: Path, site: Path, dist_info: str) -> list[Path]:
    """The files a distribution's RECORD lists, as absolute paths inside ``prefix`` (anything pointing outside it is
    left out: an installer never writes there for an environment), its RECORD itself last."""
    record = site / dist_info / "RECORD"
    try:
        text = record.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [record]
    import csv

    out = []
    root = os.path.realpath(prefix)
    for row in csv.reader(text.splitlines()):
        if not row or not row[0]:
            continue
        path = os.path.normpath(os.path.join(site, row[0]))
        if os.path.commonpath([root, os.path.realpath(os.path.dirname(path))]) == root:
            out.append(Path(path))
    return [path for path in out if path != record] + [record]


@dataclass
class AddJournal(JournalFile):
    POINT = "add-journal"
    BROKEN = {"name": "", "prefix": "", "run": "", "site": ""}  # (what it would undo cannot be known: it is said)

    path: Path
    name: str
    prefix: str
    run: str
    site: str  # the environment's site-packages
    before: list[str] = field(default_factory=list)  # its *.dist-info directories before the run
    old_record: Optional[dict[str, Any]] = None
    processes: list[list[int]] = field(default_factory=list)  # [process group, its leader's start time]
    aside: list[str] = field(default_factory=list)  # the *.dist-info directories whose files are linked aside
    committed: bool = False  # the new record is written: only the set-aside files are left to delete
    uv_lock: bool = True  # whether the prefix had uv's lock file (``.lock``) before: uv makes one when it installs

    @property
    def aside_dir(self) -> Path:
        return Path(self.prefix) / records.RECORD_DIR / f"aside-{self.run}"

    def set_aside(self, dist_info: list[str]) -> None:
        """Link every file of these distributions aside, before an installer may replace them (written down
        first: a run killed halfway still finds what it linked)."""
        self.aside = sorted(set(self.aside) | set(dist_info))
        self.save()
        prefix, site = Path(self.prefix), Path(self.site)
        for name in dist_info:
            for path in recorded_files(prefix, site, name):
                if not path.is_file() and not path.is_symlink():
                    continue
                copy = self.aside_dir / name / os.path.relpath(path, prefix)
                copy.parent.mkdir(parents=True, exist_ok=True)
                if os.path.lexists(copy):
                    os.unlink(copy)
                try:
                    os.link(path, copy, follow_symlinks=False)
                except OSError:  # a filesystem without hard links: a copy keeps it as well
                    shutil.copy2(path, copy, follow_symlinks=False)

    def commit(self) -> None:
        self.committed = True
        self.save("add-commit")
        shutil.rmtree(self.aside_dir, ignore_errors=True)
        self.path.unlink(missing_ok=True)

    def undo(self, records_dir: Path) -> list[str]:
        """Put the environment back as it was before the run (see the module's docstring); what could not be done,
        one line each (the journal then stays, for the next run to try again)."""
        if not self.prefix or not self.site:
            return [f"{self.path} cannot be read, so what that `envkit add` changed cannot be known: check the "
                    "environment (`envkit verify`), then delete the file"]
        if self.committed:  # complete: only the set-aside files were left
            shutil.rmtree(self.aside_dir, ignore_errors=True)
            self.path.unlink(missing_ok=True)
            return []
        stuck = [f"process group {pgid} of the interrupted `envkit add` of {self.name} would not stop"
                 for pgid, started in self.processes if not stop_leftovers(pgid, started)]
        if stuck:
            return stuck
        prefix, site = Path(self.prefix), Path(self.site)
        problems = []
        now = set(dist_infos(site))
        for name in sorted(now - set(self.before)):
            problems += _remove_distribution(prefix, site, name)
        for name in sorted(set(self.before) - set(dist_infos(site))):
            problems += self._put_back(name)
        if not self.uv_lock and (prefix / ".lock").is_file() and not (prefix / ".lock").stat().st_size:
            (prefix / ".lock").unlink()
        try:
            self._put_back_record(records_dir)
        except (EnvkitError, OSError) as error:
            problems.append(getattr(error, "message", None) or f"the record could not be written back: {error}")
        if problems:
            return problems
        shutil.rmtree(self.aside_dir, ignore_errors=True)
        self.path.unlink(missing_ok=True)
        return []

    def _put_back(self, dist_info: str) -> list[str]:
        if dist_info not in self.aside:
            return [f"{dist_info} was removed and envkit had not set it aside: the environment lacks it now"]
        prefix, source = Path(self.prefix), self.aside_dir / dist_info
        for directory, _, files in os.walk(source):
            for entry in files:
                kept = Path(directory) / entry
                target = prefix / kept.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                if os.path.lexists(target):
                    os.unlink(target)
                os.link(kept, target, follow_symlinks=False)
        return []

    def _put_back_record(self, records_dir: Path) -> None:
        if not self.old_record or not self.name:
            return
        for path in (records.in_prefix(Path(self.prefix)), records.index_path(records_dir, self.name)):
            restore_json(path, self.old_record, "add-undo-record")


def _remove_distribution(prefix: Path, site: Path, dist_info: str) -> list[str]:
    """Delete a distribution an installer added: the files its RECORD lists (and their bytecode), then the
    directories it leaves empty."""
    touched: set[Path] = set()
    for path in recorded_files(prefix, site, dist_info):
        try:
            if os.path.lexists(path):
                os.unlink(path)
        except OSError as error:
            return [f"{path} could not be deleted: {error.strerror or error}"]
        touched.add(path.parent)
        if path.suffix == ".py":
            for compiled in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
                compiled.unlink(missing_ok=True)
            touched.add(path.parent / "__pycache__")
    shutil.rmtree(site / dist_info, ignore_errors=True)
    root = os.path.realpath(site)
    for directory in sorted(touched, key=lambda p: len(p.parts), reverse=True):
        while os.path.realpath(directory) != root and directory.is_relative_to(site):
            try:
                os.rmdir(directory)
            except OSError:
                break
            directory = directory.parent
    return []
