"""Across nodes: ``envkit verify ENV --partition P --nodes N`` (each node's own check, then an all-reduce across all
of them, in one srun) and the nodes of ``envkit job --nodes N``.

The login node starts one srun task per node; each runs this same envkit (``verify --on-node --across-nodes``),
which prints a line naming its node, its rank's all-reduce result, then its own check's report, all as JSON. The
login node reads them back by task (srun --label), and reports every node, the all-reduce and the diagnosis.
"""

import contextlib
from pathlib import Path
from typing import Any, Iterator, Optional

import typer


def rendezvous_timeout(probe_timeout: float) -> float:
    """Seconds a node waits for the others at the rendezvous: a quarter of the probe's limit, 10 to 120."""
    return max(10.0, min(120.0, probe_timeout / 4))


def job_nodes(site, partition: str, named: Optional[str], nodes: int, framework: Optional[str]) -> Optional[str]:
    """The --nodelist of ``envkit job --nodes``: the named nodes' Slurm names (comma-separated), or None. Exit 2 for a
    framework that has no launch across nodes, or more nodes than sinfo says the partition has."""
    from envkit.errors import BadInputError
    from envkit.slurm.client import Slurm
    from envkit.slurm.multinode import MULTI_NODE_FRAMEWORKS, check_nodes

    if framework not in MULTI_NODE_FRAMEWORKS:
        raise BadInputError(f"--nodes starts PyTorch, TensorFlow or JAX across nodes; this environment has "
                            f"{framework or 'an unknown framework'}", hint="Leave out --nodes to run on one node.")
    slurm = Slurm()
    names = named.split(",") if named else []
    if not names:
        if slurm.present:
            check_nodes(nodes, names, _partition_size(slurm, partition), partition)
        return None
    from envkit.commands.node_check import slurm_target

    targets = [slurm_target(site, partition, name, slurm) for name in names]
    check_nodes(nodes, targets, None, partition)  # two names of one node: exit 2, before any job
    if slurm.present:
        check_nodes(nodes, targets, _partition_size(slurm, partition, targets), partition)
    return ",".join(targets)


def site_listed(site, partition: str, names) -> bool:
    """Whether the site file lists every one of ``names`` in ``partition`` (a survey keeps one node per
    configuration: the others of a job across nodes are Slurm's nodes, checked by sinfo, and the fit is then
    checked against every configuration of the partition)."""
    from envkit.errors import UnknownNameError
    from envkit.site import partition_profiles

    try:
        partition_profiles(site, partition, list(names))
    except UnknownNameError:
        return False
    return True


def _partition_size(slurm, partition: str, names=()) -> int:
    """How many nodes sinfo lists in ``partition``; UnknownNameError (exit 2) for one of ``names`` it does not."""
    from envkit.errors import UnknownNameError
    from envkit.slurm.survey import gpu_partitions

    [info] = gpu_partitions(slurm, [partition])
    unknown = [name for name in names if name not in info.node_names]
    if unknown:
        raise UnknownNameError(f"partition {partition!r} has no node {unknown[0]!r}; its nodes are: "
                               f"{', '.join(dict.fromkeys(info.node_names))}",
                               hint=f"`sinfo -N -p {partition}` lists them.")
    return len(set(info.node_names))


@contextlib.contextmanager
def collective_alongside(wanted: bool, python: Path, framework: str, probe_timeout: float,
                         environ) -> Iterator[None]:
    """With ``wanted`` (verify --across-nodes, on a node of a ``verify --nodes`` job): this node's rank of the
    all-reduce with ``framework`` (auto: the environment's own), run in a thread while the node's own check runs
    (the two cost about as much as the check alone), its result printed as JSON once both are done, also when the
    check stopped with an error."""
    if not wanted:
        yield
        return
    import threading

    from envkit.commands.output import print_json

    box: dict[str, Any] = {}

    def rank() -> None:
        try:
            box["result"] = collective_here(python, framework, probe_timeout, environ)
        except Exception as exc:  # said in the result, where the login node reads it
            box["result"] = {"ok": False, "phase": "start", "error": {"where": "start", "type": type(exc).__name__,
                                                                      "message": str(exc), "traceback": ""}}

    thread = threading.Thread(target=rank, name="envkit-cross-node", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
        print_json({"cross_node": box["result"]})


def _fewest_gpus(slurm, partition: str) -> int:
    from envkit.slurm.survey import gpu_partitions

    [info] = gpu_partitions(slurm, [partition])
    return min(row.gpus for row in info.nodes)


def collective_here(python: Path, framework: str, probe_timeout: float, environ) -> dict[str, Any]:
    """On a node of a ``verify --nodes`` job: this node's rank of the all-reduce (a node with no Slurm job around it
    gets a result that says so). The rendezvous: MASTER_ADDR, else the first node's address; TensorFlow's workers
    are every node at its address."""
    import os

    from envkit.probe.cross_node import run_rank
    from envkit.slurm.client import Slurm
    from envkit.slurm.multinode import rendezvous_port

    job, rank, world = (os.environ.get(key, "") for key in ("SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS"))
    if not (job.isdigit() and rank.isdigit() and world.isdigit()):
        from envkit.errors import BadInputError

        raise BadInputError("--across-nodes runs inside a Slurm job step of several tasks (verify --nodes starts it)")
    addresses = Slurm().node_addresses(os.environ.get("SLURM_JOB_NODELIST", "")) or ["127.0.0.1"]
    addresses[0] = os.environ.get("MASTER_ADDR") or addresses[0]
    port_text = os.environ.get("MASTER_PORT", "")
    port = int(port_text) if port_text.isdigit() and 0 < int(port_text) < 65536 else rendezvous_port(job)
    return run_rank(python, framework, int(rank), int(world), addresses, port, rendezvous_timeout(probe_timeout),
                    environ or os.environ)


def verify_across_nodes(env: Optional[str], prefix: Optional[Path], nodes: int, gpus: Optional[int],
                        queue_timeout: float, check, target, json_output: bool) -> int:
    """Run the check on ``nodes`` nodes of ``target.partition`` at once and report it; the exit status."""
    from envkit.commands.places import current_site
    from envkit.commands.recorded import environment_python, find_record
    from envkit.commands.node_check import node_args, slurm_target, too_many_gpus
    from envkit.errors import BadInputError
    from envkit.probe.runner import check_framework
    from envkit.site import parse_partition_spec
    from envkit.slurm.client import Slurm
    from envkit.slurm.multinode import check_nodes
    from envkit.slurm.remote import CHECK_GRACE, partition_gpus

    if target.machine or target.cuda is not None or target.gpu_arch:
        raise BadInputError("--partition checks on the partition's own nodes: leave out --machine, --cuda and "
                            "--gpu-arch")
    partition, named = parse_partition_spec(target.partition)
    check_nodes(nodes, named, None, partition)
    check_framework(check.framework)
    record = find_record(env) if env is not None else None
    if record is None:
        environment_python(Path(prefix))  # type: ignore[arg-type]
    slurm = Slurm()
    slurm.require()
    check_nodes(nodes, named, _partition_size(slurm, partition), partition)
    nodelist = None
    if named:
        site = current_site()
        nodelist = ",".join(slurm_target(site, partition, name, slurm) for name in named)
        check_nodes(nodes, nodelist.split(","), None, partition)  # two names of one node: exit 2, before any job
        _partition_size(slurm, partition, nodelist.split(","))  # exit 2 for a node sinfo does not list
    # Every node of the job is asked for the same GPUs: the fewest any of them (or of the partition's nodes) has.
    most = min(partition_gpus(slurm, partition, name) for name in nodelist.split(",")) if nodelist else \
        _fewest_gpus(slurm, partition)
    if gpus is not None and gpus > most:
        raise too_many_gpus(gpus, most, partition, nodelist)
    wanted = gpus if gpus is not None else most
    args = [*node_args(env, prefix, check, target, True), "--across-nodes"]
    typer.echo(f"envkit: running the check on {nodes} nodes of {partition} at once through srun, then an "
               f"all-reduce across them (waiting at most {queue_timeout:g} s for the job to start)", err=True)
    from envkit.slurm.remote import envkit_argv

    run_timeout = check.probe_timeout * 2 + rendezvous_timeout(check.probe_timeout) + CHECK_GRACE
    step = slurm.srun(envkit_argv(args), partition=partition, gpus=wanted or None, start_timeout=queue_timeout,
                      run_timeout=run_timeout, purpose="verify-nodes", node=nodelist, nodes=nodes)
    not_run = _not_run(step, queue_timeout, run_timeout)
    if not_run is not None:
        from envkit.commands.output import print_json

        if json_output:
            print_json({"status": "not run", "partition": partition, "nodes": nodes, "reason": not_run})
        else:
            typer.echo(f"NOT RUN on {nodes} nodes of {partition}: {not_run}")
        typer.echo("envkit: the check did not run: it is neither PASS nor FAIL, and the environment's record is "
                   "unchanged", err=True)
        return 1
    from envkit.commands.nodes_report import read_tasks, render, store

    outcome = read_tasks(step.stdout, step.stderr, nodes, partition)
    render(outcome, json_output)
    if record is not None:
        store(record, outcome)
    return 0 if outcome["ok"] else 1


def doctor_across_nodes(python: Path, nodes: int, check, target, json_output: bool) -> int:
    """``envkit doctor --python PREFIX/bin/python --partition P --nodes N``: the environment's directory, checked on N
    nodes as ``verify --prefix PREFIX`` checks it; exit 2 without --partition, or for a Python outside a bin/."""
    from envkit.commands.node_check import QUEUE_TIMEOUT
    from envkit.errors import BadInputError

    if target.partition is None:
        raise BadInputError("--nodes checks nodes of a Slurm partition: add --partition P")
    if python.parent.name != "bin":
        raise BadInputError(f"--nodes checks an environment's directory on each node: {python} is not in one's "
                            "bin/", hint="Pass PREFIX/bin/python, or use `envkit verify --prefix PREFIX`.")
    return verify_across_nodes(None, python.parent.parent, nodes, None, QUEUE_TIMEOUT, check, target, json_output)


def _not_run(step, queue_timeout: float, run_timeout: float) -> Optional[str]:
    """Why the check did not run at all (never started, cut off, envkit missing on the nodes); None when it ran."""
    if not step.started:
        why = (f"the job did not start within {queue_timeout:g} s (cancelled)" if step.waited
               else "the job could not start")
        return f"{why}: {step.why()}"
    if step.returncode is None:
        return f"the check did not finish within {run_timeout:g} s (the job was cancelled)"
    missing = step.envkit_missing()
    if missing is not None:
        return missing
    if not step.stdout.strip():
        return f"no report came back (srun's exit status {step.returncode}): {step.why()}"
    return None
