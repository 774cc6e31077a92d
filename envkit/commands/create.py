"""Making an environment: ``envkit create``."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit.commands import completion
from envkit.commands.output import reported_errors
from envkit.commands.places import manifests_dir, user_dirs
from envkit.commands.targets import build_for_target, fleet_for, target_args
from envkit.commands.options import JsonOption, ProbeTimeoutOption, TargetOptions, path_value, with_options


@with_options
def create(
    manifest: Annotated[
        Optional[str],
        typer.Argument(metavar="[MANIFEST]", help="What to install: torch, tensorflow, jax, mxnet (`envkit list`). "
                       "Not with --from-lock.", show_default=False, autocompletion=completion.manifest_names),
    ] = None,
    name: Annotated[
        Optional[str],
        typer.Option("--name", "-n", metavar="ENV", help="The environment's name. Default: the manifest and the "
                     "variant, e.g. torch-cu126.", show_default=False),
    ] = None,
    build: Annotated[
        Optional[str],
        typer.Option("--build", metavar="ID", help="Install this build (an id from `envkit list MANIFEST`) instead "
                     "of the newest one that fits.", show_default=False, autocompletion=completion.build_ids),
    ] = None,
    python: Annotated[
        Optional[str],
        typer.Option("--python", metavar="X.Y", help="The environment's Python. Default: python.yaml's default, or "
                     "the closest the build publishes.", show_default=False),
    ] = None,
    backend: Annotated[
        str,
        typer.Option("--backend", metavar="BACKEND",
                     help="auto, conda, rattler or venv. conda: your conda, mamba or micromamba. rattler: envkit's embedded conda engine (no "
                     "conda needed; brings old Pythons, cudatoolkit). venv: a virtual environment from a Python on "
                     "this machine, installed with uv. auto: the plan says which and why."),
    ] = "auto",
    prefix: Annotated[
        Optional[Path],
        typer.Option("--prefix", metavar="PATH", parser=path_value,
                     help="Create the environment in this directory (must not exist).",
                     show_default=False),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and the exact commands; change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before creating.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an environment of the same name (kept if the new one fails, "
                           "or fails its check).")
    ] = False,
    json_output: JsonOption = False,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Skip the post-install check.")] = False,
    jupyter: Annotated[
        bool, typer.Option("--jupyter", help="Also install ipykernel and register a Jupyter kernel named after it.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the installers' own output.")] = False,
    cpu: Annotated[
        bool, typer.Option("--cpu", help="Go ahead when the pick is a CPU build on a machine with GPUs (without a "
                           "terminal to ask, create stops there unless --cpu or --build is given).")
    ] = False,
    probe_timeout: ProbeTimeoutOption = 300.0,
    verify_on_node: Annotated[
        bool, typer.Option("--verify-on-node", help="With --partition on a Slurm login node: once created, run the "
                           "check on a node of the partition through srun, as `envkit verify NAME --partition P`.")
    ] = False,
    from_lock: Annotated[
        Optional[Path],
        typer.Option("--from-lock", metavar="FILE", parser=path_value,
                     help="Install exactly what this conda-lock.yml pins (from `envkit lock`, `envkit export` or "
                     "conda-lock): every file hash-checked, no solve. Refused when the lock was made for a machine "
                     "unlike the target.", show_default=False),
    ] = None,
    shared: Annotated[
        bool, typer.Option("--shared", help="Admins: publish it for every user of the site into the shared directory "
                           "($ENVKIT_SHARED, or `shared:` in the config or site file) as site:NAME (NAME: --name, "
                           "else the manifest), a new version that is never changed, with its modulefiles; --force "
                           "publishes a replacement (jobs running the old version keep it). See docs/admin.md.")
    ] = False,
    group: Annotated[
        Optional[str],
        typer.Option("--group", metavar="GROUP", help="With --shared: readable by this group only (setgid "
                     "directories), not by everyone.", show_default=False),
    ] = None,
    target: TargetOptions = TargetOptions(),
) -> None:
    """Create an environment with the newest build of MANIFEST that runs on this machine, check it, record it.

    envkit picks the build as `envkit list MANIFEST` does, shows the plan (where, which Python, which packages from
    which index or channels, the commands), creates the environment without sudo, installs the build from its own
    index only, runs the post-install GPU check, and prints how to activate it. A failure or Ctrl-C leaves nothing
    half-made behind.

    Packages are fetched from the upstream URLs in the manifests, or from mirrors set in envkit's config file
    ($ENVKIT_CONFIG, else ~/.config/envkit/config.yaml; key `mirrors:` maps an upstream URL prefix to a mirror).
    Set ENVKIT_INSTALLER=pip to install with pip instead of uv.

    For several machines (--machine repeated or a directory, --partition) the build must fit every one of them;
    when no GPU build does, create makes nothing and prints the commands that make one environment per group. An
    environment made for other machines records them: `envkit verify NAME` judges it against them.

    Examples: `envkit create torch`, `envkit create tensorflow --dry-run`,
    `envkit create torch --machine a100-node.yaml --name torch-a100` (on a login node, for a GPU partition),
    `envkit create torch --partition gpu-4-a100`.

    `envkit create --from-lock conda-lock.yml --name ENV` installs a lock instead: the same environment on every
    machine it fits (see `envkit lock`).

    Exit codes: 0 created and checked, 1 failed (nothing left behind) or the check failed, 2 bad input.
    """
    if from_lock is not None:
        from envkit.commands.from_lock import create_from_lock

        create_from_lock(from_lock, target, manifest=manifest, name=name, prefix=prefix, build=build, python=python,
                         backend=backend, dry_run=dry_run, yes=yes, force=force, json_output=json_output,
                         verify=not no_verify, jupyter=jupyter, verbose=verbose, probe_timeout=probe_timeout,
                         verify_on_node=verify_on_node)
        return
    with reported_errors():
        if manifest is None:
            from envkit.errors import BadInputError

            raise BadInputError("give a MANIFEST to create (torch, tensorflow, ...), or --from-lock FILE",
                                hint="`envkit list` shows the manifests.")
        import os

        from envkit.catalog.cache import cached_catalog
        from envkit.commands.making import check_verify_on_node, for_target, make
        from envkit.create.prepare import CreateRequest, prepare
        from envkit.pick.render import list_command
        from envkit.pick.resolve import parse_python_request
        from envkit.state.config import load_config

        if verify_on_node:
            check_verify_on_node(target, json_output, dry_run)
        dirs = user_dirs()
        config = load_config(os.environ, dirs)
        catalog = cached_catalog(manifests_dir(target.manifests), [manifest], dirs.cache)
        tables = catalog.tables
        request = parse_python_request(python, tables.python)
        the_manifest = catalog.manifests[manifest]
        place = None
        if group is not None and not shared:
            from envkit.errors import BadInputError

            raise BadInputError("--group names who may read a shared environment: add --shared")
        if shared:  # who publishes where, checked before anything is planned (commands/publishing.py)
            from envkit.commands.publishing import shared_target

            place = shared_target(config, dirs, name, manifest, force, group, prefix, jupyter)
            name, prefix = place.name, place.layout.prefix(place.name, "new")
        fleet = fleet_for(tables, target)
        chosen = build_for_target(the_manifest, fleet, tables, request, build, target, python)
        python_for = None
        if place is not None:  # a venv's Python must be one every user it is for can run
            from envkit.commands.publishing import python_finder

            python_for = python_finder(place)
        prepared = prepare(
            CreateRequest(build_id=chosen.build_id, name=name, backend=backend, prefix=prefix, jupyter=jupyter,
                          verify=not no_verify, target_args=target_args(target, python), python_for=python_for),
            the_manifest, tables, chosen.profile, target.on_target, request, config, dirs, os.environ,
            resolution=chosen.resolution,
        )
        fleet_pick = fleet.single is None and build is None  # the fleet's verdict on unused GPUs, not one machine's
        prepared = for_target(prepared, fleet, target, **({"gpu_unused": chosen.gpu_unused} if fleet_pick else {}))
        after = None
        if place is not None:  # a new version beside the current one, published once made and checked
            from envkit.commands.publishing import publisher, staging

            prepared, dirs, version = staging(prepared, place, dirs)
            after = publisher(place, version)
        import contextlib

        publishing = contextlib.nullcontext()
        if place is not None and not dry_run:  # one publication of a name at a time (a second one is told so)
            from envkit.commands.publishing import publication

            publishing = publication(place, version)
        with publishing:
            make(prepared, the_manifest, tables, dirs, target, dry_run=dry_run, yes=yes, force=force,
                 json_output=json_output, verbose=verbose, probe_timeout=probe_timeout,
                 verify_on_node=verify_on_node, cpu=cpu,
                 listing=f"`{list_command(manifest, target_args(target, python))}`", after=after, fleet=fleet)


def register(app: typer.Typer) -> None:
    app.command()(create)
