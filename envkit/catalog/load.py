"""Read a manifests directory (envs/): find its files, read their YAML, hand the data to the schema checks
(envkit.catalog.tables for the shared tables, envkit.catalog.schema for the framework manifests).

Every problem is a ManifestError naming the file (and, from the schema checks, the build and the field). Files are
read only when asked for: ``envkit list torch`` parses torch.yaml and the tables, not every manifest.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Optional, Sequence

from envkit.catalog.layout import (CUDA_TABLE, GPU_TABLE, PYTHON_TABLE, ROCM_TABLE, SUFFIX,  # noqa: F401
                                   TABLE_FILES, check_names, default_manifests_dir, manifest_names)
from envkit.catalog.machine_tables import MachineTables
from envkit.catalog.model import Catalog, Manifest, Tables
from envkit.catalog.schema import parse_manifest
from envkit.catalog.tables import parse_cuda_table, parse_python_table
from envkit.errors import ManifestError
from envkit.machines.amd import EMPTY, AmdTable
from envkit.state.files import LIMITS, NotUtf8, size_words, utf8_text
from envkit.state.yamltext import parse_yaml  # the loader of every YAML/JSON file a user gives: no key given twice


def load_catalog(directory: Path, names: Sequence[str] = ()) -> Catalog:
    """Load the tables and the named manifests (all of them when ``names`` is empty)."""
    available = check_names(directory, names)
    tables = load_tables(directory)
    wanted = list(dict.fromkeys(names)) if names else available
    manifests = {name: load_manifest(directory / f"{name}{SUFFIX}", tables) for name in wanted}
    return Catalog(directory=directory, tables=tables, manifests=manifests)


def load_tables(directory: Path) -> Tables:
    machine = load_machine_tables(directory)
    python = parse_python_table(_read_yaml(directory / PYTHON_TABLE), str(directory / PYTHON_TABLE))
    return Tables(cuda=machine.cuda, python=python, gpu_names=machine.gpu_names, amd=machine.amd)


def load_machine_tables(directory: Path) -> MachineTables:
    """The tables detection needs (cuda.yaml, gpus.yaml, and rocm.yaml where there is one), without the Python
    table."""
    from envkit.machines.gpu_names import parse_gpu_names

    return MachineTables(
        cuda=parse_cuda_table(_read_yaml(directory / CUDA_TABLE), str(directory / CUDA_TABLE)),
        gpu_names=parse_gpu_names(_read_yaml(directory / GPU_TABLE), str(directory / GPU_TABLE)),
        amd=load_rocm_table(directory),
    )


def load_rocm_table(directory: Path) -> AmdTable:
    """rocm.yaml, or the empty table where the directory has none (a link to nothing is an error, as for any file)."""
    path = directory / ROCM_TABLE
    if not os.path.lexists(path):
        return EMPTY
    from envkit.catalog.rocm_table import parse_rocm_table

    return parse_rocm_table(_read_yaml(path), str(path))


def load_manifest(path: Path, tables: Tables) -> Manifest:
    return parse_manifest(_read_yaml(path), str(path), path.name[: -len(SUFFIX)], tables)


def _read_yaml(path: Path) -> Any:
    text = read_text(path)
    try:
        return parse_yaml(text)
    except ValueError as exc:
        raise ManifestError(str(path), f"not valid YAML: {exc}") from None


def read_text(path: Path) -> str:
    """The text of a file of a manifests directory (envkit.maintain.validate reads them here too); ManifestError when
    it is missing, a link to nothing, not a regular file (reading a FIFO named x.yaml would wait forever for a
    writer, a device would never end), or not UTF-8."""
    try:
        # Opened without waiting: a FIFO opens at once (and is refused below) instead of blocking for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        if path.is_symlink():
            raise ManifestError(str(path), f"a symbolic link to {os.path.realpath(path)}, which does not exist") \
                from None
        if path.name in TABLE_FILES:
            raise ManifestError(
                str(path), f"missing: a manifests directory needs {', '.join(TABLE_FILES)} (copy them from envs/)"
            ) from None
        raise ManifestError(str(path), "missing") from None
    except OSError as exc:  # a socket cannot be opened (ENXIO): say what it is
        raise ManifestError(str(path), _not_a_file(path) or f"cannot be read: {exc}") from None
    try:
        problem = _not_a_file(path, os.fstat(fd).st_mode)
        if problem:
            raise ManifestError(str(path), problem)
        limit = LIMITS["manifest"]
        with open(fd, "rb", closefd=False) as stream:
            data = stream.read(limit + 1)
        if len(data) > limit:
            raise ManifestError(str(path), f"over {size_words(limit)}, the most envkit reads of a manifest: is it the "
                                           "right file?")
        try:
            return utf8_text(data)
        except NotUtf8 as exc:  # where, in the admin's terms: a line, not a byte offset
            raise ManifestError(str(path), f"not UTF-8 ({exc}): save the file as UTF-8", line=exc.line) from None
    except OSError as exc:
        raise ManifestError(str(path), f"cannot be read: {exc}") from None
    finally:
        os.close(fd)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _not_a_file(path: Path, mode: Optional[int] = None) -> Optional[str]:
    """What is wrong with ``path`` (or the file ``mode`` describes) when it is not a regular file: 'a FIFO (named
    pipe), not a regular file'. None when it is one, or cannot be looked at (reading it then says why)."""
    if mode is None:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return None
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "something else")
    return f"{kind}, not a regular file"
