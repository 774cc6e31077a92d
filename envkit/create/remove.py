"""`envkit remove`: delete an environment envkit made, with its kernel and its record, and nothing else.

A run of that name that was interrupted (SIGKILL, a power cut) is finished or undone first, so that what it set
aside cannot come back later: a removed environment stays removed, and a half-made one is cleaned up."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Mapping, Optional

from envkit import records
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
        record = records.load(dirs.records, name)
        if record is None:
            return done or None
        prefix = Path(record.prefix)
        if record.kernel and remove_kernel(record.kernel, prefix, environ):
            done.append(f"Removed the Jupyter kernel {record.kernel!r}.")
        if records.owner(prefix) == record.name:
            try:
                shutil.rmtree(prefix)
            except OSError as error:
                raise EnvkitError(f"cannot delete {prefix}: {error.strerror or error} ({error.filename})",
                                  hint="Fix the permissions there and run `envkit remove` again.") from None
            done.append(f"Deleted {prefix}.")
        elif prefix.exists():
            done.append(f"Left {prefix} alone: it does not hold envkit's record of {record.name}.")
        else:
            done.append(f"{prefix} was already gone.")
        records.forget(dirs.records, record.name)
        done.append(f"Forgot {record.name}.")
    return done
