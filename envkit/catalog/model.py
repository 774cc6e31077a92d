"""What the manifests directory holds, as immutable records. Built by ``envkit.catalog.load``.

The records are NamedTuples, not dataclasses: every command loads this module, and defining a frozen dataclass
costs about 0.5 ms of start-up (its methods are generated and compiled at import), a NamedTuple a fraction of that
(docs/architecture.md, "Rules that keep it livable")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, NamedTuple, Optional

from envkit.machines.amd import EMPTY, AmdTable
from envkit.machines.cuda import CudaTable
from envkit.machines.platforms import DEFAULT_PLATFORM
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion, GlibcVersion, RocmVersion

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from envkit.machines.gpu_names import GpuNameTable

# The frameworks envkit has a post-install check for; a manifest names one of them.
FRAMEWORKS = ("torch", "tensorflow", "jax", "mxnet")
CPU = "cpu"
# A build id, and a manifest's name (its file's name without .yaml): letters, digits and . _ + -, starting with a
# letter or digit, so that neither reads as an option nor as a path. Checked in manifests and in locks that name them.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def valid_id(text: str) -> bool:
    """Whether ``text`` can be a build id or a manifest name (see _ID)."""
    return bool(_ID.fullmatch(text))


class ArchSet(NamedTuple):
    """The GPU code a build carries: SASS binaries and PTX the driver can JIT-compile."""

    sass: tuple[ComputeCapability, ...]
    ptx: tuple[ComputeCapability, ...] = ()


class PipInstall(NamedTuple):
    """How pip installs a build: its packages, and the index (and flat links page) they come from."""

    packages: tuple[str, ...]
    index_url: Optional[str] = None  # None: the default index (PyPI or its mirror)
    local_version: Optional[str] = None  # what follows '+' in each installed version ("cu126"); "": no local part
    find_links: Optional[str] = None  # a flat page of links to wheels searched besides the index (pip --find-links)
    plain: tuple[str, ...] = ()  # packages installed with a plain version even where the others carry local_version


class BundledLibrary(NamedTuple):
    """A library a build ships whose GPU support is narrower than the build's own kernels: the cuDNN 9 in torch
    2.4-2.7 cu118 needs compute capability 5.0 though the wheel carries sm_37 code (a floor); the cuDNN 7.6 in torch
    1.4/1.5 serves nothing newer than Turing though the wheel carries compute_37 PTX that the driver could JIT for
    any newer GPU (a ceiling). A GPU below the floor or above the ceiling cannot run the build, whatever its arch
    list says. A library may also need a newer driver than the build's CUDA does (``min_driver``: NVIDIA's support
    matrix gives one per cuDNN release and CUDA major). At least one of the three is set."""

    name: str  # as a user knows it, with its version: "cuDNN 9.1"
    min_compute_capability: Optional[ComputeCapability] = None  # the oldest GPU it serves
    max_compute_capability: Optional[ComputeCapability] = None  # the newest GPU it serves
    min_driver: Optional[DriverVersion] = None  # the oldest driver it runs on

    def refuses(self, capability: ComputeCapability) -> Optional[str]:
        """Why this library cannot serve a GPU of ``capability``, or None when it can."""
        if self.min_compute_capability is not None and capability < self.min_compute_capability:
            return (f"the build has code for this GPU, but the {self.name} it bundles needs a GPU of compute "
                    f"capability {self.min_compute_capability} or newer")
        if self.max_compute_capability is not None and capability > self.max_compute_capability:
            return (f"{self.name}, bundled by this build, has no support for {capability.sm} (it serves compute "
                    f"capability {self.max_compute_capability} and older)")
        return None


class CondaInstall(NamedTuple):
    """How conda installs a build: its packages, from these channels."""

    channels: tuple[str, ...]
    packages: tuple[str, ...]


class PythonRange:
    """A build's Python range (``python: ">=3.10,<3.15"``) with its verdict on every Python of python.yaml worked out
    when the catalog is loaded, so that resolving (and unpickling a cached catalog) never imports
    ``packaging.specifiers``: ``contains`` answers from that verdict for the table's versions and asks a real
    SpecifierSet, made on first use, for any other. ``str()`` is the SpecifierSet's normal form."""

    __slots__ = ("text", "_judged", "_admitted", "_spec")

    def __init__(self, spec: SpecifierSet, judged: Iterable[Version]) -> None:
        self.text = str(spec)
        self._judged = frozenset(judged)
        self._admitted = frozenset(v for v in self._judged if spec.contains(v))
        self._spec: Optional[SpecifierSet] = spec

    def contains(self, version: Version) -> bool:
        if version in self._judged:
            return version in self._admitted
        if self._spec is None:
            from packaging.specifiers import SpecifierSet

            self._spec = SpecifierSet(self.text)
        return self._spec.contains(version)

    __contains__ = contains

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"PythonRange({self.text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PythonRange):
            return NotImplemented
        return (self.text, self._judged, self._admitted) == (other.text, other._judged, other._admitted)

    def __hash__(self) -> int:
        return hash(self.text)

    def __getstate__(self) -> tuple[str, frozenset[Version], frozenset[Version]]:
        return self.text, self._judged, self._admitted  # never the SpecifierSet: unpickling would import it

    def __setstate__(self, state: tuple[str, frozenset[Version], frozenset[Version]]) -> None:
        self.text, self._judged, self._admitted = state
        self._spec = None


class PlatformView(NamedTuple):
    """What a build has on one of its platforms where that differs from what it says for all of them (the aarch64
    torch wheels carry fewer GPUs' code; an aarch64 fact no one could confirm). None: as the build says."""

    arch: Optional[ArchSet] = None
    unconfirmed: Optional[str] = None
    notes: Optional[str] = None
    glibc: Optional[GlibcVersion] = None
    pip: Optional[PipInstall] = None


class Build(NamedTuple):
    """One installable build of a framework: its version, its CUDA (or ROCm) and GPU code, the Pythons it is for."""

    id: str
    manifest: str
    version: Version
    variant: str  # "cpu", "cu<digits>" or "rocm<release>"
    python: PythonRange  # (a SpecifierSet does as well: only contains() and str() are asked of it)
    cuda: Optional[CudaVersion] = None  # None for CPU builds
    arch: Optional[ArchSet] = None  # set exactly when cuda is
    pip: Optional[PipInstall] = None
    conda: Optional[CondaInstall] = None
    notes: Optional[str] = None
    bundled: tuple[BundledLibrary, ...] = ()  # GPU builds only
    unconfirmed: Optional[str] = None  # what the manifest's authors could not check (shown to admins)
    glibc: Optional[GlibcVersion] = None  # the oldest glibc its packages install on (manylinux_2_28: 2.28)
    rocm: Optional[RocmVersion] = None  # a ROCm build: the ROCm user space it bundles (then no cuda, no arch)
    gfx: tuple[str, ...] = ()  # a ROCm build's GPU code: the gfx targets it carries, each exactly (no fallback)
    # The platforms it has packages for (conda's names; a conda build's subdirs), what differs on some of them, and
    # why it has none for others where the manifest says so ("tensorflow's aarch64 wheels carry no CUDA").
    platforms: tuple[str, ...] = (DEFAULT_PLATFORM,)
    per_platform: tuple[tuple[str, PlatformView], ...] = ()
    absent: tuple[tuple[str, str], ...] = ()
    l4t: Optional[str] = None  # a Jetson build: the L4T releases it runs on (a PEP 440 range: ">=36.4,<37")

    def on(self, platform: str) -> Build:
        """The build as it is on ``platform``: its arch list, notes, glibc and install settings there. (The build
        itself where nothing differs, or where it has no packages for the platform: resolution refuses it there.)"""
        view = dict(self.per_platform).get(platform)
        if view is None:
            return self
        changed = {key: value for key, value in view._asdict().items() if value is not None}
        return self._replace(**changed)

    def absent_reason(self, platform: str) -> Optional[str]:
        """Why the build has no packages for ``platform``, as its manifest says, or None when it does not say."""
        return dict(self.absent).get(platform)

    @property
    def is_jetson(self) -> bool:
        return self.l4t is not None

    @property
    def min_compute_capability(self) -> Optional[ComputeCapability]:
        """The oldest GPU every bundled library supports (None: no floor beyond the arch list)."""
        return max((b.min_compute_capability for b in self.bundled if b.min_compute_capability is not None),
                   default=None)

    @property
    def max_compute_capability(self) -> Optional[ComputeCapability]:
        """The newest GPU every bundled library supports (None: no ceiling beyond the arch list)."""
        return min((b.max_compute_capability for b in self.bundled if b.max_compute_capability is not None),
                   default=None)

    @property
    def is_gpu(self) -> bool:
        return self.cuda is not None or self.rocm is not None

    @property
    def is_rocm(self) -> bool:
        return self.rocm is not None

    @property
    def runtime(self) -> str:
        """What the build's GPU code runs on, as users say it: "CUDA 12.6", "ROCm 6.4", or "CPU only"."""
        return f"CUDA {self.cuda}" if self.cuda else f"ROCm {self.rocm}" if self.rocm else "CPU only"


class Manifest(NamedTuple):
    """A framework's manifest (envs/<name>.yaml): every build envkit knows of it."""

    name: str
    summary: str
    framework: str
    builds: tuple[Build, ...]
    path: str
    retired: Optional[str] = None  # why the framework is retired, if it is
    # The packages its builds install beside the framework (torchvision, torchaudio): the keys of its `companions:`
    # rules. The check imports each one a build installs, and runs one small operation of it; envkit add never takes
    # one from elsewhere than the build.
    companions: tuple[str, ...] = ()


class PythonTable(NamedTuple):
    """python.yaml: the Pythons envkit can provide, the default, and where they come from."""

    versions: tuple[Version, ...]  # the Pythons envkit can provide, oldest first
    default: Version
    conda_channel: str  # where an environment made by conda or rattler gets its Python, when its build names none
    pypi_index: str  # the index of pip packages a build does not give an index_url for (ipykernel, tensorflow)


class Tables(NamedTuple):
    """The shared tables of a manifests directory: what detection and resolution need besides manifests."""

    cuda: CudaTable
    python: PythonTable
    gpu_names: GpuNameTable
    amd: AmdTable = EMPTY  # rocm.yaml; empty where the directory has none


class Catalog(NamedTuple):
    """A manifests directory as loaded: its shared tables and the manifests asked for."""

    directory: Path
    tables: Tables
    manifests: Mapping[str, Manifest]  # in the order asked for (or by name)
