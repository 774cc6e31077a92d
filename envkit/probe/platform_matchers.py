"""Matchers of the check's reports that are about the machine's kind rather than the build: a CPU-only wheel on
aarch64, a generic aarch64 CUDA build on a Jetson, HIP shut out of /dev/kfd on an AMD machine (envkit.probe.rules
names each). Pure, like envkit.probe.matchers."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from envkit.probe.facts import Facts
from envkit.probe.matchers import cpu_build, search


# Where the CPU build a plain `pip install` gives on aarch64 comes from, and where the CUDA one is.
_AARCH64_CPU = {
    "torch": ("PyPI", "PyPI's aarch64 torch was the CPU build (pytorch/pytorch#160162, #168065): the CUDA one is on "
                      "PyTorch's CUDA index (download.pytorch.org/whl/cu128 and later), as envkit installs it."),
    "tensorflow": ("PyPI", "PyPI's aarch64 TensorFlow has no CUDA at all (tensorflow/tensorflow#121157): on a Jetson "
                           "NVIDIA's Jetson build has it; elsewhere TensorFlow runs on the CPU only."),
}


def _aarch64(f: Facts) -> bool:
    return f.probe.machine == "aarch64" or f.profile.platform == "linux-aarch64"


def cpu_wheel_on_aarch64(f: Facts) -> Iterable[Mapping[str, Any]]:
    """A CPU-only torch or TensorFlow on an aarch64 GPU machine: what `pip install torch` gives there."""
    if f.framework not in _AARCH64_CPU or not _aarch64(f):
        return
    for fields in cpu_build(f):
        where, instead = _AARCH64_CPU[f.framework]
        yield {**fields, "where": where, "instead": instead}


def generic_cuda_on_jetson(f: Facts) -> Iterable[Mapping[str, Any]]:
    """An ordinary aarch64 CUDA build on a Jetson whose JetPack runs only builds made for Jetson (before JetPack 7):
    the manifests' build it is, or a version with PyTorch's CUDA label (2.8.0+cu128) where it is none of theirs."""
    if f.profile.l4t is None or not f.probe.imported or not f.gpu_build or f.tables is None:
        return
    jetpack = f.tables.cuda.jetpack_for(f.profile.l4t)
    if jetpack is not None and jetpack.sbsa:
        return
    if f.installed is not None:
        generic = not f.installed.is_jetson
        evidence = f" ({f.installed.id} of envkit's manifests)"
    else:
        generic = bool(re.search(r"\+cu[0-9]+$", f.probe.version or ""))
        evidence = " (its version carries PyTorch's CUDA label)"
    if generic:
        said = jetpack.describe(f.profile.l4t) if jetpack else f"L4T {f.profile.l4t}"
        yield {"evidence": evidence if generic else "", "jetpack": said}


# HIP's words when the user may not open /dev/kfd, the AMD GPUs' compute device (not in its group: render, or video on
# older systems): "Unable to open /dev/kfd read-write: Permission denied".
NO_KFD = r"/dev/kfd[^\n]*(Permission denied|Operation not permitted)"


def kfd_access(f: Facts) -> Iterable[Mapping[str, Any]]:
    """A ROCm build here that HIP could not start because /dev/kfd is closed to the user."""
    found = search([NO_KFD], f.probe.texts()) if f.on_target and f.probe.imported else None
    if found is not None:
        yield {"why": found.group(0).strip()}
