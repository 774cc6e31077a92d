"""AMD GPUs: the amdgpu kernel driver a machine runs, and the table (envs/rocm.yaml) of what envkit knows about AMD's
GPUs and ROCm: names and targets by PCI device id, the gfx targets, which driver release each amdgpu version is, and
the ROCm user spaces AMD supports on each driver release. Pure lookups, no I/O."""

from __future__ import annotations

import re
from typing import Any, Mapping, NamedTuple, Optional

from envkit.versions import RocmVersion

AMD = "amd"
NVIDIA = "nvidia"
VENDORS = (NVIDIA, AMD)
_KERNEL = "kernel "
# What /sys/module/amdgpu/version holds for the packaged driver (6.12.12, 30.30.3), and a kernel release as
# /proc/sys/kernel/osrelease says it (6.8.0-45-generic): printable, no spaces, bounded.
_VERSION = r"^[0-9]{1,3}(\.[0-9]{1,5}){1,3}$"
_RELEASE = r"^[0-9][0-9A-Za-z._+~-]{0,99}$"


class AmdgpuDriver(NamedTuple):
    """The amdgpu kernel driver: the packaged one's version (amdgpu-dkms writes it to /sys/module/amdgpu/version), or
    the kernel's own driver, known only by the kernel's release. Written as a profile file says it: "6.12.12" or
    "kernel 6.8.0-45-generic"."""

    version: str
    packaged: bool = True

    def __str__(self) -> str:
        return self.version if self.packaged else f"{_KERNEL}{self.version}"

    @property
    def parts(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.version.split(".")) if self.packaged else ()

    @classmethod
    def parse(cls, value: Any) -> AmdgpuDriver:
        """"6.12.12" or "kernel 6.8.0-45-generic"; ValueError otherwise."""
        text = value.strip() if isinstance(value, str) else ""
        if text.startswith(_KERNEL) and re.match(_RELEASE, text[len(_KERNEL):].strip()):
            return cls(text[len(_KERNEL):].strip(), packaged=False)
        if re.match(_VERSION, text):
            return cls(text)
        raise ValueError(f"expected the amdgpu driver's version ('6.12.12') or 'kernel RELEASE' for the kernel's own "
                         f"driver ('kernel 6.8.0-45-generic'), got {value!r}")


class DriverRelease(NamedTuple):
    """A row of rocm.yaml's amdgpu_driver: the amdgpu versions that start with ``parts`` are the driver ``release``
    (as AMD's support matrix names it: "6.4", "30.10")."""

    parts: tuple[int, ...]
    release: str
    unconfirmed: Optional[str] = None


class DriverWindow(NamedTuple):
    """What AMD's matrix says of one amdgpu driver: its release, and the ROCm user spaces supported on it."""

    release: str
    user_space: tuple[RocmVersion, ...]
    unconfirmed: Optional[str]  # why the driver's release is not certain (then nothing is refused on it)

    def span(self) -> str:
        return f"{self.user_space[0]} to {self.user_space[-1]}" if self.user_space else "none"


class PciDevice(NamedTuple):
    name: str
    gfx: Optional[str] = None


class AmdTable(NamedTuple):
    """rocm.yaml. An empty one (a manifests directory without rocm.yaml) knows no names, targets or windows."""

    gfx_targets: Mapping[str, str] = {}  # gfx -> the GPUs it is
    pci_ids: Mapping[int, PciDevice] = {}
    drivers: tuple[DriverRelease, ...] = ()
    user_space: Mapping[str, tuple[RocmVersion, ...]] = {}

    def device(self, device_id: Optional[int]) -> Optional[PciDevice]:
        return self.pci_ids.get(device_id) if device_id is not None else None

    def knows(self, gfx: str) -> bool:
        return gfx in self.gfx_targets

    def window(self, driver: Optional[AmdgpuDriver]) -> Optional[DriverWindow]:
        """AMD's window for this driver, when the table names its release and the matrix has a row for it."""
        if driver is None or not driver.packaged:
            return None
        parts = driver.parts
        row = next((row for row in self.drivers if parts[: len(row.parts)] == row.parts), None)
        if row is None or row.release not in self.user_space:
            return None
        return DriverWindow(row.release, self.user_space[row.release], row.unconfirmed)


EMPTY = AmdTable()


def pci_device_id(text: Any) -> Optional[int]:
    """A PCI device id as tools print it ("0x74a1", "74a1", 29857 as KFD writes it) -> the number; None otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if 0 <= text <= 0xFFFF else None
    if not isinstance(text, str):
        return None
    value = text.strip().lower()
    value = value[2:] if value.startswith("0x") else value
    return int(value, 16) if re.match(r"^[0-9a-f]{1,4}$", value) else None
