"""Texts captured on a real machine (one H100 80GB HBM3, driver 580.159.04, open kernel module; issue 15): what
`envkit detect --json` printed there, and what /proc/driver/nvidia and nvidia-smi said. Each fallback, fed the
captured texts, must give the facts NVML gave there; the saved profile must read back as that machine."""

from __future__ import annotations

import json

import pytest
from detect_fakes import DATA, REPO, FakeGpu, FakeNvml, data, nvml_missing

from envkit.detect import detect_machine
from envkit.detect.proc import parse_driver_version, parse_gpu_model
from envkit.detect.smi import LEGACY_QUERY_FIELDS, parse_header, parse_query
from envkit.detect.sources import NVML, PROC_GPUS, PROC_VERSION, SMI
from envkit.machines.profile import CUDA_DRIVER, DRIVER_VERSION, GPUS, Gpu, MachineProfile, read_profile
from envkit.pick.render import profile_text
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion

CAPTURED = DATA / "captured" / "detect-h100-r580.json"
H100 = "NVIDIA H100 80GB HBM3"
DRIVER = DriverVersion.parse("580.159.04")
CUDA = CudaVersion.parse("13.0")
HOPPER = ComputeCapability(9, 0)
BUS_ID = "0000:00:06.0"


def facts(profile: MachineProfile):
    """What detection found, without where each fact came from."""
    return (profile.driver_version, profile.cuda_driver,
            [(g.index, g.name, g.compute_capability) for g in profile.gpus])


EXPECTED = (DRIVER, CUDA, [(0, H100, HOPPER)])


def test_the_saved_profile_reads_back_as_that_machine(tmp_path):
    # As --machine reads it on a login node: every fact is then from the file.
    profile = read_profile(CAPTURED, tmp_path / "cache")
    assert facts(profile) == EXPECTED
    assert [g.memory_mib for g in profile.gpus] == [81559]
    assert set(profile.sources) == {DRIVER_VERSION, CUDA_DRIVER, GPUS}
    assert {source for source in profile.sources.values()} == {f"file {CAPTURED}"}
    assert profile.notes == ()


def test_the_probe_tests_profile_of_that_machine_states_the_same_facts():
    # tests/probe/test_probe_diagnose.py judges the captured probe outputs against this hand-written profile.
    assert facts(read_profile(REPO / "tests" / "profiles" / "h100-cuda130.yaml")) == EXPECTED


def test_the_captured_nvidia_smi_texts_parse_to_that_machine():
    query = parse_query(data("smi/query-r580-h100-captured.txt"))
    assert query.driver_version == DRIVER
    assert query.gpus == (Gpu(index=0, name=H100, compute_capability=HOPPER, memory_mib=81559, source=SMI),)
    legacy = parse_query(data("smi/query-r580-h100-legacy-captured.txt"), LEGACY_QUERY_FIELDS)
    assert [(g.name, g.compute_capability, g.memory_mib) for g in legacy.gpus] == [(H100, None, 81559)]
    header = parse_header(data("smi/header-r580-h100-captured.txt"))
    assert (header.driver_version, header.cuda_driver) == (DRIVER, CUDA)
    # `nvidia-smi -q` names both facts in the same "Name : value" form as the banner: the header parser reads it too.
    full = parse_header(data("smi/q-r580-h100-captured.txt"))
    assert (full.driver_version, full.cuda_driver) == (DRIVER, CUDA)


def test_the_captured_proc_texts_parse_to_that_machine():
    # R580's open module as built there ends its NVRM line with "(nixbld@)" and no build date.
    assert parse_driver_version(data("proc/version-r580-open-x86_64-h100-captured.txt")) == DRIVER
    assert parse_gpu_model(data("proc/information-r580-h100-captured.txt")) == H100


def test_without_nvml_the_proc_fallback_gives_the_same_machine(tables, make_proc, no_smi):
    proc = make_proc("version-r580-open-x86_64-h100-captured.txt", {BUS_ID: "information-r580-h100-captured.txt"})
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=nvml_missing(), proc_root=proc, smi_command=no_smi)
    assert facts(profile) == EXPECTED  # the CUDA version from the driver's, the capability from envs/gpus.yaml
    assert profile.sources[DRIVER_VERSION] == PROC_VERSION and profile.sources[GPUS] == PROC_GPUS


def test_without_nvml_and_proc_the_smi_fallback_gives_the_same_machine(tables, make_smi, no_proc):
    smi = make_smi(query="query-r580-h100-captured.txt", header="header-r580-h100-captured.txt")
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=nvml_missing(), proc_root=no_proc,
                             smi_command=smi.command)
    assert facts(profile) == EXPECTED
    assert profile.sources == {DRIVER_VERSION: SMI, CUDA_DRIVER: SMI, GPUS: SMI}
    assert profile.gpus[0].memory_mib == 81559


@pytest.mark.parametrize("driver", ["580.159.04", b"580.159.04"])
def test_nvml_answering_as_it_did_there_gives_the_saved_profile(tables, no_proc, no_smi, driver):
    nvml = FakeNvml(gpus=(FakeGpu(H100, (9, 0), 81559),), driver=driver, cuda=13000)
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=nvml, proc_root=no_proc, smi_command=no_smi)
    # What `envkit detect --json` and `envkit detect` printed there, to the character.
    assert profile.to_dict() == json.loads(CAPTURED.read_text(encoding="utf-8"))
    assert profile_text(profile) + "\n" == data("captured/detect-h100-r580.txt")
