"""Loaded catalogs from the user's cache (envkit.filecache), so that `envkit list` and `envkit create` do not parse
and validate the manifests every time. Only a catalog that loaded without error is ever cached."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from envkit.catalog.load import SUFFIX, TABLE_FILES, load_catalog, manifest_names
from envkit.catalog.model import Catalog
from envkit.errors import EnvkitError
from envkit.filecache import cached

# The code whose output is cached: a change to any of it (a new field, a fixed parser) is a different key.
_CODE = ("catalog/load.py", "catalog/model.py", "catalog/node.py", "catalog/tables.py", "catalog/schema.py",
         "catalog/entries.py", "cuda.py", "versions.py", "gpu_names.py", "yamltext.py")


def cached_catalog(directory: Path, names: Sequence[str], cache_dir: Optional[Path]) -> Catalog:
    """``load_catalog(directory, names)``, from the cache when nothing it was built from has changed."""
    try:
        wanted = list(dict.fromkeys(names)) or manifest_names(directory)
    except EnvkitError:  # no such directory: loading says so
        return load_catalog(directory, names)
    from packaging import __version__ as packaging_version  # its Version objects are in the pickle

    files = [directory / table for table in TABLE_FILES] + [directory / f"{name}{SUFFIX}" for name in wanted]
    return cached(cache_dir, "catalog", files, _CODE, lambda: load_catalog(directory, names),
                  extra=(str(directory.resolve()), ",".join(wanted), packaging_version))
