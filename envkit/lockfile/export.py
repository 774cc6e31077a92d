"""`envkit export`: the lock of an environment envkit made, as it is installed now.

Conda packages come from the prefix's conda-meta records (name, version, build, URL, md5, sha256, depends). pip
packages are the distributions uv or pip installed (their INSTALLER file says so; conda's own Python packages are
in conda-meta already), each pinned to the file it came from: the environment's own lock when it was made from one
and the versions still match, else the hash in its direct_url.json, else the wheel of that exact version on the
environment's index (resolved by uv for the environment's Python, without installing).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from envkit.errors import EnvkitError
from envkit.lockfile import model
from envkit.lockfile.format import LockFileError, read_lock
from envkit.lockfile.make import split_depends
from envkit.lockfile.model import PLATFORM, LockedPackage, LockFile
from envkit.lockfile.urls import fetch_url, upstream_url
from envkit.state import records
from envkit.state.config import Config
from envkit.state.files import parse_json
from envkit.state.ownership import check_held

_PIP_INSTALLERS = ("uv", "pip")


def export_lock(record: records.Record, config: Config, uv: Path, environ: Mapping[str, str],
                index_of: Callable[[records.Record], Optional[str]], default_index: Optional[str] = None) -> LockFile:
    """``index_of`` gives the upstream index of the environment's build (None when unknown); ``default_index``: the
    upstream default index (PyPI), which the user's own additions came from (the record's ``added``)."""
    check_held(record)  # (as every command that acts on a named environment's directory)
    prefix = Path(record.prefix)
    platform = record_platform(record)
    saved = _saved_lock(prefix, ".".join(record.python.split(".")[:2]), platform)
    known = {(p.manager, _norm(p.name), p.version): p for p in saved.packages} if saved else {}
    conda = [_conda_package(path, config, known, platform) for path in sorted((prefix / "conda-meta").glob("*.json"))]
    pip, missing = [], []
    for name, version, direct in installed_distributions(prefix):
        locked = known.get(("pip", _norm(name), version))
        if locked is not None:
            pip.append(locked)
        elif direct is not None:
            pip.append(LockedPackage(name=name, version=version, manager="pip", platform=platform,
                                     url=upstream_url(direct[0], config), sha256=direct[1]))
        else:
            missing.append(f"{name}=={version}")
    added = {_norm(name): version for name, version in (record.added or {}).items()}
    theirs = [pin for pin in missing if added.get(_norm(pin.split("==")[0])) == pin.split("==", 1)[1]]
    if theirs and default_index is not None:  # the user's own additions: from the default index, as add took them
        pip += _pin_from_index(theirs, record, config, uv, environ, lambda _: default_index, platform)
        missing = [pin for pin in missing if pin not in theirs]
    if missing:
        pip += _pin_from_index(missing, record, config, uv, environ, index_of, platform)
    custom = dict(saved.custom) if saved else {}
    custom.update({model.MANIFEST: record.manifest, model.BUILD: record.build, model.PYTHON: record.python,
                   model.TARGET: f"exported from {record.name}"})
    custom.update(additions_fact(record))
    channels = tuple(dict.fromkeys(p.url.rsplit("/", 2)[0] for p in conda))
    return LockFile(packages=tuple(conda + pip), platforms=(platform,), channels=channels, content_hash={platform: ""},
                    custom=custom, created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def record_platform(record: records.Record) -> str:
    """The platform an environment was made for: its record's profile's (linux-64 where it says none)."""
    said = record.machine.get("platform") if isinstance(record.machine, dict) else None
    return said if isinstance(said, str) else PLATFORM
def with_additions(lock: LockFile, record: records.Record, config: Config, uv: Path, environ: Mapping[str, str],
                   default_index: str) -> LockFile:
    """``lock`` (of the record's build) with the packages the user added to the environment, as installed there,
    pinned from the default index they came from; where one of them is also in the lock (a dependency an addition
    needed newer), the addition's version wins, as in the environment."""
    pins = [f"{name}=={version}" for name, version in (record.added or {}).items() if isinstance(version, str)]
    if not pins:
        return lock
    added = _pin_from_index(pins, record, config, uv, environ, lambda _: default_index, record_platform(record))
    names = {_norm(package.name) for package in added}
    kept = tuple(p for p in lock.packages if p.manager != "pip" or _norm(p.name) not in names)
    from dataclasses import replace

    return replace(lock, packages=kept + tuple(added), custom={**lock.custom, **additions_fact(record)})


def additions_fact(record: records.Record) -> dict[str, str]:
    """The lock's fact of the packages the user added (one per line), so that create --from-lock records them and
    `envkit upgrade` of that environment keeps them; none without additions."""
    lines = [line for line in record.additions or () if isinstance(line, str)]
    return {model.ADDITIONS: "\n".join(lines)} if lines else {}


def installed_distributions(prefix: Path) -> list[tuple[str, str, Optional[tuple[str, str]]]]:
    """(name, version, (URL, sha256) from direct_url.json or None) of each distribution uv or pip installed."""
    out = []
    for dist_info in sorted(prefix.glob("lib/python*/site-packages/*.dist-info")):
        installer = _dist_info_text(dist_info / "INSTALLER").strip()
        if installer not in _PIP_INSTALLERS:
            continue
        metadata = _metadata(dist_info / "METADATA")
        if "name" not in metadata or "version" not in metadata:
            continue
        out.append((metadata["name"], metadata["version"], _direct(dist_info / "direct_url.json")))
    return out


def _metadata(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in _dist_info_text(path).splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key.lower() in ("name", "version") and key.lower() not in out:
            out[key.lower()] = value.strip()
    return out


def _direct(path: Path) -> Optional[tuple[str, str]]:
    try:
        data: Any = parse_json(_dist_info_text(path))
    except ValueError:
        return None
    info = data.get("archive_info") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        return None
    sha256 = (info.get("hashes") or {}).get("sha256")
    if not sha256 and str(info.get("hash", "")).startswith("sha256="):
        sha256 = info["hash"].removeprefix("sha256=")
    url = data.get("url")
    return (url, sha256.lower()) if isinstance(url, str) and sha256 else None


def _dist_info_text(path: Path) -> str:
    """A file of an installed distribution's .dist-info, or "" when it cannot be read: bounded, and never waiting
    on a FIFO (envkit.state.files), as every file of an environment envkit reads."""
    from envkit.state.files import read_text_file

    try:
        return read_text_file(path, "package metadata")
    except (OSError, ValueError):
        return ""


def _conda_package(path: Path, config: Config, known: Mapping, platform: str = PLATFORM) -> LockedPackage:
    from envkit.state.files import read_text_file

    hint = "The environment is damaged: recreate it."
    try:  # bounded, and never waiting on a FIFO: the environment's files are not envkit's own
        text = read_text_file(path, "conda-meta record")
    except (OSError, ValueError) as error:
        raise EnvkitError(f"{path} {error}" if isinstance(error, ValueError) else
                          f"{path} is not a readable conda-meta record", hint=hint) from None
    try:
        data = parse_json(text)
        name, version, build = data["name"], data["version"], data["build"]
    except (ValueError, KeyError, TypeError):
        raise EnvkitError(f"{path} is not a readable conda-meta record", hint=hint) from None
    locked = known.get(("conda", _norm(name), version))
    if locked is not None and locked.sha256 == data.get("sha256"):
        return locked  # made from a lock: its upstream URL, not the local copy rattler installed from
    if not data.get("sha256") or not data.get("md5") or not data.get("url"):
        raise EnvkitError(f"{name} {version} in {path.parent} has no URL, sha256 or md5 recorded: it cannot be locked",
                          hint="Recreate the environment with envkit, then export it.")
    return LockedPackage(name=name, version=version, manager="conda", platform=platform,
                         url=upstream_url(data["url"], config), sha256=data["sha256"], md5=data["md5"], build=build,
                         dependencies=tuple(split_depends(data.get("depends") or [])))


def _pin_from_index(pins: list[str], record: records.Record, config: Config, uv: Path, environ: Mapping[str, str],
                    index_of: Callable[[records.Record], Optional[str]], platform: str) -> list[LockedPackage]:
    from envkit.lockfile.pylock import lock_pip

    index = index_of(record)
    if index is None:
        raise EnvkitError(f"cannot tell where {', '.join(pins)} came from: the build {record.build} is not in the "
                          "manifests any more", hint="Point --manifests at the manifests it was made from.")
    python = ".".join(record.python.split(".")[:2])
    return lock_pip(pins, fetch_url(index, config, "index"), python, config, uv, environ, exact=True,
                    platform=platform)


def _saved_lock(prefix: Path, python: str, platform: str) -> Optional[LockFile]:
    """The lock the environment was made from (its copy beside the record), as it installed for ``python``."""
    from envkit.lockfile.install import LOCK_IN_PREFIX, PYLOCK_IN_PREFIX

    pylock = prefix / records.RECORD_DIR / PYLOCK_IN_PREFIX
    path = prefix / records.RECORD_DIR / LOCK_IN_PREFIX
    try:
        if pylock.exists():
            from envkit.lockfile.pep751 import parse_pylock, read_pylock, read_pylock_text

            return read_pylock(parse_pylock(read_pylock_text(pylock), str(pylock)), str(pylock), python,
                               platform).lock
        return read_lock(path) if path.exists() else None
    except (LockFileError, OSError):
        return None


def _norm(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()
