"""An environment for an aarch64 machine, made on this x86_64 one, end to end (issue 43): `envkit create` of a
pure-pip build of envs/torch.yaml for a GH200 profile finds Debian's arm64 Python (run by qemu-user-static through
binfmt_misc: tests/support/aarch64.py), makes the venv with it, installs the aarch64 wheels of a real index on
127.0.0.1 that serves both platforms' (stand-ins, the torch one the probe tests' stand-in torch), and the check runs
in that aarch64 Python.

Needs root (binfmt_misc) and apt (qemu-user-static, the arm64 .debs): skipped with the reason otherwise, and under
CI a failure. Run it under the machine-wide lock. About 60 s here, most of it emulation."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import pytest

from conftest import REPO, Home, fake_torch_files
from support.aarch64 import PYTHON, Binfmt, install_qemu, required, unpack_python
from support.pypi_index import IndexServer
from support.stand_ins import stand_in_files
from support.wheels import build_wheel

GH200 = str(REPO / "tests" / "profiles" / "gh200-r570-cuda128.yaml")
CP = "cp" + PYTHON.replace(".", "")


@pytest.fixture(scope="session")
def aarch64_python(tmp_path_factory) -> Iterator[Path]:
    """Debian's arm64 python3.11, runnable here as any program is (binfmt_misc and qemu-user-static)."""
    reason = "it needs root (to mount binfmt_misc and register qemu for aarch64)" if os.geteuid() != 0 \
        else install_qemu()
    python = None
    if reason is None:
        python, reason = unpack_python(tmp_path_factory.mktemp("aarch64"))
    if reason is not None or python is None:
        if required(os.environ):
            pytest.fail(f"a real aarch64 Python is required here (CI): {reason}", pytrace=False)
        pytest.skip(f"no aarch64 Python: {reason}")
    with Binfmt(python.parents[2], f"envkit-test-aarch64-{os.getpid()}"):
        yield python


@pytest.fixture(scope="session")
def both_platforms(tmp_path_factory) -> list[Path]:
    """torch 2.14 cu126's packages as PyTorch's cu126 index serves them for CPython 3.11 on both CPUs (torchvision
    and torchaudio plain for aarch64, as pytorch/vision#9330 lists them), each torch saying which CPU it is for; the
    companions are the stand-ins the check imports and runs."""
    out = tmp_path_factory.mktemp("both-platforms")
    wheels = [build_wheel(out, "filelock", "3.20.0")]
    for machine, local in (("x86_64", "+cu126"), ("aarch64", "")):
        tag = f"{CP}-{CP}-manylinux_2_28_{machine}"
        files = {**fake_torch_files("2.14.0+cu126", "12.6"), "torch/wheel_for.txt": machine}
        wheels += [build_wheel(out, "torch", "2.14.0+cu126", requires=["filelock"], tag=tag, files=files),
                   build_wheel(out, "torchvision", f"0.29.0{local}", requires=["torch==2.14.0"], tag=tag,
                               files=stand_in_files("torchvision")),
                   build_wheel(out, "torchaudio", f"2.11.0{local}", requires=["torch==2.14.0"], tag=tag,
                               files=stand_in_files("torchaudio"))]
    return wheels


def elf_machine(path: Path) -> int:
    """e_machine of an ELF file: 62 x86_64, 183 aarch64."""
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF"
    return int.from_bytes(header[18:20], "little")


def test_a_venv_for_an_aarch64_machine_holds_aarch64_wheels_and_is_checked_by_its_own_python(
        home: Home, pypi_server: IndexServer, both_platforms: list[Path], aarch64_python: Path):
    pypi_server.add_index("/whl/cu126", both_platforms)
    home.mirror_to(pypi_server)
    pythons = home.root / "aarch64-bin"  # where a user's aarch64 Python is found: on PATH
    pythons.mkdir()
    (pythons / f"python{PYTHON}").symlink_to(aarch64_python)
    env = {"PATH": f"{pythons}{os.pathsep}{home.env['PATH']}"}
    done = home.envkit("create", "torch", "--build", "torch-2.14-cu126", "--python", PYTHON, "--machine", GH200,
                       "--name", "grace", "--yes", env=env, timeout=600)
    assert done.returncode == 0, done.stderr + done.stdout
    # each package pinned to the build's own aarch64 wheel before the install, the companions to their plain ones
    assert ("torch-2.14-cu126 packages: torch==2.14.0+cu126, torchvision==0.29.0, torchaudio==2.11.0 (the +cu126 "
            "builds; torchvision, torchaudio plain)") in done.stderr
    record = home.record("grace")
    assert (record["build"], record["backend"], record["python"]) == ("torch-2.14-cu126", "venv", PYTHON)
    assert record["machine"]["platform"] == "linux-aarch64"
    assert record["verify"]["ok"] is True, done.stdout
    prefix = home.prefix("grace")
    assert elf_machine((prefix / "bin" / "python").resolve()) == 183  # the venv's Python: aarch64
    site = prefix / "lib" / f"python{PYTHON}" / "site-packages"
    assert (site / "torch" / "wheel_for.txt").read_text() == "aarch64"
    wheel = (site / "torch-2.14.0+cu126.dist-info" / "WHEEL").read_text()
    assert f"Tag: {CP}-{CP}-manylinux_2_28_aarch64" in wheel
    assert (site / "torchvision-0.29.0.dist-info").is_dir()  # the plain aarch64 one, checked as plain (pip.plain)
    assert all("aarch64" in name or name.endswith("-any.whl") for name in pypi_server.fetched_files())
    # The check ran in that Python: it says which CPU it runs on.
    checked = home.envkit("verify", "grace", "--json", env=env, timeout=300)
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert report["python"]["machine"] == "aarch64" and report["ok"] is True
    assert report["python"]["executable"].startswith(str(prefix))
