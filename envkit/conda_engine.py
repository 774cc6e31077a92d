"""The embedded conda engine of the ``rattler`` backend: solve conda specs and install them into a new prefix with
py-rattler, for people who have no conda, mamba or micromamba (and for the old Pythons that only conda provides).

py-rattler is imported inside the functions that need it: ``envkit list`` and every other command that never
installs must not pay for loading it at start-up. Everything it raises becomes an ``InstallError`` with one sentence,
a next step and rattler's own lines as the tail.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.errors import InstallError

if TYPE_CHECKING:
    from rattler import Client, GenericVirtualPackage, MatchSpec, RepoDataRecord

Report = Callable[[str], None]

# The retries of every repodata and package request. No request timeout: py-rattler's is a limit on the whole
# request, which would kill a 3 GB cudatoolkit download on a slow line.
_RETRIES = 3
_CUDA_HINT = (
    "Choose a build for an older CUDA (`envkit list` shows which fit), or update the NVIDIA driver; "
    "set CONDA_OVERRIDE_CUDA=X.Y to build for a machine with another driver."
)
# How rattler's solver says that a requirement has nothing to offer, in its tree (whose lines start with the
# characters of _TREE) or at the top.
_TREE = " │├└─"
_NESTED_MISSING = re.compile(r"(?P<spec>.+?), for which no candidates were found")
_TOP_MISSING = re.compile(r"No candidates were found for (?P<spec>.+?)\.?$")


@dataclass(frozen=True)
class CondaSolveRequest:
    """What to solve: channels and specs as the plan gives them, plus the virtual packages of the target machine."""

    channels: tuple[str, ...]
    """Full channel URLs (https://, http://127.0.0.1:..., file:///), already mirrored, in priority order."""
    specs: tuple[str, ...]
    """Conda match specs, e.g. ("python=3.8", "tensorflow-gpu=2.4.1", "cudatoolkit=10.1")."""
    virtual_packages: tuple[tuple[str, str], ...]
    """(name, version) pairs added to the detected ones; each replaces a detected one of the same name."""
    platform: str = "linux-64"


def cuda_virtual_package(profile_cuda: str | None, environ: Mapping[str, str]) -> str | None:
    """The version of __cuda to solve with, as conda decides it: CONDA_OVERRIDE_CUDA wins when it is set (empty means
    no __cuda at all, which is how conda users build CPU environments on GPU machines), else the machine profile's
    CUDA. None means that the solve has no __cuda."""
    if "CONDA_OVERRIDE_CUDA" in environ:
        return environ["CONDA_OVERRIDE_CUDA"].strip() or None
    return profile_cuda


def solve(request: CondaSolveRequest, cache_dir: Path) -> list[RepoDataRecord]:
    """Fetch the channels' repodata (cached under ``cache_dir/repodata``) and solve, installing nothing."""
    return asyncio.run(_solve(request, cache_dir, _quiet))


def _quiet(line: str) -> None:
    """The report of a caller that wants no progress lines."""


def create_prefix(prefix: Path, request: CondaSolveRequest, cache_dir: Path, report: Report = _quiet) -> tuple[str, ...]:
    """Solve and install into ``prefix``, which must not exist yet; return "name-version-build" of each package.

    Packages are cached under ``cache_dir/pkgs``. Whatever stops the install, Ctrl-C included, removes the prefix
    again, so that a failed ``envkit create`` leaves nothing half-made that looks like an environment; the error or
    the KeyboardInterrupt then propagates.
    """
    if prefix.exists() or prefix.is_symlink():
        raise InstallError(f"{prefix} already exists.", hint="Choose another name, or remove it first.")
    try:
        records = asyncio.run(_create(prefix, request, cache_dir, report))
    except BaseException:
        shutil.rmtree(prefix, ignore_errors=True)
        raise
    return tuple(sorted(f"{record.name.normalized}-{record.version}-{record.build}" for record in records))


async def _create(prefix: Path, request: CondaSolveRequest, cache_dir: Path, report: Report) -> list[RepoDataRecord]:
    """One event loop for the solve and the install, so that both share the HTTP client and its connections."""
    import rattler
    from rattler.exceptions import IoError, InstallerError, LinkError, TransactionError

    client = _client()
    records = await _solve(request, cache_dir, report, client)
    report(f"installing {len(records)} packages")
    try:
        await rattler.install(
            records,
            prefix,
            cache_dir=cache_dir / "pkgs",
            platform=rattler.Subdir(request.platform),
            execute_link_scripts=False,
            client=client,
            reporter=_download_reporter(report),
        )
    except (InstallerError, TransactionError, LinkError, IoError) as error:
        lines = _lines(error)
        raise InstallError(
            f"Installing the conda packages into {prefix} failed: {lines[0]}",
            hint="Run the command again (downloads resume from the cache); check the disk space and the network.",
            tail=lines,
        ) from error
    return records


async def _solve(
    request: CondaSolveRequest, cache_dir: Path, report: Report, client: Client | None = None
) -> list[RepoDataRecord]:
    """Fetch repodata through a gateway that caches under ``cache_dir/repodata`` and solve with strict channel
    priority (a package comes from the first channel that has it, as conda-forge and pixi recommend)."""
    import rattler
    from rattler.exceptions import GatewayError, SolverError

    _check_channels(request.channels)
    specs = _match_specs(request.specs)
    virtual = _virtual_packages(request.virtual_packages)
    gateway = rattler.Gateway(cache_dir=cache_dir / "repodata", client=client or _client())
    count = len(request.channels)
    report(f"fetching repodata from {count} channel{'' if count == 1 else 's'}")
    try:
        records = await rattler.solve(
            list(request.channels),
            specs,
            gateway=gateway,
            platforms=[request.platform, "noarch"],
            virtual_packages=virtual,
        )
    except GatewayError as error:
        raise _channel_error(error, request.channels) from error
    except SolverError as error:
        versions = {package.name.normalized: str(package.version) for package in virtual}
        raise _unsatisfiable(error, request, versions) from error
    report(f"solved: {len(records)} packages")
    return records


def _client() -> Client:
    """Every request retried on transient errors. No authentication middleware: it would read the user's keyring
    and rattler credentials, which envkit's mirrors (plain URLs) never need."""
    from rattler import Client
    from rattler.networking.middleware import RetryMiddleware

    return Client([RetryMiddleware(_RETRIES)])


def _check_channels(channels: Sequence[str]) -> None:
    """Refuse channel names: rattler would turn "conda-forge" into a conda.anaconda.org URL behind the back of the
    mirror settings, which already made every channel a full URL."""
    if not channels:
        raise InstallError("The conda step names no channel.", hint="Fix the manifest: give the build a channel.")
    for channel in channels:
        if "://" not in channel:
            raise InstallError(
                f"The conda channel {channel!r} is not a URL.",
                hint="Channels reach the conda engine as URLs (https://..., file:///...); check the mirror settings.",
            )


def _match_specs(specs: Sequence[str]) -> list[MatchSpec]:
    """Parse the specs the way the solver does, so that a bad one is named (rattler's own message does not)."""
    from rattler import MatchSpec
    from rattler.exceptions import InvalidMatchSpecError

    parsed = []
    for spec in specs:
        try:
            parsed.append(MatchSpec(spec, strict=True))
        except InvalidMatchSpecError as error:
            raise InstallError(
                f"{spec!r} is not a valid conda package spec: {_lines(error)[0]}",
                hint="Fix the conda specs of the build in the manifest.",
            ) from error
    return parsed


def _virtual_packages(explicit: Sequence[tuple[str, str]]) -> list[GenericVirtualPackage]:
    """The machine's own virtual packages (__unix, __linux, __glibc, __archspec; CONDA_OVERRIDE_GLIBC and the like
    honoured as conda does), each replaced by an explicit one of the same name, plus the other explicit ones.

    __cuda is never detected: it comes from the machine profile (through ``cuda_virtual_package``), which may describe
    another machine, and detecting it would load the driver for nothing.
    """
    from rattler import BuildString, GenericVirtualPackage, Override, PackageName, Version, VirtualPackage
    from rattler import VirtualPackageOverrides
    from rattler.exceptions import DetectVirtualPackageError, InvalidVersionError, VirtualPackageOverrideError

    try:
        overrides = VirtualPackageOverrides.from_env()
        overrides.cuda = Override.string("")
        detected = [package.into_generic() for package in VirtualPackage.detect(overrides)]
    except (DetectVirtualPackageError, VirtualPackageOverrideError) as error:
        raise InstallError(
            f"Cannot detect this machine's conda virtual packages: {_lines(error)[0]}",
            hint="Check the CONDA_OVERRIDE_* variables in the environment.",
        ) from error
    replaced = {name for name, _ in explicit} | {"__cuda"}
    kept = [package for package in detected if package.name.normalized not in replaced]
    try:
        added = [
            GenericVirtualPackage(PackageName(name), Version(version), BuildString("0")) for name, version in explicit
        ]
    except InvalidVersionError as error:
        raise InstallError(
            f"Invalid virtual package version in {dict(explicit)}: {_lines(error)[0]}",
            hint="Give a version like 12.6 (check CONDA_OVERRIDE_CUDA and the machine profile).",
        ) from error
    return kept + added


def _download_reporter(report: Report) -> object:
    """A py-rattler installer reporter that reports each package it has to download (cached ones are silent),
    because downloads are the long part of an install."""
    from rattler.install import InstallerReporter

    class DownloadReporter(InstallerReporter):
        def __init__(self) -> None:
            self.names: dict[int, str] = {}

        def on_populate_cache_start(self, operation: int, package_name: str) -> int:
            self.names[operation] = package_name
            return operation

        def on_download_start(self, cache_entry: int) -> int:
            report(f"downloading {self.names.get(cache_entry, 'a package')}")
            return cache_entry

    return DownloadReporter()


def _channel_error(error: Exception, channels: Sequence[str]) -> InstallError:
    """Name the channel that failed: the longest one that rattler's message mentions, else all of them."""
    lines = _lines(error)
    text = "\n".join(lines)
    named = [channel for channel in channels if channel.rstrip("/") in text]
    where = max(named, key=len) if named else ", ".join(channels)
    return InstallError(
        f"Cannot read the conda channel {where}: {lines[0]}",
        hint="Check the channel URL, the network and the mirror settings.",
        tail=lines,
    )


def _unsatisfiable(error: Exception, request: CondaSolveRequest, virtual: Mapping[str, str]) -> InstallError:
    """One sentence for an unsatisfiable solve. A missing virtual package (usually __cuda: the driver is too old)
    is said in the machine's terms; a spec with no package at all names that spec; the rest points at the tail."""
    lines = [line for line in _lines(error) if line.strip()]
    lines[0] = lines[0].removeprefix("Cannot solve the request because of: ")
    for index, line in enumerate(lines):
        text = line.lstrip(_TREE)
        missing = _NESTED_MISSING.match(text) or _TOP_MISSING.match(text)
        if missing and missing["spec"].startswith("__"):
            return _missing_virtual(missing["spec"], _requirer(lines, index), virtual, lines)
    top = _TOP_MISSING.match(lines[0])
    if top:
        return InstallError(
            f"No package in the conda channels matches {top['spec']} ({', '.join(request.channels)}).",
            hint="Check the package name and version in the conda specs, and that the channel carries it.",
            tail=tuple(lines),
        )
    return InstallError(
        f"No set of conda packages satisfies {' '.join(request.specs)}; the solver's explanation follows.",
        hint="Choose another build, or fix the conda specs of this one.",
        tail=tuple(lines),
    )


def _missing_virtual(spec: str, requirer: str | None, virtual: Mapping[str, str], lines: list[str]) -> InstallError:
    """E.g. "tensorflow-gpu 2.6.0 needs __cuda >=11.3, but the target machine's NVIDIA driver supports CUDA 10.1"."""
    name = spec.split()[0]
    who = requirer or "The request"
    if name == "__cuda":
        have = (
            f"the target machine's NVIDIA driver supports CUDA {virtual[name]} (__cuda={virtual[name]})"
            if name in virtual
            else "the target machine has no NVIDIA driver (no __cuda)"
        )
        hint: str | None = _CUDA_HINT
    else:
        have = f"the target machine has {name}={virtual[name]}" if name in virtual else f"the target has no {name}"
        hint = "Choose a build made for this machine's system."
    return InstallError(f"{who} needs {spec}, but {have}.", hint=hint, tail=tuple(lines))


def _requirer(lines: Sequence[str], index: int) -> str | None:
    """The package whose "would require" branch holds line ``index`` of the solver's tree: the nearest line above it
    that is less indented."""
    depth = _depth(lines[index])
    for line in reversed(lines[:index]):
        if _depth(line) < depth:
            text = line.lstrip(_TREE)
            return text.removesuffix(" would require") if text.endswith(" would require") else None
    return None


def _depth(line: str) -> int:
    """How deep a line of the solver's tree is: the column of its branch."""
    return len(line) - len(line.lstrip(" │"))


def _lines(error: BaseException) -> tuple[str, ...]:
    """rattler's message split into lines, without trailing blanks (its messages end with one)."""
    return tuple(str(error).rstrip().splitlines()) or (type(error).__name__,)
