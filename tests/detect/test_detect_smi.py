"""The nvidia-smi fallback: pure parsers on recorded output, and fake nvidia-smi executables."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from detect_fakes import data, nvml_missing

from envkit.detect import detect_machine
from envkit.detect.smi import LEGACY_QUERY_FIELDS, parse_header, parse_query, probe_smi
from envkit.machines.profile import CUDA_DRIVER, DRIVER_VERSION, GPUS
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion

QUERY_ARGS = "--query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv,noheader,nounits"
LEGACY_ARGS = "--query-gpu=index,name,memory.total,driver_version --format=csv,noheader,nounits"


def detect(tables, smi, no_proc, **options):
    return detect_machine(
        tables.cuda, tables.gpu_names, nvml=nvml_missing(), proc_root=no_proc, smi_command=smi.command, **options
    )


# --- parsers --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "name, rows, driver",
    [
        (
            "query-r535.txt",
            [(0, "Tesla V100-SXM2-16GB", (7, 0), 16384), (1, "NVIDIA A100-SXM4-40GB", (8, 0), 40960)],
            "535.129.03",
        ),
        (
            "query-r550.txt",
            [(0, "NVIDIA L4", (8, 9), 23034), (1, "NVIDIA GeForce RTX 2070", (7, 5), 8192)],
            "550.54.14",
        ),
        ("query-r580.txt", [(0, "NVIDIA GB10", (12, 1), None)], "580.65.06"),
    ],
)
def test_query_output_of_each_branch(name, rows, driver):
    query = parse_query(data(f"smi/{name}"))
    assert [(g.index, g.name, g.compute_capability, g.memory_mib) for g in query.gpus] == rows
    assert query.driver_version == DriverVersion.parse(driver)


def test_query_output_without_compute_cap():
    query = parse_query(data("smi/query-r470-legacy.txt"), LEGACY_QUERY_FIELDS)
    assert [(g.name, g.compute_capability, g.memory_mib) for g in query.gpus] == [("Tesla K80", None, 11441)]
    assert query.driver_version == DriverVersion.parse("470.182.03")


def test_query_tolerates_na_units_and_commas_in_names():
    query = parse_query("0, NVIDIA Foo, Bar, [N/A], 16384 MiB, [N/A]\n1, Tesla T4, 7.5, [Not Supported], 535.129.03\n")
    assert [(g.name, g.compute_capability, g.memory_mib) for g in query.gpus] == [
        ("NVIDIA Foo, Bar", None, 16384),
        ("Tesla T4", ComputeCapability(7, 5), None),
    ]
    assert query.driver_version == DriverVersion.parse("535.129.03")


def test_query_after_a_warning_nvidia_smi_prints_first():
    # A GPU whose infoROM is damaged still runs CUDA; nvidia-smi says so before the values (gpustat, Ray and others
    # met it). The warning is not a GPU: the GPUs after it count.
    text = ("WARNING: infoROM is corrupted at gpu 0000:3B:00.0\n"
            "0, Tesla V100-PCIE-32GB, 7.0, 32768, 535.129.03\n1, Tesla V100-PCIE-32GB, 7.0, 32768, 535.129.03\n")
    query = parse_query(text)
    assert [(g.index, g.name, g.compute_capability) for g in query.gpus] == [
        (0, "Tesla V100-PCIE-32GB", ComputeCapability(7, 0)), (1, "Tesla V100-PCIE-32GB", ComputeCapability(7, 0))]
    assert query.driver_version == DriverVersion.parse("535.129.03")


def test_query_without_devices():
    assert parse_query(data("smi/no-devices.txt")).gpus == ()


@pytest.mark.parametrize(
    "text",
    [
        data("smi/garbage.txt"),
        data("smi/no-driver.txt"),
        data("smi/query-r470-compute-cap-rejected.txt"),
        "",
        "x, Tesla T4, 7.5, 15360, 535.129.03\n",
        "0, [N/A], 7.5, 15360, 535.129.03\n",
        "0, Tesla T4\n",
    ],
)
def test_query_rejects_anything_else(text):
    with pytest.raises(ValueError):
        parse_query(text)


@pytest.mark.parametrize(
    "name, driver, cuda",
    [
        ("header-r470.txt", "470.182.03", CudaVersion(11, 4)),
        ("header-r535.txt", "535.129.03", CudaVersion(12, 2)),
        ("header-r550.txt", "550.54.14", CudaVersion(12, 4)),
        ("header-r580.txt", "580.65.06", CudaVersion(13, 0)),
        ("header-cuda-na.txt", "535.129.03", None),
    ],
)
def test_header_of_each_branch(name, driver, cuda):
    header = parse_header(data(f"smi/{name}"))
    assert header.driver_version == DriverVersion.parse(driver)
    assert header.cuda_driver == cuda


def test_header_of_other_text():
    header = parse_header(data("smi/no-driver.txt"))
    assert header.driver_version is None and header.cuda_driver is None


# --- the probe, with fake nvidia-smi executables --------------------------------------------------------------------

def test_smi_gives_everything_when_nvml_and_proc_cannot(tables, make_smi, no_proc):
    smi = make_smi(query="query-r535.txt", header="header-r535.txt")
    profile = detect(tables, smi, no_proc)
    assert [(g.name, g.compute_capability, g.memory_mib, g.source) for g in profile.gpus] == [
        ("Tesla V100-SXM2-16GB", (7, 0), 16384, "nvidia-smi"),
        ("NVIDIA A100-SXM4-40GB", (8, 0), 40960, "nvidia-smi"),
    ]
    assert profile.driver_version == DriverVersion.parse("535.129.03")
    assert profile.cuda_driver == CudaVersion(12, 2)
    assert profile.sources == {DRIVER_VERSION: "nvidia-smi", CUDA_DRIVER: "nvidia-smi", GPUS: "nvidia-smi"}
    assert smi.calls() == [QUERY_ARGS, ""]
    assert profile.notes == (
        "NVML: library libnvidia-ml.so.1 not found",
        "/proc/driver/nvidia/version: not present (no NVIDIA kernel module loaded)",
    )


def test_smi_that_rejects_compute_cap_is_asked_again_and_the_table_fills_in(tables, make_smi, no_proc):
    smi = make_smi(
        query="query-r470-compute-cap-rejected.txt",
        query_status=2,
        legacy="query-r470-legacy.txt",
        header="header-r470.txt",
    )
    profile = detect(tables, smi, no_proc)
    assert smi.calls() == [QUERY_ARGS, LEGACY_ARGS, ""]
    assert [(g.name, g.compute_capability, g.memory_mib, g.source) for g in profile.gpus] == [
        ("Tesla K80", (3, 7), 11441, "nvidia-smi + envs/gpus.yaml")
    ]
    assert profile.cuda_driver == CudaVersion(11, 4)
    assert any("compute_cap" in note for note in profile.notes)


def test_smi_that_complains_about_compute_cap_but_exits_zero(tables, make_smi, no_proc):
    smi = make_smi(
        query="query-r470-compute-cap-rejected.txt", legacy="query-r470-legacy.txt", header="header-r470.txt"
    )
    profile = detect(tables, smi, no_proc)
    assert [g.name for g in profile.gpus] == ["Tesla K80"]


def test_smi_printing_garbage(tables, make_smi, no_proc):
    smi = make_smi(query="garbage.txt", header="garbage.txt")
    profile = detect(tables, smi, no_proc)
    assert profile.gpus == () and GPUS not in profile.sources and profile.cuda_driver is None
    assert profile.notes[-1].startswith("nvidia-smi: output not understood")


def test_smi_exiting_non_zero(tables, make_smi, no_proc):
    smi = make_smi(query="no-driver.txt", query_status=9, header="no-driver.txt", header_status=9)
    profile = detect(tables, smi, no_proc)
    assert profile.gpus == () and profile.sources == {}
    assert profile.notes[-1] == (
        "nvidia-smi: exited with status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
        "driver. Make sure that the latest NVIDIA driver is installed and running."
    )
    assert smi.calls() == [QUERY_ARGS]  # no point in asking for the header as well


def test_smi_with_driver_but_no_devices(tables, make_smi, no_proc):
    smi = make_smi(query="no-devices.txt", query_status=6, header="no-devices.txt", header_status=6)
    profile = detect(tables, smi, no_proc)
    assert profile.gpus == () and profile.sources[GPUS] == "nvidia-smi"


def test_smi_header_without_cuda_falls_back_on_the_driver_version(tables, make_smi, no_proc):
    smi = make_smi(query="query-r535.txt", header="header-cuda-na.txt")
    profile = detect(tables, smi, no_proc)
    assert profile.cuda_driver == CudaVersion(12, 2)
    assert profile.sources[CUDA_DRIVER] == "driver version + envs/cuda.yaml"
    assert "nvidia-smi: no CUDA Version in its header" in profile.notes


def test_smi_is_not_asked_for_a_cuda_version_nvml_reported(gpu_names, make_smi):
    smi = make_smi(query="query-r535.txt", header="header-r535.txt")
    profile = probe_smi(gpu_names, command=smi.command, want_cuda=False)
    assert smi.calls() == [QUERY_ARGS]
    assert CUDA_DRIVER not in profile.sources


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie is dead; only its parent (maybe init) has yet to reap it


def test_hanging_smi_is_killed_with_its_children(tables, make_smi, no_proc):
    smi = make_smi(hang=True)
    started = time.monotonic()
    profile = detect(tables, smi, no_proc, timeout=0.5)
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 3.0
    assert profile.notes[-1] == "nvidia-smi: timed out after 0.5 s"
    pids = [int(pid) for pid in smi.pids.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 2.0
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_alive(pid) for pid in pids)


def test_smi_runs_in_a_clean_environment(gpu_names, make_smi, monkeypatch):
    monkeypatch.setenv("ENVKIT_TEST_SECRET", "do-not-pass")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    smi = make_smi(query="query-r535.txt", header="header-r535.txt")
    probe_smi(gpu_names, command=smi.command)
    env = dict(line.split("=", 1) for line in smi.env.read_text().splitlines() if "=" in line)
    assert "ENVKIT_TEST_SECRET" not in env
    assert env["LC_ALL"] == "C" and env["LANG"] == "C"
    assert env["PATH"] == os.environ["PATH"]


def test_smi_not_on_path(gpu_names, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probe_smi(gpu_names).notes == ("nvidia-smi: not found on PATH",)


def test_smi_that_cannot_be_executed(gpu_names, tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text("not a program\n")
    script.chmod(0o755)
    profile = probe_smi(gpu_names, command=str(script))
    assert profile.notes[0].startswith("nvidia-smi: cannot run")
