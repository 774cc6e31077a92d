"""`envkit remove`: delete an environment envkit made, with its kernel and its record, and nothing else.

A run of that name that was interrupted (SIGKILL, a power cut) is finished or undone first, so that what it set
aside cannot come back later: a removed environment stays removed, and a half-made one is cleaned up."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Mapping, Optional

from envkit.create.add_journal import journal_path as adding_journal
from envkit.create.journal import recover_name
from envkit.create.jupyter import kernels_dir, remove_kernel
from envkit.create.lock import name_lock
from envkit.errors import EnvkitError
from envkit.state import ownership, records
from envkit.state.records import in_prefix
from envkit.state.testpause import fault_at
from envkit.state.userdirs import UserDirs


def remove_environment(name: str, dirs: UserDirs, environ: Mapping[str, str]) -> Optional[list[str]]:
    """Delete it; returns what was done, one line each, or None when envkit made no environment of that name and no
    run of it was interrupted. A directory whose own record names another environment (or none) is left alone:
    the index entry alone is forgotten."""
    done: list[str] = []
    with name_lock(dirs.locks, name):
        for note in recover_name(dirs.locks, dirs.records, name):
            done.append(f"{note[0].upper()}{note[1:]}.")
        broken = records.unreadable(dirs.records, name)
        if broken is not None:  # what the entry says is not trusted: a directory goes only if its own record is
            done.append(f"Its record could not be read ({broken.reason}).")
            if broken.prefix is None:
                done.append("It names no directory: nothing deleted.")
            else:
                _delete(name, Path(broken.prefix), broken.kernel, environ, done)
            records.forget(dirs.records, name)
            done.append(f"Forgot {name}.")
            return done
        record = records.load(dirs.records, name)
        if record is None:
            return done or None
        _delete(record.name, Path(record.prefix), record.kernel, environ, done)
        records.forget(dirs.records, record.name)
        adding_journal(dirs.locks, record.name).unlink(missing_ok=True)  # an interrupted add's: nothing left to undo
        done.append(f"Forgot {record.name}.")
    return done


def _delete(name: str, prefix: Path, kernel: Optional[str], environ: Mapping[str, str], done: list[str]) -> None:
    """The environment's directory (if the record inside names it) and its kernel (if it runs this prefix's Python,
    and the prefix is the environment's or gone: a directory that holds another environment keeps its kernel)."""
    problem = ownership.holding_problem(prefix, name)
    if problem is not None and os.path.lexists(prefix):
        done.append(f"Left {prefix} alone: it does not hold envkit's environment {name} ({problem}).")
        return
    if kernel and remove_kernel(kernel, prefix, environ):
        done.append(f"Removed the Jupyter kernel {kernel!r}.")
    elif kernel and os.path.lexists(kernels_dir(environ) / kernel):
        done.append(f"Left the Jupyter kernel {kernel!r} alone: it no longer runs this environment's Python.")
    if problem is not None:
        done.append(f"{prefix} was already gone.")
        return
    linked = os.path.islink(prefix)  # moved to another disk and linked back: the directory, then the link
    real = Path(os.path.realpath(prefix)) if linked else prefix
    try:
        _delete_tree(real)
        if linked:
            os.unlink(prefix)
    except OSError as error:
        raise EnvkitError(f"cannot delete {prefix}: {error.strerror or error} ({error.filename or real})",
                          hint=f"Fix the permissions there and run `envkit remove {name} --yes` again.") from None
    done.append(f"Deleted {real} and the link {prefix} to it." if linked else f"Deleted {prefix}.")


def _delete_tree(root: Path) -> None:
    """``root`` and all it holds; the record that says it is envkit's environment last, so that a deletion that
    fails part-way leaves a directory `envkit remove` still knows as the environment, to finish it."""
    keep = in_prefix(root).parent
    fault_at("remove", root)
    with os.scandir(root) as entries:
        for entry in entries:
            if entry.path == str(keep):
                continue
            if entry.is_dir(follow_symlinks=False):
                _rmtree(entry.path)
            else:
                os.unlink(entry.path)
    if os.path.lexists(keep):
        _rmtree(str(keep))
    os.rmdir(root)


def _rmtree(path: str) -> None:
    """shutil.rmtree, its error naming the whole path of what it could not delete (its own names that relative to
    the directory it was in)."""
    def named(function, name, error) -> None:
        error = error[1] if isinstance(error, tuple) else error  # onerror's exc_info; onexc's exception (3.12)
        raise OSError(error.errno, error.strerror, name) from None

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=named)
    else:
        shutil.rmtree(path, onerror=named)
