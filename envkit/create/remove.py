"""`envkit remove`: delete an environment envkit made, with its kernel and its record, and nothing else.

A run of that name that was interrupted (SIGKILL, a power cut) is finished or undone first, so that what it set
aside cannot come back later: a removed environment stays removed, and a half-made one is cleaned up."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Mapping, Optional

from envkit import ownership, records
from envkit.create.journal import recover_name
from envkit.create.lock import name_lock
from envkit.errors import EnvkitError
from envkit.jupyter import remove_kernel
from envkit.userdirs import UserDirs


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
    if problem is not None:
        done.append(f"{prefix} was already gone.")
        return
    try:
        shutil.rmtree(prefix)
    except OSError as error:
        raise EnvkitError(f"cannot delete {prefix}: {error.strerror or error} ({error.filename})",
                          hint="Fix the permissions there and run `envkit remove` again.") from None
    done.append(f"Deleted {prefix}.")
