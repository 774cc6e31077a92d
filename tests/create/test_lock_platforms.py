"""Locks per platform (issue 43): `envkit lock --partition` for a Grace partition, from this x86_64 machine, pins the
aarch64 wheels (real uv, resolving for aarch64-manylinux_2_28 against a real index on 127.0.0.1 that serves both
platforms' wheels) and conda-lock's platform linux-aarch64 (a real solve of a local channel's linux-aarch64 subdir);
`create --from-lock` refuses another platform's lock; a pylock.toml's wheels are chosen by the target's tags."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from conftest import PYTHON, REPO, Home, fake_torch_files
from envkit.lockfile import model
from envkit.lockfile.format import LockFileError, read_lock
from envkit.lockfile.model import LockedPackage, LockFile
from envkit.lockfile.pep751 import dump_pylock, parse_pylock, read_pylock
from support.pypi_index import IndexServer
from support.wheels import build_wheel

GRACE_SITE = """\
version: 1
partitions:
  grace:
    nodes:
      - node: gh-01
        count: 4
        profile: {platform: linux-aarch64, driver_version: "570.124.06", cuda_driver: "12.8",
                  gpus: [{name: NVIDIA GH200 480GB, compute_capability: "9.0"}]}
"""
CP = f"cp{sys.version_info[0]}{sys.version_info[1]}"


@pytest.fixture(scope="session")
def two_platform_wheels(tmp_path_factory) -> list[Path]:
    """torch 2.14 cu126's packages as PyTorch's cu126 index serves them for both CPUs: torch with +cu126 on both,
    torchvision and torchaudio +cu126 for x86_64 but plain for aarch64 (pytorch/vision#9330)."""
    out = tmp_path_factory.mktemp("two-platform-wheels")
    wheels = [build_wheel(out, "filelock", "3.20.0")]
    for machine, local in (("x86_64", "+cu126"), ("aarch64", "")):
        tag = f"{CP}-{CP}-manylinux_2_28_{machine}"
        wheels += [
            build_wheel(out, "torch", "2.14.0+cu126", requires=["filelock"], tag=tag,
                        files=fake_torch_files("2.14.0+cu126", "12.6")),
            build_wheel(out, "torchvision", f"0.29.0{local}", requires=["torch==2.14.0"], tag=tag),
            build_wheel(out, "torchaudio", f"2.11.0{local}", requires=["torch==2.14.0"], tag=tag),
        ]
    return wheels


@pytest.fixture
def grace_home(home: Home, pypi_server: IndexServer, two_platform_wheels: list[Path]) -> Home:
    pypi_server.add_index("/whl/cu126", two_platform_wheels)
    home.mirror_to(pypi_server)
    site = home.root / "site.yaml"
    site.write_text(GRACE_SITE)
    home.env["ENVKIT_SITE"] = str(site)
    return home


def test_a_lock_for_a_grace_partition_pins_aarch64_wheels_and_is_refused_here(grace_home: Home):
    home = grace_home
    lock_path = home.root / "grace.conda-lock.yml"
    done = home.envkit("lock", "torch", "--build", "torch-2.14-cu126", "--python", PYTHON, "--partition", "grace",
                       "-o", str(lock_path))
    assert done.returncode == 0, done.stderr
    lock = read_lock(lock_path)
    assert lock.platforms == ("linux-aarch64",) and set(lock.content_hash) == {"linux-aarch64"}
    pinned = {p.name: p.file_name for p in lock.pip("linux-aarch64")}
    assert pinned == {
        "torch": f"torch-2.14.0+cu126-{CP}-{CP}-manylinux_2_28_aarch64.whl",
        "torchvision": f"torchvision-0.29.0-{CP}-{CP}-manylinux_2_28_aarch64.whl",
        "torchaudio": f"torchaudio-2.11.0-{CP}-{CP}-manylinux_2_28_aarch64.whl",
        "filelock": "filelock-3.20.0-py3-none-any.whl",
    }
    assert all(p.url.startswith("https://download.pytorch.org/whl/cu126/") for p in lock.packages)  # upstream
    assert lock.pip("linux-64") == ()
    assert lock.custom[model.TARGET] == "partition grace"
    # This x86_64 machine is not what it was made for: refused before anything is fetched or made.
    here = home.envkit("create", "--from-lock", str(lock_path), "--name", "grace-torch", "--yes")
    assert here.returncode == 2, here.stderr
    assert (f"{lock_path} locks linux-aarch64, not linux-64: a lock installs on the platform it was made for, and "
            "the machines judged are linux-64") in here.stderr
    assert "Traceback" not in here.stderr and home.record("grace-torch") is None
    assert not home.prefix("grace-torch").exists()


def test_the_same_build_locked_for_x86_64_pins_the_x86_64_wheels(grace_home: Home):
    home = grace_home
    lock_path = home.root / "h100.conda-lock.yml"
    done = home.envkit("lock", "torch", "--build", "torch-2.14-cu126", "--python", PYTHON, "--machine",
                       str(REPO / "tests" / "profiles" / "h100-cuda128.yaml"), "-o", str(lock_path))
    assert done.returncode == 0, done.stderr
    lock = read_lock(lock_path)
    assert lock.platforms == ("linux-64",)
    assert sorted(p.file_name for p in lock.pip()) == sorted([
        f"torch-2.14.0+cu126-{CP}-{CP}-manylinux_2_28_x86_64.whl",
        f"torchvision-0.29.0+cu126-{CP}-{CP}-manylinux_2_28_x86_64.whl",
        f"torchaudio-2.11.0+cu126-{CP}-{CP}-manylinux_2_28_x86_64.whl", "filelock-3.20.0-py3-none-any.whl"])


def test_a_conda_build_is_solved_from_the_linux_aarch64_subdir(home: Home, tmp_path: Path):
    """A conda build with aarch64 packages: its lock solves the channel's linux-aarch64 (and noarch) subdirs and says
    conda-lock's platform linux-aarch64 (a real solve of a local channel by the embedded engine)."""
    from support.conda_channel import build_package, index_channel

    channel = tmp_path / "channel"
    for subdir in ("linux-64", "linux-aarch64"):
        build_package(channel, "python", f"{PYTHON}.0", subdir=subdir)
        build_package(channel, "demo-gpu", "1.0", depends=(f"python >={PYTHON},<{PYTHON}.99", "__cuda >=12"),
                      subdir=subdir)
    index_channel(channel)
    manifests = tmp_path / "envs"
    manifests.mkdir()
    for table in ("cuda.yaml", "python.yaml", "gpus.yaml"):
        shutil.copy(REPO / "envs" / table, manifests / table)
    (manifests / "demo.yaml").write_text(f"""\
name: demo
summary: a conda build on two platforms
framework: torch
releases:
  - version: "1.0"
    python: "=={PYTHON}.*"
    builds:
      - variant: cu126
        cuda: "12.6"
        arch: {{sass: ["9.0"]}}
        platforms: [linux-64, linux-aarch64]
        conda: {{channels: ["https://conda.example.org/demo"], packages: ["demo-gpu=1.0"]}}
""")
    home.write_config({"https://conda.example.org/demo": channel.as_uri()})
    lock_path = tmp_path / "demo.conda-lock.yml"
    done = home.envkit("lock", "demo", "--manifests", str(manifests), "--machine",
                       str(REPO / "tests" / "profiles" / "gh200-r570-cuda128.yaml"), "-o", str(lock_path))
    assert done.returncode == 0, done.stderr
    lock = read_lock(lock_path)
    assert lock.platforms == ("linux-aarch64",)
    urls = {p.name: p.url for p in lock.conda("linux-aarch64")}
    assert set(urls) == {"python", "demo-gpu"}
    assert all(url.startswith("https://conda.example.org/demo/linux-aarch64/") for url in urls.values())


def _lock(platform: str, wheels: dict[str, str]) -> LockFile:
    return LockFile(packages=tuple(
        LockedPackage(name, version, "pip", platform, f"https://example.org/{name}/{name}-{version}-{tag}.whl",
                      "a" * 64) for name, (version, tag) in wheels.items()),
        platforms=(platform,), custom={model.PYTHON: "3.12"})


def test_a_pylock_carries_its_wheels_tags_and_installs_only_where_they_do():
    """export --format pylock writes each package's wheel by its file name (tags and all): read for aarch64 it gives
    the aarch64 wheel; an x86_64-only one has nothing to install on aarch64 and is refused saying so."""
    arm = dump_pylock(_lock("linux-aarch64", {"numpy": ("2.3.0", "cp312-cp312-manylinux_2_28_aarch64"),
                                              "six": ("1.17.0", "py3-none-any")}), "pylock.toml")
    assert "numpy-2.3.0-cp312-cp312-manylinux_2_28_aarch64.whl" in arm
    read = read_pylock(parse_pylock(arm, "pylock.toml"), "pylock.toml", "3.12", "linux-aarch64")
    assert read.lock.platforms == ("linux-aarch64",)
    assert {p.name: p.platform for p in read.lock.packages} == {"numpy": "linux-aarch64", "six": "linux-aarch64"}
    x86 = dump_pylock(_lock("linux-64", {"numpy": ("2.3.0", "cp312-cp312-manylinux_2_28_x86_64")}), "pylock.toml")
    with pytest.raises(LockFileError) as caught:
        read_pylock(parse_pylock(x86, "pylock.toml"), "pylock.toml", "3.12", "linux-aarch64")
    assert "nothing installable for CPython 3.12 on linux aarch64" in caught.value.message


def test_real_pylocks_give_the_aarch64_wheels_for_an_aarch64_target():
    data = REPO / "tests" / "create" / "data" / "pylock"
    for name in ("uv-export-comfy-cli.pylock.toml", "uv-pip-compile-spectree.pylock.toml", "pdm-ldlite.pylock.toml"):
        pylock = parse_pylock((data / name).read_text(encoding="utf-8"), name)
        arm = read_pylock(pylock, name, "3.12", "linux-aarch64").lock.packages
        x86 = read_pylock(pylock, name, "3.12", "linux-64").lock.packages
        binary = [p.file_name for p in arm if not p.file_name.endswith("-any.whl")]
        assert binary and all("aarch64" in f and "x86_64" not in f for f in binary), name
        assert [p.name for p in arm] == [p.name for p in x86]  # the same packages, other files
        assert {p.file_name for p in arm} != {p.file_name for p in x86}


def test_a_pip_environment_for_aarch64_needs_an_aarch64_python_here(home: Home):
    """Without a Python of the target's CPU that runs here, no installer can put aarch64 wheels where they would run:
    refused before anything is made, with the two ways that work (this machine has no aarch64 Python)."""
    done = home.envkit("create", "torch", "--build", "torch-2.14-cu126", "--python", "3.12", "--machine",
                       str(REPO / "tests" / "profiles" / "gh200-r570-cuda128.yaml"), "--dry-run")
    assert done.returncode == 2, done.stderr
    assert ("torch-2.14-cu126 is for linux-aarch64 machines and this one is not: its pip packages install only into "
            "a Python of that CPU that runs here, and no python3.12 for aarch64 was found") in done.stderr
    assert "`envkit create --from-lock FILE` there" in done.stderr and "Traceback" not in done.stderr
