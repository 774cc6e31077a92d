"""The environments envkit made, as the commands that act on one find them: the record of a name (or why there is
none), its Python, and the manifests and build it was made from."""

from pathlib import Path
from typing import Optional

import typer

from envkit.commands.places import manifests_dir, user_dirs


def find_record(name: str, settled: bool = True, held: bool = True, images: bool = False, fit_check: bool = True):
    """The record of an environment envkit made, to act on its directory, or exit 2 naming the ones that exist.
    Every command that acts on a named environment goes through here, so all of them refuse (exit 1, saying why):
    ``settled``, a create run of it going on or interrupted; ``held``, a directory that no longer holds it (gone,
    another environment's, no envkit record in it: ownership.check_held). Only `envkit remove` asks for neither: it
    settles the run first and forgets an entry whose directory is not its environment, leaving the directory.
    With ``images``, an image (a path, ./torch.sqfs) gives the record its fit holds (checked unless not
    ``fit_check``), its prefix where it mounts and ``extra["image"]`` naming it; it is not mounted here."""
    from envkit.errors import UnknownNameError
    from envkit.shared.layout import shared_name
    from envkit.state import ownership, records

    from envkit.travel.image import is_image_argument

    if images and is_image_argument(name):  # an image `envkit pack` made: its record as recorded (not mounted)
        import os

        from envkit.travel.opened import open_image

        return open_image(name, os.environ, fit_check).record
    dirs = user_dirs()
    if shared_name(name) is not None:  # site:NAME, the site's shared environment (envkit.shared)
        import os

        from envkit.shared.find import find_shared

        return find_shared(name, os.environ, dirs, held=held)
    if settled and plain_name(name):
        from envkit.create.journal import check_settled

        check_settled(dirs.locks, name)
        _settle_add(dirs, name)
    record = records.load(dirs.records, name) if plain_name(name) else None
    if record is not None and held:
        ownership.check_held(record)
        if record.on:  # a personal environment: the site's version it stands on must still be there
            _check_standing(record)
    if record is None:
        known = [r.name for r in records.load_all(dirs.records)]
        raise UnknownNameError(f"envkit made no environment named {name!r}", hint=known_names_hint(name, known))
    return record


def _check_standing(record) -> None:
    """EnvkitError (exit 1) when the site environment's version a personal environment stands on was removed."""
    import os
    import shlex

    from envkit.errors import EnvkitError

    on = record.on if isinstance(record.on, dict) else {}
    if not os.path.isdir(str(on.get("prefix", ""))):
        raise EnvkitError(f"{record.name} stands on {on.get('name')} version {on.get('version')}, which the site's "
                          "admins have removed", hint=f"`envkit create --on {shlex.quote(str(on.get('name')))} --name "
                          f"{record.name} --force` makes it again on the version published now (with your additions: "
                          f"{', '.join(record.additions or []) or 'none'}).")


def _settle_add(dirs, name: str) -> None:
    """Put back what an `envkit add` of ``name`` that died left, before anything uses the environment."""
    from envkit.create.add_journal import journal_path

    if journal_path(dirs.locks, name).exists():
        from envkit.create.add import settle

        for note in settle(dirs, name):
            typer.echo(f"envkit: {note}", err=True)


def known_names_hint(name: str, known: list[str], shown: int = 12) -> str:
    """The environments there are, for an unknown ``name``: all of a few; of many, the closest and how to list
    them all."""
    if not known:
        return "It has made none yet: `envkit create torch`."
    if len(known) <= shown:
        return f"Its environments: {', '.join(known)}."
    from envkit.text.words import closest

    close = closest(name, known)[:5]
    listed = f"`envkit envs` lists its {len(known)} environments."
    return f"Did you mean {', '.join(close)}? {listed}" if close else listed


def environment_python(prefix: Path, record=None) -> Path:
    """The Python of the environment at ``prefix``, for `verify` here and on a node. None there: for a record's
    environment (its directory holds the record, not its Python) EnvkitError (exit 1) with how to make it again; for
    a --prefix given, BadInputError (exit 2)."""
    from envkit.backends.base import python_of
    from envkit.errors import BadInputError, EnvkitError

    python = python_of(prefix)
    if python.exists():
        return python
    if record is not None:
        raise EnvkitError(f"no environment at {prefix} ({python} does not exist)", hint=remake_or_remove(record))
    raise BadInputError(f"no environment at {prefix} ({python} does not exist)",
                        hint="Give the directory of a conda environment or a venv.")


def env_name(record) -> str:
    """The name a user gives an environment by: the site's as ``site:NAME``, theirs as NAME."""
    from envkit.shared.layout import shown_name
    from envkit.shared.store import is_shared

    return shown_name(record.name) if is_shared(record) else record.name


def remake_or_remove(record) -> str:
    """How to make a recorded environment again, or forget it, naming exactly it: a site's environment (site:NAME)
    is its admins' to publish again, never the user's to remove (`envkit remove NAME` would remove their own)."""
    from envkit.shared.store import ask_admins, is_shared

    if is_shared(record):
        return ask_admins(record)
    return f"{record.remake_hint('--force')}, or `envkit remove {record.name} --yes` deletes it."


def recorded_manifests(record, manifests: Optional[Path]) -> Optional[Path]:
    """The manifests directory to read a recorded environment's build from: --manifests ($ENVKIT_MANIFESTS) when
    given, else the one it was made from as its record says; None (the config's, else the shipped ones) for a record
    that names none (made from the shipped ones, or by an older envkit), or one that is gone (said on stderr)."""
    if manifests is not None or record.manifests is None:
        return manifests
    if not record.manifests_gone():
        return Path(record.manifests)
    typer.echo(f"envkit: note: {record.name} was made from the manifests in {record.manifests}, which no longer "
               "exists: its build is looked up in the config's or the shipped manifests instead (--manifests DIR "
               "names others)",
               err=True)
    return None


def recorded_build(record, manifests: Optional[Path]):
    """(the framework, the build) a recorded environment was made from, if its manifest still has them."""
    from envkit.catalog import load_tables, manifest_names
    from envkit.catalog.load import SUFFIX, load_manifest

    directory = manifests_dir(manifests)
    if record.manifest not in manifest_names(directory):
        return None, None
    manifest = load_manifest(directory / f"{record.manifest}{SUFFIX}", load_tables(directory))
    return manifest.framework, next((b for b in manifest.builds if b.id == record.build), None)


def plain_name(name: str) -> bool:
    from envkit.state.records import is_name

    return is_name(name)
