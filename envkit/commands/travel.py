"""Environments that travel: ``envkit pack`` (one SquashFS image) and ``envkit bundle`` (every file a lock installs,
for a machine without network)."""

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit.commands import completion
from envkit.commands.options import JsonOption, path_value
from envkit.commands.output import print_json, reported_errors

ForceOption = Annotated[bool, typer.Option("--force", help="Replace a symbolic link where FILE (or its fit, or DEF) "
                                           "goes by the file (its target stays as it was). Without it a link is "
                                           "refused: envkit never writes through one.")]


def pack(
    env: Annotated[str, typer.Argument(metavar="ENV", help="The environment to pack (`envkit envs` lists them; "
                                       "site:NAME for a site's).", autocompletion=completion.environment_names)],
    output: Annotated[Path, typer.Option("--output", "-o", metavar="FILE", parser=path_value,
                                         help="The image to write (torch.sqfs); its fit goes beside it "
                                              "(FILE.fit.json).")] = ...,  # type: ignore[assignment]
    image_format: Annotated[str, typer.Option("--format", metavar="FORMAT", help="The image's format: sqfs "
                                              "(SquashFS, zstd-compressed), the only one so far.")] = "sqfs",
    relocate: Annotated[Optional[Path], typer.Option("--relocate", metavar="PATH", parser=path_value,
                                                     show_default=False,
                                                     help="Pack it to mount at PATH instead of its own path (venvs "
                                                          "only: a conda prefix names itself in its binaries).")
                        ] = None,
    apptainer_def: Annotated[Optional[Path], typer.Option("--apptainer-def", metavar="DEF", parser=path_value,
                                                          show_default=False,
                                                          help="Also write an Apptainer definition file that builds "
                                                               "a SIF from the image, the fit as labels.")] = None,
    apptainer_from: Annotated[Optional[str], typer.Option("--apptainer-from", metavar="IMAGE", show_default=False,
                                                          help="With --apptainer-def: the base system's Docker image "
                                                               "(debian:12). Default: this machine's system.")] = None,
    force: ForceOption = False,
    json_output: JsonOption = False,
) -> None:
    """Pack an environment into one compressed SquashFS image that runs without unpacking and without root.

    The image holds the environment at its own path (a venv and a conda prefix name themselves), and records inside
    it and beside it (FILE.fit.json) what it is and fits: its build, the machines or partition it was made for, the
    driver and GPUs of its last check, and its lock where it has one. `envkit run FILE -- CMD` and
    `envkit verify FILE` (and job, shell and jupyter, given FILE for ENV) mount it with squashfuse for as long as
    they run, once its fit is checked (docs/travel.md).

    Example: `envkit pack torch-cu126 -o /project/me/torch-cu126.sqfs`.
    """
    with reported_errors():
        import os
        from datetime import datetime, timezone

        from envkit import __version__
        from envkit.commands.recorded import find_record
        from envkit.errors import BadInputError
        from envkit.system.scratch import scratch_dir
        from envkit.travel.pack import FORMATS, pack as pack_image

        if image_format not in FORMATS:
            raise BadInputError(f"--format {image_format}: envkit packs {', '.join(FORMATS)} images",
                                hint="Leave out --format (sqfs: SquashFS).")
        if apptainer_from is not None and apptainer_def is None:
            raise BadInputError("--apptainer-from names the base of the definition --apptainer-def writes",
                                hint="Add --apptainer-def FILE, or leave out --apptainer-from.")
        base = _apptainer_base(apptainer_from) if apptainer_def is not None else None
        record = find_record(env)  # no create of it going on or interrupted, and its directory holds it
        packed = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with scratch_dir("pack") as scratch:
            done = pack_image(record, output, relocate, force, os.environ, packed, __version__, scratch)
        definition = None
        if apptainer_def is not None:
            definition = _write_definition(done, apptainer_def, base, record.kind, force)
        if json_output:
            print_json({"image": str(done.image), "fit": str(done.beside), "bytes": done.size, "prefix": done.prefix,
                        "environment": record.name, "build": record.build,
                        "apptainer_def": None if definition is None else str(definition)})
            return
        from envkit.storage.room import size_text

        typer.echo(f"packed {record.name} ({record.build}) into {done.image}: {size_text(done.size)}, mounts at "
                   f"{done.prefix}")
        typer.echo(f"its fit: {done.beside}")
        if definition is not None:
            typer.echo(f"Apptainer definition: {definition} (`apptainer build IMAGE.sif {definition.name}`)")
        typer.echo(f"Run from it: envkit run {done.image} -- python -V")


def _apptainer_base(given: Optional[str]) -> str:
    from envkit.errors import BadInputError
    from envkit.travel.apptainer import base_of

    if given is not None:
        import re

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,200}", given):
            raise BadInputError(f"--apptainer-from {given!r} is not a Docker image name", hint="e.g. debian:12")
        return given
    try:
        base = base_of(Path("/etc/os-release").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        base = None
    if base is None:
        raise BadInputError("this machine's system is not one envkit knows a Docker image of, for the definition's "
                            "base", hint="Name it with --apptainer-from (e.g. debian:12).")
    return base


def _write_definition(done, path: Path, base: Optional[str], kind: str, force: bool) -> Path:
    import json

    from envkit.state.output import write_output
    from envkit.travel.apptainer import definition

    fit = json.loads(done.beside.read_text(encoding="utf-8"))
    write_output(path, definition(fit, done.image, base or "", kind).encode("utf-8"), force=force)
    return path


def bundle(
    source: Annotated[str, typer.Argument(metavar="LOCK|ENV", help="A conda-lock.yml (`envkit lock` or `envkit "
                                          "export` writes one), or an environment made from a lock.")],
    output: Annotated[Path, typer.Option("--output", "-o", metavar="DIR_OR_TAR", parser=path_value,
                                         help="Where the bundle goes: a new directory, or a tar file (.tar, .tar.gz, "
                                              ".tgz).")] = ...,  # type: ignore[assignment]
    json_output: JsonOption = False,
) -> None:
    """Bundle every file a lock installs, with the lock, for a machine with no network: `envkit create --from-bundle
    PATH` installs it there.

    Every conda package and wheel the lock names (on every platform it locks) is fetched as `create --from-lock`
    fetches it (through envkit's mirrors, https or a mirror only, every redirect checked) and hash-checked against
    the lock. The bundle is a directory (bundle.json, conda-lock.yml, files/) or a tar of it.

    Example: `envkit bundle torch.conda-lock.yml -o torch-bundle.tar`, then on the closed machine
    `envkit create --from-bundle torch-bundle.tar --name torch`.
    """
    with reported_errors():
        import os

        from envkit.commands.places import user_dirs
        from envkit.state.config import load_config
        from envkit.system.scratch import scratch_dir
        from envkit.travel.bundle import make_bundle

        lock = _lock_of(source)
        dirs = user_dirs()
        config = load_config(os.environ, dirs)
        output = Path(os.path.abspath(output))

        def report(line: str) -> None:
            if not json_output:
                typer.echo(f"envkit: {line}", err=True)

        with scratch_dir("bundle") as scratch:
            done = make_bundle(lock, config, dirs.cache / "bundle-files", output, report, scratch)
        if json_output:
            print_json({"bundle": str(done.path), "lock": str(lock), "files": done.files, "bytes": done.bytes})
            return
        from envkit.storage.room import size_text

        typer.echo(f"bundled {done.files} files ({size_text(done.bytes)}) and the lock {lock.name} into {done.path}")
        typer.echo(f"Install it where there is no network: envkit create --from-bundle {done.path.name}")


def _lock_of(source: str) -> Path:
    """The lock to bundle: the file named, else the lock the environment of that name keeps (made from a lock)."""
    from envkit.errors import BadInputError
    from envkit.lockfile.pep751 import is_pylock

    path = Path(source).expanduser()
    if path.is_file():
        if is_pylock(path):
            raise BadInputError(f"{path} is a pylock.toml: envkit bundles conda-lock.yml locks",
                                hint="Lock the build with `envkit lock MANIFEST` (it writes a conda-lock.yml).")
        return path
    if os.sep in source or source.endswith((".yml", ".yaml")):
        raise BadInputError(f"lock file {source} does not exist", hint="Give a conda-lock.yml or an environment.")
    from envkit.commands.recorded import find_record
    from envkit.travel.pack import LOCK_NAMES

    record = find_record(source)
    kept = Path(record.prefix) / ".envkit" / LOCK_NAMES[0]
    if not kept.is_file():
        raise BadInputError(f"{record.name} keeps no lock (it was not made from one)",
                            hint=f"Lock it first: envkit export {record.name} -o {record.name}.conda-lock.yml, then "
                                 f"bundle that file.")
    return kept


def register(app: typer.Typer) -> None:
    app.command()(pack)
    app.command()(bundle)
