"""envkit.machines.gpu_names and envs/gpus.yaml: GPU model name -> compute capability."""

from __future__ import annotations

import pytest
import yaml

from envkit.errors import ManifestError
from envkit.machines.gpu_names import GpuNameTable, parse_gpu_names
from envkit.versions import ComputeCapability

from detect_fakes import REPO


def table(**entries: str) -> GpuNameTable:
    return parse_gpu_names({"compute_capability": {k.replace("_", " "): v for k, v in entries.items()}}, "t.yaml")


# Names as NVML / nvidia-smi / /proc print them, against NVIDIA's CUDA GPUs list.
@pytest.mark.parametrize(
    "name, expected",
    [
        ("Tesla K80", "3.7"),
        ("Tesla K40m", "3.5"),
        ("Tesla P100-PCIE-16GB", "6.0"),
        ("NVIDIA GeForce GTX 1080 Ti", "6.1"),
        ("NVIDIA TITAN X (Pascal)", "6.1"),
        ("GeForce GTX TITAN X", "5.2"),
        ("Tesla V100-SXM2-16GB", "7.0"),
        ("Tesla V100S-PCIE-32GB", "7.0"),
        ("Tesla T4", "7.5"),
        ("NVIDIA GeForce RTX 2070 SUPER", "7.5"),
        ("Quadro RTX 4000", "7.5"),
        ("NVIDIA A100-SXM4-40GB", "8.0"),
        ("NVIDIA A100 80GB PCIe", "8.0"),
        ("NVIDIA A10", "8.6"),
        ("NVIDIA A10G", "8.6"),
        ("NVIDIA A40", "8.6"),
        ("NVIDIA GeForce RTX 3090", "8.6"),
        ("NVIDIA RTX A6000", "8.6"),
        ("NVIDIA L4", "8.9"),
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"),
        ("NVIDIA RTX 4000 Ada Generation", "8.9"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA H100 PCIe", "9.0"),
        ("NVIDIA H200", "9.0"),
        ("NVIDIA GH200 480GB", "9.0"),
        ("NVIDIA B200", "10.0"),
        ("NVIDIA B300 SXM6 AC", "10.3"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
        ("NVIDIA GB10", "12.1"),
    ],
)
def test_real_table_knows_common_gpus(gpu_names, name, expected):
    assert gpu_names.lookup(name) == ComputeCapability.parse(expected)


def test_real_table_does_not_guess_unknown_models(gpu_names):
    assert gpu_names.lookup("NVIDIA Graphics Device") is None
    assert gpu_names.lookup("") is None


def test_real_table_file_names_its_source():
    first_line = (REPO / "envs" / "gpus.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first_line.startswith("#") and "CUDA GPUs list" in first_line


def test_real_table_values_are_quoted_strings():
    # Unquoted, YAML reads 12.0 as a float; the README asks for quotes, so the shipped file sets the example.
    raw = yaml.safe_load((REPO / "envs" / "gpus.yaml").read_text(encoding="utf-8"))
    assert all(isinstance(value, str) for value in raw["compute_capability"].values())


def test_key_matches_whole_words_only():
    names = table(A10="8.6", A100="8.0", T4="7.5")
    assert names.lookup("NVIDIA A10") == (8, 6)
    assert names.lookup("NVIDIA A100-SXM4-40GB") == (8, 0)
    assert names.lookup("NVIDIA A10G") is None  # "A10" runs on into "G"
    assert names.lookup("Quadro RTX 4000") is None
    assert names.lookup("NVIDIA T400") is None
    assert names.lookup("Tesla T4") == (7, 5)


def test_longest_key_wins_whatever_the_order():
    names = table(RTX_4000="7.5", RTX_4000_Ada="8.9")
    assert names.lookup("NVIDIA RTX 4000 Ada Generation") == (8, 9)
    assert names.lookup("Quadro RTX 4000") == (7, 5)
    reversed_order = table(RTX_4000_Ada="8.9", RTX_4000="7.5")
    assert reversed_order.lookup("NVIDIA RTX 4000 Ada Generation") == (8, 9)


def test_lookup_ignores_case_and_whitespace_runs():
    names = table(RTX_3090="8.6")
    assert names.lookup("nvidia geforce rtx 3090") == (8, 6)
    assert names.lookup("NVIDIA GeForce  RTX\t3090 ") == (8, 6)


def test_parse_accepts_sm_form():
    names = parse_gpu_names({"compute_capability": {"V100": "7.0", "T4": "sm_75"}}, "t.yaml")
    assert names.compute_capability == {"V100": (7, 0), "T4": (7, 5)}


@pytest.mark.parametrize("value", [7.0, 7])
def test_parse_refuses_numbers_as_the_other_tables_do(value):
    # Unquoted, YAML reads 12.10 as 12.1: cuda.yaml and python.yaml refuse a version written as a number, and so
    # does this table (it took them before).
    with pytest.raises(ManifestError) as caught:
        parse_gpu_names({"compute_capability": {"V100": value}}, "t.yaml")
    assert caught.value.field == "compute_capability.V100"
    assert caught.value.problem.startswith(f'{value} must be quoted ("{value}")')


@pytest.mark.parametrize(
    "data, field, problem",
    [
        (None, None, "expected a mapping"),
        ({"compute_capabilities": {}}, None, "expected a mapping"),
        ({"compute_capability": {}, "extra": 1}, "extra", "unknown key"),
        ({"compute_capability": ["V100"]}, "compute_capability", "expected a mapping"),
        ({"compute_capability": {"V100": "seven"}}, "compute_capability.V100", "not a compute capability"),
        ({"compute_capability": {"V100": True}}, "compute_capability.V100", "expected a compute capability"),
        ({"compute_capability": {"V100": None}}, "compute_capability.V100", "expected a compute capability"),
        ({"compute_capability": {4090: "8.9"}}, "compute_capability.4090", "not a GPU model name"),
        ({"compute_capability": {" - ": "8.9"}}, "compute_capability. - ", "not a GPU model name"),
        ({"compute_capability": {"V100": "7.0", "v100": "7.0"}}, "compute_capability.v100", "same name as 'V100'"),
    ],
)
def test_parse_rejects_bad_tables_naming_file_and_field(data, field, problem):
    with pytest.raises(ManifestError) as caught:
        parse_gpu_names(data, "envs/gpus.yaml")
    assert caught.value.path == "envs/gpus.yaml"
    assert caught.value.field == field
    assert problem in caught.value.problem


# Issue 30: models seen in real reports that the table missed, and more from NVIDIA's CUDA GPUs list (the copy read
# is named in gpus.yaml's header): notebook GeForce ("M" models are other chips than the desktop ones), mobile Quadro,
# Kepler. RTX A4500 and GT 710 come from the reports (the copy of the list read predates or lacks them).
@pytest.mark.parametrize("name, expected", [
    ("NVIDIA GeForce GTX 960M", "5.0"),  # not the desktop GTX 960's 5.2
    ("NVIDIA GeForce GTX 960", "5.2"),
    ("NVIDIA GeForce GT 710", "3.5"),
    ("Quadro P1000", "6.1"),
    ("Quadro T2000", "7.5"),
    ("Quadro T2000 with Max-Q Design", "7.5"),
    ("NVIDIA RTX A4500", "8.6"),
    ("NVIDIA GeForce GTX 980M", "5.2"),
    ("NVIDIA GeForce 940M", "5.0"),
    ("Quadro M1200", "5.0"),
    ("Quadro K2200", "5.0"),
    ("NVIDIA GeForce GTX 780 Ti", "3.5"),
    ("GeForce GTX 680", "3.0"),
    ("Tesla K10.G1.8GB", "3.0"),
    ("Quadro RTX 6000", "7.5"),  # not the RTX 6000 Ada's 8.9
    ("NVIDIA RTX 6000 Ada Generation", "8.9"),
    ("NVIDIA GeForce RTX 5090", "12.0"),  # the compilation read says 10.0; NVIDIA's list says 12.0
])
def test_models_added_from_nvidias_list_and_the_reports(gpu_names, name, expected):
    assert gpu_names.lookup(name) == ComputeCapability.parse(expected)


def test_an_unknown_model_is_never_guessed_and_every_gpu_build_says_why(tables):
    """What an unknown name gets: no compute capability (the 940MX is not on the list read), and every GPU build is
    refused with the way out; a CPU build is picked, with the warning that the GPU goes unused."""
    from envkit.catalog.load import load_catalog
    from envkit.detect.sources import gpu_from_name
    from envkit.machines.profile import MachineProfile
    from envkit.pick.cpu_fallback import gpu_unused
    from envkit.pick.resolve import resolve
    from envkit.versions import CudaVersion, DriverVersion

    gpu = gpu_from_name(0, "NVIDIA GeForce 940MX", tables.gpu_names, "/proc/driver/nvidia/gpus")
    assert gpu.compute_capability is None
    profile = MachineProfile(gpus=(gpu,), cuda_driver=CudaVersion(12, 4), driver_version=DriverVersion.parse("550.54.14"))
    catalog = load_catalog(REPO / "envs", ["torch"])
    resolution = resolve(catalog.manifests["torch"], profile, catalog.tables)
    assert not resolution.selected.build.is_gpu
    refused = next(c for c in resolution.candidates if c.build.id == "torch-2.14-cu126")
    assert refused.reasons[-1].endswith("compute capability unknown; pass --gpu-arch X.Y")
    assert "compute capability unknown" in gpu_unused(resolution, profile)
