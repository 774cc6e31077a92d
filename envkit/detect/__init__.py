"""Detection: what this machine's NVIDIA driver and GPUs are, asked of NVML, then /proc, then nvidia-smi; and its
AMD GPUs and amdgpu driver, read from the kernel's KFD topology in sysfs (envkit.detect.amd).

Each probe returns a partial MachineProfile whose ``sources`` name the facts it found and whose ``notes`` say
what failed. The NVIDIA probes run in that order until every fact is known, and each fact is taken from the first
probe that gives it. A machine without an NVIDIA driver is a normal answer: no GPUs, no CUDA, and notes saying what was
tried; a machine without the KFD has no AMD GPU, and nothing is said of it. A machine with both is described as both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from envkit.detect.nvml import probe_nvml
from envkit.detect.proc import probe_proc
from envkit.detect.sources import DERIVED_CUDA, SMI, smi_missing
from envkit.detect.timeout import ProbeTimeout, call_with_timeout
from envkit.errors import ManifestError
from envkit.machines.amd import EMPTY, AmdTable
from envkit.machines.profile import CUDA_DRIVER, DRIVER_VERSION, GPUS, Gpu, MachineProfile

if TYPE_CHECKING:  # annotations only: detection that looks nothing up in the tables imports none of this
    from envkit.machines.cuda import CudaTable
    from envkit.machines.gpu_names import GpuNameTable

__all__ = ["detect_machine", "merge_probes"]


def detect_machine(
    cuda_table: CudaTable,
    gpu_names: GpuNameTable,
    *,
    timeout: float = 10.0,
    nvml: Any = None,
    proc_root: Path = Path("/proc"),
    smi_command: str = "nvidia-smi",
    amd_table: AmdTable = EMPTY,
    sys_root: Optional[Path] = None,
) -> MachineProfile:
    """Detect the drivers and GPUs of this machine. Never raises for what the machine lacks, never needs root.

    ``timeout`` bounds each probe that can block: NVML, nvidia-smi (all its runs together), and the AMD probe (the
    KFD's files and amd-smi or rocm-smi together), so detection takes at most about three times that. ``nvml``
    replaces the pynvml module (tests); ``proc_root``, ``smi_command`` and ``sys_root`` point the probes elsewhere
    (tests; ``sys_root`` defaults to /sys, or to what envkit's tests name in $ENVKIT_TEST_SYSFS).
    """
    found = [_guarded("NVML", lambda: call_with_timeout(lambda: probe_nvml(gpu_names, nvml), timeout))]
    profile = merge_probes(found, cuda_table)
    if not _complete(profile):
        found.append(_guarded("/proc", lambda: probe_proc(proc_root, gpu_names)))
        profile = merge_probes(found, cuda_table)
    if not _complete(profile):
        # A CUDA version nvidia-smi reports beats one derived from the driver version: ask for it unless a
        # probe already reported one.
        reported_cuda = any(CUDA_DRIVER in partial.sources for partial in found)
        found.append(
            _guarded(
                "nvidia-smi",
                lambda: _probe_smi(gpu_names, command=smi_command, timeout=timeout, want_cuda=not reported_cuda),
            )
        )
        profile = merge_probes(found, cuda_table)
    return with_amd(profile, _guarded("AMD", lambda: _probe_amd(amd_table, sys_root, proc_root, timeout)))


def _probe_amd(table: AmdTable, sys_root: Optional[Path], proc_root: Path, timeout: float) -> MachineProfile:
    from envkit.detect.amd import probe_amd, sysfs_root

    root = sys_root if sys_root is not None else sysfs_root(os.environ)
    # The KFD's files are read in a thread that is abandoned if sysfs hangs; amd-smi has its own limit inside.
    return call_with_timeout(lambda: probe_amd(root, table, proc_root, timeout), timeout * 2)


def with_amd(profile: MachineProfile, amd: MachineProfile) -> MachineProfile:
    """The NVIDIA probes' profile with the AMD probe's GPUs, driver, sources and notes added: a machine with both
    kinds of GPU is described as both."""
    return profile._replace(gpus=profile.gpus + amd.gpus, amdgpu=amd.amdgpu, sources={**profile.sources,
                                                                                     **amd.sources},
                            notes=profile.notes + amd.notes)


def _probe_smi(gpu_names: GpuNameTable, *, command: str, timeout: float, want_cuda: bool) -> MachineProfile:
    missing = smi_missing(command)
    if missing is not None:  # said here, without importing envkit.detect.smi (no driver: no nvidia-smi either)
        return MachineProfile(notes=(f"{SMI}: {missing}",))
    from envkit.detect.smi import probe_smi

    return probe_smi(gpu_names, command=command, timeout=timeout, want_cuda=want_cuda)


def merge_probes(found: Sequence[MachineProfile], cuda_table: CudaTable) -> MachineProfile:
    """One profile from the probes' partial ones, in the order they ran: each fact from the first that gives it.

    The GPU list comes from the first probe that knows every GPU's compute capability, else from the first that
    lists GPUs at all. Without a reported CUDA version, the driver version gives it through ``cuda_table``.
    """
    driver_from = _first(found, DRIVER_VERSION)
    cuda_from = _first(found, CUDA_DRIVER)
    listing = [partial for partial in found if GPUS in partial.sources]
    gpus_from = next((partial for partial in listing if _all_known(partial)), listing[0] if listing else None)
    sources = {}
    driver_version = cuda_driver = None
    if driver_from is not None:
        driver_version = driver_from.driver_version
        sources[DRIVER_VERSION] = driver_from.sources[DRIVER_VERSION]
    if cuda_from is not None:
        cuda_driver = cuda_from.cuda_driver
        sources[CUDA_DRIVER] = cuda_from.sources[CUDA_DRIVER]
    elif driver_version is not None:
        cuda_driver = cuda_table.cuda_for_driver(driver_version)
        if cuda_driver is not None:
            sources[CUDA_DRIVER] = DERIVED_CUDA
    gpus: tuple[Gpu, ...] = ()
    if gpus_from is not None:
        gpus = gpus_from.gpus
        sources[GPUS] = gpus_from.sources[GPUS]
    notes = [note for partial in found for note in partial.notes]
    notes += [
        f"{gpu.label}: compute capability unknown (no probe reported it and envs/gpus.yaml does not list it)"
        for gpu in gpus
        if gpu.compute_capability is None
    ]
    return MachineProfile(
        gpus=gpus, cuda_driver=cuda_driver, driver_version=driver_version, sources=sources, notes=tuple(notes)
    )


def _first(found: Sequence[MachineProfile], key: str) -> Optional[MachineProfile]:
    return next((partial for partial in found if key in partial.sources), None)


def _complete(profile: MachineProfile) -> bool:
    """Whether every fact is known: no later probe could add anything."""
    return (
        DRIVER_VERSION in profile.sources
        and CUDA_DRIVER in profile.sources
        and GPUS in profile.sources
        and _all_known(profile)
    )


def _all_known(profile: MachineProfile) -> bool:
    return all(gpu.compute_capability is not None for gpu in profile.gpus)


def _guarded(name: str, probe: Callable[[], MachineProfile]) -> MachineProfile:
    """Run a probe; what it did not foresee becomes a note, so that what the machine does cannot make detection
    fail. A broken table the probe looked something up in (envkit.catalog.cache.machine_tables_on_use reads them
    then) is the manifests' fault: that error is raised."""
    try:
        return probe()
    except ProbeTimeout as exc:
        return MachineProfile(notes=(f"{name}: {exc}",))
    except ManifestError:
        raise
    except Exception as exc:  # a probe's bug, or a driver library misbehaving: keep the other probes' facts
        return MachineProfile(notes=(f"{name}: failed unexpectedly: {type(exc).__name__}: {exc}",))
