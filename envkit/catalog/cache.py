"""Loaded catalogs from the user's cache (envkit.state.filecache), so that `envkit list` and `envkit create` do not
parse and validate the manifests every time, and answers computed from a catalog (`envkit list`'s) kept until anything
they were computed from changes. Only what was computed without error is ever cached."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence, cast

from envkit.catalog.layout import CUDA_TABLE, GPU_TABLE, ROCM_TABLE, SUFFIX, manifest_names, table_paths
from envkit.errors import EnvkitError
from envkit.state.filecache import EVERY_MODULE, cached, cached_text

if TYPE_CHECKING:
    from envkit.catalog.machine_tables import MachineTables
    from envkit.catalog.model import Catalog
    from envkit.machines.amd import AmdTable
    from envkit.machines.cuda import CudaTable
    from envkit.machines.gpu_names import GpuNameTable

# The code whose output is cached: a change to any of it (a new field, a fixed parser) is a different key.
_CODE = ("catalog/layout.py", "catalog/load.py", "catalog/machine_tables.py", "catalog/model.py", "catalog/node.py",
         "catalog/tables.py", "catalog/schema.py", "catalog/install.py", "catalog/entries.py", "catalog/bundled.py",
         "catalog/platforms.py", "machines/cuda.py", "machines/platforms.py", "versions.py", "machines/gpu_names.py",
         "state/yamltext.py", "catalog/rocm_table.py", "catalog/rocm_build.py", "machines/amd.py")


def cached_catalog(directory: Path, names: Sequence[str], cache_dir: Optional[Path]) -> Catalog:
    """``load_catalog(directory, names)``, from the cache when nothing it was built from has changed."""
    try:
        files, extra = _catalog_inputs(directory, names)
    except EnvkitError:  # no such directory: loading says so
        return _load(directory, names)
    return cached(cache_dir, "catalog", files, _CODE, lambda: _load(directory, names), extra=extra)


def cached_answer(directory: Path, names: Sequence[str], cache_dir: Optional[Path], kind: str,
                  compute: Callable[[], str], extra: Sequence[str]) -> str:
    """``compute()``, an answer computed from ``load_catalog(directory, names)`` (`envkit list`'s output), or what it
    returned before when nothing it is computed from has changed: the catalog's files, any module of envkit, the
    Python that runs it, and ``extra`` (the machines judged and the options, in full)."""
    try:
        files, catalog = _catalog_inputs(directory, names)
    except EnvkitError:
        return compute()
    return cached_text(cache_dir, kind, files, EVERY_MODULE, compute, extra=(*catalog, sys.version, *extra))


def _catalog_inputs(directory: Path, names: Sequence[str]) -> tuple[list[Path], tuple[str, ...]]:
    """The files a catalog is loaded from, and what else keys it (the manifests, packaging's version: its Version
    objects are in the pickle; the cache keys each file by its path as given, the directory's spelling included).
    EnvkitError when the directory cannot be listed."""
    from packaging import __version__ as packaging_version

    wanted = list(dict.fromkeys(names)) or manifest_names(directory)
    files = table_paths(directory) + [directory / f"{name}{SUFFIX}" for name in wanted]
    return files, (",".join(wanted), packaging_version)


def cached_machine_tables(directory: Path, cache_dir: Optional[Path]) -> MachineTables:
    """``load_machine_tables(directory)`` (what detection needs), from the cache when those tables are unchanged."""
    files = [directory / CUDA_TABLE, directory / GPU_TABLE] + [path for path in table_paths(directory)
                                                                if path.name == ROCM_TABLE]
    return cached(cache_dir, "machine-tables", files, _CODE, lambda: _load_machine_tables(directory))


def machine_tables_on_use(directory: Path, cache_dir: Optional[Path]) -> MachineTables:
    """The machine tables (cached_machine_tables), read when detection first looks something up in one. On a machine
    without an NVIDIA driver it never does (there is no driver version to look up, and no GPU name), nor when the
    machines come from profile files: a warm `envkit list` there reads neither table."""
    from functools import lru_cache

    from envkit.catalog.machine_tables import MachineTables

    tables = lru_cache(maxsize=None)(lambda: cached_machine_tables(directory, cache_dir))
    return MachineTables(cuda=cast("CudaTable", _OnUse(lambda: tables().cuda)),
                         gpu_names=cast("GpuNameTable", _OnUse(lambda: tables().gpu_names)),
                         amd=cast("AmdTable", _OnUse(lambda: tables().amd)))


class _OnUse:
    """Stands for what ``load()`` returns, and calls it when first asked for an attribute: a table's lookups
    (cuda_for_driver, lookup), which is all that detection asks of the tables. Nothing else (len, ==) is passed on."""

    def __init__(self, load: Callable[[], object]) -> None:
        self._load = load

    def __getattr__(self, name: str) -> object:
        return getattr(self._load(), name)


def _load_machine_tables(directory: Path) -> MachineTables:
    from envkit.catalog.load import load_machine_tables

    return load_machine_tables(directory)


def _load(directory: Path, names: Sequence[str]) -> Catalog:
    from envkit.catalog.load import load_catalog  # YAML and the schema checks: only on a miss

    return load_catalog(directory, names)
