"""The catalog: the curated manifests and shared tables of a manifests directory (envs/)."""

from envkit.catalog.load import default_manifests_dir, load_catalog, load_tables, manifest_names
from envkit.catalog.model import (
    CPU, ArchSet, Build, BundledLibrary, Catalog, CondaInstall, Manifest, PipInstall, PythonTable, Tables,
)

__all__ = [
    "CPU", "ArchSet", "Build", "BundledLibrary", "Catalog", "CondaInstall", "Manifest", "PipInstall", "PythonTable",
    "Tables",
    "default_manifests_dir", "load_catalog", "load_tables", "manifest_names",
]
