"""Environments that travel: ``envkit pack`` (one SquashFS image) and ``envkit bundle`` (every file a lock installs,
for a machine without network)."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit.commands import completion
from envkit.commands.options import JsonOption, path_value
from envkit.commands.output import print_json, reported_errors

ForceOption = Annotated[bool, typer.Option("--force", help="Replace files that are there already (never through a "
                                           "symbolic link: one is refused).")]


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
    driver and GPUs of its last check, and its lock where it has one. `envkit run FILE -- CMD`, `envkit job FILE`,
    `envkit verify FILE`, `envkit shell FILE` and `envkit jupyter FILE` mount it with squashfuse for as long as they
    run, once its fit is checked (docs/travel.md).

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


def register(app: typer.Typer) -> None:
    app.command()(pack)
