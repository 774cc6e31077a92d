"""The catalog: the curated manifests and shared tables of a manifests directory (envs/).

The names below are loaded on first use (PEP 562), so that importing one small part of the catalog (the cache
that `envkit list` reads) does not import the YAML loading and the schema checks as well.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envkit.catalog.layout import default_manifests_dir, manifest_names
    from envkit.catalog.load import load_catalog, load_tables
    from envkit.catalog.model import (
        CPU, ArchSet, Build, BundledLibrary, Catalog, CondaInstall, Manifest, PipInstall, PythonTable, Tables,
    )

_WHERE = {
    "default_manifests_dir": "layout", "manifest_names": "layout", "load_catalog": "load", "load_tables": "load",
    **dict.fromkeys(("CPU", "ArchSet", "Build", "BundledLibrary", "Catalog", "CondaInstall", "Manifest", "PipInstall",
                     "PythonTable", "Tables"), "model"),
}

__all__ = [
    "CPU", "ArchSet", "Build", "BundledLibrary", "Catalog", "CondaInstall", "Manifest", "PipInstall", "PythonTable",
    "Tables",
    "default_manifests_dir", "load_catalog", "load_tables", "manifest_names",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"envkit.catalog.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
