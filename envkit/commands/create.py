"""Making an environment: ``envkit create``."""

from pathlib import Path
from typing import Annotated, List, Optional

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
    from_bundle: Annotated[
        Optional[Path],
        typer.Option("--from-bundle", metavar="PATH", parser=path_value,
                     help="Install from an offline bundle (`envkit bundle`: a directory or tar) with no network: its "
                     "lock, as --from-lock does, every file taken from the bundle and hash-checked first.",
                     show_default=False),
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
    with_packages: Annotated[
        Optional[List[str]],
        typer.Option("--with", metavar="PKG,...", help="Your own packages too, comma-separated (repeatable), from "
                     "the default index with the build held, as `envkit add` installs them: refused, and nothing "
                     "made, when they cannot live with the build.", show_default=False),
    ] = None,
    requirement: Annotated[
        Optional[List[Path]],
        typer.Option("--requirement", "-r", metavar="FILE", parser=path_value, help="Your own packages from this "
                     "requirements file, as --with (the same rules as `envkit add ENV -r FILE`). Repeatable.",
                     show_default=False),
    ] = None,
    on: Annotated[
        Optional[str],
        typer.Option("--on", metavar="SITE:NAME", help="A personal environment on top of the site's shared one: a "
                     "small venv whose Python sees its packages (of the version published now, kept while it "
                     "exists) and holds its build; with --name, and --with for your own packages. No MANIFEST.",
                     show_default=False),
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
    machine it fits (see `envkit lock`); `envkit create --from-bundle DIR` installs an offline bundle's (see `envkit
    bundle`).

    `--with transformers,datasets` (or `-r requirements.txt`) adds your own packages in the same run, the build
    held as `envkit add` holds it; `envkit add ENV PKG` adds more later.

    Exit codes: 0 created and checked, 1 failed (nothing left behind) or the check failed, 2 bad input.
    """
    if from_lock is not None or from_bundle is not None:
        if with_packages or requirement:
            with reported_errors():
                from envkit.errors import BadInputError

                raise BadInputError("--with and -r add to a build envkit picks: a lock or a bundle is installed "
                                    "exactly as it is", hint="Add them once it is made: `envkit add ENV PKG`.")
        from envkit.commands.from_lock import create_from_lock

        create_from_lock(from_lock, from_bundle, target, manifest=manifest, name=name, prefix=prefix, build=build,
                         python=python, backend=backend, dry_run=dry_run, yes=yes, force=force, json_output=json_output,
                         verify=not no_verify, jupyter=jupyter, verbose=verbose, probe_timeout=probe_timeout,
                         verify_on_node=verify_on_node)
        return
    if on is not None:
        with reported_errors():
            from envkit.commands.personal import create_on
            from envkit.errors import BadInputError

            if manifest is not None or shared or build is not None or not target.on_target:
                raise BadInputError("--on makes an environment of the site's build, for the machines it is for: "
                                    "leave out MANIFEST, --build, --shared and the machine options",
                                    hint=f"envkit create --on {on} --name NAME")
            create_on(on, name, prefix, _additions(with_packages, requirement, None), dry_run=dry_run, yes=yes,
                      force=force, json_output=json_output, verbose=verbose, probe_timeout=probe_timeout,
                      verify=not no_verify)
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
        additions = _additions(with_packages, requirement, the_manifest)
        python_for = None
        if place is not None:  # a venv's Python must be one every user it is for can run
            from envkit.commands.publishing import python_finder

            python_for = python_finder(place)
        prepared = prepare(
            CreateRequest(build_id=chosen.build_id, name=name, backend=backend, prefix=prefix, jupyter=jupyter,
                          verify=not no_verify, target_args=target_args(target, python), python_for=python_for,
                          additions=additions),
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
        from envkit.backends.clash import Refused

        try:
            with publishing:
                make(prepared, the_manifest, tables, dirs, target, dry_run=dry_run, yes=yes, force=force,
                     json_output=json_output, verbose=verbose, probe_timeout=probe_timeout,
                     verify_on_node=verify_on_node, cpu=cpu,
                     listing=f"`{list_command(manifest, target_args(target, python))}`", after=after, fleet=fleet)
        except Refused as refused:  # --with: the next step, as `envkit add` gives it
            from envkit.commands.adding import MadeFrom, next_step
            from envkit.commands.targets import target_argv

            plan = prepared.plan
            refused.hint = next_step(refused.clash, plan.name, MadeFrom(the_manifest, plan.build, tables, None),
                                     plan.profile, str(plan.python), target_argv(target), list(additions))
            raise


def _additions(with_packages, requirement, manifest) -> tuple[str, ...]:
    """The user's own packages of --with (comma-separated; a comma inside a version range stays) and -r, checked
    as `envkit add` checks them (envkit.backends.requested)."""
    if not with_packages and not requirement:
        return ()
    import re

    from envkit.backends.installers import requirement_parts
    from envkit.backends.requested import requested

    own: list[str] = []
    if manifest is not None:  # (--on: the site's, which add knows from the environment made)
        own = [manifest.framework, *manifest.companions,  # every build's packages: the pick is not made yet
               *{requirement_parts(text).name for b in manifest.builds for text in (b.pip.packages if b.pip else ())}]
    texts = [part for value in with_packages or () for part in re.split(r",(?=\s*[A-Za-z0-9./~])", value)]
    return requested(texts, list(requirement or []), own).lines


def register(app: typer.Typer) -> None:
    app.command()(create)
