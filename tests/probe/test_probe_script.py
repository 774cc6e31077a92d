"""The probe runs for real: a real Python subprocess, in a venv holding stand-in frameworks (tests/probe/fakes/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from probe_helpers import A100, RTX5090, V100, base_environ, probe, raw_probe

from envkit.catalog import load_catalog
from envkit.machines.profile import Gpu, MachineProfile
from envkit.probe.builds import manifest_for
from envkit.probe.diagnose import diagnose
from envkit.versions import ComputeCapability


def _interpreter(version: str) -> str | None:
    """An older CPython where this machine has one (pyenv's or the system's), else None."""
    for candidate in (f"/root/.pyenv/versions/{version}", None):
        if candidate is None:
            found = shutil.which(f"python{version}")
            return found if found and "shims" not in found else None
        matches = sorted(Path("/root/.pyenv/versions").glob(f"{version}.*/bin/python{version}"))
        if matches:
            return str(matches[-1])
    return None


# --- torch -------------------------------------------------------------------------------------------------------

def test_every_gpu_computes_and_is_compared_with_the_cpu(fake_env):
    env = fake_env({"torch": {"version": "2.5.1+cu121", "cuda": "12.1", "gpus": [A100, V100]}})
    result = probe(env.python, "torch")
    assert result.reported, result.failure_detail
    assert (result.framework, result.version, result.cuda, result.cudnn) == ("torch", "2.5.1+cu121", "12.1", "90100")
    assert result.gpu_build and result.gpu_available and result.device_count == 2
    assert "sm_90" in result.arch_list
    assert [(d.name, d.compute_capability, d.memory_mib) for d in result.devices] == [
        ("NVIDIA A100-SXM4-80GB", "8.0", 81920), ("Tesla V100-SXM2-32GB", "7.0", 32768)]
    for device in result.devices:
        assert [(c.name, c.ok) for c in device.checks] == [("matmul", True), ("conv2d", True)]
        assert device.checks[0].device == f"cuda:{device.index}"
    assert [(c.name, c.device, c.ok) for c in result.cpu_checks] == [("matmul", "cpu", True), ("conv2d", "cpu", True)]
    assert result.cpu_checks[0].max_error < 1e-9 < result.cpu_checks[0].tolerance


def test_wrong_results_on_one_gpu_are_caught(fake_env):
    env = fake_env({"torch": {"gpus": [A100, A100], "wrong_results": [1]}})
    result = probe(env.python, "torch")
    good, bad = result.devices
    assert good.ok and not bad.ok
    matmul = bad.checks[0]
    assert matmul.error is None and matmul.max_error == pytest.approx(0.5) and matmul.max_error > matmul.tolerance
    assert "differs from the reference" in matmul.problem


def test_cpu_build(fake_env):
    env = fake_env({"torch": {"version": "2.13.0+cpu", "cuda": None, "gpus": [A100]}})
    result = probe(env.python, "torch")
    assert result.gpu_build is False and result.cuda is None and result.cudnn is None
    assert result.devices == () and result.cpu_ok
    assert result.errors == ()  # a CPU build is not asked to start CUDA


def test_driver_too_old_is_captured_from_the_warning_and_the_init_error(fake_env):
    env = fake_env({"torch": {"version": "2.10.0+cu128", "cuda": "12.8", "gpus": [A100], "driver_found": 11020}})
    result = probe(env.python, "torch")
    assert result.device_count == 0 and result.gpu_available is False
    assert any("found version 11020" in w for w in result.warnings)
    [init] = [e for e in result.errors if e.where == "torch.cuda.init"]
    assert init.type == "RuntimeError" and "too old (found version 11020)" in init.message
    assert "Traceback" in init.traceback
    assert result.cpu_ok  # the CPU side still works


def test_no_kernel_image(fake_env):
    env = fake_env({"torch": {"gpus": [RTX5090], "arch_list": ["sm_50", "sm_80", "sm_90"]}})
    result = probe(env.python, "torch")
    [device] = result.devices
    assert device.compute_capability == "12.0" and not device.ok
    assert all("no kernel image is available" in c.error.message for c in device.checks)
    assert any("sm_120 is not compatible with the current PyTorch installation" in w for w in result.warnings)


def test_numpy2_import_failure_keeps_what_numpy_wrote_to_stderr(fake_env):
    env = fake_env({"torch": {"import_error": "numpy2"}})
    result = probe(env.python, "torch")
    assert result.reported and not result.imported
    assert result.import_error.type == "ImportError"
    assert "numpy.core.multiarray failed to import" in result.import_error.message
    assert "compiled using NumPy 1.x cannot be run in" in result.probe_stderr


def test_a_framework_that_exits_on_import_is_reported(fake_env):
    env = fake_env({"torch": {"import_error": "exit"}})
    result = probe(env.python, "torch")
    assert result.reported and not result.imported and result.import_error.type == "SystemExit"


def test_output_on_file_descriptor_1_does_not_spoil_the_json(fake_env):
    env = fake_env({"torch": {"stdout_noise": True, "gpus": [A100]}})
    result = probe(env.python, "torch")
    assert result.reported, result.failure_detail
    assert "noise a C extension writes" in result.stderr and "noise printed at import" in result.stderr
    assert result.devices[0].ok


def test_cuda_visible_devices_reaches_the_probe(fake_env):
    env = fake_env({"torch": {"gpus": [A100, V100]}})
    result = probe(env.python, "torch", environ=base_environ(CUDA_VISIBLE_DEVICES="1"))
    assert [d.name for d in result.devices] == ["Tesla V100-SXM2-32GB"]
    assert result.environment["CUDA_VISIBLE_DEVICES"] == "1"
    hidden = probe(env.python, "torch", environ=base_environ(CUDA_VISIBLE_DEVICES=""))
    assert hidden.device_count == 0 and hidden.environment["CUDA_VISIBLE_DEVICES"] == ""


def test_multi_gpu_runs_one_process_per_gpu_and_measures_bandwidth(fake_env, tmp_path):
    # The stand-in all-reduce really exchanges data between the worker processes (through files), so this runs
    # the probe's orchestration for real; the bandwidth it measures is that of files, not of NCCL.
    env = fake_env({"torch": {"gpus": [A100, A100, A100]}})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    collective = probe(env.python, "torch", multi_gpu=True, environ=base_environ(TMPDIR=str(scratch))).multi_gpu
    assert list(scratch.iterdir()) == []  # the rendezvous files are cleaned up
    assert collective.ok is True and collective.error is None
    assert collective.world_size == 3 and collective.size_bytes == 64 * 2 ** 20
    assert collective.algbw_gbs > 0
    assert collective.busbw_gbs == pytest.approx(collective.algbw_gbs * 2 * 2 / 3, rel=1e-2)


def test_multi_gpu_needs_two_gpus(fake_env):
    env = fake_env({"torch": {"gpus": [A100]}})
    collective = probe(env.python, "torch", multi_gpu=True).multi_gpu
    assert collective.ok is None
    assert collective.skipped == "needs at least 2 GPUs; this machine has 1 (visible to torch)"


def test_multi_gpu_without_nccl_fails(fake_env):
    env = fake_env({"torch": {"gpus": [A100, A100], "nccl": False}})
    collective = probe(env.python, "torch", multi_gpu=True).multi_gpu
    assert collective.ok is False and "no NCCL" in collective.error.message


def test_bench_reports_tflops_per_gpu_and_type(fake_env):
    env = fake_env({"torch": {"gpus": [A100, V100]}})
    bench = probe(env.python, "torch", bench=True).bench
    assert bench.ok is True and bench.tf32 is False
    assert [(r.index, r.dtype) for r in bench.runs] == [(0, "float32"), (0, "float16"), (1, "float32"), (1, "float16")]
    assert all(r.n == 4096 and r.tflops > 0 and r.error is None for r in bench.runs)


def test_bench_without_gpu(fake_env):
    env = fake_env({"torch": {"cuda": None, "version": "2.13.0+cpu"}})
    bench = probe(env.python, "torch", bench=True).bench
    assert bench.ok is None and bench.skipped == "needs a GPU; torch sees none here"


def test_the_report_has_one_format(fake_env):
    env = fake_env({"torch": {"gpus": [A100]}})
    data = raw_probe(env.python, "torch")
    assert data["probe_format"] == 1 and data["requested"] == "torch" and data["installed"] == ["torch"]
    assert set(data["environment"]) >= {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "SLURM_JOB_ID"}
    assert data["devices"][0]["checks"][0]["name"] == "matmul"


@pytest.mark.parametrize("version", ["3.6", "3.8"])
def test_the_probe_runs_on_old_pythons(fake_env, version):
    interpreter = _interpreter(version)
    if interpreter is None:
        pytest.skip(f"no Python {version} on this machine")
    env = fake_env({"torch": {"gpus": [A100], "driver_found": None}}, interpreter=interpreter)
    result = probe(env.python, "auto")
    assert result.reported, result.failure_detail + result.stderr
    assert result.python.startswith(version + ".")
    assert result.framework == "torch" and result.devices[0].ok and result.cpu_ok


# --- the other frameworks ------------------------------------------------------------------------------------------

def test_tensorflow_places_a_computation_on_each_gpu(fake_env):
    env = fake_env({"tensorflow": {"gpus": [A100, V100], "wrong_results": [1]}}, frameworks=("tensorflow",))
    result = probe(env.python, "auto")
    assert (result.framework, result.version, result.cuda, result.cudnn) == ("tensorflow", "2.15.0", "12.2", "8")
    assert result.arch_list == ("sm_60", "sm_70", "sm_80", "compute_90")
    assert [(d.name, d.compute_capability, d.ok) for d in result.devices] == [
        ("NVIDIA A100-SXM4-80GB", "8.0", True), ("Tesla V100-SXM2-32GB", "7.0", False)]
    assert result.devices[0].checks[0].device == "/GPU:0" and result.cpu_ok


def test_tensorflow_missing_library(fake_env):
    env = fake_env({"tensorflow": {"import_error": "missing-library"}}, frameworks=("tensorflow",))
    result = probe(env.python, "tensorflow")
    assert not result.imported and "libcudart.so.11.0" in result.import_error.message


def test_jax_with_and_without_its_cuda_plugin(fake_env):
    gpu = fake_env({"jax": {"gpus": [A100]}}, frameworks=("jax",),
                   distributions={"jax": "0.4.30", "jaxlib": "0.4.30", "jax-cuda12-plugin": "0.4.30"})
    result = probe(gpu.python, "jax")
    assert (result.version, result.cuda, result.gpu_build) == ("0.4.30", "12.3", True)
    assert [(d.name, d.compute_capability, d.ok) for d in result.devices] == [("NVIDIA A100-SXM4-80GB", "8.0", True)]
    cpu = fake_env({"jax": {"gpus": [A100], "cuda": None}}, frameworks=("jax",),
                   distributions={"jax": "0.4.30", "jaxlib": "0.4.30"})
    result = probe(cpu.python, "jax")
    assert result.gpu_build is False and result.devices == () and result.cpu_ok
    assert any("a CUDA-enabled jaxlib is not installed" in w for w in result.warnings)


def test_mxnet_counts_gpus_and_computes_on_each(fake_env, catalog):
    env = fake_env({"mxnet": {"gpus": [V100, V100], "wrong_results": [0]}}, frameworks=("mxnet",),
                   distributions={"mxnet-cu112": "1.9.1"})
    result = probe(env.python, "mxnet")
    assert (result.version, result.cuda, result.gpu_build, result.device_count) == ("1.9.1", "11.2", True, 2)
    assert [d.ok for d in result.devices] == [False, True]
    assert result.devices[0].name is None  # MXNet names no GPU; the report takes the name from the machine


def test_mxnet_import_failure(fake_env):
    env = fake_env({"mxnet": {"import_error": "undefined-symbol"}}, frameworks=("mxnet",))
    result = probe(env.python, "auto")
    assert result.framework == "mxnet" and not result.imported
    assert result.import_error.type == "OSError" and "undefined symbol" in result.import_error.message


def test_auto_takes_the_first_installed_and_lists_the_others(fake_env):
    env = fake_env({"torch": {"gpus": []}, "jax": {"gpus": []}}, frameworks=("jax", "torch"),
                   distributions={"jax": "0.4.30", "jaxlib": "0.4.30"})
    result = probe(env.python, "auto")
    assert result.framework == "torch" and result.installed == ("torch", "jax")


def test_auto_with_nothing_installed(fake_env):
    env = fake_env({}, frameworks=())
    result = probe(env.python, "auto")
    assert result.reported and result.framework is None and result.installed == ()
    assert "none of torch, tensorflow, jax, mxnet is installed" in result.import_error.message


# --- from a real run to a diagnosis ----------------------------------------------------------------------------------

def test_a_real_driver_too_old_run_is_diagnosed_with_a_build_for_cuda_11_2(fake_env, envs_dir):
    env = fake_env({"torch": {"version": "2.10.0+cu128", "cuda": "12.8", "gpus": [V100], "driver_found": 11020}})
    result = probe(env.python, "torch")
    catalog = load_catalog(envs_dir, ["torch"])
    # NVML listed the GPU but could not tell the driver's CUDA: only torch's error message says it.
    profile = MachineProfile(gpus=(Gpu(0, "Tesla V100-SXM2-32GB", ComputeCapability(7, 0)),))
    report = diagnose(result, profile, manifest=manifest_for(catalog.manifests.values(), "torch"),
                      tables=catalog.tables)
    assert not report.ok and [f.rule for f in report.diagnosis] == ["driver-too-old"]
    assert "CUDA 11.2" in report.diagnosis[0].cause
    assert report.next_step.build.cuda.major == 11
