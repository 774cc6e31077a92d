"""The storage part of a create's plan: where the package cache is and why, whether the environment is hard-linked
from it or copied (found by making a link), the room it will take, the room there is, and the stop when it does not
fit, before anything is downloaded."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from envkit.errors import EnvkitError, InstallError
from envkit.state.config import Config
from envkit.state.userdirs import UserDirs
from envkit.storage.cache import CachePlace, cache_place, check_safe, named_cache
from envkit.storage.links import LinkProbe, probe_links
from envkit.storage.room import Free, free_space, needs, recorded_size, shortfalls, size_key
from envkit.storage.usage import Usage
from envkit.text.words import size_text


class NoRoom(EnvkitError):
    """The environment, by its estimate, does not fit where it would go (exit 1, before anything is made)."""


@dataclass(frozen=True)
class StoragePlan:
    cache: CachePlace
    links: LinkProbe  # from the cache into the directory the environment goes in
    estimate: Optional[Usage]  # None: no measurement of this build here
    estimate_key: Optional[str]  # None: nothing to keep a measurement under
    target: Optional[Free]
    cache_free: Optional[Free]  # None when it is the target's filesystem, or cannot be asked
    short: tuple[str, ...] = ()

    @property
    def link_mode(self) -> Optional[str]:
        """UV_LINK_MODE: "copy" only where the probe's link really failed; else uv's default (hard links)."""
        return "copy" if self.links.works is False else None


def envs_root(config: Config, dirs: UserDirs) -> Path:
    return config.envs_dir or dirs.envs


def package_cache(config: Config, dirs: UserDirs, environ: Mapping[str, str]) -> CachePlace:
    """Where the package caches are for this user's environments (envkit.storage.cache); ConfigError for a bad
    $ENVKIT_CACHE_DIR or cache_dir, UnsafeCache (exit 2) for one that someone else could change."""
    place = cache_place(named_cache(environ, config.cache_dir, config.path), dirs.cache, envs_root(config, dirs))
    check_safe(place.root)
    return place


def all_caches(config: Config, dirs: UserDirs, environ: Mapping[str, str]) -> list[CachePlace]:
    """The package caches there may be, found without probing (envkit.storage.cache.known_caches)."""
    from envkit.storage.cache import known_caches

    return known_caches(named_cache(environ, config.cache_dir, config.path), dirs.cache, envs_root(config, dirs))


def storage_plan(prefix: Path, key: Optional[str], config: Config, dirs: UserDirs,
                 environ: Mapping[str, str]) -> StoragePlan:
    """Where the cache is, whether links from it into the prefix's directory work (a real link, removed), the
    estimate for ``key`` and the free space of the filesystems involved."""
    cache = package_cache(config, dirs, environ)
    links = probe_links(cache.root, prefix.parent)
    if links.works is False and cache.source == "envs_dir":
        # The cache beside the environments is there to be linked from; a --prefix on yet another filesystem cannot
        # link from it either, so it would only fill the environments' filesystem: the default cache serves it.
        default = CachePlace(dirs.cache, f"envkit's cache directory ({prefix.parent} is on another filesystem than "
                                         f"{cache.root}, so the cache beside the environments cannot serve it)",
                             "default")
        check_safe(default.root)
        cache, links = default, probe_links(default.root, prefix.parent)
    estimate = recorded_size(dirs.data, key) if key is not None else None
    target = free_space(prefix.parent)
    cache_free = free_space(cache.root)
    if cache_free is not None and target is not None and cache_free.device == target.device:
        cache_free = None
    short: tuple[str, ...] = ()
    if estimate is not None and target is not None:
        shared = cache_free is None
        wanted = needs(estimate, target, target if shared else cache_free, links.works is not False)
        short = tuple(shortfalls(wanted))
    return StoragePlan(cache, links, estimate, key, target, cache_free, short)


def plan_key(plan: Any) -> Optional[str]:
    """What the plan's size is kept under: its build, Python and backend; None for a lock that names no build (the
    stand-in "locked": two such locks have nothing in common to estimate from)."""
    build = getattr(plan.build, "id", None)
    return None if not build or build == "locked" else size_key(build, str(plan.python), plan.backend)


def storage_lines(storage: StoragePlan) -> list[str]:
    """The plan's lines about the disk."""
    cache, links = storage.cache, storage.links
    lines = [f"Cache:       {cache.root} ({cache.why})"]
    if links.works is True:
        lines.append(f"  links:     hard links from the cache (a test link from {links.source} into {links.target} "
                     "worked): an environment costs only what it does not share")
    elif links.works is False:
        cost = (f": {size_text(storage.estimate.bytes)}" if storage.estimate is not None else "")
        lines.append(f"  links:     copies: a hard link from {links.source} into {links.target} failed "
                     f"({links.reason}): each environment is a full copy{cost}")
    else:
        lines.append(f"  links:     not tested ({links.reason}): the installer links, or copies where it cannot")
    if storage.estimate is not None:
        size = f"{size_text(storage.estimate.bytes)} in {storage.estimate.files:,} files"
        lines.append(f"Disk:        about {size} (measured when this build was last made here)")
    else:
        lines.append("Disk:        no estimate (this build, Python and backend were never made here): not checked")
    for free, what in ((storage.target, "environment"), (storage.cache_free, "cache")):
        if free is not None:
            lines.append(f"  free:      {size_text(free.bytes)} and {free.files:,} files on {free.where} ({what})")
    lines += [f"  NOT ROOM:  {line}" for line in storage.short]
    return lines


def storage_json(storage: StoragePlan) -> dict[str, Any]:
    def free(value: Optional[Free]) -> Optional[dict[str, Any]]:
        return None if value is None else {"path": str(value.where), "bytes": value.bytes, "files": value.files}

    return {
        "cache": {"path": str(storage.cache.root), "why": storage.cache.why, "source": storage.cache.source},
        "links": {"hardlinks": storage.links.works, "from": str(storage.links.source),
                  "into": str(storage.links.target), "reason": storage.links.reason or None,
                  "link_mode": storage.link_mode or "hardlink"},
        "estimate": None if storage.estimate is None else {"bytes": storage.estimate.bytes,
                                                           "files": storage.estimate.files},
        "free": {"environment": free(storage.target), "cache": free(storage.cache_free)},
        "fits": not storage.short,
        "short": list(storage.short),
    }


def check_room(storage: Optional[StoragePlan], config_file: Optional[Path]) -> None:
    """NoRoom (exit 1) when the estimate does not fit: the numbers, and where else it could go."""
    if storage is None or not storage.short:
        return
    where = f"envkit's config file {config_file}" if config_file else "envkit's config file"
    raise NoRoom(f"not enough room: {'; '.join(storage.short)}",
                 hint="Nothing was downloaded. Put it elsewhere: --prefix PATH on a filesystem with room, or "
                      f"`envs_dir: DIR` (environments) and `cache_dir: DIR` (packages) in {where}, "
                      f"or $ENVKIT_CACHE_DIR.")


def measure(prefix: Path, key: Optional[str], dirs: UserDirs) -> None:
    """Keep the new environment's size for the next plan of the same build (counted alone: what it would cost with
    nothing shared), unless a recent measurement of that build is kept (envkit.storage.room.measurement_due)."""
    from envkit.storage.room import measurement_due, record_size
    from envkit.storage.usage import disk_usage

    if key is not None and os.path.isdir(prefix) and measurement_due(dirs.data, key):
        record_size(dirs.data, key, disk_usage(prefix))


_FULL = ("No space left on device", "Disk quota exceeded", "os error 28", "os error 122")


@contextlib.contextmanager
def room_said(storage: Optional[StoragePlan], prefix: Path) -> Iterator[None]:
    """An installer that failed because a disk filled up (another user wrote, or there was no estimate to check) is
    said as that: which filesystem, what is free there now, and where else the environment can go."""
    try:
        yield
    except InstallError as error:
        if not any(word in line for line in error.tail for word in _FULL):
            raise
        places = [free_space(prefix.parent)] + ([free_space(storage.cache.root)] if storage is not None else [])
        now = "; ".join(f"{size_text(f.bytes)} and {f.files:,} files free on {f.where}" for f in places if f)
        raise InstallError(f"{error.message}: a disk ran out of room (now {now})",
                           hint="What this run made was removed. Free some room, or put it elsewhere: --prefix PATH, "
                                "`envs_dir:` or `cache_dir:` in envkit's config file, or $ENVKIT_CACHE_DIR.",
                           tail=error.tail) from None
