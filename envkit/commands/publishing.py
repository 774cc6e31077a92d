"""What `envkit create --shared` does around the usual create: checks who publishes where before anything is
planned, builds the new version in the shared directory, and publishes it once it is made and checked
(envkit.shared). A helper of commands/create.py; it registers no command."""

import contextlib
import os
from pathlib import Path
from typing import Iterator, NamedTuple, Optional

import typer


class SharedTarget(NamedTuple):
    layout: object  # envkit.shared.layout.SharedLayout
    name: str
    gid: Optional[int]
    group: Optional[str]

    @property
    def audience(self):
        from envkit.shared.reach import Audience

        return Audience(self.gid)


def python_finder(shared: SharedTarget):
    """What CreateRequest.python_for asks for a shared venv: a Python its users can run (envkit.shared.python)."""
    def find(version, platform=None):
        from envkit.backends.tools import foreign_cpu, runs_as
        from envkit.shared.python import shareable_python

        cpu = foreign_cpu(platform)  # a partition of another CPU: a Python of that CPU running here (emulated)
        return shareable_python(version, shared.layout.root, shared.audience, os.environ,
                                lambda python: runs_as(python, version, os.environ, cpu))

    return find


def prove_reachable(shared: SharedTarget):
    """What publish() runs once the version is readable: EnvkitError (exit 1, the version not published) naming
    what would stop its users from running its Python (a directory they cannot enter, on the way to the prefix or
    to the venv's base interpreter)."""
    def prove(record) -> None:
        from envkit.errors import EnvkitError
        from envkit.shared.reach import first_blocked, for_audience, python_needs

        found = first_blocked(python_needs(Path(record.prefix)), for_audience(shared.audience))
        if found is not None:
            raise EnvkitError(f"site:{shared.name} is not published: {found.words(shared.audience.who())}, so they "
                              "could not run it", hint=f"Let them in (e.g. chmod {'g' if shared.gid else 'o'}+x on "
                              "that directory), or publish from a Python they can run, then publish again.")

    return prove


def shared_target(config, dirs, name: Optional[str], manifest: str, force: bool, group: Optional[str],
                  prefix: Optional[Path], jupyter: bool) -> SharedTarget:
    """Where and as what the new version goes; BadInputError (exit 2), with nothing written, for a user who is not
    an admin, a shared directory that is missing, unsafe (a link or a file where the layout has a directory, writable
    by everyone) or not writable, a path a Tcl modulefile cannot carry, or a name already published (without
    --force). No module system is needed: the modulefiles are written, and where their directory is not on
    $MODULEPATH envkit says how to put it there."""
    from envkit.errors import BadInputError
    from envkit.shared.access import check_group, check_publishable, require_root
    from envkit.shared.find import shared_directory
    from envkit.shared.layout import shown_name
    from envkit.shared.modulefile import check_tcl_path
    from envkit.shared.tree import check_layout
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
    check_layout(layout, the_name)  # a link planted in it is refused now, not after the version is built
    check_tcl_path(str(layout.root))
    if os.path.lexists(layout.record(the_name)) and not force:
        raise BadInputError(f"the site already publishes {shown_name(the_name)}",
                            hint="Add --force to publish a new version of it (jobs running the current one keep "
                                 "it), or give another --name.")
    return SharedTarget(layout, the_name, gid, group)


def staging(prepared, shared: SharedTarget, dirs):
    """(the prepared plan with the new version's prefix, the directories its run keeps its journal and records in:
    the run's mark, envkit.shared.leftovers, the version)."""
    import dataclasses
    from datetime import datetime, timezone

    from envkit.shared.layout import version_id
    from envkit.shared.leftovers import run_mark
    from envkit.state.userdirs import UserDirs

    plan = prepared.plan
    first = version = version_id(plan.build.id, plan.manifest, datetime.now(timezone.utc))
    for count in range(2, 100):  # published twice within a second: a version of its own all the same
        if not os.path.lexists(shared.layout.prefix(shared.name, version)) and \
                not os.path.lexists(run_mark(shared.layout, shared.name, version)):
            break
        version = f"{first}-{count}"
    prefix = shared.layout.prefix(shared.name, version)
    from envkit.backends.plan import relocated

    prepared = dataclasses.replace(prepared, plan=relocated(plan, prefix))
    return prepared, UserDirs(config=dirs.config, data=run_mark(shared.layout, shared.name, version),
                              cache=dirs.cache), version


def publisher(shared: SharedTarget, version: str):
    """What publishes the version once `create` made it: nothing when its check failed (the version is then
    deleted when its run ends: the current one stays); the published record otherwise."""

    def after(outcome):
        import dataclasses
        import pwd

        from envkit.shared.modulefile import loadable_words
        from envkit.shared.publish import publish

        if outcome.report is not None and not outcome.report.ok:
            typer.echo(f"envkit: the new version failed its check, so it is not published (deleted); the site's "
                       f"current site:{shared.name} is unchanged", err=True)
            return dataclasses.replace(outcome, kept=False)
        who = pwd.getpwuid(os.geteuid()).pw_name
        record = publish(shared.layout, outcome.record, version, shared.gid, who, check=prove_reachable(shared))
        tcl, lua = shared.layout.module_files(shared.name)
        typer.echo(f"envkit: published site:{shared.name} (version {version}) for "
                   f"{'group ' + shared.group if shared.group else 'everyone'}; its modulefiles: {tcl}, {lua}",
                   err=True)
        loadable = loadable_words(shared.layout.modulefiles, os.environ.get("MODULEPATH", ""))
        if loadable:
            typer.echo(f"envkit: {loadable}", err=True)
        return dataclasses.replace(outcome, record=record)

    return after


def publication_lock(layout, name: str):
    """The lock of ``name``'s publications (Busy, exit 1, while another run holds it): the admins' group's, where the
    group publishes."""
    from envkit.create.lock import exclusive

    group_writable = bool(os.stat(layout.root).st_mode & 0o020)
    return exclusive(layout.state / "locks", f"publish-{name}", f"a publication of site:{name}",
                     mode=0o664 if group_writable else 0o644)


@contextlib.contextmanager
def publication(shared: SharedTarget, version: str) -> Iterator[None]:
    """Held while a version of the name is made and published: the layout made (its modes set whatever the umask),
    the name's publication lock held (two admins publishing it at once would otherwise each repoint its record and
    `current`; the second is told it is busy), what dead runs of the name left removed, and the run marked; at the
    end, the version is deleted unless it was published (envkit.shared.leftovers)."""
    from envkit.shared.leftovers import begin, finish
    from envkit.shared.tree import make_layout

    layout = shared.layout
    make_layout(layout, shared.name)
    with publication_lock(layout, shared.name):
        _swept(layout, shared.name)
        begin(layout, shared.name, version)
        try:
            yield
        finally:
            finish(layout, shared.name, version)


def sweep_dead(layout) -> None:
    """An admin's `envkit envs`: what dead publications left removed, for every name nobody is publishing now."""
    from envkit.create.lock import Busy
    from envkit.shared.access import is_admin
    from envkit.shared.leftovers import names_marked

    if not is_admin(layout.root):
        return
    for name in names_marked(layout):
        try:
            with publication_lock(layout, name):
                _swept(layout, name)
        except Busy:
            continue  # being published now: its run is alive


def _swept(layout, name: str) -> None:
    """What dead runs of ``name`` left removed (its publication lock held), each said; one that cannot be removed
    (another admin's files this one may not delete) is said, and the publication or listing goes on."""
    from envkit.errors import EnvkitError
    from envkit.shared.leftovers import sweep

    try:
        removed = sweep(layout, name)
    except (EnvkitError, OSError) as error:
        said = error.message if isinstance(error, EnvkitError) else f"{error.filename}: {error.strerror}"
        typer.echo(f"envkit: note: what a dead publication of site:{name} left is still there: {said}", err=True)
        return
    for path in removed:
        typer.echo(f"envkit: removed {path}, a version of site:{name} that a publication which died never "
                   "published", err=True)
