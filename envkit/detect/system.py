"""What detecting this machine adds to its driver and GPUs (envkit.detect), about the system itself: its C library
(a build whose wheels need a newer glibc does not install: torch 2.7 and later are manylinux_2_28), and whether the
driver is a Windows one seen through WSL2 (whose version NVIDIA numbers apart from Linux drivers). Never raises,
never blocks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from envkit.machines.profile import DRIVER_VERSION, LIBC, MachineProfile, parse_libc

LIBC_SOURCE = "confstr(CS_GNU_LIBC_VERSION) of the running system"
WSL_DRIVER = "the Windows driver, seen through WSL2"


def running_libc() -> Optional[str]:
    """The C library this process runs on as glibc names itself ("glibc 2.36"), or None (musl, or no answer)."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return None


def with_system(profile: MachineProfile, proc_root: Path, libc: Optional[Callable[[], Optional[str]]] = None
                ) -> MachineProfile:
    """``profile`` with the machine's glibc, and a WSL2 driver said to be the Windows one, in its sources and notes."""
    sources, notes = dict(profile.sources), list(profile.notes)
    text = (libc or running_libc)()
    glibc = None
    try:
        glibc = parse_libc(text) if text is not None else None
    except ValueError:
        pass
    if glibc is not None:
        sources[LIBC] = LIBC_SOURCE
    else:
        notes.append(f"C library: not glibc, or it did not say ({text or 'no answer'}): no build is refused for "
                     "the glibc its packages need")
    if profile.driver_version is not None and _is_wsl(proc_root):
        sources[DRIVER_VERSION] = f"{sources.get(DRIVER_VERSION, '?')}, {WSL_DRIVER}"
        notes.append(f"WSL2: driver {profile.driver_version} is the Windows driver's number, which NVIDIA counts apart "
                     "from Linux drivers (a little higher for the same CUDA); envkit compares it with the Linux "
                     "minimums of cuda.yaml, and the CUDA the driver reports decides which builds it runs")
    return profile._replace(glibc=glibc, sources=sources, notes=tuple(notes))


def _is_wsl(proc_root: Path) -> bool:
    """Whether the kernel is WSL2's (its release names Microsoft: 5.15.167.4-microsoft-standard-WSL2)."""
    try:
        release = (proc_root / "sys" / "kernel" / "osrelease").read_text(errors="replace")[:256]
    except OSError:
        return False
    return "microsoft" in release.lower()
