"""The shared tables a machine is read with: a manifests directory's cuda.yaml and gpus.yaml (and rocm.yaml, for AMD
GPUs' names and targets). Detection takes the highest CUDA from the driver's version and a compute capability from a
GPU's name. Kept apart from
envkit.catalog.model (the records of every build, and the Python table that resolution needs and detection does
not), so that `envkit detect` and a warm `envkit list` load no more than these."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from envkit.machines.amd import EMPTY, AmdTable

if TYPE_CHECKING:  # detection that never looks a table up (no NVIDIA driver) imports neither
    from envkit.machines.cuda import CudaTable
    from envkit.machines.gpu_names import GpuNameTable


class MachineTables(NamedTuple):
    cuda: CudaTable
    gpu_names: GpuNameTable
    amd: AmdTable = EMPTY  # rocm.yaml: read when detection finds an AMD GPU (the KFD lists one)
