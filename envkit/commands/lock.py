"""Reproducible environments: ``envkit lock`` (pin a build exactly, in conda-lock's format) and ``envkit export``
(the lock of an environment as it is installed). ``envkit create --from-lock`` installs one (commands/from_lock.py)."""

from pathlib import Path
from typing import Annotated, Optional, Sequence

import typer

from envkit.commands import completion
from envkit.commands.output import print_json, reported_errors
from envkit.commands.places import manifests_dir, user_dirs, uv_binary, uv_environ
from envkit.commands.recorded import recorded_manifests
from envkit.commands.targets import target_words
from envkit.commands.options import JsonOption, ManifestsOption, TargetOptions, file_path_value, with_options

OutputOption = Annotated[
    Path, typer.Option("--output", "-o", metavar="FILE", parser=file_path_value,
                       help="Where to write the lock (a file there is replaced; a symbolic link is refused "
                       "unless --force).")
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Replace a symbolic link at --output by the lock (its target stays as it "
                       "was). Without it a link is refused: envkit never writes through one.")
]


@with_options
def lock(
    manifest: Annotated[
        str, typer.Argument(metavar="MANIFEST|ENV", help="What to lock: torch, tensorflow, jax, mxnet (`envkit "
                            "list`); or an environment of yours (`envkit envs`): its build, for the machines it was "
                            "made for, with the packages you added to it.",
                            autocompletion=completion.manifest_names)
    ],
    build: Annotated[
        Optional[str],
        typer.Option("--build", metavar="ID", help="Lock this build (an id from `envkit list MANIFEST`) instead of "
                     "the newest one that fits the target.", show_default=False, autocompletion=completion.build_ids),
    ] = None,
    python: Annotated[
        Optional[str],
        typer.Option("--python", metavar="X.Y", help="The environment's Python. Default: as `envkit create` "
                     "picks it.", show_default=False),
    ] = None,
    output: OutputOption = Path("conda-lock.yml"),
    force: ForceOption = False,
    json_output: JsonOption = False,
    target: TargetOptions = TargetOptions(),
) -> None:
    """Pin the build of MANIFEST that `envkit create` would install for the target, exactly, without installing.

    The lock is for the target's platform (linux-64, or linux-aarch64 for a Grace partition from any login node). The
    conda part (legacy conda builds) is solved by envkit's embedded engine for that platform with the target's __cuda
    (its driver) and __cuda_arch (its oldest GPU); the pip part is resolved by uv from the build's own index for the
    target's Python and platform. Every package is written with its upstream URL and its hashes, in conda-lock's format
    (conda-lock and micromamba read it). Install it anywhere with `envkit create --from-lock FILE`: the same files,
    hash-checked, through your mirrors.

    For several machines (--machine repeated or a directory, --partition P of the site file) the build is one that
    fits every machine, solved with the lowest __cuda and __cuda_arch among them.

    Examples: `envkit lock torch`, `envkit lock torch --machine a100-node.yaml -o torch-a100.lock.yml`,
    `envkit lock torch --partition gpu-4-a100`.

    `envkit lock ENV` (an environment of yours, when no manifest has that name) locks its build anew for the
    machines it was made for, with the packages you added to it as installed there: `create --from-lock` then makes
    the whole working environment.

    Exit codes: 0 written, 1 the solve or the index failed, 2 bad input.
    """
    with reported_errors():
        import os

        from envkit.catalog.cache import cached_catalog
        from envkit.lockfile.make import LockRequest, make_lock
        from envkit.pick.resolve import parse_python_request
        from envkit.state.config import load_config
        from envkit.state.output import check_output

        check_output(output, force=force, what="the lock")  # before the solve, not after it
        dirs = user_dirs()
        config = load_config(os.environ, dirs)
        record = None
        from envkit.catalog import manifest_names

        if manifest not in manifest_names(manifests_dir(target.manifests)) and _an_environment(manifest, dirs):
            from envkit.commands.recorded import find_record  # envkit lock ENV: its build, target and additions
            from envkit.commands.targets import recorded_target

            record = find_record(manifest)
            target = target if not target.on_target else (recorded_target(record) or target)
            target = target._replace(manifests=recorded_manifests(record, target.manifests))
            manifest, build, python = record.manifest, build or record.build, python or record.python
        catalog = cached_catalog(manifests_dir(target.manifests), [manifest], dirs.cache)
        tables = catalog.tables
        request = parse_python_request(python, tables.python)
        from envkit.commands.targets import build_for_target, fleet_for, target_args, target_argv

        the_manifest = catalog.manifests[manifest]
        fleet = fleet_for(tables, target)

        def warn(line: str) -> None:
            typer.echo(f"envkit: warning: {line}", err=True)

        chosen = build_for_target(the_manifest, fleet, tables, request, build, target, python, command="lock")
        if chosen.gpu_unused:
            warn(f"the lock pins a CPU build for machines with GPUs: {chosen.gpu_unused}")
        from envkit.backends.installers import installer_environ
        from envkit.create.storage import package_cache
        from envkit.storage.cache import using_cache

        cache = package_cache(config, dirs, os.environ)  # the package caches `create` uses (docs/storage.md)
        with using_cache(cache.root):  # its parts made this user's alone, and no clean while uv and rattler use it
            made = make_lock(LockRequest(manifest=the_manifest, tables=tables, profile=chosen.profile,
                                         target=target_words(target, fleet), on_target=target.on_target,
                                         python=request, build_id=chosen.build_id, target_args=target_args(target),
                                         gpus=tuple(gpu for c in fleet.configs() for gpu in c.profile.gpus),
                                         resolution=chosen.resolution),
                             config, cache.conda_packages, uv_binary(), os.environ,
                             installer_environ(os.environ, dirs, None, cache.root), warn=warn)
            if record is not None and record.added:
                from envkit.lockfile.export import with_additions

                made = with_additions(made, record, config, uv_binary(),
                                      installer_environ(os.environ, dirs, None, cache.root), tables.python.pypi_index)
        _write(made, output, force)
        _report(made, output, json_output, target_argv(target))


def _an_environment(name: str, dirs) -> bool:
    """Whether ``name``, which no manifest has, names an environment (the user's, or site:NAME) for `envkit lock ENV`;
    a name that is neither goes on as a manifest's, and its error names the nearest manifest."""
    import os

    from envkit.commands.recorded import plain_name
    from envkit.shared.layout import shared_name
    from envkit.state.records import index_path

    return shared_name(name) is not None or (plain_name(name) and os.path.lexists(index_path(dirs.records, name)))


def _lock_format(value: str) -> str:
    if value not in ("conda-lock", "pylock"):
        raise typer.BadParameter(f"{value!r} is not one of conda-lock, pylock")
    return value


def export(
    env: Annotated[str, typer.Argument(metavar="ENV", help="An environment envkit made (`envkit envs`).",
                                       autocompletion=completion.environment_names)],
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", metavar="FILE", parser=file_path_value, show_default=False,
        help="Where to write it (a file there is replaced; a symbolic link is refused unless --force). Default: "
        "conda-lock.yml, or pylock.toml with --format pylock.")] = None,
    force: ForceOption = False,
    lock_format: Annotated[str, typer.Option(
        "--format", metavar="FORMAT", callback=_lock_format,
        help="conda-lock (conda-lock's unified format, the default) or pylock (PEP 751's pylock.toml, which pip, uv "
        "and PDM read: for an environment of pip packages only).")] = "conda-lock",
    json_output: JsonOption = False,
    manifests: ManifestsOption = None,
) -> None:
    """Write the lock of environment ENV as it is installed now (conda-lock's format, or PEP 751's pylock.toml).

    The conda part comes from the environment's conda-meta records; the pip part from its installed distributions,
    each pinned to the wheel URL and sha256 it was installed from (looked up on the environment's index when the
    environment does not say). `envkit create --from-lock FILE` makes the same environment elsewhere.

    Exit codes: 0 written, 1 a package could not be pinned, 2 bad input (no such environment).
    """
    with reported_errors():
        import os

        from envkit.commands.recorded import find_record
        from envkit.lockfile.export import export_lock
        from envkit.state.config import load_config
        from envkit.state.output import check_output

        if output is None:
            output = Path("pylock.toml" if lock_format == "pylock" else "conda-lock.yml")
        check_output(output, force=force, what="the lock")  # before anything is looked up

        dirs = user_dirs()
        record = find_record(env)  # as run and verify: no create of it going on or interrupted, its directory holds it
        manifests = recorded_manifests(record, manifests)  # its build's index, and the manifests its lock installs with

        def index_of(made_from):
            from envkit.catalog.cache import cached_catalog

            catalog = cached_catalog(manifests_dir(manifests), [made_from.manifest], dirs.cache)
            for candidate in catalog.manifests[made_from.manifest].builds:
                if candidate.id == made_from.build:
                    pip = candidate.pip
                    return (pip.index_url if pip and pip.index_url else None) or catalog.tables.python.pypi_index
            return None

        def default_index() -> str:
            from envkit.catalog import load_tables

            return load_tables(manifests_dir(manifests)).python.pypi_index

        made = export_lock(record, load_config(os.environ, dirs), uv_binary(), uv_environ(), index_of,
                           default_index() if record.added else None)
        if lock_format == "pylock":
            _write_pylock(made, output, force)
        else:
            _write(made, output, force)
        # Installed where the environment's build fits: the machines it was made for (its record keeps how they
        # were named), not the machine the lock happens to be installed on.
        _report(made, output, json_output,
                [*record.target_options(), *(["--manifests", str(manifests)] if manifests is not None else [])])


def _write_pylock(made, output: Path, force: bool) -> None:
    from envkit.lockfile.pep751 import dump_pylock, is_pylock

    if not is_pylock(output):
        from envkit.errors import BadInputError

        raise BadInputError(f"{output.name}: PEP 751 names lock files pylock.toml or pylock.NAME.toml",
                            hint="Give -o pylock.toml (or pylock.NAME.toml).")
    _write_text(dump_pylock(made, output.name), output, force)


def _write_text(text: str, output: Path, force: bool) -> None:
    from envkit.errors import EnvkitError
    from envkit.state.output import write_output

    try:
        write_output(output, text.encode("utf-8"), force=force, what="the lock")
    except OSError as error:
        raise EnvkitError(f"cannot write {output}: {error.strerror or error}",
                          hint="Choose another --output.") from None


def _write(made, output: Path, force: bool) -> None:
    from envkit.lockfile.format import dump_lock, install_name

    _write_text(dump_lock(made, output.name, install_name(output)), output, force)


def _report(made, output: Path, json_output: bool, target: Sequence[str] = ()) -> None:
    """What was written, and the command that installs it; ``target``: the options that named the machines the lock
    is for (a lock for other machines is refused here without them)."""
    conda, pip = made.conda(), made.pip()
    if json_output:
        print_json({"output": str(output), "conda": len(conda), "pip": len(pip), "metadata": dict(made.custom),
                    "packages": [{"name": p.name, "version": p.version, "manager": p.manager, "url": p.url,
                                  "sha256": p.sha256} for p in made.packages]})
        return
    typer.echo(f"Locked {len(conda)} conda and {len(pip)} pip packages into {output}")
    import shlex

    from envkit.lockfile.format import install_name

    name = install_name(output)
    argv = ["envkit", "create", "--from-lock", str(output), *(["--name", name] if name else []), *target]
    typer.echo(f"Install it with: {shlex.join(argv)}")


def register(app: typer.Typer) -> None:
    app.command()(lock)
    app.command()(export)
