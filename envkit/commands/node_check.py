"""``envkit verify ENV --partition P``: the check run on a node of a Slurm partition, reported from here."""

from pathlib import Path
from typing import Optional

import typer


def node_args(env: Optional[str], prefix: Optional[Path], check, target, json_output: bool) -> list[str]:
    """The arguments of the `envkit verify` the node runs: the same check, judged on the node's own hardware."""
    from envkit.state.files import real_path

    args = ["verify", "--on-node"]  # the node's own GPUs, whatever the environment was made for
    args += [env] if env is not None else ["--prefix", str(real_path(Path(prefix)))]  # type: ignore[arg-type]
    args += ["--framework", check.framework, "--probe-timeout", f"{check.probe_timeout:g}",
             "--timeout", f"{target.timeout:g}"]
    if check.multi_gpu:
        args.append("--multi-gpu")
    if check.bench:
        args.append("--bench")
    if target.manifests is not None:
        args += ["--manifests", str(real_path(Path(target.manifests)))]
    if json_output:
        args.append("--json")
    return args


def node_target(target) -> tuple[str, Optional[str]]:
    """(the partition, the node if one is named) the check runs on; BadInputError (exit 2) for options that name
    other machines or several nodes. Checked before anything is made or queued."""
    from envkit.errors import BadInputError

    if target.machine or target.cuda is not None or target.gpu_arch:
        raise BadInputError("--partition checks on the partition's own nodes: leave out --machine, --cuda and "
                            "--gpu-arch")
    return one_node(target.partition, "the check")


def one_node(spec: str, what: str) -> tuple[str, Optional[str]]:
    """(the partition, the node if one is named) of ``--partition P`` or ``P:NODE`` for ``what`` runs on one node
    ("the check", "a job"); BadInputError (exit 2) for several nodes, before anything is looked up."""
    from envkit.errors import BadInputError
    from envkit.site import parse_partition_spec

    partition, nodes = parse_partition_spec(spec)
    if len(nodes) > 1:
        raise BadInputError(f"--partition {spec}: {what} runs on one node; name one, or the partition alone",
                            hint=f"For example: --partition {partition}:{nodes[0]}")
    return partition, nodes[0] if nodes else None


def slurm_target(site, partition: str, node: str, slurm=None) -> str:
    """The Slurm node that ``node`` (a name as `envkit site` shows it) stands for in ``partition``; BadInputError
    (exit 2), naming the site file's entry and what to do, when that entry has no ``node:`` and ``node`` is no Slurm
    node: always for an entry that stands for several nodes, and where ``slurm`` is here (sinfo), for a name that is
    not one of the partition's nodes. Asked before anything is queued: sbatch and srun would only refuse it."""
    from envkit.site import not_a_slurm_node, slurm_node, unnamed_entry

    name = slurm_node(site, partition, node)
    if slurm is None or not slurm.present or not unnamed_entry(site, partition, node):
        return name
    from envkit.slurm.survey import gpu_partitions

    [info] = gpu_partitions(slurm, [partition])
    if name not in info.node_names:
        raise not_a_slurm_node(site, partition, node, f"and Slurm's partition {partition} has no node of that name",
                               info.node_names)
    return name


def node_words(partition: str, node: Optional[str]) -> str:
    """Where the check runs, in words: ``node N of P``, or ``a node of P``."""
    return f"node {node} of {partition}" if node else f"a node of {partition}"


def too_many_gpus(gpus: int, most: int, partition: str, node: Optional[str]):
    """The BadInputError (exit 2) for --gpus beyond what the node (or any node of the partition) has."""
    from envkit.errors import BadInputError

    nodes = f"node {node} of partition {partition} has" if node else f"the nodes of partition {partition} have"
    return BadInputError(f"--gpus {gpus}: {nodes} at most {most} GPU(s)", hint=f"Ask for {most} or fewer.")


QUEUE_TIMEOUT = 300.0  # seconds a check's job may wait to start (verify --queue-timeout)


def slurm_here() -> bool:
    from envkit.slurm.client import Slurm

    return Slurm().present


def verify_on_node(env: Optional[str], prefix: Optional[Path], gpus: Optional[int], queue_timeout: float, check,
                   target, json_output: bool) -> int:
    """Run the check on a node of ``target.partition`` (``P`` or ``P:NODE``); relay its report and exit status.
    Returns the exit status."""
    from envkit.commands.output import echo_report, print_json
    from envkit.commands.recorded import environment_python, find_record
    from envkit.slurm.client import Slurm
    from envkit.slurm.remote import check_on_node, partition_gpus

    partition, node = node_target(target)
    from envkit.probe.runner import check_framework

    check_framework(check.framework)  # exit 2 here, not in a job on the node
    if env is not None:
        # Here, not in a job on the node: exit 2 for a name envkit did not make, 1 for a create of it going on or
        # a directory that no longer holds it (a shared file system is assumed, as `envkit job` assumes it).
        find_record(env, images=True)
    else:  # as verify says it here, exit 2, not a job whose check did not run
        environment_python(Path(prefix))  # type: ignore[arg-type]
    slurm = Slurm()
    slurm.require()
    if node is not None:  # a name as `envkit site` shows it: srun takes the node's Slurm name
        from envkit.commands.places import current_site

        node = slurm_target(current_site(), partition, node, slurm)
    most = partition_gpus(slurm, partition, node)  # a node named: its own GPUs, else srun would refuse the job
    if gpus is not None and gpus > most:
        raise too_many_gpus(gpus, most, partition, node)
    wanted = gpus if gpus is not None else most
    typer.echo(f"envkit: running the check on {node_words(partition, node)} with {wanted} GPU(s) through srun "
               f"(waiting at most {queue_timeout:g} s for it to start)", err=True)
    result = check_on_node(slurm, partition, node_args(env, prefix, check, target, json_output), wanted,
                           queue_timeout, check.probe_timeout, node=node)
    if not result.ran:
        if json_output:
            print_json({"status": "not run", "partition": partition, "reason": result.not_run})
        else:
            echo_report(f"NOT RUN on {partition}: {result.not_run}")
        typer.echo("envkit: the check did not run: it is neither PASS nor FAIL, and the environment's record is "
                   "unchanged", err=True)
        return 1
    typer.echo(result.stdout, nl=False)
    if result.stderr.strip():
        typer.echo(result.stderr.rstrip("\n"), err=True)
    return result.returncode if result.returncode is not None else 1
