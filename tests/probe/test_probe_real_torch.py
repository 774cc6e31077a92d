"""The probe and `envkit doctor` against the REAL PyTorch CPU wheel, where pip's find-links on this machine has it.

Installed once per session into a venv under pytest's tmp dir (--no-index: never from the network); skipped with
the reason when the wheel is not at hand. Deselect with -m 'not real_torch'.
"""

from __future__ import annotations

import json

import pytest
from probe_helpers import PROFILES, envkit, probe, raw_probe

pytestmark = pytest.mark.real_torch


def test_real_torch_cpu_wheel_probe_output(real_torch_python):
    data = raw_probe(real_torch_python, "torch")
    assert data["framework"] == "torch" and data["imported"] is True
    assert data["version"].startswith("2.13.0") and data["version"].endswith("+cpu")
    assert data["cuda"] is None and data["gpu_build"] is False and data["cudnn"] is None
    assert data["gpu_available"] is False and data["device_count"] == 0 and data["devices"] == []
    assert data["arch_list"] == []
    checks = data["cpu"]["checks"]
    assert [(c["name"], c["ok"]) for c in checks] == [("matmul", True), ("conv2d", True)]
    for check in checks:  # torch's float32 against the probe's pure-Python float64 reference
        assert 0 <= check["max_error"] < 1e-4 < check["tolerance"]
    assert data["errors"] == [] and data["probe_error"] is None


def test_real_torch_multi_gpu_and_bench_without_gpu(real_torch_python):
    result = probe(real_torch_python, "auto", multi_gpu=True, bench=True)
    assert result.framework == "torch" and result.cpu_ok
    assert result.multi_gpu.ok is None
    assert result.multi_gpu.skipped == "needs at least 2 GPUs; this machine has 0 (visible to torch)"
    assert result.bench.ok is None and result.bench.skipped == "needs a GPU; torch sees none here"


def test_doctor_on_real_torch_here_and_for_a_gpu_machine(real_torch_python):
    here = envkit("doctor", "--json", "--python", str(real_torch_python))
    data = json.loads(here.stdout)
    assert (data["framework"], data["cuda"], data["installed_build"]) == ("torch", None, "torch-2.13-cpu")
    if data["machine"]["gpus"]:  # a CPU build where GPUs are does not fit
        assert here.returncode == 1 and data["diagnosis"][0]["rule"] == "cpu-build"
    else:  # no NVIDIA GPU here: a CPU build is the right one
        assert here.returncode == 0 and data["ok"] is True, data["diagnosis"]
    there = envkit("doctor", "--json", "--python", str(real_torch_python),
                   "--machine", str(PROFILES / "v100x8-cuda130.yaml"))
    data = json.loads(there.stdout)
    assert there.returncode == 1
    assert [f["rule"] for f in data["diagnosis"]] == ["cpu-build", "gpus-not-checked-here"]
    assert data["next"]["build"] == "torch-2.14-cu126"  # the newest build that still has V100 (sm_70) kernels


@pytest.fixture(scope="module")
def torch_with_pypis_torchvision(real_torch_python, tmp_path_factory):
    """The real torch 2.13.0+cpu (the session's venv, through a .pth line: not installed twice) beside a real
    torchvision from PyPI (the newest this machine keeps: 0.29.x, built for torch 2.14's CUDA build), installed from
    its wheel file with no index: the broken pair of issue 39. A skip that says why where there is no such wheel."""
    import subprocess
    import sys

    from support.local_wheels import MissingDistributionError, local_distribution_files

    try:
        wheel = [w for w in local_distribution_files(["torchvision"]) if w.name.startswith("torchvision-")][-1]
    except (MissingDistributionError, IndexError) as missing:
        pytest.skip(f"no torchvision wheel for this Python on this machine: {missing}")
    root = tmp_path_factory.mktemp("torch-pair") / "venv"
    # (system site-packages: torch's pure-Python dependencies, as for the session's venv)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True,
                   capture_output=True, timeout=60)
    [site] = root.glob("lib/python*/site-packages")
    [torch_site] = real_torch_python.parent.parent.glob("lib/python*/site-packages")
    (site / "envkit-tests-torch.pth").write_text(f"{torch_site}\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"), "install", "-q",
                           "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return root / "bin" / "python", wheel.name.split("-")[1]


def test_pypis_torchvision_beside_the_torch_cpu_wheel_fails_the_check_naming_the_pair(torch_with_pypis_torchvision):
    python, version = torch_with_pypis_torchvision
    done = envkit("doctor", "--json", "--python", str(python), "--machine", str(PROFILES / "no-gpu.yaml"))
    data = json.loads(done.stdout)
    assert done.returncode == 1, done.stdout + done.stderr
    [torchvision] = data["probe"]["companions"]
    assert (torchvision["name"], torchvision["version"], torchvision["imported"]) == ("torchvision", version, False)
    [finding] = [f for f in data["diagnosis"] if f["rule"] == "companion-broken"]
    assert finding["cause"] == (f"torchvision {version} does not work with torch 2.13.0+cpu: importing it fails: "
                                "RuntimeError: operator torchvision::nms does not exist")
    assert "the build installs torchvision==0.28.*" in finding["advice"]  # torch-2.13-cpu's own (envs/torch.yaml)
