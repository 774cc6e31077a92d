"""A cache of loaded catalogs, so that `envkit list` and `envkit create` do not parse and validate YAML every time.

Keyed by the state of every input (kept whole inside the entry, so that two keys sharing a file name never mix): the manifests directory, each file read (name, size, modification time) and
the source of the code that builds the catalog. Any change to any of them is a miss, and a miss simply loads the
manifests as usual. The cache lives in the user's cache directory; a cache entry that cannot be read or written is
ignored. Only a catalog that loaded without error is ever cached.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import zlib
from pathlib import Path
from typing import Optional, Sequence

from envkit.catalog.load import SUFFIX, TABLE_FILES, load_catalog, manifest_names
from envkit.catalog.model import Catalog

_ENVKIT = Path(__file__).resolve().parent.parent
# The code whose output is cached: a change to any of it (a new field, a fixed parser) is a different key.
_CODE = ("catalog/load.py", "catalog/model.py", "cuda.py", "versions.py", "gpu_names.py", "yamltext.py")
_KEEP = 16  # entries: enough for every manifest and a few edits of each; older ones are deleted


def cached_catalog(directory: Path, names: Sequence[str], cache_dir: Optional[Path]) -> Catalog:
    """``load_catalog(directory, names)``, from the cache when nothing it was built from has changed."""
    if cache_dir is None:
        return load_catalog(directory, names)
    key = _key(directory, names)
    if key is None:
        return load_catalog(directory, names)
    path = cache_dir / "catalog" / f"{zlib.crc32(key.encode('utf-8')):08x}.pickle"
    try:
        stored_key, catalog = pickle.loads(path.read_bytes())
        if stored_key == key and isinstance(catalog, Catalog):
            return catalog
    except Exception:  # missing, truncated, written by another version: load afresh
        pass
    catalog = load_catalog(directory, names)
    _store(path, (key, catalog))
    return catalog


def _key(directory: Path, names: Sequence[str]) -> Optional[str]:
    try:
        wanted = list(dict.fromkeys(names)) or manifest_names(directory)
        files = [directory / table for table in TABLE_FILES] + [directory / f"{n}{SUFFIX}" for n in wanted]
        code = [_ENVKIT / part for part in _CODE]
        from packaging import __version__ as packaging_version  # its Version objects are in the pickle

        parts = [str(directory.resolve()), ",".join(wanted), packaging_version]
        parts += [f"{p}:{s.st_size}:{s.st_mtime_ns}" for p in files + code for s in (p.stat(),)]
    except Exception:  # a file missing or unreadable: let load_catalog report it
        return None
    return "\n".join(parts)


def _store(path: Path, entry: tuple[str, Catalog]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".catalog.", dir=path.parent)
        with os.fdopen(fd, "wb") as out:
            pickle.dump(entry, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
        entries = sorted(path.parent.glob("*.pickle"), key=lambda entry: entry.stat().st_mtime_ns, reverse=True)
        for stale in entries[_KEEP:]:
            stale.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only home, a full disk, a race with another run: no cache, no harm
