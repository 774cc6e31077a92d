"""Reproducible environments: ``envkit lock`` (pin a build exactly, in conda-lock's format) and ``envkit export``
(the lock of an environment as it is installed). ``envkit create --from-lock`` installs one (commands/create.py)."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit.commands.common import manifests_dir, print_json, reported_errors, user_dirs
from envkit.commands.options import JsonOption, ManifestsOption, TargetOptions, with_options

OutputOption = Annotated[
    Path, typer.Option("--output", "-o", metavar="FILE", help="Where to write the lock (replaced if it exists).")
]


@with_options
def lock(
    manifest: Annotated[
        str, typer.Argument(metavar="MANIFEST", help="What to lock: torch, tensorflow, jax, mxnet (`envkit list`).")
    ],
    build: Annotated[
        Optional[str],
        typer.Option("--build", metavar="ID", help="Lock this build (an id from `envkit list MANIFEST`) instead of "
                     "the newest one that fits the target.", show_default=False),
    ] = None,
    python: Annotated[
        Optional[str],
        typer.Option("--python", metavar="X.Y", help="The environment's Python. Default: as `envkit create` "
                     "picks it.", show_default=False),
    ] = None,
    output: OutputOption = Path("conda-lock.yml"),
    json_output: JsonOption = False,
    target: TargetOptions = TargetOptions(),
) -> None:
    """Pin the build of MANIFEST that `envkit create` would install for the target, exactly, without installing.

    The conda part (legacy conda builds) is solved by envkit's embedded engine for linux-64 with the target's
    __cuda (its driver) and __cuda_arch (its oldest GPU); the pip part is resolved by uv from the build's own index
    for the target's Python. Every package is written with its upstream URL and its hashes, in conda-lock's format
    (conda-lock and micromamba read it). Install it anywhere with `envkit create --from-lock FILE`: the same files,
    hash-checked, through your mirrors.

    For several machines (--machine repeated or a directory, --partition P of the site file) the build is one that
    fits every machine, solved with the lowest __cuda and __cuda_arch among them.

    Examples: `envkit lock torch`, `envkit lock torch --machine a100-node.yaml -o torch-a100.lock.yml`,
    `envkit lock torch --partition gpu-4-a100`.

    Exit codes: 0 written, 1 the solve or the index failed, 2 bad input.
    """
    with reported_errors():
        import os

        from envkit.catalog.cache import cached_catalog
        from envkit.config import load_config
        from envkit.lockfile.make import LockRequest, make_lock
        from envkit.resolve import parse_python_request

        dirs = user_dirs()
        config = load_config(os.environ, dirs)
        catalog = cached_catalog(manifests_dir(target.manifests), [manifest], dirs.cache)
        tables = catalog.tables
        request = parse_python_request(python, tables.python)
        from envkit.commands.common import build_for_target, fleet_for, target_args

        the_manifest = catalog.manifests[manifest]
        fleet = fleet_for(tables, target)

        def warn(line: str) -> None:
            typer.echo(f"envkit: warning: {line}", err=True)

        profile, build_id, unused = build_for_target(the_manifest, fleet, tables, request, build, target, python)
        if unused:
            warn(f"the lock pins a CPU build for machines with GPUs: {unused}")
        made = make_lock(LockRequest(manifest=the_manifest, tables=tables, profile=profile,
                                     target=_target_words(target, fleet), on_target=target.on_target, python=request,
                                     build_id=build_id, target_args=target_args(target),
                                     gpus=tuple(gpu for c in fleet.configs() for gpu in c.profile.gpus)),
                         config, dirs.conda_packages, _uv(), os.environ, _isolated(dirs), warn=warn)
        _write(made, output)
        _report(made, output, json_output)


def export(
    env: Annotated[str, typer.Argument(metavar="ENV", help="An environment envkit made (`envkit envs`).")],
    output: OutputOption = Path("conda-lock.yml"),
    json_output: JsonOption = False,
    manifests: ManifestsOption = None,
) -> None:
    """Write the lock of environment ENV as it is installed now (conda-lock's format).

    The conda part comes from the environment's conda-meta records; the pip part from its installed distributions,
    each pinned to the wheel URL and sha256 it was installed from (looked up on the environment's index when the
    environment does not say). `envkit create --from-lock FILE` makes the same environment elsewhere.

    Exit codes: 0 written, 1 a package could not be pinned, 2 bad input (no such environment).
    """
    with reported_errors():
        import os

        from envkit.commands.common import find_record
        from envkit.config import load_config
        from envkit.lockfile.export import export_lock

        dirs = user_dirs()
        record = find_record(env)
        def index_of(made_from):
            from envkit.catalog.cache import cached_catalog

            catalog = cached_catalog(manifests_dir(manifests), [made_from.manifest], dirs.cache)
            for candidate in catalog.manifests[made_from.manifest].builds:
                if candidate.id == made_from.build:
                    pip = candidate.pip
                    return (pip.index_url if pip and pip.index_url else None) or catalog.tables.python.pypi_index
            return None

        made = export_lock(record, load_config(os.environ, dirs), _uv(), _isolated(dirs), index_of)
        _write(made, output)
        _report(made, output, json_output)


def _target_words(target: TargetOptions, fleet) -> str:
    """What a lock is for, in words: this machine, a partition, profiles."""
    from envkit.fleet import names_text

    if target.on_target:
        return "this machine"
    if target.partition is not None:
        return f"partition {target.partition}"
    return f"machines {names_text(fleet.names)}" if fleet.single is None else f"profile {fleet.names[0]}"


def _uv() -> Path:
    from uv import find_uv_bin

    return Path(find_uv_bin())


def _isolated(dirs):
    import os

    from envkit.installers import installer_environ

    return installer_environ(os.environ, dirs)


def _write(made, output: Path) -> None:
    from envkit.errors import EnvkitError
    from envkit.files import write_atomic
    from envkit.lockfile.format import dump_lock

    try:
        write_atomic(output, dump_lock(made, output.name).encode("utf-8"))
    except OSError as error:
        raise EnvkitError(f"cannot write {output}: {error.strerror or error}",
                          hint="Choose another --output.") from None


def _report(made, output: Path, json_output: bool) -> None:
    conda, pip = made.conda(), made.pip()
    if json_output:
        print_json({"output": str(output), "conda": len(conda), "pip": len(pip), "metadata": dict(made.custom),
                    "packages": [{"name": p.name, "version": p.version, "manager": p.manager, "url": p.url,
                                  "sha256": p.sha256} for p in made.packages]})
        return
    typer.echo(f"Locked {len(conda)} conda and {len(pip)} pip packages into {output}")
    import shlex

    typer.echo(f"Install it with: {shlex.join(['envkit', 'create', '--from-lock', str(output)])}")


def register(app: typer.Typer) -> None:
    app.command()(lock)
    app.command()(export)


def create_from_lock(path: Path, manifest, name, prefix, build, python, backend, dry_run: bool, yes: bool,
                     force: bool, json_output: bool, verify: bool, jupyter: bool, verbose: bool,
                     probe_timeout: float, target: TargetOptions, verify_on_node: bool = False) -> None:
    """`envkit create --from-lock FILE`: the options that choose what to install do not go with it."""
    with reported_errors():
        import os
        import sys

        from envkit.errors import BadInputError

        clashing = [flag for flag, given in (("MANIFEST", manifest), ("--build", build), ("--python", python),
                                             ("--jupyter", jupyter or None),

                                             ("--backend", None if backend == "auto" else backend)) if given]
        if clashing:
            raise BadInputError(f"--from-lock installs what the lock pins: {', '.join(clashing)} cannot go with it",
                                hint="Leave them out, or make another lock (`envkit lock MANIFEST --build ID`).")
        from envkit.catalog.cache import cached_catalog
        from envkit.commands.create import _execute, _print_outcome
        from envkit.config import load_config
        from envkit.create.execute import AlreadyExists, check_available
        from envkit.create.render import plan_json, plan_text
        from envkit.errors import EnvkitError
        from envkit.lockfile.format import read_lock
        from envkit.lockfile.install import FromLock, Target, prepare_from_lock

        if verify_on_node:
            from envkit.commands.create import _check_verify_on_node

            _check_verify_on_node(target, json_output, dry_run)
        dirs = user_dirs()
        config = load_config(os.environ, dirs)
        the_lock = read_lock(path, dirs.cache)
        from envkit.lockfile.model import MANIFEST

        directory = manifests_dir(target.manifests)
        named = the_lock.fact(MANIFEST)
        try:  # the tables, and the lock's manifest when the manifests still have it: one load
            catalog = cached_catalog(directory, [named] if named else [], dirs.cache)
        except EnvkitError:  # a lock whose manifest is gone (or not envkit's): judged by its packages alone
            catalog = cached_catalog(directory, [], dirs.cache)
        tables = catalog.tables

        def manifest_of(manifest_name):
            return catalog.manifests.get(manifest_name)

        from envkit.commands.common import fleet_for, target_args, target_argv

        fleet = fleet_for(tables, target)
        configs = [c for c in fleet.configs() if c.has_gpus] or list(fleet.configs())
        profile = fleet.single or min(configs, key=lambda c: tuple(c.profile.cuda_driver or (0, 0))).profile
        machine = "this machine" if target.on_target else _target_words(target, fleet)
        each = tuple((", ".join(c.names), c.profile) for c in fleet.configs()) if fleet.single is None else ()
        prepared, the_manifest = prepare_from_lock(FromLock(path=path, name=name, prefix=prefix, verify=verify),
                                                   the_lock, manifest_of, tables,
                                                   Target(profile, target.on_target, machine, target_args(target),
                                                          each), config, dirs, os.environ)
        if not target.on_target:  # what it was made for, as create records it (verify judges against it)
            import dataclasses

            from envkit.target import target_dict

            plan = dataclasses.replace(prepared.plan, target=target_dict(
                fleet, target_argv(target, absolute=True, manifests=False)))
            prepared = dataclasses.replace(prepared, plan=plan)
        if verify and the_manifest is None:
            typer.echo("envkit: note: the lock names no build of envkit's manifests: no post-install check",
                       err=True)
        if dry_run:
            print_json(plan_json(prepared)) if json_output else typer.echo(plan_text(prepared))
            try:
                check_available(prepared.plan, dirs, force, os.environ)
            except AlreadyExists as taken:
                typer.echo(f"envkit: note: the real run would stop here: {taken.message}", err=True)
            return
        if check_available(prepared.plan, dirs, force, os.environ) and not yes and not sys.stdin.isatty():
            from envkit.errors import BadInputError

            raise BadInputError(f"not replacing {prepared.plan.name} without confirmation (nobody to ask here)",
                                hint="Add --yes to replace it.")
        if not json_output:
            typer.echo(plan_text(prepared))
        if not yes and sys.stdin.isatty() and not typer.confirm("Create it?", default=True, err=True):
            typer.echo("envkit: nothing created", err=True)
            raise typer.Exit(1)
        outcome = _execute(prepared, the_manifest, tables, dirs, force, verbose, probe_timeout)
        _print_outcome(prepared, outcome, json_output)
        failed = outcome.report is not None and not outcome.report.ok
        if verify_on_node:  # as `envkit create --verify-on-node` does it
            from envkit.commands.node_check import verify_on_node as check_on_node
            from envkit.commands.options import CheckOptions

            framework = the_manifest.framework if the_manifest is not None else "auto"
            status = check_on_node(prepared.plan.name, None, None, 300.0,
                                   CheckOptions(framework=framework, probe_timeout=probe_timeout), target, False)
            failed = failed or status != 0
        raise typer.Exit(1 if failed else 0)
