"""What the commands that run an environment do with an image instead (a helper: it registers no command):
`envkit run FILE`, `verify FILE`, and the fit check on this machine before anything starts. `job`, `shell` and
`jupyter` take an image through commands/recorded.py's find_record and run `envkit run FILE` on the node."""

import contextlib
from pathlib import Path
from typing import Annotated, Iterator, List, Optional

import typer

from envkit.commands.places import manifests_dir

NoFitCheckOption = Annotated[bool, typer.Option(
    "--no-fit-check", help="For an image (ENV given as a path: ./torch.sqfs): run it without reading or checking the "
    "fit it records (neither whether it was altered nor whether its build runs on this machine's driver and GPUs); "
    "where it mounts is read from the environment's own record inside it.")]


def is_image(env: str) -> bool:
    from envkit.travel.image import is_image_argument

    return is_image_argument(env)


def as_argument(env: str) -> str:
    """ENV as a job on a node takes it: an image by its absolute path (the node's working directory may differ)."""
    if not is_image(env):
        return env
    from envkit.travel.opened import image_path

    return str(image_path(env))


def say_unchecked(record) -> None:
    """What --no-fit-check skips, said on stderr each time it is used."""
    typer.echo(f"envkit: note: --no-fit-check: the fit {record.extra['image']} records is neither read nor checked "
               "(whether it was altered, whether its build runs here); it mounts at the path its environment's own "
               f"record names, {record.prefix}", err=True)


def check_fits_here(record, fit: Optional[dict], manifests: Optional[Path]) -> None:
    """EnvkitError (exit 1), with the reasons, when the image's build would not run on this machine (as detected,
    within a Slurm job the GPUs it was given); a note when its build is no longer in the manifests."""
    if fit is None:
        return
    from envkit.catalog import load_tables
    from envkit.commands.options import TargetOptions
    from envkit.commands.recorded import recorded_build
    from envkit.commands.targets import machine_for
    from envkit.errors import EnvkitError
    from envkit.pick.resolve import assess

    framework, build = recorded_build(record, manifests)
    if build is None:
        typer.echo(f"envkit: warning: the build {record.build} of {record.extra['image']} is not in the manifests "
                   "here; its fit with this machine is not checked", err=True)
        return
    tables = load_tables(manifests_dir(manifests))
    candidate = assess(build, machine_for(tables, TargetOptions()), tables)
    if not candidate.compatible:
        raise EnvkitError(f"{record.extra['image']} ({record.build}) would not run on this machine: "
                          + "; ".join(candidate.reasons),
                          hint="Run it on a machine it was made for (`envkit verify FILE` says how it does here), or "
                               "add --no-fit-check to start it all the same.")


@contextlib.contextmanager
def image_in_place(env: str, fit_check: bool, manifests: Optional[Path], here: bool = True) -> Iterator[object]:
    """The record of the environment in image ``env``, mounted at its prefix within the block (unmounted after,
    however the block ends). With ``here``, its fit with this machine is checked first."""
    import os

    from envkit.system.scratch import scratch_dir
    from envkit.travel.mount import mounted
    from envkit.travel.opened import open_image

    opened = open_image(env, os.environ, fit_check)
    if not fit_check:
        say_unchecked(opened.record)
    if here:
        check_fits_here(opened.record, opened.fit, manifests)
    with scratch_dir("image") as scratch, mounted(Path(opened.record.extra["image"]), opened.record.prefix,
                                                  os.environ, scratch):
        yield opened.record


def run_image(env: str, argv: List[str], fit_check: bool, manifests: Optional[Path], apptainer: bool = False) -> int:
    """`envkit run FILE -- CMD`: CMD in the environment of the image, mounted for as long as it runs (with
    ``apptainer``, in the SIF beside it, the image bound at its path); its exit status."""
    import os

    from envkit.errors import BadInputError
    from envkit.system.activation import activated_argv, activated_environ, check_command
    from envkit.system.attached import run_attached

    if apptainer:
        return _in_apptainer(env, argv, fit_check, manifests)
    with image_in_place(env, fit_check, manifests) as record:
        prefix = Path(record.prefix)
        environ = activated_environ(prefix, record.kind, record.name, os.environ)
        check_command(argv[0], environ["PATH"], env)
        full = activated_argv(prefix, record.kind, argv)
        try:
            return run_attached(full, environ)
        except OSError as error:
            raise BadInputError(f"{full[0]} cannot be run: {error.strerror or error}") from None


def _in_apptainer(env: str, argv: List[str], fit_check: bool, manifests: Optional[Path]) -> int:
    """`envkit run FILE --apptainer -- CMD`: ``apptainer exec --nv`` in the SIF beside the image (built from the
    definition envkit pack's --apptainer-def writes), the image bound at its path; the fit checked first."""
    import os
    import shutil

    from envkit.errors import BadInputError
    from envkit.system.attached import run_attached
    from envkit.travel.apptainer import exec_argv, sif_beside
    from envkit.travel.opened import open_image

    program = shutil.which("apptainer") or shutil.which("singularity")
    if program is None:
        raise BadInputError("--apptainer: Apptainer is not installed here (envkit does not install it)",
                            hint="Run without --apptainer (squashfuse mounts the image), or ask the site for it.")
    opened = open_image(env, os.environ, fit_check)
    if not fit_check:
        say_unchecked(opened.record)
    check_fits_here(opened.record, opened.fit, manifests)
    image = Path(opened.record.extra["image"])
    container = sif_beside(image)
    if not container.is_file():
        raise BadInputError(f"--apptainer runs in {container}, which does not exist",
                            hint="Build it from the definition `envkit pack ENV -o FILE --apptainer-def DEF` "
                                 f"writes: apptainer build {container} DEF")
    if any(mark in f"{image}{opened.record.prefix}" for mark in (":", ",")):
        raise BadInputError(f"Apptainer cannot bind {image} at {opened.record.prefix}: a path holds ':' or ','")
    try:
        return run_attached(exec_argv(program, image, opened.record.prefix, container, argv), os.environ)
    except OSError as error:
        raise BadInputError(f"{program} cannot be run: {error.strerror or error}") from None
