"""When the pick on a machine with GPUs is a CPU build: why no GPU build fits, in one plain sentence. Pure.

A CPU build on a GPU machine is almost never what a user wants, and it is easy to miss in a table: `envkit list`
and the plan of `envkit create` say it first, and `create` without a terminal needs `--cpu` (or `--build`) to go on.
"""

from __future__ import annotations

from typing import Optional

from envkit.machines.platforms import DEFAULT_PLATFORM, machine_of
from envkit.machines.profile import MachineProfile
from envkit.pick.resolve import Candidate, Resolution


def gpu_unused(resolution: Resolution, profile: MachineProfile) -> Optional[str]:
    """The reason the machine's GPUs go unused by the pick, or None when they are used (or there are none)."""
    selected = resolution.selected
    if selected is None or selected.build.is_gpu:
        return None
    if not profile.gpus:
        if not profile.hidden_gpus:
            return None
        count = len(profile.hidden_gpus)
        gpus = "the machine's GPU" if count == 1 else f"all {count} of the machine's GPUs"
        return (f"CUDA_VISIBLE_DEVICES hides {gpus}, so it is judged as having none and the pick is a CPU build: "
                "unset the variable or set it to the GPUs to use (in a Slurm job: ask for GPUs) to have them judged")
    name = resolution.manifest.name
    # The builds for the machine's GPUs: ROCm builds for AMD GPUs, CUDA builds for NVIDIA ones (both on a machine
    # of both): a CUDA build's "needs an NVIDIA GPU" is no news on an AMD machine.
    gpu_builds = [c for c in resolution.candidates if c.build.is_gpu
                  and (profile.amd_gpus if c.build.is_rocm else profile.nvidia_gpus)]
    # A Jetson build says nothing useful about a machine that is not one (nor about a Jetson of another JetPack
    # where a build for its own platform was judged): the closest is taken among the others where there are any.
    same_kind = [c for c in gpu_builds if c.build.is_jetson == profile.is_jetson]
    machine = _machine_words(profile)
    if not gpu_builds:
        kind = "ROCm (AMD GPU)" if not profile.nvidia_gpus else "GPU" if not profile.amd_gpus else "CUDA or ROCm"
        return f"the manifest {name} has no {kind} build, so the GPUs ({machine}) go unused"
    closest = _closest(same_kind or gpu_builds, profile)
    why = "; ".join(closest.reasons) or "it does not fit"
    if profile.is_jetson and not same_kind and why.startswith("a generic aarch64 CUDA build"):
        return (f"the manifest {name} has no build made for Jetson, and its generic aarch64 CUDA builds do not run on "
                f"{machine} (the closest, {closest.build.id}: {why}): the pick is a CPU build")
    return (f"no {name} GPU build in the manifests runs on {machine}, so the pick is a CPU build: the closest, "
            f"{closest.build.id}, {why}")


def _closest(candidates: list[Candidate], profile: MachineProfile) -> Candidate:
    """The GPU build that misses by the least. Among those with the fewest reasons: where some would run on this
    driver (they miss on GPU code or Python), the newest of them (the newest carries the newest GPUs' code); where
    every one needs a newer driver, the one with the oldest CUDA (the nearest to the driver's reach)."""
    fewest = min(len(c.reasons) for c in candidates)
    near = [c for c in candidates if len(c.reasons) == fewest]
    within_reach = [c for c in near if c.build.is_rocm or not _needs_newer_driver(c, profile)]
    if within_reach:
        return max(within_reach, key=lambda c: (c.build.cuda or (0, 0), c.build.version))
    return min(near, key=lambda c: (c.build.cuda or (0, 0), tuple(-part for part in c.build.version.release)))


def _needs_newer_driver(candidate: Candidate, profile: MachineProfile) -> bool:
    cuda = candidate.build.cuda
    return profile.cuda_driver is None or (cuda is not None and cuda > profile.cuda_driver)


def _machine_words(profile: MachineProfile) -> str:
    from envkit.pick.rocm import amd_words

    amd = amd_words(profile)
    driver = f"a driver for CUDA {profile.cuda_driver}" if profile.cuda_driver else "no known driver CUDA"
    archs = sorted({g.compute_capability.sm for g in profile.gpus if g.compute_capability})
    nvidia = f"{driver} and {', '.join(archs) or 'GPUs of unknown compute capability'}"
    words = amd if not profile.nvidia_gpus and amd is not None else nvidia if amd is None else f"{nvidia}; {amd}"
    if profile.l4t is not None:
        return f"a Jetson (L4T {profile.l4t}) with {words}"
    return words if profile.platform == DEFAULT_PLATFORM else f"an {machine_of(profile.platform)} machine with {words}"
