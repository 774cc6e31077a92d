"""`envkit remove`: delete an environment envkit made, with its kernel and its record, and nothing else."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Mapping

from envkit import records
from envkit.create.lock import name_lock
from envkit.errors import EnvkitError
from envkit.jupyter import remove_kernel
from envkit.userdirs import UserDirs


def remove_environment(record: records.Record, dirs: UserDirs, environ: Mapping[str, str]) -> list[str]:
    """Delete it; returns what was done, one line each. A directory whose own record names another environment
    (or none) is left alone: the index entry alone is forgotten."""
    prefix = Path(record.prefix)
    done = []
    with name_lock(dirs.locks, record.name):
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

