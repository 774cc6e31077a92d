"""Getting the locked files and proving they are the locked ones: every file's sha256 (and a conda package's md5)
is computed by envkit before anything is installed, because rattler does not check the hashes of file:// packages.
The pip files too: envkit downloads them, so that every hop of a redirect is held to the transport rule
(``allowed_hop``), which uv and pip would not do; the installer then takes them from a local directory.

Files already on disk (a file:// URL, a file:// mirror) are hashed where they are; remote ones are downloaded into
``store/<sha256>/`` (kept as a cache: a later install hashes them again, unless the file is untouched since it was
hash-checked: ``_unchanged_since_verified``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence
from urllib.parse import unquote, urlsplit

from envkit.errors import InstallError
from envkit.lockfile.model import LockedPackage
from envkit.system.download import download

_CHUNK = 1 << 20
_WORKERS = 4


class HashMismatch(InstallError):
    """A file is not the one the lock pins: the install is refused."""


def local_path(url: str) -> Optional[Path]:
    parts = urlsplit(url)
    return Path(unquote(parts.path)) if parts.scheme == "file" else None


def fetch_all(packages: Sequence[LockedPackage], sources: Sequence[str], store: Path,
              report: Callable[[str], None], mirrors: Sequence[str] = ()) -> list[Path]:
    """The verified local file of each package (``sources[i]`` is where package ``i`` is fetched from); a redirect
    may lead only where a source may be (``allowed_hop``: ``mirrors`` are the configured mirrors' URLs). What the
    store holds unchanged since it was hash-checked is taken at once; the rest is fetched and checked four at a time
    (no threads at all for a lock installed before: a few ms of every such create)."""
    paths = [_kept(package, source, store) for package, source in zip(packages, sources)]
    missing = [i for i, path in enumerate(paths) if path is None]
    if missing:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(_WORKERS, len(missing))) as pool:
            fetched = pool.map(lambda i: fetch_verified(packages[i], sources[i], store, report, mirrors), missing)
            for i, path in zip(missing, fetched):
                paths[i] = path
    done = [path for path in paths if path is not None]
    assert len(done) == len(paths)  # (pool.map raised for any it could not fetch)
    return done


def _kept(package: LockedPackage, source: str, store: Path) -> Optional[Path]:
    """The store's copy of a remote package, if it is unchanged since it was hash-checked; else None."""
    if local_path(source) is not None:
        return None  # a file on disk is hashed where it is, each time
    target = stored_at(store, package)
    return target if target.is_file() and _unchanged_since_verified(target) else None


@dataclass(frozen=True)
class LockedFiles:
    """A lock's pip files, which envkit fetches itself (every redirect checked, as for the conda files) and
    hash-checks, then links into ``links``: the flat directory the installer takes with ``--no-index --find-links``,
    so that neither uv nor pip fetches a locked file, or follows a redirect, on its own."""

    packages: tuple[LockedPackage, ...]
    sources: tuple[str, ...]  # where each is fetched from (its mirror)
    store: Path  # downloads, by sha256 (kept: a later install hashes them again)
    links: Path
    mirrors: tuple[str, ...] = ()

    def fetch(self, report: Callable[[str], None]) -> None:
        paths = fetch_all(self.packages, self.sources, self.store, report, self.mirrors)
        link_into(paths, self.links)
        report(f"all {len(paths)} pip packages match their locked hashes")


def link_into(paths: Sequence[Path], links: Path) -> None:
    """A symbolic link in ``links`` to each of ``paths``, by its file name; each replaced atomically (two runs of
    the same lock make the same links), unless it is that link already."""
    links.mkdir(parents=True, exist_ok=True)
    for path in paths:
        try:
            if os.readlink(links / path.name) == str(path):
                continue
        except OSError:  # not there, or not a link
            pass
        temporary = links / f".{path.name}.{os.getpid()}.link"
        temporary.unlink(missing_ok=True)
        os.symlink(path, temporary)
        os.replace(temporary, links / path.name)


def stored_at(store: Path, package: LockedPackage) -> Path:
    """Where the store keeps ``package``'s file: ``store/<sha256>/<file name>``, proved to lie inside ``store``
    (envkit.state.files.inside); LockFileError (exit 2) for a sha256 or file name that would lead elsewhere (the readers
    refuse such a lock before this: this is the proof where the path is made)."""
    from envkit.lockfile.format import LockFileError
    from envkit.state.files import inside

    try:
        return inside(store, package.sha256, package.file_name)
    except ValueError as error:
        raise LockFileError(f"{package.name} {package.version}: {error}: the lock would have envkit keep a file "
                            f"outside its store {store}; nothing was fetched",
                            hint="Make the lock again from a source you trust.") from None


def fetch_verified(package: LockedPackage, source: str, store: Path, report: Callable[[str], None],
                   mirrors: Sequence[str] = ()) -> Path:
    path = local_path(source)
    if path is not None:
        if not path.is_file():
            raise InstallError(f"{package.name}: {path} does not exist",
                               hint="Check the mirror in envkit's config, or make the lock again.")
        verify(package, path, source)
        return path
    target = stored_at(store, package)
    if target.is_file():
        if _unchanged_since_verified(target):
            return target
        try:
            verify(package, target, source)
            _mark_verified(target)
            return target
        except HashMismatch:  # a damaged (or changed) copy in the cache: fetched again
            target.unlink(missing_ok=True)
    from envkit.text.redact import redact

    report(redact(f"downloading {package.file_name} from {source}"))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{package.file_name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            download(source, out, mirrors)
        verify(package, Path(temporary), source)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _mark_verified(target)
    return target


# A file in the store that was hash-checked is not hashed again (183 MiB of torch: about 0.3 s on every install) while
# its inode, size, mtime and ctime are what they were then: any write to it, or a file put in its place, changes its
# ctime, which no one can set back. As git does with its index, a mark written less than a second after the file's
# last change is not trusted (a filesystem's clock may tick coarsely: a write in the same tick would keep the ctime);
# the file is hashed again and marked anew. The mark is the store's own: the user's cache.
_MARK = ".verified"
_RACY_NS = 1_000_000_000


def _stat_key(path: Path) -> str:
    info = path.stat()
    return f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


def _unchanged_since_verified(path: Path) -> bool:
    mark = path.parent / _MARK
    try:
        if mark.read_text(encoding="ascii") != f"{path.name}\n{_stat_key(path)}\n":
            return False
        return mark.stat().st_mtime_ns - path.stat().st_ctime_ns >= _RACY_NS
    except (OSError, UnicodeDecodeError):
        return False


def _mark_verified(path: Path) -> None:
    try:
        (path.parent / _MARK).write_text(f"{path.name}\n{_stat_key(path)}\n", encoding="ascii")
    except OSError:  # (no room for a few bytes: the file is hashed again next time, nothing worse)
        pass


def verify(package: LockedPackage, path: Path, source: str) -> None:
    sha256, md5 = hashlib.sha256(), hashlib.md5()
    with path.open("rb") as data:
        for chunk in iter(lambda: data.read(_CHUNK), b""):
            sha256.update(chunk)
            md5.update(chunk)
    if sha256.hexdigest() != package.sha256 or (package.md5 is not None and md5.hexdigest() != package.md5):
        kind, got, want = (("sha256", sha256.hexdigest(), package.sha256) if sha256.hexdigest() != package.sha256
                           else ("md5", md5.hexdigest(), package.md5))
        raise HashMismatch(f"{package.name} {package.version} from {source} has {kind} {got}, but the lock pins "
                           f"{want}: the file or the lock was changed; nothing was installed",
                           hint="Make the lock again from a source you trust, or fix the mirror.")
