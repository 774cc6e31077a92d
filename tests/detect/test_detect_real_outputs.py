"""What envkit reads from real outputs of nvidia-smi and /proc/driver/nvidia, one driver branch after another (R375
to R610), each file published with its source (data/real/README.md): the facts are read off each file by hand."""

from __future__ import annotations

import pytest
from detect_fakes import data, nvml_missing

from envkit.detect import detect_machine
from envkit.detect.proc import l4t_release, parse_driver_version, probe_proc
from envkit.detect.smi import parse_header, parse_query
from envkit.machines.profile import CUDA_DRIVER, DRIVER_VERSION
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion


def real(name: str) -> str:
    return data(f"real/{name}")


# file -> (driver version, CUDA version) as its banner (or -q's head) says them; None: it says none
HEADERS = {
    "smi/r390-67-k80-mlagents.txt": ("390.67", None),  # no CUDA line before R410
    "smi/r525-125-geforce-errfan-gpud.txt": ("525.125.06", "12.0"),  # ERR! in the fan column
    "smi/r550-54-2xh100nvl-thamada.txt": ("550.54.14", "12.4"),
    "smi/r555-42-4xa100-thamada.txt": ("555.42.02", "12.5"),
    "smi/r560-35-2xrtx3090-thamada.txt": ("560.35.03", "12.6"),
    "smi/r565-57-8xh100-thamada.txt": ("565.57.01", "12.7"),  # a CUDA with no toolkit: read as said
    "smi/exporter-h100-mig-r590.48.01.txt": ("590.48.01", "13.1"),  # MIG devices below
    "smi/exporter-l40s-r595.80.txt": ("595.80", "13.2"),  # a two-part driver version
    "smi/exporter-geforce-rtx-2080-super-r610.57.04.txt": ("610.57.04", "13.3"),  # KMD / CUDA UMD Version
    "smi/sglang-27487-r610-2xb200.txt": ("610.43.02", "13.3"),
    "smi/wsl2-cuda-err-wsl-11589.txt": ("546.80", None),  # WSL2: CUDA Version: ERR!; the Windows driver
    "smi/wsl2-r555-wsl-11277.txt": ("555.99", "12.5"),  # WSL2: not NVIDIA-SMI's 555.52.01
    "smi/q-wsl2-r510-container-toolkit-271.txt": ("510.06", "11.6"),  # nvidia-smi -a
    "query/q-exporter-geforce-rtx-2080-super-r610.57.04.txt": ("610.57.04", "13.3"),  # both, old ones deprecated
    "query/q-r535-154-8xrtx4090-gpud.txt": ("535.154.05", "12.2"),
    "query/q-exporter-h100-mig-r590.48.01.txt": ("590.48.01", "13.1"),
    "smi/err-no-driver-mlagents.txt": (None, None),
    "smi/no-driver-wsl-9134.txt": (None, None),
    "smi/lost-owod-81.txt": (None, None),
    "smi/lost-open-gpu-kernel-modules-387.txt": (None, None),
}


@pytest.mark.parametrize("name", list(HEADERS))
def test_the_banner_of_every_branch(name):
    driver, cuda = HEADERS[name]
    header = parse_header(real(name))
    assert header.driver_version == (DriverVersion.parse(driver) if driver else None)
    assert str(header.driver_version) == str(driver)  # as written ("595.80" stays two parts)
    assert header.cuda_driver == (CudaVersion.parse(cuda) if cuda else None)


def fields_of(csv_header: str) -> tuple[str, ...]:
    """The query fields of a --format=csv header ("memory.total [MiB]" is the field memory.total)."""
    return tuple(part.strip().split(" [")[0] for part in csv_header.split(","))


# file -> [(index, name, compute capability, memory MiB)], driver version
QUERIES = {
    "query/exporter-h100-mig-r590.48.01.csv": ([(0, "NVIDIA H100 80GB HBM3", "9.0", 81559)], "590.48.01"),
    "query/exporter-l40s-r595.80.csv": ([(0, "NVIDIA L40S", "8.9", 46068)], "595.80"),
    "query/exporter-geforce-rtx-2080-super-r610.57.04.csv": (
        [(0, "NVIDIA GeForce RTX 2080 SUPER", "7.5", 8192)], "610.57.04"),
}


@pytest.mark.parametrize("name", list(QUERIES))
def test_a_wide_query_with_na_fields_units_and_mig(name):
    """Some 200 fields, most "[N/A]" or with units: only the ones envkit asks for are read, and read right."""
    rows, driver = QUERIES[name]
    header, *lines = real(name).splitlines()
    query = parse_query("\n".join(lines), fields_of(header))
    assert [(g.index, g.name, str(g.compute_capability), g.memory_mib) for g in query.gpus] == rows
    assert query.driver_version == DriverVersion.parse(driver)


@pytest.mark.parametrize("name", ["smi/lost-owod-81.txt", "smi/lost-open-gpu-kernel-modules-387.txt"])
def test_a_gpu_fallen_off_the_bus_is_said_not_taken_for_no_output(name):
    with pytest.raises(ValueError) as caught:
        parse_query(real(name))
    assert str(caught.value).startswith("a GPU is lost: Unable to determine the device handle for GPU 0000:")
    # beside a GPU that answers, it is kept to be said, and not counted
    query = parse_query(real("smi/query-r610-2080super-from-exporter.txt") + real(name))
    assert [g.name for g in query.gpus] == ["NVIDIA GeForce RTX 2080 SUPER"]
    assert query.lost == (real(name).strip(),)


def test_an_r610_machine_through_nvidia_smi_alone(tables, make_smi, no_proc):
    """The KMD / CUDA UMD banner reaches the profile: CUDA 13.3, from nvidia-smi."""
    smi = make_smi(query="../real/smi/query-r610-2080super-from-exporter.txt",
                   header="../real/smi/exporter-geforce-rtx-2080-super-r610.57.04.txt")
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=nvml_missing(), proc_root=no_proc,
                             smi_command=smi.command)
    assert profile.cuda_driver == CudaVersion(13, 3) and profile.sources[CUDA_DRIVER] == "nvidia-smi"
    assert profile.driver_version == DriverVersion.parse("610.57.04")
    assert [(g.name, g.compute_capability) for g in profile.gpus] == [
        ("NVIDIA GeForce RTX 2080 SUPER", ComputeCapability(7, 5))]
    assert not any("no CUDA Version" in note for note in profile.notes)


def test_a_lost_gpu_beside_a_working_one_is_a_note(tables, make_smi, no_proc, tmp_path):
    lost = tmp_path / "query.txt"
    lost.write_text(real("smi/query-r610-2080super-from-exporter.txt") + real("smi/lost-owod-81.txt"))
    smi = make_smi(query=str(lost), header="../real/smi/exporter-geforce-rtx-2080-super-r610.57.04.txt")
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=nvml_missing(), proc_root=no_proc,
                             smi_command=smi.command)
    assert len(profile.gpus) == 1
    assert any("GPU is lost" in note and "fallen off the bus" in note for note in profile.notes)


# /proc/driver/nvidia/version -> (driver version, the CUDA cuda.yaml derives for it)
PROC = {
    "proc/version-375.74-uv.txt": ("375.74", None),  # older than every CUDA row (9.2 needs 396.26)
    "proc/version-525.60.11-open-nixgl-121.txt": ("525.60.11", "11.8"),  # below 12.0's 525.60.13
    "proc/version-550.144.03-open-uv.txt": ("550.144.03", "12.4"),
    "proc/version-565.57.01-open-nixgl-186.txt": ("565.57.01", "12.6"),
}


@pytest.mark.parametrize("name", list(PROC))
def test_the_proc_version_of_each_module_flavour(cuda_table, name):
    driver, cuda = PROC[name]
    version = parse_driver_version(real(name))
    assert version == DriverVersion.parse(driver) and l4t_release(real(name)) is None
    assert cuda_table.cuda_for_driver(version) == (CudaVersion.parse(cuda) if cuda else None)


def test_a_jetson_names_its_l4t_release_which_is_not_a_driver_version(gpu_names, tmp_path):
    """nixGL#139: a Jetson Orin NX's version file says 35.3.1, the L4T release; read as a driver, it would be an
    ancient one. It is no driver version; the machine is judged by its JetPack (envkit.detect.jetson)."""
    text = real("proc/version-jetson-l4t-35.3.1-nixgl-139.txt")
    assert parse_driver_version(text) is None and l4t_release(text) == "35.3.1"
    nvidia = tmp_path / "driver" / "nvidia"
    nvidia.mkdir(parents=True)
    (nvidia / "version").write_text(text)
    profile = probe_proc(tmp_path, gpu_names)
    assert profile.gpus == () and DRIVER_VERSION not in profile.sources
    [note] = profile.notes
    assert "L4T release 35.3.1" in note and "judged by its JetPack" in note and "never as a discrete GPU" in note
