"""The names facts are recorded as coming from (MachineProfile.sources, Gpu.source), shared by the probes."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

from envkit.machines.profile import Gpu

if TYPE_CHECKING:  # annotations only: detection that looks nothing up in the tables imports none of this
    from envkit.machines.gpu_names import GpuNameTable

NVML = "nvml"
PROC_VERSION = "/proc/driver/nvidia/version"
PROC_GPUS = "/proc/driver/nvidia/gpus"
SMI = "nvidia-smi"
# The highest CUDA a driver supports, taken from its version and cuda.yaml's table when no probe reports it.
DERIVED_CUDA = "driver version + envs/cuda.yaml"
GPU_TABLE = "envs/gpus.yaml"


def gpu_from_name(
    index: int, name: str, gpu_names: GpuNameTable, probe: str, memory_mib: Optional[int] = None
) -> Gpu:
    """A GPU whose probe knows only its name: the compute capability comes from the GPU name table, if listed."""
    capability = gpu_names.lookup(name)
    source = f"{probe} + {GPU_TABLE}" if capability is not None else probe
    from envkit.text.terminal import printable

    return Gpu(index=index, name=printable(name), compute_capability=capability, memory_mib=memory_mib,
               source=source)


def smi_missing(command: str) -> Optional[str]:
    """Why nvidia-smi (``command``) cannot be run, or None when it can: checked before envkit.detect.smi is even
    imported, so a machine without it (most without a driver) pays nothing more."""
    import shutil

    if shutil.which(command) is not None:
        return None
    return "not found on PATH" if os.sep not in command else f"{command} not found or not executable"
