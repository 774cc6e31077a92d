"""The plan pins the build's exact variant (#39 item 7): an index serving another build of the release (PyPI's
CUDA torch where /whl/cpu was meant) is refused before anything is downloaded or made, naming the index, the
upstream one it stands for and what it serves; an index that serves both gets the build's own. Real uv and pip
against the tests' index on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from conftest import CU126, PROFILES, PYTHON, Home, fake_torch_files
from support.pypi_index import IndexServer
from support.wheels import build_wheel

from envkit.backends.plan import PipPart
from envkit.backends.simple_index import IndexFile
from envkit.create.variants import choose, pinned_to_variant
from envkit.errors import InstallError

CPU = ("torch", "--build", "torch-2.13-cpu", "--python", PYTHON, "--machine", str(PROFILES / "no-gpu.yaml"))


def pypis_build(wheels: Path) -> list[Path]:
    """PyPI's own torch 2.13.1 (a CUDA build, no local label) and its companions: what a mirror of /whl/cpu pointed
    at PyPI serves."""
    return [build_wheel(wheels, "torch", "2.13.1", files=fake_torch_files("2.13.1", "13.0")),
            build_wheel(wheels, "torchvision", "0.28.1", requires=["torch==2.13.1"]),
            build_wheel(wheels, "torchaudio", "2.11.1", requires=["torch==2.13.1"])]


def test_a_cpu_mirror_pointed_at_pypi_is_refused_before_anything_is_downloaded_or_made(
        home: Home, pypi_server: IndexServer, tmp_path: Path):
    pypi_server.add_index("/whl/cpu", pypis_build(tmp_path / "pypi"))
    home.mirror_to(pypi_server)
    done = home.envkit("create", *CPU, "--yes")
    assert done.returncode == 1, done.stderr
    assert (f"{pypi_server.url}/whl/cpu (the mirror of https://download.pytorch.org/whl/cpu in envkit's config) "
            "serves torch 2.13.1 for torch==2.13.*, and no +cpu build") in done.stderr
    assert "nothing was downloaded" in done.stderr and "Traceback" not in done.stderr
    assert pypi_server.fetched_files() == []
    assert "Installing torch-2.13-cpu packages" not in done.stderr  # no installer was run
    assert not home.prefix("torch-cpu").exists() and home.record("torch-cpu") is None
    assert json.loads(home.envkit("envs", "--json").stdout)["environments"] == []


def test_an_index_that_also_serves_a_higher_plain_build_gets_the_builds_own(
        home: Home, pypi_server: IndexServer, torch_wheels, tmp_path: Path):
    """(The pins are made before either installer runs: uv here; pip takes the same requirements.)"""
    pypi_server.add_index("/whl/cu126", [*torch_wheels["cu126"], *pypis_build(tmp_path / "pypi")])
    home.mirror_to(pypi_server)
    done = home.envkit("create", *CU126, "--yes", "--no-verify")
    assert done.returncode == 0, done.stderr
    assert ("torch-2.13-cu126 packages: torch==2.13.0+cu126, torchvision==0.28.0+cu126, torchaudio==2.11.0+cu126 "
            "(the +cu126 builds)") in done.stderr
    code = "import importlib.metadata as m; print(m.version('torch'), m.version('torchvision'))"
    assert home.in_env("torch-cu126", code) == "2.13.0+cu126 0.28.0+cu126"
    assert not any("2.13.1" in path or "0.28.1" in path for path in pypi_server.fetched_files())


# --- the choice, alone ---------------------------------------------------------------------------------------

def _files(*names: str) -> list[IndexFile]:
    return [IndexFile(name, f"https://example.org/{name}") for name in names]


def test_the_newest_version_with_the_label_is_pinned_and_extras_and_markers_are_kept():
    page = _files("torch-2.14.1+cpu-cp312-cp312-manylinux_2_28_x86_64.whl",
                  "torch-2.14.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl",
                  "torch-2.14.2-cp312-cp312-manylinux_2_28_x86_64.whl",  # PyPI's, higher: never taken
                  "torch-2.14.3+cpu-cp312-cp312-macosx_11_0_arm64.whl",  # not for this platform
                  "torch-2.14.3+cpu-cp313-cp313-manylinux_2_28_x86_64.whl")  # not for this Python
    assert choose("torch==2.14.*", page, Version("3.12"), "cpu").pinned == "torch==2.14.1+cpu"
    marked = choose('torch[opt]==2.14.* ; python_version < "3.15"', page, Version("3.12"), "cpu").pinned
    assert marked == 'torch[opt]==2.14.1+cpu ; python_version < "3.15"'
    wrong = choose("torch==2.14.*", page, Version("3.12"), "cu126")
    assert wrong.pinned is None and wrong.served == ("2.14.2", "2.14.1+cpu", "2.14.0+cpu")


def test_a_step_pinned_exactly_or_without_a_label_is_not_read_and_an_unreadable_page_is_left_to_the_installer():
    asked: list[str] = []

    def read(url: str, accept: str):
        asked.append(url)
        raise InstallError("no answer")

    step = PipPart("p", ("torch==2.14.*", "torchvision==0.29.1+cpu", 'torchaudio==2.11.* ; python_version >= "4"'),
                   "https://example.org/whl/cpu", local="cpu")
    assert pinned_to_variant(step, Version("3.12"), step.index_url, read) == step
    assert asked == ["https://example.org/whl/cpu/torch/"]  # the exact pin and the marked-out one are not read
    plain = PipPart("p", ("tensorflow==2.15.*",), "https://pypi.org/simple", local="")
    assert pinned_to_variant(plain, Version("3.12"), plain.index_url, read) == plain and len(asked) == 1
