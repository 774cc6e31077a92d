"""What `envkit create --shared` does around the usual create: checks who publishes where before anything is
planned, builds the new version in the shared directory, and publishes it once it is made and checked
(envkit.shared). A helper of commands/create.py; it registers no command."""

import os
from pathlib import Path
from typing import NamedTuple, Optional

import typer


class SharedTarget(NamedTuple):
    layout: object  # envkit.shared.layout.SharedLayout
    name: str
    gid: Optional[int]
    group: Optional[str]


def shared_target(config, dirs, name: Optional[str], manifest: str, force: bool, group: Optional[str],
                  prefix: Optional[Path], jupyter: bool) -> SharedTarget:
    """Where and as what the new version goes; BadInputError (exit 2), with nothing written, for a user who is not
    an admin, a shared directory that is missing, unsafe or not writable, a name already published (without
    --force), or a modulefiles directory that is not on $MODULEPATH."""
    from envkit.errors import BadInputError
    from envkit.shared.access import check_group, check_publishable, require_root
    from envkit.shared.find import shared_directory
    from envkit.shared.layout import shown_name
    from envkit.state.records import check_name

    if prefix is not None:
        raise BadInputError("--prefix and --shared: a shared environment goes where the shared directory's layout "
                            "puts it", hint="Leave out --prefix.")
    if jupyter:
        raise BadInputError("--jupyter and --shared: a Jupyter kernel is registered per user",
                            hint="Each user registers one with `envkit run site:NAME -- python -m ipykernel install "
                                 "--user --name NAME` (ipykernel must be in the environment).")
    layout = require_root(shared_directory(os.environ, dirs, config))
    check_publishable(layout)
    gid = check_group(group)
    the_name = check_name(name or manifest)
    if os.path.lexists(layout.record(the_name)) and not force:
        raise BadInputError(f"the site already publishes {shown_name(the_name)}",
                            hint="Add --force to publish a new version of it (jobs running the current one keep "
                                 "it), or give another --name.")
    check_on_modulepath(layout.modulefiles, os.environ)
    return SharedTarget(layout, the_name, gid, group)


def check_on_modulepath(directory: Path, environ) -> None:
    """BadInputError (exit 2) unless ``directory`` is on $MODULEPATH, saying how to put it there."""
    from envkit.errors import BadInputError

    wanted = os.path.normpath(directory)
    entries = [os.path.normpath(entry) for entry in environ.get("MODULEPATH", "").split(":") if entry]
    if wanted not in entries:
        raise BadInputError(f"the modulefiles directory {directory} is not on $MODULEPATH, so `module load` would "
                            "not find what envkit writes there",
                            hint=f"Add it: `module use {directory}` (for everyone: a line in /etc/lmod/modulespath or "
                                 f"Environment Modules' initrc, `module use {directory}`), then run this again.")


def staging(prepared, shared: SharedTarget, dirs):
    """(the prepared plan with the new version's prefix, the directories its run keeps its journal and records in,
    the version)."""
    import dataclasses
    from datetime import datetime, timezone

    from envkit.shared.layout import version_id
    from envkit.state.userdirs import UserDirs

    plan = prepared.plan
    first = version = version_id(plan.build.id, plan.manifest, datetime.now(timezone.utc))
    for count in range(2, 100):  # published twice within a second: a version of its own all the same
        if not os.path.lexists(shared.layout.prefix(shared.name, version)):
            break
        version = f"{first}-{count}"
    prefix = shared.layout.prefix(shared.name, version)
    from envkit.backends.plan import relocated

    prepared = dataclasses.replace(prepared, plan=relocated(plan, prefix))
    return prepared, UserDirs(config=dirs.config, data=shared.layout.state / f"{shared.name}-{version}",
                              cache=dirs.cache), version


def publisher(shared: SharedTarget, version: str, run_dirs):
    """What publishes the version once `create` made it: nothing when its check failed (then the version is
    deleted: the current one stays); the published record otherwise."""

    def after(outcome):
        import dataclasses
        import pwd
        import shutil

        from envkit.shared.publish import make_layout, publish

        try:
            if outcome.report is not None and not outcome.report.ok:
                shutil.rmtree(outcome.record.prefix, ignore_errors=True)
                typer.echo(f"envkit: the new version failed its check, so it is not published (deleted); the site's "
                           f"current {shared.name} is unchanged", err=True)
                return outcome
            make_layout(shared.layout, shared.name)
            who = pwd.getpwuid(os.geteuid()).pw_name
            record = publish(shared.layout, outcome.record, version, shared.gid, who)
            tcl, lua = shared.layout.module_files(shared.name)
            typer.echo(f"envkit: published site:{shared.name} (version {version}) for "
                       f"{'group ' + shared.group if shared.group else 'everyone'}; `module load envkit/"
                       f"{shared.name}` loads it ({tcl}, {lua})", err=True)
            return dataclasses.replace(outcome, record=record)
        finally:
            shutil.rmtree(run_dirs.data, ignore_errors=True)

    return after


def clean_staging(run_dirs, name: str) -> None:
    """Delete a publishing run's own directory, unless its journal is there (a run that could not undo itself:
    the next create of the same version would; `envkit envs` of the admin does not list it)."""
    import shutil

    from envkit.create.lock import journal_path

    if not os.path.lexists(journal_path(run_dirs.locks, name)):
        shutil.rmtree(run_dirs.data, ignore_errors=True)


def publication_lock(shared: SharedTarget):
    """Held while a version of the name is made and published: two admins publishing it at once would otherwise
    each repoint its record and `current`, in any order."""
    from envkit.create.lock import name_lock

    shared.layout.state.mkdir(mode=0o755, exist_ok=True)
    return name_lock(shared.layout.state / "locks", f"publish-{shared.name}")
