"""The CUDA compatibility table (loaded from envs/cuda.yaml): pure lookups, no I/O."""

from __future__ import annotations

from typing import Mapping, NamedTuple, Optional

from envkit.versions import ComputeCapability, CudaVersion, DriverVersion


class CudaTable(NamedTuple):
    """cuda.yaml: which driver each CUDA release needs, and the floors of minor-version compatibility."""

    # Minimum Linux driver for each CUDA toolkit release (GA).
    min_driver: Mapping[CudaVersion, DriverVersion]
    # CUDA minor-version compatibility: a build for CUDA major M runs on a driver >= floor of M
    # that reports an older M.x, but only from SASS (the older driver cannot JIT the newer PTX).
    minor_compat_floor: Mapping[int, DriverVersion]
    # Oldest GPU architecture each toolkit major can compile for.
    min_compute_capability: Mapping[int, ComputeCapability]

    def cuda_for_driver(self, driver: DriverVersion) -> Optional[CudaVersion]:
        """The highest CUDA a driver supports: the newest toolkit whose minimum driver it meets."""
        supported = [cuda for cuda, floor in self.min_driver.items() if driver >= floor]
        return max(supported) if supported else None

    def driver_floor(self, cuda: CudaVersion) -> Optional[DriverVersion]:
        """The lowest driver that reports at least this CUDA: a lower bound when only the CUDA is known."""
        candidates = [floor for known, floor in self.min_driver.items() if known >= cuda]
        return min(candidates) if candidates else None
