"""Detection through NVML (faked at its boundary), its failures, and the fallbacks they lead to."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pynvml
import pytest
from detect_fakes import A100, V100, FakeGpu, FakeNvml, nvml_missing
from support import fake_nvml

from envkit.detect import detect_machine, merge_probes
from envkit.detect.nvml import probe_nvml
from envkit.detect.sources import DERIVED_CUDA
from envkit.machines.profile import CUDA_DRIVER, DRIVER_VERSION, GPUS, Gpu, MachineProfile
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion

R535_TWO_GPUS = {"0000:00:1b.0": "information-r535-v100.txt", "0000:00:1c.0": "information-r535-a100.txt"}


def detect(tables, nvml, proc_root, smi_command, **options):
    return detect_machine(
        tables.cuda, tables.gpu_names, nvml=nvml, proc_root=proc_root, smi_command=smi_command, **options
    )


def test_mixed_gpus_all_from_nvml(tables, no_proc, no_smi):
    nvml = FakeNvml(gpus=(V100, A100))
    profile = detect(tables, nvml, no_proc, no_smi)
    assert profile.driver_version == DriverVersion.parse("535.129.03")
    assert profile.cuda_driver == CudaVersion(12, 2)
    assert [(g.index, g.name, g.compute_capability, g.memory_mib, g.source) for g in profile.gpus] == [
        (0, "Tesla V100-SXM2-16GB", (7, 0), 16384, "nvml"),
        (1, "NVIDIA A100-SXM4-40GB", (8, 0), 40960, "nvml"),
    ]
    assert profile.sources == {DRIVER_VERSION: "nvml", CUDA_DRIVER: "nvml", GPUS: "nvml"}
    assert profile.notes == ()  # complete after NVML: neither /proc nor nvidia-smi was tried
    assert nvml.calls[0] == "nvmlInit" and nvml.calls[-1] == "nvmlShutdown"


def test_bytes_from_older_pynvml_are_decoded(tables, no_proc, no_smi):
    nvml = FakeNvml(gpus=(FakeGpu(b"Tesla T4", (7, 5), 15360),), driver=b"470.182.03", cuda=11040)
    profile = detect(tables, nvml, no_proc, no_smi)
    assert profile.driver_version == DriverVersion.parse("470.182.03")
    assert profile.gpus[0].name == "Tesla T4"
    assert profile.cuda_driver == CudaVersion(11, 4)


def test_library_not_found_falls_back_to_proc(tables, make_proc, no_smi):
    nvml = nvml_missing()
    proc = make_proc("version-r535-proprietary-x86_64.txt", R535_TWO_GPUS)
    profile = detect(tables, nvml, proc, no_smi)
    assert profile.notes[0] == "NVML: library libnvidia-ml.so.1 not found"
    assert profile.driver_version == DriverVersion.parse("535.129.03")
    assert profile.sources[DRIVER_VERSION] == "/proc/driver/nvidia/version"
    assert [g.compute_capability for g in profile.gpus] == [(7, 0), (8, 0)]
    assert "nvmlShutdown" not in nvml.calls  # nothing to shut down after a failed init


def test_driver_not_loaded_and_nothing_else(tables, no_proc, no_smi):
    nvml = FakeNvml(errors={"nvmlInit": pynvml.NVML_ERROR_DRIVER_NOT_LOADED})
    profile = detect(tables, nvml, no_proc, no_smi)
    assert profile.notes[0] == "NVML: NVIDIA driver not loaded"
    assert profile.gpus == () and profile.cuda_driver is None and not profile.has_driver


def test_other_init_errors_keep_pynvml_wording(tables, no_proc, no_smi):
    nvml = FakeNvml(errors={"nvmlInit": pynvml.NVML_ERROR_NO_PERMISSION})
    profile = detect(tables, nvml, no_proc, no_smi)
    assert profile.notes[0].startswith(f"NVML: {pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)} (")


def test_no_driver_at_all_is_a_normal_answer(tables, no_proc, no_smi):
    profile = detect(tables, nvml_missing(), no_proc, no_smi)
    assert profile == MachineProfile(
        notes=(
            "NVML: library libnvidia-ml.so.1 not found",
            "/proc/driver/nvidia/version: not present (no NVIDIA kernel module loaded)",
            f"nvidia-smi: {no_smi} not found or not executable",
        )
    )


def test_error_mid_way_keeps_what_nvml_gave_and_falls_back_for_the_rest(tables, make_proc, no_smi):
    nvml = FakeNvml(errors={"nvmlDeviceGetCount": pynvml.NVML_ERROR_UNKNOWN})
    proc = make_proc("version-r580-proprietary-x86_64.txt", R535_TWO_GPUS)
    profile = detect(tables, nvml, proc, no_smi)
    # The driver and CUDA from NVML win over /proc's (which says 580.95.05 here); the GPUs come from /proc.
    assert profile.driver_version == DriverVersion.parse("535.129.03")
    assert profile.sources == {DRIVER_VERSION: "nvml", CUDA_DRIVER: "nvml", GPUS: "/proc/driver/nvidia/gpus"}
    assert [g.name for g in profile.gpus] == ["Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-40GB"]
    assert any(note.startswith("NVML: GPU count:") for note in profile.notes)
    assert nvml.calls[-1] == "nvmlShutdown"


def test_one_gpus_error_does_not_lose_the_others(tables, no_proc, no_smi):
    nvml = FakeNvml(
        gpus=(V100, A100, V100), errors={("nvmlDeviceGetHandleByIndex", 1): pynvml.NVML_ERROR_GPU_IS_LOST}
    )
    profile = detect(tables, nvml, no_proc, no_smi)
    assert [(g.name, g.compute_capability) for g in profile.gpus] == [
        ("Tesla V100-SXM2-16GB", (7, 0)),
        ("unknown GPU", None),
        ("Tesla V100-SXM2-16GB", (7, 0)),
    ]
    assert any(note.startswith("NVML: GPU 1: GPU is lost (") for note in profile.notes)
    assert any("GPU 1" in note and "compute capability unknown" in note for note in profile.notes)


def test_missing_compute_capability_comes_from_the_name_table(tables, no_proc, no_smi):
    nvml = FakeNvml(errors={("nvmlDeviceGetCudaComputeCapability", 1): pynvml.NVML_ERROR_NOT_SUPPORTED})
    profile = detect(tables, nvml, no_proc, no_smi)
    assert profile.gpus[1].compute_capability == ComputeCapability(8, 0)
    assert profile.gpus[1].source == "nvml + envs/gpus.yaml"
    assert profile.gpus[1].memory_mib == 40960
    assert profile.gpus[0].source == "nvml"
    assert not any(note.startswith("/proc") or note.startswith("nvidia-smi") for note in profile.notes)


def test_cuda_v2_without_libcuda_uses_the_older_query(tables, no_proc, no_smi):
    nvml = FakeNvml(cuda_v1=12040, errors={"nvmlSystemGetCudaDriverVersion_v2": pynvml.NVML_ERROR_LIBRARY_NOT_FOUND})
    profile = detect(tables, nvml, no_proc, no_smi)
    assert profile.cuda_driver == CudaVersion(12, 4)
    assert profile.sources[CUDA_DRIVER] == "nvml"
    assert any("libcuda.so.1 not found" in note for note in profile.notes)


def test_cuda_from_driver_version_when_nvml_cannot_tell(tables, no_proc, no_smi):
    nvml = FakeNvml(
        driver="550.54.14",
        errors={
            "nvmlSystemGetCudaDriverVersion_v2": pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
            "nvmlSystemGetCudaDriverVersion": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        },
    )
    profile = detect(tables, nvml, no_proc, no_smi)
    assert profile.cuda_driver == CudaVersion(12, 4)
    assert profile.sources[CUDA_DRIVER] == DERIVED_CUDA == "driver version + envs/cuda.yaml"
    # Derivable counts as known: the fallbacks were not run for it.
    assert not any(note.startswith("/proc") or note.startswith("nvidia-smi") for note in profile.notes)


def test_hanging_nvml_is_cut_off_and_the_fallbacks_still_answer(tables, make_proc, no_smi):
    release = threading.Event()
    proc = make_proc("version-r550-open-x86_64.txt", R535_TWO_GPUS)
    try:
        started = time.monotonic()
        profile = detect(tables, FakeNvml(hang=release), proc, no_smi, timeout=0.3)
        elapsed = time.monotonic() - started
    finally:
        release.set()  # let the abandoned thread finish
    assert 0.3 <= elapsed < 2.0
    assert profile.notes[0] == "NVML: timed out after 0.3 s"
    assert profile.driver_version == DriverVersion.parse("550.54.14")
    assert profile.cuda_driver == CudaVersion(12, 4)


def test_a_misbehaving_nvml_becomes_a_note(tables, make_proc, no_smi):
    class Broken(FakeNvml):
        def nvmlDeviceGetMemoryInfo(self, handle):
            return object()  # no .total

    proc = make_proc("version-r535-proprietary-x86_64.txt", R535_TWO_GPUS)
    profile = detect(tables, Broken(), proc, no_smi)
    assert profile.notes[0].startswith("NVML: failed unexpectedly: AttributeError")
    assert profile.sources[GPUS] == "/proc/driver/nvidia/gpus"


@pytest.mark.skipif(fake_nvml.real_library_present(), reason="this machine has an NVIDIA driver")
def test_real_pynvml_on_a_machine_without_a_driver(tables, no_proc, no_smi):
    profile = detect(tables, None, no_proc, no_smi)
    assert profile.gpus == () and profile.cuda_driver is None
    assert profile.notes[0] == "NVML: library libnvidia-ml.so.1 not found"


def test_real_pynvml_probe_directly(gpu_names):
    if fake_nvml.real_library_present():
        profile = probe_nvml(gpu_names)
        assert profile.sources.get(GPUS) == "nvml"
    else:
        assert probe_nvml(gpu_names).notes == ("NVML: library libnvidia-ml.so.1 not found",)


def test_importing_detection_imports_neither_pynvml_nor_subprocess():
    code = "import sys, envkit.detect; print(sorted({'pynvml', 'subprocess'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"


def test_merge_prefers_the_first_probe_per_fact_and_a_complete_gpu_list(cuda_table):
    partial_gpus = MachineProfile(
        gpus=(Gpu(0, "unknown GPU", None, source="nvml"),),
        driver_version=DriverVersion.parse("535.129.03"),
        sources={DRIVER_VERSION: "nvml", GPUS: "nvml"},
    )
    later = MachineProfile(
        gpus=(Gpu(0, "Tesla T4", ComputeCapability(7, 5), source="nvidia-smi"),),
        driver_version=DriverVersion.parse("550.54.14"),
        cuda_driver=CudaVersion(12, 4),
        sources={DRIVER_VERSION: "nvidia-smi", CUDA_DRIVER: "nvidia-smi", GPUS: "nvidia-smi"},
    )
    merged = merge_probes([partial_gpus, later], cuda_table)
    assert merged.driver_version == DriverVersion.parse("535.129.03")
    assert merged.cuda_driver == CudaVersion(12, 4)
    assert merged.gpus == later.gpus
    assert merged.sources == {DRIVER_VERSION: "nvml", CUDA_DRIVER: "nvidia-smi", GPUS: "nvidia-smi"}
    only_partial = merge_probes([partial_gpus], cuda_table)
    assert only_partial.gpus == partial_gpus.gpus
    assert only_partial.cuda_driver == CudaVersion(12, 2) and only_partial.sources[CUDA_DRIVER] == DERIVED_CUDA


@pytest.mark.skipif(fake_nvml.real_library_present(), reason="this machine has an NVIDIA driver")
def test_without_the_library_pynvml_is_not_even_imported(gpu_names):
    code = (
        "import sys\n"
        "from envkit.catalog import default_manifests_dir, load_tables\n"
        "from envkit.detect.nvml import probe_nvml\n"
        "profile = probe_nvml(load_tables(default_manifests_dir()).gpu_names)\n"
        "print(profile.notes[0], 'pynvml' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "NVML: library libnvidia-ml.so.1 not found False"


def test_a_broken_gpu_table_a_probe_needs_is_the_manifests_error_not_a_note(envs_copy, tmp_path):
    """The tables are read when a probe first looks something up (envkit.catalog.cache.machine_tables_on_use): here
    NVML does not tell the GPUs' compute capability, so their names are looked up in gpus.yaml. A broken gpus.yaml is
    then an error naming it, never a probe's "failed unexpectedly" note on a machine left without GPUs."""
    from envkit.catalog.cache import machine_tables_on_use
    from envkit.errors import ManifestError

    nvml = FakeNvml(errors={"nvmlDeviceGetCudaComputeCapability": pynvml.NVML_ERROR_NOT_SUPPORTED})
    read = machine_tables_on_use(envs_copy, tmp_path / "cache")
    found = detect_machine(read.cuda, read.gpu_names, nvml=nvml)
    assert [gpu.compute_capability for gpu in found.gpus] == [ComputeCapability(7, 0), ComputeCapability(8, 0)]
    (envs_copy / "gpus.yaml").write_text("gpus: [\n")
    broken = machine_tables_on_use(envs_copy, tmp_path / "cache")
    with pytest.raises(ManifestError, match="gpus.yaml"):
        detect_machine(broken.cuda, broken.gpu_names, nvml=nvml)
