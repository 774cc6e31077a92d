"""Wheels for tests: tiny ones built by hand (byte-identical for the same inputs, so their sha256 is stable), and
the core metadata and hashes of any wheel, cached by file state."""

from __future__ import annotations

import base64
import email.parser
import functools
import hashlib
import re
import zipfile
from collections.abc import Mapping, Sequence
from email.message import Message
from pathlib import Path
from types import MappingProxyType

from packaging.requirements import Requirement
from packaging.tags import parse_tag
from packaging.utils import parse_wheel_filename
from packaging.version import Version

# Fixed timestamp for every zip entry, so that the same inputs give a byte-identical wheel (stable sha256).
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_NO_FILES: Mapping[str, str | bytes] = MappingProxyType({})
_CHUNK = 1 << 20  # bytes read at a time when hashing
# Project names as the core metadata spec allows them (checked here: packaging>=22 has no validate= flag).
_VALID_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    *,
    requires: Sequence[str] = (),
    files: Mapping[str, str | bytes] = _NO_FILES,
    requires_python: str | None = None,
    tag: str = "py3-none-any",
) -> Path:
    """Write a small but complete, installable wheel into `directory` and return its path.

    Written by hand with zipfile (no build backend, no network), deterministic, and as strict as the wheel spec:
    uv refuses wheels whose RECORD hashes or file name do not match their contents.
    """
    if not _VALID_NAME.match(name):
        raise ValueError(f"invalid project name {name!r}")
    version = str(Version(version))  # normalises, and keeps a local part: 2.13.0+cu126
    for requirement in requires:
        Requirement(requirement)  # fail here, not in the installer, on a typo
    dist_info = f"{_wheel_name(name)}-{version}.dist-info"
    contents = {path: _as_bytes(data) for path, data in files.items()}
    _check_paths(contents, dist_info)
    contents[f"{dist_info}/METADATA"] = _metadata(name, version, requires, requires_python)
    contents[f"{dist_info}/WHEEL"] = _wheel_file(tag)
    contents[f"{dist_info}/RECORD"] = _record(contents, f"{dist_info}/RECORD")

    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{_wheel_name(name)}-{version}-{tag}.whl"
    parse_wheel_filename(wheel.name)  # the name must be one every installer accepts
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=_ZIP_EPOCH), data)
    return wheel


def _wheel_name(name: str) -> str:
    """The distribution part of a wheel file name: runs of -_. become one _, lower case (binary distribution spec)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _as_bytes(data: str | bytes) -> bytes:
    return data.encode() if isinstance(data, str) else data


def _check_paths(contents: Mapping[str, bytes], dist_info: str) -> None:
    """Reject paths an installer would refuse or that would clobber the metadata written here."""
    for path in contents:
        parts = path.split("/")
        if path.startswith("/") or "\\" in path or ".." in parts or "" in parts:
            raise ValueError(f"wheel paths are relative POSIX paths, got {path!r}")
        if parts[0] == dist_info:
            raise ValueError(f"{path!r} is inside {dist_info}, which build_wheel writes itself")


def _metadata(name: str, version: str, requires: Sequence[str], requires_python: str | None) -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python is not None:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Requires-Dist: {requirement}" for requirement in requires]
    return ("\n".join(lines) + "\n").encode()


def _wheel_file(tag: str) -> bytes:
    """The WHEEL file: one Tag line per expanded tag (a file name may carry a compressed set like a.b-none-any)."""
    tags = sorted(str(t) for t in parse_tag(tag))
    purelib = all(t.endswith("-any") for t in tags)
    lines = ["Wheel-Version: 1.0", "Generator: envkit-tests", f"Root-Is-Purelib: {str(purelib).lower()}"]
    return ("\n".join(lines + [f"Tag: {t}" for t in tags]) + "\n").encode()


def _record(contents: Mapping[str, bytes], record_path: str) -> bytes:
    """RECORD: path,sha256=<urlsafe base64 without padding>,size for every file, and an empty entry for itself."""
    rows = []
    for path, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}")
    rows.append(f"{record_path},,")
    return ("\n".join(rows) + "\n").encode()


def read_wheel_metadata(wheel: Path) -> Message:
    """The core metadata (dist-info/METADATA) of a wheel, parsed."""
    return email.parser.BytesParser().parsebytes(metadata_bytes(wheel), headersonly=True)


def metadata_bytes(wheel: Path) -> bytes:
    """The METADATA file of a wheel as stored, read through the zip directory without unpacking the rest."""
    return _metadata_bytes_cached(wheel.resolve(), *_file_key(wheel))


@functools.lru_cache(maxsize=512)
def _metadata_bytes_cached(wheel: Path, size: int, mtime_ns: int) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(names) != 1:
            raise ValueError(f"{wheel.name}: expected one .dist-info/METADATA, found {names}")
        return archive.read(names[0])


def _file_key(path: Path) -> tuple[int, int]:
    """Size and mtime: enough to notice a rebuilt wheel in the caches keyed on it."""
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def sha256_of(path: Path) -> str:
    return _sha256_cached(path.resolve(), *_file_key(path))


@functools.lru_cache(maxsize=512)
def _sha256_cached(path: Path, size: int, mtime_ns: int) -> str:
    """Hash once per file per test session: the real torch wheel is hundreds of megabytes."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()
