"""The embedded conda engine of the ``rattler`` backend: solve conda specs and install them into a new prefix with
py-rattler, for people who have no conda, mamba or micromamba (and for the old Pythons that only conda provides).

py-rattler is imported inside the functions that use it: ``envkit list`` and the other commands that never install
must not pay for loading it at start-up. What it raises becomes an ``InstallError``: one sentence, a next step, and
rattler's own lines as the tail. The cache directory holds ``pkgs/`` (extracted packages, hard-linked into prefixes)
and ``repodata/`` (remote channels' repodata; rattler reads file:// channels in place).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from envkit.errors import InstallError
from envkit.state.testpause import pause_at
from envkit.system.transfers import fetched, fetching  # rattler's bytes, for the progress display

if TYPE_CHECKING:
    from rattler import Channel, Client, GenericVirtualPackage, MatchSpec, RepoDataRecord, Subdir
    from rattler.install import InstallerReporter

Report = Callable[[str], None]
T = TypeVar("T")

# Retries of every repodata and package request. No request timeout: py-rattler's limits the whole request, so it
# would kill a 3 GB cudatoolkit download on a slow line.
_RETRIES = 3
# See _run: long enough for py-rattler's worker thread to take the GIL back, short next to any solve.
_SETTLE_S = 0.01
# How rattler's solver says that a requirement has nothing to offer: in its tree, whose lines start with the
# characters of _TREE, or on its first line.
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
    """(name, version) pairs added to the detected ones, e.g. (("__cuda", "12.6"),); each replaces a detected one of
    the same name."""
    platform: str = "linux-64"


def _quiet(line: str) -> None:
    """The report of a caller that wants no progress lines."""


def solve(request: CondaSolveRequest, cache_dir: Path) -> list[RepoDataRecord]:
    """Fetch the channels' repodata and solve, installing nothing: what would be installed, and whether it can be."""
    return _run(_solve(request, cache_dir, _quiet, _client()))


def create_prefix(prefix: Path, request: CondaSolveRequest, cache_dir: Path, report: Report = _quiet) -> tuple[str, ...]:
    """Solve and install into ``prefix``, which must not exist yet; return "name-version-build" of each package."""
    return _into_new_prefix(prefix, lambda: _create(prefix, request, cache_dir, report))


Archive = tuple[Path, str, str, str]  # a local package file, its upstream channel URL, its sha256 and md5 (hex)


def install_archives(prefix: Path, archives: Sequence[Archive], cache_dir: Path,
                     report: Report = _quiet) -> tuple[str, ...]:
    """Install exactly these package archives into ``prefix`` (which must not exist yet), no solve: each a local
    file already hash-checked by the caller, with the upstream channel URL and the hashes to record. The records come from each
    archive's own index.json (so noarch packages link as they should). Removes the prefix again on any failure."""
    return _into_new_prefix(prefix, lambda: _install_archives(prefix, archives, cache_dir, report))


def _into_new_prefix(prefix: Path, install: Callable[[], Coroutine[Any, Any, list[RepoDataRecord]]]) -> tuple[str, ...]:
    """Run ``install()`` into ``prefix``, which must not exist yet; "name-version-build" of each package installed.

    Whatever stops it, Ctrl-C included, removes the prefix again, so that a failed ``envkit create`` leaves nothing
    half-made that looks like an environment; the InstallError or the KeyboardInterrupt then propagates.
    """
    if prefix.exists() or prefix.is_symlink():
        raise InstallError(f"{prefix} already exists.", hint="Choose another name, or remove it first.")
    try:
        records = _run(install())
    except BaseException:
        shutil.rmtree(prefix, ignore_errors=True)
        raise
    return tuple(sorted(f"{record.name.normalized}-{record.version}-{record.build}" for record in records))


async def _install_archives(prefix: Path, archives: Sequence[Archive], cache_dir: Path,
                            report: Report) -> list[RepoDataRecord]:
    import rattler
    from rattler import RepoDataRecord
    from rattler.exceptions import InstallerError, IoError, LinkError, TransactionError

    records = []
    for path, channel, sha256, md5 in archives:
        try:
            found = await RepoDataRecord.from_package_archive(path)
        except Exception as error:  # py-rattler raises several kinds for an archive it cannot read
            raise InstallError(f"{path.name} is not a readable conda package: {_lines(error)[0]}",
                               hint="Make the lock again; the file matched its hash, so the lock itself is wrong.",
                               tail=_lines(error)) from error
        found.sha256, found.md5 = bytes.fromhex(sha256), bytes.fromhex(md5)
        records.append(RepoDataRecord(found, path.name, path.as_uri(), channel))
    report(f"installing {len(records)} packages")
    try:
        await rattler.install(records, prefix, cache_dir=_cache_subdir(cache_dir, "pkgs"),
                              platform=rattler.Subdir("linux-64"), execute_link_scripts=False, client=_client(),
                              show_progress=False)
    except (InstallerError, TransactionError, LinkError, IoError) as error:
        lines = _lines(error)
        raise InstallError(f"Installing the conda packages into {prefix} failed: {lines[0]}",
                           hint="Check the free disk space, then run the command again.", tail=lines) from error
    return records


def target_virtual_packages(explicit: Sequence[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """The virtual packages a solve for the target sees (see _virtual_packages): name -> (version, build)."""
    return {package.name.normalized: (str(package.version), str(package.build_string))
            for package in _virtual_packages(explicit)}


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, then a moment with the GIL released, whatever the outcome.

    py-rattler's worker thread hands each result (or error) to the event loop with call_soon_threadsafe, whose socket
    write lets this thread go on while the worker still has Python objects to release. If the process exits in that
    window, as a command that fails or finishes right after a solve does, the worker touches Python objects during
    interpreter shutdown and the process dies with SIGSEGV or SIGABRT (py-rattler 0.28: 4 of 180 runs under load). The sleep
    lets the worker finish first.
    """
    try:
        return asyncio.run(coroutine)
    finally:
        time.sleep(_SETTLE_S)


def query_records(channels: Sequence[str], subdirs: Sequence[str], names: Sequence[str],
                  cache_dir: Path) -> list[RepoDataRecord]:
    """Every record of the packages ``names`` in ``channels`` for ``subdirs``: no solve, no dependencies (what
    `envkit manifests check` asks of conda channels). Raises rattler's errors as they are."""
    import rattler

    async def query() -> list[RepoDataRecord]:
        gateway = rattler.Gateway(cache_dir=_repodata_cache(cache_dir), client=_client())
        result = await gateway.query([rattler.Channel(c) for c in channels], [rattler.Subdir(s) for s in subdirs],
                                     list(names), recursive=False)
        return [record for per_channel in result for record in per_channel]

    return _run(query())


async def _create(prefix: Path, request: CondaSolveRequest, cache_dir: Path, report: Report) -> list[RepoDataRecord]:
    """Solve, then install. One event loop and one HTTP client for both, so that they share connections."""
    import rattler
    from rattler.exceptions import InstallerError, IoError, LinkError, TransactionError

    client = _client()
    records = await _solve(request, cache_dir, report, client)
    packages = _cache_subdir(cache_dir, "pkgs")
    report(f"installing {len(records)} packages")
    try:
        await rattler.install(
            records,
            prefix,
            cache_dir=packages,
            platform=rattler.Subdir(request.platform),
            execute_link_scripts=False,
            client=client,
            reporter=_download_reporter(report),
        )
    except (InstallerError, TransactionError, LinkError, IoError) as error:
        lines = _lines(error)
        raise InstallError(
            f"Installing the conda packages into {prefix} failed: {lines[0]}",
            hint="Check the network and the free disk space, then run the command again (what was downloaded is "
            "kept in the cache).",
            tail=lines,
        ) from error
    return records


async def _solve(request: CondaSolveRequest, cache_dir: Path, report: Report, client: Client) -> list[RepoDataRecord]:
    """Solve with rattler's default, strict channel priority (conda-forge's recommended setting): a package comes only
    from the first channel that has it, so that builds from different channels are not mixed."""
    import rattler
    from rattler.exceptions import GatewayError, SolverError

    channels = _channels(request.channels)
    subdir = _subdir(request.platform)
    specs = _match_specs(request.specs)
    virtual = _virtual_packages(request.virtual_packages)
    gateway = rattler.Gateway(cache_dir=_repodata_cache(cache_dir), client=client)
    count = len(channels)
    report(f"fetching repodata from {count} channel{'' if count == 1 else 's'}")
    try:
        records = await rattler.solve(
            channels, specs, gateway=gateway, platforms=[subdir, rattler.Subdir("noarch")], virtual_packages=virtual
        )
    except GatewayError as error:
        raise _channel_error(error, request.channels) from error
    except SolverError as error:
        versions = {package.name.normalized: str(package.version) for package in virtual}
        raise _unsatisfiable(error, request, versions) from error
    report(f"solved: {len(records)} packages")
    return records


def _client() -> Client:
    """Every request retried on transient errors. No authentication middleware: it reads the user's keyring and
    rattler credentials, which envkit's channels (plain URLs, mirrored by envkit's own settings) never need."""
    from rattler import Client
    from rattler.networking.middleware import RetryMiddleware

    return Client([RetryMiddleware(_RETRIES)])


def _channels(urls: Sequence[str]) -> list[Channel]:
    """Only full URLs: rattler would turn a name like "conda-forge" into a conda.anaconda.org URL behind the back of
    the mirror settings, which already made every channel a URL."""
    from rattler import Channel
    from rattler.exceptions import InvalidChannelError

    if not urls:
        raise InstallError("The conda step names no channel.", hint="Give the build's conda step a channel.")
    hint = "Channels reach the conda engine as URLs (https://..., file:///...); check the mirror settings."
    channels = []
    for url in urls:
        if "://" not in url:
            raise InstallError(f"The conda channel {url!r} is not a URL.", hint=hint)
        try:
            channels.append(Channel(url))
        except InvalidChannelError as error:
            message = f"The conda channel {url!r} is not a valid URL."
            raise InstallError(message, hint=hint, tail=_lines(error)) from error
    return channels


def _subdir(platform: str) -> Subdir:
    """The platform comes from envkit's own plan, but a wrong one still deserves a sentence, not a rattler error."""
    from rattler import Subdir
    from rattler.exceptions import ParseSubdirError

    try:
        return Subdir(platform)
    except ParseSubdirError as error:
        raise InstallError(f"{platform!r} is not a conda platform.", hint="Use one like linux-64.") from error


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
                hint="Fix the conda specs of the build in its manifest.",
            ) from error
    return parsed


def _virtual_packages(explicit: Sequence[tuple[str, str]]) -> list[GenericVirtualPackage]:
    """The machine's own virtual packages (__unix, __linux, __glibc, __archspec; CONDA_OVERRIDE_GLIBC and the like
    honoured as conda does), each replaced by an explicit one of the same name, plus the other explicit ones.

    __cuda is never detected: it comes from the machine profile (through ``envkit.backends.plan.cuda_for_solve``), which
    may describe another machine, and detecting it would load the NVIDIA driver for nothing.
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
            f"A virtual package version is not a version: {dict(explicit)}.",
            hint="Give a version like 12.6 (check CONDA_OVERRIDE_CUDA and the machine profile).",
            tail=_lines(error),
        ) from error
    return kept + added


def _cache_subdir(cache_dir: Path, name: str, private: bool = False) -> Path:
    """Create ``cache_dir/name`` here: rattler would report a cache it cannot create as a broken channel. A
    ``private`` one is this user's alone (0700, made so again if it was not)."""
    path = cache_dir / name
    try:
        path.mkdir(mode=0o700 if private else 0o777, parents=True, exist_ok=True)
        if private and path.stat().st_mode & 0o077:
            path.chmod(0o700)
    except OSError as error:
        raise InstallError(
            f"Cannot create the conda cache directory {path}: {error.strerror}.",
            hint="Check that the cache directory is writable (XDG_CACHE_HOME moves it).",
        ) from error
    return path


def _repodata_cache(cache_dir: Path) -> Path:
    """Where rattler keeps the channels' repodata: private, because it writes a channel's URL, with the credentials
    a mirror's URL carries, into files anyone could read (its sharded-repodata cache, py-rattler 0.2x)."""
    return _cache_subdir(cache_dir, "repodata", private=True)


def _download_reporter(report: Report) -> InstallerReporter:
    """A py-rattler installer reporter that reports each package it downloads (cached ones are silent): downloads
    are the long part of an install."""
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

        def on_download_progress(self, download_idx: int, progress: int, total: "int | None") -> None:
            fetching(self.names.get(download_idx, "a package"), progress, total)

        def on_download_completed(self, download_idx: int) -> None:
            fetched(self.names.get(download_idx, "a package"))

        def on_link_complete(self, index: int) -> None:
            pause_at("inside-backend")  # test-only: a package is in the prefix, the rest are not

    # InstallerReporter is a Protocol with no-op methods, which mypy takes for abstract ones.
    return DownloadReporter()  # type: ignore[abstract]


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
    is said in the machine's terms; a spec that nothing matches is named; the rest points at the solver's tree."""
    lines = [line for line in _lines(error) if line.strip()]
    lines[0] = lines[0].removeprefix("Cannot solve the request because of: ")
    for index, line in enumerate(lines):
        text = line.lstrip(_TREE)
        missing = _NESTED_MISSING.match(text) or _TOP_MISSING.match(text)
        if missing and missing["spec"].startswith("__"):
            return _missing_virtual(missing["spec"], _requirer(lines, index), virtual, tuple(lines))
    top = _TOP_MISSING.match(lines[0])
    if top:
        return InstallError(
            f"No package in the conda channels matches {top['spec']} ({', '.join(request.channels)}).",
            hint="Check the package name and version in the conda specs, and that the channel carries them.",
            tail=tuple(lines),
        )
    return InstallError(
        f"No set of conda packages satisfies {' '.join(request.specs)}; the solver's explanation follows.",
        hint="Choose another build, or fix the conda specs of this one.",
        tail=tuple(lines),
    )


def _missing_virtual(
    spec: str, requirer: str | None, virtual: Mapping[str, str], lines: tuple[str, ...]
) -> InstallError:
    """E.g. "tensorflow-gpu 2.6.0 needs __cuda >=11.3, but the target machine's NVIDIA driver supports CUDA 10.1"."""
    name = re.split(r"[\s<>=!~,]", spec, maxsplit=1)[0]
    who = requirer or "The request"
    have = virtual.get(name)
    if name != "__cuda":
        found = f"has {name}={have}" if have else f"has no {name}"
        return InstallError(
            f"{who} needs {spec}, but the target machine {found}.",
            hint="Choose a build made for this machine's system.",
            tail=lines,
        )
    if have:
        return InstallError(
            f"{who} needs {spec}, but the solve's __cuda is {have} (what the target machine's NVIDIA driver "
            "supports, unless CONDA_OVERRIDE_CUDA says otherwise).",
            hint="Choose a build for an older CUDA (`envkit list` shows which fit), or update the NVIDIA driver; "
            "CONDA_OVERRIDE_CUDA=X.Y builds for a machine with another driver.",
            tail=lines,
        )
    return InstallError(
        f"{who} needs {spec}, but the solve has no __cuda (the target machine has no NVIDIA driver, or "
        "CONDA_OVERRIDE_CUDA is empty).",
        hint="Choose a CPU build, or set CONDA_OVERRIDE_CUDA=X.Y to build for a machine with an NVIDIA driver.",
        tail=lines,
    )


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
    """rattler's message split into lines, without the trailing blank line that its messages end with."""
    return tuple(str(error).rstrip().splitlines()) or (type(error).__name__,)
