"""`envkit lock`: pin a build for a target exactly, without creating an environment.

The build is picked as `envkit create` picks it for that target, and locked for the target's platform (linux-64, or
linux-aarch64 for a Grace partition, from any login node). Its conda part (when it has one) is solved by the embedded
engine for that platform's subdir with the target's virtual packages: ``__cuda`` from the target's driver and, per CEP
46, ``__cuda_arch`` = the lowest compute capability of its GPUs (py-rattler 0.28 detects neither for another machine,
but its solver honours any generic virtual package envkit passes, so both come from the profile). Its pip part is
resolved by uv from the build's own index for the target Python and platform. Every URL is kept upstream.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from envkit.backends.plan import conda_part, cuda_for_solve, pip_parts
from envkit.errors import InstallError
from envkit.lockfile import model
from envkit.lockfile.model import PLATFORM, LockedPackage, LockFile
from envkit.lockfile.urls import upstream_url
from envkit.machines.profile import Gpu, MachineProfile
from envkit.state.config import Config

if TYPE_CHECKING:
    from rattler import RepoDataRecord

    from envkit.catalog.model import Manifest, Tables
    from envkit.pick.resolve import Request, Resolution


@dataclass(frozen=True)
class LockRequest:
    manifest: Manifest
    tables: Tables
    profile: MachineProfile
    target: str  # the target in words, for custom_metadata
    on_target: bool
    python: Request
    build_id: Optional[str] = None
    target_args: str = ""  # the options that chose the machine, for the commands errors suggest
    gpus: tuple[Gpu, ...] = ()  # every GPU of the target's machines (a fleet): __cuda_arch is the lowest of them
    resolution: Optional["Resolution"] = None  # the profile's, when the fleet's resolution made it: not made again


def cuda_arch(profile: MachineProfile) -> Optional[str]:
    """CEP 46's ``__cuda_arch``: the lowest compute capability among the profile's GPUs (None without GPUs, or when
    one GPU's is unknown: then nothing can be said for all of them)."""
    capabilities = [gpu.compute_capability for gpu in profile.gpus]
    if not capabilities or any(cc is None for cc in capabilities):
        return None
    return str(min(cc for cc in capabilities if cc is not None))


def make_lock(request: LockRequest, config: Config, cache_dir: Path, uv: Path,
              environ: Mapping[str, str], installer_environ: Mapping[str, str],
              warn: Optional[Callable[[str], None]] = None) -> LockFile:
    from envkit import __version__
    from envkit.create.prepare import pick_candidate

    candidate, resolution = pick_candidate(request.manifest, request.profile, request.tables, request.python,
                                           request.build_id, request.on_target, request.target_args,
                                           request.resolution)
    if request.build_id is None and warn is not None:
        from envkit.pick.cpu_fallback import gpu_unused

        unused = gpu_unused(resolution, request.profile)
        if unused:
            warn(f"the lock pins a CPU build on a machine with GPUs: {unused}")
    build, python = candidate.build, candidate.python  # (the build as it is on the target's platform: Build.on)
    assert python is not None  # a compatible candidate has its Python
    platform = request.profile.platform
    python_text = str(python)
    pips = pip_parts(build, request.tables.python, config, jupyter=False)
    cuda, _ = cuda_for_solve(request.profile, environ)
    every = MachineProfile(gpus=request.gpus) if request.gpus else request.profile
    arch = cuda_arch(every) if cuda else None
    packages: list[LockedPackage] = []
    channels: tuple[str, ...] = ()
    asked: list[str] = []
    if build.conda is not None:
        part = conda_part(build, python, request.tables.python, config, (cuda, ""), with_pip=bool(pips))
        virtual = ((("__cuda", cuda),) if cuda else ()) + ((("__cuda_arch", arch),) if arch else ())
        packages += _lock_conda(part.channels, part.specs, virtual, config, cache_dir, platform)
        channels = tuple(upstream_url(c, config) for c in part.channels)
        asked += [*part.specs, *(f"{name}={version}" for name, version in virtual)]
    from envkit.lockfile.pylock import lock_pip

    for step in pips:
        packages += lock_pip(step.packages, step.index_url, python_text, config, uv, installer_environ,
                             step.find_links, platform=platform)
        asked += [step.index_url, *step.packages]
    custom = {
        model.MANIFEST: request.manifest.name, model.BUILD: build.id, model.TARGET: request.target,
        model.CUDA_DRIVER: cuda or "", model.CUDA_ARCH: arch or "", model.PYTHON: python_text,
        model.INDEX_URL: upstream_url(pips[0].index_url, config) if pips else "", model.ENVKIT_VERSION: __version__,
        model.FIND_LINKS: upstream_url(pips[0].find_links, config) if pips and pips[0].find_links else "",
    }
    content = hashlib.sha256(json.dumps([python_text, *asked]).encode()).hexdigest()
    return LockFile(packages=tuple(packages), platforms=(platform,), channels=channels,
                    content_hash={platform: content}, sources=(request.manifest.path,), custom=custom,
                    created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def _lock_conda(channels: tuple[str, ...], specs: tuple[str, ...], virtual: tuple[tuple[str, str], ...],
                config: Config, cache_dir: Path, platform: str) -> list[LockedPackage]:
    from envkit.backends.conda_engine import CondaSolveRequest, solve

    records = solve(CondaSolveRequest(channels=channels, specs=specs, virtual_packages=virtual, platform=platform),
                    cache_dir)
    return [conda_package(record, config, platform) for record in records]


def conda_package(record: RepoDataRecord, config: Config, platform: str = PLATFORM) -> LockedPackage:
    """A solved (or installed) conda record as a locked package, its URL taken back to its upstream."""
    name = record.name.normalized
    if record.sha256 is None or record.md5 is None:
        raise InstallError(f"the conda channel gives no sha256 or md5 for {name} ({record.url})",
                           hint="Lock from a channel whose repodata has both (any indexed by conda or rattler).")
    return LockedPackage(name=name, version=str(record.version), manager="conda", platform=platform,
                         url=upstream_url(record.url, config), sha256=record.sha256.hex(), md5=record.md5.hex(),
                         build=str(record.build), dependencies=tuple(split_depends(record.depends)))


def split_depends(depends: list[str]) -> list[tuple[str, str]]:
    """conda's "name spec" strings as conda-lock's (name, spec) pairs."""
    out = []
    for depend in depends:
        name, _, spec = depend.strip().partition(" ")
        out.append((name, spec.strip()))
    return out
