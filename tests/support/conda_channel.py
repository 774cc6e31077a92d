"""A local conda channel of tiny hand-made packages, indexed by py-rattler, so that tests run real solves and real
installs without the network.

Packages are written in the v1 ``.tar.bz2`` format (info/ and the payload in one tar): the standard library writes
it, py-rattler has no package writer, and rattler installs it exactly like a ``.conda`` file.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import sys
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from rattler.index import index_fs

# What index.json says about the platform of each subdir these tests use.
_SUBDIR_FIELDS: dict[str, dict[str, str]] = {
    "linux-64": {"platform": "linux", "arch": "x86_64"},
    "linux-aarch64": {"platform": "linux", "arch": "aarch64"},
    "noarch": {"noarch": "generic"},
}
# One fixed time for every archive member and record: a package built twice has the same bytes.
_TIMESTAMP_S = 1_700_000_000


def build_package(
    channel_dir: Path,
    name: str,
    version: str,
    build: str = "0",
    build_number: int = 0,
    depends: Sequence[str] = (),
    files: Mapping[str, bytes | str] | None = None,
    subdir: str = "linux-64",
    symlinks: Mapping[str, str] | None = None,
) -> Path:
    """Write ``<channel_dir>/<subdir>/<name>-<version>-<build>.tar.bz2`` and return its path.

    ``files`` maps a path inside the prefix to its content; ``symlinks`` maps a path inside the prefix to the link's
    target, written as given (absolute or relative). Call ``index_channel`` once all packages are written.
    """
    if subdir not in _SUBDIR_FIELDS:
        raise ValueError(f"subdir must be one of {sorted(_SUBDIR_FIELDS)}, not {subdir!r}")
    payload = {path: data.encode() if isinstance(data, str) else data for path, data in (files or {}).items()}
    links = dict(symlinks or {})
    index = {
        "name": name,
        "version": version,
        "build": build,
        "build_number": build_number,
        "depends": list(depends),
        "subdir": subdir,
        "timestamp": _TIMESTAMP_S * 1000,
        **_SUBDIR_FIELDS[subdir],
    }
    info = {
        "info/index.json": json.dumps(index, indent=2).encode(),
        "info/paths.json": json.dumps(_paths_json(payload, links), indent=2).encode(),
        "info/files": "".join(f"{path}\n" for path in sorted([*payload, *links])).encode(),
    }
    target = channel_dir / subdir / f"{name}-{version}-{build}.tar.bz2"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:bz2") as archive:
        for path, data in sorted({**info, **payload}.items()):
            _add_file(archive, path, data)
        for path, link_target in sorted(links.items()):
            _add_symlink(archive, path, link_target)
    return target


def build_python_package(channel_dir: Path, version: str) -> Path:
    """A ``python`` package whose prefix is a working virtual environment of the interpreter running the tests.

    Downloading a real CPython is not an option offline, and a wrapper script that execs the real interpreter would
    report the real interpreter's sys.prefix. Instead the prefix gets what ``python -m venv`` makes: absolute symlinks
    to the real interpreter in bin/ and a pyvenv.cfg at its root, so ``<prefix>/bin/python`` has sys.prefix ==
    prefix and pip or uv install into ``<prefix>/lib/pythonX.Y/site-packages``. The site-packages README (as CPython
    ships one) makes that directory exist, so it is on sys.path before anything is installed into it.
    """
    running = ".".join(str(part) for part in sys.version_info[:3])
    if version != running:
        raise ValueError(f"the python package must have the running interpreter's version {running}, not {version}")
    real = Path(sys.executable).resolve()
    short = ".".join(version.split(".")[:2])
    pyvenv_cfg = f"home = {real.parent}\ninclude-system-site-packages = false\nversion = {version}\n"
    return build_package(
        channel_dir,
        "python",
        version,
        files={
            "pyvenv.cfg": pyvenv_cfg,
            f"lib/python{short}/site-packages/README.txt": "Third-party packages go here.\n",
        },
        symlinks={f"bin/{exe}": str(real) for exe in ("python", "python3", f"python{short}")},
    )


def build_pip_package(channel_dir: Path, version: str = "24.0") -> Path:
    """A stand-in ``pip`` package: the name and version a solve needs, nothing to run.

    envkit's plan adds a ``pip`` spec to a conda environment whose build has pip packages (conda users expect pip
    there), but envkit's own pip steps install with uv, so the stand-in only has to be solvable and installable. It
    is noarch (``noarch: generic``) and needs a python, as the real one does.
    """
    return build_package(
        channel_dir,
        "pip",
        version,
        depends=("python",),
        files={"share/pip-stand-in/README.txt": "A stand-in pip package for envkit's tests: uv installs.\n"},
        subdir="noarch",
    )


def index_channel(channel_dir: Path) -> None:
    """Write repodata for every subdir with py-rattler's own indexer, so the channel looks like a real one (plain,
    zstd and sharded repodata). A channel must have noarch/, even when it holds no package."""
    (channel_dir / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel_dir, force=True))


def _paths_json(payload: Mapping[str, bytes], links: Mapping[str, str]) -> dict[str, object]:
    """info/paths.json: what rattler links into the prefix and checks the extracted package against."""
    entries: list[dict[str, object]] = [
        {"_path": path, "path_type": "hardlink", "sha256": hashlib.sha256(data).hexdigest(), "size_in_bytes": len(data)}
        for path, data in payload.items()
    ]
    entries += [{"_path": path, "path_type": "softlink"} for path in links]
    return {"paths": sorted(entries, key=lambda entry: str(entry["_path"])), "paths_version": 1}


def _add_file(archive: tarfile.TarFile, path: str, data: bytes) -> None:
    member = tarfile.TarInfo(path)
    member.size, member.mtime, member.mode = len(data), _TIMESTAMP_S, 0o644
    archive.addfile(member, io.BytesIO(data))


def _add_symlink(archive: tarfile.TarFile, path: str, target: str) -> None:
    member = tarfile.TarInfo(path)
    member.type, member.linkname, member.mtime = tarfile.SYMTYPE, target, _TIMESTAMP_S
    archive.addfile(member)
