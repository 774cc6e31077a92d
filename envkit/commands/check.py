"""The post-install check: ``envkit verify`` (an environment envkit made) and ``envkit doctor`` (any environment)."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit.commands.output import echo_report, print_json, reported_errors
from envkit.commands.places import current_site, manifests_dir
from envkit.commands.images import NoFitCheckOption, is_image
from envkit.commands.recorded import (env_name, environment_python, find_record, recorded_build,
                                     recorded_manifests)
from envkit.commands.targets import fleet_for, target_argv
from envkit.commands.options import (CheckOptions, EnvArgument, JsonOption, TargetOptions, path_value, program_value,
                                     seconds_between, with_options)


def check_environment(python: Path, check: CheckOptions, target: TargetOptions, json_output: bool,
                      expected=None, environ=None, record=None, this_machine: bool = False):
    """Probe an environment's Python once, judge the result for each machine it is for, print the report(s).

    The machines: the ones the options name; else those the record says the environment was made for (this
    machine, when it is one of them: then the check is real); else this machine. ``this_machine`` (verify
    --partition's check on a node): this machine, for real, whatever the record says, and the report says when it
    is not one the environment was made for. Returns (ok, reports, machines judged by name per report, whether this
    machine was checked outside the machines the record says the environment is for)."""
    import os

    from envkit.catalog import load_tables
    from envkit.probe.check import check_against
    from envkit.probe.runner import ProbeOptions, check_request

    directory = manifests_dir(target.manifests)
    tables = load_tables(directory)
    companions = ()
    if expected is not None:  # the companions the build installs (torchvision, torchaudio): each one is checked
        from envkit.probe.builds import companions_of

        manifest = _framework_manifest(directory, tables, check.framework, record)
        companions = companions_of(expected, manifest, record.python if record is not None else None)
    options = ProbeOptions(framework=check.framework, multi_gpu=check.multi_gpu, bench=check.bench,
                           timeout=check.probe_timeout, companions=companions)
    check_request(python, options)
    judged = _machines_to_judge(tables, target, None if this_machine else record)  # bad input fails here
    outside = _outside_target(record, judged[0][1]) if this_machine else None
    _say_job(environ or os.environ)
    # The commands the advice gives read the same manifests: the build they name may be in these only.
    manifests = ("--manifests", str(target.manifests)) if target.manifests is not None else ()
    reports = check_against(python, options, [(profile, here) for _, profile, here, _ in judged],
                            environ or os.environ, tables=tables, expected=expected,
                            manifest_for=lambda name: _framework_manifest(directory, tables, name, record),
                            machine_args=[(*args, *manifests) for _, _, _, args in judged])
    names = [list(names) for names, _, _, _ in judged]
    recorded = record.target_partition() if record is not None and target.on_target else None  # the machines judged
    partition = target.partition or recorded
    _print_reports(reports, names, json_output, record, partition, outside)
    return all(r.ok for r in reports), reports, names, outside is not None


def _outside_target(record, here):
    """(the machines, the partition they were named by) the record says the environment was made for, when this
    machine (``here``) is not one of them; None when it is, or when the record names none (or a damaged target)."""
    from envkit.errors import EnvkitError
    from envkit.machines.target import matching, target_fleet

    if record is None or not getattr(record, "target", None):
        return None
    try:
        fleet = target_fleet(record.target, f"the record of {record.name}")
    except EnvkitError:  # plain `envkit verify NAME` says so; the check asked for here still runs
        return None
    if matching(fleet, here) is not None:
        return None
    from envkit.site import parse_partition_spec

    recorded = record.target_partition()
    return fleet.names, parse_partition_spec(recorded)[0] if recorded else None


def _machines_to_judge(tables, target: TargetOptions, record):
    """[(machine names, profile, whether the probe runs on it, the options that name it)]: one per distinct
    configuration."""
    if not target.on_target or record is None or not getattr(record, "target", None):
        fleet = fleet_for(tables, target)
        if fleet.single is not None:
            here = target.on_target
            return [((fleet.machines[0].name,), fleet.single, here,
                     _job_naming() if here else _naming(fleet.machines, target))]
        return [(config.names, config.profile, False, _naming(config.machines, target)) for config in fleet.configs()]
    from envkit.machines.target import matching, target_fleet

    fleet = target_fleet(record.target, f"the record of {record.name}")
    here = fleet_for(tables, TargetOptions(manifests=target.manifests, timeout=target.timeout)).single
    same = matching(fleet, here)
    if same is not None:  # this machine is one the environment is for: a real check
        return [((same.name,), here, True, _job_naming())]
    recorded, files = _recorded_target(record)
    return [(config.names, config.profile, False,
             _naming([files.get(m.name, m) for m in config.machines], recorded)) for config in fleet.configs()]


def _recorded_target(record):
    """(the options the record's target was named with, as TargetOptions, or None; its machines by name, with their
    profile files where those can still be read), for the commands that name its machines in the advice."""
    from envkit.commands.targets import recorded_target
    from envkit.errors import EnvkitError

    recorded = recorded_target(record)
    try:
        return recorded, {m.name: m for m in fleet_for(None, recorded).machines} if recorded and recorded.machine \
            else {}
    except EnvkitError:  # the profile files moved: the record's own profiles are judged, named as it names them
        return recorded, {}


def _naming(machines, target: Optional[TargetOptions]) -> tuple[str, ...]:
    """The options that name one of ``machines`` (one configuration) in a command pasted here: its profile file,
    else its node of the partition asked for; nothing when neither is known (then --cuda/--gpu-arch, if given)."""
    with_file = next((m for m in machines if m.file), None)
    if with_file is not None:
        return ("--machine", with_file.file)
    if target is not None and target.partition is not None:
        from envkit.site import parse_partition_spec

        return ("--partition", f"{parse_partition_spec(target.partition)[0]}:{machines[0].name}")
    if target is not None:
        return tuple(target_argv(target, manifests=False))
    return ()


def _job_naming() -> tuple[str, ...]:
    """Inside a Slurm job, the options that name this node where the report is read (the login node: `envkit
    verify ENV --partition P` relays it there): ``--partition P:NODE``, or ``P`` when the site file does not list
    the node. Nothing outside a job, or when the site file does not have the job's partition."""
    import os

    from envkit.errors import EnvkitError
    from envkit.site import partition_profiles
    from envkit.slurm.job_context import job_context

    context, partition = job_context(os.environ), os.environ.get("SLURM_JOB_PARTITION")
    if not context.in_job or not partition:
        return ()
    try:
        site = current_site()
        partition_profiles(site, partition)
    except EnvkitError:  # no site file, or no such partition in it: `--partition P` would not work either
        return ()
    if context.node is not None:
        try:
            partition_profiles(site, partition, [context.node])  # the site file lists this node (or its Slurm name)
            return ("--partition", f"{partition}:{context.node}")
        except EnvkitError:
            pass
    return ("--partition", partition)


def _say_job(environ) -> None:
    """Inside a Slurm job, say so: the check sees the GPUs the job was given, not all of the node's."""
    from envkit.slurm.job_context import job_context

    context = job_context(environ)
    if context.in_job:
        visible = environ.get("CUDA_VISIBLE_DEVICES")
        gpus = f"the GPUs it was given (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else "every GPU"
        typer.echo(f"envkit: inside Slurm job {context.job_id} on node {context.node or 'unknown'}: checking {gpus}",
                   err=True)


def _print_reports(reports, names, json_output: bool, record, partition: Optional[str] = None,
                   outside=None) -> None:
    """The report(s); for a record judged from profiles, where its GPU part can be checked (``partition``: the
    partition its machines are, from where Slurm reaches them); ``outside`` (machines, partition): the machines the
    environment was made for, when the one checked is not one of them."""
    if json_output:
        from envkit.probe.render import report_json

        made_for = {"made_for": {"machines": list(outside[0]), "partition": outside[1],
                                 "includes_this_machine": False}} if outside else {}
        if len(reports) == 1:
            print_json({**report_json(reports[0]), "machines": names[0], **made_for})
        else:
            print_json({"ok": all(r.ok for r in reports), "machines": [n for group in names for n in group],
                        "reports": [{**report_json(r), "machines": n} for r, n in zip(reports, names)]})
        return
    from envkit.machines.fleet import names_text
    from envkit.probe.render import report_text

    blocks = [_outside_text(record, names[0][0], *outside)] if outside else []
    for report, machines in zip(reports, names):
        text = report_text(report)
        blocks.append(text if len(reports) == 1 else f"For {names_text(machines)}:\n{text}")
    if record is not None and not all(r.on_target for r in reports):
        import shlex

        everyone = [n for group in names for n in group]
        name = env_name(record)  # (site:NAME for the site's)
        on_node = (f", or `{shlex.join(['envkit', 'verify', name, '--partition', partition])}` on the "
                   "cluster's login node (the check then runs on a node through srun)") if partition else ""
        blocks.append(f"The GPU part of {name} can only be checked on the machines it is for "
                      f"({names_text(everyone)}): run `envkit verify {name}` there{on_node}.")
    echo_report("\n\n".join(blocks))


def _outside_text(record, here: str, machines, partition: Optional[str]) -> str:
    import os

    from envkit.machines.fleet import names_text

    job_partition = os.environ.get("SLURM_JOB_PARTITION")
    this = f"{here} (partition {job_partition})" if job_partition else here
    them = f"{names_text(machines)} of partition {partition}" if partition else names_text(machines)
    name = env_name(record)
    return (f"Note: {this} is not one of the machines {name} was made for ({them}). The check ran on "
            f"{here}'s own GPUs, as asked: a FAIL says that {name} does not run on {here}, not that it is "
            "broken on the machines it was made for. Its record is unchanged.")


def _framework_manifest(directory: Path, tables, framework: Optional[str], record=None):
    """The manifest a recorded environment was made from, when the manifests directory has it and it is of the
    framework (an admin's lab-torch.yaml); else the one named after the framework (torch.yaml for torch), if any."""
    from envkit.catalog import manifest_names
    from envkit.catalog.load import SUFFIX, load_manifest

    names = manifest_names(directory) if framework is not None else []
    if record is not None and record.manifest in names:
        manifest = load_manifest(directory / f"{record.manifest}{SUFFIX}", tables)
        if manifest.framework == framework:
            return manifest
    if framework not in names:
        return None
    return load_manifest(directory / f"{framework}{SUFFIX}", tables)


@with_options
def doctor(
    python: Annotated[
        Optional[Path],
        typer.Option(
            "--python",
            metavar="PATH",
            parser=program_value,
            help="The Python of the environment to check. Default: the active one ($VIRTUAL_ENV, then "
            "$CONDA_PREFIX), else python3 on PATH.",
            show_default=False,
        ),
    ] = None,
    json_output: JsonOption = False,
    nodes: Annotated[Optional[int], typer.Option("--nodes", metavar="N", show_default=False, help="With "
                     "--partition on a Slurm login node: check N nodes at once, then an all-reduce across them, as "
                     "verify does.")] = None,
    check: CheckOptions = CheckOptions(),
    target: TargetOptions = TargetOptions(),
) -> None:
    """Check an environment envkit did not make: what is installed, whether it runs here, what to use instead.

    Runs a small probe with the environment's own Python: it imports the framework, lists its GPUs, and runs a
    matrix product and a convolution on the CPU and on EVERY GPU, comparing each GPU's result with the CPU's.
    Every known failure (driver too old, a CPU-only build, no kernels for a GPU, GPUs hidden by
    CUDA_VISIBLE_DEVICES or a Slurm job without GPUs, an import that fails, wrong results) gets a cause and a next
    step. With --machine, --cuda or --gpu-arch the build is judged for that machine, from its CUDA and GPU code: the
    computations still run here.

    Exit codes: 0 PASS, 1 FAIL, 2 bad input. Example: `envkit doctor --python ~/envs/dl/bin/python`.
    """
    with reported_errors():
        import os

        from envkit.probe.runner import default_python, locate_python

        located = locate_python(python, os.environ) if python is not None else default_python(os.environ)
        if nodes is not None:  # the environment's directory, checked on N nodes as `verify --prefix` does
            from envkit.commands.nodes_check import doctor_across_nodes

            raise typer.Exit(doctor_across_nodes(located, nodes, check, target, json_output))
        ok, _, _, _ = check_environment(located, check, target, json_output)
        raise typer.Exit(0 if ok else 1)


def _queue_seconds(value: Optional[float]) -> Optional[float]:
    """--queue-timeout: seconds from 1 to a day; None when not given (it applies only with --partition)."""
    return None if value is None else seconds_between(1, 86400)(value)


@with_options
def verify(
    env: EnvArgument = None,
    prefix: Annotated[
        Optional[Path],
        typer.Option(
            "--prefix",
            metavar="PATH",
            parser=path_value,
            help="Check the environment in this directory (a conda prefix or a venv) instead: PATH/bin/python.",
            show_default=False,
        ),
    ] = None,
    json_output: JsonOption = False,
    gpus: Annotated[
        Optional[int], typer.Option("--gpus", metavar="N", min=1,
                                    help="With --partition on a Slurm cluster: GPUs to ask for. "
                                    "Default: all of a node's GPUs (the node's named with P:NODE, else the most "
                                    "any node of P has).", show_default=False)
    ] = None,
    queue_timeout: Annotated[
        Optional[float], typer.Option("--queue-timeout", metavar="SECONDS", callback=_queue_seconds, show_default=False,
                                      help="With --partition: seconds the job may wait to start; past that it is "
                                           "cancelled and the check reported as not run. Default: 300.")
    ] = None,
    on_node: Annotated[
        bool, typer.Option("--on-node", hidden=True, help="(Passed by `verify --partition` to the envkit its job "
                           "runs.) Check this machine for real, whatever machines the environment was made for.")
    ] = False,
    nodes: Annotated[Optional[int], typer.Option("--nodes", metavar="N", show_default=False, help="With "
                     "--partition: check N nodes at once in one srun (each node's own check, then an all-reduce "
                     "across them with the environment's own framework: NCCL on GPUs). P:NODE,... names them.")] = None,
    across_nodes: Annotated[bool, typer.Option("--across-nodes", hidden=True, help="(Passed by `verify --nodes` to "
                            "the envkit of each node.) Take part in the all-reduce across the job's nodes.")] = False,
    no_fit_check: NoFitCheckOption = False,
    check: CheckOptions = CheckOptions(),
    target: TargetOptions = TargetOptions(),
) -> None:
    """Check an environment: PASS only when every GPU the build should drive ran the computations correctly.

    By name (ENV), the environment is judged against the build `envkit create` made it from, and the result is
    stored in its record (`envkit envs` shows it). With --prefix, any environment directory is checked, as
    `envkit doctor --python PREFIX/bin/python` would. With --partition on a Slurm login node, the check runs on a
    node of that partition through srun (the node runs this same envkit: a shared home) and the record keeps the
    node's name; a check whose job cannot start is NOT RUN (neither PASS nor FAIL) and its job is cancelled.
    Without Slurm, --partition judges the build from the site file's node profiles. With --nodes N, N nodes are
    checked at once, then an all-reduce runs across them: PASS only when every node passed and its sum is right.

    ENV may be an image `envkit pack` made (a path: ./torch.sqfs): it is mounted for the check (no root) and
    unmounted after; the result is reported, not stored (an image is read-only).

    Exit codes: 0 PASS, 1 FAIL or not run, 2 bad input. Examples: `envkit verify torch-cu126`,
    `envkit verify torch-cu126 --partition gpu-4-a100 --multi-gpu`.
    """
    with reported_errors():
        import os

        from envkit.errors import BadInputError

        if (env is None) == (prefix is None):
            raise BadInputError("give an environment name or --prefix PATH (one of them)",
                                hint="`envkit envs` lists the environments envkit made.")
        if env is not None:
            from envkit.commands.images import as_argument

            env = as_argument(env)  # an image by its absolute path (for a node too)
        job_options = [option for option, value in (("--gpus", gpus), ("--queue-timeout", queue_timeout),
                                                    ("--nodes", nodes)) if value is not None]
        if target.partition is None and job_options:
            raise BadInputError(f"{' and '.join(job_options)} only {'apply' if len(job_options) > 1 else 'applies'} "
                                "with --partition (to the job that runs the check on a node of a Slurm partition)",
                                hint=f"Add --partition P, or leave out {' and '.join(job_options)}.")
        if across_nodes:  # first, whatever fails next: the login node names this task's node by it
            print_json({"envkit_node": os.environ.get("SLURMD_NODENAME")})
        if on_node and not target.on_target:
            raise BadInputError("--on-node checks the machine it runs on: leave out --machine, --partition, --cuda "
                                "and --gpu-arch")
        if target.partition is not None:
            from envkit.commands.node_check import QUEUE_TIMEOUT, slurm_here, verify_on_node

            from envkit.slurm.client import SlurmUnreachable, not_answering

            why = "no Slurm here (sinfo is not on PATH)"
            waiting = QUEUE_TIMEOUT if queue_timeout is None else queue_timeout
            if nodes is not None:
                from envkit.commands.nodes_check import verify_across_nodes

                raise typer.Exit(verify_across_nodes(env, prefix, nodes, gpus, waiting, check, target, json_output))
            if slurm_here():
                try:
                    raise typer.Exit(verify_on_node(env, prefix, gpus, waiting, check, target, json_output))
                except SlurmUnreachable as error:  # asked before anything was queued: judge as without Slurm
                    why = not_answering(error)
            unused = f" (without a job, {' and '.join(job_options)} {'are' if len(job_options) > 1 else 'is'} not " \
                     "used)" if job_options else ""
            typer.echo(f"envkit: {why}: judging the build from the site file's node profiles; the GPU part needs a "
                       f"node of the partition{unused}", err=True)
        record = None
        expected = None
        import contextlib

        mounted = contextlib.ExitStack()
        if env is not None and is_image(env):  # mounted for the check; judged by its build, as a record is
            from envkit.commands.images import image_in_place

            record = mounted.enter_context(image_in_place(env, not no_fit_check, target.manifests, here=False))
        elif env is not None:
            record = find_record(env)  # no create of it going on or interrupted, and its directory holds it
        try:  # an image is unmounted however the check ends
            if record is not None:
                target = target._replace(manifests=recorded_manifests(record, target.manifests))  # by its build
                prefix = Path(record.prefix)
                recorded_framework, expected = recorded_build(record, target.manifests)
                if check.framework == "auto" and recorded_framework is not None:
                    check = check._replace(framework=recorded_framework)
            assert prefix is not None
            python = environment_python(prefix, record)
            environ = None
            if record is not None:  # as `envkit run` would run it: the environment activated
                from envkit.system.activation import activated_environ

                environ = activated_environ(prefix, record.kind, record.name, os.environ)
            from envkit.commands.nodes_check import collective_alongside

            with collective_alongside(across_nodes, python, check.framework, check.probe_timeout, environ):  # its rank
                ok, reports, names, outside = check_environment(python, check, target, json_output,
                                                                expected=expected, environ=environ, record=record,
                                                                this_machine=on_node)
            if record is not None and "image" in record.extra:  # read-only: the result is the report's alone
                raise typer.Exit(0 if ok else 1)
            # Stored unless it would hide a real result: a check that ran on the machines the environment is for,
            # or one for the machines named, always; one judged from their profiles only where no real one is
            # recorded. A check on a node the environment was not made for (verify --partition of another
            # partition) is not stored: the record says how it does on its own machines.
            if record is not None and not outside:
                real = all(r.on_target for r in reports)
                last_real = record.verify is not None and record.verify.get("on_target", True)
                if real or not target.on_target or not last_real:
                    from envkit.commands.check_store import store_verify

                    store_verify(record, reports, names, target)
            raise typer.Exit(0 if ok else 1)
        finally:
            mounted.close()


def register(app: typer.Typer) -> None:
    app.command()(doctor)
    app.command()(verify)
