"""Which backend makes an environment: the user's choice, checked, or `auto`'s, with the reason. Pure."""

from __future__ import annotations

from typing import Optional

from packaging.version import Version

from envkit.backends.base import Backend
from envkit.backends.tools import Tools
from envkit.catalog.model import Build
from envkit.errors import BadInputError

BACKENDS = ("auto", "conda", "rattler", "venv")


def choose_backend(requested: str, build: Build, python: Version, tools: Tools) -> tuple[str, str]:
    """(backend name, why): ``requested`` if it can make this build, else a BadInputError saying what can."""
    if requested not in BACKENDS:
        raise BadInputError(f"--backend {requested!r} is not one of {', '.join(BACKENDS)}")
    conda_packages = _conda_packages(build)
    conda = tools.conda
    if requested == "auto":
        return _auto(build, python, tools, conda_packages)
    if requested == "venv":
        if conda_packages:
            raise BadInputError(f"{build.id} installs conda packages ({conda_packages}): a venv cannot hold them",
                                hint="Use --backend conda or --backend rattler (or auto).")
        if tools.python is None:
            raise BadInputError(tools.python_refused or f"there is no Python {python} on this machine to make a venv "
                                "with", hint="Use --backend rattler (or auto): it brings its own Python from "
                                             "conda-forge.")
        return "venv", f"asked for (--backend venv); Python {python} from {tools.python}"
    if requested == "conda":
        if conda is None:
            raise BadInputError("there is no conda, mamba or micromamba on PATH",
                                hint="Use --backend rattler (or auto): envkit's embedded conda engine needs none.")
        return "conda", f"asked for (--backend conda); using {conda.kind} at {conda.path}"
    return "rattler", "asked for (--backend rattler): envkit's embedded conda engine"


def _auto(build: Build, python: Version, tools: Tools, conda_packages: Optional[str]) -> tuple[str, str]:
    conda = tools.conda
    if conda_packages:
        why = f"{build.id} installs conda packages ({conda_packages})"
        if conda is not None:
            return "conda", f"{why}: using your {conda.kind} at {conda.path}"
        return "rattler", f"{why} and there is no conda, mamba or micromamba on PATH: envkit's embedded conda engine"
    if tools.python is not None:
        installer = "uv" if tools.uv is not None else "pip"
        return "venv", f"a pure-pip build, and Python {python} is on this machine ({tools.python}): a venv, {installer}"
    missing = tools.python_refused or f"Python {python} is not on this machine"
    if conda is not None:
        return "conda", f"{missing}: your {conda.kind} at {conda.path} provides it"
    return "rattler", f"{missing} and there is no conda: envkit's embedded conda engine provides it"


def _conda_packages(build: Build) -> Optional[str]:
    if build.conda is None or not build.conda.packages:
        return None
    names = [spec.split("=")[0].split(" ")[0] for spec in build.conda.packages]
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def backend_for(name: str, tools: Tools) -> Backend:
    if name == "venv":
        from envkit.backends.venv import VenvBackend

        return VenvBackend()
    if name == "conda":
        from envkit.backends.conda import CondaBackend

        assert tools.conda is not None  # choose_backend picks conda only when there is one
        return CondaBackend(tools.conda)
    from envkit.backends.rattler import RattlerBackend

    return RattlerBackend()
