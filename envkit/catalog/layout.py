"""What a manifests directory holds by name: its shared tables and its manifests (one *.yaml each). Kept apart from
the loading so that `envkit list`, which reads its catalog from the cache, needs no more than this to key it."""

from __future__ import annotations

import os
from pathlib import Path

from envkit.errors import BadInputError

CUDA_TABLE = "cuda.yaml"
PYTHON_TABLE = "python.yaml"
GPU_TABLE = "gpus.yaml"
TABLE_FILES = (CUDA_TABLE, PYTHON_TABLE, GPU_TABLE)
SUFFIX = ".yaml"


def default_manifests_dir() -> Path:
    """The manifests shipped with envkit (the repository's envs/, installed as the package data envkit.envs)."""
    from importlib.util import find_spec

    spec = find_spec("envkit.envs")
    if spec is None or not spec.submodule_search_locations:
        raise BadInputError("envkit's own manifests are missing from this installation", hint="Reinstall envkit.")
    return Path(list(spec.submodule_search_locations)[0])


def manifest_names(directory: Path) -> list[str]:
    """The manifests a directory offers: every *.yaml that is not one of the shared tables."""
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        raise BadInputError(f"manifests directory {directory} does not exist") from None
    except NotADirectoryError:
        raise BadInputError(f"manifests directory {directory} is not a directory") from None
    except OSError as exc:
        raise BadInputError(f"cannot read manifests directory {directory}: {exc.strerror or exc}") from None
    return sorted(e[: -len(SUFFIX)] for e in entries if e.endswith(SUFFIX) and e not in TABLE_FILES)
