"""What the diagnosis rules look at: the facts of one check (the probe's result, the machine, the builds), and the
labels and phrases the rules and the report both write. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Mapping, Optional, Sequence

from envkit.catalog.model import ArchSet, Build, Manifest, Tables
from envkit.machines.profile import MachineProfile
from envkit.pick.resolve import runs_on
from envkit.probe.builds import NextStep
from envkit.probe.result import Check, ProbeResult
from envkit.versions import ComputeCapability, CudaVersion


@dataclass(frozen=True)
class Facts:
    """Everything a rule may look at."""

    probe: ProbeResult
    profile: MachineProfile
    on_target: bool
    expected: Optional[Build]
    manifest: Optional[Manifest]
    tables: Optional[Tables]
    installed: Optional[Build]
    driver_cuda: Optional[CudaVersion]  # what a framework's "driver too old" error said the driver supports
    next: Optional[NextStep]
    machine_args: tuple[str, ...] = ()  # the options that name the machine judged, when it is not this one

    @property
    def framework(self) -> str:
        return self.probe.framework or self.probe.requested or "the framework"

    @property
    def gpu_build(self) -> bool:
        return bool(self.probe.gpu_build)

    @property
    def gpus_wanted(self) -> bool:
        """Whether the environment should drive GPUs: the machine has some, unless a CPU build was asked for."""
        if self.expected is not None:
            return self.expected.is_gpu
        return bool(self.profile.gpus)

    @property
    def seen(self) -> int:
        return len(self.probe.devices)

    @property
    def env(self) -> Mapping[str, Optional[str]]:
        return self.probe.environment

    def checks(self) -> Iterator[tuple[str, Check]]:
        """(where, check) for the CPU's checks and every device's."""
        for check in self.probe.cpu_checks:
            yield "the CPU", check
        for device in self.probe.devices:
            for check in device.checks:
                yield device_label(device.index, device.name, device.compute_capability, device.gfx), check


def covers(arch: Sequence[str], capability: Optional[str], gfx: Optional[str] = None) -> Optional[bool]:
    """Whether GPU code named like 'sm_80' / 'compute_90' (a framework's arch list) runs on this capability, by
    resolution's own rule; for an AMD GPU (``gfx``), whether its exact target is in the list ('gfx90a', or
    'gfx90a:xnack-' as some builds name it); None: unknown."""
    if gfx is not None:
        targets = {entry.strip().split(":")[0] for entry in arch if entry.strip().startswith("gfx")}
        return (gfx in targets) if targets else None
    if not arch or not capability:
        return None
    try:
        gpu = ComputeCapability.parse(capability)
    except ValueError:
        return None
    sass, ptx = [], []
    for entry in arch:
        found = re.match(r"^(sm|compute)_([0-9]+)([0-9])[a-z]?$", entry.strip())  # sm_90a: arch-specific, still sm_90
        if found:
            code = ComputeCapability(int(found.group(2)), int(found.group(3)))
            (sass if found.group(1) == "sm" else ptx).append(code)
    return runs_on(ArchSet(sass=tuple(sass), ptx=tuple(ptx)), gpu)


def arch_strings(arch: ArchSet) -> tuple[str, ...]:
    return tuple(a.sm for a in arch.sass) + tuple(a.compute for a in arch.ptx)


def cc_text(capability: Optional[ComputeCapability]) -> Optional[str]:
    return str(capability) if capability is not None else None


def device_label(index: Optional[int], name: Optional[str], capability: Optional[str],
                 gfx: Optional[str] = None) -> str:
    if gfx is not None:  # an AMD GPU, as a ROCm build saw it
        return f"AMD GPU {index}, {name or 'unnamed'} ({gfx})"
    arch = ""
    if capability:
        try:
            arch = f" ({ComputeCapability.parse(capability).sm})"
        except ValueError:
            arch = f" ({capability})"
    return f"GPU {index}, {name or 'unnamed'}{arch}"


def machine_label(profile: MachineProfile) -> str:
    if profile.name:
        return profile.name
    gpus = ", ".join(sorted({f"{g.name} ({g.compute_capability.sm if g.compute_capability else '?'})"
                             for g in profile.gpus}))
    driver = f"driver CUDA {profile.cuda_driver}" if profile.cuda_driver else "no NVIDIA driver"
    return f"the machine with {gpus or 'no GPU'} and {driver}"


def gpus_text(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return text.strip()[:300]


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
