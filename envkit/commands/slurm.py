"""Slurm: ``envkit survey`` (the GPU partitions into the site file) and ``envkit job`` (an sbatch script)."""

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from envkit.commands.output import print_json, reported_errors
from envkit.commands.places import current_site, manifests_dir
from envkit.commands.recorded import find_record, recorded_build, recorded_manifests
from envkit.commands.images import NoFitCheckOption
from envkit.commands.options import JsonOption, ManifestsOption, RunInArgument, seconds_between

QueueTimeoutOption = Annotated[
    float,
    typer.Option("--timeout", metavar="SECONDS", callback=seconds_between(1, 86400),
                 help="Seconds a job may wait in the queue before it is cancelled and reported as not started."),
]
PartitionOption = Annotated[
    str, typer.Option("--partition", "-p", metavar="P", help="The Slurm partition (as in the site file: "
                                                             "`envkit survey` writes it); P:NODE runs on that node.")
]


def survey(
    partition: Annotated[
        Optional[List[str]],
        typer.Option("--partition", "-p", metavar="P", help="Survey this partition (repeatable). Default: every "
                     "partition whose nodes have GPUs (GRES gpu).", show_default=False),
    ] = None,
    all_nodes: Annotated[
        bool, typer.Option("--all-nodes", help="Detect every node, not one per distinct configuration (GRES and "
                           "features).")
    ] = False,
    timeout: QueueTimeoutOption = 120.0,
    force: Annotated[
        bool, typer.Option("--force", help="Replace a symbolic link where the site file goes by the file (its "
                           "target stays as it was). Without it a link is refused: envkit never writes through one.")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Find the cluster's GPU partitions with sinfo and detect their nodes through srun, into the site file.

    On one node of each distinct configuration (every node with --all-nodes), `envkit detect --json` runs in a job
    with all of the node's GPUs, using this same Python (envkit must be where the nodes see it: a shared home).
    Partitions are surveyed in parallel. A job that does not start within --timeout is cancelled; what could not be
    reached is written with the reason, and a partition that failed keeps what the site file said about it.
    Then `envkit list torch --partition P` resolves for that partition.

    Exit codes: 0 a partition or more surveyed (one that is down, or could not be reached, is reported and keeps
    what the site file said: routine on a real cluster), 1 none could be surveyed, 2 bad input.
    """
    with reported_errors():
        from envkit.site import Partition, save_site, with_partition
        from envkit.slurm.client import Slurm
        from envkit.slurm.survey import gpu_partitions, survey as run_survey

        from envkit.site import check_partition_name

        for name in partition or ():
            check_partition_name(name, hint="Run `sinfo -s` to see the partitions.")
        site = current_site()
        path = site.path
        from envkit.state.output import check_output

        check_output(path, force=force, what="the site file")  # before the survey, not after it
        slurm = Slurm()
        slurm.require()
        chosen = gpu_partitions(slurm, partition or ())
        if not chosen:
            from envkit.errors import EnvkitError

            raise EnvkitError("sinfo lists no partition whose nodes have GPUs (GRES gpu)",
                              hint="Name one with --partition if its GPUs are not configured as GRES.")

        def progress(name: str, message: str) -> None:
            typer.echo(f"{name}: {message}", err=True)

        outcomes = run_survey(slurm, chosen, all_nodes=all_nodes, timeout=timeout, progress=progress)
        from envkit.state.sharedlock import holding
        from envkit.state.testpause import pause_at

        pause_at("surveyed")
        with holding(path, f"the site file {path}"):  # read again under the lock: another survey's partitions stay
            site = current_site()
            for outcome in outcomes:
                if outcome.partition is not None:
                    site = with_partition(site, outcome.partition)
                elif outcome.name not in site.partitions:  # a new partition: say why it has no nodes
                    site = with_partition(site, Partition(name=outcome.name, unreachable=outcome.unreachable,
                                                          error=outcome.error))
            save_site(site, path, force)
        if json_output:
            print_json({"site": str(path), "partitions": [
                {"name": o.name, "ok": o.ok, "error": o.error, "nodes": [
                    {"node": n.node, "count": n.count, "members": list(n.members), "profile": n.profile.to_dict()}
                    for n in (o.partition.nodes if o.partition else ())],
                 "unreachable": [{"node": node, "reason": why} for node, why in o.unreachable]}
                for o in outcomes]})
        else:
            for outcome in outcomes:
                if outcome.ok:
                    assert outcome.partition is not None
                    what = "node(s)" if all_nodes else "node configuration(s)"
                    missed = (f"; not reached: {', '.join(node for node, _ in outcome.unreachable)} (`envkit site` "
                              "says why)") if outcome.unreachable else ""
                    typer.echo(f"{outcome.name}: {len(outcome.partition.nodes)} {what} surveyed{missed}")
                else:
                    typer.echo(f"{outcome.name}: NOT surveyed: {outcome.error}")
            typer.echo(f"Site file: {path}")
        if not any(o.ok for o in outcomes):
            typer.echo("envkit: no partition could be surveyed (each one's reason is above)", err=True)
        raise typer.Exit(0 if any(o.ok for o in outcomes) else 1)


def job(
    env: RunInArgument,
    command: Annotated[
        Optional[List[str]], typer.Argument(metavar="-- CMD...", help="The command the job runs in the environment.",
                                            show_default=False)
    ] = None,
    partition: PartitionOption = ...,  # type: ignore[assignment]
    gpus: Annotated[Optional[int], typer.Option("--gpus", metavar="N", min=1, help="GPUs per node. Default: all of "
                                                "a node's GPUs (the node's named with P:NODE, else the fewest any node "
                                                "of P has).")] = None,
    cpus: Annotated[Optional[int], typer.Option("--cpus", metavar="N", min=1,
                                                help="CPUs per task (also OMP_NUM_THREADS).")] = None,
    time: Annotated[Optional[str], typer.Option("--time", metavar="T", help="Time limit, as sbatch reads it "
                                                "(minutes, HH:MM:SS, D-HH:MM).")] = None,
    job_name: Annotated[Optional[str], typer.Option("--job-name", metavar="NAME", help="The job's name: "
                                                   "letters, digits, '_', '.', '+', '-'. Default: ENV.")] = None,
    output: Annotated[Optional[str], typer.Option("--output", metavar="FILE", help="Where the job's output goes, "
                                                  "in a directory that exists (sbatch's %j and %x patterns work). "
                                                  "Default: sbatch's slurm-<id>.out in the working directory.")] = None,
    submit: Annotated[bool, typer.Option("--submit", help="Submit the script with sbatch and print the job id.")] = False,
    show: Annotated[bool, typer.Option("--print", help="Print the script (the default without --submit).")] = False,
    per_gpu: Annotated[bool, typer.Option("--per-gpu", help="One process per GPU with torchrun (PyTorch "
                                          "environments): for a program that distributes itself (DDP).")] = False,
    manifests: ManifestsOption = None,
    nodes: Annotated[Optional[int], typer.Option("--nodes", metavar="N", show_default=False, help="Run on N nodes: "
                     "one task per node through srun, each starting the framework's distributed launch (PyTorch: "
                     "torchrun with a c10d rendezvous on the first node; TensorFlow: TF_CONFIG; JAX: "
                     "jax.distributed.initialize() reads Slurm's variables). P:NODE,... names them.")] = None,
    no_fit_check: NoFitCheckOption = False,
) -> None:
    """Write (and with --submit, submit) an sbatch script that runs CMD in ENV on a node of partition P (on NODE
    with P:NODE, named as `envkit site` shows it).

    The script asks for the partition (and --nodelist), --gpus-per-node, --cpus-per-task and --time, exports
    OMP_NUM_THREADS from SLURM_CPUS_PER_TASK, and runs CMD inside ENV activated as `envkit run` does. envkit first
    checks the environment's build against every node configuration of the partition (or the node) in the site
    file, and refuses (exit 1, with the reasons) when it would not run there. PyTorch uses one GPU unless the
    program distributes: --per-gpu starts one process per GPU (torchrun). With --nodes N, srun starts one task per
    node and each starts the framework's own distributed launch, the rendezvous on the allocation's first node
    (docs/multi-node.md).

    ENV may be an image `envkit pack` made (a path: ./torch.sqfs): its recorded fit is checked against the
    partition here, and the job mounts it on the node (`envkit run FILE`), checked there again (docs/travel.md).

    Example: `envkit job torch-cu126 -p gpu-4-a100 --gpus 2 --cpus 6 --time 1:00:00 --submit -- python train.py`.
    """
    with reported_errors():
        from envkit.commands.images import as_argument

        env = as_argument(env)  # an image by its absolute path, for the node
        import sys

        from envkit.errors import BadInputError
        from envkit.slurm.script import JobSpec, job_name as check_job_name, sbatch_script
        from envkit.system.launch import python_module

        import shlex

        partition_spec = partition
        if nodes is not None:
            from envkit.site import parse_partition_spec
            from envkit.slurm.multinode import check_nodes

            partition, named = parse_partition_spec(partition_spec)
            check_nodes(nodes, named, None, partition)  # exit 2 before anything is looked up
            node = ",".join(named) or None
        else:
            partition, node = _job_target(partition_spec)
        if job_name is not None:
            check_job_name(job_name)  # exit 2 before anything is looked up
        if not command:
            raise BadInputError("give the command the job runs after `--`", hint="For example: " + shlex.join(
                ["envkit", "job", env, "--partition", partition_spec, "--", "python", "train.py"]))
        record = find_record(env, images=True, fit_check=not no_fit_check)
        site = current_site()
        fit = node
        if nodes is not None and node is not None:  # nodes the site file does not list: every configuration of P
            from envkit.commands.nodes_check import site_listed

            fit = node if site_listed(site, partition, node.split(",")) else None
        framework, gpus = _check_fit(record, site, partition, gpus, recorded_manifests(record, manifests), fit,
                                     judge=not (no_fit_check and "image" in record.extra))
        if per_gpu and framework != "torch":
            raise BadInputError(f"--per-gpu starts one process per GPU with torchrun, which needs a PyTorch "
                                f"environment; {env} has {framework or 'an unknown framework'}")
        if nodes is not None:
            from envkit.commands.nodes_check import job_nodes

            node = job_nodes(site, partition, node, nodes, framework)
        elif node is not None:  # a name as `envkit site` shows it: sbatch takes the node's Slurm name
            from envkit.commands.node_check import slurm_target
            from envkit.slurm.client import Slurm

            node = slurm_target(site, partition, node, Slurm())
        spec = JobSpec(partition=partition, command=tuple(command), gpus=gpus, cpus=cpus, time=time,
                       job_name=job_name if job_name is not None else _default_job_name(env),
                       output=output, per_gpu=per_gpu,
                       activate=(*python_module(sys.executable, "envkit", "run",
                                                *(["--no-fit-check"] if no_fit_check else []), env), "--"), node=node,
                       nodes=nodes or 1, framework=framework)
        script = sbatch_script(spec)
        if not submit:
            typer.echo(script, nl=False)
            return
        if show:
            typer.echo(script, nl=False, err=True)
        if output is not None:
            _check_output_directory(output)
        import os

        from envkit.slurm.client import Slurm
        from envkit.slurm.script import output_file, overriding_variables

        unset = [name for name in overriding_variables(spec) if name in os.environ]
        if unset:
            typer.echo(f"envkit: note: not passing {', '.join(f'{name}={os.environ[name]}' for name in unset)} to "
                       "sbatch: it would override the script's own directives", err=True)
        job_id = Slurm().submit(script, unset)
        typer.echo(job_id)
        where = output_file(output, job_id, spec.job_name or env) if output else f"slurm-{job_id}.out"
        typer.echo(f"envkit: submitted job {job_id} to {f'node {node} of ' if node else ''}{partition}; its output "
                   f"goes to {where}; `squeue -j {job_id}` shows it", err=True)


def _default_job_name(env: str) -> str:
    """ENV as a job's name: site:NAME as site-NAME, an image by its file name without .sqfs."""
    from envkit.commands.images import is_image

    if is_image(env):
        import re

        name = Path(env).name
        name = re.sub(r"[^A-Za-z0-9_.+-]", "-", name.rsplit(".", 1)[0] if name.endswith((".sqfs", ".squashfs"))
                      else name)[:64]
        return name if re.match(r"[A-Za-z0-9_]", name) else "envkit-image"
    return env.replace(":", "-")


def _job_target(spec: str) -> tuple[str, Optional[str]]:
    """(the partition, the node if one is named) of ``--partition P`` or ``P:NODE``: see node_check.one_node."""
    from envkit.commands.node_check import one_node
    from envkit.site import check_partition_name

    if ":" not in spec:
        return check_partition_name(spec), None
    return one_node(spec, "a job")


def _check_output_directory(output: str) -> None:
    """BadInputError (exit 2) when --output's directory does not exist: sbatch takes the job, and the job then fails
    to start without writing a line anywhere. (Relative to the working directory, the job's too; a directory with
    one of sbatch's %-patterns in it is left to sbatch.)"""
    import shlex

    from envkit.errors import BadInputError

    directory = Path(output).parent
    if "%" not in str(directory) and not directory.is_dir():
        raise BadInputError(f"--output {output}: the directory {directory} does not exist (sbatch would take the job, "
                            "and it would fail to start without any output)",
                            hint=f"Create it first (`mkdir -p {shlex.quote(str(directory))}`), or give another file.")


def _check_fit(record, site, partition: str, gpus: Optional[int], manifests: Optional[Path],
               node: Optional[str] = None, judge: bool = True):
    """(the framework, the GPUs per node to ask for); EnvkitError (exit 1) with the reasons when the environment's
    build would not run on every node configuration of the partition (on ``node``, when one is named: exit 2 when
    the site file does not have it). Not ``judge``: the GPUs only."""
    from envkit.catalog import load_tables
    from envkit.errors import EnvkitError
    from envkit.pick.resolve import assess
    from envkit.site import partition_profiles

    profiles = partition_profiles(site, partition, node.split(",") if node is not None else ())
    counts = [len(profile.gpus) for profile in profiles]
    if gpus is not None and gpus > max(counts):
        from envkit.commands.node_check import too_many_gpus

        raise too_many_gpus(gpus, max(counts), partition, node)
    chosen = gpus if gpus is not None else (min(counts) or None)
    framework, build = recorded_build(record, manifests)
    if not judge:  # an image run with --no-fit-check
        return framework, chosen
    if build is None:
        typer.echo(f"envkit: warning: the build {record.build} of {record.name} is no longer in the manifests; "
                   f"its fit with {partition} is not checked", err=True)
        return framework, chosen
    tables = load_tables(manifests_dir(manifests))
    problems = []
    for profile in profiles:  # each named as `envkit site` shows it
        candidate = assess(build, profile, tables)
        if not candidate.compatible:
            reasons = "; ".join(candidate.reasons)
            problems.append(f"{profile.name}: {reasons}")
    if problems:
        import shlex

        spec = f"{partition}:{node}" if node else partition
        create = ["envkit", "create", record.manifest, "--partition", spec]
        create += ["--manifests", str(manifests)] if manifests is not None else []  # where its manifest was read
        where = f"node {node} of partition {partition}" if node else f"partition {partition}"
        raise EnvkitError(f"{record.name} ({record.build}) would not run on {where}: " + " | ".join(problems),
                          hint=f"Create one for it: {shlex.join(create)}")
    return framework, chosen


def register(app: typer.Typer) -> None:
    app.command()(survey)
    app.command()(job)
