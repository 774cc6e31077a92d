"""Helpers and fixtures for the manifest maintenance tests (imported by name: no conftest.py here, so that the other
directories' `from conftest import ...` keep meaning their own): a small torch manifest in a manifests directory,
wheel file names for the faulty index on 127.0.0.1."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.fault_index import FaultyIndex

from envkit.catalog.layout import TABLE_FILES

TORCH = """
name: torch
summary: a small torch manifest for the check tests
framework: torch
pip:
  index_url: "https://download.pytorch.org/whl/{variant}"
releases:
  - version: "2.14"
    python: ">=3.11,<3.14"
    pip:
      packages: ["torch==2.14.*", "torchvision==0.29.*", "torchaudio==2.11.*"]
    builds:
      - {variant: cu130, cuda: "13.0", arch: {sass: ["7.5", "8.0", "9.0"]}}
      - {variant: cpu}
"""


def wheels(name: str, version: str, pythons=("311", "312", "313"), abi3: bool = False) -> list[str]:
    if abi3:
        return [f"{name}-{version}-cp311-abi3-manylinux_2_28_x86_64.whl"]
    return [f"{name}-{version}-cp{p}-cp{p}-manylinux_2_28_x86_64.whl" for p in pythons]


def complete_index(server: FaultyIndex, variants=("cu130", "cpu")) -> None:
    for variant in variants:
        server.add(f"/whl/{variant}", [
            *wheels("torch", f"2.14.0+{variant}"), *wheels("torchvision", f"0.29.1+{variant}"),
            *wheels("torchaudio", f"2.11.0+{variant}"),
            *wheels("torch", f"2.13.0+{variant}"),  # older lines are there too, as on the real index
            "torch-2.14.0-cp312-none-macosx_11_0_arm64.whl",  # not Linux: never counted
        ])


@pytest.fixture
def index() -> Iterator[FaultyIndex]:
    with FaultyIndex() as server:
        yield server


def manifests_dir_with(envs_dir: Path, directory: Path, name: str, text: str) -> Path:
    """A manifests directory of the shipped tables and one manifest, ``name``.yaml."""
    directory.mkdir()
    for table in TABLE_FILES:
        shutil.copy(envs_dir / table, directory / table)
    (directory / f"{name}.yaml").write_text(text)
    return directory


@pytest.fixture
def manifests(envs_dir: Path, tmp_path: Path) -> Path:
    return manifests_dir_with(envs_dir, tmp_path / "manifests", "torch", TORCH)
