"""Where the package caches go (uv's, pip's, the embedded conda engine's), why there, the lock that keeps a clean
away from a running create, and the clean itself.

The place, first found wins: ``$ENVKIT_CACHE_DIR``; ``cache_dir:`` in the config; envkit's cache directory under
``$XDG_CACHE_HOME`` when hard links work from it into the environments directory; else ``<envs_dir>/.envkit-cache``
beside the environments, so that they are hard-linked from it instead of each being a full copy (a small ``$HOME``
with environments on scratch). envkit's own small caches (catalogs, listings) stay under ``$XDG_CACHE_HOME``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import time
from pathlib import Path
from typing import Iterator, Mapping, NamedTuple, Optional

from envkit.errors import ConfigError, EnvkitError
from envkit.storage.links import nearest_existing, probe_links

CACHE_VARIABLE = "ENVKIT_CACHE_DIR"
BESIDE_ENVS = ".envkit-cache"  # the cache's name inside an environments directory it follows
PARTS = ("uv", "pip", "conda-pkgs", "uv-python")  # the only directories envkit writes, reads and cleans in a cache
_LOCK = ".envkit-cache.lock"


class CachePlace(NamedTuple):
    root: Path
    why: str  # why it is there, in words that follow "because"/a colon
    source: str  # "variable" | "config" | "default" | "envs_dir"

    @property
    def uv(self) -> Path:
        return self.root / "uv"

    @property
    def pip(self) -> Path:
        return self.root / "pip"

    @property
    def conda_packages(self) -> Path:
        return self.root / "conda-pkgs"

    @property
    def uv_python(self) -> Path:
        return self.root / "uv-python"


def named_cache(environ: Mapping[str, str], configured: Optional[Path], config_file: Optional[Path]
                ) -> Optional[CachePlace]:
    """The cache the user named ($ENVKIT_CACHE_DIR, else the config's ``cache_dir``), checked; None when neither."""
    value = environ.get(CACHE_VARIABLE)
    if value is not None:
        if not value.strip():
            raise ConfigError(f"${CACHE_VARIABLE} is empty",
                              hint="Unset it (the cache then follows the environments), or give a directory.")
        path = Path(os.path.expanduser(value))
        if not path.is_absolute():
            raise ConfigError(f"${CACHE_VARIABLE} {value!r} must be an absolute path",
                              hint="A relative one would put the cache wherever envkit is started.")
        check_cache_dir(path, f"${CACHE_VARIABLE} {value}")
        return CachePlace(path, f"${CACHE_VARIABLE}", "variable")
    if configured is not None:
        check_cache_dir(configured, f"cache_dir {configured} in {config_file}")
        return CachePlace(configured, f"cache_dir in {config_file}", "config")
    return None


def check_cache_dir(path: Path, what: str) -> None:
    """ConfigError (exit 2) when ``path`` cannot hold the caches: not a directory, not writable, or inside an
    environment (removing the environment would delete the cache every other one is linked from)."""
    from envkit.state.ownership import owner

    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} is not a directory", hint="Give a directory (it is made if it does not exist).")
    for parent in (Path(os.path.normpath(path)), *Path(os.path.normpath(path)).parents):
        holder = owner(parent)
        if holder is not None:
            raise ConfigError(f"{what} is inside the environment {holder} ({parent})",
                              hint="Give a directory outside every environment: removing it would delete the cache.")
    existing = nearest_existing(path)
    if not os.access(existing, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids) or \
            _read_only(existing):
        verb = "cannot be written" if existing == path else f"cannot be made ({existing} cannot be written)"
        raise ConfigError(f"{what} {verb}", hint="Give a directory you can write.")


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def cache_place(named: Optional[CachePlace], default: Path, envs_root: Path) -> CachePlace:
    """Where the package caches go for environments made in ``envs_root``: the named cache, else ``default`` (envkit's
    under $XDG_CACHE_HOME) when a hard link from it into ``envs_root`` works (or cannot be tested), else beside the
    environments. Probes with a real link (links.probe_links), which it removes."""
    if named is not None:
        return named
    probe = probe_links(default, envs_root)
    if probe.works is False:
        return CachePlace(envs_root / BESIDE_ENVS,
                          f"beside the environments: hard links from {default} into {envs_root} fail "
                          f"({probe.reason}), so a cache there would make every environment a full copy", "envs_dir")
    return CachePlace(default, "envkit's cache directory" + (
        f" (hard links from it into {envs_root} work)" if probe.works else ""), "default")


class CacheBusy(EnvkitError):
    """A create is installing from the cache (exit 1)."""


def known_caches(named: Optional[CachePlace], default: Path, envs_root: Path) -> list[CachePlace]:
    """The package caches this user's environments may be linked from, without probing (a listing writes nothing):
    the named one, else envkit's default and the one beside the environments, those that exist (the default always
    listed, so that `envkit cache` says where it is)."""
    if named is not None:
        return [named]
    beside = envs_root / BESIDE_ENVS
    out = [CachePlace(default, "envkit's cache directory", "default")]
    if beside.is_dir():
        out.append(CachePlace(beside, "beside the environments (hard links from the default one into them fail)",
                              "envs_dir"))
    return out


def check_safe(root: Path) -> None:
    """UnsafeCache (exit 2) when someone else could change the cache at ``root`` or what is in it
    (envkit.storage.trust): before a create, a lock or a clean uses it. Reads only."""
    from envkit.storage.trust import check_cache

    check_cache(root, PARTS, _LOCK)


@contextlib.contextmanager
def using_cache(root: Path, exclusive: bool = False) -> Iterator[None]:
    """Hold the cache's lock: shared while a create installs from it (several may at once), exclusive while `envkit
    cache clean` empties it (CacheBusy when a create holds it: a clean never waits, and never pulls packages from
    under an install). flock: the kernel drops a dead process's lock. A filesystem without flock gets no lock.
    First the cache is proved this user's alone and its parts made so (envkit.storage.trust): UnsafeCache (exit 2)
    before anything is written there otherwise, and the lock file is never opened through a link."""
    from envkit.storage.trust import claim, open_lock

    check_safe(root)
    claim(root, () if exclusive else PARTS)  # (a clean makes no part only to empty it)
    check_safe(root)  # what another user made between the check and the making is refused, not used
    fd = open_lock(root / _LOCK)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX | fcntl.LOCK_NB) if exclusive else fcntl.LOCK_SH)
        except BlockingIOError:
            raise CacheBusy(f"an envkit create is installing from the cache {root}",
                            hint="Run `envkit cache clean` again once it has finished.") from None
        except OSError as error:
            if error.errno not in (errno.ENOLCK, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
        yield
    finally:
        os.close(fd)


class Cleaned(NamedTuple):
    removed: int  # entries removed
    kept: int  # entries kept (newer than the limit)
    freed: int = 0  # bytes given back: what was removed less what environments are still linked to


def clean(root: Path, older_than_days: Optional[float] = None, now: Optional[float] = None) -> Cleaned:
    """Empty envkit's package caches under ``root`` (only its own directories: PARTS), holding the exclusive lock.
    ``older_than_days``: remove only the entries (each cache's second level: one unpacked package, one index's
    pages) in which nothing was written for that long. Environments linked from the cache keep their files (and
    what they keep is not counted as freed)."""
    from envkit.storage.usage import freed_by_removing

    now = time.time() if now is None else now
    doomed: list[Path] = []
    kept = 0
    with using_cache(root, exclusive=True):
        for part in PARTS:
            top = root / part  # (a real directory of this user's alone, if there: using_cache proved it)
            if not _entries(top):  # not there, or empty (made by a create's claim): nothing to clean
                with contextlib.suppress(OSError):  # (an empty one goes too, as a full clean leaves none)
                    os.rmdir(top)
                continue
            if older_than_days is None:
                doomed.append(top)
                continue
            limit = now - older_than_days * 86400
            for bucket in _entries(top):
                for entry in (_entries(bucket) if bucket.is_dir() and not bucket.is_symlink() else [bucket]):
                    if _newest(entry) < limit:
                        doomed.append(entry)
                    else:
                        kept += 1
        freed = freed_by_removing(doomed)  # (counted first: what is removed cannot be asked after)
        for path in doomed:
            _remove(path)
    return Cleaned(len(doomed), kept, freed)


def _entries(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


def _newest(path: Path) -> float:
    """The newest modification time in ``path``'s tree (links not followed)."""
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for top, dirs, files in os.walk(path):
            for name in dirs + files:
                try:
                    newest = max(newest, os.lstat(os.path.join(top, name)).st_mtime)
                except OSError:
                    continue
    return newest


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
