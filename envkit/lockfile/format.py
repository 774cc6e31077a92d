"""The one parser and the one writer of conda-lock's unified lock file (``conda-lock.yml``, ``version: 1``).

Written by hand instead of with conda-lock's own pydantic models: importing those costs about 0.55 s (1.6 s on a
busy machine) and 60 packages, pydantic among them, which envkit keeps off its start-up path (see pyproject.toml's
cap on typer). conda-lock stays the reference: the tests read what ``dump_lock`` writes with conda-lock's
``parse_conda_lock_file`` and ``conda-lock render``, and install what conda-lock's models write.

The parser is strict where installing depends on it (every package with a URL and a sha256, conda ones with an md5)
and says which package and which field is wrong; it ignores keys it does not use, as conda-lock's readers do.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, NoReturn, Optional

from envkit.errors import BadInputError
from envkit.lockfile.model import (BUILD, CUDA_ARCH, CUDA_DRIVER, FIND_LINKS, INDEX_URL, MANAGERS, MANIFEST, PYTHON,
                                   VERSION, LockedPackage, LockFile, file_name_of)
from envkit.versions import ComputeCapability, is_solve_cuda

_PIP_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")  # PEP 508: never read as an option
_PYTHON = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}")  # X.Y, as envkit writes it (ASCII digits, a few of them)
_HEX_DIGITS = {"md5": 32, "sha256": 64}
_HINT = "Make the lock again (`envkit lock MANIFEST`, or `envkit export ENV`), or fix the file."
_HEADER = """\
# A conda-lock lock file (https://github.com/conda/conda-lock, unified format, version 1), written by envkit.
# Every package is pinned by URL and hash. Install it without conda:  envkit create --from-lock {name} --name {env}
"""
_CONDA_LOCK = "# or with conda-lock:  conda-lock install -n {env} {name}\n"
# conda-lock installs a lock's pip part with the pip of the environment its conda part made: without a conda part
# there is none, and `conda run pip` would be another one, installing somewhere else.
_NO_CONDA_LOCK = "# (not with conda-lock install: the lock has no conda part, so no Python for its pip packages)\n"


LOCK_SUFFIX = ".conda-lock.yml"  # NAME.conda-lock.yml: the lock of environment NAME (a fleet's group's, say)


def lock_file_name(name: str) -> str:
    """The file a lock of environment ``name`` is written to: ``NAME.conda-lock.yml``."""
    return name + LOCK_SUFFIX


def install_name(path: Path) -> Optional[str]:
    """The environment a lock at ``NAME.conda-lock.yml`` installs as: NAME (each group's `envkit lock` of a fleet
    writes one, named as `envkit create` names that group's environment: under the build's default name, two groups'
    locks of one build would make one environment). None for another file name, or a NAME no environment can have."""
    from envkit.state.records import is_name

    stem = path.name[:-len(LOCK_SUFFIX)] if path.name.endswith(LOCK_SUFFIX) else ""
    return stem if stem and is_name(stem) else None


class LockFileError(BadInputError):
    """A lock file that cannot be read, or that lacks what installing it needs."""


def read_lock(path: Path, cache_dir: Optional[Path] = None) -> LockFile:
    """The lock in ``path``; with ``cache_dir``, parsed once and kept there while the file is unchanged (a warm
    `create --from-lock` then imports no PyYAML)."""
    if cache_dir is not None and path.is_file():
        from envkit.state.filecache import cached

        return cached(cache_dir, "lock", [path], ("lockfile/format.py", "lockfile/model.py", "state/yamltext.py",
                                                  "catalog/model.py", "catalog/entries.py", "versions.py"),
                      lambda: _read(path))
    return _read(path)


def _read(path: Path) -> LockFile:
    from envkit.state.files import read_text_file

    try:
        text = read_text_file(path, "lock file")
    except FileNotFoundError:
        raise LockFileError(f"lock file {path} does not exist",
                            hint="Give the path of a conda-lock.yml (`envkit lock MANIFEST` makes one).") from None
    except ValueError as error:
        raise LockFileError(f"lock file {path} {error}") from None
    return parse_lock(text, str(path))


def parse_lock(text: str, origin: str) -> LockFile:
    from envkit.state.yamltext import parse_yaml

    try:
        data = parse_yaml(text)
    except ValueError as error:
        raise LockFileError(f"{origin} is not valid YAML ({error}); a truncated file?", hint=_HINT) from None
    if not isinstance(data, dict):
        raise LockFileError(f"{origin} is not a conda-lock file (expected a mapping with version, metadata and "
                            "package)", hint=_HINT)
    version = data.get("version")
    if version != VERSION:
        said = "has no 'version'" if version is None else f"has version {version!r}"
        raise LockFileError(f"{origin} {said}: envkit reads conda-lock's unified format, version {VERSION}",
                            hint="Write it with conda-lock's default (unified) output, or make it with `envkit lock`.")
    metadata = _mapping(data.get("metadata"), origin, "metadata")
    platforms = _strings(metadata.get("platforms"), origin, "metadata.platforms")
    channels = tuple(_channel(c, origin, i) for i, c in enumerate(_list(metadata.get("channels", []), origin,
                                                                          "metadata.channels")))
    content_hash = _string_map(metadata.get("content_hash", {}), origin, "metadata.content_hash")
    custom = checked_facts(_string_map(metadata.get("custom_metadata") or {}, origin, "metadata.custom_metadata"),
                           origin)
    created = _mapping(metadata.get("time_metadata") or {}, origin, "metadata.time_metadata").get("created_at")
    packages = _list(data.get("package"), origin, "package")
    if not packages:
        raise LockFileError(f"{origin} locks no package", hint=_HINT)
    locked = tuple(_package(item, origin, index) for index, item in enumerate(packages))
    return LockFile(packages=_merge_categories(locked), platforms=tuple(platforms), channels=channels,
                    content_hash=content_hash, sources=tuple(_strings(metadata.get("sources", []), origin,
                                                                      "metadata.sources")),
                    custom=custom, created_at=created if isinstance(created, str) else None)


def checked_facts(custom: dict[str, str], origin: str) -> dict[str, str]:
    """``custom`` if envkit's facts in it are what they say they are: the manifest and build become a record's (and
    are looked up in the manifests directory), the Python is the one the environment gets, the CUDA ones say what
    the solve saw, the index and find-links URLs reach uv (as upstream https URLs, as a manifest names them)."""
    from envkit.catalog.entries import https_url_problem
    from envkit.catalog.model import valid_id

    for key, what in ((MANIFEST, "a manifest name"), (BUILD, "a build id")):
        value = custom.get(key)
        if value and not valid_id(value):
            raise LockFileError(f"{origin}: metadata.custom_metadata {key} {value!r} is not {what} (letters, digits "
                                "and . _ + -, starting with a letter or digit)", hint=_HINT)
    python = custom.get(PYTHON)
    if python and not _PYTHON.fullmatch(python):
        raise LockFileError(f"{origin}: metadata.custom_metadata {PYTHON} {python!r} is not a Python version like "
                            "3.12", hint=_HINT)
    for key, fits, what in ((CUDA_DRIVER, is_solve_cuda, "a CUDA version like 12.4 (the __cuda"),
                            (CUDA_ARCH, _is_solve_arch, "a compute capability like 8.0 (the __cuda_arch")):
        value = custom.get(key)
        if value and not fits(value):
            raise LockFileError(f"{origin}: metadata.custom_metadata {key} {value!r} is not {what} the solve saw; "
                                "empty for none)", hint=_HINT)
    for key, what in ((INDEX_URL, "pip index"), (FIND_LINKS, "find-links")):
        value = custom.get(key)
        problem = https_url_problem(value, what) if value else None
        if problem:
            raise LockFileError(f"{origin}: metadata.custom_metadata {key} {problem}", hint=_HINT)
    return custom


def _is_solve_arch(text: str) -> bool:
    """Whether ``text`` is a ``__cuda_arch`` as envkit writes it: a compute capability, X.Y."""
    try:
        return str(ComputeCapability.parse(text)) == text  # (parse also takes sm_80, and spaces around)
    except ValueError:
        return False


def _package(item: Any, origin: str, index: int) -> LockedPackage:
    where = f"package {index + 1}"
    entry = _mapping(item, origin, where)
    name = _text(entry.get("name"), origin, f"{where}, field 'name'")
    where = f"package {index + 1} ({name})"
    manager = _text(entry.get("manager"), origin, f"{where}, field 'manager'")
    if manager not in MANAGERS:
        raise LockFileError(f"{origin}, {where}: manager {manager!r} is not one of {', '.join(MANAGERS)}", hint=_HINT)
    hashes = _mapping(entry.get("hash"), origin, f"{where}, field 'hash'")
    needed = ("md5", "sha256") if manager == "conda" else ("sha256",)
    for kind in needed:
        value = hashes.get(kind)
        if not isinstance(value, str) or not is_hex_hash(value.lower(), kind):
            _no_valid_hash(kind, value, origin, where)
    url = _text(entry.get("url"), origin, f"{where}, field 'url'")
    if any(c.isspace() for c in url) or "://" not in url:
        raise LockFileError(f"{origin}, {where}: {url!r} is not a URL", hint=_HINT)
    from urllib.parse import unquote

    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in unquote(url)):  # %00 in a file name: no file can be named so
        raise LockFileError(f"{origin}, {where}: {url!r} holds a control character (a NUL byte?)", hint=_HINT)
    check_store_names(hashes["sha256"].lower(), url, origin, where)
    version = _text(entry.get("version"), origin, f"{where}, field 'version'")
    if len(version) > _LONGEST_VERSION:
        raise LockFileError(f"{origin}, {where}: a version of {len(version)} characters is no version", hint=_HINT)
    if manager == "pip" and not _PIP_NAME.match(name):
        raise LockFileError(f"{origin}, {where}: {name!r} is not a valid package name", hint=_HINT)
    if manager == "pip" and not _pep440(version):  # it reaches uv's requirements as name==version
        raise LockFileError(f"{origin}, {where}: {version!r} is not a valid version", hint=_HINT)
    md5 = hashes.get("md5")
    dependencies = _string_map(entry.get("dependencies") or {}, origin, f"{where}, field 'dependencies'")
    build = entry.get("build")
    optional = entry.get("optional", False)
    if not isinstance(optional, bool):
        raise LockFileError(f"{origin}, {where}: 'optional' must be true or false", hint=_HINT)
    return LockedPackage(
        name=name, version=version, manager=manager,
        platform=_text(entry.get("platform"), origin, f"{where}, field 'platform'"),
        url=url, sha256=hashes["sha256"].lower(),
        md5=md5.lower() if isinstance(md5, str) else None, build=build if isinstance(build, str) else None,
        dependencies=tuple(dependencies.items()), category=str(entry.get("category") or "main"), optional=optional)


def is_hex_hash(value: str, kind: str) -> bool:
    """Whether ``value`` is a ``kind`` (md5, sha256) as envkit keeps it: that many lower-case hexadecimal digits."""
    return len(value) == _HEX_DIGITS[kind] and all(c in "0123456789abcdef" for c in value)


def _no_valid_hash(kind: str, value: Any, origin: str, where: str) -> NoReturn:
    said = "has none" if value is None else f"{value!r} is not a {kind} ({_HEX_DIGITS[kind]} hexadecimal digits)"
    raise LockFileError(f"{origin}, {where}: no valid {kind} hash ({said}); envkit installs only hash-checked files",
                        hint=_HINT)


def check_store_names(sha256: str, url: str, origin: str, where: str) -> None:
    """LockFileError (exit 2) naming the lock and the package unless both names envkit keeps a locked file under
    (``STORE/<sha256>/<file name of the URL>``) are plain names: a sha256 of 64 hexadecimal digits, and a URL whose
    last part, percent-decoded, is one file name (not ``..``, no ``/``). Called as the lock is read, before any
    download: a hostile lock's ``../../home`` or ``..%2F..%2F.bashrc`` never becomes a path outside the store."""
    from envkit.state.files import plain_name_problem

    if not is_hex_hash(sha256, "sha256"):
        _no_valid_hash("sha256", sha256, origin, where)
    name = file_name_of(url)
    problem = plain_name_problem(name)
    if problem is not None:
        raise LockFileError(f"{origin}, {where}: the URL {url!r} ends in {name!r}, which {problem}: it is not a plain "
                            "file name, and envkit keeps each locked file under its own name", hint=_HINT)


_LONGEST_VERSION = 200  # characters of a package's version: far above any real one


def _pep440(version: str) -> bool:
    from packaging.version import Version

    if len(version) > _LONGEST_VERSION:
        return False
    try:
        Version(version)
    except ValueError:  # InvalidVersion, or a part of thousands of digits (past int()'s limit)
        return False
    return not any(c.isspace() for c in version)


def _merge_categories(packages: tuple[LockedPackage, ...]) -> tuple[LockedPackage, ...]:
    """conda-lock writes a package once per category it belongs to: keep one entry, required if any entry is."""
    out: dict[tuple[str, str, str], LockedPackage] = {}
    for package in packages:
        key = (package.manager, package.name, package.platform)
        kept = out.get(key)
        if kept is None or (kept.optional and not package.optional):
            out[key] = package
    return tuple(out.values())


def dump_lock(lock: LockFile, file_name: str = "conda-lock.yml", env_name: Optional[str] = None) -> str:
    """The file's text: conda-lock's v1 layout, packages sorted as conda-lock sorts them (manager, name, platform).
    Its header says how to install it, as ``env_name`` when given (a valid environment name), else as ENV."""
    import yaml

    metadata: dict[str, Any] = {
        "content_hash": dict(lock.content_hash),
        "channels": [{"url": url, "used_env_vars": []} for url in lock.channels],
        "platforms": list(lock.platforms),
        "sources": list(lock.sources),
    }
    if lock.created_at:
        metadata["time_metadata"] = {"created_at": lock.created_at}
    if lock.custom:
        metadata["custom_metadata"] = dict(lock.custom)
    packages = sorted(lock.packages, key=lambda p: (p.manager, p.name, p.platform))
    data = {"version": VERSION, "metadata": metadata, "package": [_package_data(p) for p in packages]}
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=1000)
    words = {"name": _shell_word(file_name), "env": _shell_word(env_name) if env_name else "ENV"}
    with_pip_only = lock.pip() and not lock.conda()
    return _HEADER.format(**words) + (_NO_CONDA_LOCK if with_pip_only else _CONDA_LOCK.format(**words)) + body


def _shell_word(file_name: str) -> str:
    """The lock's file name as the commands of its header take it when pasted beside it: quoted, never read as an
    option (``./-x.yml``); a name no comment line can hold (a line break in it) is left as FILE."""
    import shlex

    if not file_name.isprintable():
        return "FILE"
    return shlex.quote(f"./{file_name}" if file_name.startswith("-") else file_name)


def _package_data(package: LockedPackage) -> dict[str, Any]:
    hashes = {"md5": package.md5, "sha256": package.sha256} if package.md5 else {"sha256": package.sha256}
    out: dict[str, Any] = {"name": package.name, "version": package.version, "manager": package.manager,
                           "platform": package.platform, "dependencies": dict(sorted(package.dependencies)),
                           "url": package.url, "hash": hashes, "category": package.category,
                           "optional": package.optional}
    if package.build is not None:
        out["build"] = package.build
    return out


def _mapping(value: Any, origin: str, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise LockFileError(f"{origin}: {where} must be a mapping", hint=_HINT)
    return value


def _list(value: Any, origin: str, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise LockFileError(f"{origin}: {where} must be a list", hint=_HINT)
    return value


def _text(value: Any, origin: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        said = "is missing" if value is None else f"must be a quoted string, not {value!r}"
        raise LockFileError(f"{origin}, {where} {said}", hint=_HINT)
    return value


def _strings(value: Any, origin: str, where: str) -> list[str]:
    items = _list(value, origin, where)
    return [_text(item, origin, f"{where}[{index}]") for index, item in enumerate(items)]


def _string_map(value: Any, origin: str, where: str) -> dict[str, str]:
    mapping = _mapping(value, origin, where)
    out = {}
    for key, item in mapping.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise LockFileError(f"{origin}: {where}: {key!r} must map to a quoted string", hint=_HINT)
        out[key] = item
    return out


def _channel(value: Any, origin: str, index: int) -> str:
    if isinstance(value, str):
        return value
    return _text(_mapping(value, origin, f"metadata.channels[{index}]").get("url"), origin,
                 f"metadata.channels[{index}].url")
