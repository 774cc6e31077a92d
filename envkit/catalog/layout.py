"""What a manifests directory holds by name: its shared tables and its manifests (one *.yaml each). Kept apart from
the loading so that `envkit list`, which reads its catalog from the cache, needs no more than this to key it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from envkit.errors import BadInputError, UnknownNameError

CUDA_TABLE = "cuda.yaml"
PYTHON_TABLE = "python.yaml"
GPU_TABLE = "gpus.yaml"
TABLE_FILES = (CUDA_TABLE, PYTHON_TABLE, GPU_TABLE)
# A table a manifests directory may leave out (one made before envkit knew AMD GPUs): without it, no ROCm facts.
ROCM_TABLE = "rocm.yaml"
SUFFIX = ".yaml"


def default_manifests_dir() -> Path:
    """The manifests shipped with envkit (the repository's envs/, installed as the package data envkit.envs)."""
    from importlib.util import find_spec

    spec = find_spec("envkit.envs")
    if spec is None or not spec.submodule_search_locations:
        raise BadInputError("envkit's own manifests are missing from this installation", hint="Reinstall envkit.")
    return Path(list(spec.submodule_search_locations)[0])


_MANIFESTS_HINT = ("Check --manifests, $ENVKIT_MANIFESTS and the config's `manifests:` (unset them for the shipped "
                   "manifests).")


def manifest_names(directory: Path) -> list[str]:
    """The manifests a directory offers: every *.yaml that is not one of the shared tables."""
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        raise BadInputError(f"manifests directory {directory} does not exist", hint=_MANIFESTS_HINT) from None
    except NotADirectoryError:
        raise BadInputError(f"manifests directory {directory} is not a directory", hint=_MANIFESTS_HINT) from None
    except OSError as exc:
        raise BadInputError(f"cannot read manifests directory {directory}: {exc.strerror or exc}") from None
    return sorted(e[: -len(SUFFIX)] for e in entries if e.endswith(SUFFIX) and e not in (*TABLE_FILES, ROCM_TABLE))


def table_paths(directory: Path) -> list[Path]:
    """The shared tables' files of a manifests directory: the three it needs, and rocm.yaml when it has one."""
    optional = directory / ROCM_TABLE
    return [directory / table for table in TABLE_FILES] + ([optional] if os.path.lexists(optional) else [])


def check_names(directory: Path, names: Sequence[str]) -> list[str]:
    """The manifests a directory offers (manifest_names), once every one of ``names`` is among them; else an error
    naming those that are not, and the ones there are."""
    available = manifest_names(directory)
    unknown = [name for name in names if name not in available]
    if unknown:
        from envkit.text.words import closest

        near = [match for name in unknown for match in closest(name, available)]
        meant = f"Did you mean {' or '.join(repr(m) for m in dict.fromkeys(near))}? " if near else ""
        raise UnknownNameError(
            f"no manifest named {', '.join(repr(n) for n in unknown)} in {directory}",
            hint=f"{meant}Manifests: {', '.join(available) or '(none)'}.",
        )
    return available
