"""What every command says and how: its reports and JSON on stdout, its errors as one clear line and an exit code
(never a traceback unless --debug), and the global options that decide both (Settings)."""

import contextlib
from typing import Iterator, Optional

import typer


class Settings:
    """The global options (``envkit --debug ...``), set once by the app's callback."""

    debug = False
    colour = "auto"  # --color WHEN (--no-color: never): envkit.text.colour.colour_wanted decides with the environment


def echo_report(text: str, table: bool = False) -> None:
    """A report on stdout, its verdicts, warnings and pick coloured when colour is on (envkit.text.colour)."""
    import os

    from envkit.text.colour import colour_wanted, paint

    if colour_wanted(Settings.colour, os.environ, stdout_is_terminal()):
        typer.echo(paint(text, table), color=True)  # color=True: click strips escapes from what is not a terminal
    else:
        typer.echo(text)


@contextlib.contextmanager
def reported_errors() -> Iterator[None]:
    """Turn envkit's errors into one clear message and its exit code; anything else is a bug, said plainly.
    SIGTERM, SIGHUP, SIGQUIT and Ctrl-C end the command as a whole (envkit.system.signals): what it started is stopped, its
    jobs cancelled and its temporary files removed on the way out, whichever thread started them; exit 128 + N."""
    from envkit.errors import EnvkitError
    from envkit.system.signals import interrupting_signals

    try:
        with interrupting_signals():
            yield
    except EnvkitError as error:
        if Settings.debug:  # the traceback, and still the exit code scripts rely on
            import traceback

            traceback.print_exc()
        from envkit.text.redact import redact  # a mirror's password, in a URL an error names, is never shown
        from envkit.text.terminal import printable  # nor another program's escape sequences

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
        from envkit.text.redact import redact

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
    """JSON on stdout (json_text), with the credentials of any URL in it masked (envkit.text.redact)."""
    from envkit.text.redact import redact

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

    from envkit.text.jsonout import versioned

    return json.dumps(versioned(data), indent=2 if (stdout_is_terminal() if indented is None else indented) else None)


def stdout_is_terminal() -> bool:
    import sys

    return sys.stdout.isatty()
