"""`envkit create` for an AMD machine, end to end: the real envs/torch.yaml picks its ROCm build, uv installs it from
the ROCm index (a real index on 127.0.0.1 through the mirror setting) with stand-in ROCm wheels (the probe tests'
stand-in PyTorch configured as a ROCm build: torch.version.hip, each device's gcnArchName), and the real post-install
check knows HIP. Then `envkit doctor` on "this machine" as an MI300X node: a fake sysfs of real KFD files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import PROFILES, PYTHON, Home
from support.amd_sysfs import MI300X, make_sysfs
from support.pypi_index import IndexServer
from support.stand_ins import stand_in_files
from support.wheels import build_wheel

MI300X_PROFILE = str(PROFILES / "mi300x-x8-amdgpu6.12.yaml")  # amdgpu 6.12.12: the pick is torch-2.9-rocm6.4
VERSION = "import importlib.metadata as m; print(m.version('torch'), m.version('torchvision'), m.version('torchaudio'))"
# What torch.cuda.get_arch_list() of 2.9.1+rocm6.4 prints (a public report; torch.yaml's rocm6.3-wheels)
ARCH = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1200",
        "gfx1201"]


def rocm_torch_files(version: str, hip: str, gpus: list[dict]) -> dict[str, str]:
    return stand_in_files("torch", {"torch": {"version": version, "hip": hip, "gpus": gpus, "arch_list": ARCH}})


@pytest.fixture(scope="session")
def rocm_wheels(tmp_path_factory) -> dict[str, list[Path]]:
    """torch-2.9-rocm6.4's three wheels (+rocm6.4, the torch one the stand-in ROCm PyTorch of eight MI300X), and
    what a careless mirror serves under /whl/rocm6.4: PyPI's plain 2.9.1 (a CUDA build)."""
    out = tmp_path_factory.mktemp("rocm-wheels")
    mi300x = [{"name": "AMD Instinct MI300X", "gfx": "gfx942:sramecc+:xnack-", "memory": 206141652992}] * 8
    rocm = [
        build_wheel(out / "rocm6.4", "torch", "2.9.1+rocm6.4", requires=["filelock"],
                    files=rocm_torch_files("2.9.1+rocm6.4", "6.4.43484-123eb5128", mi300x)),
        build_wheel(out / "rocm6.4", "torchvision", "0.24.1+rocm6.4", requires=["torch==2.9.1"],
                    files=stand_in_files("torchvision")),
        build_wheel(out / "rocm6.4", "torchaudio", "2.9.1+rocm6.4", requires=["torch==2.9.1"],
                    files=stand_in_files("torchaudio")),
        build_wheel(out / "rocm6.4", "filelock", "3.20.0"),
    ]
    plain = [build_wheel(out / "plain", "torch", "2.9.1", requires=["filelock"]),
             build_wheel(out / "plain", "torchvision", "0.24.1", requires=["torch==2.9.1"]),
             build_wheel(out / "plain", "torchaudio", "2.9.1", requires=["torch==2.9.1"]),
             build_wheel(out / "plain", "filelock", "3.20.0")]
    return {"rocm6.4": rocm, "plain": plain}


def test_create_installs_the_rocm_build_from_the_rocm_index_and_checks_it(home: Home, pypi_server: IndexServer,
                                                                         rocm_wheels, tmp_path: Path):
    pypi_server.add_index("/whl/rocm6.4", rocm_wheels["rocm6.4"])
    home.mirror_to(pypi_server)
    plan = home.envkit("create", "torch", "--machine", MI300X_PROFILE, "--python", PYTHON, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert "torch-2.9-rocm6.4" in plan.stdout and "/whl/rocm6.4" in plan.stdout
    done = home.envkit("create", "torch", "--machine", MI300X_PROFILE, "--python", PYTHON, "--yes")
    assert done.returncode == 0, done.stderr
    assert home.in_env("torch-rocm6.4", VERSION) == "2.9.1+rocm6.4 0.24.1+rocm6.4 2.9.1+rocm6.4"
    fetched = pypi_server.fetched_files()
    assert fetched and all(path.startswith("/whl/rocm6.4/") for path in fetched), fetched
    record = home.record("torch-rocm6.4")
    assert record["build"] == "torch-2.9-rocm6.4" and record["verify"]["ok"] is True, done.stdout
    assert (record["rocm"], record["cuda"]) == ("6.4", None)  # what its modulefile says (envkit module)
    module = home.envkit("module", "torch-rocm6.4", "--lmod")
    assert module.returncode == 0 and 'whatis("ROCm: 6.4 (AMD GPUs)")' in module.stdout, module.stderr
    assert [gpu["gfx"] for gpu in record["machine"]["gpus"]] == ["gfx942"] * 8

    # On the machine itself (a sysfs of real MI300X KFD files, the amdgpu driver of ROCm 6.4): the check sees the
    # eight GPUs through HIP and runs on each.
    sysfs = make_sysfs(tmp_path / "sys", [MI300X] * 8)
    python = str(home.prefix("torch-rocm6.4") / "bin" / "python")
    doctor = home.envkit("doctor", "--python", python, "--json", env={"ENVKIT_TEST_SYSFS": str(sysfs)})
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0 and report["ok"] is True, doctor.stdout + doctor.stderr
    assert report["installed_build"] == "torch-2.9-rocm6.4" and report["probe"]["hip"] == "6.4.43484-123eb5128"
    assert [(d["gfx"], d["ok"]) for d in report["devices"]] == [("gfx942", True)] * 8
    assert report["probed_on_machine"] is True and report["machine"]["amdgpu"] == "6.12.12"
    assert [gpu["gfx"] for gpu in report["machine"]["gpus"]] == ["gfx942"] * 8  # detected from the KFD's files
    text = home.envkit("doctor", "--python", python, env={"ENVKIT_TEST_SYSFS": str(sysfs)}).stdout
    assert "AMD GPU 7: AMD Instinct MI300X, gfx942: ok" in text


def test_a_plain_torch_served_under_the_rocm_index_is_not_taken_for_the_rocm_build(home: Home,
                                                                                   pypi_server: IndexServer,
                                                                                   rocm_wheels):
    """A mirror that serves PyPI's torch 2.9.1 (its CUDA build) at /whl/rocm6.4: refused from the index's own page
    before anything is downloaded (the variant pins), and undone."""
    pypi_server.add_index("/whl/rocm6.4", rocm_wheels["plain"])
    home.mirror_to(pypi_server)
    done = home.envkit("create", "torch", "--machine", MI300X_PROFILE, "--python", PYTHON, "--yes")
    assert done.returncode == 1
    assert "serves torch 2.9.1 for torch==2.9.*, and no +rocm6.4 build" in done.stderr, done.stderr
    assert "nothing was downloaded" in done.stderr and not pypi_server.fetched_files()
    assert not home.prefix("torch-rocm6.4").exists() and home.record("torch-rocm6.4") is None
