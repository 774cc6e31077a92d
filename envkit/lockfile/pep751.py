"""PEP 751 lock files (``pylock.toml``, ``pylock.NAME.toml``), the standard that pip (`pip lock`), uv and PDM write:
read into envkit's LockFile for a target Python, and written from a pure-pip one (`envkit export --format pylock`).

The format's parsing, validation and selection are packaging's own (``packaging.pylock``): what applies to the
target is what ``Pylock.select`` picks for CPython X.Y on linux x86_64 (its markers evaluated there, the lock's
default dependency groups, the best wheel for its tags). envkit installs wheels with a sha256, by URL; the project's
own entry (a ``directory``, as uv and PDM write it, without a version) is left out with a note, and an entry that
would need a build (an sdist, a VCS checkout or an archive) is refused, as in envkit's own locks. envkit's facts
(manifest, build, Python) travel in ``[tool.envkit]``, as they do in conda-lock's ``custom_metadata``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

from envkit.lockfile import model
from envkit.lockfile.format import LockFileError, check_store_names, checked_facts
from envkit.lockfile.model import PLATFORM, LockedPackage, LockFile

_HINT = "Make it again (`uv export --format pylock.toml`, `pip lock`, `pdm export -f pylock`), or fix the file."
CREATED_BY = "envkit"


def is_pylock(path: Path) -> bool:
    """Whether ``path`` is named as PEP 751 names lock files: pylock.toml or pylock.NAME.toml (NAME without dots).
    (packaging.pylock.is_valid_pylock_path says the same, but importing packaging.pylock costs the specifier and
    tag parsers, which a conda-lock.yml of a known build never needs.)"""
    import re

    return re.fullmatch(r"pylock(\.[^.]+)?\.toml", path.name) is not None


class Read(NamedTuple):
    """A pylock.toml as envkit installs it for one Python, and what was left out of it (one note each)."""

    lock: LockFile
    left_out: tuple[str, ...]


def read_pylock_text(path: Path) -> str:
    """The text of the pylock.toml at ``path``, read as every lock file is (envkit.state.files: at most 64 MiB, a pipe or
    device no further, a FIFO nobody writes to never waited on); LockFileError (exit 2) naming the file."""
    from envkit.state.files import read_text_file

    try:
        return read_text_file(path, "lock file")
    except FileNotFoundError:
        raise LockFileError(f"lock file {path} does not exist", hint="Give the path of a pylock.toml.") from None
    except ValueError as error:
        raise LockFileError(f"lock file {path} {error}") from None


def parse_pylock(text: str, origin: str) -> Any:
    """The validated ``packaging.pylock.Pylock`` of ``text``; LockFileError (exit 2) naming the problem."""
    from packaging.pylock import Pylock, PylockUnsupportedVersionError, PylockValidationError

    try:
        data = _toml_loads(text)
    except ValueError as error:  # tomllib.TOMLDecodeError
        raise LockFileError(f"{origin} is not valid TOML ({error}); a truncated file?", hint=_HINT) from None
    except RecursionError:  # tomllib's parser nests a call per level of arrays and inline tables
        raise LockFileError(f"{origin} nests deeper than envkit reads (arrays or tables inside each other, "
                            f"{sys.getrecursionlimit()} deep or more): it is no lock file", hint=_HINT) from None
    try:
        return Pylock.from_dict(data)
    except PylockUnsupportedVersionError as error:
        raise LockFileError(f"{origin}: {error}", hint="envkit reads pylock.toml lock-version 1.x.") from None
    except PylockValidationError as error:
        raise LockFileError(f"{origin} is not a valid pylock.toml: {error}", hint=_HINT) from None


def default_python(pylock: Any, offered: Sequence[Any], default: Any) -> Optional[str]:
    """The Python X.Y to install a pylock for when none is asked: ``default`` (python.yaml's) when the lock's
    ``requires-python`` allows it, else the newest of ``offered`` that it allows; None when none does."""
    allowed = [v for v in offered if _allows(pylock.requires_python, f"{v}")]
    if default in allowed:
        return str(default)
    return str(max(allowed)) if allowed else None


def read_pylock(pylock: Any, origin: str, python: str) -> Read:
    """What ``pylock`` installs on CPython ``python`` (X.Y) under linux x86_64, as a pip-only LockFile."""
    from packaging.pylock import PackageDirectory, PackageWheel, PylockSelectError

    from envkit.lockfile.pylock import target_tags

    if not _allows(pylock.requires_python, python):
        raise LockFileError(f"{origin} requires Python {pylock.requires_python}, not {python}",
                            hint="Give --python a version it allows.")
    packages, left_out = [], []
    try:
        for package, chosen in pylock.select(environment=target_environment(python), tags=target_tags(python)):
            if isinstance(chosen, PackageDirectory):  # the project itself (uv, PDM): no version, a source tree
                left_out.append(f"{package.name} (the directory {chosen.path}: a project, not a locked file; "
                                f"install it into the environment with `pip install -e {chosen.path}`)")
                continue
            if not isinstance(chosen, PackageWheel):
                kind = type(chosen).__name__.removeprefix("Package").lower()
                raise LockFileError(f"{origin}: {package.name} would be built from its {kind}: envkit installs "
                                    f"locked wheels only", hint="Lock with wheels only (uv: --only-binary :all:).")
            packages.append(_locked(package, chosen, origin))
    except PylockSelectError as error:
        raise LockFileError(f"{origin}: nothing installable for CPython {python} on linux x86_64: {error}",
                            hint="Give --python another version, or lock for this platform.") from None
    if not packages:
        raise LockFileError(f"{origin} has nothing to install for CPython {python} on linux x86_64", hint=_HINT)
    facts = checked_facts(_envkit_facts(pylock.tool), origin)  # as conda-lock's: a manifest is a name, not a path
    facts[model.PYTHON] = python
    return Read(LockFile(packages=tuple(packages), content_hash={PLATFORM: ""}, custom=facts), tuple(left_out))


def target_environment(python: str) -> dict[str, str]:
    """The marker environment of CPython X.Y on linux x86_64 (its patch release taken as .0)."""
    full = f"{python}.0"
    return {"implementation_name": "cpython", "implementation_version": full, "os_name": "posix",
            "platform_machine": "x86_64", "platform_release": "", "platform_system": "Linux",
            "platform_version": "", "python_full_version": full, "platform_python_implementation": "CPython",
            "python_version": python, "sys_platform": "linux"}


def _locked(package: Any, wheel: Any, origin: str) -> LockedPackage:
    sha256 = (wheel.hashes or {}).get("sha256")
    if not wheel.url:
        raise LockFileError(f"{origin}: {package.name}'s wheel is given by path ({wheel.path}), not by URL",
                            hint="envkit installs locked files by URL, hash-checked.")
    if not sha256:
        raise LockFileError(f"{origin}: {package.name}'s wheel has no sha256", hint=_HINT)
    check_store_names(sha256.lower(), wheel.url, origin, f"package {package.name}")  # before any download
    version = str(package.version) if package.version is not None else _wheel_version(wheel, package.name, origin)
    return LockedPackage(name=str(package.name), version=version, manager="pip", platform=PLATFORM, url=wheel.url,
                         sha256=sha256.lower())


def _wheel_version(wheel: Any, name: str, origin: str) -> str:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        return str(parse_wheel_filename(wheel.filename)[1])
    except (InvalidWheelFilename, ValueError):
        raise LockFileError(f"{origin}: {name} has no version and its wheel's name says none", hint=_HINT) from None


def _envkit_facts(tool: Any) -> dict[str, str]:
    facts = (tool or {}).get("envkit") if isinstance(tool, dict) else None
    if not isinstance(facts, dict):
        return {}
    return {f"envkit.{key}": value for key, value in facts.items() if isinstance(value, str)}


def dump_pylock(lock: LockFile, origin: str) -> str:
    """``lock`` (pip packages only) as a pylock.toml: each package with its one wheel (URL and sha256), the Python
    it was installed for as ``requires-python``, envkit's facts in ``[tool.envkit]``."""
    import tomli_w
    from packaging.pylock import Package, PackageWheel, Pylock
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    if lock.conda():
        raise LockFileError(f"{origin} has {len(lock.conda())} conda packages: a pylock.toml holds pip packages only",
                            hint="Export it in conda-lock's format (the default, --format conda-lock).")
    python = lock.fact(model.PYTHON)
    # Each wheel's file name given, not left to packaging to take from the URL: some releases do not unquote it
    # (torch-2.13.0%2Bcu126-...whl), and then refuse it as a wheel name
    packages = [Package(name=canonicalize_name(p.name), version=Version(p.version),
                        wheels=[PackageWheel(name=p.file_name, url=p.url, hashes={"sha256": p.sha256})])
                for p in sorted(lock.pip(), key=lambda p: canonicalize_name(p.name))]
    facts = {key.removeprefix("envkit."): value for key, value in lock.custom.items() if key.startswith("envkit.")}
    pylock = Pylock(lock_version=Version("1.0"), created_by=CREATED_BY, packages=packages,
                    requires_python=SpecifierSet(f"=={python}.*") if python else None,
                    tool={"envkit": facts} if facts else None)
    pylock.validate()
    return ("# A PEP 751 lock file, written by envkit: every package pinned to one wheel by URL and sha256.\n"
            f"# Install it:  envkit create --from-lock {origin} --name ENV   (or: pip install -r, uv pip sync)\n"
            + tomli_w.dumps(pylock.to_dict()))


def _allows(specifier: Any, python: str) -> bool:
    """Whether a release of Python X.Y meets ``specifier`` (``>=3.10.18`` allows 3.10)."""
    return specifier is None or any(specifier.contains(f"{python}.{patch}", prereleases=True) for patch in range(40))


def _toml_loads(text: str) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(str(error)) from None
