"""What every command needs: error reporting, the user's directories, the machine to resolve for, JSON output."""

import contextlib
from pathlib import Path
from typing import Iterator, Optional

import typer

from envkit.commands.options import TargetOptions


class Settings:
    """The global options (``envkit --debug ...``), set once by the app's callback."""

    debug = False


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
        for line in getattr(error, "tail", ()):  # an installer's last lines, where it failed
            typer.echo(f"  | {line}", err=True)
        typer.echo(f"envkit: error: {error.message}", err=True)
        if error.hint:
            typer.echo(f"  {error.hint}", err=True)
        raise typer.Exit(error.exit_code) from None
    except KeyboardInterrupt as error:  # Ctrl-C: 130; SIGTERM (envkit.errors.Interrupted): 143, as shells count
        import signal

        signum = getattr(error, "signum", signal.SIGINT)
        typer.echo("envkit: interrupted" + (f" ({signal.Signals(signum).name})" if signum != signal.SIGINT else ""),
                   err=True)
        raise typer.Exit(128 + signum) from None
    except (typer.Exit, typer.Abort):
        raise
    except Exception as error:  # a bug in envkit: never a bare traceback unless asked for
        if Settings.debug:
            raise
        typer.echo(f"envkit: internal error: {type(error).__name__}: {error}", err=True)
        typer.echo("  Rerun with --debug for the traceback, and report it.", err=True)
        raise typer.Exit(1) from None


def print_json(data: object) -> None:
    import json

    typer.echo(json.dumps(data, indent=2))


def user_dirs():
    import os

    from envkit.userdirs import user_dirs as dirs_of

    return dirs_of(os.environ)


def manifests_dir(manifests: Optional[Path]) -> Path:
    from envkit.catalog import default_manifests_dir

    if manifests is None:
        import os

        if os.environ.get("ENVKIT_MANIFESTS") is not None:  # set but empty: typer takes it for unset
            from envkit.errors import BadInputError

            raise BadInputError("$ENVKIT_MANIFESTS is empty", hint="Unset it, or give a manifests directory.")
        return default_manifests_dir()
    if not str(manifests).strip() or manifests == Path(""):
        from envkit.errors import BadInputError

        raise BadInputError("--manifests (or ENVKIT_MANIFESTS) is empty: give a manifests directory")
    return manifests


def machine_for(tables, target: TargetOptions):
    """This machine (detected) or the one in a profile file, with the command-line overrides applied."""
    from envkit.machine import apply_overrides, parse_overrides, read_profile

    overrides = parse_overrides(target.cuda, target.gpu_arch or ())
    if target.machine is not None:
        profile = read_profile(target.machine, user_dirs().cache)
    else:
        from envkit.detect import detect_machine

        profile = detect_machine(tables.cuda, tables.gpu_names, timeout=target.timeout)
    return apply_overrides(profile, overrides)


def target_args(target: TargetOptions) -> str:
    """The options that chose the machine, shell-quoted, for the next-step commands envkit prints."""
    import shlex

    argv: list[str] = []
    if target.machine is not None:
        argv += ["--machine", str(target.machine)]
    if target.cuda is not None:
        argv += ["--cuda", target.cuda]
    for arch in target.gpu_arch or ():
        argv += ["--gpu-arch", arch]
    if target.manifests is not None:
        argv += ["--manifests", str(target.manifests)]
    return shlex.join(argv)


def find_record(name: str, settled: bool = False):
    """The record of an environment envkit made, or exit 2 naming the ones that exist. ``settled``: and no create
    run of it going on or interrupted (exit 1 saying so)."""
    from envkit import records
    from envkit.errors import UnknownNameError

    dirs = user_dirs()
    if settled and plain_name(name):
        from envkit.create.journal import check_settled

        check_settled(dirs.locks, name)
    record = records.load(dirs.records, name) if plain_name(name) else None
    if record is None:
        known = [r.name for r in records.load_all(dirs.records)]
        raise UnknownNameError(
            f"envkit made no environment named {name!r}",
            hint=f"Its environments: {', '.join(known)}." if known else "It has made none yet: `envkit create torch`.",
        )
    return record


def plain_name(name: str) -> bool:
    from envkit.errors import BadInputError
    from envkit.records import check_name

    try:
        check_name(name)
    except BadInputError:
        return False
    return True
