"""Read a manifests directory (envs/): find its files, read their YAML, hand the data to the schema checks
(envkit.catalog.tables for the shared tables, envkit.catalog.schema for the framework manifests).

Every problem is a ManifestError naming the file (and, from the schema checks, the build and the field). Files are
read only when asked for: ``envkit list torch`` parses torch.yaml and the tables, not every manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from envkit.catalog.layout import (CUDA_TABLE, GPU_TABLE, PYTHON_TABLE, SUFFIX, TABLE_FILES,  # noqa: F401
                                   default_manifests_dir, manifest_names)
from envkit.catalog.model import Catalog, Manifest, Tables
from envkit.catalog.schema import parse_manifest
from envkit.catalog.tables import parse_cuda_table, parse_python_table
from envkit.errors import ManifestError, UnknownNameError


def load_catalog(directory: Path, names: Sequence[str] = ()) -> Catalog:
    """Load the tables and the named manifests (all of them when ``names`` is empty)."""
    available = manifest_names(directory)
    unknown = [name for name in names if name not in available]
    if unknown:
        raise UnknownNameError(
            f"no manifest named {', '.join(repr(n) for n in unknown)} in {directory}",
            hint=f"Manifests: {', '.join(available) or '(none)'}.",
        )
    tables = load_tables(directory)
    wanted = list(dict.fromkeys(names)) if names else available
    manifests = {name: load_manifest(directory / f"{name}{SUFFIX}", tables) for name in wanted}
    return Catalog(directory=directory, tables=tables, manifests=manifests)


def load_tables(directory: Path) -> Tables:
    from envkit.gpu_names import parse_gpu_names

    return Tables(
        cuda=parse_cuda_table(_read_yaml(directory / CUDA_TABLE), str(directory / CUDA_TABLE)),
        python=parse_python_table(_read_yaml(directory / PYTHON_TABLE), str(directory / PYTHON_TABLE)),
        gpu_names=parse_gpu_names(_read_yaml(directory / GPU_TABLE), str(directory / GPU_TABLE)),
    )


def load_manifest(path: Path, tables: Tables) -> Manifest:
    return parse_manifest(_read_yaml(path), str(path), path.name[: -len(SUFFIX)], tables)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if path.name in TABLE_FILES:
            raise ManifestError(
                str(path), f"missing: a manifests directory needs {', '.join(TABLE_FILES)} (copy them from envs/)"
            ) from None
        raise ManifestError(str(path), "missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(str(path), f"cannot be read: {exc}") from None
    try:
        return parse_yaml_unique(text)
    except ValueError as exc:
        raise ManifestError(str(path), f"not valid YAML: {exc}") from None


def parse_yaml_unique(text: str) -> Any:
    """The data in ``text``, as envkit.yamltext reads it, except that a key given twice in one mapping is an error
    (YAML loaders keep the last value silently, so an admin's second ``python:`` would win unseen).
    ValueError("duplicate key 'python' at line L (first at line K)") for it."""
    import yaml

    try:
        return yaml.load(text, Loader=_unique_key_loader())
    except _DuplicateKey as exc:
        raise ValueError(str(exc)) from None
    except yaml.YAMLError as exc:  # worded as envkit.yamltext words it, with the line
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "syntax error"
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{problem}{at}") from None


_LOADER: Optional[type] = None


class _DuplicateKey(Exception):
    """A key given twice in one mapping: "duplicate key 'python' at line 11 (first at line 9)"."""


def _unique_key_loader() -> type:
    """PyYAML's safe loader (the C one where there is one), refusing duplicate keys. Merge keys (``<<: *base``)
    followed by an override are not duplicates: only keys written out in the same mapping are compared."""
    global _LOADER
    if _LOADER is None:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        def construct_mapping(self: Any, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, Any] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.setdefault(key, key_node)
                    except TypeError:  # an unhashable key: the base constructor reports it
                        continue
                    if first is not key_node:
                        raise _DuplicateKey(f"duplicate key {key!r} at line {key_node.start_mark.line + 1} "
                                            f"(first at line {first.start_mark.line + 1})")
            return base.construct_mapping(self, node, deep=deep)

        _LOADER = type("UniqueKeySafeLoader", (base,), {"construct_mapping": construct_mapping})
    return _LOADER


