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


def test_torch_covers_every_release_2_0_to_2_14_with_cpu(catalog):
    torch = catalog.manifests["torch"]
    releases = {str(b.version) for b in torch.builds}
    assert releases == {f"2.{minor}" for minor in range(15)}
    for release in releases:
        variants = {b.variant for b in torch.builds if str(b.version) == release}
        assert "cpu" in variants and len(variants) >= 3, (release, variants)


def test_torch_builds_install_all_three_packages_from_their_variant_index(catalog):
    for build in catalog.manifests["torch"].builds:
        assert build.pip.index_url == f"https://download.pytorch.org/whl/{build.variant}"
        names = [p.split("==")[0] for p in build.pip.packages]
        assert names == ["torch", "torchvision", "torchaudio"]
        assert build.pip.packages[0] == f"torch=={build.version}.*"


def test_torch_arch_facts(catalog):
    builds = {b.id: b for b in catalog.manifests["torch"].builds}
    sm70 = ComputeCapability(7, 0)
    assert sm70 in builds["torch-2.10-cu128"].arch.sass
    assert sm70 not in builds["torch-2.11-cu128"].arch.sass
    assert sm70 not in builds["torch-2.9-cu130"].arch.sass
    assert ComputeCapability(3, 7) in builds["torch-2.7-cu118"].arch.sass
    assert builds["torch-2.14-cu132"].arch.ptx == (ComputeCapability(12, 0),)
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
    ("unknown build key", lambda d: first_build(d).update(pyhton=">=3.8"), "torch-2.14-cu132", "pyhton",
     "unknown key"),
    ("CUDA not in the table", lambda d: first_build(d).update(cuda="12.7"), "torch-2.14-cu132", "cuda",
     "not in cuda.yaml"),
    ("bad variant", lambda d: first_build(d).update(variant="gpu"), "torch-2.14-gpu", "variant", "'gpu'"),
    ("variant names another CUDA", lambda d: first_build(d).update(variant="cu130"), "torch-2.14-cu130", "variant",
     "does not name CUDA 13.2"),
    ("cpu with cuda", lambda d: d["releases"][0]["builds"][-1].update(cuda="12.6"), "torch-2.14-cpu", "cuda",
     "cpu build"),
    ("GPU build without arch", lambda d: first_build(d).pop("arch"), "torch-2.14-cu132", "arch",
     "architecture list"),
    ("unknown arch set", lambda d: first_build(d).update(arch="hopper-only"), "torch-2.14-cu132", "arch",
     "no arch set named 'hopper-only'"),
    ("inline arch not a capability", lambda d: first_build(d).update(arch={"sass": ["7.x"]}), "torch-2.14-cu132",
     "arch.sass[0]", "compute capability"),
    ("arch older than the toolkit", lambda d: first_build(d).update(arch={"sass": ["3.7"]}), "torch-2.14-cu132",
     "arch", "cannot build for sm_37"),
    ("plain http index", lambda d: first_build(d).update(pip={"index_url": "http://example.org/simple"}),
     "torch-2.14-cu132", "pip.index_url", "https"),
    ("bad requirement", lambda d: d["releases"][0]["pip"].update(packages=["torch 2.14"]), "torch-2.14-cu132",
     "pip.packages[0]", "not a pip requirement"),
    ("bad python range", lambda d: d["releases"][0].update(python="3.10+"), None, "releases[0].python",
     "version range"),
    ("python nobody provides", lambda d: d["releases"][0].update(python=">=4.0"), None, "releases[0].python",
     "admits none"),
    ("build python override", lambda d: first_build(d).update(python="latest"), "torch-2.14-cu132", "python",
     "version range"),
    ("unquoted version", lambda d: d["releases"][0].update(version=2.10), None, "releases[0].version",
     "quote it ('2.1')"),
    ("unquoted cuda", lambda d: first_build(d).update(cuda=13.2), "torch-2.14-cu132", "cuda", "quote it"),
    ("empty python range", lambda d: d["releases"][0].update(python=""), None, "releases[0].python", "empty"),
    ("duplicate id", lambda d: d["releases"][0]["builds"].append(dict(first_build(d))), None,
     "releases[0].builds[4].id", "duplicate build id 'torch-2.14-cu132'"),
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


# shared/reference/compat-data.md, restated row by row (not derived from torch.yaml): release -> (Pythons,
# CUDA variants on the PyTorch index, torchvision, torchaudio).
TORCH_RELEASES = {
    "2.0": ("3.8-3.11", {"cu117", "cu118"}, "0.15", "2.0"),
    "2.1": ("3.8-3.11", {"cu118", "cu121"}, "0.16", "2.1"),
    "2.2": ("3.8-3.11", {"cu118", "cu121"}, "0.17", "2.2"),
    "2.3": ("3.8-3.11", {"cu118", "cu121"}, "0.18", "2.3"),
    "2.4": ("3.8-3.12", {"cu118", "cu121", "cu124"}, "0.19", "2.4"),
    "2.5": ("3.9-3.12", {"cu118", "cu121", "cu124"}, "0.20", "2.5"),
    "2.6": ("3.9-3.13", {"cu118", "cu124", "cu126"}, "0.21", "2.6"),
    "2.7": ("3.9-3.13", {"cu118", "cu126", "cu128"}, "0.22", "2.7"),
    "2.8": ("3.9-3.13", {"cu126", "cu128", "cu129"}, "0.23", "2.8"),
    "2.9": ("3.10-3.14", {"cu126", "cu128", "cu130"}, "0.24", "2.9"),
    "2.10": ("3.10-3.14", {"cu126", "cu128", "cu130"}, "0.25", "2.10"),
    "2.11": ("3.10-3.14", {"cu126", "cu128", "cu130"}, "0.26", "2.11"),
    "2.12": ("3.10-3.14", {"cu126", "cu130", "cu132"}, "0.27", "2.11"),
    "2.13": ("3.10-3.15", {"cu126", "cu130", "cu132"}, "0.28", "2.11"),
    "2.14": ("3.10-3.15", {"cu126", "cu130", "cu132"}, "0.29", "2.11"),
}

KEPLER_TO_AMPERE = ("3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6")
MAXWELL_TO_HOPPER = ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0")
TURING_TO_BLACKWELL = ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0")
VOLTA_TO_BLACKWELL = ("7.0", *TURING_TO_BLACKWELL)


def torch_arch(release: str, variant: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """compat-data's architecture table: (SASS, PTX) for a release and variant."""
    minor = int(release.split(".")[1])
    if variant in ("cu116", "cu117"):
        return KEPLER_TO_AMPERE, ()
    if variant == "cu118":
        return (*KEPLER_TO_AMPERE, "9.0"), ()
    if variant in ("cu121", "cu124", "cu126"):
        return MAXWELL_TO_HOPPER, ()
    if variant == "cu128":
        return (TURING_TO_BLACKWELL if minor in (7, 11) else VOLTA_TO_BLACKWELL), ()
    if variant == "cu129":
        return VOLTA_TO_BLACKWELL, ("12.0",)
    return TURING_TO_BLACKWELL, ("12.0",)  # cu130, cu132


@pytest.mark.parametrize("release", sorted(TORCH_RELEASES))
def test_torch_release_matches_the_compatibility_facts(catalog, release):
    pythons, variants, torchvision, torchaudio = TORCH_RELEASES[release]
    builds = [b for b in catalog.manifests["torch"].builds if str(b.version) == release]
    assert {b.variant for b in builds} == variants | {"cpu"}
    first, last = pythons.split("-")
    offered = [str(v) for v in catalog.tables.python.versions if builds[0].python.contains(v)]
    assert (offered[0], offered[-1]) == (first, last)
    for build in builds:
        assert build.python == builds[0].python
        assert build.pip.packages == (f"torch=={release}.*", f"torchvision=={torchvision}.*",
                                      f"torchaudio=={torchaudio}.*")
        if build.variant == "cpu":
            continue
        assert build.cuda.tag == build.variant
        sass, ptx = torch_arch(release, build.variant)
        assert tuple(str(a) for a in build.arch.sass) == sass, build.id
        assert tuple(str(a) for a in build.arch.ptx) == ptx, build.id
