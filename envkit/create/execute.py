"""Carry out a plan, all or nothing: a failure or Ctrl-C at any step removes what this run made and puts back the
environment it was replacing (--force), so nothing half-made is ever left looking like an environment.

Order: lock the name; clear a dead run's debris; set aside what --force replaces; make the prefix (backend); pip
steps; Jupyter kernel; the post-install check; the record (last: an environment with a record is complete).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Optional

from envkit import records
from envkit.backends.base import python_of, run_step
from envkit.create.lock import creating_marker, leftover_prefix, name_lock
from envkit.create.plan import Plan
from envkit.create.prepare import Prepared
from envkit.create.progress import Progress
from envkit.errors import EnvkitError
from envkit.installers import pip_command, uses_uv
from envkit.jupyter import install_argv, kernel_name, kernels_dir
from envkit.userdirs import UserDirs

if TYPE_CHECKING:
    from envkit.probe.diagnose import Report

Checker = Callable[[Plan, Path], "Report"]  # (plan, the environment's Python) -> the post-install check's report


class AlreadyExists(EnvkitError):
    """An environment of that name (or something else at that path) is in the way."""


@dataclass(frozen=True)
class Outcome:
    record: records.Record
    report: Optional["Report"]  # None with --no-verify
    replaced: Optional[str]  # the prefix of the environment --force replaced


def step_count(plan: Plan) -> int:
    return 1 + len(plan.pip) + int(plan.jupyter) + int(plan.verify)


def execute(prepared: Prepared, dirs: UserDirs, progress: Progress, force: bool, checker: Checker,
            environ: Mapping[str, str]) -> Outcome:
    plan = prepared.plan
    with name_lock(dirs.locks, plan.name), _sigterm_interrupts():
        _clear_leftover(dirs, plan.name, progress)
        old = records.load(dirs.records, plan.name)
        _check_in_the_way(plan, old, force)
        with _set_aside(_replaced_paths(plan, old, environ)) as keep_new:
            marker = creating_marker(dirs.locks, plan.name)
            marker.write_text(str(plan.prefix), encoding="utf-8")
            try:
                record, report = _build(prepared, progress, checker)
                records.save(record, dirs.records)
            except BaseException:
                _remove_tree(plan.prefix)
                if plan.jupyter:  # ours; a kernelspec it replaced comes back with the rest
                    _remove_tree(kernels_dir(environ) / kernel_name(plan.name))
                raise
            finally:
                marker.unlink(missing_ok=True)
            keep_new()
        return Outcome(record=record, report=report, replaced=old.prefix if old is not None else None)


def _build(prepared: Prepared, progress: Progress, checker: Checker) -> tuple[records.Record, Optional["Report"]]:
    plan, backend, context = prepared.plan, prepared.backend, prepared.context
    with progress.step(f"Creating the environment at {plan.prefix} ({plan.backend}, Python {plan.python})") as out:
        backend.make_prefix(plan, context, out)
    python = python_of(plan.prefix)
    installer = None
    for step in plan.pip:
        installer = "uv" if uses_uv(context.tools.uv, plan.python) else "pip"
        with progress.step(f"Installing {step.purpose} with {installer} from {step.index_url}") as out:
            run_step(pip_command(step, python, context.tools.uv, plan.python), context.environ, out,
                     f"installing {', '.join(step.packages)} from {step.index_url} failed",
                     hint="The lines above are the installer's. Check the index (a mirror in envkit's config?) and "
                          "that it has these packages for this Python.")
    kernel = None
    if plan.jupyter:
        kernel = kernel_name(plan.name)
        with progress.step(f"Registering the Jupyter kernel {kernel!r}") as out:
            run_step(install_argv(python, plan.name), context.environ, out, "registering the Jupyter kernel failed",
                     hint="The lines above are ipykernel's.")
    report = None
    if plan.verify:
        with progress.step("Checking that it works (the post-install check)"):
            report = checker(plan, python)
    record = records.Record(
        name=plan.name, prefix=str(plan.prefix), kind=plan.kind,
        backend=plan.backend, manifest=plan.manifest, build=plan.build.id, python=str(plan.python),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine=plan.profile.to_dict(),
        on_target=plan.on_target, installer=installer, kernel=kernel,
        verify=_summary(report) if report is not None else None,
    )
    return record, report


def _summary(report: "Report") -> dict:
    from envkit.probe.check import verify_summary

    return verify_summary(report)


def _clear_leftover(dirs: UserDirs, name: str, progress: Progress) -> None:
    """A run that died (killed, power cut) left a prefix without a record: remove it before starting again."""
    leftover = leftover_prefix(dirs.locks, name)
    if leftover is None:
        return
    if leftover.exists() and not records.in_prefix(leftover).exists():
        progress.note(f"removing {leftover}, left half-made by an envkit run that did not finish")
        _remove_tree(leftover)
    creating_marker(dirs.locks, name).unlink(missing_ok=True)


def check_available(plan: Plan, dirs: UserDirs, force: bool, dry_run: bool = False) -> None:
    """Fail early, before the plan is shown, when the name or the path is taken (checked again under the lock).
    A dry run takes no lock: it writes nothing, not even the lock file."""
    with contextlib.nullcontext() if dry_run else name_lock(dirs.locks, plan.name):  # a run in progress says so
        if leftover_prefix(dirs.locks, plan.name) == plan.prefix:
            return  # a dead run's debris, removed when this run starts
        _check_in_the_way(plan, records.load(dirs.records, plan.name), force, dry=True)


def _check_in_the_way(plan: Plan, old: Optional[records.Record], force: bool, dry: bool = False) -> None:
    if old is not None and not force:
        raise AlreadyExists(f"environment {plan.name!r} already exists at {old.prefix}",
                            hint="Add --force to replace it (it stays as it is if the new one fails), "
                                 "or choose another --name.")
    prefix = plan.prefix
    if not prefix.exists() and not prefix.is_symlink():
        return
    if old is not None and Path(old.prefix) == prefix:
        return
    if prefix.is_dir() and not any(prefix.iterdir()):
        if not dry:
            prefix.rmdir()  # an empty directory (made by the user for us) is no environment
        return
    owner = _recorded_name(prefix)
    what = f"envkit's environment {owner!r}" if owner else "something envkit did not make"
    raise AlreadyExists(f"{prefix} already holds {what}",
                        hint="envkit never replaces it: choose another --prefix or --name"
                             + (f", or `envkit remove {owner}` first." if owner else ", or remove it yourself."))


def _recorded_name(prefix: Path) -> Optional[str]:
    try:
        import json

        return str(json.loads(records.in_prefix(prefix).read_text(encoding="utf-8"))["name"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _replaced_paths(plan: Plan, old: Optional[records.Record], environ: Mapping[str, str]) -> list[Path]:
    """What the new environment replaces (with --force): the old prefix, the new prefix if something is there,
    and the kernelspec the new one will overwrite or leave stale."""
    paths = []
    if old is not None:
        paths.append(Path(old.prefix))
        if old.kernel:
            paths.append(kernels_dir(environ) / old.kernel)
    if plan.jupyter:
        paths.append(kernels_dir(environ) / kernel_name(plan.name))
    return list(dict.fromkeys(p for p in paths if p.exists() or p.is_symlink()))


@contextlib.contextmanager
def _set_aside(paths: list[Path]) -> Iterator[Callable[[], None]]:
    """Rename ``paths`` out of the way (same directory: an atomic rename); put them back if the block fails; delete
    them once the caller says the new environment is complete."""
    moved: list[tuple[Path, Path]] = []
    done = False

    def keep_new() -> None:
        nonlocal done
        done = True

    try:
        for path in paths:
            aside = path.with_name(f".{path.name}.envkit-replaced-{os.getpid()}")
            os.rename(path, aside)
            moved.append((path, aside))
        yield keep_new
    finally:
        for path, aside in reversed(moved):
            if done:
                _remove_tree(aside)
            else:
                _remove_tree(path)
                os.rename(aside, path)


def _remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (a cancelled Slurm job, `kill`) cleans up like Ctrl-C does."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
