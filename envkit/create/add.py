"""`envkit add`: packages into an environment, its build held, all or nothing.

Order, under the environment's lock: put back what a dead add left (envkit.create.add_journal); hold the build
(envkit.backends.held: the constraints, written by create, or now for an environment made before); write the journal;
install the packages from the default index (PyPI or its mirror) with the build's constraints and every other
installed package pinned, so that the installer can only add; when that cannot be solved, ask the installer what it
would do with the build's constraints alone, refuse when even that moves the build (before anything changed), else
set aside what it would replace and install; then the framework's check (the fast part of `envkit verify`); the
record, with the additions; the journal deleted. Any failure, Ctrl-C or a failed check before the record puts the
environment back as it was.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from packaging.version import Version

from envkit.backends.base import Context, install_limits, python_of
from envkit.backends.clash import refusal, unsatisfiable
from envkit.backends.guard import constraints_path, placeholders, write_guard
from envkit.backends.held import (Held, constraints_text, held_of, installed, moved, normalized, read_constraints,
                                  site_packages)
from envkit.backends.installers import pip_command, pip_environ, uses_uv
from envkit.backends.plan import PipPart
from envkit.create.add_journal import AddJournal, dist_infos, journal_path
from envkit.create.lock import name_lock
from envkit.create.progress import Progress
from envkit.errors import EnvkitError, InstallError
from envkit.state import ownership, records
from envkit.state.testpause import fault_at, pause_at
from envkit.state.userdirs import UserDirs
from envkit.system.egress import guarded
from envkit.system.process import run_streamed, watching
from envkit.system.scratch import scratch_dir
from envkit.system.signals import interrupting_signals

Checker = Callable[[records.Record], object]  # the record -> the check's report (envkit.probe.diagnose.Report)
_KEPT_LINES = 400  # of an installer's output, for the refusal's reading of it


class CheckFailed(EnvkitError):
    """The framework's check failed after the addition: the environment was put back."""

    def __init__(self, message: str, hint: str, report: object) -> None:
        super().__init__(message, hint)
        self.report = report


@dataclass(frozen=True)
class AddRequest:
    record: records.Record
    lines: tuple[str, ...]  # what the installer gets (envkit.backends.requested)
    names: tuple[str, ...]  # the projects they name
    index_url: str  # the default index, mirrored (PyPI's)
    context: Context
    named: tuple[str, ...] = ()  # the build's own requirements (held), for an environment made before holds
    companions: tuple[str, ...] = ()
    framework: str = ""


@dataclass(frozen=True)
class Added:
    record: records.Record
    added: tuple[tuple[str, str], ...]  # (name, version) new in the environment
    changed: tuple[tuple[str, str, str], ...]  # (name, before, now)
    held: Held
    report: Optional[object] = None  # the check's, or None without one


@dataclass(frozen=True)
class WouldAdd:
    """A dry run's answer: what the installer would install, and the command."""

    lines: tuple[str, ...]  # the installer's "would install" lines
    command: tuple[str, ...]
    held: Held


def held_for(request: AddRequest, write: bool) -> tuple[Held, str]:
    """The build held and its constraints file's text, as the environment's file says, computed where there is none
    (an environment made before envkit held builds, or whose file was deleted); with ``write``, the file and the
    rest of the guard written (envkit.backends.guard). EnvkitError when a held package was moved outside envkit."""
    record = request.record
    prefix = Path(record.prefix)
    try:
        text = constraints_path(prefix).read_text(encoding="utf-8")
        held = read_constraints(text)
    except FileNotFoundError:
        held = held_of(prefix, request.named, request.companions, record.backend != "venv", request.framework)
        text = constraints_text(held, record.build, record.name)
    wrong = moved(held, installed(prefix))
    if wrong:
        raise EnvkitError(f"the build of {record.name} was changed outside envkit ({'; '.join(wrong)}), so envkit "
                          "adds nothing to it", hint=f"{record.remake_hint('--force')} as it was made.")
    if write:
        write_guard(prefix, text, record.kind, record.name)
    return held, text


def add(request: AddRequest, dirs: UserDirs, progress: Progress, checker: Optional[Checker],
        environ: Mapping[str, str]) -> Added:
    """Install the packages (see the module's docstring). Refused (nothing changed), InstallError or CheckFailed
    (put back as it was), or what was added."""
    record = request.record
    with name_lock(dirs.locks, record.name), interrupting_signals():
        for note in settle(dirs, record.name, locked=True):
            progress.note(note)
        current = records.load(dirs.records, record.name)
        if current is None or current.created != record.created:
            raise EnvkitError(f"{record.name} changed while envkit was starting: run this again")
        ownership.check_held(current)
        prefix = Path(record.prefix)
        site = site_packages(prefix)
        held, _ = held_for(request, write=True)
        before = installed(prefix)
        with scratch_dir("add") as scratch:
            wanted = _write(scratch / "requirements.txt", request.lines)
            journal = AddJournal(journal_path(dirs.locks, record.name), record.name, str(prefix), os.urandom(8).hex(),
                                 str(site), before=dist_infos(site), old_record=current.to_dict(),
                                 uv_lock=(prefix / ".lock").exists())
            try:
                journal.save()
                pause_at("add-journal")
                with watching(journal.add_process):
                    _install(request, held, before, wanted, scratch, journal, progress, environ)
                pause_at("add-installed")
                placeholders(prefix, record.name)  # (pip itself may have been the addition)
                report = None
                if checker is not None:
                    with progress.step(f"Checking that {record.build} still works (the framework's check)"):
                        report = checker(current)
                    if not getattr(report, "ok", True):
                        raise CheckFailed(f"{record.name} failed its check after the addition, so the addition was "
                                          "undone: the environment is as it was", report=report,
                                          hint="The report above says why.")
                pause_at("add-checked")
                after = installed(prefix)
                updated = replace(current, additions=merged(current.additions or [], request.lines, request.names),
                                  held=held.pins(), added=added_now(current.added, before, after))
                if report is not None:  # the check just run is the environment's last
                    from envkit.probe.check import verify_summary

                    updated = replace(updated, verify=verify_summary(report))
                fault_at("add-record", records.index_path(dirs.records, record.name))
                ownership.update(updated, dirs.records)
                pause_at("add-recorded")
            except BaseException:
                for note in journal.undo(dirs.records):
                    progress.note(note)
                raise
            journal.commit()
    return Added(updated, *_changes(before, after), held=held, report=report)


def dry_run(request: AddRequest, environ: Mapping[str, str]) -> WouldAdd:
    """What `add` would install, installing nothing; Refused when it would have to move the build."""
    record = request.record
    prefix = Path(record.prefix)
    ownership.check_held(record)
    held, text = held_for(request, write=False)
    before = installed(prefix)
    with scratch_dir("add") as scratch:
        held_file = _write(scratch / "constraints.txt", text.splitlines())
        wanted = _write(scratch / "requirements.txt", request.lines)
        freeze = _write(scratch / "installed.txt", _pins(before, held))
        step = _step(request, (held_file, freeze), wanted)
        finished, lines = _run(request, step, environ, lambda line: None, dry=True)
        if finished != 0 and unsatisfiable(lines):
            step = _step(request, (held_file,), wanted)
            finished, lines = _run(request, step, environ, lambda line: None, dry=True)
        _judge(finished, lines, request, held, dry=True)
        command = _command(request, _step(request, (constraints_path(prefix),), Path("REQUIREMENTS")), dry=False)
    return WouldAdd(tuple(_would(lines)), tuple(command), held)


def _install(request: AddRequest, held: Held, before, wanted: Path, scratch: Path, journal: AddJournal,
             progress: Progress, environ: Mapping[str, str]) -> None:
    """The installer, first able only to add (every installed package pinned); when that cannot be solved, with the
    build's constraints alone, after setting aside what it would replace."""
    prefix = Path(request.record.prefix)
    held_file = constraints_path(prefix)
    freeze = _write(scratch / "installed.txt", _pins(before, held))
    installer = "uv" if uses_uv(request.context.tools.uv, Version(request.record.python)) else "pip"
    shown = ", ".join(f"{name} {version}" for name, version in held.exact[:4]) + (", ..." if len(held.exact) > 4 else "")
    with progress.step(f"Installing {_words(request.lines)} with {installer} from {request.index_url}, the build "
                       f"held ({shown or 'nothing to hold'})") as out:
        step = _step(request, (held_file, freeze), wanted)
        finished, lines = _run(request, step, environ, out)
        if finished != 0 and unsatisfiable(lines):  # another version of a package the build does not hold is needed
            step = _step(request, (held_file,), wanted)
            finished, lines = _run(request, step, environ, out, dry=True)
            _judge(finished, lines, request, held, dry=True)
            replaced = {normalized(name) for name, _ in _would_names(lines)} & set(before)
            journal.set_aside([before[name].dist_info.name for name in sorted(replaced)])
            pause_at("add-aside")
            others = {name: dist for name, dist in before.items() if name not in replaced}
            freeze = _write(scratch / "installed.txt", _pins(others, held))
            step = _step(request, (held_file, freeze), wanted)
            finished, lines = _run(request, step, environ, out)
        _judge(finished, lines, request, held, dry=False)


def _step(request: AddRequest, constraints: tuple[Path, ...], wanted: Path) -> PipPart:
    return PipPart("your packages", request.lines, request.index_url, constraints=constraints, wanted=wanted)


def _command(request: AddRequest, step: PipPart, dry: bool = False) -> list[str]:
    record = request.record
    return pip_command(step, python_of(Path(record.prefix)), request.context.tools.uv, Version(record.python),
                       dry_run=dry)


def _run(request: AddRequest, step: PipPart, environ: Mapping[str, str], out: Callable[[str], None],
         dry: bool = False) -> tuple[Optional[int], list[str]]:
    """The installer's exit status (None: stopped at its limits) and its last lines."""
    context = request.context
    argv = _command(request, step, dry)
    version = Version(request.record.python)
    kept: deque[str] = deque(maxlen=_KEPT_LINES)

    def line(text: str) -> None:
        kept.append(text)
        out(text)

    timeout, silence = install_limits(environ)
    installer = "uv" if uses_uv(context.tools.uv, version) else "pip"
    with guarded(installer, (request.index_url, *context.mirrors), context.environ) as proxy, \
            watching(lambda pgid: pause_at("add-installing")):
        finished = run_streamed(argv, {**context.environ, **pip_environ(step, context.tools.uv, version), **proxy},
                                line, timeout=timeout, silence=silence)
    if finished.returncode is None:
        raise InstallError(f"installing {_words(request.lines)} was stopped: it ran or stayed silent too long",
                           tail=tuple(kept)[-25:], hint="Nothing was changed. If it was only slow, allow it more: "
                                                        "ENVKIT_INSTALL_TIMEOUT=SECONDS or ENVKIT_INSTALL_SILENCE.")
    return finished.returncode, list(kept)


def _judge(returncode: Optional[int], lines: list[str], request: AddRequest, held: Held, dry: bool) -> None:
    """Raise Refused when the installer could not fit the packages beside the build, InstallError when it failed
    otherwise (the index, the network, a package not found)."""
    if returncode == 0:
        return
    if unsatisfiable(lines):
        raise refusal(lines, held, request.names, request.record.build, _words(request.lines))
    what = "working out" if dry else "installing"
    raise InstallError(f"{what} {_words(request.lines)} failed (exit code {returncode}): nothing was changed",
                       tail=tuple(lines[-25:]), hint=f"The lines above are the installer's. Check the index "
                       f"{request.index_url} (a mirror in envkit's config?) and the package names.")


_WOULD = r"^\s*([+\-~])\s+([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)"  # (compiled by re when first matched)


def _would(lines: Sequence[str]) -> list[str]:
    """The installer's lines that say what it would install or remove (uv: `` + name==1.0``; pip: ``Would install
    name-1.0 ...``)."""
    return [line.strip() for line in lines if re.match(_WOULD, line) or line.startswith("Would install")]


def _would_names(lines: Sequence[str]) -> list[tuple[str, str]]:
    """(name, version) of every package the installer would install or remove."""
    out = []
    for line in lines:
        found = re.match(_WOULD, line)
        if found:
            out.append((found[2], found[3]))
        elif line.startswith("Would install"):
            out += [tuple(item.rsplit("-", 1)) for item in line[len("Would install"):].split() if "-" in item]
    return out


def _pins(present, held: Held) -> list[str]:
    """Every installed package the build does not hold, at its version: the installer may only add."""
    names = held.names()
    return [f"{dist.name}=={dist.version}" for key, dist in sorted(present.items()) if key not in names]


def _write(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _words(lines: Sequence[str]) -> str:
    return ", ".join(lines[:3]) + (f" and {len(lines) - 3} more" if len(lines) > 3 else "")


def _changes(before, after) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, str], ...]]:
    added = tuple((dist.name, dist.version) for key, dist in sorted(after.items()) if key not in before)
    changed = tuple((dist.name, before[key].version, dist.version) for key, dist in sorted(after.items())
                    if key in before and before[key].version != dist.version)
    return added, changed


def added_now(known: Optional[dict], before, after) -> dict[str, str]:
    """What the additions installed, name -> version, after this run: what it installed or changed, and what earlier
    ones did that is still installed at that version (envkit export pins those from the default index)."""
    out = {name: version for name, version in (known or {}).items()
           if isinstance(version, str) and (dist := after.get(normalized(name))) is not None and dist.version == version}
    out.update({dist.name: dist.version for key, dist in after.items()
                if key not in before or before[key].version != dist.version})
    return dict(sorted(out.items()))


def merged(old: Sequence[object], lines: Sequence[str], names: Sequence[str]) -> list[str]:
    """The record's additions after this run: a package asked for again replaces what was asked of it before."""
    from envkit.backends.requested import project_of

    new = {normalized(name) for name in names}
    kept = [line for line in old if isinstance(line, str) and normalized(project_of(line) or line) not in new]
    return [*kept, *(line for line in lines if line not in kept)]


def settle(dirs: UserDirs, name: str, locked: bool = False) -> list[str]:
    """Put back what an `envkit add` of ``name`` that died left (its journal); Busy while one is going on. What was
    done, one line each; EnvkitError when it could not be done."""
    path = journal_path(dirs.locks, name)
    if not path.exists():
        return []
    with contextlib.nullcontext() if locked else name_lock(dirs.locks, name):
        journal = AddJournal.load(path)
        if journal is None:
            return []
        if _stale(journal):
            path.unlink(missing_ok=True)
            return []
        problems = journal.undo(dirs.records)
    if problems:
        raise EnvkitError(f"an interrupted `envkit add` of {name} could not be undone: {problems[0]}",
                          hint="Fix that, then run this again (envkit tries again each time).")
    return [f"an interrupted `envkit add` of {name} was undone: {name} is as it was before it"]


def _stale(journal: AddJournal) -> bool:
    """Whether the environment the journal was written for is no longer there (removed, or made again)."""
    if not journal.prefix or not journal.old_record:
        return False
    try:
        inside = ownership.inside_record(Path(journal.prefix))
    except ValueError:
        return True
    return inside.get("created") != journal.old_record.get("created")
