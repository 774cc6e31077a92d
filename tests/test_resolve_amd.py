"""Picks for AMD GPUs on the shipped manifests: every AMD GPU's exact gfx target in the build's list (no fallback),
AMD's window between the amdgpu driver and the ROCm user space a build bundles (and where envkit cannot judge it),
consumer cards outside every list getting the CPU build with the reason, a machine with NVIDIA and AMD GPUs judged as
both, and fleets split by vendor and target."""

from __future__ import annotations

import pytest

from envkit.machines.fleet import Machine, fleet_of
from envkit.machines.profile import profile_from_dict
from envkit.pick.cpu_fallback import gpu_unused
from envkit.pick.fleet_resolve import resolve_fleet
from envkit.pick.resolve import resolve


def amd_machine(gfx="gfx942", count=1, driver="6.12.12", name="AMD Instinct MI300X", nvidia=()):
    gpus = [{"name": n, "compute_capability": cc} for n, cc in nvidia]
    gpus += [{"index": i, "name": name, "vendor": "amd", "gfx": gfx} for i in range(count)]
    data = {"driver_version": "580.95.05" if nvidia else None, "cuda_driver": "13.0" if nvidia else None,
            "amdgpu": driver, "gpus": gpus}
    return profile_from_dict(data, "test")


def torch(catalog, profile):
    return resolve(catalog.manifests["torch"], profile, catalog.tables)


def reasons(resolution, build_id):
    return next(c for c in resolution.candidates if c.build.id == build_id).reasons


def test_an_mi300x_on_rocm_6_4s_driver_gets_the_newest_build_inside_amds_window(catalog):
    resolution = torch(catalog, amd_machine(count=8))
    assert resolution.selected.build.id == "torch-2.9-rocm6.4"
    # ROCm 6.4's driver serves user spaces 6.1 to 7.0 (AMD's matrix): the 7.1 and 7.2 builds are refused
    assert reasons(resolution, "torch-2.14-rocm7.2") == (
        "needs a driver AMD supports ROCm 7.2 on; amdgpu 6.12.12, ROCm 6.4's driver, supports ROCm 6.1 to 7.0",)
    # 2.10 rocm7.0 fits too, but its gfx list is not its own wheels': not picked over the confirmed 2.9
    assert "torch-2.10-rocm7.0" in {c.build.id for c in resolution.compatible}
    assert resolution.selected.reasons[1] == "AMD GPUs 0-7, AMD Instinct MI300X (gfx942): runs the build's gfx942 code"


def test_a_newer_driver_takes_the_newest_build_and_the_kernels_own_is_not_judged(catalog):
    # 30.30 is the driver of ROCm 7.2 (its /sys/module/amdgpu/version is not in rocm.yaml): unplaced, not refused
    for driver in ("30.30.3", "kernel 6.8.0-45-generic"):
        resolution = torch(catalog, amd_machine(driver=driver))
        assert resolution.selected.build.id == "torch-2.14-rocm7.2", driver
    kernel = torch(catalog, amd_machine(driver="kernel 6.8.0-45-generic")).selected.reasons[0]
    assert "the kernel's own amdgpu (Linux 6.8.0-45-generic)" in kernel and "not checked" in kernel
    assert "weaker than NVIDIA's driver table" in kernel


def test_a_driver_read_from_one_report_is_said_not_refused_on(catalog):
    # amdgpu 6.8.x as ROCm 6.2's driver is unconfirmed in rocm.yaml: outside its window, said, and still picked
    resolution = torch(catalog, amd_machine(driver="6.8.5"))
    assert resolution.selected.build.id == "torch-2.14-rocm7.2"
    assert resolution.selected.reasons[0].startswith("needs a driver AMD supports ROCm 7.2 on; amdgpu 6.8.5, ROCm 6.2's "
                                                     "driver, supports ROCm 6.0 to 7.0; not refused, since")


@pytest.mark.parametrize("gfx, picked", [
    ("gfx90a", "torch-2.14-rocm7.2"), ("gfx1151", "torch-2.14-rocm7.2"), ("gfx950", "torch-2.14-rocm7.2"),
    ("gfx1201", "torch-2.14-rocm7.2"),
])
def test_every_target_in_a_list_runs_it(catalog, gfx, picked):
    assert torch(catalog, amd_machine(gfx=gfx, driver="kernel 6.14.0")).selected.build.id == picked


def test_strix_halo_gets_no_rocm6_build_its_wheels_lack_gfx1151(catalog):
    resolution = torch(catalog, amd_machine(gfx="gfx1151", name="AMD Radeon 8060S", driver="6.12.12"))
    # ROCm 6.4's driver serves up to ROCm 7.0; of the builds there, only the rocm7 ones carry gfx1151: 2.10 rocm7.0,
    # unconfirmed, is picked since no confirmed GPU build fits
    assert resolution.selected.build.id == "torch-2.10-rocm7.0"
    why = reasons(resolution, "torch-2.9-rocm6.4")
    assert why == ("AMD GPU 0, AMD Radeon 8060S (gfx1151): no kernels for gfx1151: this build has gfx900, gfx906, "
                   "gfx908, gfx90a, gfx942, gfx1030, gfx1100, gfx1101, gfx1102, gfx1200, gfx1201, and AMD GPUs have no "
                   "fallback to another target's code",)


def test_a_consumer_card_outside_every_list_gets_the_cpu_build_with_the_reason_and_no_override(catalog):
    profile = amd_machine(gfx="gfx1032", name="AMD Radeon RX 6650 XT", driver="kernel 6.8.0")
    for manifest in catalog.manifests.values():
        resolution = resolve(manifest, profile, catalog.tables)
        assert not resolution.selected.build.is_gpu, manifest.name
        every_word = " ".join(r for c in resolution.candidates for r in c.reasons) + (gpu_unused(resolution, profile)
                                                                                     or "")
        assert "HSA_OVERRIDE" not in every_word  # never suggested
    torch_reason = gpu_unused(torch(catalog, profile), profile)
    assert torch_reason.startswith("no torch GPU build in the manifests runs on amdgpu kernel 6.8.0 and gfx1032, so "
                                   "the pick is a CPU build: the closest, torch-2.14-rocm7.2, AMD GPU 0, AMD Radeon RX "
                                   "6650 XT (gfx1032): no kernels for gfx1032")
    mxnet = resolve(catalog.manifests["mxnet"], profile, catalog.tables)
    assert gpu_unused(mxnet, profile).startswith("the manifest mxnet has no ROCm (AMD GPU) build")


def test_an_unknown_target_asks_for_it_and_cuda_builds_say_the_gpus_are_amd(catalog):
    resolution = torch(catalog, amd_machine(gfx=None))
    assert reasons(resolution, "torch-2.14-rocm7.2")[-1] == (
        "AMD GPU 0, AMD Instinct MI300X (unknown gfx target): gfx target unknown; pass --gpu-arch gfxNNNN (the target "
        "`rocminfo` prints)")
    assert reasons(resolution, "torch-2.14-cu130") == (
        "needs an NVIDIA GPU; the machine's GPUs are AMD: a CUDA build cannot use them",)


def test_a_machine_with_nvidia_and_amd_gpus_is_judged_as_both(catalog):
    one_a100_two_mi210 = amd_machine(gfx="gfx90a", count=2, name="AMD Instinct MI210",
                                     nvidia=(("NVIDIA A100-SXM4-40GB", "8.0"),))
    resolution = torch(catalog, one_a100_two_mi210)
    assert resolution.selected.build.is_rocm  # two GPUs before one
    assert "GPU 0, NVIDIA A100-SXM4-40GB (sm_80): not used by a ROCm build" in resolution.selected.reasons
    cuda = next(c for c in resolution.candidates if c.build.id == "torch-2.14-cu130")
    assert cuda.compatible and cuda.gpus_used == 1
    assert "AMD GPUs 0-1, AMD Instinct MI210 (gfx90a): not used by a CUDA build" in cuda.reasons
    # with more NVIDIA GPUs than AMD ones, a CUDA build is the pick
    three_a100 = amd_machine(gfx="gfx90a", name="AMD Instinct MI210", nvidia=(("NVIDIA A100-SXM4-40GB", "8.0"),) * 3)
    assert torch(catalog, three_a100).selected.build.id == "torch-2.15-cu130"
    # a framework without ROCm builds uses the NVIDIA GPU
    assert resolve(catalog.manifests["jax"], one_a100_two_mi210, catalog.tables).selected.build.is_gpu


def test_a_fleet_splits_by_vendor_and_by_target(catalog):
    machines = [Machine("mi300x", amd_machine(count=8)),
                Machine("mi210", amd_machine(gfx="gfx90a", name="AMD Instinct MI210", driver="kernel 6.8.0")),
                Machine("radeon", amd_machine(gfx="gfx1032", name="AMD Radeon RX 6650 XT", driver="kernel 6.8.0")),
                Machine("h100", profile_from_dict({"driver_version": "570.86.15", "cuda_driver": "12.8", "gpus": [
                    {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}]}, "h100"))]
    result = resolve_fleet(catalog.manifests["torch"], fleet_of(machines), catalog.tables)
    assert result.selected is None or not result.selected.build.is_gpu
    groups = {tuple(group.machines): group.selected.build.id if group.selected else None for group in result.groups}
    assert groups[("mi300x", "mi210")] == "torch-2.9-rocm6.4"  # both targets are in its list; the 6.4 driver's window
    assert groups[("h100",)] == "torch-2.14-cu126"
    assert groups[("radeon",)] == "torch-2.15-cpu"  # gfx1032 is in no ROCm list: a CPU group of its own
