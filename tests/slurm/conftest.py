"""The real Slurm cluster on localhost (tests/support/slurm_cluster.py), started once for the session.

Where Slurm is not installed: installed with apt-get when running as root, else the tests are skipped with the
reason; under CI (CI=true or ENVKIT_TEST_REQUIRE_SLURM=1) a skip is a failure instead.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import fake_nvml
from support.amd_sysfs import MI300X, make_sysfs
from support.slurm_cluster import SlurmCluster, install_debian_packages, missing_programs, slurm_required

# What the stand-in NVML answers on each node (the login node, outside a job, has no driver).
A100 = ("NVIDIA A100-SXM4-40GB", (8, 0), 40960)
V100 = ("Tesla V100-SXM2-16GB", (7, 0), 16384)
NODE_GPUS = {
    "gpu-a1": ("535.129.03", 12020, (A100, A100)),
    "gpu-a2": ("535.129.03", 12020, (A100, A100)),
    "gpu-v1": ("470.82.01", 11040, (V100,)),
}


def _unavailable(reason: str):
    if slurm_required(os.environ):
        pytest.fail(f"a real Slurm is required here (CI): {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class Site:
    """The running cluster, and the environment a client (envkit on the login node) runs with."""

    cluster: SlurmCluster
    env: dict[str, str]
    root: Path

    def run_env(self, **extra: str) -> dict[str, str]:
        return {**self.env, **extra}


@pytest.fixture(scope="session")
def slurm(tmp_path_factory) -> Iterator[Site]:
    missing = missing_programs()
    if missing:
        why = install_debian_packages()
        if why is not None:
            _unavailable(f"Slurm is not available ({', '.join(missing)} missing): {why}")
    if fake_nvml.compiler() is None:
        _unavailable("no C compiler (cc) to build the stand-in libnvidia-ml.so.1")
    root = tmp_path_factory.mktemp("slurm")
    lib = fake_nvml.build_library(root / "nvml-lib")
    nodes_dir = root / "nvml-nodes"
    for node, (driver, cuda, gpus) in NODE_GPUS.items():
        fake_nvml.write_node(nodes_dir, node, driver, cuda, gpus)
    # The AMD node's sysfs (envkit reads $ENVKIT_TEST_SYSFS/$SLURMD_NODENAME there; the other nodes, and the login
    # node, find no KFD in $ENVKIT_TEST_SYSFS itself): two MI300X and the amdgpu driver of ROCm 6.4.
    sysfs = root / "sysfs"
    make_sysfs(sysfs / "gpu-m1", [MI300X, MI300X])
    cluster = SlurmCluster(root / "cluster")
    atexit.register(cluster.stop)  # a safety net: the finalizer below stops it in every ordinary case
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(root)  # the daemons' working directory: not the one pytest was started in
            cluster.start()
    except (RuntimeError, OSError) as exc:
        cluster.stop()
        _unavailable(f"the test Slurm cluster did not start: {exc}")
    env = cluster.env()
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(lib.parent), env.get("LD_LIBRARY_PATH")]))
    env["FAKE_NVML_DIR"] = str(nodes_dir)
    env["ENVKIT_TEST_SYSFS"] = str(sysfs)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("SLURMD_NODENAME", None)
    try:
        yield Site(cluster, env, root)
    finally:
        cluster.cancel_all()
        cluster.stop()


@pytest.fixture(autouse=True)
def _in_tmp_path(request, tmp_path: Path, monkeypatch) -> Iterator[None]:
    """Each test runs in its own tmp_path, so what it starts without a cwd (sbatch, whose output goes to
    slurm-<id>.out in the working directory by default; srun; envkit) writes there, never into the directory pytest
    was started in (slurm-7.out and friends were once committed from the repository's root). And a test that got
    a job to run anywhere else fails."""
    monkeypatch.chdir(tmp_path)
    yield
    if "slurm" in request.fixturenames:
        base = request.getfixturevalue("tmp_path_factory").getbasetemp().resolve()
        outside = jobs_outside(request.getfixturevalue("slurm"), base)
        assert not outside, f"Slurm jobs ran outside the tests' temporary directories ({base}): {outside}"


def jobs_outside(site: Site, base: Path) -> list[str]:
    """The jobs Slurm still knows of (it keeps ended ones for MinJobAge, 300 s) whose working directory, where
    sbatch writes slurm-<id>.out, is not under ``base``: 'ID DIRECTORY' each."""
    done = site.cluster.query(["squeue", "-h", "-t", "all", "-o", "%i|%Z"])
    assert done.returncode == 0, done.stderr
    rows = [line.split("|", 1) for line in done.stdout.splitlines() if "|" in line]
    return [f"{job} {directory}" for job, directory in rows
            if not Path(directory).resolve().is_relative_to(base)]


@pytest.fixture
def slurm_site(slurm: Site) -> Iterator[Site]:
    """The cluster for one test; any job the test left in the queue fails the test (and is cancelled)."""
    yield slurm
    left = slurm.cluster.jobs()
    slurm.cluster.cancel_all()
    assert not left, f"the test left Slurm jobs in the queue: {left}"


@pytest.fixture(scope="module")
def cluster_user(slurm: Site, tmp_path_factory) -> tuple[dict[str, str], Path]:
    """A user of the test cluster with a surveyed site file and one environment (torch-2.14-cu126: fits the A100
    partition, not the V100 one whose driver is CUDA 11.4): (its environment variables, its home)."""
    from slurm_helpers import envkit, make_torch_env, user_env

    home = tmp_path_factory.mktemp("cluster-user")
    env = user_env(slurm, home)
    done = envkit("survey", "--partition", "part-a", "--partition", "part-v", "--partition", "mixed", env=env,
                  cwd=home)
    assert done.returncode == 0, done.stderr
    make_torch_env(home / "envs" / "torch-test", env)
    return env, home
