"""Running envkit as a user on the test cluster's login node (imported by name by the Slurm tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Mapping, Optional


def user_env(site, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The cluster's client environment with private user dirs and site file under ``tmp_path``."""
    env = {k: v for k, v in site.env.items() if not k.startswith(("ENVKIT_", "SLURM_JOB")) and k not in (
        "VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_VISIBLE_DEVICES")}
    env.update({
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "ENVKIT_SITE": str(tmp_path / "site.yaml"),
    })
    env.update(extra)
    return env


def envkit(*args: str, env: Mapping[str, str], timeout: float = 180,
           cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envkit", *args], env=dict(env), capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
