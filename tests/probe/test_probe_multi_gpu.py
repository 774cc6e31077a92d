"""--multi-gpu and --bench for TensorFlow and JAX (and their skip for MXNet), run for real: the probe in a real
Python subprocess, against the stand-ins of tests/probe/fakes/. Their MirroredStrategy and pmap run one thread per
GPU and their all-reduce sums what every replica gave, so a probe that reduced the wrong thing, on too few GPUs, or
not at all gets a wrong sum and fails these tests. What the stand-ins time is Python, not a GPU: the numbers are
checked for their form, and against the stand-ins' optional time model (fakearray.take_time), which catches a probe
that times fewer operations than it counts. None of this has run on a real GPU yet."""

from __future__ import annotations

import time

import pytest
from probe_helpers import A100, V100, probe, raw_probe

from envkit.machines.profile import Gpu, MachineProfile
from envkit.probe.diagnose import diagnose
from envkit.probe.render import report_json, report_text
from envkit.versions import ComputeCapability

JAX_DISTRIBUTIONS = {"jax": "0.4.30", "jaxlib": "0.4.30", "jax-cuda12-plugin": "0.4.30"}
# framework -> (how the report names its collective, the exception type of a failed collective, of a full GPU)
FRAMEWORKS = {
    "tensorflow": ("MirroredStrategy all-reduce (NcclAllReduce)", "InternalError", "ResourceExhaustedError"),
    "jax": ("pmap psum", "XlaRuntimeError", "XlaRuntimeError"),
}


def make(fake_env, framework: str, gpus, **switches):
    config = {framework: {"gpus": list(gpus), **switches}}
    distributions = JAX_DISTRIBUTIONS if framework == "jax" else None
    return fake_env(config, frameworks=(framework,), distributions=distributions)


def machine(gpus) -> MachineProfile:
    return MachineProfile(gpus=tuple(Gpu(i, g["name"], ComputeCapability(*g["capability"]))
                                     for i, g in enumerate(gpus)))


# --- --multi-gpu -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_multi_gpu_all_reduces_across_every_gpu_and_measures_bandwidth(fake_env, framework):
    env = make(fake_env, framework, [A100, A100, V100])
    result = probe(env.python, framework, multi_gpu=True)
    collective = result.multi_gpu
    assert collective.ok is True, collective.error
    assert collective.method == FRAMEWORKS[framework][0] and collective.error is None
    assert collective.world_size == 3 and collective.size_bytes == 64 * 2 ** 20
    assert collective.algbw_gbs > 0
    assert collective.busbw_gbs == pytest.approx(collective.algbw_gbs * 2 * 2 / 3, rel=1e-2)
    assert all(d.ok for d in result.devices) and result.errors == ()


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_bandwidth_is_that_of_the_timed_all_reduces(fake_env, framework):
    # The stand-in's all-reduce takes as long as a ring all-reduce at 40 GB/s bus bandwidth: a probe that timed
    # fewer all-reduces than it counts, or got the formula wrong, reports more than that.
    env = make(fake_env, framework, [A100, A100, A100, A100], busbw_gbs=40)
    collective = probe(env.python, framework, multi_gpu=True).multi_gpu
    assert collective.ok is True, collective.error
    assert 4 < collective.busbw_gbs <= 40
    assert collective.algbw_gbs == pytest.approx(collective.busbw_gbs * 4 / 6, rel=1e-2)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_tflops_are_those_of_the_timed_products(fake_env, framework):
    # The stand-in's big products take as long as they would at 200 TFLOP/s.
    env = make(fake_env, framework, [A100], tflops=200)
    bench = probe(env.python, framework, bench=True).bench
    assert bench.ok is True
    assert all(20 < r.tflops <= 200 for r in bench.runs), bench.runs


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_report_of_a_collective_has_the_torch_shape(fake_env, framework):
    env = make(fake_env, framework, [A100, A100])
    data = raw_probe(env.python, framework, "--multi-gpu")["multi_gpu"]
    assert set(data) >= {"ok", "skipped", "method", "world_size", "bytes", "seconds_per_op", "algbw_gbs", "busbw_gbs",
                         "error"}
    assert data["seconds_per_op"] > 0 and data["skipped"] is None


@pytest.mark.parametrize("framework, where", [("tensorflow", "replica 1"), ("jax", "GPU 1")])
def test_a_wrong_sum_fails_the_collective(fake_env, framework, where):
    env = make(fake_env, framework, [A100, A100], collective="wrong")
    collective = probe(env.python, framework, multi_gpu=True).multi_gpu
    assert collective.ok is False and collective.busbw_gbs is None
    assert collective.error.type == "WrongResult" and collective.error.where == where
    assert "every value should be 3, one is 3.5" in collective.error.message


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_collective_that_raises_is_recorded_not_a_crash(fake_env, framework):
    env = make(fake_env, framework, [A100, A100], collective="raise")
    result = probe(env.python, framework, multi_gpu=True)
    assert result.reported and result.probe_error is None
    collective = result.multi_gpu
    assert collective.ok is False and collective.world_size == 2 and collective.busbw_gbs is None
    assert collective.error.type == FRAMEWORKS[framework][1]
    assert "NCCL" in collective.error.message and "Traceback" in collective.error.traceback
    assert all(d.ok for d in result.devices)  # the rest of the check is untouched


@pytest.mark.parametrize("framework, method", [("tensorflow", "MirroredStrategy all-reduce"), ("jax", "pmap psum")])
def test_a_collective_that_hangs_is_cut_off_and_the_report_still_comes(fake_env, framework, method):
    # The all-reduce runs inside the probe (torch's runs in worker processes): a hang in NCCL must cost the
    # --multi-gpu result only, not the whole report. raw_probe gives up after 60 s.
    env = make(fake_env, framework, [A100, A100], collective="hang")
    started = time.monotonic()
    data = raw_probe(env.python, framework, "--multi-gpu", "--bench", "--multi-gpu-timeout=2")
    assert time.monotonic() - started < 30
    collective = data["multi_gpu"]
    assert collective["ok"] is False and collective["error"]["type"] == "Timeout"
    assert collective["error"]["message"] == f"the {method} did not finish within 2 s"
    assert data["bench"] == {"ok": None, "skipped": "not run: the --multi-gpu all-reduce is stuck on these GPUs"}
    assert [c["ok"] for d in data["devices"] for c in d["checks"]] == [True] * 4 and data["probe_error"] is None


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_multi_gpu_needs_two_gpus(fake_env, framework):
    env = make(fake_env, framework, [A100])
    collective = probe(env.python, framework, multi_gpu=True).multi_gpu
    assert collective.ok is None
    assert collective.skipped == f"needs at least 2 GPUs; this machine has 1 (visible to {framework})"
    cpu = make(fake_env, framework, [A100, A100], cuda=None)
    collective = probe(cpu.python, framework, multi_gpu=True).multi_gpu
    assert collective.skipped == f"needs at least 2 GPUs; this machine has 0 (visible to {framework})"


# --- --bench ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("framework, tf32", [("tensorflow", True), ("jax", False)])
def test_bench_reports_tflops_per_gpu_and_type(fake_env, framework, tf32):
    env = make(fake_env, framework, [A100, V100])
    bench = probe(env.python, framework, bench=True).bench
    assert bench.ok is True and bench.tf32 is tf32
    assert [(r.index, r.dtype) for r in bench.runs] == [(0, "float32"), (0, "float16"), (1, "float32"), (1, "float16")]
    assert all(r.n == 4096 and r.tflops > 0 and r.seconds > 0 and r.error is None for r in bench.runs)


def test_jax_bench_measures_whether_its_float32_products_are_tf32(fake_env):
    # On an H100, jax's float32 bench made 381 TFLOP/s (torch's: 52): XLA's default precision there is TF32.
    env = make(fake_env, "jax", [A100], tf32=True)
    result = probe(env.python, "jax", bench=True)
    assert result.bench.tf32 is True and result.errors == ()
    assert all(d.ok for d in result.devices)  # TF32's rounding stays well within the checks' tolerance
    text = report_text(diagnose(result, machine([A100])))
    assert "  Bench: GPU 0 float32 (4096x4096 matmul, TF32): " in text
    assert "  Bench: GPU 0 float16 (4096x4096 matmul): " in text


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_bench_on_a_full_gpu_fails_that_gpu_only(fake_env, framework):
    env = make(fake_env, framework, [A100, A100], oom=[1])
    result = probe(env.python, framework, bench=True)
    bench = result.bench
    assert bench.ok is False
    assert [r.error is None for r in bench.runs] == [True, True, False, False]
    failed = bench.runs[2].error
    assert failed.type == FRAMEWORKS[framework][2] and failed.where.startswith("bench float32 on ")
    assert all(d.ok for d in result.devices)  # the small correctness checks still fit


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_bench_without_gpu(fake_env, framework):
    env = make(fake_env, framework, [A100], cuda=None)
    bench = probe(env.python, framework, bench=True).bench
    assert bench.ok is None and bench.skipped == f"needs a GPU; {framework} sees none here"


def test_mxnet_says_both_are_not_built_for_a_retired_framework(fake_env):
    env = fake_env({"mxnet": {"gpus": [V100, V100]}}, frameworks=("mxnet",), distributions={"mxnet-cu112": "1.9.1"})
    result = probe(env.python, "mxnet", multi_gpu=True, bench=True)
    why = "not built for mxnet, a retired framework (built for torch, tensorflow and jax)"
    assert (result.multi_gpu.ok, result.multi_gpu.skipped) == (None, why)
    assert (result.bench.ok, result.bench.skipped) == (None, why)


# --- from a run to a diagnosis and a report ------------------------------------------------------------------------

@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_passing_run_with_both_passes_and_says_what_it_measured(fake_env, framework):
    gpus = [V100, A100]
    env = make(fake_env, framework, gpus)
    report = diagnose(probe(env.python, framework, multi_gpu=True, bench=True), machine(gpus))
    assert report.ok and report.diagnosis == ()
    text = report_text(report)
    method = FRAMEWORKS[framework][0]
    assert f"  Multi-GPU: {method} over 2 GPUs ok, bus bandwidth " in text
    assert "  Bench: GPU 1 float16 (4096x4096 matmul): " in text
    data = report_json(report)["probe"]
    assert data["multi_gpu"]["method"] == method and data["multi_gpu"]["busbw_gbs"] > 0
    assert len(data["bench"]["runs"]) == 4


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_failed_collective_and_a_failed_bench_are_diagnosed(fake_env, framework):
    gpus = [A100, A100]
    env = make(fake_env, framework, gpus, collective="raise", oom=[0])
    report = diagnose(probe(env.python, framework, multi_gpu=True, bench=True), machine(gpus))
    assert not report.ok
    assert [f.rule for f in report.diagnosis] == ["multi-gpu-failed", "bench-failed", "bench-failed"]
    collective, bench32, bench16 = report.diagnosis
    method, raised, full = FRAMEWORKS[framework]
    assert collective.cause.startswith(f"the {method} across 2 GPUs failed: {raised}: ")
    assert "NCCL_DEBUG=INFO" in collective.advice
    assert bench32.cause.startswith(f"the benchmark failed on GPU 0 (float32): {full}: ")
    assert "GPU 0 (float16)" in bench16.cause
    assert f"  Multi-GPU: {method} over 2 GPUs FAILED" in report_text(report)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_wrong_sum_is_diagnosed(fake_env, framework):
    gpus = [A100, A100]
    env = make(fake_env, framework, gpus, collective="wrong")
    report = diagnose(probe(env.python, framework, multi_gpu=True), machine(gpus))
    [finding] = report.diagnosis
    assert finding.rule == "multi-gpu-failed" and "WrongResult: the all-reduce sum is wrong on" in finding.cause
    assert not report.ok


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS) + ["mxnet"])
def test_skips_are_notes_that_do_not_fail_the_check(fake_env, framework):
    gpus = [A100]
    if framework == "mxnet":
        env = fake_env({"mxnet": {"gpus": gpus}}, frameworks=("mxnet",), distributions={"mxnet-cu112": "1.9.1"})
    else:
        env = make(fake_env, framework, gpus)
    report = diagnose(probe(env.python, framework, multi_gpu=True, bench=True), machine(gpus))
    assert report.ok
    skipped = {f.rule: f.cause for f in report.diagnosis}
    assert all(not f.failed for f in report.diagnosis)
    if framework == "mxnet":
        assert set(skipped) == {"multi-gpu-skipped", "bench-skipped"}
        assert all("a retired framework" in cause for cause in skipped.values())
    else:
        assert skipped == {"multi-gpu-skipped": f"--multi-gpu: needs at least 2 GPUs; this machine has 1 (visible to "
                                                f"{framework})"}
    assert "torch only" not in report_text(report)


# --- old Pythons -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_multi_gpu_and_bench_run_on_python_3_6(fake_env, framework):
    from test_probe_script import _interpreter

    interpreter = _interpreter("3.6")
    if interpreter is None:
        pytest.skip("no Python 3.6 on this machine")
    config = {framework: {"gpus": [A100, A100]}}
    env = fake_env(config, frameworks=(framework,), interpreter=interpreter,
                   distributions=JAX_DISTRIBUTIONS if framework == "jax" else None)
    result = probe(env.python, framework, multi_gpu=True, bench=True)
    assert result.reported and result.python.startswith("3.6."), result.failure_detail + result.stderr
    assert result.multi_gpu.ok is True and result.bench.ok is True, (result.multi_gpu, result.bench)
