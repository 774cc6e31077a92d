"""Whether a ROCm build runs on a machine's AMD GPUs. Pure functions: no I/O.

A ROCm build runs when (1) EVERY AMD GPU's gfx target is in the build's list, exactly: AMD's code objects have no
PTX-like fallback, so a gfx1032 does not run a build that carries gfx1030 (HSA_OVERRIDE_GFX_VERSION makes the runtime
load another target's code; envkit never sets it nor picks a build on the hope that it works); and (2) AMD supports
the build's ROCm user space on the machine's amdgpu driver. That window (AMD's user and kernel-space support matrix,
rocm.yaml) is weaker than NVIDIA's table: it is stated per driver release of AMD's own packaged driver, so the
kernel's own amdgpu, or a driver rocm.yaml cannot place, is not judged at all (said so, not refused), and a release
read from a single report is said, not refused on. NVIDIA GPUs beside the AMD ones are not used by a ROCm build.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from envkit.catalog.model import Build, Tables
from envkit.machines.profile import Gpu, MachineProfile
from envkit.pick.gpu_groups import gpu_group, groups


class RocmVerdict(NamedTuple):
    compatible: bool
    reasons: tuple[str, ...]  # why not, or (when it runs) what was checked
    gpus_used: int


def rocm_verdict(build: Build, profile: MachineProfile, tables: Tables, common: Sequence[str]) -> RocmVerdict:
    """One ROCm build against one machine: compatible or not, and why (``common``: the Python's and C library's
    problems, judged by the caller)."""
    amd = profile.amd_gpus
    if not amd:
        problem = "needs an AMD GPU; the machine has none" if not profile.gpus else (
            "needs an AMD GPU (ROCm); the machine's GPUs are NVIDIA: a ROCm build cannot use them")
        return RocmVerdict(False, (problem, *common), 0)
    problems: list[str] = []
    notes: list[str] = []
    driver_ok, driver_words = _driver(build, profile, tables)
    (notes if driver_ok else problems).append(driver_words)
    for group in groups(amd):
        ok, words = _code(build, group[0], tables)
        (notes if ok else problems).append(f"{gpu_group(group)}: {words}")
    if profile.nvidia_gpus and not problems:
        notes.append(f"{gpu_group(profile.nvidia_gpus)}: not used by a ROCm build")
    problems += common
    compatible = not problems
    return RocmVerdict(compatible, tuple(notes if compatible else problems), len(amd) if compatible else 0)


def _code(build: Build, gpu: Gpu, tables: Tables) -> tuple[bool, str]:
    """(runs, why) for one AMD GPU: its exact gfx target in the build's list."""
    if gpu.gfx is None:
        return False, "gfx target unknown; pass --gpu-arch gfxNNNN (the target `rocminfo` prints)"
    if gpu.gfx in build.gfx:
        return True, f"runs the build's {gpu.gfx} code"
    known = "" if tables.amd.knows(gpu.gfx) else f" ({gpu.gfx} is not a target envs/rocm.yaml knows)"
    return False, (f"no kernels for {gpu.gfx}{known}: this build has {', '.join(build.gfx)}, and AMD GPUs have no "
                   "fallback to another target's code")


def _driver(build: Build, profile: MachineProfile, tables: Tables) -> tuple[bool, str]:
    """(runs, why): the build's ROCm user space on the machine's amdgpu driver, by AMD's support matrix."""
    driver = profile.amdgpu
    rocm = build.rocm
    if driver is None:
        return True, (f"ROCm {rocm} user space; the amdgpu driver is unknown, so AMD's driver window is not "
                      "checked")
    if not driver.packaged:
        return True, (f"ROCm {rocm} user space on the kernel's own amdgpu (Linux {driver.version}): AMD states its "
                      "window for its packaged driver only, so this one is not checked (weaker than NVIDIA's driver "
                      "table)")
    window = tables.amd.window(driver)
    if window is None:
        return True, (f"ROCm {rocm} user space on amdgpu {driver}, a driver envs/rocm.yaml cannot place in AMD's "
                      "support matrix: not checked")
    release = f"amdgpu {driver}, ROCm {window.release}'s driver"
    if rocm in window.user_space:
        return True, f"ROCm {rocm} on {release} (AMD supports ROCm {window.span()} on it)"
    outside = f"needs a driver AMD supports ROCm {rocm} on; {release}, supports ROCm {window.span()}"
    if window.unconfirmed:
        return True, f"{outside}; not refused, since the driver's release is unconfirmed ({window.unconfirmed})"
    return False, outside


def left_unused(build: Build, profile: MachineProfile) -> Optional[str]:
    """On a machine with NVIDIA and AMD GPUs, the GPUs a GPU build cannot use, in words; None elsewhere."""
    if not build.is_gpu or not profile.amd_gpus or not profile.nvidia_gpus:
        return None
    unused = profile.nvidia_gpus if build.is_rocm else profile.amd_gpus
    kind = "NVIDIA" if build.is_rocm else "AMD"
    return (f"{build.id} uses the {'AMD' if build.is_rocm else 'NVIDIA'} GPUs; the {len(unused)} {kind} GPU(s) go "
            f"unused ({', '.join(sorted({gpu.description for gpu in unused}))}): one environment holds a CUDA or a ROCm "
            "build, not both")


def amd_words(profile: MachineProfile) -> Optional[str]:
    """The machine's AMD side in a few words ("amdgpu 6.12.12 and gfx942"), or None without AMD GPUs."""
    if not profile.amd_gpus:
        return None
    targets = sorted({gpu.gfx or "an unknown gfx target" for gpu in profile.amd_gpus})
    driver = f"amdgpu {profile.amdgpu}" if profile.amdgpu else "an unknown amdgpu driver"
    return f"{driver} and {', '.join(targets)}"
