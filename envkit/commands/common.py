"""What every command needs: error reporting, the user's directories, the machine to resolve for, JSON output."""

import contextlib
from pathlib import Path
from typing import Iterator, Optional

import typer

from envkit.commands.options import TargetOptions
# re-exported: the commands import these from here
from envkit.commands.places import current_site, manifests_dir, user_dirs, uv_binary, uv_environ  # noqa: F401


class Settings:
    """The global options (``envkit --debug ...``), set once by the app's callback."""

    debug = False
    colour = "auto"  # --color WHEN (--no-color: never): envkit.colour.colour_wanted decides with the environment


def echo_report(text: str, table: bool = False) -> None:
    """A report on stdout, its verdicts, warnings and pick coloured when colour is on (envkit.colour)."""
    import os

    from envkit.colour import colour_wanted, paint

    if colour_wanted(Settings.colour, os.environ, stdout_is_terminal()):
        typer.echo(paint(text, table), color=True)  # color=True: click strips escapes from what is not a terminal
    else:
        typer.echo(text)


@contextlib.contextmanager
def reported_errors() -> Iterator[None]:
    """Turn envkit's errors into one clear message and its exit code; anything else is a bug, said plainly."""
    from envkit.errors import EnvkitError

    try:
        yield
    except EnvkitError as error:
        if Settings.debug:  # the traceback, and still the exit code scripts rely on
            import traceback

            traceback.print_exc()
        from envkit.redact import redact  # a mirror's password, in a URL an error names, is never shown
        from envkit.terminal import printable  # nor another program's escape sequences

        for line in getattr(error, "tail", ()):  # an installer's last lines, where it failed
            typer.echo(printable(redact(f"  | {line}")), err=True)
        typer.echo(printable(redact(f"envkit: error: {error.message}"), lines=True), err=True)
        if error.hint:
            typer.echo(printable(redact(f"  {error.hint}"), lines=True), err=True)
        raise typer.Exit(error.exit_code) from None
    except KeyboardInterrupt as error:  # Ctrl-C: 130; SIGTERM (envkit.errors.Interrupted): 143, as shells count
        import signal

        signum = getattr(error, "signum", signal.SIGINT)
        typer.echo("envkit: interrupted" + (f" ({signal.Signals(signum).name})" if signum != signal.SIGINT else ""),
                   err=True)
        raise typer.Exit(128 + signum) from None
    except (typer.Exit, typer.Abort):
        raise
    except BrokenPipeError:  # the reader of the output went away (`envkit list | head`): stop, quietly
        raise typer.Exit(closed_output()) from None
    except OSError as error:  # the system refused a file (full, read-only, not allowed): a fault, not a bug
        if Settings.debug:
            raise
        where = f"{error.filename}: " if error.filename else ""
        typer.echo(f"envkit: error: {where}{error.strerror or error}", err=True)
        typer.echo("  Check that you can write there and that its disk has room (space and inodes).", err=True)
        raise typer.Exit(1) from None
    except Exception as error:  # a bug in envkit: never a bare traceback unless asked for
        if Settings.debug:
            raise
        from envkit.redact import redact

        typer.echo(redact(f"envkit: internal error: {type(error).__name__}: {error}"), err=True)
        typer.echo("  Rerun with --debug for the traceback, and report it.", err=True)
        raise typer.Exit(1) from None


def closed_output() -> int:
    """The exit status for a command whose reader stopped reading (a pipe to `head`): 1, as click gives its own
    output (the help) there. stdout goes to /dev/null from here, so that the exit's own flush of what is still
    buffered does not fail again ("Exception ignored ... BrokenPipeError"); nothing more is said, since stderr is
    often the same pipe."""
    import os
    import sys

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no stdout file to replace (a caller's stream): nothing is flushed at exit
        pass
    return 1


def print_json(data: object) -> None:
    """JSON on stdout (json_text), with the credentials of any URL in it masked (envkit.redact)."""
    from envkit.redact import redact

    text = redact(json_text(data))
    keep_json_for_tests(text)
    typer.echo(text)


def keep_json_for_tests(text: str) -> None:
    """Test-only: with _ENVKIT_TEST_JSON_DIR set (the test suite sets it), a copy of every JSON output goes there
    with the command that printed it, and the suite checks each against its schema (schemas/, tests/conftest.py).
    Without it (always, outside envkit's own tests) nothing is written."""
    import os

    directory = os.environ.get("_ENVKIT_TEST_JSON_DIR")
    if not directory:
        return
    import time

    try:  # typer 0.27 and later carry their own click
        from typer._click.globals import get_current_context
    except ImportError:
        from click import get_current_context
    context = get_current_context(silent=True)
    command = context.command_path if context is not None else "envkit"
    # The command's line, then the output: no json or tempfile imported here (the start-up tests count imports)
    name = os.path.join(directory, f"{os.getpid()}-{time.monotonic_ns()}.out")
    with open(name, "x", encoding="utf-8") as out:
        out.write(f"{command}\n{text}")


def json_text(data: object, indented: Optional[bool] = None) -> str:
    """JSON for stdout: indented for a person at a terminal, one line for a program reading a pipe (as `gh` does),
    unless ``indented`` says. The one-line form comes from json's C encoder; the indented one from its Python encoder,
    which takes several milliseconds over `envkit list --json`'s 70 KB, more than the rest of the listing."""
    import json

    from envkit.jsonout import versioned

    return json.dumps(versioned(data), indent=2 if (stdout_is_terminal() if indented is None else indented) else None)


def stdout_is_terminal() -> bool:
    import sys

    return sys.stdout.isatty()


def fleet_for(tables, target: TargetOptions):
    """The machines to resolve for (envkit.fleet.Fleet): this one (detected), or the profiles and partition
    named, with the command-line overrides applied (to one machine only: they describe one)."""
    from envkit.fleet import THIS_MACHINE, Fleet, Machine, fleet_of, load_profiles
    from envkit.machine import apply_overrides, parse_overrides

    overrides = parse_overrides(target.cuda, target.gpu_arch or ())
    if not target.elsewhere:
        from envkit.detect import detect_machine

        import os

        from envkit.slurm.job_context import apply_job_context, job_context

        profile = detect_machine(tables.cuda, tables.gpu_names, timeout=target.timeout)
        # Inside a Slurm job (or with CUDA_VISIBLE_DEVICES set): only the GPUs the job was given count.
        profile = apply_overrides(apply_job_context(profile, job_context(os.environ)), overrides)
        return Fleet((Machine(name=profile.name or THIS_MACHINE, profile=profile),))
    machines = load_profiles(target.machine or (), user_dirs().cache)
    if target.partition is not None:
        machines += partition_machines(target.partition)
    fleet = fleet_of(machines)
    if target.cuda is not None or target.gpu_arch:
        if len(fleet.machines) != 1:
            from envkit.errors import BadInputError

            raise BadInputError("--cuda and --gpu-arch describe one machine, and these options name "
                                f"{len(fleet.machines)}", hint="Edit the profiles instead, or name one machine.")
        only = fleet.machines[0]
        fleet = Fleet((Machine(only.name, apply_overrides(only.profile, overrides), only.file),))
    return fleet


def partition_machines(spec: str):
    """The machines of ``PARTITION[:NODE,...]`` in the site file (NODE: as `envkit site` names it, or its
    ``node:``)."""
    from envkit.fleet import named
    from envkit.site import parse_partition_spec, partition_nodes

    name, wanted = parse_partition_spec(spec)
    return [named(profile, profile.name or name, nodes=count)
            for profile, count in partition_nodes(current_site(), name, wanted)]


def machine_for(tables, target: TargetOptions):
    """The one machine a command judges: this one, or the one profile named; a fleet of several is an error."""
    fleet = fleet_for(tables, target)
    if fleet.single is None:
        from envkit.errors import BadInputError

        raise BadInputError(f"this command judges one machine, and the options name {len(fleet.machines)}",
                            hint="Name one profile with --machine.")
    return fleet.single


def group_command(fleet, target: TargetOptions, manifest: str, group, python: Optional[str] = None,
                  command: str = "create") -> Optional[str]:
    """The `envkit create` (or ``command`` "lock": `envkit lock`) command for one group of a fleet, shell-quoted:
    one profile per distinct configuration of the group (--machine FILE), or its nodes of the partition
    (--partition NAME:NODE,...)."""
    import shlex

    from envkit.fleet import distinct

    if group.selected is None:
        return None
    members = [m for m in fleet.machines if m.name in set(group.machines)]
    argv = ["envkit", command, manifest, "--build", group.selected.build.id]
    from envkit.records import name_for_machine

    name = name_for_machine(manifest, members[0].name)
    if command == "create":
        argv += ["--name", name]
    else:  # one lock per group, installed as the group's environment (envkit.lockfile.format.install_name)
        from envkit.lockfile.format import lock_file_name

        argv += ["-o", lock_file_name(name)]
    if python is not None:
        argv += ["--python", python]
    if command == "create" and not group.selected.build.is_gpu:
        argv.append("--cpu")  # no GPU build fits this group: say so, or create stops to ask
    nodes = []
    for config in distinct(members):
        with_file = next((m for m in config.machines if m.file), None)
        if with_file is not None:
            argv += ["--machine", with_file.file]
        else:
            nodes.extend(m.name for m in config.machines)
    if nodes and target.partition is not None:
        from envkit.site import parse_partition_spec

        argv += ["--partition", f"{parse_partition_spec(target.partition)[0]}:{','.join(nodes)}"]
    if target.manifests is not None:
        argv += ["--manifests", str(target.manifests)]
    return shlex.join(argv)


def target_argv(target: TargetOptions, absolute: bool = False, manifests: bool = True) -> list[str]:
    """The options that chose the machines (``absolute``: profile paths made absolute, for a record)."""
    argv: list[str] = []
    for machine in target.machine or ():
        argv += ["--machine", str(machine.absolute() if absolute else machine)]
    if target.partition is not None:
        argv += ["--partition", target.partition]
    if target.cuda is not None:
        argv += ["--cuda", target.cuda]
    for arch in target.gpu_arch or ():
        argv += ["--gpu-arch", arch]
    if manifests and target.manifests is not None:
        argv += ["--manifests", str(target.manifests)]
    return argv


def target_args(target: TargetOptions, python: Optional[str] = None) -> str:
    """The options that chose the machine (and the Python asked for), shell-quoted, for the next-step commands
    envkit prints."""
    import shlex

    return shlex.join(target_argv(target) + (["--python", python.strip()] if python is not None else []))


def find_record(name: str, settled: bool = True, held: bool = True):
    """The record of an environment envkit made, to act on its directory, or exit 2 naming the ones that exist.
    Every command that acts on a named environment goes through here, so all of them refuse (exit 1, saying why):
    ``settled``, a create run of it going on or interrupted; ``held``, a directory that no longer holds it (gone,
    another environment's, no envkit record in it: ownership.check_held). Only `envkit remove` asks for neither: it
    settles the run first and forgets an entry whose directory is not its environment, leaving the directory."""
    from envkit import ownership, records
    from envkit.errors import UnknownNameError
    from envkit.shared.layout import shared_name

    dirs = user_dirs()
    if shared_name(name) is not None:  # site:NAME, the site's shared environment (envkit.shared)
        import os

        from envkit.shared.find import find_shared

        return find_shared(name, os.environ, dirs, held=held)
    if settled and plain_name(name):
        from envkit.create.journal import check_settled

        check_settled(dirs.locks, name)
    record = records.load(dirs.records, name) if plain_name(name) else None
    if record is not None and held:
        ownership.check_held(record)
    if record is None:
        known = [r.name for r in records.load_all(dirs.records)]
        raise UnknownNameError(f"envkit made no environment named {name!r}", hint=known_names_hint(name, known))
    return record


def known_names_hint(name: str, known: list[str], shown: int = 12) -> str:
    """The environments there are, for an unknown ``name``: all of a few; of many, the closest and how to list
    them all."""
    if not known:
        return "It has made none yet: `envkit create torch`."
    if len(known) <= shown:
        return f"Its environments: {', '.join(known)}."
    import difflib

    close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
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
        raise EnvkitError(f"no environment at {prefix} ({python} does not exist)",
                          hint=f"{record.remake_hint('--force')}, or "
                               f"`envkit remove {record.name} --yes` deletes it.")
    raise BadInputError(f"no environment at {prefix} ({python} does not exist)",
                        hint="Give the directory of a conda environment or a venv.")


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
    from envkit.records import is_name

    return is_name(name)


def build_for_target(manifest, fleet, tables, request, build_id: Optional[str], target: TargetOptions,
                     python: Optional[str], command: str = "create"):
    """(the profile to plan with, the build id to install, why the GPUs go unused) for `create` and `lock`
    (``command``: which of them asks, for the commands it suggests).

    One machine: its profile and the build asked for (the plan itself judges it). Several: the build that fits them
    all, planned on the GPU machine whose driver supports the lowest CUDA (the conda solve must hold there); a fleet
    with no common GPU build is refused with one command per group."""
    if fleet.single is not None:
        return fleet.single, build_id, None
    from envkit.cpu_fallback import gpu_unused
    from envkit.create.prepare import DoesNotFit
    from envkit.errors import BadInputError
    from envkit.fleet import names_text, size_text
    from envkit.fleet_resolve import resolve_fleet
    from envkit.render import list_command

    result = resolve_fleet(manifest, fleet, tables, request)
    same_machines = target_args(target, python)
    lowest = fleet.planning_profile()
    if build_id is not None:
        chosen = next((c for c in result.resolution.candidates if c.build.id == build_id), None)
        if chosen is not None and not chosen.compatible:
            raise DoesNotFit(f"{build_id} does not fit every machine: {'; '.join(chosen.reasons)}",
                             hint=f"`{list_command(manifest.name, same_machines, show_all=False)}` shows the builds "
                                  "that fit every machine.")
        return lowest, build_id, None  # an unknown id: prepare says which there are
    commands = [group_command(fleet, target, manifest.name, group, python, command) for group in result.groups]
    if result.split and any(commands):  # (groups that no build fits, all of them: no build fits, below)
        made = "environment" if command == "create" else "lock"
        lines = [f"    {line}" if line else f"    (no build of {manifest.name} fits {names_text(group.machines)})"
                 for line, group in zip(commands, result.groups)]
        raise BadInputError(
            f"no GPU build of {manifest.name} fits all {size_text(fleet)}, so envkit makes no single "
            f"{made} for them: one per group",
            hint=("Create" if command == "create" else "Make") + " them with:\n" + "\n".join(lines))
    if result.selected is None:
        raise DoesNotFit(f"no build of {manifest.name} fits every machine of {names_text(fleet.names)}",
                         hint=f"`{list_command(manifest.name, same_machines)}` says why each one does not.")
    return lowest, result.selected.build.id, gpu_unused(result.resolution, lowest)


def target_words(target: TargetOptions, fleet) -> str:
    """What a lock (or an environment made from one) is for, in words: this machine, a partition, profiles."""
    from envkit.fleet import THIS_MACHINE, names_text

    if target.on_target:
        return THIS_MACHINE
    if not target.elsewhere:  # this machine, as --cuda and --gpu-arch describe it
        return f"{THIS_MACHINE} with {target_args(target._replace(manifests=None))}"
    if target.partition is not None:
        return f"partition {target.partition}"
    return f"machines {names_text(fleet.names)}" if fleet.single is None else f"profile {fleet.names[0]}"
