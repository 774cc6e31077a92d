"""Running a command inside an environment, as activating it would: PATH, the environment variables conda or venv
set, and for conda prefixes the package activation scripts (etc/conda/activate.d, e.g. a CUDA toolkit's)."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path
from typing import Mapping, Optional, Sequence

from envkit.errors import BadInputError

_SOURCE_AND_EXEC = 'for f in "$0"/etc/conda/activate.d/*.sh; do [ -r "$f" ] && . "$f"; done; exec "$@"'


def activated_environ(prefix: Path, kind: str, name: str, environ: Mapping[str, str]) -> dict[str, str]:
    out = {k: v for k, v in environ.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX")}
    # The environment active now, of the same kind, is left first, as bin/activate (its `deactivate`) and conda
    # activate (without --stack) do: its commands would otherwise stand in for those this one lacks.
    active = environ.get("VIRTUAL_ENV" if kind == "venv" else "CONDA_PREFIX")
    left = os.path.normpath(os.path.join(active, "bin")) if active else None
    path = environ.get("PATH", "")
    kept = [entry for entry in (path.split(os.pathsep) if path else []) if not entry or os.path.normpath(entry) != left]
    out["PATH"] = os.pathsep.join([str(prefix / "bin"), *kept])
    if kind == "conda":
        out["PYTHONNOUSERSITE"] = "1"  # conda's Python reads ~/.local; a torch there would shadow the environment's
    if kind == "venv":
        out["VIRTUAL_ENV"] = str(prefix)
    else:
        out["CONDA_PREFIX"] = str(prefix)
        out["CONDA_DEFAULT_ENV"] = name
    _hold(prefix, out)
    return out


HELD_BY = ("UV_CONSTRAINT", "PIP_CONSTRAINT")  # lists of files separated by spaces, as pip and uv read them


def _hold(prefix: Path, environ: dict[str, str]) -> None:
    """The environment's held build (its constraints, envkit.backends.guard) first in UV_CONSTRAINT and
    PIP_CONSTRAINT, what the user set after it: `pip install` and `uv pip install` run in it cannot replace the
    build. A path with whitespace cannot be named there (both split on it): pip.conf alone holds then."""
    from envkit.state.records import RECORD_DIR

    held = prefix / RECORD_DIR / "constraints.txt"
    if any(char.isspace() for char in str(held)) or not held.is_file():
        return
    for variable in HELD_BY:
        kept = [entry for entry in environ.get(variable, "").split() if entry != str(held)]
        environ[variable] = " ".join([str(held), *kept])


def check_command(command: str, path: str, env: str) -> None:
    """BadInputError (exit 2) saying why ``command`` cannot be run in ``env`` with ``path`` as its PATH, as execvp
    looks it up (a name with a slash as it is, else the first executable of that name on PATH); None if it can."""
    if shutil.which(command, path=path) is not None:
        return
    if not command:
        raise BadInputError("the command to run is empty", hint=f"e.g. envkit run {env} -- python -V")
    if os.sep in command:
        if os.path.isdir(command):
            raise BadInputError(f"{command} is a directory, not a command")
        if not os.path.exists(command):
            broken = " (a symbolic link to nothing)" if os.path.islink(command) else ""
            raise BadInputError(f"{command}: no such file{broken}")
        raise BadInputError(f"{command} is not executable",
                            hint=f"Make it so (chmod +x {shlex.quote(command)}), or run it with its interpreter: "
                                 f"envkit run {env} -- bash {shlex.quote(command)} (or python ...).")
    found = [Path(directory or ".") / command for directory in path.split(os.pathsep)]
    unusable = next((candidate for candidate in found if candidate.exists()), None)
    said = ""
    if unusable is not None:
        said = f" ({unusable} is {'a directory' if unusable.is_dir() else 'not executable'})"
    hint = ("Everything after ENV is the command to run; `envkit run --help` shows what run itself takes."
            if command.startswith("-") else None)
    raise BadInputError(f"{command}: no such command in {env} or on PATH{said}", hint=hint)


def activated_argv(prefix: Path, kind: str, argv: Sequence[str]) -> list[str]:
    """``argv`` as run in the environment: through a shell that sources the activation scripts, when it has any."""
    scripts = prefix / "etc" / "conda" / "activate.d"
    if kind == "conda" and any(scripts.glob("*.sh")):
        shell = shutil.which("bash") or "/bin/sh"
        return [shell, "-c", _SOURCE_AND_EXEC, str(prefix), *argv]
    return list(argv)


def activation_hint(prefix: Path, kind: str, name: str, in_conda_envs: bool, conda_tool: Optional[str]) -> str:
    """How the user activates it in their shell; ``conda_tool``: conda, mamba or micromamba, if they have one."""
    where = shlex.quote(str(prefix))
    if kind == "venv":
        return f"source {shlex.quote(str(prefix / 'bin' / 'activate'))}"
    if conda_tool is not None:
        return f"{conda_tool} activate {name if in_conda_envs else where}"
    return f"envkit run {name} -- bash   (a shell inside it; with conda or micromamba: activate {where})"
