"""Which detected GPUs count under CUDA_VISIBLE_DEVICES in its other forms (UUIDs, MIG devices, CUDA's own order),
and what NVML's errors on a machine that has a driver are said to mean."""

from __future__ import annotations

import pynvml
import pytest
from detect_fakes import A100, V100, FakeGpu, FakeNvml

from envkit.detect import detect_machine
from envkit.slurm.job_context import apply_job_context, job_context

UUID_0 = "GPU-4b1c0d2e-1111-2222-3333-444455556666"
UUID_1 = "GPU-4b77aa00-7777-8888-9999-000011112222"
MIG_1 = ("MIG-0a1b2c3d-aaaa-bbbb-cccc-ddddeeeeffff", None, "MIG-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff")


def seen(tables, no_proc, no_smi, environ, gpus=None):
    """The GPUs (NVML indexes) that count, and the notes, for a process with ``environ``."""
    gpus = gpus or (FakeGpu("NVIDIA H100 80GB HBM3", (9, 0), 81559, uuid=UUID_0),
                    FakeGpu("NVIDIA H100 80GB HBM3", (9, 0), 81559, uuid=UUID_1, mig=MIG_1))
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=FakeNvml(gpus=gpus), proc_root=no_proc,
                             smi_command=no_smi)
    judged = apply_job_context(profile, job_context(environ))
    return [gpu.index for gpu in judged.gpus], [gpu.index for gpu in judged.hidden_gpus], judged.notes


@pytest.mark.parametrize("value, counted", [
    (UUID_1, [1]),  # a full GPU UUID
    ("GPU-4b77", [1]),  # a unique prefix of one, as CUDA takes it
    (f"{UUID_1},{UUID_0}", [0, 1]),
    (MIG_1[2], [1]),  # a MIG device of GPU 1: GPU 1's architecture is what runs
    (f"MIG-{UUID_1}/1/0", [1]),  # the older MIG form (R450/R460): MIG-<GPU UUID>/<GI>/<CI>
    (f"{UUID_0},GPU-ffff", [0]),  # CUDA stops at the first entry that names no GPU
    ("GPU-ffff0000", []),  # none: CUDA sees no GPU
    ("GPU-4b", []),  # a prefix of both GPUs' UUIDs names neither
])
def test_uuids_in_cuda_visible_devices_are_matched_to_nvmls_gpus(tables, no_proc, no_smi, value, counted):
    gpus, hidden, notes = seen(tables, no_proc, no_smi, {"CUDA_VISIBLE_DEVICES": value})
    assert gpus == counted
    assert hidden == [index for index in (0, 1) if index not in counted]
    assert any(f"({len(counted)} of the 2 NVML lists)" in note for note in notes)


def test_inside_a_slurm_job_a_uuid_picks_the_jobs_gpu(tables, no_proc, no_smi):
    environ = {"SLURM_JOB_ID": "88", "SLURMD_NODENAME": "h100-03", "CUDA_VISIBLE_DEVICES": MIG_1[0]}
    gpus, hidden, notes = seen(tables, no_proc, no_smi, environ)
    assert (gpus, hidden) == ([1], [0])
    assert any(note.startswith("inside Slurm job 88 on node h100-03") for note in notes)


def test_gpus_whose_order_cuda_and_nvml_may_disagree_on_are_all_kept_and_said(tables, no_proc, no_smi):
    # CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID: on a V100 + A100 machine its GPU 0 is
    # the A100, NVML's GPU 0 the V100.
    gpus, hidden, notes = seen(tables, no_proc, no_smi, {"CUDA_VISIBLE_DEVICES": "0"}, gpus=(V100, A100))
    assert (gpus, hidden) == ([0, 1], [])
    assert any("CUDA_DEVICE_ORDER=PCI_BUS_ID" in note and "cannot tell which" in note for note in notes)
    ordered = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert seen(tables, no_proc, no_smi, ordered, gpus=(V100, A100))[:2] == ([0], [1])


@pytest.mark.parametrize("code, words", [
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "rebooted"),  # a driver upgraded without a reboot
    (pynvml.NVML_ERROR_NO_PERMISSION, "/dev/nvidia"),
])
def test_nvml_failures_of_a_machine_with_a_driver_say_what_they_mean(tables, no_proc, no_smi, code, words):
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=FakeNvml(errors={"nvmlInit": code}),
                             proc_root=no_proc, smi_command=no_smi)
    [said] = [note for note in profile.notes if note.startswith("NVML:")]
    assert words in said


def test_a_gpu_that_fell_off_the_bus_is_said_to_be_unusable(tables, no_proc, no_smi):
    nvml = FakeNvml(gpus=(A100, A100), errors={("nvmlDeviceGetHandleByIndex", 1): pynvml.NVML_ERROR_GPU_IS_LOST})
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=nvml, proc_root=no_proc, smi_command=no_smi)
    assert any(note.startswith("NVML: GPU 1: GPU is lost") and "reset" in note for note in profile.notes)


def test_gpus_this_process_may_not_open_are_not_counted(tables, make_proc, no_smi):
    # A Slurm job whose devices are limited (cgroup): NVML counts the node's 4 GPUs and refuses handles to the 3
    # not given; CUDA sees 1, numbered 0. They were counted, their names taken from /proc.
    refused = {("nvmlDeviceGetHandleByIndex", index): pynvml.NVML_ERROR_NO_PERMISSION for index in (0, 1, 3)}
    nvml = FakeNvml(gpus=(A100, A100, V100, A100), errors=refused)
    proc = make_proc("version-r535-proprietary-x86_64.txt",
                     {f"0000:0{n}:00.0": "information-r535-a100.txt" for n in range(4)})
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=nvml, proc_root=proc, smi_command=no_smi)
    assert [(gpu.index, gpu.name) for gpu in profile.gpus] == [(0, V100.name)]
    assert profile.sources["gpus"] == "nvml"
    assert sum("may not open it" in note for note in profile.notes) == 3
    job = apply_job_context(profile, job_context({"SLURM_JOB_ID": "9", "CUDA_VISIBLE_DEVICES": "0"}))
    assert [gpu.name for gpu in job.gpus] == [V100.name] and job.hidden_gpus == ()
