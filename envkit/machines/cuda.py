"""The CUDA compatibility table (loaded from envs/cuda.yaml): pure lookups, no I/O."""

from __future__ import annotations

from typing import Mapping, NamedTuple, Optional

from envkit.versions import ComputeCapability, CudaVersion, DriverVersion


class LastDriver(NamedTuple):
    """The last driver branch for the GPUs below a compute capability: no newer branch drives them, so no build for
    a newer CUDA than the branch's (minor-version compatibility aside) will ever run on them."""

    below: ComputeCapability  # the GPUs of a lower compute capability
    branch: int  # R580
    cuda: CudaVersion  # the highest CUDA that branch supports
    gpus: str  # the generations, as users know them: "Maxwell, Pascal and Volta"

    def describe(self) -> str:
        return f"R{self.branch} (CUDA {self.cuda}) is the last driver branch for {self.gpus}"


class FirstDriver(NamedTuple):
    """The first driver branch that drives GPUs of some compute capabilities: no older driver knows them, so a
    profile of such a GPU on an older driver describes no real machine (a hand-written or stale one)."""

    capabilities: tuple[ComputeCapability, ...]  # the GPUs it is the first branch of: (10.0, 12.0)
    branch: int  # R570
    cuda: CudaVersion  # the CUDA that branch brought, the first toolkit that knows these GPUs
    gpus: str  # the generation, as users know it: "Blackwell"

    def describe(self) -> str:
        return f"R{self.branch} (CUDA {self.cuda}) is the first driver branch for {self.gpus}"

    def refuses(self, driver: Optional[DriverVersion], cuda: Optional[CudaVersion]) -> Optional[str]:
        """What the driver is, in words, when it is older than this branch ("driver 525.60.13", "a driver for CUDA
        12.0"); None when it is not (or nothing is known of it)."""
        if driver is not None:
            return f"driver {driver}" if driver.branch < self.branch else None
        if cuda is not None and cuda < self.cuda:
            return f"a driver for CUDA {cuda}"
        return None


class CudaTable(NamedTuple):
    """cuda.yaml: which driver each CUDA release needs, and the floors of minor-version compatibility."""

    # Minimum Linux driver for each CUDA toolkit release (GA).
    min_driver: Mapping[CudaVersion, DriverVersion]
    # CUDA minor-version compatibility: a build for CUDA major M runs on a driver >= floor of M
    # that reports an older M.x, but only from SASS (the older driver cannot JIT the newer PTX).
    minor_compat_floor: Mapping[int, DriverVersion]
    # Oldest GPU architecture each toolkit major can compile for.
    min_compute_capability: Mapping[int, ComputeCapability]
    # The last driver branch of GPU generations that newer branches no longer drive.
    last_drivers: tuple[LastDriver, ...] = ()
    # The first driver branch of GPU generations, by compute capability.
    first_drivers: tuple[FirstDriver, ...] = ()

    def first_driver_for(self, capability: ComputeCapability) -> Optional[FirstDriver]:
        """The first driver branch that drives a GPU of this compute capability, when the table knows it."""
        return next((first for first in self.first_drivers if capability in first.capabilities), None)

    def last_driver_for(self, capability: ComputeCapability) -> Optional[LastDriver]:
        """The last driver branch that drives a GPU of this compute capability, or None when newer ones still do."""
        return min((last for last in self.last_drivers if capability < last.below), key=lambda last: last.branch,
                   default=None)

    def cuda_for_driver(self, driver: DriverVersion) -> Optional[CudaVersion]:
        """The highest CUDA a driver supports: the newest toolkit whose minimum driver it meets."""
        supported = [cuda for cuda, floor in self.min_driver.items() if driver >= floor]
        return max(supported) if supported else None

    def driver_floor(self, cuda: CudaVersion) -> Optional[DriverVersion]:
        """A lower bound on any driver that reports this CUDA, when only the CUDA is known: such a driver runs the
        newest toolkit at or below it, so it is at least that toolkit's minimum. (Not the next toolkit's: R565 drivers
        report CUDA 12.7, which no toolkit is, and are below 12.8's 570.26.)"""
        below = [known for known in self.min_driver if known <= cuda]
        return self.min_driver[max(below)] if below else None
