"""What `envkit create` does once it has a prepared plan, the same for both ways in (a manifest: commands/create.py;
a lock: commands/from_lock.py): record the target, show the plan or ask, make the environment, report, and with
--verify-on-node check it on a node of the partition."""

from typing import Any, NoReturn, Optional

import typer

from envkit.commands.output import echo_report, print_json
from envkit.commands.targets import target_argv
from envkit.commands.options import CheckOptions, TargetOptions


def check_verify_on_node(target: TargetOptions, json_output: bool, dry_run: bool) -> None:
    """--verify-on-node needs a partition and a Slurm cluster; exit 2 (or 1 without Slurm) before creating."""
    from envkit.errors import BadInputError

    if target.partition is None:
        raise BadInputError("--verify-on-node runs the check on a node of a Slurm partition: add --partition P")
    if json_output:
        raise BadInputError("--verify-on-node prints the node's report as text: leave out --json",
                            hint="Or run `envkit verify NAME --partition P --json` after creating.")
    from envkit.commands.node_check import node_target

    node_target(target)  # the options verify would refuse, refused before the environment is made
    if not dry_run:
        from envkit.slurm.client import Slurm

        Slurm().require()


def for_target(prepared, fleet, target: TargetOptions, **plan_changes: Any):
    """The prepared plan recording what it is made for when that is not this machine (verify judges against it),
    with ``plan_changes`` (for a fleet: why its build leaves GPUs unused)."""
    if target.on_target:
        return prepared
    import dataclasses

    from envkit.machines.target import target_dict

    plan = dataclasses.replace(prepared.plan, target=target_dict(fleet, target_argv(target, absolute=True,
                                                                                     manifests=False)),
                               **plan_changes)
    return dataclasses.replace(prepared, plan=plan)


def make(prepared, manifest, tables, dirs, target: TargetOptions, *, dry_run: bool, yes: bool, force: bool,
         json_output: bool, verbose: bool, probe_timeout: float, verify_on_node: bool, cpu: bool = False,
         listing: str = "`envkit list`", after=None, fleet=None) -> NoReturn:
    """Show the plan (a dry run stops there), ask or refuse, make the environment, report it, and exit: 0 when made
    and checked, 1 when making or a check failed. ``listing`` is the command that lists other builds; ``after``, given
    the outcome, returns it as reported (create --shared publishes it there); ``fleet``: the machines the target
    names, when the caller has them already (not loaded again)."""
    import os
    import sys

    from envkit.create.execute import AlreadyExists, ReplacementFailed, check_available
    from envkit.create.render import plan_json, plan_text
    from envkit.errors import BadInputError

    on_node = ""
    if verify_on_node:  # the check's words as verify --partition says them when it starts the job
        from envkit.commands.node_check import node_target, node_words

        on_node = node_words(*node_target(target))
    if dry_run:
        print_json(plan_json(prepared)) if json_output else echo_report(plan_text(prepared, on_node))
        try:
            check_available(prepared.plan, dirs, force, os.environ)
        except AlreadyExists as taken:  # a dry run changes nothing, but says what the real run would meet
            typer.echo(f"envkit: note: the real run would stop here: {taken.message}", err=True)
            if taken.hint:
                typer.echo(f"  {taken.hint}", err=True)
        if prepared.storage is not None and prepared.storage.short:
            typer.echo("envkit: note: the real run would stop here, before downloading: not enough room: "
                       f"{'; '.join(prepared.storage.short)}", err=True)
        raise typer.Exit(0)
    replaces = check_available(prepared.plan, dirs, force, os.environ)
    from envkit.create.storage import check_room
    from envkit.state.userdirs import config_path

    check_room(prepared.storage, config_path(os.environ, dirs)[0])  # before anything is downloaded: exit 1
    asks = not yes and sys.stdin.isatty()
    if replaces and not yes and not asks:
        raise BadInputError(f"not replacing {prepared.plan.name} without confirmation (nobody to ask here)",
                            hint="Add --yes to replace it.")
    if prepared.plan.gpu_unused and not cpu and not asks:
        raise BadInputError(f"not creating a CPU build on a machine with GPUs: {prepared.plan.gpu_unused}",
                            hint=f"Add --cpu to create it anyway, or --build ID for another build ({listing} lists "
                                 "them).")
    if not json_output:
        typer.echo(plan_text(prepared, on_node))
    elif asks:
        typer.echo(plan_text(prepared, on_node), err=True)  # the question needs the plan; stdout stays JSON
    if asks and not typer.confirm("Create it?", default=not prepared.plan.gpu_unused, err=True):
        typer.echo("envkit: nothing created", err=True)
        raise typer.Exit(1)
    try:
        outcome = _execute(prepared, manifest, tables, dirs, force, verbose, probe_timeout, target_argv(target),
                           _made_from(target), _fleet_target(tables, target, fleet))
    except ReplacementFailed as failed:  # the report says why; the error, printed after it, what was kept
        from envkit.create.render import report_only_json
        from envkit.probe.render import report_text

        print_json(report_only_json(prepared, failed.report)) if json_output else \
            echo_report(report_text(failed.report))
        raise
    if after is not None:  # create --shared: publish what was made (commands/publishing.py)
        outcome = after(outcome)
    if json_output:
        from envkit.create.render import outcome_json

        print_json(outcome_json(prepared, outcome))
    else:
        from envkit.create.render import outcome_text

        echo_report(outcome_text(prepared, outcome))
    failed = outcome.report is not None and not outcome.report.ok
    if verify_on_node and outcome.kept:
        from envkit.commands.node_check import QUEUE_TIMEOUT, verify_on_node as check_on_node
        from envkit.commands.recorded import env_name

        framework = manifest.framework if manifest is not None else "auto"
        status = check_on_node(env_name(outcome.record), None, None, QUEUE_TIMEOUT,
                               CheckOptions(framework=framework, probe_timeout=probe_timeout), target, False)
        failed = failed or status != 0
    raise typer.Exit(1 if failed else 0)


def _made_from(target: TargetOptions) -> Optional[str]:
    """The manifests directory create read (--manifests, $ENVKIT_MANIFESTS or the config's), absolute and resolved,
    for the record (its `envkit create` to make it again names it); None for the shipped manifests."""
    from envkit.catalog import default_manifests_dir
    from envkit.commands.places import manifests_dir
    from envkit.errors import BadInputError
    from envkit.state.files import real_path

    directory = real_path(manifests_dir(target.manifests))
    try:
        shipped = real_path(default_manifests_dir())
    except BadInputError:  # an installation without its own manifests: these are not them
        return str(directory)
    return None if directory == shipped else str(directory)


def _fleet_target(tables, target: TargetOptions, fleet=None):
    """The machines the environment is for when they are several (its check judges the one it is planned on, and
    the build it advises must fit them all, or one per group, each named as `envkit create` names a group).
    ``fleet``: the target's, when the caller has it."""
    if not target.elsewhere:
        return None
    from envkit.commands.targets import fleet_for, group_command

    fleet = fleet if fleet is not None else fleet_for(tables, target)
    if fleet.single is not None:
        return None
    from envkit.probe.builds import FleetTarget

    return FleetTarget(fleet, lambda manifest, group: group_command(fleet, target, manifest, group))


def _execute(prepared, manifest, tables, dirs, force: bool, verbose: bool, probe_timeout: float,
             machine_args: list[str], manifests: Optional[str], fleet=None):
    """Make the environment, with progress on stderr and the post-install check as `envkit run` would run it; the
    commands its advice gives name the target as create was told it (``machine_args``; ``fleet``: its machines when
    they are several); its record names the manifests directory it was made from (``manifests``: None for the
    shipped one)."""
    import os
    import sys

    from envkit.create.execute import execute, step_count
    from envkit.create.progress import Progress, live_terminal, progress_interval

    progress = Progress(sys.stderr, step_count(prepared.plan), verbose=verbose,
                        live=live_terminal(sys.stderr, os.environ), interval=progress_interval(os.environ))

    def checker(plan, python):
        from envkit.probe.check import check_against
        from envkit.probe.runner import ProbeOptions
        from envkit.system.activation import activated_environ

        from envkit.probe.builds import companions_of

        options = ProbeOptions(framework=manifest.framework, timeout=probe_timeout,
                               companions=companions_of(plan.build, manifest, str(plan.python)))
        environ = activated_environ(plan.prefix, plan.kind, plan.name, os.environ)  # as `envkit run` runs it
        [report] = check_against(python, options, [(plan.profile, plan.on_target)], environ,
                                 manifest_for=lambda _: manifest, tables=tables, expected=plan.build,
                                 machine_args=[machine_args], fleet=fleet)
        return report

    return execute(prepared, dirs, progress, force, checker, os.environ, manifests=manifests)
