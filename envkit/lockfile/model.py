"""The lock format as typed values: conda-lock's unified file (``version: 1``), the fields envkit reads and writes.

A lock pins every package of one environment for one or more platforms: conda packages (``manager: conda``) by their
archive URL with md5 and sha256, pip packages (``manager: pip``) by their wheel URL with sha256. envkit's own facts
(which manifest and build, for which target, from which index, which Python) travel in ``custom_metadata``, whose
values conda-lock requires to be strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

VERSION = 1
PLATFORM = "linux-64"  # the platform of a lock that does not say (conda-lock's default); envkit.machines.platforms
MANAGERS = ("conda", "pip")

# envkit's keys in custom_metadata.
MANIFEST = "envkit.manifest"
BUILD = "envkit.build"
TARGET = "envkit.target"  # in words: "this machine (name)", "profile NAME", "partition P"
CUDA_DRIVER = "envkit.cuda_driver"  # the __cuda the solve saw ("" for none)
CUDA_ARCH = "envkit.cuda_arch"  # the __cuda_arch the solve saw: the lowest compute capability of the target's GPUs
INDEX_URL = "envkit.index_url"  # the upstream index of the pip part
FIND_LINKS = "envkit.find_links"  # and its page of links, for the builds that have one (PyTorch 1.x)
PYTHON = "envkit.python"  # X.Y
ADDITIONS = "envkit.additions"  # the packages the user added (envkit add, create --with), one per line
ENVKIT_VERSION = "envkit.version"


@dataclass(frozen=True)
class LockedPackage:
    name: str
    version: str
    manager: str  # "conda" or "pip"
    platform: str
    url: str  # upstream: installing maps it through the user's mirrors
    sha256: str  # lower-case hex
    md5: Optional[str] = None  # conda packages always have one
    build: Optional[str] = None  # conda build string
    dependencies: tuple[tuple[str, str], ...] = ()  # (name, version spec), as conda-lock keeps them
    category: str = "main"
    optional: bool = False

    @property
    def file_name(self) -> str:
        return file_name_of(self.url)


@dataclass(frozen=True)
class LockFile:
    packages: tuple[LockedPackage, ...]
    platforms: tuple[str, ...] = (PLATFORM,)
    channels: tuple[str, ...] = ()  # upstream channel URLs, in priority order
    content_hash: Mapping[str, str] = field(default_factory=dict)  # platform -> hash of what was asked for
    sources: tuple[str, ...] = ()
    custom: Mapping[str, str] = field(default_factory=dict)  # custom_metadata
    created_at: Optional[str] = None  # time_metadata.created_at

    def for_platform(self, platform: str = PLATFORM) -> tuple[LockedPackage, ...]:
        """What an environment on ``platform`` installs: its main packages (conda-lock's optional categories are not
        installed by default, and envkit has no option for them)."""
        return tuple(p for p in self.packages if p.platform == platform and not p.optional)

    def conda(self, platform: str = PLATFORM) -> tuple[LockedPackage, ...]:
        return tuple(p for p in self.for_platform(platform) if p.manager == "conda")

    def pip(self, platform: str = PLATFORM) -> tuple[LockedPackage, ...]:
        return tuple(p for p in self.for_platform(platform) if p.manager == "pip")

    def fact(self, key: str) -> Optional[str]:
        value = self.custom.get(key)
        return value if value else None


def file_name_of(url: str) -> str:
    """The last part of ``url``'s path, percent-decoded: the name a locked file is kept and installed under."""
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def python_of_lock(lock: LockFile) -> Optional[str]:
    """X.Y of the environment: envkit's fact, else the locked conda ``python`` package's version."""
    said = lock.fact(PYTHON)
    if said:
        return said
    for package in lock.conda():
        if package.name == "python":
            return ".".join(package.version.split(".")[:2])
    return None
