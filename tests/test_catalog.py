"""The shipped manifests validate; broken ones are reported with file, build and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from envkit.catalog import load_catalog, manifest_names
from envkit.errors import BadInputError, ManifestError, UnknownNameError
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion


def test_shipped_manifests_load(catalog):
    assert {"torch", "tensorflow", "jax", "mxnet"} <= set(catalog.manifests)
    for manifest in catalog.manifests.values():
        assert manifest.builds, manifest.name
        assert len({b.id for b in manifest.builds}) == len(manifest.builds)


def test_torch_2x_builds_install_from_their_variant_index(catalog):
    """Every 2.x build installs torch first, from its variant's index; the release table is test_manifest_torch.py."""
    for build in catalog.manifests["torch"].builds:
        if build.version.major == 2:
            assert build.pip.index_url == f"https://download.pytorch.org/whl/{build.variant}"
            assert build.pip.packages[0] == f"torch=={build.version}.*"


def test_torch_arch_facts(catalog):
    builds = {b.id: b for b in catalog.manifests["torch"].builds}
    sm70 = ComputeCapability(7, 0)
    assert sm70 in builds["torch-2.10-cu128"].arch.sass
    assert sm70 not in builds["torch-2.11-cu128"].arch.sass
    assert sm70 not in builds["torch-2.9-cu130"].arch.sass
    assert ComputeCapability(3, 7) in builds["torch-2.7-cu118"].arch.sass
    assert builds["torch-2.7-cu118"].min_compute_capability == ComputeCapability(5, 0)  # its cuDNN 9.1
    assert builds["torch-2.15-cu132"].arch.ptx == ()  # release cu13x wheels carry no PTX
    assert builds["torch-2.13-cu132"].arch.ptx == (ComputeCapability(12, 0),)  # 2.13.0, by accident
    assert builds["torch-2.14-cpu"].cuda is None and builds["torch-2.14-cpu"].arch is None


def test_cuda_table(catalog):
    cuda = catalog.tables.cuda
    assert cuda.min_driver[CudaVersion(12, 4)] == DriverVersion.parse("550.54.14")
    assert cuda.minor_compat_floor[12] == DriverVersion.parse("525.60.13")
    # The highest CUDA a driver supports, derived from the same table.
    assert cuda.cuda_for_driver(DriverVersion.parse("535.104.05")) == CudaVersion(12, 2)
    assert cuda.cuda_for_driver(DriverVersion.parse("470.256.02")) == CudaVersion(11, 4)
    assert cuda.cuda_for_driver(DriverVersion.parse("580.65.06")) == CudaVersion(13, 0)
    assert cuda.cuda_for_driver(DriverVersion.parse("390.157")) is None
    assert cuda.driver_floor(CudaVersion(12, 4)) == DriverVersion.parse("550.54.14")


def test_manifest_names_exclude_the_tables(envs_dir):
    names = manifest_names(envs_dir)
    assert "torch" in names
    assert not {"cuda", "python", "gpus"} & set(names)


def test_unknown_manifest_name_lists_the_real_ones(envs_dir):
    with pytest.raises(UnknownNameError) as caught:
        load_catalog(envs_dir, ["pytorch"])
    assert "'pytorch'" in caught.value.message
    assert "torch" in caught.value.hint and "tensorflow" in caught.value.hint


def test_missing_directory_is_bad_input(tmp_path):
    with pytest.raises(BadInputError, match="does not exist"):
        load_catalog(tmp_path / "nope")


# --- broken manifests -------------------------------------------------------------------------------------------

@pytest.fixture
def envs_copy(envs_dir, tmp_path) -> Path:
    copy = tmp_path / "envs"
    shutil.copytree(envs_dir, copy, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    return copy


def edit(directory: Path, name: str, change) -> None:
    path = directory / name
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def first_build(data):
    return data["releases"][0]["builds"][0]


def broken(directory: Path, name: str = "torch") -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load_catalog(directory, [name])
    return caught.value


BREAKAGES = [
    # (what is broken, change, expected build, expected field, words in the problem)
    ("unknown build key", lambda d: first_build(d).update(pyhton=">=3.8"), "torch-2.15-cu132", "pyhton",
     "unknown key"),
    ("CUDA not in the table", lambda d: first_build(d).update(cuda="12.7"), "torch-2.15-cu132", "cuda",
     "not in cuda.yaml"),
    ("bad variant", lambda d: first_build(d).update(variant="gpu"), "torch-2.15-gpu", "variant", "'gpu'"),
    ("variant names another CUDA", lambda d: first_build(d).update(variant="cu130"), "torch-2.15-cu130", "variant",
     "does not name CUDA 13.2"),
    ("cpu with cuda", lambda d: d["releases"][0]["builds"][-1].update(cuda="12.6"), "torch-2.15-cpu", "cuda",
     "cpu build"),
    ("GPU build without arch", lambda d: first_build(d).pop("arch"), "torch-2.15-cu132", "arch",
     "architecture list"),
    ("unknown arch set", lambda d: first_build(d).update(arch="hopper-only"), "torch-2.15-cu132", "arch",
     "no arch set named 'hopper-only'"),
    ("inline arch not a capability", lambda d: first_build(d).update(arch={"sass": ["7.x"]}), "torch-2.15-cu132",
     "arch.sass[0]", "compute capability"),
    ("arch older than the toolkit", lambda d: first_build(d).update(arch={"sass": ["3.7"]}), "torch-2.15-cu132",
     "arch", "cannot build for sm_37"),
    ("plain http index", lambda d: first_build(d).update(pip={"index_url": "http://example.org/simple"}),
     "torch-2.15-cu132", "pip.index_url", "https"),
    ("bad requirement", lambda d: d["releases"][0]["pip"].update(packages=["torch 2.14"]), "torch-2.15-cu130",
     "pip.packages[0]", "not a pip requirement"),
    ("bad python range", lambda d: d["releases"][0].update(python="3.10+"), None, "releases[0].python",
     "version range"),
    ("python nobody provides", lambda d: d["releases"][0].update(python=">=4.0"), None, "releases[0].python",
     "admits none"),
    ("build python override", lambda d: first_build(d).update(python="latest"), "torch-2.15-cu132", "python",
     "version range"),
    ("unquoted version", lambda d: d["releases"][0].update(version=2.10), None, "releases[0].version",
     "quote it ('2.1')"),
    ("unquoted cuda", lambda d: first_build(d).update(cuda=13.2), "torch-2.15-cu132", "cuda", "quote it"),
    ("empty python range", lambda d: d["releases"][0].update(python=""), None, "releases[0].python", "empty"),
    ("duplicate id", lambda d: d["releases"][0]["builds"].append(dict(first_build(d))), None,
     "releases[0].builds[3].id", "duplicate build id 'torch-2.15-cu132'"),
    ("name is not the file's", lambda d: d.update(name="pytorch"), None, "name", "file's name"),
    ("unknown framework", lambda d: d.update(framework="caffe"), None, "framework", "'caffe'"),
    ("no releases", lambda d: d.update(releases=[]), None, "releases", "missing or empty"),
]


@pytest.mark.parametrize("what, change, build, field, words", BREAKAGES, ids=[b[0] for b in BREAKAGES])
def test_broken_manifest_names_file_build_and_field(envs_copy, what, change, build, field, words):
    edit(envs_copy, "torch.yaml", change)
    error = broken(envs_copy)
    assert error.path == str(envs_copy / "torch.yaml")
    assert error.build == build
    assert error.field == field
    assert words in error.problem
    assert str(envs_copy / "torch.yaml") in error.message
    assert error.exit_code == 2


def test_yaml_syntax_error_gives_the_line(envs_copy):
    path = envs_copy / "torch.yaml"
    lines = path.read_text().splitlines()
    lines[20] = "  broken: [unclosed"
    path.write_text("\n".join(lines))
    error = broken(envs_copy)
    assert "not valid YAML" in error.problem and "line" in error.problem


def test_missing_table_says_which_files_a_directory_needs(envs_copy):
    (envs_copy / "cuda.yaml").unlink()
    error = broken(envs_copy)
    assert error.path.endswith("cuda.yaml")
    assert "cuda.yaml, python.yaml, gpus.yaml" in error.problem


def test_unquoted_table_key_is_refused_by_its_name(envs_copy):
    path = envs_copy / "cuda.yaml"
    path.write_text(path.read_text().replace('"12.8": "570.26"', '12.8: "570.26"'))
    error = broken(envs_copy)
    assert error.field == "min_driver.12.8" and "quote it" in error.problem


def test_broken_table_names_its_field(envs_copy):
    edit(envs_copy, "cuda.yaml", lambda d: d["min_driver"].update({"12.4": "five-fifty"}))
    error = broken(envs_copy)
    assert error.path.endswith("cuda.yaml") and error.field == "min_driver.12.4"


def test_a_broken_manifest_does_not_stop_listing_another(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: d.update(framework="caffe"))
    assert load_catalog(envs_copy, ["jax"]).manifests["jax"].builds


def test_manifest_level_install_defaults_and_variant_placeholder(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: d.update(pip={"index_url": "https://mirror.example/whl/{variant}"}))
    torch = load_catalog(envs_copy, ["torch"]).manifests["torch"]
    urls = {b.variant: b.pip.index_url for b in torch.builds if str(b.version) == "2.14"}
    assert urls == {v: f"https://mirror.example/whl/{v}" for v in ("cu132", "cu130", "cu126", "cpu")}
