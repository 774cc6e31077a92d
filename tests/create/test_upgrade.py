"""`envkit upgrade`: the newest build that fits the machines an environment was made for, made where it is with its
additions, after the machine's profile changed (a new driver: CUDA 12.6 -> 13.0); the old environment set aside
until the new one passes, and kept when an addition cannot live with the new build."""

from __future__ import annotations

import json
import shutil

import pytest

from add_helpers import add_wheels, installed_versions, serve
from conftest import PROFILES, PYTHON, Home, fake_torch_files
from support.pypi_index import IndexServer
from support.stand_ins import stand_in_files
from support.wheels import build_wheel


@pytest.fixture
def upgradable(home: Home, pypi_server: IndexServer, torch_wheels, tmp_path):
    serve(pypi_server, torch_wheels, add_wheels(tmp_path / "add-wheels"), home)
    cu130 = tmp_path / "cu130"
    pypi_server.add_index("/whl/cu130", [
        build_wheel(cu130, "torch", "2.15.0+cu130", requires=["filelock"], files=fake_torch_files("2.15.0+cu130", "13.0")),
        build_wheel(cu130, "torchaudio", "2.11.0+cu130", requires=["torch"],
                    files=stand_in_files("torchaudio")),
        build_wheel(cu130, "filelock", "3.20.0"),
    ])
    profile = tmp_path / "machine.yaml"
    shutil.copy(PROFILES / "rtx4090-cuda126.yaml", profile)
    made = home.envkit("create", "torch", "--build", "torch-2.13-cu126", "--python", PYTHON, "--machine", str(profile),
                       "--name", "work", "--with", "anytorch", "--yes")
    assert made.returncode == 0, made.stderr
    return home, profile


def test_upgrade_after_the_driver_changes_keeps_the_additions(upgradable):
    home, profile = upgradable
    prefix = home.prefix("work")
    same = home.envkit("upgrade", "work", "--dry-run")  # 12.6 still: the newest for it is 2.14 cu126, not served
    assert same.returncode == 0 and "work: torch 2.13.0+cu126 -> torch-2.14-cu126, 1 addition kept" in same.stdout
    profile.write_text(profile.read_text().replace('driver_version: "560.35.03"', 'driver_version: "580.65.06"')
                       .replace('cuda_driver: "12.6"', 'cuda_driver: "13.0"'))
    asked = home.envkit("upgrade", "work", "--dry-run", "--json")
    assert asked.returncode == 0, asked.stderr
    change = json.loads(asked.stdout)
    assert change["from"] == "torch-2.13-cu126" and change["to"] == "torch-2.15-cu130"
    assert change["additions"] == ["anytorch"] and installed_versions(prefix)["torch"] == "2.13.0+cu126"
    done = home.envkit("upgrade", "work", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    versions = installed_versions(prefix)
    assert versions["torch"] == "2.15.0+cu130" and versions["anytorch"] == "1.0" and "torchvision" not in versions
    record = home.record("work")
    assert record["build"] == "torch-2.15-cu130" and record["additions"] == ["anytorch"]
    assert record["verify"]["ok"] is True and record["held"][0] == "torch==2.15.0+cu130"
    again = home.envkit("upgrade", "work")
    assert again.returncode == 0 and "newest that fits already" in again.stdout


def test_an_addition_that_cannot_live_with_the_new_build_keeps_the_old_environment(upgradable):
    home, profile = upgradable
    prefix = home.prefix("work")
    added = home.envkit("add", "work", "timm")  # needs torchvision, which 2.15 cu130 has not
    assert added.returncode == 0, added.stderr
    before = installed_versions(prefix)
    profile.write_text(profile.read_text().replace('driver_version: "560.35.03"', 'driver_version: "580.65.06"')
                       .replace('cuda_driver: "12.6"', 'cuda_driver: "13.0"'))
    done = home.envkit("upgrade", "work", "--yes")
    assert done.returncode == 1, done.stderr
    assert "timm" in done.stderr and "needs torchvision" in done.stderr and "nothing was made" in done.stderr
    assert installed_versions(prefix) == before and home.record("work")["build"] == "torch-2.13-cu126"
    assert not [p for p in prefix.parent.iterdir() if "envkit-replaced" in p.name]
