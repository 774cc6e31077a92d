"""The shipped manifests validate; broken ones are reported with file, build and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.catalog import load_catalog, manifest_names
from envkit.errors import BadInputError, ManifestError, UnknownNameError
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion
from support.manifest_edits import edit


def test_shipped_manifests_load(catalog):
    assert {"torch", "tensorflow", "jax", "mxnet"} <= set(catalog.manifests)
    for manifest in catalog.manifests.values():
        assert manifest.builds, manifest.name
        assert len({b.id for b in manifest.builds}) == len(manifest.builds)


def test_torch_2x_builds_install_from_their_variant_index(catalog):
    """Every 2.x build installs torch first, from its variant's index; the release table is test_manifest_torch.py."""
    for build in catalog.manifests["torch"].builds:
        if build.version.major == 2 and not build.is_jetson:  # (Jetson builds: NVIDIA's, test_pick_platforms.py)
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
    # R565 drivers report CUDA 12.7, which no toolkit is: they are at least 12.6's minimum, and below 12.8's 570.26.
    assert cuda.driver_floor(CudaVersion(12, 7)) == DriverVersion.parse("560.28.03")


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
    with pytest.raises(BadInputError, match="does not exist") as caught:
        load_catalog(tmp_path / "nope")
    assert "$ENVKIT_MANIFESTS" in caught.value.hint  # where the directory came from, as a next step


# --- broken manifests -------------------------------------------------------------------------------------------

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
    ("fullwidth digits in an arch", lambda d: first_build(d).update(arch={"sass": ["８.0"]}), "torch-2.15-cu132",
     "arch.sass[0]", "not a compute capability"),
    ("absurd arch", lambda d: first_build(d).update(arch={"sass": ["8.0", "99999999999.0"]}), "torch-2.15-cu132",
     "arch.sass[1]", "'99999999999.0' is not a compute capability"),
    ("fullwidth digits in a cuda", lambda d: first_build(d).update(cuda="１３.２"), "torch-2.15-cu132", "cuda",
     "not a CUDA version"),
    ("a number among the pip packages", lambda d: first_build(d).update(pip={"packages": ["torch==2.15.*", 5]}),
     "torch-2.15-cu132", "pip.packages[1]", "the number 5"),
    ("unknown index placeholder", lambda d: first_build(d).update(pip={"index_url": "https://x.org/whl/{nope}"}),
     "torch-2.15-cu132", "pip.index_url", "unknown placeholder {nope}"),
    ("a path in the variant", lambda d: first_build(d).update(variant="cu132/../x"), "torch-2.15-cu132/../x",
     "variant", "'cu132/../x' is not 'cpu'"),
    ("a path in the id", lambda d: first_build(d).update(id="../x"), "../x", "id", "a build id is letters"),
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


@pytest.mark.parametrize("value, words", [
    ("9.0", 'quoted ("9.0"): unquoted, YAML reads it as a number'),
    ("12.10", 'quoted ("12.10"): YAML reads 12.10 as the number 12.1'),
    ("9", 'quoted ("9")'),
])
def test_an_unquoted_compute_capability_in_the_gpu_table_is_refused(envs_copy, value, words):
    # cuda.yaml and python.yaml refused a version YAML reads as a number; gpus.yaml took `"H100": 9.0` (and
    # `"GB10": 12.10` would have been 12.1).
    path = envs_copy / "gpus.yaml"
    path.write_text(path.read_text().replace('"H100": "9.0"', f'"H100": {value}'))
    error = broken(envs_copy)
    assert error.path.endswith("gpus.yaml") and error.field == "compute_capability.H100"
    assert error.problem.startswith(value) and words in error.problem and error.exit_code == 2


def test_the_shipped_gpu_table_is_all_quoted(envs_dir):
    assert load_catalog(envs_dir, ["torch"]).tables.gpu_names.lookup("NVIDIA H100 80GB HBM3") == ComputeCapability(9, 0)


def test_a_table_key_in_octal_is_refused_with_its_line_not_read_as_another_cuda(envs_copy):
    # YAML 1.1 reads 012 as 10: the floor of CUDA 12's minor-version compatibility became CUDA 10's, unseen.
    path = envs_copy / "cuda.yaml"
    path.write_text(path.read_text().replace('  "12": "525.60.13"', '  012: "525.60.13"'))
    error = broken(envs_copy)
    line = path.read_text().splitlines().index('  012: "525.60.13"') + 1
    assert error.path == str(path) and error.exit_code == 2
    assert error.problem.startswith(f"not valid YAML: the number 012 at line {line}, column 3: YAML reads it as the "
                                    "octal number 10")


def test_broken_table_names_its_field(envs_copy):
    edit(envs_copy, "cuda.yaml", lambda d: d["min_driver"].update({"12.4": "five-fifty"}))
    error = broken(envs_copy)
    assert error.path.endswith("cuda.yaml") and error.field == "min_driver.12.4"


@pytest.mark.parametrize("table, change, field, words", [
    ("python.yaml", lambda d: d["versions"].append("3.99999999999999999999"), "versions",
     "'3.99999999999999999999' is not a Python version"),
    ("python.yaml", lambda d: d["versions"].append("3.１２"), "versions", "not a Python version"),
    ("python.yaml", lambda d: d.update(pypi_index="https://pypi.org/{nope}"), "pypi_index", "{ }"),
    ("cuda.yaml", lambda d: d["minor_version_compatibility"].update({"１２": "525"}),
     "minor_version_compatibility.１２", "not a CUDA major version"),
    ("cuda.yaml", lambda d: d["minor_version_compatibility"].update({"²": "525"}),
     "minor_version_compatibility.²", "not a CUDA major version"),
    ("cuda.yaml", lambda d: d["min_driver"].update({"12.4": "99999999999999999999999.4"}), "min_driver.12.4",
     "not an NVIDIA driver version"),
])
def test_a_table_with_unicode_digits_or_absurd_numbers_is_refused(envs_copy, table, change, field, words):
    edit(envs_copy, table, change)
    error = broken(envs_copy)
    assert error.path.endswith(table) and error.field == field and words in error.problem, error.message


def test_a_broken_manifest_does_not_stop_listing_another(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: d.update(framework="caffe"))
    assert load_catalog(envs_copy, ["jax"]).manifests["jax"].builds


def test_manifest_level_install_defaults_and_variant_placeholder(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: d.update(pip={"index_url": "https://mirror.example/whl/{variant}"}))
    torch = load_catalog(envs_copy, ["torch"]).manifests["torch"]
    urls = {b.variant: b.pip.index_url for b in torch.builds if str(b.version) == "2.14"}
    assert urls == {v: f"https://mirror.example/whl/{v}" for v in ("cu132", "cu130", "cu126", "cpu", "rocm7.2")}
