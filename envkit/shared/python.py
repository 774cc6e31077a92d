"""The Python a shared venv is made from: one every user it is published for can run (a venv points at its base
interpreter, so an admin's own pyenv Python under a home of mode 0700 would make an environment nobody else runs).

Looked for, first found first: a Python under the shared directory's ``python/`` (``uv python install
--install-dir SHARED/python X.Y`` puts one there; so may an admin by hand, as ``python/NAME/bin/pythonX.Y``), the one
running envkit, every ``pythonX.Y`` on PATH, then ``/usr/local/bin`` and ``/usr/bin``. Each is judged as
envkit.shared.reach judges a publication (every directory to it, its standard library and libpython), and run to be
sure of its version. When none will do, the reason names each one and what stops it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping, Optional

from packaging.version import Version

from envkit.shared.reach import RUN, Audience, base_needs, first_blocked, for_audience

SYSTEM_DIRS = ("/usr/local/bin", "/usr/bin")


def candidates(version: Version, root: Path, environ: Mapping[str, str]) -> list[Path]:
    """Where a Python ``version`` (X.Y) may be, in the order they are tried (see the module's docstring)."""
    name = f"python{version}"
    found = sorted((root / "python").glob(f"*/bin/{name}"), reverse=True)  # the newest patch release first
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == str(version):
        found.append(Path(getattr(sys, "_base_executable", None) or sys.executable))
    for directory in [*environ.get("PATH", "").split(os.pathsep), *SYSTEM_DIRS]:
        if directory and os.path.isabs(directory):
            found.append(Path(directory) / name)
    seen, out = set(), []
    for path in found:
        real = os.path.realpath(path)
        if real not in seen and os.path.isfile(real) and os.access(real, os.X_OK):
            seen.add(real)
            out.append(path)
    return out


def what_stops(python: Path, version: Version, audience: Audience) -> Optional[str]:
    """Why ``audience`` cannot run the interpreter ``python`` of ``version`` (its directories, the file, its standard
    library and libpython), in words; None when nothing does."""
    base = Path(os.path.realpath(python)).parent.parent
    found = first_blocked([(python, RUN), *base_needs(base, str(version))], for_audience(audience))
    return found.words(audience.who()) if found is not None else None


def shareable_python(version: Version, root: Path, audience: Audience, environ: Mapping[str, str],
                     runs_as) -> tuple[Optional[Path], Optional[str]]:
    """(a Python ``version`` that ``audience`` can run, None) or (None, why there is none here). ``runs_as(path)``:
    whether the interpreter runs as that version (envkit.backends.tools)."""
    refused = []
    for python in candidates(version, root, environ):
        problem = what_stops(python, version, audience)
        if problem is not None:
            refused.append(f"{python}: {problem}")
        elif runs_as(python):
            return python, None
    where = "; ".join(refused) if refused else "none was found"
    return None, (f"no Python {version} that {audience.words()} can run is on this machine ({where}); put one "
                  f"under {root / 'python'} (`uv python install --install-dir {root / 'python'} {version}`)")
