"""Running envkit as a user on the test cluster's login node (imported by name by the Slurm tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

from support.next_steps import check_pasted


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
    done = subprocess.run([sys.executable, "-m", "envkit", *args], env=dict(env), capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
    check_pasted(args, done.stdout + done.stderr, env, cwd)
    return done


FAKES = Path(__file__).resolve().parent.parent / "probe" / "fakes"
A100 = {"name": "NVIDIA A100-SXM4-40GB", "capability": [8, 0], "memory": 42949672960}


def make_torch_env(root: Path, env: Mapping[str, str], name: str = "torch-test",
                   build: str = "torch-2.14-cu126", python: str = sys.executable) -> Path:
    """A real venv (of ``python``) holding the probe tests' stand-in PyTorch (two A100s, CUDA 12.6) and its
    companions (the build installs torchvision and torchaudio: the check runs them), recorded under ``name`` in the
    user data dir of ``env`` as if `envkit create` had made it from ``build``."""
    config = {"torch": {"version": "2.14.0+cu126", "cuda": "12.6", "gpus": [A100, A100]}}
    return make_fake_env(root, env, name, "torch", build, config, {"torchvision": "0.29.1", "torchaudio": "2.11.0"},
                         python=python, companions=("torchvision", "torchaudio"))


def make_fake_env(root: Path, env: Mapping[str, str], name: str, framework: str, build: str,
                  config: Mapping[str, object], distributions: Mapping[str, str] = (), *,
                  python: str = sys.executable, companions: tuple[str, ...] = ()) -> Path:
    """A real venv (of ``python``) holding the probe tests' stand-in of ``framework`` (and of ``companions``) with
    their switches ``config`` (tests/probe/fakes) and dist-info for ``distributions`` ({name: version}), recorded
    under ``name`` as if `envkit create` had made it from ``build``."""
    import json
    import shutil

    subprocess.run([python, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True, timeout=60)
    [site] = root.glob("lib/python*/site-packages")
    shutil.copy(FAKES / "fakearray.py", site)
    add_stand_ins(root, (framework, *companions), distributions)
    (site / "fake_config.json").write_text(json.dumps(config), encoding="utf-8")
    record_env(root, env, name, framework, build)
    return root


def add_stand_ins(root: Path, packages: Sequence[str], distributions: Mapping[str, str] = ()) -> None:
    """Into the venv at ``root``: the stand-ins of ``packages`` (tests/probe/fakes; the companions' run on the real
    torch as well) and dist-info for ``distributions`` ({name: version})."""
    import shutil

    [site] = root.glob("lib/python*/site-packages")
    for package in packages:
        shutil.copytree(FAKES / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    for distribution, version in dict(distributions).items():
        info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n",
                                       encoding="utf-8")


def record_env(root: Path, env: Mapping[str, str], name: str, manifest: str, build: str) -> None:
    """Record the environment in ``root`` under ``name`` in the user data dir of ``env``, as if `envkit create` had
    made it from ``build`` of ``manifest``."""
    from datetime import datetime, timezone

    from envkit.state import records
    from envkit.state.userdirs import user_dirs

    record = records.Record(
        name=name, prefix=str(root), kind="venv", backend="venv", manifest=manifest, build=build,
        python=f"{sys.version_info[0]}.{sys.version_info[1]}",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine={}, on_target=False)
    records.save(record, user_dirs(env).records)


def make_jax_env(root: Path, env: Mapping[str, str], name: str = "jax-cpu") -> str:
    """A venv whose Python imports the real JAX CPU wheels the test extra installed (one .pth line naming the
    site-packages that holds them: nothing is downloaded), recorded as the jax manifest's CPU build of that JAX's
    release line; the JAX version."""
    from importlib import metadata
    from importlib.util import find_spec

    from envkit.catalog import default_manifests_dir, load_catalog

    spec = find_spec("jax")  # found, not imported: importing JAX here would cost the suite a second
    assert spec is not None and spec.origin, "jax is not installed: it is in the test extra (pip install -e '.[test]')"
    version = metadata.version("jax")
    build = f"jax-{'.'.join(version.split('.')[:2])}-cpu"
    builds = {b.id for b in load_catalog(default_manifests_dir()).manifests["jax"].builds}
    assert build in builds, f"jax {version} (the test extra's) has no CPU build in envs/jax.yaml: add its line"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True,
                   timeout=60)
    [site] = root.glob("lib/python*/site-packages")
    (site / "envkit-tests-jax.pth").write_text(f"{Path(spec.origin).parent.parent}\n", encoding="utf-8")
    record_env(root, env, name, "jax", build)
    return version


def wait_done(slurm_site, job: str, timeout: float = 60) -> None:
    """Until ``job`` has left the queue; AssertionError past ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job not in slurm_site.cluster.query(["squeue", "-h", "-o", "%i"]).stdout.split():
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job} did not finish")
