"""The sbatch script of ``envkit job``, built by one pure function of its parameters.

Every value that came from the user reaches the script either as an ``#SBATCH --key=value`` directive whose value
was validated first (:func:`directive_value`, :func:`job_name`), or shell-quoted with ``shlex.quote``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Optional, Sequence

from envkit.errors import BadInputError

# A job name as it stands in squeue and in a shell without quoting; 64 characters, as an environment's name (the
# default job name) may have.
_JOB_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")
# Directive values sbatch reads itself (no shell): no whitespace, quotes, '#', '$' or a leading '-'.
_DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_.:,+=/@%][A-Za-z0-9_.:,+=/@%-]*")
# The forms of a time limit sbatch reads: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds (ASCII digits), or no limit.
_TIME = re.compile(r"(?:(?P<days>[0-9]+)-(?P<dh>[0-9]+)(?::(?P<dm>[0-9]+)(?::(?P<ds>[0-9]+))?)?"
                   r"|(?P<a>[0-9]+)(?::(?P<b>[0-9]+)(?::(?P<c>[0-9]+))?)?)")
_NO_TIME_LIMIT = ("infinite", "unlimited")
# Slurm keeps a time limit in minutes in 32 bits, the top two values meaning "none" and "not set".
MAX_TIME_MINUTES = 0xFFFFFFFD
# More CPUs than a Linux node can have (the kernel's NR_CPUS is at most 8192), so a typo, not a request.
MAX_CPUS = 8192
MAX_NODES = 100000  # more than any cluster has (sinfo's own count is checked before)
MAX_GPUS = 1024  # per node: far more than any node holds (the partition's own count is checked before)


# sbatch's input environment variables that override the script's own #SBATCH directives (`man sbatch`: "environment
# variables will override any options set in a batch script"): a user's SBATCH_PARTITION or SBATCH_JOB_NAME would
# send envkit's job elsewhere, or name it other than envkit says, without a word.
OVERRIDING_VARIABLES = {
    "partition": "SBATCH_PARTITION",
    "job-name": "SBATCH_JOB_NAME",
    "gpus-per-node": "SBATCH_GPUS_PER_NODE",
    "time": "SBATCH_TIMELIMIT",
    "output": "SBATCH_OUTPUT",
}


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
    node: Optional[str] = None  # the node(s) to run on (Slurm names, comma-separated), from --partition P:NODE,...
    nodes: int = 1  # with more than 1: one task per node, the framework's distributed launch (envkit.slurm.multinode)
    framework: Optional[str] = None  # the environment's framework: which launch runs across nodes


def job_name(name: str) -> str:
    """``name`` if Slurm and a shell both take it as it is (see :data:`_JOB_NAME`); BadInputError (exit 2) otherwise:
    never rewritten into a name the user did not give."""
    if not _JOB_NAME.fullmatch(name):
        raise BadInputError(f"--job-name {name!r} is not a job name envkit passes to sbatch: use letters, digits, "
                            "'_', '.', '+' and '-', at most 64, starting with a letter, a digit or '_'",
                            hint="For example: --job-name train-resnet50.")
    return name


def directive_value(what: str, value: str) -> str:
    """``value`` if it can stand in an ``#SBATCH --key=value`` line as it is; BadInputError (exit 2) otherwise."""
    if not _DIRECTIVE_VALUE.fullmatch(value):
        raise BadInputError(
            f"{what} {value!r} cannot be passed to sbatch: use letters, digits and _.:,+=/@%- only, not starting "
            "with '-'", hint=f"Give a plain {what}.")
    return value


def directives(spec: JobSpec) -> list[tuple[str, str]]:
    """The script's ``#SBATCH --KEY=VALUE`` lines, as (key, value), each value checked (BadInputError, exit 2)."""
    pairs = [("partition", directive_value("partition", spec.partition))]
    if spec.node is not None:
        pairs.append(("nodelist", directive_value("node", spec.node)))
    if spec.nodes != 1:
        pairs += [("nodes", str(_count("--nodes", spec.nodes, MAX_NODES))), ("ntasks-per-node", "1")]
    if spec.job_name is not None:
        pairs.append(("job-name", job_name(spec.job_name)))
    if spec.gpus is not None:
        pairs.append(("gpus-per-node", str(_count("--gpus", spec.gpus, MAX_GPUS))))
    if spec.cpus is not None:
        pairs.append(("cpus-per-task", str(_count("--cpus", spec.cpus, MAX_CPUS))))
    if spec.time is not None:
        pairs.append(("time", time_limit(spec.time)))
    if spec.output is not None:
        pairs.append(("output", directive_value("output file", spec.output)))
    return pairs


def sbatch_script(spec: JobSpec) -> str:
    """The whole script, ending with a newline. Pure: the same spec gives the same text."""
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH --{key}={value}" for key, value in directives(spec)]
    lines += [
        "",
        "# Written by envkit job. The environment is activated as envkit run does it; the command runs inside it.",
        "set -euo pipefail",
        'export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"',
    ]
    command = list(spec.command)
    if not command or not command[0] or command[0].startswith("-"):
        raise BadInputError(f"the job's command must start with the program to run, not {command[:1] or ''!r}",
                            hint="For example: envkit job ENV -p P -- python train.py")
    if spec.nodes != 1:
        from envkit.slurm.multinode import launch_lines

        gpus = _count("--gpus", spec.gpus, MAX_GPUS) if spec.gpus is not None else None
        lines += launch_lines(spec.framework, spec.activate, command, spec.nodes, spec.per_gpu, gpus)
        return "\n".join(lines) + "\n"
    if spec.per_gpu:
        gpus = _count("--gpus", spec.gpus, MAX_GPUS) if spec.gpus is not None else None
        nproc = str(gpus) if gpus is not None else "gpu"
        launcher = ["torchrun", "--standalone", f"--nproc-per-node={nproc}"]
        rest = command[1:]
        if command[0] in ("python", "python3") and rest and (rest[0] == "-m" or not rest[0].startswith("-")):
            # torchrun runs a script (or -m module) with the environment's Python itself; Python's own options
            # (python -u train.py) are not torchrun's, so that form goes through --no-python below.
            command = [*launcher, *rest]
        else:
            command = [*launcher, "--no-python", *command]
    lines.append(" ".join(shlex.quote(part) for part in (*spec.activate, *command)))
    return "\n".join(lines) + "\n"


def overriding_variables(spec: JobSpec) -> list[str]:
    """The environment variables that would make sbatch override a directive of the script of ``spec`` (see
    :data:`OVERRIDING_VARIABLES`): the ones to keep from sbatch."""
    return [OVERRIDING_VARIABLES[key] for key, _ in directives(spec) if key in OVERRIDING_VARIABLES]


def _count(option: str, value: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise BadInputError(f"{option} must be a whole number from 1 to {most}, got {value!r}")
    return value


def time_limit(value: str) -> str:
    """``value`` if sbatch reads it as a time limit (see :data:`_TIME`) of at most :data:`MAX_TIME_MINUTES`;
    BadInputError (exit 2) otherwise."""
    directive_value("time limit", value)
    if value.lower() in _NO_TIME_LIMIT:
        return value
    found = _TIME.fullmatch(value)
    if found is None:
        raise BadInputError(f"--time {value!r} is not a time limit sbatch reads",
                            hint="Give minutes, HH:MM:SS or D-HH:MM:SS, for example 90, 1:30:00 or 2-00:00:00.")
    # (a part of more than 12 digits is too long whatever the others are; int() would refuse 4301 of them)
    parts = {key: int(text) if len(text) <= 12 else 10 ** 12
             for key, text in found.groupdict().items() if text is not None}
    if "days" in parts:
        minutes = parts["days"] * 1440 + parts["dh"] * 60 + parts.get("dm", 0) + parts.get("ds", 0) / 60
    elif "c" in parts:  # hours:minutes:seconds
        minutes = parts["a"] * 60 + parts["b"] + parts["c"] / 60
    else:  # minutes[:seconds]
        minutes = parts["a"] + parts.get("b", 0) / 60
    if minutes > MAX_TIME_MINUTES:
        raise BadInputError(f"--time {value!r} is longer than Slurm can ask for ({MAX_TIME_MINUTES} minutes)",
                            hint="Give the time the job needs (the partition's MaxTime caps it), or 'infinite'.")
    return value


# sbatch's filename patterns envkit can fill in after submitting: %j (and %A, the same outside an array) the job id,
# %x the job name, %% a '%'; a number between them pads with zeros (%4j). Others (%N, %u, ...) stay as written.
_OUTPUT_PATTERN = re.compile(r"%(?P<width>[0-9]*)(?P<what>[jAx%])")


def output_file(pattern: str, job_id: str, job_name: str) -> str:
    """Where sbatch writes a job's output for ``--output pattern``: its %j, %A, %x and %% filled in."""

    def fill(match: "re.Match[str]") -> str:
        what = match.group("what")
        if what == "%":
            return "%"
        value = job_name if what == "x" else job_id
        return value.zfill(int(match.group("width"))) if match.group("width") and what != "x" else value

    return _OUTPUT_PATTERN.sub(fill, pattern)


def quoted(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(part) for part in argv)
