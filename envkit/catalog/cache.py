"""Loaded catalogs from the user's cache (envkit.filecache), so that `envkit list` and `envkit create` do not parse
and validate the manifests every time. Only a catalog that loaded without error is ever cached."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from envkit.catalog.layout import SUFFIX, TABLE_FILES, manifest_names
from envkit.errors import EnvkitError
from envkit.filecache import cached
from envkit.files import real_path

if TYPE_CHECKING:
    from envkit.catalog.model import Catalog, Tables

# The code whose output is cached: a change to any of it (a new field, a fixed parser) is a different key.
_CODE = ("catalog/layout.py", "catalog/load.py", "catalog/model.py", "catalog/node.py", "catalog/tables.py",
         "catalog/schema.py", "catalog/entries.py", "cuda.py", "versions.py", "gpu_names.py", "yamltext.py")


def cached_catalog(directory: Path, names: Sequence[str], cache_dir: Optional[Path]) -> Catalog:
    """``load_catalog(directory, names)``, from the cache when nothing it was built from has changed."""
    try:
        wanted = list(dict.fromkeys(names)) or manifest_names(directory)
    except EnvkitError:  # no such directory: loading says so
        return _load(directory, names)
    from packaging import __version__ as packaging_version  # its Version objects are in the pickle

    files = [directory / table for table in TABLE_FILES] + [directory / f"{name}{SUFFIX}" for name in wanted]
    return cached(cache_dir, "catalog", files, _CODE, lambda: _load(directory, names),
                  extra=(str(real_path(directory)), ",".join(wanted), packaging_version))


def cached_tables(directory: Path, cache_dir: Optional[Path]) -> Tables:
    """``load_tables(directory)`` (what `envkit detect` needs), from the cache when the tables are unchanged."""
    from packaging import __version__ as packaging_version

    return cached(cache_dir, "tables", [directory / table for table in TABLE_FILES], _CODE,
                  lambda: _load_tables(directory), extra=(str(real_path(directory)), packaging_version))


def _load_tables(directory: Path) -> Tables:
    from envkit.catalog.load import load_tables

    return load_tables(directory)


def _load(directory: Path, names: Sequence[str]) -> Catalog:
    from envkit.catalog.load import load_catalog  # YAML and the schema checks: only on a miss

    return load_catalog(directory, names)
