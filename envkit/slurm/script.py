"""The sbatch script of ``envkit job``, built by one pure function of its parameters.

Every value that came from the user reaches the script either as an ``#SBATCH --key=value`` directive whose value
was validated first (:func:`directive_value`), or shell-quoted with ``shlex.quote``; the job name is sanitized.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Optional, Sequence

from envkit.errors import BadInputError

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.+-]")
# Directive values sbatch reads itself (no shell): no whitespace, quotes, '#', '$' or a leading '-'.
_DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_.:,+=/@%][A-Za-z0-9_.:,+=/@%-]*")


@dataclass(frozen=True)
class JobSpec:
    partition: str
    command: tuple[str, ...]  # the user's command, one argv
    activate: tuple[str, ...]  # the argv that runs a command inside the environment (`envkit run ENV --`)
    gpus: Optional[int] = None  # per node
    cpus: Optional[int] = None  # per task
    time: Optional[str] = None
    job_name: Optional[str] = None
    output: Optional[str] = None
    per_gpu: bool = False  # one process per GPU through torchrun


def sanitize_name(name: str, fallback: str = "envkit") -> str:
    """A job name Slurm and a shell both take as it is: letters, digits and ``_.+-``, at most 64 characters."""
    cleaned = _UNSAFE_NAME.sub("_", name).lstrip("-.")[:64]
    return cleaned or fallback


def directive_value(what: str, value: str) -> str:
    """``value`` if it can stand in an ``#SBATCH --key=value`` line as it is; BadInputError (exit 2) otherwise."""
    if not _DIRECTIVE_VALUE.fullmatch(value):
        raise BadInputError(
            f"{what} {value!r} cannot be passed to sbatch: use letters, digits and _.:,+=/@%- only, not starting "
            "with '-'", hint=f"Give a plain {what}.")
    return value


def sbatch_script(spec: JobSpec) -> str:
    """The whole script, ending with a newline. Pure: the same spec gives the same text."""
    directives = [("partition", directive_value("partition", spec.partition))]
    if spec.job_name is not None:
        directives.append(("job-name", sanitize_name(spec.job_name)))
    if spec.gpus is not None:
        directives.append(("gpus-per-node", str(_positive("--gpus", spec.gpus))))
    if spec.cpus is not None:
        directives.append(("cpus-per-task", str(_positive("--cpus", spec.cpus))))
    if spec.time is not None:
        directives.append(("time", directive_value("time limit", spec.time)))
    if spec.output is not None:
        directives.append(("output", directive_value("output file", spec.output)))
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH --{key}={value}" for key, value in directives]
    lines += [
        "",
        "# Written by envkit job. The environment is activated as `envkit run` does; the command runs inside it.",
        "set -euo pipefail",
        'export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"',
    ]
    command = list(spec.command)
    if spec.per_gpu:
        gpus = _positive("--gpus", spec.gpus) if spec.gpus is not None else None
        nproc = str(gpus) if gpus is not None else "gpu"
        launcher = ["torchrun", "--standalone", f"--nproc-per-node={nproc}"]
        if command and command[0] in ("python", "python3"):
            command = [*launcher, *command[1:]]  # torchrun runs a script with the environment's Python itself
        else:
            command = [*launcher, "--no-python", *command]
    lines.append(" ".join(shlex.quote(part) for part in (*spec.activate, *command)))
    return "\n".join(lines) + "\n"


def _positive(option: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadInputError(f"{option} must be a whole number of 1 or more, got {value!r}")
    return value


def quoted(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(part) for part in argv)
