"""What `envkit shell` and `envkit jupyter` share (a helper: it registers no command): their options, and the steps
before a job is asked for: the values checked, the environment found, its fit with the partition checked as
`envkit job` checks it (commands/slurm.py's own check, reused as it is)."""

from dataclasses import replace
from pathlib import Path
from typing import Annotated, NamedTuple, Optional

import typer

from envkit.commands.places import current_site
from envkit.commands.recorded import find_record, recorded_manifests, remake_or_remove
from envkit.commands.options import seconds_between

GpusOption = Annotated[Optional[int], typer.Option("--gpus", metavar="N", min=1, help="GPUs to ask for. Default: all "
                                                   "of a node's GPUs (the fewest any node of P has).")]
CpusOption = Annotated[Optional[int], typer.Option("--cpus", metavar="N", min=1,
                                                   help="CPUs to ask for (also OMP_NUM_THREADS).")]
TimeOption = Annotated[Optional[str], typer.Option("--time", metavar="T", help="Time limit, as Slurm reads it "
                                                   "(minutes, HH:MM:SS, D-HH:MM).")]
QueueOption = Annotated[float, typer.Option("--timeout", metavar="SECONDS", callback=seconds_between(1, 86400),
                                            help="Seconds the job may wait to start; past that it is withdrawn.")]
PARTITION_HELP = "The Slurm partition (as in the site file: `envkit survey` writes it); P:NODE runs on that node."


class Prepared(NamedTuple):
    record: object  # the environment's record
    spec: object  # envkit.slurm.script.JobSpec: partition, node (Slurm's name), GPUs, CPUs, time, job name
    slurm: object  # envkit.slurm.client.Slurm, present


def prepare(env: str, partition_spec: str, gpus: Optional[int], cpus: Optional[int], time: Optional[str],
            manifests: Optional[Path], job_name: str, fit_check: bool = True) -> Prepared:
    """Everything checked before a job is asked for, in this order: the values (exit 2), the environment (exit 2
    when unknown), its fit with every node configuration of the partition (exit 1 with the reasons), GPUs there
    (exit 1 for a partition without), Slurm on PATH and answering (exit 1). Not ``fit_check`` (an image run with
    --no-fit-check): the image's recorded fit is neither read nor judged, and that is said."""
    from envkit.commands.slurm import _check_fit, _job_target
    from envkit.errors import EnvkitError
    from envkit.slurm.client import Slurm
    from envkit.slurm.script import JobSpec, directives

    partition, node = _job_target(partition_spec)
    spec = JobSpec(partition=partition, command=(), activate=(), gpus=gpus, cpus=cpus, time=time,
                   job_name=job_name, node=node)
    directives(spec)  # every value checked (exit 2) before anything is looked up or made
    record = find_record(env, images=True, fit_check=fit_check)
    unchecked = not fit_check and "image" in record.extra
    if unchecked:
        from envkit.commands.images import say_unchecked

        say_unchecked(record)
    site = current_site()
    _, chosen = _check_fit(record, site, partition, gpus, recorded_manifests(record, manifests), node,
                           judge=not unchecked)
    if not chosen:
        raise EnvkitError(f"partition {partition} has no GPUs (as the site file says)",
                          hint="Name a GPU partition: `envkit site` lists them.")
    if "image" not in record.extra and not (Path(record.prefix) / "bin").is_dir():  # (an image mounts on the node)
        raise EnvkitError(f"no environment at {record.prefix}", hint=remake_or_remove(record))
    slurm = Slurm()
    slurm.require_answer(f"no job can be asked of partition {partition}")
    if node is not None:
        from envkit.commands.node_check import slurm_target

        node = slurm_target(site, partition, node, slurm)
    return Prepared(record, replace(spec, gpus=chosen, node=node), slurm)
