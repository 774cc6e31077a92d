"""The probe's output captured on a real machine (one H100 80GB HBM3, driver 580.159.04, the image's python3 with
torch 2.11.0+cu130 and jax 0.11.2 + jax-cuda13-plugin; issue 15), judged as `envkit doctor` judged it there."""

from __future__ import annotations

import pytest
from probe_helpers import DATA, narrowed

from envkit.probe.builds import manifest_for
from envkit.probe.diagnose import diagnose
from envkit.probe.render import report_json, report_text
from envkit.probe.result import parse_output

H100 = "NVIDIA H100 80GB HBM3"
PYTHON = "/opt/torch/.venv/bin/python3"
SKIPPED = "needs at least 2 GPUs; this machine has 1 (visible to {})"


def judged(name, catalog, load_profile, environ=None):
    """The report `envkit doctor` gave there; with ``environ``, the profile narrowed by its CUDA_VISIBLE_DEVICES as
    doctor narrows the one it detects (envkit.commands.targets.fleet_for)."""
    result = parse_output(PYTHON, 0, 7.0, (DATA / f"{name}.json").read_text(encoding="utf-8"), "")
    assert result.reported, result.failure_detail
    manifest = manifest_for(catalog.manifests.values(), result.framework)
    profile = load_profile("h100-cuda130")
    if environ is not None:
        profile = narrowed(profile, **environ)
    return diagnose(result, profile, manifest=manifest, tables=catalog.tables, on_target=True)


@pytest.mark.parametrize("name, framework, build", [
    ("torch-2.11.0-cu130-h100-captured", "torch", "torch-2.11-cu130"),
    ("jax-0.11.2-cu13-h100-captured", "jax", "jax-0.11-cu13"),
])
def test_the_check_passes_on_the_h100_and_names_the_build(name, framework, build, catalog, load_profile):
    report = judged(name, catalog, load_profile)
    assert report.ok and report.diagnosis == ()
    assert report.framework == framework and report.cuda == "13.0"
    assert report.installed_build.id == build
    assert [(d.index, d.name, d.compute_capability, d.ok) for d in report.devices] == [(0, H100, "9.0", True)]
    assert [c.name for c in report.probe.devices[0].checks] == ["matmul", "conv2d"]
    assert report.probe.multi_gpu is None and report.probe.bench is None
    assert report.next_step is None
    assert f"  GPU 0: {H100}, compute capability 9.0: ok (matmul ok, conv2d ok)" in report_text(report)


def test_the_gpu_checks_agree_with_the_cpu_within_tf32_rounding(catalog, load_profile):
    # torch's 64x64 product on the GPU matched its CPU one exactly (TF32 is off by default); jax's (XLA's default
    # precision: TF32 on an H100) was 0.0024 off, far inside the tolerance and far from a wrong kernel.
    torch = judged("torch-2.11.0-cu130-h100-captured", catalog, load_profile).probe.devices[0].checks[0]
    jax = judged("jax-0.11.2-cu13-h100-captured", catalog, load_profile).probe.devices[0].checks[0]
    assert torch.max_error == 0.0
    assert 1e-4 < jax.max_error < 0.01 < jax.tolerance


def test_torch_with_multi_gpu_and_bench(catalog, load_profile):
    report = judged("torch-2.11.0-cu130-h100-captured-multi-gpu-bench", catalog, load_profile)
    assert report.ok
    assert [(f.rule, f.failed) for f in report.diagnosis] == [("multi-gpu-skipped", False)]
    assert report.probe.multi_gpu.skipped == SKIPPED.format("torch")
    bench = report.probe.bench
    assert bench.ok and bench.tf32 is False
    assert [(r.index, r.dtype, r.n, r.tflops) for r in bench.runs] == [
        (0, "float32", 4096, 51.695), (0, "float16", 4096, 748.778)]
    text = report_text(report)
    assert "  Bench: GPU 0 float32 (4096x4096 matmul): 51.695 TFLOP/s" in text
    assert "  Bench: GPU 0 float16 (4096x4096 matmul): 748.778 TFLOP/s" in text
    assert f"  Multi-GPU: skipped: {SKIPPED.format('torch')}" in text
    data = report_json(report)
    assert data["ok"] is True and data["installed_build"] == "torch-2.11-cu130"
    assert [r["tflops"] for r in data["probe"]["bench"]["runs"]] == [51.695, 748.778]


def test_jax_with_multi_gpu_and_bench_says_its_float32_products_are_tf32(catalog, load_profile):
    # Captured after jax_tf32 was added (the first run's float32 figure, 381 TFLOP/s, carried no such mark).
    report = judged("jax-0.11.2-cu13-h100-captured-multi-gpu-bench", catalog, load_profile)
    assert report.ok
    assert [(f.rule, f.failed) for f in report.diagnosis] == [("multi-gpu-skipped", False)]
    assert report.probe.multi_gpu.skipped == SKIPPED.format("jax")
    bench = report.probe.bench
    assert bench.ok and bench.tf32 is True
    assert [(r.index, r.dtype, r.n, r.tflops) for r in bench.runs] == [
        (0, "float32", 4096, 379.44), (0, "float16", 4096, 764.039)]
    text = report_text(report)
    assert "  Bench: GPU 0 float32 (4096x4096 matmul, TF32): 379.44 TFLOP/s" in text
    assert "  Bench: GPU 0 float16 (4096x4096 matmul): 764.039 TFLOP/s" in text
    assert report_json(report)["probe"]["bench"]["tf32"] is True


@pytest.mark.parametrize("name, visible", [
    ("torch-2.11.0-cu130-h100-captured-cvd-empty", ""),
    ("torch-2.11.0-cu130-h100-captured-cvd-1", "1"),  # names no GPU of a machine with one (GPU 0)
    ("jax-0.11.2-cu13-h100-captured-cvd-empty", ""),
])
def test_gpus_hidden_by_cuda_visible_devices_are_said_and_no_other_build_is_advised(name, visible, catalog,
                                                                                      load_profile):
    # What the H100 showed: doctor narrows the machine to the GPUs CUDA_VISIBLE_DEVICES shows (none here). It used
    # to advise a CPU build for that GPU-less machine (`envkit create torch --build torch-2.15-cpu`), and with
    # CUDA_VISIBLE_DEVICES=1 to call it a machine without GPU: the cure is the variable, the build is the right one.
    report = judged(name, catalog, load_profile, environ={"CUDA_VISIBLE_DEVICES": visible})
    assert report.machine.gpus == () and [gpu.name for gpu in report.machine.hidden_gpus] == [H100]
    assert [(f.rule, f.failed) for f in report.diagnosis] == [("gpus-hidden", True)]
    [finding] = report.diagnosis
    assert finding.cause.startswith(f"CUDA_VISIBLE_DEVICES={visible!r} hides the GPUs")
    assert not report.ok and report.next_step is None
    text = report_text(report)
    [machine] = [line for line in text.splitlines() if line.startswith("Machine: ")]
    assert machine.endswith(", no GPU visible (1 hidden by CUDA_VISIBLE_DEVICES)")
    assert "To get a build that fits" not in text and "cpu" not in text.split("Why:")[1]
    data = report_json(report)
    assert data["next"] is None
    assert data["machine"]["gpus"] == [] and [gpu["name"] for gpu in data["machine"]["hidden_gpus"]] == [H100]
