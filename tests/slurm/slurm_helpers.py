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
    if "ENVKIT_TEST_SYSFS" in site.env:  # the AMD node's sysfs (kept: the other ENVKIT_ settings are the user's)
        env["ENVKIT_TEST_SYSFS"] = site.env["ENVKIT_TEST_SYSFS"]
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


FAKES = Path(__file__).resolve().parent.parent / "probe" / "fakes"
A100 = {"name": "NVIDIA A100-SXM4-40GB", "capability": [8, 0], "memory": 42949672960}


def make_torch_env(root: Path, env: Mapping[str, str], name: str = "torch-test",
                   build: str = "torch-2.14-cu126", python: str = sys.executable) -> Path:
    """A real venv (of ``python``) holding the probe tests' stand-in PyTorch (two A100s, CUDA 12.6), recorded under
    ``name`` in the user data dir of ``env`` as if `envkit create` had made it from ``build``."""
    import json
    import shutil
    from datetime import datetime, timezone

    from envkit.state import records
    from envkit.state.userdirs import user_dirs

    subprocess.run([python, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True, timeout=60)
    [site] = root.glob("lib/python*/site-packages")
    shutil.copy(FAKES / "fakearray.py", site)
    shutil.copytree(FAKES / "torch", site / "torch", ignore=shutil.ignore_patterns("__pycache__"))
    config = {"torch": {"version": "2.14.0+cu126", "cuda": "12.6", "gpus": [A100, A100]}}
    (site / "fake_config.json").write_text(json.dumps(config), encoding="utf-8")
    record = records.Record(
        name=name, prefix=str(root), kind="venv", backend="venv", manifest="torch", build=build,
        python=f"{sys.version_info[0]}.{sys.version_info[1]}",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine={}, on_target=False)
    records.save(record, user_dirs(env).records)
    return root


def wait_done(slurm_site, job: str, timeout: float = 60) -> None:
    """Until ``job`` has left the queue; AssertionError past ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job not in slurm_site.cluster.query(["squeue", "-h", "-o", "%i"]).stdout.split():
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job} did not finish")
