"""Which builds of a manifest run on a machine, and which one to pick. Pure functions: no I/O.

A CUDA build judges the machine's NVIDIA GPUs, a ROCm build its AMD GPUs (envkit.pick.rocm); a machine with both is
judged as both, and the pick is the build that uses the most GPUs. A CUDA build is compatible only when (1) the driver supports its CUDA, natively or through CUDA minor-version
compatibility (then only from ready-made SASS: an older driver cannot JIT-compile a newer toolkit's PTX), and every
library it bundles runs on that driver, (2) EVERY GPU is covered by its SASS (same major, lower-or-equal minor) or PTX
(lower-or-equal arch), (3) it publishes a Python envkit can provide, and (4) its packages install on the machine's
glibc, when both are known, and (5) it has packages for the machine's platform, which on a Jetson means a build its
integrated GPU runs (envkit.pick.platform). A profile that puts a GPU on a driver older than the first branch that
drives it describes no real machine: no GPU build is judged to run there. Every verdict carries its reasons in words a
user understands. They name no machine ("the driver has 11.2", "the machine has none"), so they read true for this
machine, for a profile, and after a fleet's machine names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, NamedTuple, Optional, Sequence

from envkit.catalog.model import ArchSet, Build, Manifest, PythonTable, Tables
from envkit.errors import BadInputError
from envkit.machines.profile import Gpu, MachineProfile
from envkit.pick.platform import platform_problem
from envkit.pick.gpu_groups import gpu_group, groups
from envkit.pick.rocm import rocm_verdict
from envkit.versions import ComputeCapability, CudaVersion

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version


class Request(NamedTuple):
    """What the user asked for beyond the machine: today, a Python version (``--python X.Y``)."""

    python: Optional[Version] = None


class Candidate(NamedTuple):
    """One build judged for a machine: whether it fits, the Python it would get, and why."""

    build: Build
    compatible: bool
    native: Optional[bool]  # True: the driver runs the build's CUDA as is; False: only via minor-version compat
    python: Optional[Version]  # the Python the environment would get
    reasons: tuple[str, ...]
    gpus_used: int = 0  # how many of the machine's GPUs the build uses, when it fits (on a machine of both vendors,
    # a CUDA build uses the NVIDIA ones and a ROCm build the AMD ones: the pick uses the most)


class Resolution(NamedTuple):
    """Every build of a manifest judged for a machine, the preferred one first."""

    manifest: Manifest
    candidates: tuple[Candidate, ...]  # compatible ones first, the preferred one first of all

    @property
    def selected(self) -> Optional[Candidate]:
        first = self.candidates[0] if self.candidates else None
        return first if first is not None and first.compatible else None

    @property
    def compatible(self) -> tuple[Candidate, ...]:
        return tuple(c for c in self.candidates if c.compatible)

    @property
    def incompatible(self) -> tuple[Candidate, ...]:
        return tuple(c for c in self.candidates if not c.compatible)


def parse_python_request(text: Optional[str], table: PythonTable) -> Request:
    """Validate ``--python X.Y`` against the Pythons envkit can provide."""
    if text is None:
        return Request()
    from packaging.version import InvalidVersion, Version

    try:
        version = Version(text.strip())
    except InvalidVersion:
        version = None
    if version is None or len(version.release) != 2:
        raise BadInputError(f"--python {text}: expected a Python version like 3.12")
    if version not in table.versions:
        raise BadInputError(
            f"--python {text}: envkit provides Python {_span(table.versions)}",
            hint="Pick one of those, or add the version to python.yaml in the manifests directory.",
        )
    return Request(python=version)


def resolve(manifest: Manifest, profile: MachineProfile, tables: Tables, request: Request = Request()) -> Resolution:
    """Every build of the manifest judged for the machine, ranked by preference."""
    candidates = [assess(build, profile, tables, request) for build in manifest.builds]
    return Resolution(manifest=manifest, candidates=tuple(rank(candidates, has_gpus=bool(profile.gpus))))


def rank(candidates: Iterable[Candidate], has_gpus: bool, confirmed_first: bool = True) -> list[Candidate]:
    """Compatible before incompatible; on a machine with GPUs every GPU build before every CPU build; then a build
    whose facts the manifest's authors could confirm before one with an ``unconfirmed`` note, whatever their versions
    (a reported build may not exist: it is picked only when named with --build, or once `envkit manifests check` has
    listed it and its note is gone); then the newest framework version; then a build the driver runs natively before
    one needing minor-version compatibility; then the newest CUDA. Before all of these but the first two, the build
    that uses the most GPUs (only a machine with both NVIDIA and AMD GPUs has builds that differ in it). Stable sorts,
    least important key first. Without
    ``confirmed_first``, the order the pick would have without that rule (:func:`passed_over`)."""
    ordered = sorted(candidates, key=lambda c: c.build.cuda or (0, 0), reverse=True)
    ordered.sort(key=lambda c: c.native is False)
    ordered.sort(key=lambda c: c.build.version, reverse=True)
    if confirmed_first:
        ordered.sort(key=lambda c: c.build.unconfirmed is not None)
    ordered.sort(key=lambda c: -c.gpus_used)
    ordered.sort(key=lambda c: has_gpus and not c.build.is_gpu)
    ordered.sort(key=lambda c: not c.compatible)
    return ordered


def passed_over(resolution: Resolution) -> Optional[Candidate]:
    """The build that would be the pick if unconfirmed builds were not put after confirmed ones: one that fits and
    would rank first, whose note says what could not be checked (`envkit list` shows it beside the pick, with how to
    install it anyway); None when the pick is that build, or there is no pick. (Where the pick is a GPU build, GPU
    builds rank first; where it is a CPU build, no GPU build fits: either way the pick's kind is the machine's.)"""
    selected = resolution.selected
    if selected is None:
        return None
    first = rank(resolution.candidates, has_gpus=selected.build.is_gpu, confirmed_first=False)[0]
    return None if first.build.id == selected.build.id or first.build.unconfirmed is None else first


def assess(build: Build, profile: MachineProfile, tables: Tables, request: Request = Request()) -> Candidate:
    """One build against one machine: compatible or not, and why. The build is judged as it is on the machine's
    platform (its arch list and install settings there: Build.on), and the candidate carries that form."""
    build = build.on(profile.platform)
    python, python_problem = _python(build.python, tables.python, request)
    # Problems that hold whatever the GPUs: the Python, the C library.
    common = [problem for problem in (python_problem, glibc_problem(build, profile)) if problem]
    # No packages for this platform, or not ones a Jetson's GPU runs: nothing else matters (but a GPU build on a
    # machine without a GPU is refused for that, the one plain reason, as below).
    elsewhere = platform_problem(build, profile, tables) if profile.gpus or not build.is_gpu else None
    if elsewhere:
        return Candidate(build, False, None, python, (elsewhere, *common))
    if not build.is_gpu:
        reasons = list(common)
        if profile.gpus and not common:
            reasons.append("CPU only: does not use the GPUs")
        return Candidate(build, not common, None, python, tuple(reasons))

    if build.is_rocm:
        verdict = rocm_verdict(build, profile, tables, common)
        return Candidate(build, verdict.compatible, None, python, verdict.reasons, verdict.gpus_used)
    assert build.cuda is not None and build.arch is not None  # guaranteed by the catalog for CUDA builds
    native, driver_ok, driver_reason = _driver(build, profile, tables)
    impossible = before_first_driver(profile, tables)
    nvidia = profile.nvidia_gpus
    if not nvidia or impossible:  # one plain reason: the driver does not matter without a (real) GPU
        none = "the machine's GPUs are AMD: a CUDA build cannot use them" if profile.gpus else "the machine has none"
        problems = list(impossible) or [f"needs an NVIDIA GPU; {none}"]
        return Candidate(build, False, native, python, tuple(problems + common))
    if not driver_ok:
        driver_reason += beyond_last_driver(cuda=build.cuda, gpus=profile.gpus, tables=tables)
    problems = [] if driver_ok else [driver_reason]
    notes = [driver_reason] if driver_ok else []
    library = _bundled_driver(build, profile, tables) if driver_ok else None
    if library:
        problems.append(library)
    # Only a driver that runs the build through minor-version compatibility limits it to ready-made GPU code; a
    # driver too old for the build at all is reported as such, and the GPUs are judged as a new driver would run it.
    minor_compat = driver_ok and native is False
    for gpus, verdict, ok in _coverage(build, nvidia, sass_only=minor_compat):
        (notes if ok else problems).append(f"{gpu_group(gpus)}: {verdict}")
    if profile.amd_gpus and not problems:
        notes.append(f"{gpu_group(profile.amd_gpus)}: not used by a CUDA build")
    problems += common
    compatible = not problems
    return Candidate(build, compatible, native, python, tuple(notes if compatible else problems),
                     len(nvidia) if compatible else 0)


# --- the driver -------------------------------------------------------------------------------------------------

def _driver(build: Build, profile: MachineProfile, tables: Tables) -> tuple[Optional[bool], bool, str]:
    """(native, runs, reason). native is None when there is no driver to judge."""
    cuda = build.cuda
    have = profile.cuda_driver
    if have is None:
        if profile.driver_version is not None or profile.gpus:
            return None, False, (
                f"needs driver CUDA >= {cuda}; the machine's driver CUDA is unknown (pass --cuda X.Y, the "
                f"'CUDA Version' nvidia-smi prints)"
            )
        return None, False, f"needs an NVIDIA driver for CUDA >= {cuda}; none found"
    if have >= cuda:
        return True, True, f"driver CUDA {have} runs CUDA {cuda} natively"
    floor = tables.cuda.minor_compat_floor.get(cuda.major)
    plain = f"needs driver CUDA >= {cuda}, the driver has {have}"
    if floor is None or have.major != cuda.major or profile.is_jetson:  # (a Jetson's "driver" is its JetPack's)
        return False, False, plain
    driver = profile.driver_version
    if driver is None:
        lowest = tables.cuda.driver_floor(have)
        if lowest is None or lowest < floor:
            return False, False, (
                f"{plain}; minor-version compatibility needs driver >= {floor}, and the machine's driver version "
                f"is unknown"
            )
        driver_text = f"any driver for CUDA {have} is >= {lowest}"
    elif driver < floor:
        return False, False, f"{plain}; minor-version compatibility needs driver >= {floor}, this one is {driver}"
    else:
        driver_text = f"driver {driver}"
    return False, True, (
        f"runs CUDA {cuda} on driver CUDA {have} through CUDA minor-version compatibility ({driver_text}, "
        f">= {floor}), which runs only GPU code compiled ahead of time"
    )


def _bundled_driver(build: Build, profile: MachineProfile, tables: Tables) -> Optional[str]:
    """Why a library the build bundles does not run on the machine's driver (its own floor, newer than the build's
    CUDA needs: NVIDIA's cuDNN support matrix gives one per release), or None. With the driver's version unknown,
    the lowest driver that reports its CUDA must meet the floor."""
    for library in build.bundled:
        floor = library.min_driver
        if floor is None:
            continue
        driver = profile.driver_version
        if driver is not None:
            if driver < floor:
                return f"{library.name}, bundled by this build, needs driver {floor} or newer; this one is {driver}"
            continue
        lowest = tables.cuda.driver_floor(profile.cuda_driver) if profile.cuda_driver is not None else None
        if lowest is None or lowest < floor:
            return (f"{library.name}, bundled by this build, needs driver {floor} or newer, and the machine's driver "
                    f"version is unknown (drivers for CUDA {profile.cuda_driver} start at {lowest})")
    return None


def glibc_problem(build: Build, profile: MachineProfile) -> Optional[str]:
    """Why the build's packages do not install on the machine's C library (manylinux_2_28 wheels need glibc 2.28),
    or None; a machine whose glibc is unknown is not refused."""
    if build.glibc is None or profile.glibc is None or profile.glibc >= build.glibc:
        return None
    return (f"needs glibc {build.glibc} or newer (its wheels are manylinux_{build.glibc.major}_{build.glibc.minor}); "
            f"the machine has glibc {profile.glibc}")


def before_first_driver(profile: MachineProfile, tables: Tables) -> tuple[str, ...]:
    """What makes a profile impossible: a GPU on a driver older than the first branch that drives it (an RTX 5090 on
    R525). One sentence per GPU model; () for a profile that could be real. A Jetson's GPU has no driver branch of
    these (nvidia-smi's 540.4.0 is JetPack 6's own): never judged this way."""
    said: dict[str, str] = {}
    if profile.is_jetson:
        return ()
    for gpu in profile.gpus:
        first = tables.cuda.first_driver_for(gpu.compute_capability) if gpu.compute_capability else None
        claim = first.refuses(profile.driver_version, profile.cuda_driver) if first is not None else None
        if claim is not None and gpu.name not in said:
            said[gpu.name] = (f"{gpu.label} cannot be on {claim}: {first.describe()}, and no older driver drives it; "
                              f"the profile describes no real machine (hand-written, or stale?)")
    return tuple(said.values())


def driver_runs(build: Build, profile: MachineProfile, tables: Tables) -> tuple[bool, str]:
    """Whether the machine's driver runs ``build``'s CUDA (natively, or through minor-version compatibility), and
    the reason, either way (the check asks it of the machine it ran on, where a framework's error does not say)."""
    _, runs, reason = _driver(build, profile, tables)
    return runs, reason


def beyond_last_driver(cuda: CudaVersion, gpus: Sequence[Gpu], tables: Tables) -> str:
    """Words to add where a driver for ``cuda`` is asked for but no driver for it drives one of the GPUs (a V100
    after R580): "; no driver for CUDA 13.2 drives sm_70: R580 (CUDA 13.0) is the last ...", or ""."""
    for gpu in gpus:
        last = tables.cuda.last_driver_for(gpu.compute_capability) if gpu.compute_capability else None
        if last is not None and cuda > last.cuda:
            return f"; no driver for CUDA {cuda} drives {gpu.compute_capability.sm}: {last.describe()}"
    return ""


def impossible_driver(profile: MachineProfile, tables: Tables) -> tuple[str, ...]:
    """What a profile claims that no driver does: a GPU on a driver older than the first branch that drives it (no
    GPU build is judged to run there: :func:`before_first_driver`), or on a branch newer than the last that drives
    it (a hand-written profile of a V100 on R595: judged as it says). One sentence per GPU model."""
    said: dict[str, str] = {}
    early = before_first_driver(profile, tables)
    for gpu in () if profile.is_jetson else profile.gpus:
        last = tables.cuda.last_driver_for(gpu.compute_capability) if gpu.compute_capability else None
        if last is None or gpu.name in said:
            continue
        driver = profile.driver_version
        if driver is not None and driver.branch > last.branch:
            claim = f"driver {driver}"
        elif driver is None and profile.cuda_driver is not None and profile.cuda_driver > last.cuda:
            claim = f"a driver for CUDA {profile.cuda_driver}"
        else:
            continue
        said[gpu.name] = (f"{gpu.label} cannot be on {claim}: {last.describe()}, so no newer driver drives it; the "
                          f"profile is judged as it says, but check it")
    return (*early, *said.values())


# --- the GPUs ----------------------------------------------------------------------------------------------------

def _coverage(build: Build, gpus: Sequence[Gpu], sass_only: bool) -> list[tuple[list[Gpu], str, bool]]:
    """For each group of identical GPUs: (the GPUs, what the build has for them, whether that runs)."""
    assert build.arch is not None and build.cuda is not None
    arch, cuda = build.arch, build.cuda
    out = []
    for group in groups(gpus):
        capability = group[0].compute_capability
        if capability is None:
            out.append((group, "compute capability unknown; pass --gpu-arch X.Y", False))
            continue
        sass, ptx = sass_for(arch, capability), ptx_for(arch, capability)
        refusals = [why for why in (b.refuses(capability) for b in build.bundled) if why]
        if refusals and (sass is not None or ptx is not None):
            out.append((group, refusals[0], False))
        elif sass is not None:
            out.append((group, f"runs the build's {sass.sm} code", True))
        elif ptx is not None and sass_only:
            out.append((group, (
                f"the build has no ready-made code for {capability.sm}, only {ptx.compute} PTX, and this driver "
                f"cannot JIT-compile a CUDA {cuda} build's PTX (it is older than CUDA {cuda}); a driver for CUDA "
                f"{cuda} or newer would"), False))
        elif ptx is not None:
            out.append((group, f"the driver compiles the build's {ptx.compute} PTX for it at first start (slow once)",
                        True))
        else:
            out.append((group, f"no kernels for {capability.sm}: this build has {describe_arch(arch, capability)}",
                        False))
    return out


def sass_for(arch: ArchSet, capability: ComputeCapability) -> Optional[ComputeCapability]:
    """The SASS a GPU runs: the build's newest of the same major with a lower-or-equal minor."""
    return max((s for s in arch.sass if s.major == capability.major and s.minor <= capability.minor), default=None)


def ptx_for(arch: ArchSet, capability: ComputeCapability) -> Optional[ComputeCapability]:
    """The PTX a GPU can JIT-compile: the build's newest of a lower-or-equal arch."""
    return max((p for p in arch.ptx if p <= capability), default=None)


def runs_on(arch: ArchSet, capability: ComputeCapability) -> bool:
    """Whether a build's GPU code covers this GPU, by SASS or by PTX."""
    return sass_for(arch, capability) is not None or ptx_for(arch, capability) is not None


def describe_arch(arch: ArchSet, missing: Optional[ComputeCapability] = None) -> str:
    """The build's GPU code, in the words most useful for a GPU it does not cover."""
    every = sorted({*arch.sass, *arch.ptx})
    ptx = f" and PTX {', '.join(p.compute for p in arch.ptx)}" if arch.ptx else ""
    if missing is not None and every and missing < every[0]:
        return f"{every[0].sm} and newer"
    if missing is not None and arch.sass and missing > arch.sass[-1] and not arch.ptx:
        return f"{arch.sass[0].sm} to {arch.sass[-1].sm} and no PTX for newer GPUs"
    return (", ".join(s.sm for s in arch.sass) or "no SASS") + ptx


# --- Python -----------------------------------------------------------------------------------------------------

def _python(spec: SpecifierSet, table: PythonTable, request: Request) -> tuple[Optional[Version], Optional[str]]:
    """(the Python the environment gets, or None with the problem)."""
    offered = [v for v in table.versions if spec.contains(v)]
    if request.python is not None:
        if request.python in offered:
            return request.python, None
        return None, f"publishes Python {_span(offered) if offered else spec}, not {request.python}"
    if not offered:
        return None, f"publishes Python {spec}, which envkit cannot provide (it provides {_span(table.versions)})"
    return choose_python(offered, table.default), None


def choose_python(offered: Sequence[Version], default: Version) -> Version:
    """The default if offered, else the newest offered below it, else the oldest above it."""
    below = [v for v in offered if v <= default]
    return max(below) if below else min(offered)


def _span(versions: Sequence[Version]) -> str:
    return str(versions[0]) if len(versions) == 1 else f"{versions[0]}-{versions[-1]}"
