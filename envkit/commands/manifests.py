"""Manifest maintenance for admins: ``envkit manifests validate | check | diff``."""

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from envkit.commands.output import print_json, reported_errors
from envkit.commands.places import manifests_dir, user_dirs, uv_binary, uv_environ
from envkit.commands.options import JsonOption, ManifestsOption, path_argument, path_value, seconds_between

app = typer.Typer(
    name="manifests",
    help="Tools for admins who keep the manifests: validate a directory, check it against the real package "
    "indexes, see what an edit changes for real machines. A release is added by: edit a copy of envs/, then "
    "`envkit manifests validate DIR`, `envkit manifests check --manifests DIR`, `envkit manifests diff OLD DIR "
    "--partition P`, then publish DIR (users point ENVKIT_MANIFESTS at it).",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

DirectoryArgument = Annotated[
    Optional[Path],
    typer.Argument(metavar="[DIR]", parser=path_argument(), help="The manifests directory (default: --manifests / "
                   "ENVKIT_MANIFESTS, else the shipped one).", show_default=False),
]


@app.command()
def validate(directory: DirectoryArgument = None, json_output: JsonOption = False,
             manifests: ManifestsOption = None) -> None:
    """Check every file of a manifests directory and report the problems of every file and build at once.

    Each problem names its file, line, build and field. Then come the checks across files: Python ranges beyond
    python.yaml, build ids used twice, cuda.yaml rows that contradict each other or are missing,
    torchvision/torchaudio pins that break the manifest's companions rule.

    Exit codes: 0 valid, 2 problems found (or no such directory).
    """
    with reported_errors():
        from envkit.maintain.validate import validate_directory

        validation = validate_directory(_given(directory, "DIR") if directory is not None
                                        else manifests_dir(manifests))
        if json_output:
            print_json(validation.to_dict())
        else:
            for problem in validation.problems:
                typer.echo(str(problem))
            builds = sum(len(m.builds) for m in validation.manifests.values())
            if validation.ok:
                typer.echo(f"{validation.directory}: {len(validation.files)} files, {builds} builds: valid.")
            else:
                from envkit.text.words import counted

                typer.echo(f"{validation.directory}: {counted(len(validation.problems), 'problem')}.", err=True)
        if not validation.ok:
            raise typer.Exit(2)


@app.command()
def check(
    names: Annotated[Optional[List[str]], typer.Argument(metavar="[MANIFEST]...", help="Manifests to check (default: "
                                                         "all).", show_default=False)] = None,
    build: Annotated[Optional[List[str]], typer.Option("--build", metavar="ID", help="Only this build "
                                                       "(repeatable).", show_default=False)] = None,
    python: Annotated[Optional[List[str]], typer.Option("--python", metavar="X.Y", help="Only this Python "
                                                        "(repeatable; default: every Python each build claims).",
                                                        show_default=False)] = None,
    resolve: Annotated[bool, typer.Option("--resolve", help="Also resolve each pip build's whole dependency tree "
                                          "with uv for each Python, as `envkit lock` does: finds what the pages of "
                                          "its own packages cannot show (jax's jaxlib, the nvidia-* wheels that "
                                          "TensorFlow's and-cuda extra pins, pins that conflict). One resolution "
                                          "per build and Python, of the builds whose own packages were found: "
                                          "slower.")] = False,
    jobs: Annotated[int, typer.Option("--jobs", metavar="N", min=1, max=64,
                                      help="Pages fetched (and resolutions run) at once.")] = 8,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", callback=seconds_between(0.1, 600),
                                           help="Seconds each request may take (uv's too, with --resolve).")] = 20.0,
    retries: Annotated[int, typer.Option("--retries", metavar="N", min=0, max=10, help="Tries after a failed request "
                                         "(429, 5xx, reset, timeout), with growing waits (uv's too, with "
                                         "--resolve).")] = 3,
    json_output: JsonOption = False,
    manifests: ManifestsOption = None,
) -> None:
    """Check online that every selected build can install, for every Python it claims.

    Every pip requirement has a wheel on the build's index for each platform the build lists (Linux x86_64, aarch64) and
    each Python the build claims, every conda spec a package in its channels for those platforms. Indexes and channels
    are read through the mirrors of envkit's config file. Also lists what the indexes have that the manifests do not (a
    newer release, a new CUDA variant) as "not in the manifests". With --resolve, each pip build's dependencies are
    checked too.

    Exit codes: 0 everything is there, 1 something is missing or could not be read, 2 bad input.
    """
    with reported_errors():
        import os

        from envkit.catalog import load_catalog
        from envkit.maintain.check import check_builds, render_check
        from envkit.maintain.fetch import FetchSettings
        from envkit.pick.resolve import parse_python_request
        from envkit.state.config import load_config

        catalog = load_catalog(manifests_dir(manifests), names or ())
        pythons = [parse_python_request(text, catalog.tables.python).python for text in python or ()]
        config = load_config(os.environ, user_dirs())
        settings = FetchSettings(timeout_s=timeout, retries=retries, jobs=jobs)
        resolver = None
        if resolve:
            from envkit.maintain.resolvable import uv_resolver

            resolver = uv_resolver(uv_binary(), config, uv_environ(), timeout, retries)
        report = check_builds(catalog, config, build or (), pythons, settings,
                              _progress(json_output, "reading index pages"), resolver=resolver,
                              resolve_progress=_progress(json_output, "resolving with uv"))
        if json_output:
            print_json(report.to_dict())
        else:
            from envkit.text.terminal import printable

            # (what the indexes said, file names and versions among it, is shown escaped, never obeyed)
            render_check(report, lambda line: typer.echo(printable(line, lines=True)))
        if not report.ok:
            raise typer.Exit(1)


def _progress(json_output: bool, doing: str):
    """Progress on stderr when it is a terminal: one line, rewritten."""
    import sys

    if json_output or not sys.stderr.isatty():
        return None

    def show(done: int, total: int, url: str) -> None:
        end = "\n" if done == total else ""
        sys.stderr.write(f"\r\x1b[K{doing}: {done}/{total}{end}")
        sys.stderr.flush()

    return show


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(metavar="OLD_DIR", parser=path_argument(),
                                        help="The manifests as they are (the published ones).")],
    new: Annotated[Optional[Path], typer.Argument(metavar="[NEW_DIR]", parser=path_argument(),
                                                  help="The edited manifests (default: --manifests / ENVKIT_MANIFESTS, "
                                                  "else the shipped ones).", show_default=False)] = None,
    machine: Annotated[Optional[List[Path]], typer.Option("--machine", metavar="FILE|DIR", parser=path_value,
                                                          help="A machine profile (`envkit detect --json` saved "
                                                          "there), or a directory of them; each machine is judged on "
                                                          "its own. Repeatable.", show_default=False)] = None,
    partition: Annotated[Optional[List[str]], typer.Option("--partition", metavar="P[:NODES]",
                                                           help="A partition of the site file, judged as a fleet "
                                                           "(a build fits when it fits every node). Repeatable.",
                                                           show_default=False)] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also list the manifests that do not change.")] = False,
    json_output: JsonOption = False,
    manifests: ManifestsOption = None,
) -> None:
    """Show what an edit of the manifests changes for real machines.

    Per machine (or partition), each manifest's selected build before and after, and the builds that now fit or no
    longer fit. Without --machine or --partition, this machine is judged.

    Exit codes: 0 shown, 2 bad input (a broken manifest, profile or site file, an unknown partition).
    """
    with reported_errors():
        from envkit.catalog import load_catalog
        from envkit.maintain.diff import diff_target, render_diff

        old_catalog = _given_catalog(old, "OLD_DIR")
        new_catalog = _given_catalog(new, "NEW_DIR") if new is not None else load_catalog(manifests_dir(manifests))
        diffs = [diff_target(name, kind, fleet, old_catalog, new_catalog)
                 for name, kind, fleet in _targets(machine or (), partition or (), new_catalog.tables)]
        if json_output:
            print_json({"old": str(old), "new": str(new_catalog.directory), "targets": [d.to_dict() for d in diffs]})
        else:
            render_diff(diffs, typer.echo, show_unchanged=show_all)


def _given(directory: Path, argument: str) -> Path:
    """A manifests directory given as an argument: one that cannot be listed is said of that argument (the loader's
    hint names --manifests, $ENVKIT_MANIFESTS and the config, which do not choose it here)."""
    from envkit.catalog import manifest_names
    from envkit.errors import BadInputError

    try:
        manifest_names(directory)
    except BadInputError as error:
        raise BadInputError(error.message, hint=f"Check the {argument} argument: a manifests directory, such as an "
                                                "edited copy of envkit's envs/.") from None
    return directory


def _given_catalog(directory: Path, argument: str):
    """The catalog of a manifests directory given as an argument: a broken manifest in it is said of that argument
    (the loader's hint points at --manifests, which does not choose it here)."""
    import shlex

    from envkit.catalog import load_catalog
    from envkit.errors import ManifestError

    try:
        return load_catalog(_given(directory, argument))
    except ManifestError as error:
        error.hint = (f"Fix it (`envkit manifests validate {shlex.quote(str(directory))}` lists every problem), or "
                      f"give a good copy as {argument}.")
        raise


def _targets(machines, partitions, tables):
    """(name, kind, fleet) per machine named, per partition, or this machine when nothing is named."""
    from envkit.commands.options import TargetOptions
    from envkit.commands.targets import fleet_for, partition_machines
    from envkit.machines.fleet import Fleet, fleet_of, load_profiles

    out = []
    for machine in load_profiles(list(machines), user_dirs().cache) if machines else []:
        out.append((machine.name, "machine", Fleet((machine,))))
    for spec in partitions:
        out.append((spec, "partition", fleet_of(partition_machines(spec))))
    if not out:
        fleet = fleet_for(tables, TargetOptions())
        out.append((fleet.names[0], "machine", fleet))
    return out


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="manifests")
