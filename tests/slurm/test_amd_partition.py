"""An AMD partition of the real test cluster: a node with GRES gpu:mi300x:2 whose KFD topology is a fake sysfs of real
MI300X properties files (tests/slurm/conftest.py). survey detects its GPUs on the node, the site file keeps them,
list picks a ROCm build for the partition, and a job and the check run there with a stand-in ROCm environment."""

from __future__ import annotations

import json

import pytest
from slurm_helpers import envkit, make_fake_env, user_env, wait_done

from envkit.site import load_site

MI300X = {"name": "AMD Instinct MI300X", "gfx": "gfx942:sramecc+:xnack-", "memory": 206141652992}
ARCH = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1200",
        "gfx1201"]


@pytest.fixture(scope="module")
def amd_user(slurm, tmp_path_factory):
    """A user with the AMD partition surveyed and a stand-in ROCm environment (torch 2.9.1+rocm6.4 that sees two
    MI300X through HIP), recorded as torch-2.9-rocm6.4: (env, home, what survey printed)."""
    home = tmp_path_factory.mktemp("amd-user")
    env = user_env(slurm, home)
    surveyed = envkit("survey", "--partition", "part-amd", "--partition", "part-v", env=env, cwd=home)
    assert surveyed.returncode == 0, surveyed.stderr
    config = {"torch": {"version": "2.9.1+rocm6.4", "hip": "6.4.43484-123eb5128", "gpus": [MI300X, MI300X],
                        "arch_list": ARCH}}
    make_fake_env(home / "envs" / "torch-rocm", env, "torch-rocm", "torch", "torch-2.9-rocm6.4", config,
                  {"torchvision": "0.24.1+rocm6.4", "torchaudio": "2.9.1+rocm6.4"},
                  companions=("torchvision", "torchaudio"))
    return env, home, surveyed


def test_survey_detects_the_amd_gpus_on_the_node_and_the_site_file_keeps_them(slurm_site, amd_user):
    env, home, surveyed = amd_user
    rows = slurm_site.cluster.query(["sinfo", "-h", "-p", "part-amd", "-o", "%G"]).stdout.split()
    assert rows == ["gpu:mi300x:2"]  # Slurm's name for them; envkit asks the node what they are
    assert "gpu-m1: 2 GPU(s), CUDA none, amdgpu 6.12.12" in surveyed.stderr
    [node] = load_site(home / "site.yaml").partitions["part-amd"].nodes
    assert node.node == "gpu-m1" and str(node.profile.amdgpu) == "6.12.12"
    assert [(g.vendor, g.name, g.gfx) for g in node.profile.gpus] == [("amd", "AMD Instinct MI300X", "gfx942")] * 2
    listed = envkit("list", "torch", "--partition", "part-amd", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "* torch-2.9-rocm6.4" in listed.stdout and "amdgpu 6.12.12; 2x AMD Instinct MI300X (gfx942)" in listed.stdout


def test_the_check_runs_on_the_amd_node_and_sees_its_gpus_through_hip(slurm_site, amd_user):
    env, home, _ = amd_user
    done = envkit("verify", "torch-rocm", "--partition", "part-amd", "--json", env=env, cwd=home)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["ok"] is True, done.stdout + done.stderr
    assert [(d["gfx"], d["ok"]) for d in report["devices"]] == [("gfx942", True)] * 2
    assert report["installed_build"] == "torch-2.9-rocm6.4" and report["probe"]["hip"].startswith("6.4.")


def test_a_job_on_the_amd_partition_runs_in_the_environment(slurm_site, amd_user, tmp_path):
    env, home, _ = amd_user
    show = "import torch; print(torch.version.hip, torch.cuda.device_count())"
    done = envkit("job", "torch-rocm", "--partition", "part-amd", "--gpus", "2", "--submit", "--", "python", "-c",
                  show, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    wait_done(slurm_site, job)
    assert (tmp_path / f"slurm-{job}.out").read_text().strip().splitlines()[-1] == "6.4.43484-123eb5128 2"
    # the ROCm build is refused for a partition of NVIDIA GPUs, with the reason
    refused = envkit("job", "torch-rocm", "--partition", "part-v", "--submit", "--", "true", env=env, cwd=tmp_path)
    assert refused.returncode != 0 and "needs an AMD GPU (ROCm); the machine's GPUs are NVIDIA" in refused.stderr
