"""What the manifests directory holds, as frozen dataclasses. Built by ``envkit.catalog.load``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

from envkit.cuda import CudaTable
from envkit.versions import ComputeCapability, CudaVersion

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from envkit.gpu_names import GpuNameTable

# The frameworks envkit has a post-install check for; a manifest names one of them.
FRAMEWORKS = ("torch", "tensorflow", "jax", "mxnet")
CPU = "cpu"


@dataclass(frozen=True)
class ArchSet:
    """The GPU code a build carries: SASS binaries and PTX the driver can JIT-compile."""

    sass: tuple[ComputeCapability, ...]
    ptx: tuple[ComputeCapability, ...] = ()


@dataclass(frozen=True)
class PipInstall:
    packages: tuple[str, ...]
    index_url: Optional[str] = None  # None: the default index (PyPI or its mirror)
    local_version: Optional[str] = None  # what follows '+' in each installed version ("cu126"); "": no local part
    find_links: Optional[str] = None  # a flat page of links to wheels searched besides the index (pip --find-links)


@dataclass(frozen=True)
class BundledLibrary:
    """A library a build ships whose GPU support is narrower than the build's own kernels: the cuDNN 9 in torch
    2.4-2.7 cu118 needs compute capability 5.0 though the wheel carries sm_37 code. A GPU below the floor cannot
    run the build, whatever its arch list says."""

    name: str  # as a user knows it, with its version: "cuDNN 9.1"
    min_compute_capability: ComputeCapability


@dataclass(frozen=True)
class CondaInstall:
    channels: tuple[str, ...]
    packages: tuple[str, ...]


@dataclass(frozen=True)
class Build:
    id: str
    manifest: str
    version: Version
    variant: str  # "cpu" or "cu<digits>"
    python: SpecifierSet
    cuda: Optional[CudaVersion] = None  # None for CPU builds
    arch: Optional[ArchSet] = None  # set exactly when cuda is
    pip: Optional[PipInstall] = None
    conda: Optional[CondaInstall] = None
    notes: Optional[str] = None
    bundled: tuple[BundledLibrary, ...] = ()  # GPU builds only
    unconfirmed: Optional[str] = None  # what the manifest's authors could not check (shown to admins)

    @property
    def min_compute_capability(self) -> Optional[ComputeCapability]:
        """The oldest GPU every bundled library supports (None: no floor beyond the arch list)."""
        return max((b.min_compute_capability for b in self.bundled), default=None)

    @property
    def is_gpu(self) -> bool:
        return self.cuda is not None


@dataclass(frozen=True)
class Manifest:
    name: str
    summary: str
    framework: str
    builds: tuple[Build, ...]
    path: str
    retired: Optional[str] = None  # why the framework is retired, if it is


@dataclass(frozen=True)
class PythonTable:
    versions: tuple[Version, ...]  # the Pythons envkit can provide, oldest first
    default: Version
    conda_channel: str  # where an environment made by conda or rattler gets its Python, when its build names none
    pypi_index: str  # the index of pip packages a build does not give an index_url for (ipykernel, tensorflow)


@dataclass(frozen=True)
class Tables:
    """The shared tables of a manifests directory: what detection and resolution need besides manifests."""

    cuda: CudaTable
    python: PythonTable
    gpu_names: GpuNameTable


@dataclass(frozen=True)
class Catalog:
    directory: Path
    tables: Tables
    manifests: Mapping[str, Manifest]  # in the order asked for (or by name)
