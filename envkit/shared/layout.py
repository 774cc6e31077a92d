"""The shared directory's layout, and the names of shared environments (pure: paths and words, no I/O).

::

    SHARED/                       (the config's ``shared:``, or $ENVKIT_SHARED)
      envs/NAME/VERSION/          one prefix per published version, never changed once published
      envs/NAME/current           -> VERSION: the stable name, repointed by a replacement (--force)
      records/NAME.json           the current version's record, with who published it, when, for which target
      modulefiles/envkit/NAME     the Tcl modulefile (Environment Modules; Lmod reads it too)
      modulefiles/envkit/NAME.lua the Lua modulefile (Lmod prefers it to the Tcl one beside it)
      state/                      the journals and locks of publishing runs (the admins')

A user names a shared environment ``site:NAME``: never the same as a name of their own (a name of theirs cannot hold
a colon), so neither shadows the other.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Mapping, NamedTuple, Optional

PREFIX = "site:"
VARIABLE = "ENVKIT_SHARED"
CURRENT = "current"
FAMILY = "envkit"  # the module family (Lmod) and the directory of envkit's modulefiles: envkit/NAME
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


class SharedLayout(NamedTuple):
    root: Path

    @property
    def envs(self) -> Path:
        return self.root / "envs"

    @property
    def records(self) -> Path:
        return self.root / "records"

    @property
    def modulefiles(self) -> Path:
        return self.root / "modulefiles"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def versions_dir(self, name: str) -> Path:
        return self.envs / name

    def prefix(self, name: str, version: str) -> Path:
        return self.envs / name / version

    def current(self, name: str) -> Path:
        return self.envs / name / CURRENT

    def record(self, name: str) -> Path:
        return self.records / f"{name}.json"

    def module_files(self, name: str) -> tuple[Path, Path]:
        """(the Tcl modulefile, the Lua one) of ``name``, as `module load envkit/NAME` finds them."""
        return self.modulefiles / FAMILY / name, self.modulefiles / FAMILY / f"{name}.lua"


def shared_name(env: str) -> Optional[str]:
    """NAME of ``site:NAME``, or None for a name that is not a shared environment's."""
    return env[len(PREFIX):] if env.startswith(PREFIX) else None


def shown_name(name: str) -> str:
    return f"{PREFIX}{name}"


def version_id(build: str, manifest: str, when: datetime) -> str:
    """The version directory of a publication: the build without its manifest's name, then the UTC time
    (``torch-2.13-cu126`` published 2026-11-27 01:08:55 -> ``2.13-cu126-20261127T010855Z``)."""
    short = build[len(manifest) + 1:] if build.startswith(manifest + "-") else build
    return f"{short}-{when.strftime('%Y%m%dT%H%M%SZ')}"


def is_version(text: str) -> bool:
    return ".." not in text and text != CURRENT and bool(_VERSION.match(text))


def shared_root(environ: Mapping[str, str], configured: Optional[Path]) -> Optional[Path]:
    """The shared directory: $ENVKIT_SHARED (a module or a profile script sets it for everyone), else the config's
    ``shared:``; None when neither names one. A relative $ENVKIT_SHARED is ignored, as XDG's relative paths are."""
    named = environ.get(VARIABLE, "")
    if os.path.isabs(named):
        return Path(os.path.normpath(named))
    return configured
