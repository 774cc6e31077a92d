"""The pip part of a lock: the build's packages resolved by uv for the target Python and platform, without
installing (`uv pip compile --format pylock.toml`), and from its answer the one wheel per package that the target
installs, with its URL and sha256."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from envkit.errors import InstallError
from envkit.lockfile.model import PLATFORM, LockedPackage, file_name_of
from envkit.machines.platforms import uv_platform, wheel_platform_tags
from envkit.lockfile.urls import upstream_url
from envkit.state.config import Config

# The platform the pip part is resolved for is the target's (linux-64 by default) with a glibc of manylinux_2_28 (RHEL
# 8 and newer, Ubuntu 20.04 and newer), the oldest that current CUDA wheels (PyTorch, JAX, TensorFlow) are built for:
# uv's --python-platform x86_64-manylinux_2_28 or aarch64-manylinux_2_28 (envkit.machines.platforms).
_TIMEOUT_S = 600.0


def lock_pip(packages: Sequence[str], index_url: str, python: str, config: Config, uv: Path,
             environ: Mapping[str, str], find_links: Optional[str] = None, exact: bool = False,
             upstream: bool = True, platform: str = PLATFORM) -> list[LockedPackage]:
    """Resolve ``packages`` from ``index_url`` (already mirrored) only, plus the ``find_links`` page of the builds that
    have one, for CPython ``python`` (X.Y) on ``platform`` (linux-aarch64 from an x86_64 login node too). ``exact``:
    the packages are every one wanted, pinned (an environment as installed): their dependencies are not resolved
    again. Each wheel's URL is its upstream one (ConfigError where a mirror's cannot be mapped back:
    envkit.lockfile.urls), unless ``upstream`` is False (a check that a build resolves writes no lock, and keeps the
    URLs uv gave)."""
    from envkit.system.egress import guarded
    from envkit.system.process import run_captured
    from envkit.system.scratch import scratch_dir
    from envkit.text.redact import has_credentials

    with scratch_dir("lock") as scratch:
        requirements = Path(scratch) / "requirements.in"
        requirements.write_text("".join(f"{p}\n" for p in packages), encoding="utf-8")
        output = Path(scratch) / "pylock.toml"
        argv = [str(uv), "pip", "compile", "--quiet", "--format", "pylock.toml", "--python-version", python,
                "--python-platform", uv_platform(platform), *_url_args("--index-url", index_url),
                *_url_args("--find-links", find_links), "--no-header", *(["--no-deps"] if exact else []),
                "--python", sys.executable,
                "-o", str(output), "--", str(requirements)]
        secret = {name: url for name, url in (("UV_INDEX_URL", index_url), ("UV_FIND_LINKS", find_links))
                  if url and has_credentials(url)}  # in uv's environment, never its argv (everyone's `ps`)
        allowed = (index_url, find_links or "", *(m.target for m in config.mirrors))
        with guarded("uv", allowed, environ) as proxy:  # every plain http hop held to the transport rule
            done = run_captured(argv, {**environ, **secret, **proxy}, _TIMEOUT_S)
            if done.returncode != 0:
                lines = tuple((done.stderr or done.stdout).strip().splitlines()[-20:])
                said = "timed out" if done.returncode is None else f"exit code {done.returncode}"
                raise InstallError(f"resolving {' '.join(packages)} from {index_url} for Python {python} failed "
                                   f"({said})", hint="The lines above are uv's. Check the index (a mirror in envkit's "
                                   "config?) and that it has these packages for this Python.", tail=lines)
        text = output.read_text(encoding="utf-8")
    return pylock_packages(text, python, config, upstream, platform)


def _url_args(option: str, url: Optional[str]) -> list[str]:
    """``[option, url]``, or nothing for no URL or one with credentials (uv's environment gets that)."""
    from envkit.text.redact import has_credentials

    return [option, url] if url and not has_credentials(url) else []


def pylock_packages(text: str, python: str, config: Config, upstream: bool = True,
                    platform: str = PLATFORM) -> list[LockedPackage]:
    """The wheel each package of a pylock.toml installs on CPython ``python`` on ``platform`` (pure); InstallError
    (uv's output that envkit cannot read is a failed resolution) for a file that is not the pylock.toml it expects:
    bad TOML, a 5000-digit number, a package without its name, version or wheel URLs."""
    try:
        return _packages(_toml(text), python, config, upstream, platform)
    except InstallError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, StopIteration) as error:  # (TOMLDecodeError is one)
        detail = f"no {error}" if isinstance(error, KeyError) else str(error).splitlines()[0][:200]
        raise InstallError(f"uv's pylock.toml cannot be read ({detail})",
                           hint="Run the command again; if it persists, report it with uv's version.") from None


def _packages(data: dict[str, Any], python: str, config: Config, upstream: bool,
              platform: str) -> list[LockedPackage]:
    out = []
    for entry in data.get("packages", []):
        name, version = entry["name"], entry["version"]
        wheels = entry.get("wheels") or []
        wheel = best_wheel([w["url"] for w in wheels], python, platform)
        if wheel is None:
            raise InstallError(f"{name} {version} has no wheel for CPython {python} on {uv_platform(platform)}",
                               hint="envkit locks wheels only (no source builds): choose another Python or build.")
        chosen = next(w for w in wheels if w["url"] == wheel)
        sha256 = (chosen.get("hashes") or {}).get("sha256")
        if not sha256:
            raise InstallError(f"the index gave no sha256 for {wheel}",
                               hint="Lock from an index that publishes hashes (PEP 503 #sha256= fragments).")
        url = _without_fragment(wheel)
        out.append(LockedPackage(name=name, version=version, manager="pip", platform=platform,
                                 url=upstream_url(url, config) if upstream else url, sha256=sha256.lower()))
    return out


def best_wheel(urls: Sequence[str], python: str, platform: str = PLATFORM) -> str | None:
    """The URL whose wheel tags rank best for CPython ``python`` on ``platform`` (manylinux); None if none fits."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    ranks = {tag: rank for rank, tag in enumerate(target_tags(python, platform))}
    best: tuple[int, str] | None = None
    for url in urls:
        try:
            tags = parse_wheel_filename(file_name_of(url))[3]
        except InvalidWheelFilename:
            continue
        rank = min((ranks[t] for t in tags if t in ranks), default=None)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, url)
    return best[1] if best else None


def target_tags(python: str, platform: str = PLATFORM) -> list[Any]:
    """The wheel tags a CPython X.Y on ``platform`` (manylinux x86_64, aarch64) accepts, best first."""
    from packaging import tags

    version = tuple(int(part) for part in python.split("."))
    platforms = wheel_platform_tags(platform)
    return [*tags.cpython_tags(version, platforms=platforms), *tags.compatible_tags(version, platforms=platforms)]


def _without_fragment(url: str) -> str:
    return url.split("#", 1)[0]


def _toml(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)
