"""What this machine offers to build environments with: a conda executable, uv, a Python of the wanted version.

The one place that looks around the machine for them; everything that decides from what is found is pure
(backends.choose).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from packaging.version import Version

from envkit.errors import BadInputError
from envkit.state.userdirs import UserDirs
from envkit.system.process import query

# Fastest first: micromamba and mamba solve in a fraction of conda's time (conda >= 23.10 uses libmamba too).
CONDA_KINDS = ("micromamba", "mamba", "conda")
INSTALLER_VARIABLE = "ENVKIT_INSTALLER"  # "pip": install with pip even where uv is available
_QUERY_TIMEOUT = 30.0


@dataclass(frozen=True)
class CondaTool:
    kind: str  # micromamba, mamba or conda
    path: Path


@dataclass(frozen=True)
class Tools:
    conda: Optional[CondaTool]
    uv: Optional[Path]  # None: pip installs everything
    python: Optional[Path]  # an interpreter of the plan's Python version on this machine, for a venv
    python_refused: Optional[str] = None  # why there is none that will do (a shared venv's: envkit.shared.python)


def find_conda(environ: Mapping[str, str]) -> Optional[CondaTool]:
    """The user's fastest conda executable on PATH, else the one their shell set up ($MAMBA_EXE, $CONDA_EXE)."""
    path = environ.get("PATH", os.defpath)
    for kind in CONDA_KINDS:
        found = shutil.which(kind, path=path)
        if found:
            return CondaTool(kind, Path(found))
    for variable in ("MAMBA_EXE", "CONDA_EXE"):
        value = environ.get(variable)
        if value and os.access(value, os.X_OK):
            name = Path(value).name
            return CondaTool(next((k for k in CONDA_KINDS if name.startswith(k)), "conda"), Path(value))
    return None


def find_uv(environ: Mapping[str, str]) -> Optional[Path]:
    """uv, which envkit depends on, unless the user asked for pip ($ENVKIT_INSTALLER=pip; uv or unset: uv)."""
    asked = environ.get(INSTALLER_VARIABLE, "").strip().lower()
    if asked not in ("", "uv", "pip"):
        raise BadInputError(f"${INSTALLER_VARIABLE}={environ[INSTALLER_VARIABLE]!r}: expected pip or uv",
                            hint=f"Unset it to install with uv, or set {INSTALLER_VARIABLE}=pip.")
    return None if asked == "pip" else installed_uv()


def installed_uv() -> Optional[Path]:
    """The uv installed with envkit (the uv package's own binary), or None when it is missing."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return Path(find_uv_bin())
    except FileNotFoundError:
        return None


def find_python(version: Version, uv: Optional[Path], environ: Mapping[str, str],
                dirs: Optional[UserDirs] = None) -> Optional[Path]:
    """An interpreter of ``version`` (X.Y) already on this machine, never a download: the one running envkit, else
    uv's discovery (PATH and uv-managed Pythons), else pythonX.Y on PATH, else a pyenv install. Each candidate found
    is run to be sure: a pyenv shim for a version that is not active fails."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == str(version):
        return Path(getattr(sys, "_base_executable", None) or sys.executable)  # the one running envkit: no search
    if uv is not None:
        from envkit.backends.installers import installer_environ

        out = query([str(uv), "python", "find", "--no-python-downloads", "--system", str(version)],
                    installer_environ(environ, dirs), _QUERY_TIMEOUT)  # uv's cache: envkit's, never ~/.cache/uv
        if out and out.strip():
            return Path(out.strip().splitlines()[-1])
    for candidate in _python_candidates(version, environ):
        if runs_as(candidate, version, environ):
            return candidate
    return None


def _python_candidates(version: Version, environ: Mapping[str, str]) -> list[Path]:
    out = []
    on_path = shutil.which(f"python{version}", path=environ.get("PATH", os.defpath))
    if on_path:
        out.append(Path(on_path))
    pyenv = Path(environ.get("PYENV_ROOT") or Path(environ.get("HOME", "~")).expanduser() / ".pyenv")
    try:
        found = list(pyenv.glob(f"versions/{version}.*/bin/python{version}"))
    except OSError:  # a PYENV_ROOT this user may not read: no Python from there
        found = []
    installs = sorted(found, key=lambda p: _patch(p.parent.parent.name), reverse=True)
    return out + installs


def _patch(name: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in name.split("."))
    except ValueError:
        return ()


def runs_as(python: Path, version: Version, environ: Mapping[str, str]) -> bool:
    """Whether ``python`` runs, as Python ``version`` (X.Y)."""
    out = query([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                {"PATH": environ.get("PATH", os.defpath)}, _QUERY_TIMEOUT)
    return out is not None and out.strip() == str(version)
