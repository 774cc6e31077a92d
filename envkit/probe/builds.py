"""Which manifest build an environment holds, and which build to make instead. Pure: no I/O.

The probe says what is installed (torch 2.10.0+cu128); the manifests say what envkit would install. These
functions connect the two: the installed build as a manifest build (to judge it against a machine it is not on),
and the build resolution picks for the machine the probe actually met, with the command line that makes it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Optional, Sequence

from envkit.catalog.model import Build, Manifest, Tables
from envkit.machines.amd import AMD
from envkit.machines.fleet import Fleet
from envkit.machines.profile import CUDA_DRIVER, GPUS, Gpu, MachineProfile
from envkit.pick.fleet_resolve import Group, resolve_fleet
from envkit.pick.resolve import Candidate, Resolution, resolve
from envkit.probe.result import ProbeResult
from envkit.versions import ComputeCapability, CudaVersion, RocmVersion


@dataclass(frozen=True)
class NextStep:
    """The build to make instead, and how."""

    manifest: str
    build: Build
    candidate: Candidate
    command: str  # the envkit command line
    manual: tuple[str, ...]  # the same by hand (conda / pip command lines), for as long as `envkit create` is missing
    machines: tuple[str, ...] = ()  # the machines ``command`` makes it for, when the advice is for a fleet
    others: tuple[str, ...] = ()  # a fleet that no one build fits: the commands for its other groups of machines


class FleetTarget(NamedTuple):
    """The machines an environment is for, when they are more than the one machine a check judges (create plans a
    fleet's environment on one of them): the build advised must fit them all, or there is one per group."""

    fleet: Fleet
    group_command: Callable[[str, Group], Optional[str]]  # (manifest name, group) -> its `envkit create` command


def manifest_for(manifests: Iterable[Manifest], framework: str) -> Optional[Manifest]:
    """The manifest that installs ``framework``: the one named after it, else the first whose framework it is."""
    manifests = list(manifests)
    named = [m for m in manifests if m.name == framework and m.framework == framework]
    return (named or [m for m in manifests if m.framework == framework] or [None])[0]


def installed_build(manifest: Manifest, probe: ProbeResult) -> Optional[Build]:
    """The manifest build the probed environment holds, when its version and CUDA identify one."""
    if not probe.imported or probe.version is None:
        return None
    from packaging.version import InvalidVersion, Version

    try:
        installed = Version(probe.version)
    except InvalidVersion:
        return None
    line = [b for b in manifest.builds if installed.release[: len(b.version.release)] == b.version.release]
    if not probe.gpu_build:
        return next((b for b in line if not b.is_gpu), None)
    if probe.hip:  # a ROCm build: its index's variant is its local version (2.14.0+rocm7.2), else its HIP's release
        rocm = [b for b in line if b.is_rocm]
        hip = parse_rocm(probe.hip)
        return next((b for b in rocm if b.variant == installed.local), None) or next(
            (b for b in rocm if b.rocm == hip), None)
    cuda = parse_cuda(probe.cuda)
    gpu = [b for b in line if b.cuda is not None]
    if cuda is None:
        return gpu[0] if len(gpu) == 1 else None
    for match in (
        lambda b: b.cuda == cuda,
        lambda b: b.variant == cuda.tag,
        lambda b: b.variant == f"cu{cuda.major}",  # a build serving a whole CUDA line (jax cu12)
    ):
        found = [b for b in gpu if match(b)]
        if found:  # the one whose packages carry the installed local version: 2.8.0+cu126 PyTorch's, a plain
            # 2.8.0 the Jetson AI Lab's (its build of the same CUDA)
            same = [b for b in found if b.pip is not None and b.pip.local_version == (installed.local or "")]
            return (same or found)[0]
    return None


def parse_rocm(text: Optional[str]) -> Optional[RocmVersion]:
    """torch.version.hip ('7.2.53211', '6.4.43484-123eb5128') -> its ROCm release (7.2); anything else -> None."""
    if not text:
        return None
    try:
        return RocmVersion.parse(".".join(text.strip().split("-")[0].split(".")[:2]))
    except ValueError:
        return None


def companions_of(build: Optional[Build], manifest: Optional[Manifest],
                  python: Optional[str] = None) -> tuple[str, ...]:
    """The companions ``build`` installs: its pip packages that ``manifest`` names in its ``companions:`` rules, in
    the build's order, but for a pin whose environment marker leaves out ``python`` (X.Y: the environment's)."""
    if build is None or manifest is None or build.pip is None or not manifest.companions:
        return ()
    from packaging.utils import canonicalize_name

    wanted = {canonicalize_name(name) for name in manifest.companions}
    found = []
    for requirement in _requirements(build):
        if canonicalize_name(requirement.name) not in wanted:
            continue
        if requirement.marker is not None and python is not None and not requirement.marker.evaluate(
                {"python_version": python, "python_full_version": f"{python}.0"}):
            continue
        found.append(requirement.name)
    return tuple(found)


def companion_pin(build: Optional[Build], name: str) -> Optional[str]:
    """The build's own pin of the companion ``name`` (``torchvision==0.28.*``), without its marker; None if none."""
    from packaging.utils import canonicalize_name

    for requirement in _requirements(build) if build is not None and build.pip is not None else ():
        if canonicalize_name(requirement.name) == canonicalize_name(name):
            return f"{requirement.name}{requirement.specifier}"
    return None


def _requirements(build: Build) -> list:
    from packaging.requirements import InvalidRequirement, Requirement

    found = []
    for spec in build.pip.packages if build.pip is not None else ():
        try:
            found.append(Requirement(spec))
        except InvalidRequirement:  # the catalog checks every entry: nothing to say here
            continue
    return found


def parse_cuda(text: Optional[str]) -> Optional[CudaVersion]:
    """'12.6', '12.6.3', '11.2' -> CudaVersion; anything else -> None."""
    if not text:
        return None
    parts = text.strip().split(".")
    try:
        return CudaVersion.parse(".".join(parts[:2]))
    except ValueError:
        return None


def observed_profile(profile: MachineProfile, probe: ProbeResult, driver_cuda: Optional[CudaVersion],
                     on_target: bool, tables: Optional[Tables] = None) -> MachineProfile:
    """The machine as the probe met it: the driver CUDA a framework's error reported (or, when nothing else tells,
    the CUDA it started, raised to the CUDA of the first driver branch that drives its GPUs, with ``tables``), the
    GPUs it saw when detection found none.

    Only for a probe that ran on the machine the profile describes; otherwise the profile stands as it is.
    """
    if not on_target:
        return profile
    sources = dict(profile.sources)
    if driver_cuda is not None and driver_cuda != profile.cuda_driver:
        sources[CUDA_DRIVER] = f"{probe.framework or 'the framework'}'s error message"
        profile = profile._replace(cuda_driver=driver_cuda, driver_version=None)
    started = parse_cuda(probe.cuda) if probe.gpu_build and probe.devices else None
    guess_cuda = profile.cuda_driver is None and driver_cuda is None and started is not None
    seen = [d for d in probe.devices if d.compute_capability or d.gfx]
    if not profile.gpus and seen:
        gpus = []
        for device in seen:
            name = device.name or f"GPU {device.index}"
            if device.gfx:  # an AMD GPU, as a ROCm build saw it
                gpus.append(Gpu(index=device.index, name=name, compute_capability=None, source="the probe",
                                vendor=AMD, gfx=device.gfx))
                continue
            try:
                capability = ComputeCapability.parse(device.compute_capability or "")
            except ValueError:
                continue
            gpus.append(Gpu(index=device.index, name=name, compute_capability=capability, source="the probe"))
        if gpus:
            sources[GPUS] = "the probe"
            profile = profile._replace(gpus=tuple(gpus))
    if guess_cuda:
        # No probe of envkit's could read the driver, but the framework ran CUDA on it: it supports at least that,
        # and at least what the first driver branch of its GPUs supports (an RTX 5090's driver is R570 or newer).
        firsts = [tables.cuda.first_driver_for(gpu.compute_capability) for gpu in profile.gpus
                  if tables is not None and gpu.compute_capability]
        first = max((each for each in firsts if each is not None), key=lambda each: each.cuda, default=None)
        framework = probe.framework or "the framework"
        if first is not None and first.cuda > started:
            sources[CUDA_DRIVER] = (f"at least CUDA {first.cuda}: {first.describe()} ({framework} started CUDA "
                                    f"{started})")
            started = first.cuda
        else:
            sources[CUDA_DRIVER] = f"at least the CUDA {started} that {framework} started here"
        profile = profile._replace(cuda_driver=started)
    return profile._replace(sources=sources)


def next_step(manifest: Manifest, profile: MachineProfile, tables: Tables,
              machine_args: Sequence[str] = (), fleet: Optional[FleetTarget] = None) -> Optional[NextStep]:
    """The build resolution picks for ``profile``, as a command line; None when no build fits. ``machine_args``:
    the options that name ``profile``'s machine when it is not this one (``--machine FILE``), so that the command
    makes the build for it when pasted here; with ``fleet``, the options that name all of its machines (then the
    build is picked for them all: see :func:`fleet_next_step`)."""
    if fleet is not None and fleet.fleet.single is None:
        return fleet_next_step(manifest, profile, tables, machine_args, fleet)
    resolution: Resolution = resolve(manifest, profile, tables)
    return _create_step(manifest, resolution.selected, machine_args) if resolution.selected is not None else None


def fleet_next_step(manifest: Manifest, profile: MachineProfile, tables: Tables, machine_args: Sequence[str],
                    fleet: FleetTarget) -> Optional[NextStep]:
    """The build for every machine of the fleet, with ``machine_args`` (which name them all); when no build fits them
    all, one command per group of machines (as `envkit list` and `envkit create` give them), the group that holds
    ``profile``'s machine first. None when no build fits any."""
    result = resolve_fleet(manifest, fleet.fleet, tables)
    if not result.split:
        if result.selected is None:
            return None
        return _create_step(manifest, result.selected, machine_args, machines=fleet.fleet.names)
    groups = [(group, fleet.group_command(manifest.name, group)) for group in result.groups if group.selected]
    groups = sorted([(g, c) for g, c in groups if c], key=lambda pair: profile.name not in pair[0].machines)
    if not groups:
        return None
    (first, command), others = groups[0], groups[1:]
    return _step(manifest, first.selected, command, machines=first.machines, others=tuple(c for _, c in others))


def _create_step(manifest: Manifest, selected: Candidate, machine_args: Sequence[str],
                 machines: tuple[str, ...] = ()) -> NextStep:
    """``selected`` as `envkit create MANIFEST --build ID` for the machines ``machine_args`` name."""
    command = shlex.join(["envkit", "create", manifest.name, "--build", selected.build.id, *machine_args])
    return _step(manifest, selected, command, machines=machines)


def _step(manifest: Manifest, selected: Candidate, command: str, machines: tuple[str, ...] = (),
          others: tuple[str, ...] = ()) -> NextStep:
    return NextStep(manifest=manifest.name, build=selected.build, candidate=selected, command=command,
                    manual=manual_commands(selected.build, str(selected.python) if selected.python else None),
                    machines=machines, others=others)


def manual_commands(build: Build, python: Optional[str] = None) -> tuple[str, ...]:
    """The same build by hand, into a new environment named after the build (conda first, then pip)."""
    name = shlex.quote(build.id)
    pin = f"python={python}" if python else "python"
    out = []
    if build.conda is not None:
        channels = " ".join(f"-c {shlex.quote(c)}" for c in build.conda.channels)
        packages = " ".join(shlex.quote(p) for p in build.conda.packages)
        out.append(f"conda create -n {name} --override-channels {channels} {pin} {packages}")
    if build.pip is not None and build.pip.packages:
        packages = " ".join(shlex.quote(p) for p in build.pip.packages)
        index = f" --index-url {shlex.quote(build.pip.index_url)}" if build.pip.index_url else ""
        if build.pip.find_links:
            index += f" --find-links {shlex.quote(build.pip.find_links)}"
        if build.conda is None:
            out.append(f"python{python or '3'} -m venv {name}")
            out.append(f"{name}/bin/python -m pip install {packages}{index}")
        else:
            out.append(f"conda run -n {name} python -m pip install {packages}{index}")
    return tuple(out)
