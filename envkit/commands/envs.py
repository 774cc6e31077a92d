"""The environments envkit made: ``envkit envs``, ``envkit run``, ``envkit remove``."""

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from envkit.commands import completion
from envkit.commands.output import echo_report, print_json, reported_errors
from envkit.commands.places import user_dirs
from envkit.commands.recorded import find_record, plain_name
from envkit.commands.images import NoFitCheckOption, is_image
from envkit.commands.options import JsonOption, ManifestsOption, RunInArgument


def list_envs(json_output: JsonOption = False) -> None:
    """List the environments envkit made: build, backend, Python, the last check's result, where they are.

    A run of `envkit create` that is going on shows as "being created"; one killed before its environment was complete
    shows as "interrupted" until the next create, or `envkit remove NAME`, cleans up after it. A record that cannot be
    read shows as "unreadable", with the reason; `envkit remove NAME` forgets it. One whose directory is gone, or
    holds another environment or none, is marked beside its directory ("missing", "not NAME's"; in JSON the state "not
    held", with the reason): envkit never runs it, and `envkit remove NAME` forgets it, leaving the directory alone.

    The site's shared environments (when a shared directory is configured) follow, named site:NAME, with who
    published them, for which machines, the admins' last check and yours; in JSON, beside yours, with "shared": true.
    `envkit run site:NAME -- CMD` runs in one; `module load envkit/NAME` loads it."""
    with reported_errors():
        from envkit.create.journal import interrupted
        from envkit.create.records_render import envs_json, envs_text
        from envkit.state import records

        dirs = user_dirs()
        found, broken = records.scan(dirs.records)
        runs = interrupted(dirs.locks)
        sizes, total = _sizes(found, runs, dirs)
        layout, site, unreadable = _site_envs(dirs)
        standing = _standing(found, site)
        if json_output:
            from envkit.shared.render import shared_json

            # one object (schema_version first): the user's environments, then the site's shared ones
            print_json({"environments": envs_json(found, runs, broken, sizes, standing) +
                        shared_json(layout, site, dirs.data, unreadable)})
        else:
            echo_report(envs_text(found, runs, broken, sizes, total, standing), table=True)
            if layout is not None:
                from envkit.shared.render import shared_text

                echo_report("\n" + shared_text(layout, site, dirs.data, unreadable), table=True)


def _sizes(found, runs, dirs):
    """Each settled environment's disk use, after the package caches': a file it shares with a cache or an
    environment listed before it is counted there only, as du counts (so the sizes add up to the total); the total
    line, caches included."""
    import os

    from envkit.create.storage import all_caches
    from envkit.state.config import load_config
    from envkit.state.ownership import holding_problem
    from envkit.storage.cache import PARTS
    from envkit.storage.usage import Usage, disk_usage
    from envkit.text.words import size_text

    busy = {run.name for run in runs}
    seen: set = set()
    caches = Usage()
    places = all_caches(load_config(os.environ, dirs), dirs, os.environ)
    for place in places:
        for part in PARTS:
            caches = caches + disk_usage(place.root / part, seen)
    sizes = {record.name: disk_usage(Path(record.prefix), seen) for record in sorted(found, key=lambda r: r.name)
             if record.name not in busy and holding_problem(Path(record.prefix), record.name) is None}
    envs = sum(sizes.values(), Usage())
    where = ", ".join(str(place.root) for place in places)
    total = (f"Total: {size_text(envs.bytes + caches.bytes)} in {envs.files + caches.files:,} files: environments "
             f"{size_text(envs.bytes)}, package caches {size_text(caches.bytes)} ({where}); a file shared by several "
             "is counted once, with the first that has it")
    return sizes, total


def _standing(found, site) -> dict:
    """Each personal environment's site version (envkit create --on): "current", "replaced" (the site publishes
    another now; it keeps running on its own) or "removed"."""
    import os

    current = {f"site:{record.name}": record.prefix for record in site}
    out = {}
    for record in found:
        on = record.on if isinstance(record.on, dict) else None
        if on is not None:
            prefix = str(on.get("prefix", ""))
            out[record.name] = ("removed" if not os.path.isdir(prefix) else
                                "current" if current.get(on.get("name")) == prefix else "replaced")
    return out


def _site_envs(dirs):
    """The site's shared directory (None when none is named), the environments it publishes, and (NAME, error) for
    each of its records that cannot be read."""
    import os

    from envkit.shared.find import configured_layout
    from envkit.shared.store import scan_shared

    layout = configured_layout(os.environ, dirs)
    if layout is not None and os.path.isdir(layout.state):  # an admin's listing cleans up after dead publications
        from envkit.commands.publishing import sweep_dead

        sweep_dead(layout)
    return (layout, *scan_shared(layout))


def remove(
    env: Annotated[str, typer.Argument(metavar="ENV", help="The environment to delete (`envkit envs` lists them).",
                                       autocompletion=completion.environment_names)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (needed without a terminal "
                                                          "to ask on).")] = False,
    version: Annotated[Optional[str], typer.Option("--version", metavar="VERSION", help="Admins: with site:NAME, "
                                                   "delete this old version of the shared environment (never the "
                                                   "current one).", show_default=False)] = None,
) -> None:
    """Delete an environment envkit made: its directory, its Jupyter kernel and its record.

    A directory that no longer holds ENV (its envkit record names another environment, or it has none) is left
    alone, with its kernel: ENV's entry alone is forgotten. A run of ENV that was interrupted (killed, a power cut)
    is finished or undone first, so that nothing it set aside comes back later."""
    with reported_errors():
        import os
        import sys

        from envkit.create.journal import Journal
        from envkit.create.lock import journal_path
        from envkit.create.remove import remove_environment
        from envkit.errors import BadInputError
        from envkit.state import ownership, records

        dirs = user_dirs()
        from envkit.shared.layout import shared_name

        if shared_name(env) is not None or version is not None:
            _retire(env, version, dirs, yes)
            return
        journal = Journal.load(journal_path(dirs.locks, env)) if plain_name(env) else None
        broken = records.unreadable(dirs.records, env) if journal is None and plain_name(env) else None
        if journal is not None:
            question = f"Delete {env} at {journal.prefix}?"
        elif broken is not None:  # its record cannot be read: forgotten, and its directory deleted if it is envkit's
            question = f"Delete {env} at {broken.prefix or '(no directory named in the record)'}?"
        else:  # a directory that does not hold it (gone, another environment's) stays: only the entry goes
            prefix = find_record(env, settled=False, held=False).prefix
            problem = ownership.holding_problem(Path(prefix), env)
            if problem is None:
                question = f"Delete {env} at {prefix}?"
            elif not os.path.lexists(prefix):
                question = f"Forget {env}? Its directory {prefix} is already gone."
            else:
                question = f"Forget {env}? Its directory {prefix} is left alone: {problem}."
        if not yes:
            if not sys.stdin.isatty():
                raise BadInputError(f"not removing {env} without confirmation", hint="Add --yes to remove it.")
            if not typer.confirm(question, default=False, err=True):
                typer.echo("envkit: nothing removed", err=True)
                raise typer.Exit(1)
        done = remove_environment(env, dirs, os.environ)
        if done is None:
            find_record(env, settled=False, held=False)  # gone meanwhile: says so, naming the ones there are
        for line in done or ():
            typer.echo(line)


def _retire(env: str, version: Optional[str], dirs, yes: bool) -> None:
    """`envkit remove site:NAME --version V`: an admin deletes an old version; anything else is refused (exit 2)."""
    import os

    from envkit.errors import BadInputError
    from envkit.shared.access import is_admin
    from envkit.shared.find import find_shared
    from envkit.shared.layout import shared_name

    if shared_name(env) is None:
        raise BadInputError("--version names an old version of a shared environment: give ENV as site:NAME")
    record = find_shared(env, os.environ, dirs, held=False)
    from envkit.shared.find import configured_layout

    layout = configured_layout(os.environ, dirs)
    if not is_admin(layout.root):
        raise BadInputError(f"{env} is the site's shared environment: only its admins remove or replace it",
                            hint="`envkit envs` lists your own environments, which you can remove.")
    if version is None:
        raise BadInputError(f"{env} is published for every user: envkit removes old versions only, one at a time",
                            hint=f"`envkit remove {env} --version VERSION` (`envkit envs --json` shows the current "
                                 "one); the current one stays until a replacement is published.")
    from envkit.shared.publish import check_retirable, retire

    path = check_retirable(layout, record.name, version)
    if not yes:
        import sys

        if not sys.stdin.isatty():
            raise BadInputError(f"not removing {path} without confirmation", hint="Add --yes to remove it.")
        if not typer.confirm(f"Delete version {version} of {env} ({path})? Jobs still running it would fail.",
                             default=False, err=True):
            typer.echo("envkit: nothing removed", err=True)
            raise typer.Exit(1)
    typer.echo(f"removed {retire(layout, record.name, version)}")


def run(
    env: RunInArgument,
    command: Annotated[
        Optional[List[str]], typer.Argument(metavar="-- CMD...", help="The command and its arguments.",
                                            show_default=False)
    ] = None,
    no_fit_check: NoFitCheckOption = False,
    apptainer: Annotated[bool, typer.Option("--apptainer", help="For an image: run in Apptainer instead (apptainer "
                                            "exec --nv), in the SIF beside it (FILE without .sqfs, .sif: built from "
                                            "envkit pack's --apptainer-def), the image bound at its path.")] = False,
    manifests: ManifestsOption = None,
) -> None:
    """Run a command inside an environment, activated as `conda activate` or `source bin/activate` would do it.

    ENV may be an image `envkit pack` made, given as a path (./torch.sqfs): it is mounted at its path with
    squashfuse (no root) for as long as the command runs, once its recorded fit is checked against this machine
    (docs/travel.md). Example: `envkit run torch-cu126 -- python train.py --epochs 3`. The exit code is the
    command's.
    """
    with reported_errors():
        import os

        from envkit.errors import BadInputError, EnvkitError
        from envkit.system.activation import activated_argv, activated_environ, check_command

        argv = list(command or [])
        if argv and argv[0] == "--":
            argv = argv[1:]
        if not argv:
            raise BadInputError("give the command to run after --", hint=f"e.g. envkit run {env} -- python -V")
        if is_image(env):
            from envkit.commands.images import run_image

            raise typer.Exit(run_image(env, argv, not no_fit_check, manifests, apptainer))
        if apptainer:
            raise BadInputError("--apptainer runs an image (ENV as a path: ./torch.sqfs)",
                                hint=f"Leave it out to run in {env}.")
        record = find_record(env)  # no create of it going on or interrupted, and its directory holds it
        prefix = Path(record.prefix)
        if not (prefix / "bin").is_dir():  # (the directory is there and holds its record: find_record checked)
            from envkit.commands.recorded import remake_or_remove

            raise EnvkitError(f"no environment at {prefix} ({prefix / 'bin'} does not exist)",
                              hint=remake_or_remove(record))
        environ = activated_environ(prefix, record.kind, record.name, os.environ)
        check_command(argv[0], environ["PATH"], env)
        full = activated_argv(prefix, record.kind, argv)
        try:
            os.execvpe(full[0], full, environ)
        except OSError as error:  # found and executable, and still not a program (a script without #!, say)
            import errno

            hint = (f"A script needs a #! line naming its interpreter; or run it with one: envkit run {env} -- bash "
                    f"{argv[0]}" if error.errno == errno.ENOEXEC else None)
            raise BadInputError(f"{full[0]} cannot be run: {error.strerror}", hint=hint) from None


def register(app: typer.Typer) -> None:
    app.command("envs")(list_envs)
    app.command(
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}
    )(run)
    app.command()(remove)
