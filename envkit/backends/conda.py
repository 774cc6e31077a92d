"""The user's own conda, mamba or micromamba, creating into its envs directory so `conda activate NAME` works."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

from envkit.backends.base import Context, OnLine, command_text, run_step
from envkit.backends.plan import CUDA_OVERRIDE, Plan
from envkit.backends.tools import CondaTool
from envkit.system.process import query

_INFO_TIMEOUT = 60.0
# conda and micromamba read any setting from a CONDA_<KEY> (micromamba: MAMBA_<KEY>) variable. These choose what is
# installed, for which platform or from where, past --override-channels: a user's CONDA_SUBDIR=osx-64 or
# CONDA_PINNED_PACKAGES would silently change the build. Network settings (proxies, SSL, timeouts), the package
# cache and the virtual-package overrides other than __cuda (set from the plan) stay.
_CHOOSERS = ("SUBDIR", "PLATFORM", "CHANNELS", "DEFAULT_CHANNELS", "CHANNEL_ALIAS", "CUSTOM_CHANNELS",
             "CUSTOM_MULTICHANNELS", "MIRRORED_CHANNELS", "PINNED_PACKAGES", "CREATE_DEFAULT_PACKAGES",
             "ADD_PIP_AS_PYTHON_DEPENDENCY", "CHANNEL_PRIORITY", "REPODATA_FNS", "USE_LOCAL", "USE_ONLY_TAR_BZ2")
_DROPPED = frozenset(f"{tool}_{key}" for tool in ("CONDA", "MAMBA") for key in _CHOOSERS)


def _subdir(plan: Plan) -> dict[str, str]:
    """CONDA_SUBDIR for an environment of another platform than this machine's (conda, mamba and micromamba read
    it): linux-aarch64 packages for an aarch64 partition, made from an x86_64 login node. Nothing otherwise."""
    from envkit.machines.platforms import native_platform

    platform = plan.profile.platform
    return {} if platform == native_platform() else {"CONDA_SUBDIR": platform}


def envs_dir(tool: CondaTool, environ: Mapping[str, str]) -> Path:
    """The first envs directory the conda tool would create a named environment in that the user can write to."""
    for candidate in _envs_dirs(tool, environ):
        if _writable(candidate):
            return candidate
    return Path(environ.get("HOME", "~")).expanduser() / ".conda" / "envs"


def _envs_dirs(tool: CondaTool, environ: Mapping[str, str]) -> list[Path]:
    out = query([str(tool.path), "info", "--json"], environ, _INFO_TIMEOUT)
    if out is None:
        return []
    try:
        info = json.loads(out)
    except ValueError:
        return []
    dirs = info.get("envs_dirs") or info.get("envs directories") or []
    return [Path(d) for d in dirs if isinstance(d, str)]


def _writable(path: Path) -> bool:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return os.access(candidate, os.W_OK | os.X_OK)
    return False


class CondaBackend:
    name = "conda"

    def __init__(self, tool: CondaTool) -> None:
        self.tool = tool

    def _argv(self, plan: Plan) -> list[str]:
        assert plan.conda is not None
        channels = [arg for channel in plan.conda.channels for arg in ("-c", channel)]
        # --no-default-packages: .condarc's create_default_packages would add packages to the solve (conda, mamba).
        defaults = ["--no-default-packages"] if self.tool.kind != "micromamba" else []
        return [str(self.tool.path), "create", "--yes", "--quiet", "--prefix", str(plan.prefix), "--override-channels",
                *defaults, *channels, *plan.conda.specs]

    def _environ(self, plan: Plan, context: Context) -> dict[str, str]:
        """The machine's __cuda for the solve, from the plan (a Slurm partition's, when building for one); none of
        the user's variables that choose packages, platform or channels."""
        assert plan.conda is not None
        kept = {k: v for k, v in context.environ.items() if k.upper() not in _DROPPED}
        return {**kept, CUDA_OVERRIDE: plan.conda.cuda or "", **_subdir(plan)}

    def describe(self, plan: Plan, context: Context) -> list[str]:
        cuda = plan.conda.cuda if plan.conda else None
        subdir = "".join(f"{key}={value} " for key, value in _subdir(plan).items())
        return [f"{subdir}{CUDA_OVERRIDE}={cuda or ''} {command_text(self._argv(plan))}"]

    def make_prefix(self, plan: Plan, context: Context, on_line: OnLine) -> None:
        from envkit.system.egress import guarded

        assert plan.conda is not None
        with guarded(self.tool.kind, (*plan.conda.channels, *context.mirrors), context.environ) as proxy:
            run_step(self._argv(plan), {**self._environ(plan, context), **proxy}, on_line,
                     f"{self.tool.kind} could not create the environment",
                     hint=f"The lines above are {self.tool.kind}'s. `envkit list --all` shows which builds fit.")

