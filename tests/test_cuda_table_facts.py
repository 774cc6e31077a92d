"""envs/cuda.yaml row by row against its sources, restated by hand (NVIDIA's "CUDA Toolkit and Corresponding Driver
Versions" table as quoted in shared/reference/compat-data.md, NVIDIA's CUDA 13.3 release notes), and its table of
the last driver branch per GPU generation (issue 30): read, checked against min_driver, and used."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envkit.machines.profile import profile_from_dict
from envkit.pick.resolve import assess, impossible_driver
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion

# NVIDIA's table (Linux x86_64, GA). 13.3: ">=610.43.02" (CUDA 13.3 release notes; mesonbuild/meson
# mesonbuild/modules/cuda.py at 38d558e3 copies it). 13.4 and 13.5 exist, their minimum drivers unsourced: no row.
MIN_DRIVER = {
    "9.2": "396.26", "10.0": "410.48", "10.1": "418.39", "10.2": "440.33", "11.0": "450.51.05", "11.1": "455.23",
    "11.2": "460.27.03", "11.3": "465.19.01", "11.4": "470.42.01", "11.5": "495.29.05", "11.6": "510.39.01",
    "11.7": "515.43.04", "11.8": "520.61.05", "12.0": "525.60.13", "12.1": "530.30.02", "12.2": "535.54.03",
    "12.3": "545.23.06", "12.4": "550.54.14", "12.5": "555.42.02", "12.6": "560.28.03", "12.8": "570.26",
    "12.9": "575.51.03", "13.0": "580.65.06", "13.1": "590.44.01", "13.2": "595.45.04", "13.3": "610.43.02",
}


def test_every_min_driver_row_is_nvidias(catalog):
    table = catalog.tables.cuda.min_driver
    assert {str(cuda): str(driver) for cuda, driver in table.items()} == MIN_DRIVER


def test_a_610_driver_known_only_by_its_version_runs_cuda_13_3(catalog):
    """The /proc fallback: the driver's CUDA from its version alone; before the row, 610.43.02 counted as 13.2."""
    assert catalog.tables.cuda.cuda_for_driver(DriverVersion.parse("610.43.02")) == CudaVersion(13, 3)
    assert catalog.tables.cuda.cuda_for_driver(DriverVersion.parse("610.57.04")) == CudaVersion(13, 3)


# compute capability -> (last branch, its CUDA), or None where newer branches still drive it. R580: the 595 driver's
# own message, quoted in NixOS/nixos-hardware#1880 ("supported through the NVIDIA 580.xx Legacy drivers"); R470:
# NVIDIA's Kepler support notice.
LAST = {"3.5": (470, "11.4"), "3.7": (470, "11.4"), "5.0": (580, "13.0"), "5.2": (580, "13.0"),
        "6.0": (580, "13.0"), "6.1": (580, "13.0"), "7.0": (580, "13.0"), "7.5": None, "8.0": None, "12.0": None}


@pytest.mark.parametrize("capability", list(LAST))
def test_the_last_driver_branch_of_each_generation(catalog, capability):
    last = catalog.tables.cuda.last_driver_for(ComputeCapability.parse(capability))
    assert (None if last is None else (last.branch, str(last.cuda))) == LAST[capability]


def v100(driver: str, cuda: str):
    return profile_from_dict({"name": "v100", "driver_version": driver, "cuda_driver": cuda,
                              "gpus": [{"name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}]}, "v100")


def test_a_reason_that_asks_for_a_driver_says_when_none_drives_the_gpu(catalog):
    """torch 2.15 cu132 on a V100 with R570 (CUDA 12.8): a driver for CUDA 13.2 is R595 or newer, and none drives a
    V100; the reason says so beside the missing kernels."""
    build = next(b for b in catalog.manifests["torch"].builds if b.id == "torch-2.15-cu132")
    verdict = assess(build, v100("570.133.07", "12.8"), catalog.tables)
    assert verdict.reasons[0] == ("needs driver CUDA >= 13.2, the driver has 12.8; no driver for CUDA 13.2 drives "
                                  "sm_70: R580 (CUDA 13.0) is the last driver branch for Maxwell, Pascal and Volta")
    cu126 = next(b for b in catalog.manifests["torch"].builds if b.id == "torch-2.14-cu126")
    assert assess(cu126, v100("570.133.07", "12.8"), catalog.tables).compatible


def test_a_profile_claiming_a_v100_on_r595_is_warned_about(catalog):
    assert impossible_driver(v100("580.95.05", "13.0"), catalog.tables) == ()
    [warning] = impossible_driver(v100("595.45.04", "13.2"), catalog.tables)
    assert warning.startswith("GPU 0, Tesla V100-SXM2-16GB (sm_70) cannot be on driver 595.45.04: R580 (CUDA 13.0) "
                              "is the last driver branch for Maxwell, Pascal and Volta")
    # known by its CUDA alone
    [warning] = impossible_driver(profile_from_dict({"cuda_driver": "13.1", "gpus": [
        {"name": "Tesla P100-PCIE-16GB", "compute_capability": "6.0"}]}, "p100"), catalog.tables)
    assert "cannot be on a driver for CUDA 13.1" in warning


def run_envkit(*args, home):
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "c"), "XDG_DATA_HOME": str(home / "d"),
           "XDG_CACHE_HOME": str(home / "k"), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=home)


def test_envkit_list_warns_about_the_impossible_profile_in_text_and_json(tmp_path):
    profile = tmp_path / "v100-r595.yaml"
    profile.write_text('name: hand-written\ndriver_version: "595.45.04"\ncuda_driver: "13.2"\n'
                       'gpus:\n  - {name: Tesla V100-SXM2-16GB, compute_capability: "7.0"}\n')
    text = run_envkit("list", "torch", "--machine", str(profile), home=tmp_path)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1].startswith("Warning: GPU 0, Tesla V100-SXM2-16GB (sm_70) cannot be on driver 595.45.04: R580")
    data = json.loads(run_envkit("list", "torch", "--machine", str(profile), "--json", home=tmp_path).stdout)
    assert len(data["warnings"]) == 1 and "R580 (CUDA 13.0)" in data["warnings"][0]


def test_a_driver_branch_table_that_contradicts_min_driver_is_refused_with_file_line_and_field(envs_copy, tmp_path):
    path = envs_copy / "cuda.yaml"
    text = path.read_text()
    assert 'branch: "R580", cuda: "13.0"' in text
    path.write_text(text.replace('branch: "R580", cuda: "13.0"', 'branch: "R580", cuda: "13.1"'))
    line = next(number for number, content in enumerate(path.read_text().splitlines(), start=1)
                if 'branch: "R580"' in content)
    done = run_envkit("manifests", "validate", str(envs_copy), home=tmp_path)
    assert done.returncode == 2
    assert (f"{path}:{line}: field 'last_driver_branch[0].cuda': R580 supports CUDA 13.0 at most by min_driver "
            "(13.1's minimum driver is 590.44.01): the two tables disagree") in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("row, field, words", [
    ('{gpus: "Fermi", below_compute_capability: "3.0", branch: "R390", cuda: "9.1"}', "last_driver_branch[0].cuda",
     "CUDA 9.1 is not in min_driver"),
    ('{gpus: "Fermi", below_compute_capability: "3.0", branch: "R390", cuda: "9.2"}', "last_driver_branch[0].branch",
     "older than every driver in min_driver"),
    ('{gpus: "Fermi", below_compute_capability: "3.0", branch: "390.xx", cuda: "9.2"}',
     "last_driver_branch[0].branch", "not a driver branch like 'R580'"),
    ('{gpus: "Fermi", below_compute_capability: "3.0", branch: "R390", cuda: "9.2", until: "2022"}',
     "last_driver_branch[0].until", "unknown key"),
    # first_driver_branch (issue 46): the same checks, and each compute capability has one first branch
    ('{gpus: "Blackwell", compute_capabilities: ["12.0"], branch: "R570", cuda: "12.9"}',
     "first_driver_branch[0].cuda", "R570 supports CUDA 12.8 at most"),
    ('{gpus: "Blackwell", compute_capabilities: ["12.0", "12.0"], branch: "R570", cuda: "12.8"}',
     "first_driver_branch[0].compute_capabilities[1]", "12.0 has a first branch already"),
    ('{gpus: "Blackwell", compute_capabilities: ["12.0"], branch: "R570", cuda: "12.8"}',
     "first_driver_branch[5].compute_capabilities[1]", "12.0 has a first branch already"),  # the shipped row
    ('{gpus: "Blackwell", compute_capabilities: [], branch: "R570", cuda: "12.8"}',
     "first_driver_branch[0].compute_capabilities", "missing or empty"),
    ('{gpus: "Blackwell", compute_capabilities: ["sm120"], branch: "R570", cuda: "12.8"}',
     "first_driver_branch[0].compute_capabilities[0]", "compute capability"),
])
def test_a_broken_driver_branch_row_names_its_field(envs_copy, row, field, words):
    from envkit.catalog.load import load_tables
    from envkit.errors import ManifestError

    path = envs_copy / "cuda.yaml"
    key = field.split("[")[0] + ":\n"
    path.write_text(path.read_text().replace(key, f"{key}  - {row}\n", 1))  # the list's first row
    with pytest.raises(ManifestError) as caught:
        load_tables(envs_copy)
    assert caught.value.field == field and words in caught.value.problem
