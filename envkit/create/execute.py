"""Carry out a plan, all or nothing: a failure or Ctrl-C at any step removes what this run made and puts back the
environment it was replacing (--force), so nothing half-made is ever left looking like an environment. A run that
dies without a chance to clean up (SIGKILL, a power cut) is undone by the next one (envkit.create.journal).

Order: lock the name and the prefix; stop what a dead run left running and undo it (this name's, then any other's
whose lock is free); decide what --force replaces and set it aside; make room for the prefix (the directories above
it made, or an empty directory at it removed: an undo puts both back as they were); say in the journal that the prefix
is being made, make it (backend) and stamp it; pip steps, each package checked to be the build asked for; Jupyter
kernel; the post-install check (a --force run whose new environment fails it is undone: the old one stays); the record
(with the run's id); unstamp; delete what was replaced. Every child process is in the journal as it starts.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Optional, Sequence

from envkit.backends.base import Context, PythonCheck, python_of, run_step, start_python_check
from envkit.backends.installers import pip_command, pip_environ, uses_uv, wrong_builds
from envkit.backends.plan import Plan
from envkit.create.journal import Journal, empty_directory, recover, recover_others, unstamp
from envkit.create.jupyter import install_argv, kernel_name, kernels_dir, runs_in
from envkit.create.leftovers import MARK
from envkit.create.lock import journal_path, name_lock, prefix_lock
from envkit.create.prepare import Prepared, elsewhere_hint
from envkit.create.progress import Progress
from envkit.create.storage import room_said
from envkit.errors import EnvkitError, InstallError
from envkit.state import ownership, records
from envkit.state.testpause import fault_at, pause_at
from envkit.state.userdirs import UserDirs
from envkit.system.egress import guarded
from envkit.system.process import watching
from envkit.system.scratch import scratch_dir, sweep
from envkit.system.signals import interrupting_signals

if TYPE_CHECKING:
    from envkit.probe.diagnose import Report

Checker = Callable[[Plan, Path], "Report"]  # (plan, the environment's Python) -> the post-install check's report


class AlreadyExists(EnvkitError):
    """An environment of that name (or something else at that path) is in the way."""


class ReplacementFailed(EnvkitError):
    """--force: the new environment failed its post-install check, so the one it was to replace is kept."""

    def __init__(self, message: str, hint: str, report: "Report") -> None:
        super().__init__(message, hint)
        self.report = report


@dataclass(frozen=True)
class Outcome:
    record: records.Record
    report: Optional["Report"]  # None with --no-verify
    replaced: Optional[str]  # the prefix of the environment --force replaced
    kept: bool = True  # False: made, then not kept (create --shared: a version that failed its check is deleted)


def step_count(plan: Plan) -> int:
    return 1 + len(plan.pip) + int(plan.jupyter) + int(plan.verify)


def execute(prepared: Prepared, dirs: UserDirs, progress: Progress, force: bool, checker: Checker,
            environ: Mapping[str, str], manifests: Optional[str] = None) -> Outcome:
    """``manifests``: the manifests directory the plan's build was read from, for the record (None: the shipped
    one)."""
    plan = prepared.plan
    try:
        with name_lock(dirs.locks, plan.name), prefix_lock(dirs.locks, plan.prefix), interrupting_signals():
            notes = recover(journal_path(dirs.locks, plan.name), dirs.records)
            for note in notes + recover_others(dirs.locks, dirs.records, plan.name):
                progress.note(note)
            sweep()  # what a dead run's installers had in $TMPDIR (envkit.system.scratch)
            old = records.load(dirs.records, plan.name)
            replaced = to_replace(plan, old, force, environ)
            spec = kernels_dir(environ) / kernel_name(plan.name) if plan.jupyter else None
            journal = Journal(journal_path(dirs.locks, plan.name), name=plan.name, prefix=str(plan.prefix),
                              run=os.urandom(8).hex(), kernelspec=str(spec) if spec else None,
                              old_record=old.to_dict() if old is not None else None)
            building = False
            try:
                journal.save()  # inside: a Ctrl-C right after it is undone (the journal with it), not left
                pause_at("journal")
                for path in replaced:
                    journal.move_aside(path)
                pause_at("aside")
                _make_room(journal, plan, dirs, environ)
                pause_at("room")
                building = True
                journal.begin_prefix()
                pause_at("begun")
                marked = replace(prepared, context=replace(prepared.context, environ={
                    **prepared.context.environ, MARK: journal.run}))  # each installer's: a dead run's are found
                with watching(journal.add_process), _cache_in_use(prepared), \
                        room_said(prepared.storage, plan.prefix):
                    record, report = _build(marked, progress, checker, journal, manifests)
                if report is not None and not report.ok and old is not None and Path(old.prefix) in replaced:
                    raise ReplacementFailed(
                        f"the new {plan.name} failed its post-install check, so it replaced nothing: the "
                        f"environment at {old.prefix} is kept as it was", report=report,
                        hint="The report above says why. Without --force, create it under another --name to keep "
                             "and inspect the new one.")
                fault_at("record", records.index_path(dirs.records, plan.name))
                records.save(record, dirs.records)
                _measure(prepared, dirs)
                pause_at("recorded")
                unstamp(plan.prefix)
                pause_at("unstamped")
            except BaseException:
                for note in journal.undo(dirs.records, made_prefix=building):
                    progress.note(note)
                raise
            try:
                for note in journal.commit():
                    progress.note(note)
            except EnvkitError as error:  # the journal could not say so: the next run sees the record and finishes
                progress.note(f"{plan.name} is complete and ready to use; {error.message}: the next `envkit create` "
                              "deletes what it replaced")
            except KeyboardInterrupt:
                left = ", ".join(aside for _, aside in journal.set_aside)
                progress.note(f"{plan.name} is complete and ready to use; deleting what it replaced ({left}) was "
                              "interrupted: the next `envkit create` finishes that")
                raise
            replaced_prefix = old.prefix if old is not None and Path(old.prefix) in replaced else None
            return Outcome(record=record, report=report, replaced=replaced_prefix)
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        raise EnvkitError(f"creating {plan.name} failed: {error.strerror or error}{where}",
                          hint="Check that you can write there and that the disk has room; what this run made was "
                               "removed.") from None


def _build(prepared: Prepared, progress: Progress, checker: Checker, journal: Journal,
           manifests: Optional[str] = None) -> tuple[records.Record, Optional["Report"]]:
    plan, backend, context = prepared.plan, prepared.backend, prepared.context
    pins = _Pins(plan, context.mirrors)  # the build's exact variant, read beside the making of its Python
    with progress.step(f"Creating the environment at {plan.prefix} ({plan.backend}, Python {plan.python})") as out:
        with _pausing_at_start("inside-backend"), _noting_prefix(journal, plan.prefix):
            backend.make_prefix(plan, context, out)
        journal.note_prefix(plan.prefix)
        pause_at("backend")
        journal.mark_stamped(plan.prefix)
        python_check = start_python_check(plan.prefix, context.environ)
        if not plan.pip:  # nothing to run beside it
            python_check.result(plan.backend)
    with _judged_after(python_check, plan.backend):
        pause_at("stamped")
        plan = pins.pinned(progress)  # before any download: an index serving another build only is refused here
        installer, added = _install_pip(plan, context, progress)
    held = hold(plan)  # (again, after any additions: what they installed is not held, and changes nothing)
    python = python_of(plan.prefix)
    kernel = None
    if plan.jupyter:
        kernel = kernel_name(plan.name)
        with progress.step(f"Registering the Jupyter kernel {kernel!r}") as out, \
                scratch_dir("kernel") as scratch:
            # ipykernel's installer writes the kernelspec into a temporary directory of its own and leaves it
            # behind: under a TMPDIR of envkit's, which is removed, the user's temporary directory stays clean.
            run_step(install_argv(python, plan.name), {**context.environ, "TMPDIR": str(scratch)}, out,
                     "registering the Jupyter kernel failed", hint="The lines above are ipykernel's.")
    report = None
    if plan.verify:
        with progress.step("Checking that it works (the post-install check)"), _pausing_at_start("checking"):
            report = checker(plan, python)
        pause_at("checked")
    record = records.Record(
        name=plan.name, prefix=str(plan.prefix), kind=plan.kind,
        backend=plan.backend, manifest=plan.manifest, build=plan.build.id, python=str(plan.python),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine=plan.profile.to_dict(),
        on_target=plan.on_target, installer=installer, kernel=kernel, target=plan.target,
        verify=_summary(report) if report is not None else None, run=journal.run, manifests=manifests,
        held=held.pins(), additions=list(plan.additions) or None, added=added, on=plan.on,
        cuda=records.build_cuda(plan.build),
        rocm=records.build_rocm(plan.build),
    )
    return record, report


class _Pins:
    """The plan's pip steps pinned to the build's exact variant (envkit.create.variants), read in a thread of its
    own from the moment it is made: beside the making of the environment's Python, where it costs create no time."""

    def __init__(self, plan: Plan, mirrors: Sequence[str]) -> None:
        self.plan, self.mirrors = plan, mirrors
        self.box: dict[str, object] = {}
        self.thread = threading.Thread(target=self._read, daemon=True, name="envkit-pins")
        if any(step.local for step in plan.pip):
            self.thread.start()

    def _read(self) -> None:
        from envkit.create.variants import pinned_plan

        try:
            self.box["plan"] = pinned_plan(self.plan, self.mirrors)
        except BaseException as error:  # noqa: B036 (raised where the pins are asked for)
            self.box["error"] = error

    def pinned(self, progress: Progress) -> Plan:
        """The pinned plan (its pins said in a note); InstallError when an index serves another build only."""
        if not self.thread.is_alive() and not self.box:
            return self.plan
        self.thread.join()
        if "error" in self.box:
            raise self.box["error"]  # type: ignore[misc]
        pinned = self.box["plan"]
        assert isinstance(pinned, Plan)
        for before, after in zip(self.plan.pip, pinned.pip):
            if after != before:
                plain = f"; {', '.join(after.plain)} plain" if after.plain else ""  # (aarch64's torchvision)
                progress.note(f"{before.purpose}: {', '.join(after.packages)} (the +{after.local} builds{plain})")
        return pinned


def _install_pip(plan: Plan, context: Context, progress: Progress) -> tuple[Optional[str], Optional[dict]]:
    """The plan's pip steps, each package checked to be the build asked for; the installer that ran them (None: no
    step), and what the user's own packages installed (create --with: name -> version; None without them)."""
    python = python_of(plan.prefix)
    installer, added, before = None, None, None
    for step in plan.pip:
        held = None
        if step.constraints:  # the user's packages (create --with): after the build, which they must not move
            from envkit.backends.held import installed

            held, before = hold(plan), installed(plan.prefix)
            step.wanted.write_text("".join(f"{line}\n" for line in step.packages), encoding="utf-8")
        installer = "uv" if uses_uv(context.tools.uv, plan.python) else "pip"
        with progress.step(f"Installing {step.purpose} with {installer} from {step.index_url}") as out:
            allowed = (step.index_url, step.find_links or "", *context.mirrors)
            with _pausing_at_start("installing"), guarded(installer, allowed, context.environ) as proxy, \
                    _refusing(held, plan):
                run_step(pip_command(step, python, context.tools.uv, plan.python),
                         {**context.environ, **pip_environ(step, context.tools.uv, plan.python), **proxy}, out,
                         f"installing {', '.join(step.packages)} from {step.index_url} failed",
                         hint="The lines above are the installer's. Check the index (a mirror in envkit's config?) "
                              "and that it has these packages for this Python.",
                         terminal=progress.live and installer == "uv")  # uv's download bars, for the status line
            _check_builds(plan.prefix, step)
        if before is not None and added is None:
            from envkit.backends.held import installed
            from envkit.create.add import added_now

            added = added_now(None, before, installed(plan.prefix))
        pause_at("installed")
    return installer, added


@contextlib.contextmanager
def _refusing(held, plan: Plan) -> Iterator[None]:
    """The user's packages that the installer cannot fit beside the build (``held``): refused as `envkit add`
    refuses them (envkit.backends.clash), the run undone."""
    try:
        yield
    except InstallError as failed:
        from envkit.backends.clash import refusal, unsatisfiable
        from envkit.backends.requested import project_of

        if held is None or not unsatisfiable(failed.tail):
            raise
        names = [name for line in plan.additions if (name := project_of(line))]
        raise refusal(list(failed.tail), held, names, plan.build.id, ", ".join(plan.additions),
                      outcome="nothing was made") from None


def hold(plan: Plan):
    """Hold the build just installed (envkit.backends.held): its constraints and the files that point every installer
    at them (envkit.backends.guard). The Held."""
    from envkit.backends.guard import guard_environment

    named = plan.build.pip.packages if plan.build.pip is not None else ()
    return guard_environment(plan.prefix, named, plan.companions, plan.kind, plan.name, plan.build.id,
                             conda=plan.backend != "venv", framework=plan.manifest)


@contextlib.contextmanager
def _judged_after(check: PythonCheck, installer: str) -> Iterator[None]:
    """Run the block beside the new Python's start-up check (about 10 ms of create's own time, hidden behind the
    first pip step), then judge the check. When the block's installer failed too, the check's failure is the one
    raised: a Python that does not start is why. Any other exception stops the check."""
    try:
        yield
    except InstallError:
        check.result(installer)
        raise
    except BaseException:
        check.stop()
        raise
    check.result(installer)


def _summary(report: "Report") -> dict:
    from envkit.probe.check import verify_summary

    return verify_summary(report)


def _check_builds(prefix: Path, step) -> None:
    """Each package of a GPU build must be the variant asked for (``+cu126``): an index serving a plain
    ``torch 2.13.1`` under /whl/cu126 must not make an environment recorded as the cu126 build."""
    wrong = wrong_builds(prefix, step)
    if wrong:
        raise InstallError(f"{step.index_url} served the wrong build: {'; '.join(wrong)}",
                           hint="Check that index (a mirror in envkit's config?): it must serve the build's own "
                                "wheels. What this run made was removed.")


@contextlib.contextmanager
def _noting_prefix(journal: Journal, prefix: Path) -> Iterator[None]:
    """While the backend makes the prefix, write down which directory it made as soon as it is there (a thread
    looking every 20 ms): a run that dies then is undone by deleting that directory only."""
    done = threading.Event()

    def look() -> None:
        while not done.wait(0.02):
            try:
                if journal.note_prefix(prefix):
                    return
            except EnvkitError:  # the journal cannot be written now: the backend's step says so, or the next one
                return

    watcher = threading.Thread(target=look, name="envkit-prefix-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _pausing_at_start(point: str) -> contextlib.AbstractContextManager[None]:
    """The test-only pause once the block's first child process has started (and is in the journal)."""
    return watching(lambda pgid: pause_at(point))


def check_available(plan: Plan, dirs: UserDirs, force: bool, environ: Mapping[str, str]) -> list[Path]:
    """Fail early, before the plan is shown, when the name or the path is taken (checked again under the locks);
    what --force would replace. Writes nothing: a dry run calls it too."""
    if journal_path(dirs.locks, plan.name).exists():
        return []  # a run in progress or a dead one: the real run waits for, or undoes, it first
    return to_replace(plan, records.load(dirs.records, plan.name), force, environ)


def to_replace(plan: Plan, old: Optional[records.Record], force: bool, environ: Mapping[str, str]) -> list[Path]:
    """What the new environment replaces: only envkit's own environment of this name (and its kernelspec), and only
    with --force. Anything else in the way is an AlreadyExists: envkit never deletes what it did not make."""
    # A stale record (its prefix deleted by hand, or reused) names no environment: it is simply overwritten.
    alive = old is not None and ownership.owner(Path(old.prefix)) == old.name
    if alive and not force:
        raise AlreadyExists(f"environment {plan.name!r} already exists at {old.prefix}",
                            hint="Add --force to replace it (it stays as it is if the new one fails), "
                                 "or choose another --name.")
    out: list[Path] = []
    if old is not None and alive:
        old_prefix = Path(old.prefix)
        out.append(old_prefix)
        if old.kernel:
            spec = kernels_dir(environ) / old.kernel
            if runs_in(spec, old_prefix):
                out.append(spec)
    prefix = plan.prefix
    if (prefix.exists() or prefix.is_symlink()) and prefix not in out and not empty_directory(prefix):
        owner = ownership.owner(prefix)
        what = f"envkit's environment {owner!r}" if owner else "something envkit did not make"
        hint = "envkit never replaces it: choose another --prefix or --name"
        raise AlreadyExists(f"{prefix} already holds {what}",
                            hint=hint + (f", or `envkit remove {owner}` first." if owner else ", or remove it yourself."))
    if plan.jupyter:
        spec = kernels_dir(environ) / kernel_name(plan.name)
        if spec.exists() and spec not in out:
            if not force:
                raise AlreadyExists(f"a Jupyter kernel named {spec.name!r} already exists ({spec})",
                                    hint="Add --force to replace it, or choose another --name.")
            out.append(spec)
    return out


def _make_room(journal: Journal, plan: Plan, dirs: UserDirs, environ: Mapping[str, str]) -> None:
    """The directories the prefix goes in made, or the empty directory at the prefix (the user's, made for it: no
    environment) removed, the backends want none; both undone if the run is. A directory that cannot be made is said
    plainly (prepare checked it; this is for what changed since, or what the system only says when asked)."""
    try:
        journal.make_room(plan.prefix)
    except OSError as error:
        from envkit.state.config import config_path

        where = error.filename or plan.prefix.parent
        raise EnvkitError(f"cannot create {plan.prefix}: {where} cannot be made: {error.strerror or error}",
                          hint=elsewhere_hint(config_path(environ, dirs)[0])) from None


def _cache_in_use(prepared: Prepared) -> contextlib.AbstractContextManager[None]:
    """The package cache's shared lock while the installers use it: `envkit cache clean` refuses meanwhile."""
    if prepared.storage is None:
        return contextlib.nullcontext()
    from envkit.storage.cache import using_cache

    return using_cache(prepared.storage.cache.root)


def _measure(prepared: Prepared, dirs: UserDirs) -> None:
    """The new environment's size, kept for the next plan of the same build (its room check)."""
    if prepared.storage is not None:
        from envkit.create.storage import measure

        measure(prepared.plan.prefix, prepared.storage.estimate_key, dirs)
