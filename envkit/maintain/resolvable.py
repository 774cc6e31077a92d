"""``envkit manifests check --resolve``: each pip build's whole dependency tree resolved by uv for every Python the
build claims, as `envkit lock` resolves it (envkit.lockfile.pylock: Linux x86_64, wheels only, the build's own
index through the user's mirrors).

The index pages alone show that a build's own requirements have a wheel for each Python. They cannot show what those
requirements pull in: jax's jaxlib, the nvidia-* wheels an extra such as ``tensorflow[and-cuda]`` pins, a dependency
that has no wheel for a new Python, or pins that conflict. A resolution shows all of that.

What to resolve and what a failure means are pure functions; running uv is the resolver the caller passes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence

from envkit.catalog.model import Build, Catalog
from envkit.config import Config
from envkit.errors import InstallError
from envkit.maintain.findings import MISSING, UNREADABLE, Finding

if TYPE_CHECKING:
    from pathlib import Path

    from packaging.version import Version

    from envkit.maintain.fetch import Progress

# What uv says when it could not read the index, as opposed to what the index has (words of its error chain).
_UNREACHABLE = ("Failed to fetch", "error sending request", "Could not connect", "Connection refused", "dns error",
                "timed out", "Request failed after")
_REASON_CHARS = 400


@dataclass(frozen=True)
class Resolution:
    """One resolution the check asks for: a build's pip packages, for one Python, from its index (mirrored)."""

    build: str
    python: Version
    packages: tuple[str, ...]
    index_url: str  # as uv reads it: through the mirrors
    index: str  # as the manifest names it, for the report
    find_links: Optional[str] = None

    @property
    def label(self) -> str:
        return f"{self.build} for Python {self.python}"


Resolver = Callable[[Resolution], None]  # raises InstallError (with uv's lines as its tail) when it does not resolve


def resolutions(builds: Sequence[Build], catalog: Catalog, config: Config,
                pythons: Mapping[str, tuple[Version, ...]]) -> list[Resolution]:
    """One per pip build and Python it claims. Builds with a conda part are left to the channel check: their pip
    packages install on top of a conda environment, which uv alone cannot resolve."""
    from envkit.plan import pip_parts

    out = []
    for build in builds:
        if build.pip is None or build.conda is not None:
            continue
        index = build.pip.index_url or catalog.tables.python.pypi_index
        for part in pip_parts(build, catalog.tables.python, config, jupyter=False):
            out += [Resolution(build.id, python, part.packages, part.index_url, index, part.find_links)
                    for python in pythons.get(build.id, ())]
    return out


def finding_for(resolution: Resolution, error: InstallError) -> Finding:
    """What a failed resolution means: the index could not be read (uv's network errors), or the build does not
    install for that Python (anything else), with uv's own reason."""
    lines = error.tail or (error.message,)
    reason = uv_reason(lines) or error.message
    if any(word in line for line in lines for word in _UNREACHABLE):
        return Finding(UNREADABLE, f"{resolution.build}: could not be resolved for Python {resolution.python}: "
                                   f"{resolution.index} could not be read ({reason})", resolution.build,
                       resolution.index)
    return Finding(MISSING, f"{resolution.build}: does not install for Python {resolution.python} from "
                            f"{resolution.index}: {reason}", resolution.build, resolution.index)


def uv_reason(lines: Sequence[str]) -> str:
    """uv's explanation in one line: its "error:" and "cause:" labels (or, at a terminal, its tree drawing), its
    "No solution found" heading and its hints left out."""
    kept = []
    for line in lines:
        text = line.strip().lstrip("×╰─▶│├ ").strip()
        for label in ("error:", "cause:"):
            if text.startswith(label):
                text = text[len(label):].strip()
        if text and not text.startswith(("No solution found", "hint:", "help:")):
            kept.append(text)
    reason = " ".join(kept)
    return reason if len(reason) <= _REASON_CHARS else reason[:_REASON_CHARS - 1] + "…"


def check_resolvable(wanted: Sequence[Resolution], resolver: Resolver, jobs: int,
                     progress: Optional[Progress] = None) -> list[Finding]:
    """Run every resolution, ``jobs`` at once; a finding for each that fails, in the order asked."""
    def attempt(resolution: Resolution) -> Optional[Finding]:
        try:
            resolver(resolution)
        except InstallError as error:
            return finding_for(resolution, error)
        return None

    findings = []
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="envkit-resolve") as pool:
        for done, (resolution, finding) in enumerate(zip(wanted, pool.map(attempt, wanted)), 1):
            if finding is not None:
                findings.append(finding)
            if progress is not None:
                progress(done, len(wanted), resolution.label)
    return findings


def uv_resolver(uv: Path, config: Config, environ: Mapping[str, str]) -> Resolver:
    """Resolutions by uv, as `envkit lock` makes them (in ``environ``: envkit's own uv cache, no user config)."""
    from envkit.lockfile.pylock import lock_pip

    def resolve(resolution: Resolution) -> None:
        lock_pip(resolution.packages, resolution.index_url, str(resolution.python), config, uv, environ,
                 resolution.find_links)

    return resolve
