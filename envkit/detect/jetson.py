"""This machine's platform and, on a Jetson, its Linux for Tegra release and board: what envkit.detect adds to the
driver and GPUs the probes found.

- The platform is the CPU the kernel runs (``uname -m``): x86_64 is linux-64, aarch64 linux-aarch64 (Grace, DGX
  Spark, Jetson). Another CPU is bad input: envkit makes no environments there.
- A Jetson is an aarch64 machine with ``/etc/nv_tegra_release``, whose first line names its L4T release ("# R36
  (release), REVISION: 4.4, ..." is 36.4.4); JetPack follows from it (cuda.yaml's ``jetpack`` table). A file that
  says something else is bad input: nothing could be judged right there.
- Its GPU is the board's integrated one, named after the board (the device tree's model, "NVIDIA Jetson AGX Orin
  Developer Kit" gives "Jetson AGX Orin"): nvidia-smi calls it "Orin (nvgpu)", and JetPack 5 has no nvidia-smi or
  NVML at all, so the device tree is also where the GPU comes from when no probe listed one. Its CUDA is the one its
  JetPack ships when no probe reported one. NVML reports no memory for it: the board's memory is shared.

Reads two small files and never blocks; ``root`` and ``machine`` point it elsewhere (tests).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from envkit.errors import ProfileError
from envkit.machines.platforms import LINUX_AARCH64, platform_of_machine, supported_text
from envkit.machines.profile import CUDA_DRIVER, GPUS, L4T, PLATFORM, Gpu, MachineProfile
from envkit.versions import L4tVersion

if TYPE_CHECKING:
    from envkit.machines.cuda import CudaTable
    from envkit.machines.gpu_names import GpuNameTable

TEGRA_RELEASE = "/etc/nv_tegra_release"
DEVICE_TREE_MODEL = "/proc/device-tree/model"
# "# R36 (release), REVISION: 4.4, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: ..."
_RELEASE = r"#\s*R([0-9]{2})\s*\(release\),\s*REVISION:\s*([0-9]{1,2})\.([0-9]{1,2})\s*(,|$)"
_MOST = 4096  # bytes read of each file: both are one or a few lines
_HINT = (f"Restore {TEGRA_RELEASE} as JetPack wrote it, or describe the machine in a profile (platform, l4t) and "
         "give it with --machine.")


def parse_tegra_release(text: str) -> L4tVersion:
    """The L4T release the first line of /etc/nv_tegra_release names; ValueError saying what the line is not."""
    first = text.splitlines()[0].strip() if text.strip() else ""
    match = re.match(_RELEASE, first)
    if match is None:
        shown = first[:120] or "nothing"
        raise ValueError(f"its first line is {shown!r}, not '# R36 (release), REVISION: 4.4, ...' as JetPack writes "
                         "it")
    return L4tVersion(int(match[1]), int(match[2]), int(match[3]))


def board_name(model: str) -> str:
    """A Jetson's board as users name it, from its device tree's model: "NVIDIA Jetson AGX Orin Developer Kit" ->
    "Jetson AGX Orin"."""
    name = " ".join(model.replace("\0", " ").split())
    name = re.sub(r"^NVIDIA\s+", "", name)
    return re.sub(r"\s+(Engineering Reference\s+)?Developer Kit\b", "", name).strip() or model.strip()


def this_platform(machine: Optional[str] = None) -> str:
    """This machine's platform from its CPU (``uname -m``); ProfileError (exit 2) for one envkit makes nothing for."""
    cpu = machine if machine is not None else os.uname().machine
    platform = platform_of_machine(cpu)
    if platform is None:
        raise ProfileError(f"this machine's CPU is {cpu}: envkit makes environments for {supported_text()} only",
                           hint="Run envkit on one of those, or give such a machine's profile with --machine.")
    return platform


def with_platform(profile: MachineProfile, cuda: CudaTable, gpu_names: GpuNameTable, root: Path = Path("/"),
                  machine: Optional[str] = None) -> MachineProfile:
    """``profile`` with this machine's platform, and on a Jetson its L4T release, its board's GPU and its CUDA."""
    cpu = machine if machine is not None else os.uname().machine
    platform = this_platform(cpu)
    sources = {**profile.sources, PLATFORM: f"uname -m ({cpu})"}
    profile = profile._replace(platform=platform, sources=sources)
    if platform != LINUX_AARCH64:
        return profile
    text = _read(root / TEGRA_RELEASE.lstrip("/"))
    if text is None:
        return profile
    try:
        l4t = parse_tegra_release(text)
    except ValueError as exc:
        raise ProfileError(f"{TEGRA_RELEASE}: {exc}: this Jetson's Linux for Tegra release cannot be read",
                           hint=_HINT) from None
    return _jetson(profile._replace(l4t=l4t, sources={**sources, L4T: TEGRA_RELEASE}), cuda, gpu_names,
                   _read(root / DEVICE_TREE_MODEL.lstrip("/")))


def _jetson(profile: MachineProfile, cuda: CudaTable, gpu_names: GpuNameTable, model: Optional[str]
            ) -> MachineProfile:
    assert profile.l4t is not None
    sources, notes = dict(profile.sources), list(profile.notes)
    jetpack = cuda.jetpack_for(profile.l4t)
    board = board_name(model) if model and model.strip("\0 \n") else None
    said = jetpack.describe(profile.l4t) if jetpack else f"L4T {profile.l4t}, a JetPack cuda.yaml does not list"
    runs = "Jetson builds" + (" and the ordinary aarch64 CUDA packages" if jetpack and jetpack.sbsa else " only")
    notes.append(f"{board or 'Jetson'}, {said}: its GPU is the board's integrated one (Tegra), which runs {runs}; "
                 "nvidia-smi reports no memory for it (the board's memory is shared)")
    gpus = profile.gpus
    if board is not None and len(gpus) == 1:  # the integrated GPU, as nvidia-smi or NVML named it: the board's name
        gpu = gpus[0]
        capability = gpu.compute_capability or gpu_names.lookup(board) or gpu_names.lookup(gpu.name)
        gpus = (gpu._replace(name=board, compute_capability=capability,
                             source=f"{gpu.source} + {DEVICE_TREE_MODEL}"),)
    elif board is not None and not gpus:  # JetPack 5: no nvidia-smi, no NVML; the device tree names the board
        capability = gpu_names.lookup(board)
        gpus = (Gpu(index=0, name=board, compute_capability=capability,
                    source=f"{DEVICE_TREE_MODEL} + envs/gpus.yaml" if capability else DEVICE_TREE_MODEL),)
        sources[GPUS] = DEVICE_TREE_MODEL
        if capability is None:
            notes.append(f"GPU 0, {board}: compute capability unknown (envs/gpus.yaml does not list the board)")
    elif not gpus:
        notes.append(f"{DEVICE_TREE_MODEL}: cannot be read: the Jetson's GPU is not known")
    cuda_driver = profile.cuda_driver
    if cuda_driver is None and jetpack is not None:
        cuda_driver = jetpack.cuda
        sources[CUDA_DRIVER] = f"L4T {profile.l4t} + envs/cuda.yaml (JetPack {jetpack.jetpack})"
    return profile._replace(gpus=gpus, cuda_driver=cuda_driver, sources=sources, notes=tuple(notes))


def _read(path: Path) -> Optional[str]:
    try:
        with open(path, "rb") as handle:
            return handle.read(_MOST).decode("utf-8", errors="replace")
    except OSError:
        return None
