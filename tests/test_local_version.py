"""Which build a GPU build's packages must be: the local version of its variant (torch 2.13.0+cu126 from the cu126
index), or the manifest's own rule (`pip.local_version`); checked on what is installed, from the .dist-info."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from envkit.backends.installers import wrong_builds
from envkit.backends.plan import PipPart
from envkit.catalog import load_catalog
from envkit.errors import ManifestError


@pytest.fixture
def envs_copy(envs_dir, tmp_path) -> Path:
    copy = tmp_path / "envs"
    shutil.copytree(envs_dir, copy, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    return copy


def _edit(directory: Path, name: str, change) -> None:
    path = directory / name
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_the_default_is_the_variant_on_its_own_index_and_none_on_pypi(catalog):
    torch = catalog.manifests["torch"]
    own = [b for b in torch.builds if b.pip.index_url or b.pip.find_links]  # the PyTorch index or links page
    assert all(b.pip.local_version == b.variant for b in own if b.id != "torch-2.8-jp6-cu126")
    # (the Jetson AI Lab's wheels are plain, torch-2.8.0: its build says local_version: none)
    assert [b.pip.local_version for b in own if b.id == "torch-2.8-jp6-cu126"] == [""]
    assert all(b.pip.local_version == "" for b in torch.builds if b not in own)  # 1.x's default builds: PyPI
    jax = [b for b in catalog.manifests["jax"].builds if b.is_gpu and b.pip is not None]
    assert jax and all(b.pip.local_version == "" for b in jax)  # PyPI publishes no local versions


def test_a_manifest_says_its_own_rule(envs_copy):
    _edit(envs_copy, "torch.yaml", lambda d: d["pip"].update(local_version="none"))
    torch = load_catalog(envs_copy, ["torch"]).manifests["torch"]
    assert {b.pip.local_version for b in torch.builds} == {""}  # (a build's own rule wins: the Jetson one's too)
    _edit(envs_copy, "torch.yaml", lambda d: d["pip"].update(local_version="pt{variant}"))
    torch = load_catalog(envs_copy, ["torch"]).manifests["torch"]
    assert {b.pip.local_version for b in torch.builds if b.variant == "cu126" and not b.is_jetson} == {"ptcu126"}


def test_a_local_version_that_is_no_label_is_a_broken_manifest(envs_copy):
    _edit(envs_copy, "torch.yaml", lambda d: d["pip"].update(local_version="+cu126 --index-url x"))
    with pytest.raises(ManifestError) as caught:
        load_catalog(envs_copy, ["torch"])
    assert caught.value.field == "pip.local_version" and caught.value.exit_code == 2


def _installed(prefix: Path, name: str, version: str) -> None:
    info = prefix / "lib" / "python3.12" / "site-packages" / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody: x\n")


def test_each_package_must_carry_the_local_version(tmp_path: Path):
    _installed(tmp_path, "torch", "2.13.1")
    _installed(tmp_path, "torchvision", "0.28.0+cu126")
    step = PipPart("p", ("torch==2.13.*", "torchvision==0.28.*", "torchaudio==2.11.*"), "http://x", local="cu126")
    assert wrong_builds(tmp_path, step) == ["torch 2.13.1, not +cu126", "torchaudio is not installed"]
    assert wrong_builds(tmp_path, PipPart("p", ("torch==2.13.*",), "http://x", local=None)) == []
    exact = PipPart("p", ("torch==2.13.1", "torchaudio==0.8.1"), "http://x", local="cu126")
    assert wrong_builds(tmp_path, exact) == []  # pinned to one version: what the pin says
    assert wrong_builds(tmp_path, PipPart("p", ("torch==2.13.*",), "http://x", local="")) == []
    assert wrong_builds(tmp_path, PipPart("p", ("torchvision",), "http://x", local="")) == \
        ["torchvision 0.28.0+cu126, not a plain version"]  # a manifest that says none means none


def test_a_package_the_build_says_is_plain_is_asked_for_a_plain_version(tmp_path: Path, catalog):
    """Issue 43: on aarch64 PyTorch's CUDA index serves torch 2.10.0+cu128 beside a plain torchvision 0.25.0 (its
    aarch64 torchvision is a CPU build): the build's aarch64 view says so, and the check asks each for what it is."""
    from envkit.backends.plan import pip_parts
    from envkit.state.config import Config

    build = next(b for b in catalog.manifests["torch"].builds if b.id == "torch-2.10-cu128").on("linux-aarch64")
    [step] = pip_parts(build, catalog.tables.python, Config(None), jupyter=False)
    assert (step.local, step.plain) == ("cu128", ("torchvision", "torchaudio"))
    _installed(tmp_path, "torch", "2.10.0+cu128")
    _installed(tmp_path, "torchvision", "0.25.0")
    _installed(tmp_path, "torchaudio", "2.10.0+cu128")
    assert wrong_builds(tmp_path, step) == ["torchaudio 2.10.0+cu128, not a plain version"]
    x86 = pip_parts(build.on("linux-64")._replace(pip=build.pip._replace(plain=())), catalog.tables.python,
                    Config(None), jupyter=False)[0]
    assert wrong_builds(tmp_path, x86) == ["torchvision 0.25.0, not +cu128"]


@pytest.mark.parametrize("python, expected", [
    ("3.15", []),  # left out by its marker: not missing
    ("3.14", ["torchaudio is not installed"]),  # the marker holds: it should be there
])
def test_a_package_its_marker_leaves_out_for_this_python_is_not_asked_for(tmp_path: Path, python, expected):
    """Issue 30: torch 2.15 pins 'torchaudio==2.11.* ; python_version < "3.15"'; an environment of Python 3.15 gets
    torch alone, and the check after installing must not call that a wrong build."""
    info = tmp_path / "lib" / f"python{python}" / "site-packages" / "torch-2.15.0+cu130.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.15.0+cu130\n\n")
    step = PipPart("p", ("torch==2.15.*", 'torchaudio==2.11.* ; python_version < "3.15"'), "http://x", local="cu130")
    assert wrong_builds(tmp_path, step) == expected
