"""A Jupyter kernel for an environment: ipykernel's own installer registers it as a user kernelspec."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Mapping, Optional

from envkit.system.launch import python_module


def kernel_name(env_name: str) -> str:
    return env_name.lower()  # Jupyter's kernelspec names are lower case


def install_argv(python: Path, env_name: str) -> list[str]:
    return python_module(python, "ipykernel", "install", "--user", "--name", kernel_name(env_name),
                         "--display-name", f"{env_name} (envkit)")


def kernels_dir(environ: Mapping[str, str]) -> Path:
    """The user's kernelspec directory, as jupyter_core finds it on Linux."""
    if environ.get("JUPYTER_DATA_DIR"):
        return Path(environ["JUPYTER_DATA_DIR"]) / "kernels"
    xdg = environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(environ.get("HOME", "~")).expanduser() / ".local" / "share"
    return base / "jupyter" / "kernels"


def kernel_python(spec_dir: Path) -> Optional[str]:
    try:
        argv = json.loads((spec_dir / "kernel.json").read_text(encoding="utf-8")).get("argv") or []
    except (OSError, ValueError, AttributeError):
        return None
    return argv[0] if argv and isinstance(argv[0], str) else None


def runs_in(spec_dir: Path, prefix: Path) -> bool:
    """Whether the kernelspec at ``spec_dir`` runs a Python inside ``prefix`` (so it belongs to that environment)."""
    python = kernel_python(spec_dir)
    return python is not None and Path(python).is_relative_to(prefix)


def remove_kernel(name: str, prefix: Path, environ: Mapping[str, str]) -> bool:
    """Delete the kernelspec ``name`` if it runs this environment's Python (never another environment's); True
    once Jupyter no longer lists it. A kernelspec that is a symbolic link (to a directory kept elsewhere) loses the
    link only; EnvkitError naming the path when it cannot be deleted."""
    from envkit.state.files import plain_name_problem

    if plain_name_problem(name) is not None:  # (from a record: "../x" would be a directory outside the kernels')
        return False
    spec_dir = kernels_dir(environ) / name
    if not runs_in(spec_dir, prefix):
        return False
    try:
        if spec_dir.is_symlink():
            spec_dir.unlink()
        else:
            shutil.rmtree(spec_dir)
    except FileNotFoundError:
        pass
    except OSError as error:
        from envkit.errors import EnvkitError

        raise EnvkitError(f"cannot delete the Jupyter kernel {spec_dir}: {error.strerror or error}",
                          hint="Fix the permissions there (or delete it yourself), then run this again.") from None
    return True
