"""Machine profiles: the file contract, its errors, the --cuda/--gpu-arch overrides, and the detect round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.errors import ProfileError
from envkit.machine import Gpu, MachineProfile, apply_overrides, parse_overrides, profile_from_dict, read_profile
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion

PROFILES = Path(__file__).parent / "profiles"


def test_the_documented_contract_reads(tmp_path):
    path = tmp_path / "deepnine.yaml"
    path.write_text(
        "name: deepnine\ndriver_version: \"550.54.14\"\ncuda_driver: \"12.4\"\ngpus:\n"
        "  - name: NVIDIA GeForce RTX 2070\n    compute_capability: \"7.5\"\n    memory_mib: 8192\n"
        "extra_key: allowed\n"
    )
    profile = read_profile(path)
    assert profile.name == "deepnine"
    assert profile.driver_version == DriverVersion.parse("550.54.14")
    assert profile.cuda_driver == CudaVersion(12, 4)
    assert profile.gpus == (Gpu(0, "NVIDIA GeForce RTX 2070", ComputeCapability(7, 5), 8192, f"file {path}"),)
    assert profile.sources == {"driver_version": f"file {path}", "cuda_driver": f"file {path}", "gpus": f"file {path}"}


def test_unknown_compute_capability_from_detect_reads_back_as_unknown():
    data = {"cuda_driver": "12.4", "gpus": [{"name": "NVIDIA Future GPU", "compute_capability": None}]}
    [gpu] = profile_from_dict(data, "x").gpus
    assert gpu.compute_capability is None and gpu.name == "NVIDIA Future GPU"


def test_gpus_with_an_unknown_driver_cuda_read_back():
    # What detect prints for a driver older than every CUDA in cuda.yaml (say R390) with a K80.
    data = {"driver_version": "390.157", "cuda_driver": None,
            "gpus": [{"name": "Tesla K80", "compute_capability": "3.7"}]}
    profile = profile_from_dict(data, "x")
    assert profile.cuda_driver is None and len(profile.gpus) == 1


def test_no_driver_profile():
    profile = profile_from_dict({"cuda_driver": None, "gpus": []}, "x")
    assert profile.gpus == () and profile.cuda_driver is None and not profile.has_driver


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.yaml")), ids=lambda p: p.stem)
def test_detect_json_round_trips(path):
    profile = read_profile(path)
    again = profile_from_dict(json.loads(json.dumps(profile.to_dict())), "again")

    def facts(p: MachineProfile):
        gpus = [(g.index, g.name, g.compute_capability, g.memory_mib) for g in p.gpus]
        return gpus, p.cuda_driver, p.driver_version, p.name

    assert facts(again) == facts(profile)


MALFORMED = [
    ("[1, 2]", "expected a mapping"),
    ("cuda_driver: twelve\ngpus: []", "cuda_driver: 'twelve' is not a CUDA version"),
    ("cuda_driver: '12.4'\ngpus: {name: x}", "gpus: expected a list"),
    ("cuda_driver: '12.4'\ngpus: [{name: A100}]", "gpus[0].compute_capability: missing"),
    ("cuda_driver: '12.4'\ngpus: [{compute_capability: '8.0'}]", "gpus[0].name: missing"),
    ("cuda_driver: '12.4'\ngpus: [{name: A100, compute_capability: 'ampere'}]", "gpus[0].compute_capability"),
    ("cuda_driver: '12.4'\ngpus: [{name: A100, compute_capability: '8.0', memory_mib: lots}]", "memory_mib"),
    ("driver_version: five\ncuda_driver: '12.4'", "driver_version"),
    ("cuda_driver: [12, 4", "not valid YAML or JSON: "),
    ("cuda_driver: '12.4'\ngpus: [{name: A100, compute_capability: '8.0', index: -1}]", "gpus[0].index"),
]


@pytest.mark.parametrize("text, words", MALFORMED)
def test_malformed_profiles_are_reported_with_the_field(tmp_path, text, words):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        read_profile(path)
    assert words in caught.value.message
    assert str(path) in caught.value.message
    assert caught.value.exit_code == 2


def test_profile_that_is_not_text(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00cuda")
    with pytest.raises(ProfileError, match="not UTF-8 text"):
        read_profile(path)


def test_missing_profile_file(tmp_path):
    with pytest.raises(ProfileError, match="cannot read machine profile") as caught:
        read_profile(tmp_path / "absent.yaml")
    assert "envkit detect --json > FILE" in caught.value.hint  # how to make one


def base() -> MachineProfile:
    return MachineProfile(
        gpus=(Gpu(0, "Tesla V100", ComputeCapability(7, 0), 16384, "nvml"),
              Gpu(1, "NVIDIA A100", ComputeCapability(8, 0), 40960, "nvml")),
        cuda_driver=CudaVersion(12, 2),
        driver_version=DriverVersion.parse("535.104.05"),
        sources={"driver_version": "nvml", "cuda_driver": "nvml", "gpus": "nvml"},
    )


def test_cuda_override_replaces_the_driver_cuda_and_forgets_its_version():
    profile = apply_overrides(base(), parse_overrides(cuda="11.8"))
    assert profile.cuda_driver == CudaVersion(11, 8)
    assert profile.driver_version is None
    assert profile.sources["cuda_driver"] == "--cuda option"
    assert "driver_version" not in profile.sources


def test_gpu_arch_override_with_matching_count_keeps_names():
    profile = apply_overrides(base(), parse_overrides(gpu_archs=["7.5", "9.0"]))
    assert [(g.name, g.compute_capability) for g in profile.gpus] == [
        ("Tesla V100", ComputeCapability(7, 5)), ("NVIDIA A100", ComputeCapability(9, 0))]
    assert profile.sources["gpus"] == "--gpu-arch option"


def test_gpu_arch_override_on_a_login_node_makes_gpus():
    login = MachineProfile()
    profile = apply_overrides(login, parse_overrides(cuda="12.4", gpu_archs=["8.0", "8.0", "sm_90"]))
    assert [g.compute_capability for g in profile.gpus] == [ComputeCapability(8, 0)] * 2 + [ComputeCapability(9, 0)]
    assert [g.index for g in profile.gpus] == [0, 1, 2]
    assert profile.cuda_driver == CudaVersion(12, 4)


def test_gpu_arch_describes_the_whole_machine_so_no_gpu_stays_hidden():
    hidden = base()._replace(gpus=(), hidden_gpus=base().gpus)  # as CUDA_VISIBLE_DEVICES= leaves it
    profile = apply_overrides(hidden, parse_overrides(gpu_archs=["8.0"]))
    assert [g.compute_capability for g in profile.gpus] == [ComputeCapability(8, 0)] and profile.hidden_gpus == ()


def test_gpu_arch_without_any_cuda_says_so():
    profile = apply_overrides(MachineProfile(), parse_overrides(gpu_archs=["8.0"]))
    assert any("--cuda" in note for note in profile.notes)


@pytest.mark.parametrize("cuda, archs, words", [("twelve", (), "--cuda"), (None, ("8",), "--gpu-arch")])
def test_bad_overrides_are_bad_input(cuda, archs, words):
    with pytest.raises(ProfileError, match=words):
        parse_overrides(cuda=cuda, gpu_archs=archs)
