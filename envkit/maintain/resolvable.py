"""``envkit manifests check --resolve``: each pip build's whole dependency tree resolved by uv for every Python the
build claims, as `envkit lock` resolves it (envkit.lockfile.pylock: Linux x86_64, wheels only, the build's own
index through the user's mirrors; for a conda build, its pip part).

The index pages alone show that a build's own requirements have a wheel for each Python. They cannot show what those
requirements pull in: jax's jaxlib, the nvidia-* wheels an extra such as ``tensorflow[and-cuda]`` pins, a dependency
that has no wheel for a new Python, or pins that conflict. A resolution shows all of that.

What to resolve and what a failure means are pure functions; running uv is the resolver the caller passes.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence

from envkit.catalog.model import Build, Catalog
from envkit.errors import EnvkitError, InstallError
from envkit.maintain.findings import MISSING, UNREADABLE, Finding, site_of, upstream_index
from envkit.state.config import Config
from envkit.system.process import start_time, stop_leftovers, watching

if TYPE_CHECKING:
    from pathlib import Path

    from packaging.version import Version

    from envkit.maintain.fetch import Progress

# A failure is "missing" only on uv's (or the lock's) positive word that the index has no answer: anything else
# (the index unreachable or refusing envkit, uv not working) is "unreadable": the check could not tell.
_NO_ANSWER = ("No solution found", "has no wheel")
_REFUSED = re.compile(r"returned an? 40[13]\b")  # uv's hint for an index that wants credentials
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
    """One per pip build (or pip part of a conda build) and Python it claims."""
    from envkit.backends.plan import pip_parts

    out = []
    for build in builds:
        if build.pip is None:
            continue
        index = upstream_index(build, catalog)
        for part in pip_parts(build, catalog.tables.python, config, jupyter=False):
            out += [Resolution(build.id, python, part.packages, part.index_url, index, part.find_links)
                    for python in pythons.get(build.id, ())]
    return out


def finding_for(resolution: Resolution, error: InstallError) -> Finding:
    """What a failed resolution means, with uv's own reason: the build cannot be locked for that Python (uv found no
    solution, or a package has no wheel), or the check could not tell (anything else: the index unreachable or
    asking for credentials, a time limit)."""
    said = "\n".join((*error.tail, error.message))
    where = f"for Python {resolution.python} from {resolution.index}"
    if any(words in said for words in _NO_ANSWER) and not _REFUSED.search(said):
        reason = uv_reason(error.tail) or error.message
        return Finding(MISSING, f"{resolution.build}: cannot be locked {where}: {reason}", resolution.build,
                       resolution.index)
    reason = uv_reason(error.tail, hints=True) or error.message
    return Finding(UNREADABLE, f"{resolution.build}: could not be resolved {where}: {reason}", resolution.build,
                   resolution.index, cause=f"uv could not resolve from {site_of(resolution.index)} ({reason})")


def uv_reason(lines: Sequence[str], hints: bool = False) -> str:
    """uv's explanation in one line: its "error:" and "cause:" labels (or, at a terminal, its tree drawing) and its
    "No solution found" heading left out, and its hints too unless asked for."""
    kept = []
    for line in lines:
        text = line.strip().lstrip("×╰─▶│├ ").strip()
        for label in ("error:", "cause:"):
            if text.startswith(label):
                text = text[len(label):].strip()
        if text and not text.startswith("No solution found") and (hints or not text.startswith(("hint:", "help:"))):
            kept.append(text)
    reason = " ".join(kept)
    return reason if len(reason) <= _REASON_CHARS else reason[:_REASON_CHARS - 1] + "…"


def check_resolvable(wanted: Sequence[Resolution], resolver: Resolver, jobs: int,
                     progress: Optional[Progress] = None) -> list[Finding]:
    """Run every resolution, ``jobs`` at once; a finding for each that fails, in the order asked. On Ctrl-C (or any
    error) the uv processes still running are stopped at once and no other is started."""
    stopping = threading.Event()
    started: list[tuple[int, int]] = []  # (process group, its leader's start time) of every uv run

    def record(pgid: int) -> None:
        started.append((pgid, start_time(pgid) or 0))
        if stopping.is_set():  # started as the run was being stopped
            stop_leftovers(pgid, started[-1][1], wait=0)

    def attempt(resolution: Resolution) -> Optional[Finding]:
        if stopping.is_set():
            return None
        try:
            resolver(resolution)
        except InstallError as error:
            return finding_for(resolution, error)
        return None

    results: list[Optional[Finding]] = [None] * len(wanted)
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="envkit-resolve")
    with watching(record):
        try:
            futures = {pool.submit(attempt, resolution): at for at, resolution in enumerate(wanted)}
            for done, future in enumerate(as_completed(futures), 1):
                results[futures[future]] = future.result()
                if progress is not None:
                    progress(done, len(wanted), wanted[futures[future]].label)
        except BaseException:
            stopping.set()
            pool.shutdown(wait=False, cancel_futures=True)
            for pgid, since in list(started):
                stop_leftovers(pgid, since, wait=2.0)
            raise
    pool.shutdown()
    return [finding for finding in results if finding is not None]


def uv_resolver(uv: Path, config: Config, environ: Mapping[str, str], timeout_s: float, retries: int) -> Resolver:
    """Resolutions by uv, as `envkit lock` makes them, in ``environ`` (envkit's own uv cache, no user config), each
    request of uv's limited to ``timeout_s`` seconds and ``retries`` tries more. A uv that cannot be run ends the
    check with one error, not a finding for every build."""
    from math import ceil

    from envkit.lockfile.pylock import lock_pip

    patient = {**environ, "UV_HTTP_TIMEOUT": str(max(1, ceil(timeout_s))), "UV_HTTP_RETRIES": str(retries)}

    def resolve(resolution: Resolution) -> None:
        try:
            lock_pip(resolution.packages, resolution.index_url, str(resolution.python), config, uv, patient,
                     resolution.find_links, upstream=False)  # (no lock written: a mirror's URLs may stay)
        except OSError as error:
            raise EnvkitError(f"uv ({uv}) could not resolve {resolution.label}: {error.strerror or error}",
                              hint="Reinstall envkit if uv is missing or broken.") from None

    return resolve
