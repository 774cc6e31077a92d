"""The conda side of ``envkit manifests check``: every conda spec of a build has a package in the build's channels
for linux-64 (or noarch), for every Python the build claims. Repodata is read by py-rattler's gateway (http(s) and
file:// channels alike), through the user's mirrors, into a temporary cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from envkit.catalog.model import Build
from envkit.maintain.findings import MISSING, UNREADABLE, Finding
from envkit.system.scratch import scratch_dir

if TYPE_CHECKING:
    from packaging.version import Version

    from envkit.state.config import Config

PLATFORMS = ("linux-64", "noarch")


def check_conda(builds: Sequence[Build], pythons: Mapping[str, Sequence[Version]], config: Config,
                timeout_s: float, cache_dir: Optional[Path] = None) -> tuple[list[Finding], int]:
    """Findings for every conda build, and how many channel sets were queried."""
    conda_builds = [b for b in builds if b.conda is not None and pythons.get(b.id)]
    if not conda_builds:
        return [], 0
    groups: dict[tuple[str, ...], list[Build]] = {}
    for build in conda_builds:
        groups.setdefault(tuple(config.mirrored(c) for c in build.conda.channels), []).append(build)
    with scratch_dir("check") as scratch:
        cache = cache_dir or Path(scratch)
        findings: list[Finding] = []
        mirrors = tuple(m.target for m in config.mirrors)
        for channels, members in groups.items():
            findings += _check_group(channels, members, pythons, cache, mirrors)
    return findings, len(groups)


def _check_group(channels: tuple[str, ...], builds: Sequence[Build], pythons: Mapping[str, Sequence[Version]],
                 cache: Path, mirrors: Sequence[str] = ()) -> list[Finding]:
    import os

    from envkit.system.egress import guarded, in_this_process

    specs = sorted({spec for b in builds for spec in b.conda.packages})
    try:  # py-rattler, in this process, held to the transport rule on every hop (envkit.system.egress)
        with guarded("the conda engine", (*channels, *mirrors), os.environ, failures=(Exception,)) as proxy, \
                in_this_process(proxy):
            records = _query(channels, specs, cache)
    except Exception as error:  # noqa: BLE001 - rattler's errors have no common base; each becomes one sentence
        reason = _reason(error)
        return [Finding(UNREADABLE, f"{b.id}: its conda channels could not be read ({_channels(b, channels)}): "
                                    f"{reason}", b.id, b.conda.channels[0],
                        cause=f"the conda channels could not be read ({reason})") for b in builds]
    findings = []
    for build in builds:
        upstream = ", ".join(build.conda.channels)
        for spec in build.conda.packages:
            matches = _matching(spec, records)
            if not matches:
                findings.append(Finding(MISSING, f"{build.id}: conda package {spec} has no match in {upstream} "
                                                 f"for {PLATFORMS[0]}", build.id, build.conda.channels[0]))
                continue
            without = [v for v in pythons[build.id] if not any(_for_python(r, v) for r in matches)]
            if without:
                listed = ", ".join(str(v) for v in without)
                findings.append(Finding(MISSING, f"{build.id}: no conda package {spec} for Python {listed} in "
                                                 f"{upstream}", build.id, build.conda.channels[0]))
    return findings


def _reason(error: BaseException) -> str:
    """rattler's error in one line: its first line and its root cause ("Request failed after 3 retries: Connection
    refused (os error 111)"), without the chain of wrappers between them."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    causes = [line[len("Caused by:"):].strip() for line in lines[1:] if line.startswith("Caused by:")]
    return f"{lines[0]}: {causes[-1]}" if causes else lines[0]


def _channels(build: Build, read: Sequence[str]) -> str:
    """The build's channels as the manifest names them, and where they were read when that is a mirror."""
    upstream = ", ".join(build.conda.channels)
    return upstream if tuple(read) == tuple(build.conda.channels) else f"{upstream}, read from {', '.join(read)}"


def _query(channels: Sequence[str], specs: Sequence[str], cache: Path) -> list[Any]:
    import rattler

    from envkit.backends.conda_engine import query_records

    names = sorted({rattler.MatchSpec(spec).name.normalized for spec in specs})
    return query_records(channels, PLATFORMS, names, cache)


def _matching(spec: str, records: Sequence[Any]) -> list[Any]:
    import rattler

    match = rattler.MatchSpec(spec)
    return [r for r in records if match.matches(r)]


def _for_python(record: Any, python: Version) -> bool:
    """Whether a conda package can be installed with Python X.Y: it depends on no python, or on one that X.Y is."""
    import rattler

    version = rattler.Version(f"{python.major}.{python.minor}.0")
    for depend in record.depends:
        parts = depend.split()
        if parts and parts[0] == "python":
            if len(parts) == 1:
                return True
            try:
                return rattler.VersionSpec(parts[1]).matches(version)
            except Exception:  # noqa: BLE001 - an odd spec: do not hide the package
                return True
    return True
