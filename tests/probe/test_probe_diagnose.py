"""Every diagnosis rule, on a recorded probe output (tests/probe/data/: written by hand, and a few captured on a real
H100: see its README)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from probe_helpers import DATA, PROFILES, narrowed

from envkit.machines.profile import Gpu, MachineProfile, read_profile
from envkit.probe.builds import installed_build, manifest_for, manual_commands, parse_cuda
from envkit.probe.diagnose import RULES, covers, diagnose, driver_cuda_from
from envkit.probe.render import report_text
from envkit.probe.result import TIMED_OUT, cut_off, parse_output
from envkit.versions import ComputeCapability, CudaVersion, L4tVersion

# recorded output -> (machine profile, whether the probe ran on that machine, rules that must fire, PASS)
CASES = {
    "torch-2.5.1-cu121-v100-a100-pass": ("v100-a100-cuda122", True, [], True),
    "torch-2.10.0-cu128-driver-too-old": ("gtx1080ti-cuda112", True, ["driver-too-old"], False),
    "torch-2.13.0-cpu-on-gpu-machine": ("h100-cuda128", True, ["cpu-build"], False),
    "torch-2.6.0-cu124-rtx5090-no-kernels": ("rtx5090-cuda128", True, ["no-kernels"], False),
    # issue 43: PyPI's CPU torch on a GH200; PyTorch's aarch64 (SBSA) nightly on a Jetson Orin (pytorch/pytorch#145560)
    "torch-2.9.1-cpu-pypi-on-gh200": ("gh200-r570-cuda128", True, ["cpu-wheel-on-aarch64"], False),
    "torch-2.6.0-cu124-sbsa-on-jetson-orin": ("jetson-agx-orin-jp62", True, ["generic-cuda-on-jetson", "no-kernels"],
                                              False),
    "torch-2.5.1-cu121-cvd-empty": ("h100-cuda128", True, ["gpus-hidden"], False),
    "torch-2.5.1-cu121-cvd-one-of-two": ("v100-a100-cuda122", True, ["gpus-partly-hidden"], True),
    "torch-2.5.1-cu121-slurm-no-gpu": ("no-gpu", True, ["slurm-no-gpu"], False),
    "jax-0.10.2-cu12-driver-11.4-in-job": ("a100-r470-cuda114", True, ["driver-too-old"], False),
    "torch-2.5.1-cu121-no-gpu-machine": ("no-gpu", True, ["no-gpu-here"], False),
    "torch-2.5.1-cu121-sees-1-of-2": ("v100-a100-cuda122", True, ["gpus-not-seen"], False),
    "torch-not-installed": ("h100-cuda128", True, ["import-missing"], False),
    "tensorflow-2.15-numpy2-import": ("h100-cuda128", True, ["numpy2"], False),
    "torch-2.1.2-cu121-numpy2-warning": ("h100-cuda128", True, ["numpy2"], False),
    "mxnet-cu112-libcuda-missing": ("no-gpu", True, ["missing-library"], False),
    "mxnet-undefined-symbol": ("gtx1080ti-cuda112", True, ["import-failed"], False),
    "torch-2.5.1-cu121-wrong-results-gpu1": ("v100-a100-cuda122", True, ["wrong-results"], False),
    "torch-2.5.1-cu121-out-of-memory": ("h100-cuda128", True, ["gpu-out-of-memory"], False),
    "torch-2.5.1-cu121-gpu-busy": ("h100-cuda128", True, ["gpu-busy"], False),
    "torch-2.5.1-cu121-cublas-failed": ("h100-cuda128", True, ["computation-failed"], False),
    "torch-2.5.1-cu121-multi-gpu-failed": ("v100-a100-cuda122", True, ["multi-gpu-failed", "bench-failed"], False),
    "torch-2.13.0-cpu-multi-gpu-and-bench-skipped": ("no-gpu", True, ["multi-gpu-skipped", "bench-skipped"], True),
    "torch-2.14.0-cu130-login-node": ("v100x8-cuda130", False, ["does-not-fit", "gpus-not-checked-here"], False),
    "torch-1.3.1-cu101-login-node": ("h100-cuda128", False,
                                     ["no-kernels", "gpus-not-checked-here", "build-not-in-manifest"], False),
    "jax-0.4.30-cpu-on-gpu-machine": ("h100-cuda128", True, ["cpu-build", "build-not-in-manifest"], False),
    "auto-nothing-installed": ("h100-cuda128", True, ["no-framework"], False),
    "torch-probe-crashed": ("h100-cuda128", True, ["probe-crashed"], False),
    # Captured on a real H100 (issue 15), not written by hand.
    "torch-2.11.0-cu130-h100-captured": ("h100-cuda130", True, [], True),
    "torch-2.11.0-cu130-h100-captured-multi-gpu-bench": ("h100-cuda130", True, ["multi-gpu-skipped"], True),
    "jax-0.11.2-cu13-h100-captured": ("h100-cuda130", True, [], True),
    "jax-0.11.2-cu13-h100-captured-multi-gpu-bench": ("h100-cuda130", True, ["multi-gpu-skipped"], True),
    "torch-2.11.0-cu130-h100-captured-cvd-empty": ("h100-cuda130", True, ["gpus-hidden"], False),
    "torch-2.11.0-cu130-h100-captured-cvd-1": ("h100-cuda130", True, ["gpus-hidden"], False),
    "jax-0.11.2-cu13-h100-captured-cvd-empty": ("h100-cuda130", True, ["gpus-hidden"], False),
    # ROCm builds (AMD GPUs): the probe's output on the stand-in ROCm torch (see data/README.md).
    "torch-2.14.0-rocm7.2-mi300x-pass": ("mi300x-x8-amdgpu6.12", True, [], True),
    "torch-2.9.1-rocm6.4-gfx1032-no-binary": ("rx6650xt-gfx1032-kernel-driver", True, ["no-kernels"], False),
    "torch-2.14.0-rocm7.2-no-kfd-access": ("mi300x-x8-amdgpu6.12", True, ["kfd-access"], False),
    # Captured on the project's CPU machine (issue 39): the real torch 2.13.0+cpu beside PyPI's torchvision 0.29.1.
    "torch-2.13.0-cpu-torchvision-0.29.1-captured": ("no-gpu", True, ["companion-broken", "companion-missing"],
                                                     False),
}
# Rules tested on runs that printed no report (their recorded stderr/stdout is in data/ too).
NO_REPORT_RULES = {"probe-timed-out", "python-too-old", "probe-no-report"}


def recorded(name: str):
    return parse_output("/home/ana/envs/dl/bin/python", 0, 2.5, (DATA / f"{name}.json").read_text(), "")


def judge(name: str, profile_name: str, on_target: bool, catalog, profile: MachineProfile | None = None):
    result = recorded(name)
    assert result.reported, result.failure_detail
    framework = result.framework or result.requested
    manifest = manifest_for(catalog.manifests.values(), framework)
    profile = profile if profile is not None else read_profile(PROFILES / f"{profile_name}.yaml")
    return diagnose(result, profile, manifest=manifest, tables=catalog.tables, on_target=on_target)


def fired(report) -> list[str]:
    return [finding.rule for finding in report.diagnosis]


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_recorded_output_fires_its_rules_and_only_those(name, catalog):
    profile, on_target, rules, ok = CASES[name]
    report = judge(name, profile, on_target, catalog)
    assert sorted(set(fired(report))) == sorted(rules)
    assert report.ok is ok
    for finding in report.diagnosis:
        assert finding.cause and finding.advice and "{" not in finding.cause + finding.advice


def test_every_rule_is_tested_on_a_recorded_output():
    tested = {rule for case in CASES.values() for rule in case[2]} | NO_REPORT_RULES
    assert tested == {rule.id for rule in RULES}


def test_recorded_outputs_have_the_probes_format():
    from envkit.probe.program import main as script

    keys = set(script.new_report("torch", {"multi_gpu": False, "bench": False}))
    # added by the tensorflow / jax / mxnet probes; companions by the torch probe (and for the companions asked), hip
    # by the torch probe since it knows ROCm builds
    per_framework = {"build_info", "distributions", "backend", "companions", "hip"}
    files = sorted(DATA.glob("*.json"))
    assert {f.stem for f in files} == set(CASES)
    newer = {"machine"}  # (issue 43) a key the real H100 captures, printed by an older probe, do not have
    for path in files:
        data = json.loads(path.read_text())
        expected = keys - newer if "captured" in path.stem else keys
        assert expected <= set(data) <= keys | per_framework, path.name
        assert data["probe_format"] == script.PROBE_FORMAT


# --- what the rules say ------------------------------------------------------------------------------------------

def test_driver_too_old_reads_the_drivers_cuda_from_the_message_and_names_a_build_for_it(catalog):
    # The profile does not know the driver's CUDA: only the error message says it (found version 11020 = 11.2).
    unknown_driver = MachineProfile(gpus=(Gpu(0, "NVIDIA GeForce GTX 1080 Ti", ComputeCapability(6, 1)),))
    report = judge("torch-2.10.0-cu128-driver-too-old", "", True, catalog, profile=unknown_driver)
    [finding] = report.diagnosis
    assert "it supports CUDA 11.2, the build needs CUDA 12.8" in finding.cause
    assert "570.26 or newer" in finding.advice  # the first driver for CUDA 12.8, from envs/cuda.yaml
    step = report.next_step
    assert step is not None and step.build.cuda is not None and step.build.cuda.major <= 11
    assert step.command == f"envkit create torch --build {step.build.id}"
    assert step.build.id in finding.advice


def test_driver_too_old_never_advises_a_driver_that_cannot_drive_the_gpu(catalog):
    """Issue 30: R470 is the last driver branch for Kepler (R580 for Maxwell, Pascal and Volta: envs/cuda.yaml). A
    CUDA 12.8 build on a K80 cannot be cured by a driver for CUDA 12.8 (570.26): none drives a K80. The advice says
    so, and which branch is the last, instead of asking for it; the build it names runs on the driver there is."""
    k80 = MachineProfile(gpus=(Gpu(0, "Tesla K80", ComputeCapability(3, 7)),), cuda_driver=CudaVersion(11, 2))
    report = judge("torch-2.10.0-cu128-driver-too-old", "", True, catalog, profile=k80)
    [finding] = report.diagnosis
    assert "570.26" not in finding.advice and "updated" not in finding.advice
    assert ("No driver update can run it here: no driver for CUDA 12.8 drives the Tesla K80 (sm_37), R470 (CUDA "
            "11.4) is the last driver branch for Kepler; no build for a newer CUDA than 11.4 will ever run on it."
            ) in finding.advice
    assert report.next_step.build.id == "torch-2.3-cu118"  # CUDA 11 minor-version compatibility; cuDNN 8.7


def test_where_detection_found_no_driver_the_machine_is_the_one_the_framework_met(catalog):
    # No probe of envkit's could read the driver (no NVML library, no /proc, no nvidia-smi: a container, say), yet
    # torch ran CUDA 12.4 on an RTX 5090: the machine is judged as having that GPU and at least that CUDA, and at
    # least the CUDA 12.8 of R570, the first driver branch of any Blackwell GPU (issue 46: an RTX 5090 on a CUDA 12.4
    # driver is no real machine).
    report = judge("torch-2.6.0-cu124-rtx5090-no-kernels", "no-gpu", True, catalog)
    machine = report.machine
    assert [(gpu.name, str(gpu.compute_capability)) for gpu in machine.gpus] == [("NVIDIA GeForce RTX 5090", "12.0")]
    assert machine.cuda_driver == CudaVersion(12, 8)
    assert machine.sources["gpus"] == "the probe"
    assert machine.sources["cuda_driver"].startswith("at least CUDA 12.8: R570 (CUDA 12.8) is the first driver branch "
                                                     "for Blackwell")
    assert machine.sources["cuda_driver"].endswith("(torch started CUDA 12.4)")
    # cu128 runs natively, 2.12/2.13 cu129 through minor-version compatibility: the newest release ranks first
    # (2.13 has a cu129 build: issue 30; 2.14 has none: issue 46).
    assert report.next_step is not None and report.next_step.build.id == "torch-2.13-cu129"
    # Judged for another machine (a login node's check), the profile stands as it is.
    assert judge("torch-2.6.0-cu124-rtx5090-no-kernels", "no-gpu", False, catalog).machine.gpus == ()


@pytest.mark.parametrize("name, advised", [
    ("torch-2.10.0-cu128-driver-too-old", True),  # the build is the fault: another one is the cure
    ("torch-2.13.0-cpu-on-gpu-machine", True),
    ("torch-2.6.0-cu124-rtx5090-no-kernels", True),
    ("torch-2.5.1-cu121-cublas-failed", True),  # a failed computation may be the build's: not ruled out
    ("torch-2.5.1-cu121-slurm-no-gpu", False),  # the surroundings are: no build is advised
    ("torch-2.5.1-cu121-cvd-empty", False),
    ("torch-2.5.1-cu121-gpu-busy", False),
    ("torch-2.5.1-cu121-out-of-memory", False),
    ("torch-2.5.1-cu121-wrong-results-gpu1", False),
    ("torch-2.5.1-cu121-sees-1-of-2", False),  # a GPU in an error state, in MIG mode or in exclusive use
])
def test_another_build_is_advised_only_where_a_build_is_the_fault(name, advised, catalog):
    profile, on_target, _, _ = CASES[name]
    report = judge(name, profile, on_target, catalog)
    assert not report.ok
    assert (report.next_step is not None) is advised
    assert ("To get a build that fits" in report_text(report)) is advised


def test_with_the_gpus_hidden_a_build_advised_for_another_fault_is_one_for_the_whole_machine(catalog):
    # NumPy 2 under an old torch, checked with CUDA_VISIBLE_DEVICES= on an H100: the advice to move to a newer build
    # names a GPU build for the H100, not a CPU build for the machine as it looks with its GPU hidden.
    hidden = narrowed(read_profile(PROFILES / "h100-cuda128.yaml"), CUDA_VISIBLE_DEVICES="")
    assert hidden.gpus == () and len(hidden.hidden_gpus) == 1
    numpy2_warned = recorded("torch-2.1.2-cu121-numpy2-warning")
    blind = replace(numpy2_warned, devices=(), device_count=0, gpu_available=False,
                    environment={**numpy2_warned.environment, "CUDA_VISIBLE_DEVICES": ""})  # torch sees no GPU
    report = diagnose(blind, hidden, manifest=catalog.manifests["torch"], tables=catalog.tables, on_target=True)
    assert sorted(fired(report)) == ["gpus-hidden", "numpy2"]
    step = report.next_step
    assert step is not None and step.build.is_gpu and step.build.arch is not None
    numpy2 = next(f for f in report.diagnosis if f.rule == "numpy2")
    assert step.build.id in numpy2.advice and "-cpu" not in numpy2.advice


def test_a_part_of_the_gpus_shown_is_said_outside_a_job_and_not_inside_one(catalog):
    # CUDA_VISIBLE_DEVICES=1 on the V100 + A100 machine: one of two checked, a note, and PASS. (Numbered as NVML
    # numbers them: CUDA's default order, fastest first, may name the other one.)
    v100_a100 = read_profile(PROFILES / "v100-a100-cuda122.yaml")
    shown = narrowed(v100_a100, CUDA_VISIBLE_DEVICES="1", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    assert [gpu.index for gpu in shown.gpus] == [1] and [gpu.index for gpu in shown.hidden_gpus] == [0]
    report = judge("torch-2.5.1-cu121-cvd-one-of-two", "", True, catalog, profile=shown)
    assert report.ok and fired(report) == ["gpus-partly-hidden"]
    assert "shows torch 1 of this machine's 2 GPUs" in report.diagnosis[0].cause
    # Inside a Slurm job, its GPUs are a part of the node's by design: nothing to say.
    in_job = recorded("torch-2.5.1-cu121-cvd-one-of-two")
    in_job = replace(in_job, environment={**in_job.environment, "SLURM_JOB_ID": "42"})
    manifest = catalog.manifests["torch"]
    report = diagnose(in_job, narrowed(v100_a100, CUDA_VISIBLE_DEVICES="1", SLURM_JOB_ID="42",
                                       CUDA_DEVICE_ORDER="PCI_BUS_ID"),
                      manifest=manifest, tables=catalog.tables, on_target=True)
    assert report.ok and fired(report) == []


def test_driver_cuda_parsing():
    assert driver_cuda_from(recorded("torch-2.10.0-cu128-driver-too-old")) == CudaVersion(11, 2)
    assert driver_cuda_from(recorded("torch-2.13.0-cpu-on-gpu-machine")) is None


def test_no_kernels_names_what_the_build_carries_and_a_build_that_has_sm_120(catalog):
    report = judge("torch-2.6.0-cu124-rtx5090-no-kernels", "rtx5090-cuda128", True, catalog)
    [finding] = report.diagnosis
    assert "NVIDIA GeForce RTX 5090 (sm_120)" in finding.cause and "sm_90" in finding.cause
    build = report.next_step.build
    assert covers([a.sm for a in build.arch.sass], "12.0")
    assert [d.ok for d in report.devices] == [False]


def test_cpu_build_where_gpus_are_gets_a_gpu_build(catalog):
    report = judge("torch-2.13.0-cpu-on-gpu-machine", "h100-cuda128", True, catalog)
    assert "torch.version.cuda is None" in report.diagnosis[0].cause and "+cpu" in report.diagnosis[0].cause
    assert report.installed_build.id == "torch-2.13-cpu"
    assert report.next_step.build.is_gpu
    assert report.devices[0].ok is False and "CPU-only" in report.devices[0].detail


def test_a_cpu_build_passes_where_a_cpu_build_was_meant(catalog):
    result = recorded("torch-2.13.0-cpu-on-gpu-machine")
    manifest = manifest_for(catalog.manifests.values(), "torch")
    cpu_build = next(b for b in manifest.builds if b.id == "torch-2.13-cpu")
    report = diagnose(result, read_profile(PROFILES / "h100-cuda128.yaml"), cpu_build, manifest=manifest,
                      tables=catalog.tables)
    assert report.ok and report.diagnosis == () and report.devices == ()


def test_a_gpu_build_fails_where_a_gpu_build_was_meant_but_no_gpu_is(catalog):
    result = recorded("torch-2.5.1-cu121-no-gpu-machine")
    gpu_build = next(b for b in manifest_for(catalog.manifests.values(), "torch").builds if b.is_gpu)
    report = diagnose(result, read_profile(PROFILES / "no-gpu.yaml"), gpu_build)
    assert not report.ok and "no-gpu-here" in fired(report)


@pytest.mark.parametrize("value, rule", [
    ("", "gpus-hidden"), ("-1", "gpus-hidden"), ("NoDevFiles", "gpus-hidden"),
    ("3", "gpus-hidden"),  # names no GPU of this 2-GPU machine
    ("0", "gpus-not-seen"),  # names a GPU that is there, and still none is seen: something else is wrong
    ("GPU-8c3a5f0e-1b2c-4d5e-9f00-0123456789ab", "gpus-not-seen"),
])
def test_cuda_visible_devices_is_blamed_only_when_it_hides_every_gpu(value, rule, catalog):
    result = recorded("torch-2.5.1-cu121-cvd-empty")
    result = replace(result, environment={**result.environment, "CUDA_VISIBLE_DEVICES": value})
    manifest = manifest_for(catalog.manifests.values(), "torch")
    report = diagnose(result, read_profile(PROFILES / "v100-a100-cuda122.yaml"), manifest=manifest,
                      tables=catalog.tables)
    assert fired(report) == [rule] and not report.ok


def test_a_uuid_that_names_none_of_the_gpus_is_blamed_not_the_machine(catalog):
    # NVML gave the GPUs' UUIDs, and CUDA_VISIBLE_DEVICES names another GPU's: CUDA sees none, as with -1. The
    # report said the machine has no GPU that works.
    value = "GPU-8c3a5f0e-1b2c-4d5e-9f00-0123456789ab"
    machine = read_profile(PROFILES / "v100-a100-cuda122.yaml")
    machine = machine._replace(gpus=tuple(gpu._replace(uuid=f"GPU-0000000{gpu.index}-aaaa-bbbb-cccc-dddddddddddd")
                                          for gpu in machine.gpus))
    shown = narrowed(machine, CUDA_VISIBLE_DEVICES=value)
    assert shown.gpus == () and len(shown.hidden_gpus) == 2
    result = recorded("torch-2.5.1-cu121-cvd-empty")
    result = replace(result, environment={**result.environment, "CUDA_VISIBLE_DEVICES": value})
    report = diagnose(result, shown, manifest=manifest_for(catalog.manifests.values(), "torch"),
                      tables=catalog.tables)
    assert fired(report) == ["gpus-hidden"] and not report.ok


def test_cuda_visible_devices_on_a_machine_without_gpu_is_not_blamed(catalog):
    result = recorded("torch-2.5.1-cu121-no-gpu-machine")
    result = replace(result, environment={**result.environment, "CUDA_VISIBLE_DEVICES": "0"})
    report = diagnose(result, read_profile(PROFILES / "no-gpu.yaml"))
    assert fired(report) == ["no-gpu-here"]


def test_in_a_job_given_a_gpu_the_driver_is_blamed_not_the_job(catalog):
    # Issue 39: JAX's CUDA 12 plugin on a node whose driver is CUDA 11.4 only says that it found no GPU. The job was
    # given GPU 0 (CUDA_VISIBLE_DEVICES=0, SLURM_GPUS_ON_NODE=1): "this Slurm job has no GPU" was wrong. The driver
    # rule says what the facts say: the node's driver cannot run the build's CUDA.
    report = judge("jax-0.10.2-cu12-driver-11.4-in-job", "a100-r470-cuda114", True, catalog)
    assert report.installed_build is not None and report.installed_build.id == "jax-0.10-cu12"
    [finding] = report.diagnosis
    assert finding.rule == "driver-too-old"
    assert "the NVIDIA driver is too old for this build: it supports CUDA 11.4, the build needs CUDA 12.0" \
        == finding.cause
    assert "525.60.13 or newer" in finding.advice  # the first driver for CUDA 12.0 (envs/cuda.yaml)
    assert report.next_step is not None and report.next_step.build.id in finding.advice, finding.advice
    # With a driver that runs CUDA 12, the same job's missing GPU is the GPUs' own business, still not the job's.
    new_driver = read_profile(PROFILES / "a100-r470-cuda114.yaml")._replace(cuda_driver=CudaVersion(12, 2),
                                                                             driver_version=None)
    report = judge("jax-0.10.2-cu12-driver-11.4-in-job", "", True, catalog, profile=new_driver)
    assert fired(report) == ["gpus-not-seen"] and report.next_step is None
    # A job given no GPU at all still hears that it has none.
    no_gpu = recorded("jax-0.10.2-cu12-driver-11.4-in-job")
    no_gpu = replace(no_gpu, environment={"SLURM_JOB_ID": "4343"})
    report = diagnose(no_gpu, read_profile(PROFILES / "no-gpu.yaml"), manifest=catalog.manifests["jax"],
                      tables=catalog.tables, on_target=True)
    assert fired(report) == ["slurm-no-gpu"]


@pytest.mark.parametrize("environment, given", [
    ({"SLURM_JOB_ID": "7"}, False),
    ({"SLURM_JOB_ID": "7", "SLURM_GPUS_ON_NODE": "0", "CUDA_VISIBLE_DEVICES": ""}, False),
    ({"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "NoDevFiles"}, False),
    ({"SLURM_JOB_ID": "7", "SLURM_GPUS_ON_NODE": "1"}, True),
    ({"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "2,3"}, True),
    ({"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "0"}, True),
    ({"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "GPU-8f6c1a2e"}, True),
])
def test_a_job_is_given_gpus_by_what_slurm_and_cuda_visible_devices_say(environment, given):
    from envkit.slurm.job_context import job_given_gpus

    assert job_given_gpus(environment) is given


def test_slurm_advice_asks_for_gpus(catalog):
    report = judge("torch-2.5.1-cu121-slurm-no-gpu", "no-gpu", True, catalog)
    [finding] = report.diagnosis
    assert "4242" in finding.cause
    assert "--gpus-per-node" in finding.advice and "--gres=gpu:" in finding.advice


def test_wrong_results_fail_only_the_gpu_that_gave_them(catalog):
    report = judge("torch-2.5.1-cu121-wrong-results-gpu1", "v100-a100-cuda122", True, catalog)
    assert [(d.index, d.ok) for d in report.devices] == [(0, True), (1, False)]
    assert "GPU 1, NVIDIA A100-PCIE-40GB" in report.diagnosis[0].cause and "3.82" in report.diagnosis[0].cause


def test_numpy2_advice_pins_numpy_in_the_checked_environment(catalog):
    report = judge("tensorflow-2.15-numpy2-import", "h100-cuda128", True, catalog)
    [finding] = report.diagnosis
    assert "cannot be imported" in finding.cause
    assert "/home/ana/envs/dl/bin/python -m pip install 'numpy<2'" in finding.advice


@pytest.mark.parametrize("name", ["torch-not-installed", "auto-nothing-installed"])
def test_advice_to_check_another_environment_says_how_each_command_names_one(name, catalog):
    # doctor takes --python PATH, verify --prefix DIR (its --python does not exist; create's is a version X.Y)
    [finding] = judge(name, "h100-cuda128", True, catalog).diagnosis
    assert "`envkit doctor --python PATH`" in finding.advice and "`envkit verify --prefix DIR`" in finding.advice


def test_libcuda_missing_is_explained_as_no_driver(catalog):
    report = judge("mxnet-cu112-libcuda-missing", "no-gpu", True, catalog)
    assert "NVIDIA driver's own library" in report.diagnosis[0].cause
    assert report.next_step.build.variant == "cpu"  # no GPU here: the build that fits is a CPU one


def test_judged_for_another_machine_uses_the_manifest_build(catalog):
    report = judge("torch-2.14.0-cu130-login-node", "v100x8-cuda130", False, catalog)
    assert report.installed_build.id == "torch-2.14-cu130"
    assert "sm_70" in report.diagnosis[0].cause
    assert len(report.devices) == 8 and not any(d.ok for d in report.devices)
    assert report.next_step.build.id == "torch-2.14-cu126"
    assert "that machine" in report.diagnosis[0].advice


def test_judged_for_another_machine_that_it_fits(catalog):
    report = judge("torch-2.14.0-cu130-login-node", "h100-cuda128", False, catalog)
    assert report.ok is False  # the note alone would pass; but cu130 needs a CUDA 13 driver and hopper has 12.8
    report = judge("torch-2.14.0-cu130-login-node", "b200-cuda130", False, catalog)
    assert report.ok is True and fired(report) == ["gpus-not-checked-here"]
    assert [d.ok for d in report.devices] == [True]
    # The environment checked, by its Python: a bare `envkit doctor` there checks whichever one is active.
    python = report.probe.python_executable
    assert python and f"Run `envkit doctor --python {python}` on that machine" in report.diagnosis[0].advice


def test_multi_gpu_and_bench_results_reach_the_report(catalog):
    report = judge("torch-2.5.1-cu121-v100-a100-pass", "v100-a100-cuda122", True, catalog)
    assert report.probe.multi_gpu.busbw_gbs == pytest.approx(13.107)
    assert [r.tflops for r in report.probe.bench.runs][:2] == [10.464, 86.062]
    assert report.next_step is None  # it works: nothing else to suggest


# --- runs that printed no report -----------------------------------------------------------------------------------

def test_a_probe_cut_off_is_diagnosed_as_a_hang(load_profile):
    result = cut_off("/env/bin/python", 5.0, 7.1, "", "importing torch...\n")
    report = diagnose(result, load_profile("h100-cuda128"))
    assert result.failure == TIMED_OUT and not report.ok
    [finding] = report.diagnosis
    assert finding.rule == "probe-timed-out" and "5 s" in finding.cause and "--probe-timeout 60" in finding.advice


def test_a_hang_on_a_machine_without_gpus_does_not_blame_a_gpu(load_profile):
    # It said "A GPU or driver that hangs is the usual reason: look at `nvidia-smi`" where there is neither.
    result = cut_off("/env/bin/python", 5.0, 7.1, "", "")
    [finding] = diagnose(result, load_profile("no-gpu")).diagnosis
    assert finding.rule == "probe-timed-out" and "nvidia-smi" not in finding.advice
    assert "`/env/bin/python -V`" in finding.advice and "--probe-timeout 60" in finding.advice


def test_python_2_is_told_it_is_too_old(load_profile):
    result = parse_output("/opt/python2.7/bin/python", 2, 0.02, "", (DATA / "python2.7-stderr.txt").read_text())
    report = diagnose(result, load_profile("no-gpu"))
    assert fired(report) == ["python-too-old"] and "Python 3.6 or newer" in report.diagnosis[0].cause


def test_garbage_is_reported_with_what_was_printed(load_profile):
    result = parse_output("/env/bin/python", 139, 0.4, (DATA / "garbage-stdout.txt").read_text(), "")
    report = diagnose(result, load_profile("no-gpu"))
    [finding] = report.diagnosis
    assert finding.rule == "probe-no-report"
    assert "exited with code 139" in finding.cause and "Segmentation fault" in finding.cause


def test_json_that_is_not_a_probe_report_is_reported_not_raised(load_profile):
    for text in ('{"probe_format": 99}', '{"probe_format": 1, "devices": "many"}', "[1, 2]", "null"):
        result = parse_output("/env/bin/python", 0, 0.1, text, "")
        assert not result.reported
        report = diagnose(result, load_profile("no-gpu"))
        assert fired(report) == ["probe-no-report"] and not report.ok


# --- the pieces ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch, capability, expected", [
    (["sm_70", "sm_80"], "8.6", True),  # SASS of the same major, lower minor
    (["sm_70", "sm_80"], "9.0", False),  # no SASS for the major, no PTX
    (["sm_80", "compute_80"], "9.0", True),  # PTX JIT-compiles for newer GPUs
    (["sm_75", "sm_120", "compute_120"], "7.0", False),  # newer code does not run on older GPUs
    (["sm_90a"], "9.0", True),
    ([], "8.0", None),
    (["sm_80"], None, None),
])
def test_covers(arch, capability, expected):
    assert covers(arch, capability) is expected


def test_installed_build_matches_version_line_and_cuda(catalog):
    torch = manifest_for(catalog.manifests.values(), "torch")
    base = recorded("torch-2.14.0-cu130-login-node")
    assert installed_build(torch, base).id == "torch-2.14-cu130"
    assert installed_build(torch, replace(base, version="2.14.1+cu126", cuda="12.6")).id == "torch-2.14-cu126"
    assert installed_build(torch, replace(base, version="2.14.0", gpu_build=False, cuda=None)).id == "torch-2.14-cpu"
    assert installed_build(torch, replace(base, version="2.14.0+cu121", cuda="12.1")) is None
    assert installed_build(torch, replace(base, version="not a version")) is None
    jax = manifest_for(catalog.manifests.values(), "jax")
    jax_gpu = replace(base, framework="jax", version="0.6.2", cuda="12.8")
    assert installed_build(jax, jax_gpu).variant == "cu12"  # a build for the whole CUDA 12 line


def test_parse_cuda():
    assert parse_cuda("12.6") == CudaVersion(12, 6)
    assert parse_cuda("11.8.89") == CudaVersion(11, 8)
    assert parse_cuda(None) is None and parse_cuda("rocm") is None


def test_manual_commands_for_pip_and_conda_builds(catalog):
    torch = next(b for b in manifest_for(catalog.manifests.values(), "torch").builds if b.id == "torch-2.14-cu126")
    venv, pip = manual_commands(torch, "3.12")
    assert venv == "python3.12 -m venv torch-2.14-cu126"
    assert pip.startswith("torch-2.14-cu126/bin/python -m pip install 'torch==2.14.*'")
    assert pip.endswith("--index-url https://download.pytorch.org/whl/cu126")
    tf = next(b for b in manifest_for(catalog.manifests.values(), "tensorflow").builds if b.conda is not None)
    [conda] = manual_commands(tf, "3.9")
    assert conda.startswith(f"conda create -n {tf.id} --override-channels -c https://")
    assert "python=3.9" in conda and tf.conda.packages[0] in conda


def test_advice_for_another_machine_names_it_in_the_commands(catalog):
    # The advised commands used to leave the machine out: pasted on a login node they judged the login node.
    result = recorded("torch-2.14.0-cu130-login-node")
    torch = catalog.manifests["torch"]
    profile = read_profile(PROFILES / "v100x8-cuda130.yaml")
    args = ("--machine", "my profiles/v100.yaml")
    report = diagnose(result, profile, manifest=torch, tables=catalog.tables, on_target=False, machine_args=args)
    assert report.next_step.command == "envkit create torch --build torch-2.14-cu126 --machine 'my profiles/v100.yaml'"
    only_cu130 = torch._replace(builds=tuple(b for b in torch.builds if b.variant == "cu130"))
    report = diagnose(result, profile, manifest=only_cu130, tables=catalog.tables, on_target=False, machine_args=args)
    assert report.next_step is None
    assert ("no build of the torch manifest fits that machine: "
            "`envkit list torch --all --machine 'my profiles/v100.yaml'`") in report.diagnosis[0].advice


@pytest.mark.parametrize("version, cuda, expected", [
    ("2.15.0", "13.2", "torch-2.15-cu132"),  # PyPI's own 2.15.0 is the CUDA 13.2 build (issue 30)
    ("2.14.1", "13.0", "torch-2.14-cu130"),  # and 2.14.x the CUDA 13.0 one
    ("2.14.1+cu126", "12.6", "torch-2.14-cu126"),
])
def test_a_plain_pypi_torch_is_named_by_the_cuda_it_reports(catalog, version, cuda, expected):
    """What `pip install torch` gives carries no local version: the CUDA torch reports names the build."""
    from envkit.probe.result import ProbeResult

    probe = ProbeResult(python_executable="python", exit_code=0, elapsed=0.1, framework="torch", imported=True,
                        version=version, gpu_build=True, cuda=cuda)
    assert installed_build(catalog.manifests["torch"], probe).id == expected


def test_pypis_cpu_torch_on_aarch64_says_where_the_cuda_one_is(catalog):
    report = judge("torch-2.9.1-cpu-pypi-on-gh200", "gh200-r570-cuda128", True, catalog)
    [finding] = report.diagnosis
    assert finding.cause == ("torch 2.9.1 is a CPU-only build (torch.version.cuda is None), what PyPI gives on "
                             "aarch64: it cannot use this machine's 1 GPU")
    assert "PyTorch's CUDA index" in finding.advice and "pytorch/pytorch#160162" in finding.advice
    assert report.next_step.build.id == "torch-2.14-cu126" and "--machine" not in report.next_step.command
    assert report.probe.machine == "aarch64"


def test_a_generic_cuda_torch_on_a_jetson_is_told_to_take_a_jetson_build(catalog):
    report = judge("torch-2.6.0-cu124-sbsa-on-jetson-orin", "jetson-agx-orin-jp62", True, catalog)
    finding = next(f for f in report.diagnosis if f.rule == "generic-cuda-on-jetson")
    assert finding.cause == ("torch 2.6.0.dev20250123+cu124 is a generic aarch64 CUDA build (torch-2.6-cu124 of "
                             "envkit's manifests): its CUDA libraries are for server ARM (Grace, GB10), not for this "
                             "Jetson's integrated GPU under JetPack 6.2 (L4T 36.4.3)")
    assert report.next_step.build.id == "torch-2.8-jp6-cu126"
    # On JetPack 7 (Thor) the same kind of build is what runs: not blamed.
    thor = judge("torch-2.6.0-cu124-sbsa-on-jetson-orin", "jetson-agx-thor-jp7", True, catalog)
    assert "generic-cuda-on-jetson" not in fired(thor)


def test_a_jetpack_older_than_the_builds_is_said_when_judged_from_elsewhere(catalog, tmp_path):
    """An environment of the JetPack 6 build judged for a JetPack 5.1.2 board (`envkit doctor --machine`)."""
    result = replace(recorded("torch-2.9.1-cpu-pypi-on-gh200"), version="2.8.0", gpu_build=True, cuda="12.6")
    jp5 = read_profile(PROFILES / "jetson-agx-orin-jp62.yaml")._replace(l4t=L4tVersion(35, 4, 1),
                                                                        cuda_driver=CudaVersion(11, 4))
    manifest = manifest_for(catalog.manifests.values(), "torch")
    report = diagnose(result, jp5, manifest=manifest, tables=catalog.tables, on_target=False)
    assert report.installed_build.id == "torch-2.8-jp6-cu126"  # a plain 2.8.0 with CUDA 12.6: the Jetson AI Lab's
    [finding] = [f for f in report.diagnosis if f.rule == "does-not-fit"]
    assert "built for Jetsons of L4T >=36.4,<37; this one is JetPack 5.1.2 (L4T 35.4.1)" in finding.cause
    assert report.next_step.build.id == "torch-2.1-jp512-cu114"


def test_a_failed_check_never_advises_the_very_build_the_environment_was_made_from(catalog):
    """A CPU environment holding a CUDA torch (its index served PyPI's build): the build that fits this machine is
    the one it was made from, so `envkit create torch --build THAT` would make the same again. The report says what
    is wrong instead, and names no such command."""
    result = recorded("torch-2.5.1-cu121-no-gpu-machine")
    profile = read_profile(PROFILES / "no-gpu.yaml")
    manifest = manifest_for(catalog.manifests.values(), "torch")
    made_from = diagnose(result, profile, manifest=manifest, tables=catalog.tables).next_step.build
    assert made_from.variant == "cpu"  # what create picked for this machine, and made the environment from
    report = diagnose(result, profile, made_from, manifest=manifest, tables=catalog.tables)
    assert not report.ok and report.next_step is None
    text = report_text(report)
    assert f"--build {made_from.id}" not in text and "envkit create" not in text
    assert f"{made_from.id} fits, and this environment was made from it, but torch 2.5.1+cu121 is not that build" \
        in text
