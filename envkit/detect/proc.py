"""The /proc probe: what the loaded NVIDIA kernel module says about itself, readable by anyone, without NVML.

It knows the driver version and each GPU's model name, not the CUDA version nor the compute capability: those
come from envs/cuda.yaml and envs/gpus.yaml.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from envkit.detect.sources import PROC_GPUS, PROC_VERSION, gpu_from_name
from envkit.machines.profile import DRIVER_VERSION, GPUS, MachineProfile
from envkit.versions import DriverVersion

if TYPE_CHECKING:  # annotations only: detection that looks nothing up in the tables imports none of this
    from envkit.machines.gpu_names import GpuNameTable

_VERSION_TOKEN = r"^[0-9]+\.[0-9]+(\.[0-9]+){0,2}$"  # compiled by re when first matched: without a driver, never


def parse_driver_version(text: str) -> Optional[DriverVersion]:
    """The driver version in /proc/driver/nvidia/version, or None when the text has none.

    The "NVRM version:" line differs by kernel module flavour and architecture, e.g.
    ``NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 ...`` and
    ``NVIDIA UNIX Open Kernel Module for aarch64  570.124.06  Release Build  (dvs-builder@...)  Wed ...``;
    the version is the first word on it shaped like one (the date's "18:56:32" and "x86_64" are not). On a Jetson
    the word is the L4T release (``... Open Kernel Module for aarch64  35.3.1  Release Build ...``, nixGL#139),
    not a driver version: None (see ``l4t_release``).
    """
    word = _version_word(text)
    if word is None or l4t_release(text) is not None:
        return None
    try:
        return DriverVersion.parse(word)
    except ValueError:  # shaped like a version, numbered unlike NVIDIA's drivers
        return None


def l4t_release(text: str) -> Optional[str]:
    """The L4T (Jetson Linux) release a Jetson's /proc/driver/nvidia/version names where a driver names its version
    ("35.3.1"), or None. Every NVIDIA driver that runs CUDA is numbered from 169 up; L4T releases are 21 to 39."""
    word = _version_word(text)
    return word if word is not None and int(word.split(".")[0]) < 100 else None


def _version_word(text: str) -> Optional[str]:
    for line in text.splitlines():
        if line.strip().startswith("NVRM version:"):
            return next((word for word in line.split()[2:] if re.match(_VERSION_TOKEN, word)), None)
    return None


def parse_gpu_model(text: str) -> Optional[str]:
    """The "Model:" of a /proc/driver/nvidia/gpus/<bus id>/information file, or None when it has none."""
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip().lower() == "model":
            return " ".join(value.split()) or None
    return None


def probe_proc(proc_root: Path, gpu_names: GpuNameTable) -> MachineProfile:
    """Read the driver version and the GPU models. A partial profile: ``sources`` names what was found."""
    nvidia = proc_root / "driver" / "nvidia"
    try:
        version_text = (nvidia / "version").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        if _tegra(proc_root):
            return MachineProfile(notes=(f"{PROC_VERSION}: not present: this is an NVIDIA Jetson (Tegra), whose "
                                         "integrated GPU has no such file; its GPU comes from the device tree",))
        return MachineProfile(notes=(f"{PROC_VERSION}: not present (no NVIDIA kernel module loaded)",))
    except OSError as exc:
        return MachineProfile(notes=(f"{PROC_VERSION}: cannot be read: {exc.strerror or exc}",))
    release = l4t_release(version_text)
    if release is not None:
        return MachineProfile(notes=(f"{PROC_VERSION}: names L4T release {release}, not a driver version: this is an "
                                     "NVIDIA Jetson, judged by its JetPack (from /etc/nv_tegra_release), never as a "
                                     "discrete GPU",))
    notes = []
    sources = {}
    driver_version = parse_driver_version(version_text)
    if driver_version is not None:
        sources[DRIVER_VERSION] = PROC_VERSION
    else:
        notes.append(f"{PROC_VERSION}: no driver version in it")
    gpus = ()
    try:
        bus_ids = sorted(os.listdir(nvidia / "gpus"))  # PCI bus order: the order NVML numbers GPUs in
    except OSError as exc:
        notes.append(f"{PROC_GPUS}: cannot be read: {exc.strerror or exc}")
    else:
        gpus = tuple(
            gpu_from_name(index, _model(nvidia / "gpus" / bus_id, bus_id), gpu_names, PROC_GPUS)
            for index, bus_id in enumerate(bus_ids)
        )
        sources[GPUS] = PROC_GPUS
    return MachineProfile(gpus=gpus, driver_version=driver_version, sources=sources, notes=tuple(notes))


def _tegra(proc_root: Path) -> bool:
    """Whether the device tree says this is an NVIDIA Tegra system-on-chip (Jetson): "nvidia,tegra234", ..."""
    try:
        compatible = (proc_root / "device-tree" / "compatible").read_bytes()
    except OSError:
        return False
    return any(entry.startswith(b"nvidia,tegra") for entry in compatible.split(b"\0"))


def _model(directory: Path, bus_id: str) -> str:
    try:
        text = (directory / "information").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    # A GPU whose file is unreadable still counts: every GPU must be covered by the build that is chosen.
    return parse_gpu_model(text) or f"unknown GPU at PCI {bus_id}"
