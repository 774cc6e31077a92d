"""`envkit create --from-lock`: a Prepared plan that installs exactly what a lock pins, with no solve, for the same
all-or-nothing machinery as `envkit create` (envkit.create.execute).

The conda part: every archive fetched (through the user's mirrors) and hash-checked by envkit, then installed by the
embedded engine as it is. The pip part: every file fetched and hash-checked by envkit too (every redirect held to
the transport rule), linked into a local directory, and installed from there by uv (or pip) with a requirements
file of ``name==version --hash=sha256:...`` lines, ``--require-hashes --no-deps --no-index --find-links DIR``: the
installer reaches no network. A lock without a conda part gets a venv from a Python of the locked version already
on this machine, as `create` makes for pure-pip builds.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from packaging.version import InvalidVersion, Version

from envkit.backends.base import Backend, Context, OnLine, install_limits
from envkit.backends.plan import CondaPart, PipPart, Plan, cuda_for_solve
from envkit.backends.tools import Tools, find_python, find_uv
from envkit.catalog.model import Build, Manifest, Tables
from envkit.create.prepare import Prepared, name_for, storage_context, usable_prefix
from envkit.errors import EnvkitError, InstallError
from envkit.lockfile import model
from envkit.lockfile.fetch import LockedFiles
from envkit.lockfile.fit import THEY, check_platform, raise_unless_fits, remake_command, virtual_reasons
from envkit.lockfile.format import LockFileError, install_name
from envkit.lockfile.model import LockedPackage, LockFile, python_of_lock
from envkit.lockfile.urls import fetch_url
from envkit.machines.fleet import names_text
from envkit.machines.profile import MachineProfile
from envkit.pick.resolve import Request, assess
from envkit.state.config import Config
from envkit.state.files import write_atomic
from envkit.state.records import RECORD_DIR
from envkit.state.userdirs import UserDirs

LOCKED_FILES = "the lock's files, fetched and hash-checked by envkit"  # a PipPart's index_url: none (no "://")
LOCK_IN_PREFIX = "conda-lock.yml"  # a copy of the installed lock, beside envkit's record: PREFIX/.envkit/
PYLOCK_IN_PREFIX = "pylock.toml"  # the same, for an environment made from a PEP 751 lock


@dataclass(frozen=True)
class FromLock:
    path: Path
    name: Optional[str] = None
    prefix: Optional[Path] = None
    verify: bool = True


@dataclass(frozen=True)
class Target:
    profile: MachineProfile
    on_target: bool
    machine: str  # in words, for messages: "this machine", "the machine described (a100)"
    args: str = ""  # the options that chose the machine, for the commands errors suggest
    # The machines named (profiles, a partition): (their names, their profile) per distinct configuration.
    each: tuple[tuple[tuple[str, ...], MachineProfile], ...] = ()
    label: str = "this machine"  # what a lock made for the target is named after: a partition, a machine


class LockedCondaBackend:
    """Installs a lock's conda packages exactly: fetched, hash-checked, installed without a solve."""

    name = "rattler"

    def __init__(self, packages: Sequence[LockedPackage], sources: Sequence[str], lock: Path,
                 mirrors: Sequence[str] = (), pip_files: Optional[LockedFiles] = None,
                 platform: str = model.PLATFORM) -> None:
        self.packages, self.sources, self.lock, self.platform = tuple(packages), tuple(sources), lock, platform
        self.mirrors = tuple(mirrors)  # where a redirect may lead over plain http, besides loopback
        self.pip_files = pip_files

    def describe(self, plan: Plan, context: Context) -> list[str]:
        return [*_fetching(self.pip_files),
                f"embedded conda engine (py-rattler): fetch and hash-check {len(self.packages)} locked packages, "
                f"install them into {plan.prefix} as they are (no solve)"]

    def make_prefix(self, plan: Plan, context: Context, on_line: OnLine) -> None:
        from envkit.backends.conda_engine import install_archives
        from envkit.lockfile.fetch import fetch_all

        if self.pip_files is not None:  # first: a refused redirect or a wrong file leaves no prefix made
            self.pip_files.fetch(on_line)
        paths = fetch_all(self.packages, self.sources, context.conda_cache / "locked", on_line, self.mirrors)
        on_line(f"all {len(paths)} conda packages match their locked hashes")
        channels = [_channel_of(package.url) for package in self.packages]
        archives = [(path, channel, package.sha256, package.md5 or "")
                    for path, channel, package in zip(paths, channels, self.packages)]
        install_archives(plan.prefix, archives, context.conda_cache, on_line, self.platform)
        save_lock(plan.prefix, self.lock)


class LockedVenvBackend:
    """A lock without a conda part: a venv from a Python of its version on this machine (as `create` makes for
    pure-pip builds); the lock is kept in it, as in a conda one."""

    name = "venv"

    def __init__(self, lock: Path, pip_files: Optional[LockedFiles] = None) -> None:
        from envkit.backends.venv import VenvBackend

        self.venv, self.lock, self.pip_files = VenvBackend(), lock, pip_files

    def describe(self, plan: Plan, context: Context) -> list[str]:
        return [*_fetching(self.pip_files), *self.venv.describe(plan, context)]

    def make_prefix(self, plan: Plan, context: Context, on_line: OnLine) -> None:
        if self.pip_files is not None:
            self.pip_files.fetch(on_line)
        self.venv.make_prefix(plan, context, on_line)
        save_lock(plan.prefix, self.lock)


def _fetching(files: Optional[LockedFiles]) -> list[str]:
    if files is None:
        return []
    return [f"envkit: fetch and hash-check {len(files.packages)} locked pip packages, linked into {files.links}"]


def save_lock(prefix: Path, lock: Path) -> None:
    """A copy of the lock file, as it is, beside envkit's record: `envkit export` takes its upstream URLs from it
    (installers do not record the hashes of what they installed from a URL). A pylock.toml keeps its format."""
    from envkit.lockfile.pep751 import is_pylock

    write_atomic(prefix / RECORD_DIR / (PYLOCK_IN_PREFIX if is_pylock(lock) else LOCK_IN_PREFIX), lock.read_bytes())


def prepare_from_lock(request: FromLock, lock: LockFile, manifest_of: Callable[[str], Optional[Manifest]],
                      tables: Tables, target: Target, config: Config, dirs: UserDirs,
                      environ: Mapping[str, str]) -> tuple[Prepared, Optional[Manifest]]:
    """The plan that installs ``lock``, and the manifest of its build when the manifests still have that build (the
    post-install check needs it). Refuses a lock for another platform or with a URL envkit may not fetch (exit 2),
    and one whose target does not fit (exit 1)."""
    origin = str(request.path)
    platform = target.profile.platform  # (a fleet of several platforms gets one lock per platform: never this one)
    check_platform(lock, origin, platform)
    conda, pips = lock.conda(platform), lock.pip(platform)
    conda_sources = [fetch_url(p.url, config, f"{origin}: conda package {p.name}: URL") for p in conda]
    pip_sources = [fetch_url(p.url, config, f"{origin}: pip package {p.name}: URL") for p in pips]
    python = _python(lock, origin)
    manifest, build = _build_of(lock, manifest_of)
    _check_fit(lock, manifest, build, python, tables, target, environ, platform)
    name = name_for(request.name, request.prefix, _default_name(lock, request.path))
    uv = find_uv(environ)
    system_python = None if conda else find_python(python, uv, environ, dirs, platform)
    if not conda and system_python is None:
        from envkit.machines.platforms import machine_of, native_platform

        which = "" if platform == native_platform() else f" for {machine_of(platform)} ({platform}, the lock's)"
        raise InstallError(f"the lock has no conda part and there is no Python {python}{which} on this machine to "
                           "make a venv with", hint=f"Install Python {python} (or install the lock on a machine of its "
                                                "platform), or lock a build that brings its own Python.")
    tools = Tools(conda=None, uv=uv, python=system_python)
    prefix = usable_prefix(Path(request.prefix).expanduser().absolute() if request.prefix is not None
                           else (config.envs_dir or dirs.envs) / name, dirs, config)
    conda_plan: Optional[CondaPart] = None
    if conda:
        cuda = cuda_for_solve(target.profile, environ)
        conda_plan = CondaPart(
            channels=tuple(dict.fromkeys(_channel_of(s) for s in conda_sources)),
            specs=tuple(f"{p.name}={p.version}={p.build or '*'}" for p in conda), cuda=cuda[0], cuda_source=cuda[1])
    steps: tuple[PipPart, ...] = ()
    if pips:
        steps = (PipPart("locked pip packages", tuple(f"{p.name}=={p.version}" for p in pips), LOCKED_FILES,
                         requirements=requirements_file(pips, dirs.cache)),)
    verify = request.verify and manifest is not None
    unchecked = "--no-verify" if not request.verify else _why_unchecked(lock)
    plan = Plan(manifest=manifest.name if manifest else (lock.fact(model.MANIFEST) or "lock"), build=build, name=name,
                prefix=prefix, python=python, backend=LockedCondaBackend.name if conda else LockedVenvBackend.name,
                backend_reason=f"installs {request.path.name} exactly: every file hash-checked, no solve",
                conda=conda_plan, pip=steps, jupyter=False, verify=verify, profile=target.profile,
                on_target=target.on_target, unchecked=unchecked,
                additions=tuple(filter(None, (lock.fact(model.ADDITIONS) or "").splitlines())))
    install_limits(environ)  # a bad ENVKIT_INSTALL_TIMEOUT is exit 2 here, before anything is made
    context, storage = storage_context(plan, tools, config, dirs, environ)
    mirrors = tuple(m.target for m in config.mirrors)
    pip_files = None
    if pips:  # beside the package cache (envkit.create.storage), which decides where
        assert steps[0].requirements is not None
        links = storage.cache.pip / "locked-links" / steps[0].requirements.stem
        pip_files = LockedFiles(tuple(pips), tuple(pip_sources), storage.cache.pip / "locked", links, mirrors)
        plan = replace(plan, pip=(replace(steps[0], find_links=str(links)),))
    backend: Backend = (LockedCondaBackend(conda, conda_sources, request.path, mirrors, pip_files, platform) if conda
                        else LockedVenvBackend(request.path, pip_files))
    return Prepared(plan=plan, backend=backend, context=context, storage=storage), manifest


def _why_unchecked(lock: LockFile) -> str:
    """Why an environment from ``lock`` gets no check after installing when --no-verify was not given: the check
    judges the build, and the manifests do not have it."""
    manifest, build = lock.fact(model.MANIFEST), lock.fact(model.BUILD)
    if not manifest or not build:
        return "the lock names no envkit build to check against"
    return f"the manifests have no build {build} of {manifest} to check against"


def _python(lock: LockFile, origin: str) -> Version:
    text = python_of_lock(lock)
    if not text:
        raise LockFileError(f"{origin} does not say which Python it is for (no conda python package, no "
                            f"{model.PYTHON} in custom_metadata)", hint="Make the lock with `envkit lock`.")
    try:  # (envkit's fact is checked when the lock is read; the conda python package's version is checked here)
        version = Version(text) if re.fullmatch(r"[0-9]{1,3}\.[0-9]{1,3}", text) else None
    except InvalidVersion:
        version = None
    if version is None:
        raise LockFileError(f"{origin} is for Python {text!r}, which is not a Python version like 3.12",
                            hint="Make the lock with `envkit lock`.")
    return version


def _build_of(lock: LockFile, manifest_of: Callable[[str], Optional[Manifest]]) -> tuple[Optional[Manifest], Build]:
    """The envkit build the lock names, if the manifests have it; else a stand-in naming the lock."""
    manifest_name, build_id = lock.fact(model.MANIFEST), lock.fact(model.BUILD)
    manifest = manifest_of(manifest_name) if manifest_name else None
    if manifest is not None:
        for build in manifest.builds:
            if build.id == build_id:
                return manifest, build
    from packaging.specifiers import SpecifierSet  # (and packaging.tags, logging: ~10 ms) only for a stand-in

    stand_in = Build(id=build_id or "locked", manifest=manifest_name or "lock", version=Version("0"),
                     variant="locked", python=SpecifierSet())
    return None, stand_in


def _check_fit(lock: LockFile, manifest: Optional[Manifest], build: Build, python: Version, tables: Tables,
               target: Target, environ: Mapping[str, str], platform: str = model.PLATFORM) -> None:
    """Every machine of the target must fit (a fleet's GPU-less machines, a login node, only by their Python). The
    reasons name the machines judged: this one, a profile, or each configuration of a fleet before its reasons."""
    reasons: list[str] = []
    each = target.each or (((), target.profile),)
    with_gpus = [pair for pair in each if pair[1].gpus] or list(each)
    several = len(each) > 1  # configurations: each is named before its reasons, which then say "it" or "they"
    for names, profile in each:
        said = f"{names_text(names)}: " if several else ""
        judged = THEY if len(names) > 1 else "it" if several else names[0] if names else "this machine"
        if lock.conda(platform) and (names, profile) in with_gpus:  # the engine is not loaded for a pip-only lock
            from envkit.backends.conda_engine import target_virtual_packages
            from envkit.lockfile.make import cuda_arch

            cuda, _ = cuda_for_solve(profile, environ)
            arch = cuda_arch(profile) if cuda else None
            explicit = ((("__cuda", cuda),) if cuda else ()) + ((("__cuda_arch", arch),) if arch else ())
            reasons += [said + reason
                        for reason in virtual_reasons(lock, target_virtual_packages(explicit), judged, platform)]
        if manifest is not None and ((names, profile) in with_gpus or not build.is_gpu):
            candidate = assess(build, profile, tables, Request(python=python))
            if not candidate.compatible:  # its reasons only: the error names the lock's build and the machine
                reasons.append(said + ("; ".join(candidate.reasons) or f"{build.id} does not fit"))
    remake = remake_command(manifest.name, target.label, target.args) if manifest is not None else ""
    raise_unless_fits(reasons, target.machine, build.id if manifest is not None else lock.fact(model.BUILD),
                      remake, lock.fact(model.TARGET) or "")


def _default_name(lock: LockFile, path: Path) -> str:
    """NAME for NAME.conda-lock.yml (as `envkit lock` says to install it), else the manifest and the variant."""
    named = install_name(path)
    if named is not None:
        return named
    from envkit.state.records import is_name

    middle = path.name[len("pylock."):-len(".toml")] if path.name.startswith("pylock.") else ""
    if path.name.endswith(".toml") and is_name(middle):  # PEP 751's pylock.NAME.toml
        return middle
    build = lock.fact(model.BUILD)
    manifest = lock.fact(model.MANIFEST)
    if build and manifest and build.startswith(manifest + "-"):
        return f"{manifest}-{build.rsplit('-', 1)[-1]}"
    return path.stem.replace("conda-lock", "locked").strip(".-_") or "locked"


def _channel_of(url: str) -> str:
    """The channel of a package URL: what is above its subdir (``.../conda-forge/linux-64/x.conda``)."""
    return url.rsplit("/", 2)[0]


def requirements_lines(packages: Sequence[LockedPackage]) -> str:
    """The pip part as hash-pinned requirements, ``name==version --hash=sha256:...``: the installer takes each
    from the directory of the files envkit fetched (``--no-index --find-links``), and the hash pins the very file."""
    return "".join(f"{p.name}=={p.version} --hash=sha256:{p.sha256}\n" for p in packages)


def requirements_file(packages: Sequence[LockedPackage], cache: Path) -> Path:
    lines = requirements_lines(packages)
    path = cache / "locks" / f"{hashlib.sha256(lines.encode()).hexdigest()[:32]}.txt"
    if not path.exists():  # 0600, as everything of envkit's that a lock or a config fills in
        try:
            write_atomic(path, lines.encode("utf-8"), mode=0o600)
        except OSError as error:
            raise EnvkitError(f"cannot write the locked requirements to {error.filename or path}: "
                              f"{error.strerror or error}",
                              hint="envkit keeps them in its cache: make room there, or point XDG_CACHE_HOME (or the "
                                   "config's cache_dir) at a disk with room. Nothing was created.") from None
    return path
