"""The real module systems for modulefile tests: Lmod (Debian's `lmod`) and Environment Modules (Debian's
`environment-modules`).

The two Debian packages conflict (each ships a `module`), so Lmod is installed with apt-get (as root, like Slurm's
packages: tests/support/slurm_cluster.py) and Environment Modules' .deb is downloaded with `apt-get download` and
unpacked into a directory of the test session: its `modulecmd.tcl` is a Tcl program that runs from anywhere with
the tclsh Lmod brings. Where `environment-modules` is installed instead, its own modulecmd.tcl is used.

A shell runs `module` as each system's init script defines it: ``eval "$(CMD bash "$@")"``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

LMOD = Path("/usr/share/lmod/lmod/libexec/lmod")
LMOD_PROFILE = Path("/etc/profile.d/lmod.sh")
MODULECMD_INSTALLED = (Path("/usr/lib/x86_64-linux-gnu/modulecmd.tcl"), Path("/usr/lib/modulecmd.tcl"))
# What the module systems keep for themselves in the environment: not the environment's activation.
BOOKKEEPING = ("_ModuleTable", "__LMOD_", "LOADEDMODULES", "_LMFILES_", "__MODULES_", "MODULES_", "LMOD_", "_LMOD",
               "MODULEPATH", "MODULESHOME", "BASH_FUNC_module", "BASH_FUNC_ml", "BASH_FUNC__module",
               "BASH_FUNC_clearMT", "BASH_FUNC_clearLmod", "BASH_FUNC_ml", "SHLVL", "_", "OLDPWD", "PWD")


def required(environ) -> bool:
    """Whether a missing module system fails the tests instead of skipping them (CI, as for Slurm)."""
    return environ.get("CI", "").lower() == "true" or environ.get("ENVKIT_TEST_REQUIRE_SLURM") == "1"


def _apt(*args: str, cwd: Optional[Path] = None) -> Optional[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(["apt-get", *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=900, cwd=cwd)
    return None if done.returncode == 0 else f"apt-get {' '.join(args)} failed: {done.stderr.strip()[-400:]}"


def install_lmod() -> Optional[str]:
    """apt-get install lmod (root only) when it is missing; None when it is there, else why it is not."""
    if LMOD.exists():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "Lmod is not installed, and installing it needs root and apt-get (apt-get install -y lmod)"
    if any(path.exists() for path in MODULECMD_INSTALLED):
        return "environment-modules is installed, and Debian's lmod conflicts with it"
    problem = _apt("install", "-y", "--no-install-recommends", "lmod")
    if problem is not None:  # the package lists may be stale or missing: once more after an update
        problem = _apt("update") or _apt("install", "-y", "--no-install-recommends", "lmod")
    return problem if problem is not None else (None if LMOD.exists() else "lmod installed no " + str(LMOD))


def modulecmd_tcl(workdir: Path) -> tuple[Optional[Path], Optional[str]]:
    """(Environment Modules' modulecmd.tcl, None), installed or unpacked into ``workdir``; (None, why) otherwise."""
    for path in MODULECMD_INSTALLED:
        if path.exists():
            return path, None
    if shutil.which("tclsh") is None:
        return None, "Environment Modules needs tclsh (Debian's tcl, which lmod brings)"
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        return None, "Environment Modules is not installed and there is no apt-get to fetch it with"
    problem = _apt("download", "environment-modules", cwd=workdir)
    if problem is not None:
        problem = _apt("update") or _apt("download", "environment-modules", cwd=workdir)
        if problem is not None:
            return None, problem
    [deb] = sorted(workdir.glob("environment-modules_*.deb"))
    unpacked = workdir / "environment-modules"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True, timeout=120)
    found = next((unpacked / str(path).lstrip("/") for path in MODULECMD_INSTALLED
                  if (unpacked / str(path).lstrip("/")).exists()), None)
    return (found, None) if found is not None else (None, "the environment-modules package has no modulecmd.tcl")


def module_function(system: str, modulecmd: Optional[Path] = None) -> str:
    """The shell function `module` of a system ("lmod" or "tcl"), as its bash init script defines it."""
    if system == "lmod":
        return f'module() {{ eval "$({LMOD} bash "$@")"; }}'
    return f'module() {{ eval "$(tclsh {modulecmd} bash "$@")"; }}'


def activation(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` less what the module systems keep for themselves."""
    return {k: v for k, v in environ.items() if not k.startswith(BOOKKEEPING)}


def parse_env0(data: str) -> dict[str, str]:
    """What `env -0` printed, as a mapping (a value may hold newlines)."""
    out = {}
    for entry in data.split("\0"):
        if "=" in entry:
            key, value = entry.split("=", 1)
            out[key] = value
    return out
