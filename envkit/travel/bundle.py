"""Offline bundles (`envkit bundle LOCK|ENV -o DIR_OR_TAR`, `envkit create --from-bundle PATH`): every file a lock
installs (its conda packages and wheels, of every platform it locks), fetched through the transport rule and
hash-checked as `create --from-lock` fetches them (envkit.lockfile.fetch), beside the lock itself::

    BUNDLE/bundle.json        {"format": "envkit-bundle", "version": 1, "lock": "conda-lock.yml",
                               "files": {NAME: SHA256, ...}}
    BUNDLE/conda-lock.yml     the lock, as it was (its upstream URLs)
    BUNDLE/files/NAME         each file the lock names, by its file name

A tar (.tar, .tar.gz, .tgz) holds the same tree. Opening one checks, before anything is installed, that it holds
every file the lock names and nothing else, each with the lock's hashes; then the install fetches from it alone
(each locked URL mapped to its file: a mirror of one file)."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

from envkit.errors import BadInputError, EnvkitError
from envkit.lockfile.fetch import HashMismatch, fetch_all, verify
from envkit.lockfile.format import read_lock
from envkit.lockfile.model import LockedPackage, LockFile
from envkit.lockfile.urls import fetch_url
from envkit.state.config import Config, Mirror, comparable

FORMAT = "envkit-bundle"
VERSION = 1
INDEX = "bundle.json"
LOCK = "conda-lock.yml"
FILES = "files"
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")


class BundleError(BadInputError):
    """A bundle that is not whole, or not what its lock names (exit 2): nothing is installed from it."""


class Bundled(NamedTuple):
    path: Path
    files: int
    bytes: int


def bundled_packages(lock: LockFile) -> tuple[LockedPackage, ...]:
    """What a bundle of ``lock`` holds: every package it installs, on every platform it locks."""
    return tuple(p for p in lock.packages if not p.optional)


def file_table(packages: Sequence[LockedPackage], origin: str) -> dict[str, str]:
    """{file name: sha256} of ``packages``; BadInputError for two different files of one name, or a name that is
    not a plain file name."""
    table: dict[str, str] = {}
    for package in packages:
        name = package.file_name
        if not name or name in (".", "..") or "/" in name or name.startswith("."):
            raise BadInputError(f"{origin}: {package.name}'s URL names no file: {package.url}")
        if table.setdefault(name, package.sha256) != package.sha256:
            raise BadInputError(f"{origin}: two different files are named {name}",
                                hint="A bundle keeps files by name: lock them from one channel.")
    return table


def make_bundle(lock_path: Path, config: Config, store: Path, out: Path, report: Callable[[str], None],
                scratch: Path) -> Bundled:
    """Fetch every file ``lock_path`` names (through ``config``'s mirrors, hash-checked) and write the bundle to
    ``out``: a tar when its name ends .tar, .tar.gz or .tgz, else a directory that must not exist yet. Written under
    a temporary name and renamed: a failed bundle leaves nothing that looks whole."""
    if os.path.lexists(out):
        raise BadInputError(f"-o {out} is there already", hint="Name a new directory or tar file.")
    if not out.parent.is_dir():
        raise BadInputError(f"-o {out}: the directory {out.parent} does not exist")
    lock = read_lock(lock_path)
    packages = bundled_packages(lock)
    table = file_table(packages, str(lock_path))
    sources = [fetch_url(p.url, config, f"{lock_path}: {p.manager} package {p.name}: URL") for p in packages]
    paths = fetch_all(packages, sources, store, report, tuple(m.target for m in config.mirrors))
    tree = scratch / "bundle" if out.name.endswith(TAR_SUFFIXES) else \
        Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent))
    try:
        (tree / FILES).mkdir(parents=True)
        for package, path in zip(packages, paths):
            target = tree / FILES / package.file_name
            if not target.exists():
                try:
                    os.link(path, target)
                except OSError:
                    shutil.copyfile(path, target)
        shutil.copyfile(lock_path, tree / LOCK)
        index = {"format": FORMAT, "version": VERSION, "lock": LOCK, "files": table}
        (tree / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out.name.endswith(TAR_SUFFIXES):
            _write_tar(tree, out)
        else:
            os.chmod(tree, 0o777 & ~_umask())  # (mkdtemp made it private)
            os.rename(tree, out)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    return Bundled(out, len(table), sum(path.stat().st_size for path in set(paths)))


def _write_tar(tree: Path, out: Path) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent)
    os.close(handle)
    try:
        with tarfile.open(temporary, "w:gz" if out.name.endswith(("gz", "tgz")) else "w") as tar:
            for path in sorted(tree.rglob("*")):
                tar.add(path, arcname=path.relative_to(tree).as_posix(), recursive=False)
        os.chmod(temporary, 0o666 & ~_umask())
        os.rename(temporary, out)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def open_bundle(path: Path, scratch: Path) -> Path:
    """The bundle's tree: the directory, or the tar unpacked into ``scratch`` (regular files and directories only,
    each inside it: no link, device or path outside is taken)."""
    if path.is_dir():
        return path
    if not path.is_file():
        raise BundleError(f"bundle {path} does not exist", hint="Give the directory or tar `envkit bundle` wrote.")
    tree = scratch / "bundle"
    tree.mkdir()
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                name = os.path.normpath(member.name)
                if name.startswith(("/", "..")) or not (member.isfile() or member.isdir()):
                    raise BundleError(f"{path} holds {member.name!r}, which no bundle holds (a link, a device, or "
                                      "a path outside it)")
                if member.isdir():
                    (tree / name).mkdir(parents=True, exist_ok=True)
                    continue
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None
                with source, open(tree / name, "xb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
    except (tarfile.TarError, EOFError, OSError) as error:
        raise BundleError(f"{path} is not a bundle envkit can read: {error}",
                          hint="Give the directory or tar `envkit bundle` wrote (copied in full).") from None
    return tree


def check_bundle(tree: Path, origin: str) -> tuple[Path, tuple[Mirror, ...]]:
    """(the bundle's lock, a mirror of each locked URL to its file in the bundle); BundleError (exit 2) when the
    bundle lacks a file its lock names, holds one the lock does not name, or a file is not the one the lock pins."""
    try:
        index = json.loads((tree / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise BundleError(f"{origin} is not a bundle: it has no readable {INDEX}",
                          hint="Give the directory or tar `envkit bundle` wrote.") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT or index.get("version") != VERSION:
        raise BundleError(f"{origin}: its {INDEX} is not an envkit bundle's (version {VERSION})")
    lock_path = tree / LOCK
    if not lock_path.is_file():
        raise BundleError(f"the bundle {origin} lacks its lock ({LOCK})")
    lock = read_lock(lock_path)
    packages = bundled_packages(lock)
    table = file_table(packages, f"{origin}: {LOCK}")
    held = {entry.name for entry in (tree / FILES).iterdir()} if (tree / FILES).is_dir() else set()
    missing, extra = sorted(set(table) - held), sorted(held - set(table))
    if missing:
        raise BundleError(f"the bundle {origin} lacks {_some(missing)}, which its lock names: nothing was installed",
                          hint="Copy the bundle again in full, or make it again (`envkit bundle`).")
    if extra:
        raise BundleError(f"the bundle {origin} holds {_some(extra)}, which its lock does not name: nothing was "
                          "installed", hint="Make the bundle again (`envkit bundle`): envkit installs no file its "
                                            "lock does not pin.")
    for package in packages:
        path = tree / FILES / package.file_name
        if path.is_symlink() or not path.is_file():
            raise BundleError(f"the bundle {origin}: {FILES}/{package.file_name} is not a file")
        try:
            verify(package, path, f"the bundle's {FILES}/{package.file_name}")
        except HashMismatch as error:
            raise BundleError(error.message, hint="Copy the bundle again from where it was made, or make it again.") \
                from None
    mirrors = tuple(Mirror(comparable(p.url).rstrip("/"), (tree / FILES / p.file_name).absolute().as_uri())
                    for p in packages)
    return lock_path, mirrors


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def with_bundle(config: Config, mirrors: tuple[Mirror, ...]) -> Config:
    """``config`` whose mirrors send each locked URL to its file in the bundle (an exact URL is the longest
    upstream: it wins over any mirror of the user's)."""
    if not mirrors:
        raise EnvkitError("the bundle's lock installs nothing")
    return config._replace(mirrors=(*config.mirrors, *mirrors))
