"""Fakes shared by the detection tests: NVML faked at its boundary (an object with pynvml's functions that raises
pynvml's real NVMLError classes), and the recorded texts under data/.

A plain module with a name no other test directory uses, imported by the tests and by conftest.py.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional, Union

import pynvml

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# --- NVML -----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FakeGpu:
    name: Union[str, bytes]
    capability: tuple[int, int]
    memory_mib: int
    uuid: Optional[str] = None  # None: nvmlDeviceGetUUID fails (Not Supported)
    mig: Optional[tuple[Optional[str], ...]] = None  # MIG mode on: its slots' MIG device UUIDs (None: an empty slot)


V100 = FakeGpu("Tesla V100-SXM2-16GB", (7, 0), 16384)
A100 = FakeGpu("NVIDIA A100-SXM4-40GB", (8, 0), 40960)


class FakeNvml:
    """Stands for the pynvml module. ``errors`` maps a function name, or (name, GPU index), to an NVML error code
    that the call raises; ``hang`` makes nvmlInit wait for that event (set it to let the thread end)."""

    NVMLError = pynvml.NVMLError
    NVML_ERROR_LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED

    def __init__(
        self,
        gpus: tuple[FakeGpu, ...] = (V100, A100),
        driver: Union[str, bytes] = "535.129.03",
        cuda: int = 12020,
        cuda_v1: Optional[int] = None,
        errors: Optional[dict[Any, int]] = None,
        hang: Optional[threading.Event] = None,
    ) -> None:
        self.gpus = gpus
        self.driver = driver
        self.cuda = cuda
        self.cuda_v1 = cuda if cuda_v1 is None else cuda_v1
        self.errors = errors or {}
        self.hang = hang
        self.calls: list[str] = []

    def _enter(self, function: str, index: Optional[int] = None) -> None:
        self.calls.append(function)
        code = self.errors.get((function, index), self.errors.get(function))
        if code is not None:
            raise pynvml.NVMLError(code)

    def nvmlInit(self) -> None:
        if self.hang is not None:
            self.hang.wait(30)
        self._enter("nvmlInit")

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self):
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return self.cuda

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_v1

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int):
        self._enter("nvmlDeviceGetHandleByIndex", index)
        return ("handle", index)

    def nvmlDeviceGetName(self, handle):
        self._enter("nvmlDeviceGetName", handle[1])
        return self.gpus[handle[1]].name

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        self._enter("nvmlDeviceGetCudaComputeCapability", handle[1])
        return self.gpus[handle[1]].capability

    def nvmlDeviceGetUUID(self, handle):
        if handle[0] == "mig":
            return self.gpus[handle[1]].mig[handle[2]]
        self._enter("nvmlDeviceGetUUID", handle[1])
        uuid = self.gpus[handle[1]].uuid
        if uuid is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return uuid

    def nvmlDeviceGetMigMode(self, handle):
        if self.gpus[handle[1]].mig is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)  # a GPU without MIG
        return (1, 1)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return len(self.gpus[handle[1]].mig)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, slot):
        if self.gpus[handle[1]].mig[slot] is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return ("mig", handle[1], slot)

    def nvmlDeviceGetMemoryInfo(self, handle):
        self._enter("nvmlDeviceGetMemoryInfo", handle[1])
        total = self.gpus[handle[1]].memory_mib * 1024 * 1024
        return SimpleNamespace(total=total, free=total, used=0)


def nvml_missing() -> FakeNvml:
    """NVML as on a machine without the driver's user-space libraries."""
    return FakeNvml(errors={"nvmlInit": pynvml.NVML_ERROR_LIBRARY_NOT_FOUND})
