"""The /proc/driver/nvidia fallback: pure parsers on recorded text, and the probe on a directory laid out as /proc."""

from __future__ import annotations

import pytest
from detect_fakes import data, nvml_missing

from envkit.detect import detect_machine
from envkit.detect.proc import parse_driver_version, parse_gpu_model, probe_proc
from envkit.detect.sources import DERIVED_CUDA
from envkit.machines.profile import CUDA_DRIVER, DRIVER_VERSION, GPUS
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion


def detect(tables, proc_root, smi_command):
    return detect_machine(
        tables.cuda, tables.gpu_names, nvml=nvml_missing(), proc_root=proc_root, smi_command=smi_command
    )


@pytest.mark.parametrize(
    "name, version, cuda",
    [
        ("version-r470-proprietary-x86_64.txt", "470.182.03", "11.4"),
        ("version-r535-proprietary-x86_64.txt", "535.129.03", "12.2"),
        ("version-r535-proprietary-aarch64.txt", "535.104.05", "12.2"),
        ("version-r550-open-x86_64.txt", "550.54.14", "12.4"),
        ("version-r580-open-aarch64.txt", "580.65.06", "13.0"),
        ("version-r580-proprietary-x86_64.txt", "580.95.05", "13.0"),
    ],
)
def test_driver_version_of_every_branch_and_module_flavour(cuda_table, name, version, cuda):
    driver = parse_driver_version(data(f"proc/{name}"))
    assert driver == DriverVersion.parse(version)
    assert str(driver) == version
    assert cuda_table.cuda_for_driver(driver) == CudaVersion.parse(cuda)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  Thu Oct 19 18:56:32 UTC 2023\n",
    ],
)
def test_no_driver_version_in_other_text(text):
    assert parse_driver_version(text) is None


@pytest.mark.parametrize(
    "name, model",
    [
        ("information-r470-k80.txt", "Tesla K80"),
        ("information-r535-v100.txt", "Tesla V100-SXM2-16GB"),
        ("information-r535-a100.txt", "NVIDIA A100-SXM4-40GB"),
        ("information-r580-gh200.txt", "NVIDIA GH200 480GB"),
        ("information-r580-unnamed.txt", "NVIDIA Graphics Device"),
    ],
)
def test_gpu_model_from_information_files(name, model):
    assert parse_gpu_model(data(f"proc/{name}")) == model


def test_no_gpu_model_in_other_text():
    assert parse_gpu_model("IRQ:   \t\t 47\nBus Location: \t 0000:00:1b.0\n") is None
    assert parse_gpu_model("Model: \t\t \n") is None


def test_proc_fallback_gives_driver_derived_cuda_and_named_gpus(tables, make_proc, make_smi):
    proc = make_proc(
        "version-r580-open-aarch64.txt",
        {"0009:01:00.0": "information-r580-gh200.txt", "0019:01:00.0": "information-r580-gh200.txt"},
    )
    smi = make_smi(query="query-r535.txt", header="header-r535.txt")
    profile = detect(tables, proc, smi.command)
    assert profile.driver_version == DriverVersion.parse("580.65.06")
    assert profile.cuda_driver == CudaVersion(13, 0)
    assert profile.sources == {
        DRIVER_VERSION: "/proc/driver/nvidia/version",
        CUDA_DRIVER: DERIVED_CUDA,
        GPUS: "/proc/driver/nvidia/gpus",
    }
    assert [(g.index, g.name, g.compute_capability, g.memory_mib) for g in profile.gpus] == [
        (0, "NVIDIA GH200 480GB", (9, 0), None),
        (1, "NVIDIA GH200 480GB", (9, 0), None),
    ]
    assert {g.source for g in profile.gpus} == {"/proc/driver/nvidia/gpus + envs/gpus.yaml"}
    assert smi.calls() == []  # /proc answered everything: nvidia-smi was not started
    assert profile.notes == ("NVML: library libnvidia-ml.so.1 not found",)


def test_gpus_are_numbered_in_pci_bus_order(gpu_names, make_proc):
    proc = make_proc(
        "version-r535-proprietary-x86_64.txt",
        {"0000:3b:00.0": "information-r535-a100.txt", "0000:1a:00.0": "information-r535-v100.txt"},
    )
    profile = probe_proc(proc, gpu_names)
    assert [(g.index, g.name) for g in profile.gpus] == [(0, "Tesla V100-SXM2-16GB"), (1, "NVIDIA A100-SXM4-40GB")]


def test_unknown_model_sends_detection_on_to_nvidia_smi(tables, make_proc, make_smi):
    proc = make_proc("version-r580-proprietary-x86_64.txt", {"0000:41:00.0": "information-r580-unnamed.txt"})
    smi = make_smi(query="query-r580.txt", header="header-r580.txt")
    profile = detect(tables, proc, smi.command)
    # The driver version is /proc's; the GPUs (with their compute capability) and the CUDA are nvidia-smi's.
    assert profile.driver_version == DriverVersion.parse("580.95.05")
    assert profile.sources == {
        DRIVER_VERSION: "/proc/driver/nvidia/version",
        CUDA_DRIVER: "nvidia-smi",
        GPUS: "nvidia-smi",
    }
    assert profile.cuda_driver == CudaVersion(13, 0)
    assert [(g.name, g.compute_capability) for g in profile.gpus] == [("NVIDIA GB10", ComputeCapability(12, 1))]
    assert len(smi.calls()) == 2  # the query, then the header for the CUDA version


def test_unknown_model_without_other_probes_is_kept_and_noted(tables, make_proc, no_smi):
    proc = make_proc("version-r580-proprietary-x86_64.txt", {"0000:41:00.0": "information-r580-unnamed.txt"})
    profile = detect(tables, proc, no_smi)
    assert [(g.name, g.compute_capability, g.source) for g in profile.gpus] == [
        ("NVIDIA Graphics Device", None, "/proc/driver/nvidia/gpus")
    ]
    assert profile.notes[-1].startswith("GPU 0, NVIDIA Graphics Device (unknown architecture): compute capability")


def test_unreadable_information_file_still_counts_the_gpu(gpu_names, make_proc):
    proc = make_proc(
        "version-r535-proprietary-x86_64.txt", {"0000:1a:00.0": "information-r535-v100.txt", "0000:3b:00.0": None}
    )
    profile = probe_proc(proc, gpu_names)
    assert [g.name for g in profile.gpus] == ["Tesla V100-SXM2-16GB", "unknown GPU at PCI 0000:3b:00.0"]


def test_version_without_gpus_directory(gpu_names, make_proc):
    profile = probe_proc(make_proc("version-r470-proprietary-x86_64.txt"), gpu_names)
    assert profile.driver_version == DriverVersion.parse("470.182.03")
    assert GPUS not in profile.sources
    assert profile.notes[0].startswith("/proc/driver/nvidia/gpus: cannot be read")


def test_driver_loaded_without_gpus(gpu_names, make_proc):
    profile = probe_proc(make_proc("version-r535-proprietary-x86_64.txt", {}), gpu_names)
    assert profile.gpus == () and profile.sources[GPUS] == "/proc/driver/nvidia/gpus"


def test_unrecognised_version_file(gpu_names, tmp_path):
    nvidia = tmp_path / "driver" / "nvidia"
    (nvidia / "gpus").mkdir(parents=True)
    (nvidia / "version").write_text("something else entirely\n")
    profile = probe_proc(tmp_path, gpu_names)
    assert DRIVER_VERSION not in profile.sources
    assert profile.notes == ("/proc/driver/nvidia/version: no driver version in it",)


def test_a_jetson_is_said_to_be_one_whose_gpu_comes_from_the_device_tree(tables, tmp_path, no_smi):
    # Jetson (Tegra): no NVML, no /proc/driver/nvidia, no nvidia-smi; the device tree says what it is. Detection
    # said "no NVIDIA kernel module loaded", as on a machine without a GPU. The probes find no GPU; the board's comes
    # from the device tree (envkit.detect.jetson, tests/detect/test_detect_arm.py).
    (tmp_path / "device-tree").mkdir()
    (tmp_path / "device-tree" / "compatible").write_bytes(b"nvidia,p3737-0000+p3701-0000\0nvidia,tegra234\0")
    profile = detect(tables, tmp_path, no_smi)
    assert profile.gpus == () and profile.cuda_driver is None
    [said] = [note for note in profile.notes if note.startswith("/proc/driver/nvidia/version")]
    assert "Jetson" in said and "its GPU comes from the device tree" in said
