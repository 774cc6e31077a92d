"""Getting the locked files and proving they are the locked ones: every file's sha256 (and a conda package's md5)
is computed by envkit before anything is installed, because rattler does not check the hashes of file:// packages.

Files already on disk (a file:// URL, a file:// mirror) are hashed where they are; remote ones are downloaded into
``store/<sha256>/`` (kept as a cache: a later install hashes them again before using them).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional, Sequence
from urllib.parse import unquote, urlsplit

from envkit.errors import InstallError
from envkit.lockfile.model import LockedPackage

_CHUNK = 1 << 20
_TIMEOUT_S = 60.0  # per read, not per download: a 3 GB package on a slow line is fine
_RETRIES = 3
_WORKERS = 4


class HashMismatch(InstallError):
    """A file is not the one the lock pins: the install is refused."""


def local_path(url: str) -> Optional[Path]:
    parts = urlsplit(url)
    return Path(unquote(parts.path)) if parts.scheme == "file" else None


def fetch_all(packages: Sequence[LockedPackage], sources: Sequence[str], store: Path,
              report: Callable[[str], None]) -> list[Path]:
    """The verified local file of each package (``sources[i]`` is where package ``i`` is fetched from)."""
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        return list(pool.map(lambda pair: fetch_verified(pair[0], pair[1], store, report), zip(packages, sources)))


def fetch_verified(package: LockedPackage, source: str, store: Path, report: Callable[[str], None]) -> Path:
    path = local_path(source)
    if path is not None:
        if not path.is_file():
            raise InstallError(f"{package.name}: {path} does not exist",
                               hint="Check the mirror in envkit's config, or make the lock again.")
        verify(package, path, source)
        return path
    target = store / package.sha256 / package.file_name
    if target.is_file():
        verify(package, target, source)
        return target
    report(f"downloading {package.file_name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{package.file_name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            _download(source, out)
        verify(package, Path(temporary), source)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


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


def _download(url: str, out) -> None:
    from urllib.error import URLError
    from urllib.request import Request, urlopen

    for attempt in range(1, _RETRIES + 1):
        try:
            out.seek(0)
            out.truncate()
            with urlopen(Request(url, headers={"User-Agent": "envkit"}), timeout=_TIMEOUT_S) as response:
                shutil.copyfileobj(response, out, _CHUNK)
            return
        except (URLError, OSError) as error:
            if attempt == _RETRIES:
                raise InstallError(f"downloading {url} failed: {getattr(error, 'reason', error)}",
                                   hint="Check the network and the mirror settings, then run the command again.") from None
            time.sleep(0.5 * attempt)
