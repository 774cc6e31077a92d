"""The envkit command line: the typer app, its global options, and the command groups wired in.

Each group lives in its own module under ``envkit.commands`` (parse -> call the library -> render -> exit code).
Exit codes: 0 success, 1 the check or operation failed, 2 bad usage or bad input (a manifest, a profile, a name).
Errors are one sentence and a next step; ``--debug`` shows tracebacks.
"""

import gc
import sys
from importlib import import_module
from types import ModuleType
from typing import Annotated, Mapping, Optional, Sequence

import typer

from envkit.commands.output import Settings

# The command groups (modules of envkit.commands) and the commands each registers, in the order in which
# `envkit --help` lists them: look, make, check, manage, clusters, maintain the manifests. A command named first on
# the command line needs only its own group imported and built (start-up is measured on `envkit list`); anything
# else gets them all.
COMMAND_GROUPS = (
    ("inspect", ("detect", "list")),
    ("create", ("create",)),
    ("add", ("add",)),  # packages into an environment, its build held
    ("upgrade", ("upgrade",)),  # the newest build that fits it, its additions kept
    ("lock", ("lock", "export")),
    ("check", ("doctor", "verify")),
    ("envs", ("envs", "run", "remove")),
    ("site", ("site",)),
    ("slurm", ("survey", "job")),
    ("shell", ("shell",)),  # on a node through Slurm: an interactive shell, a Jupyter server
    ("jupyter", ("jupyter",)),
    ("manifests", ("manifests",)),  # a group of subcommands: `envkit manifests check|validate|...`
    ("cache", ("cache",)),  # `envkit cache` and `envkit cache clean`
    ("modules", ("module",)),  # modulefiles of environments (a site's shared ones: envkit.shared)
    ("travel", ("pack", "bundle")),  # environments that travel: one-file images, offline bundles
)

app = typer.Typer(
    name="envkit",
    help=(
        "Deep-learning environments that really run on this machine's NVIDIA driver and GPUs.\n\n"
        "envkit detects the driver (the highest CUDA it supports) and every GPU's compute capability, and picks "
        "the newest PyTorch, TensorFlow, JAX or MXNet build from curated manifests that will run here.\n\n"
        "Start with `envkit detect`, then `envkit list torch --all`."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from pathlib import Path

        from envkit import DISTRIBUTION, __version__

        # The distribution and where it is installed tell this envkit from PyPI's unrelated "envkit" package.
        typer.echo(f"envkit {__version__} ({DISTRIBUTION}, {Path(__file__).resolve().parent})")
        raise typer.Exit(0)


def _color_choice(value: str) -> str:
    from envkit.text.colour import parse_choice

    try:
        return parse_choice(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", envvar="ENVKIT_DEBUG", help="Show tracebacks for errors.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help="Print envkit's version and exit."),
    ] = False,
    color: Annotated[
        str,
        typer.Option("--color", metavar="WHEN", callback=_color_choice,
                     help="Colour the verdicts (PASS green, FAIL red, NOT RUN and warnings yellow) and the pick: auto "
                     "(on a terminal, unless NO_COLOR is set; FORCE_COLOR forces it), always or never."),
    ] = "auto",
    no_color: Annotated[bool, typer.Option("--no-color", help="The same as --color never.")] = False,
) -> None:
    Settings.debug = debug
    Settings.colour = "never" if no_color else color


def groups_for(argv: Sequence[str]) -> list[ModuleType]:
    """The command group modules to register for this command line: the named command's alone when it comes first
    (``envkit list --json``), every group otherwise (``envkit --help``, ``envkit --debug list``, a typo)."""
    named = [group for group, commands in COMMAND_GROUPS if _first(argv) in commands]
    return [import_module(f"envkit.commands.{group}") for group in (named or [g for g, _ in COMMAND_GROUPS])]


def keep_named_command(typer_app: typer.Typer, argv: Sequence[str]) -> None:
    """When the command line names a command first, leave it the only one its group registered: typer builds the
    options of every registered command before it runs one (`detect`'s beside `list`, `doctor`'s beside `verify`)."""
    from typer.main import get_command_name  # (imported with typer) how typer names a command after its function

    if any(_first(argv) in commands for _, commands in COMMAND_GROUPS):
        typer_app.registered_commands = [info for info in typer_app.registered_commands
                                         if (info.name or get_command_name(info.callback.__name__)) == _first(argv)]


def with_nearest_command(message: str, context) -> str:  # type: ignore[no-untyped-def]
    """click's "No such command 'lsit'." with the nearest command names (envkit.text.words.closest: `list`, a letter
    swapped, before `site`) instead of typer's own guesses; any other message as it is."""
    import re

    found = re.fullmatch(r"No such command '(?P<name>[^']*)'\.(?: Did you mean .*\?)?", message)
    if found is None or context is None or not hasattr(context.command, "list_commands"):
        return message
    from envkit.text.words import closest

    near = closest(found["name"], context.command.list_commands(context))
    return f"No such command {found['name']!r}." + (f" Did you mean {' or '.join(map(repr, near))}?" if near else "")


def _first(argv: Sequence[str]) -> Optional[str]:
    return argv[0] if argv else None


def reflow_help(typer_app: typer.Typer) -> None:
    """Give each registered command (and each of a group's) its docstring as help with every paragraph on one line.
    typer keeps a docstring's own line breaks, and the terminal then wraps each of those lines again: ragged help in
    any window narrower than the source. Paragraphs (split by blank lines) are prose: none holds a list."""
    for info in typer_app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = reflowed(info.callback.__doc__)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            reflow_help(group.typer_instance)


def reflowed(docstring: str) -> str:
    """Each paragraph of ``docstring`` on one line (pure)."""
    from inspect import cleandoc

    return "\n\n".join(" ".join(paragraph.split()) for paragraph in cleandoc(docstring).split("\n\n"))


def named_command(args: Sequence[str]) -> str:
    """The command a command line names (`envkit manifests check` for ``manifests check --build``), for a usage
    error that click raised before it made the command's context (an option without its value)."""
    import typer.main

    words, command = ["envkit"], typer.main.get_command(app)
    for arg in args:
        if arg.startswith("-"):  # the global options take no value
            continue
        command = getattr(command, "commands", {}).get(arg)
        if command is None:
            break
        words.append(arg)
    return " ".join(words)


COMPLETION_OPTIONS = ("--install-completion", "--show-completion")


def completion_wanted(args: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether this run needs typer's completion machinery: the shell asking for completions (``_ENVKIT_COMPLETE``
    set), ``--install-completion`` / ``--show-completion``, or the help that lists them (no command named first).
    Every other command line leaves it out: it costs start-up (bench/list_startup.py)."""
    if environ.get("_ENVKIT_COMPLETE"):
        return True
    if any(arg.split("=", 1)[0] in COMPLETION_OPTIONS for arg in args):
        return True
    return not any(_first(args) in commands for _, commands in COMMAND_GROUPS)


def completed_words(environ: Mapping[str, str]) -> list[str]:
    """For a completion request, the words typed after ``envkit`` that are complete (the one being typed left
    out), so that only the named command's group is registered, as when it runs: bash passes COMP_WORDS and
    COMP_CWORD, the other shells _TYPER_COMPLETE_ARGS (the line so far)."""
    import shlex

    try:
        if "COMP_WORDS" in environ:
            words = shlex.split(environ["COMP_WORDS"])
            return words[1:int(environ.get("COMP_CWORD", len(words)))]
        line = environ.get("_TYPER_COMPLETE_ARGS", "")
        words = shlex.split(line)
        return words[1:] if line.endswith(" ") else words[1:-1]
    except ValueError:  # an open quote: register everything
        return []


SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")  # the shells typer writes completion for


def completion_shell_problem(args: Sequence[str], environ: Mapping[str, str]) -> Optional[str]:
    """Why --install-completion / --show-completion cannot work here (the shell that runs envkit is not one typer
    writes completion for), or None. typer itself would print "Shell sh not supported." and exit 1."""
    if not any(arg.split("=", 1)[0] in COMPLETION_OPTIONS for arg in args):
        return None
    if environ.get("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"):  # then the option takes the shell's name
        return None
    try:
        import shellingham  # typer's own dependency, which it asks the same question

        shell = shellingham.detect_shell()[0]
    except Exception:  # noqa: BLE001 - shellingham.ShellDetectionFailure, or no /proc to read
        shell = None
    if shell in SHELLS:
        return None
    return (f"shell completion is for {', '.join(SHELLS[:-2])} and PowerShell, and this shell is "
            f"{shell or 'not one envkit can tell'}: run the command from one of those shells")


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Run the app on ``argv``, or as the process's entry (the console script, ``python -m envkit``) on sys.argv.
    Usage errors are one line and a hint, like every other error (exit 2); a bare `envkit` prints the help and
    exits 2 too (no command given is a usage error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    import os

    # typer reads this when it builds the command (add_completion=True would build the two options every run)
    app._add_completion = completion_wanted(args, os.environ)
    problem = completion_shell_problem(args, os.environ)
    if problem is not None:
        typer.echo(f"envkit: error: {problem}", err=True)
        typer.echo("  For example, in bash: envkit --install-completion", err=True)
        sys.exit(2)
    # a completion request names its command in the shell's variables, not in argv
    named = completed_words(os.environ) if os.environ.get("_ENVKIT_COMPLETE") else args
    for group in groups_for(named):
        group.register(app)
    keep_named_command(app, named)
    reflow_help(app)
    if argv is None:  # the process's entry, not a caller's: what it holds is not ours to freeze
        # typer's modules and the command group's live as long as the process: frozen, no garbage collection walks
        # them again, and the exit does not tear them down one by one, 5 to 10 ms of every command
        # (bench/list_startup.py). What the command imports and makes from here on is collected as usual.
        gc.freeze()
    try:
        code = app(args=args, prog_name="envkit", standalone_mode=False)
    except typer.Abort:
        typer.echo("envkit: nothing done", err=True)
        code = 1
    except typer.TyperException as error:  # click's UsageError and BadParameter
        context = getattr(error, "ctx", None)
        if type(error).__name__ == "NoArgsIsHelpError" and context is not None:
            # click made the help the error's message when it raised it; typer's rich help printed itself then and
            # left the message empty. Asking the context for the help again would print it a second time.
            shown = error.format_message()
            if shown:
                typer.echo(shown)
        else:
            message = error.format_message() if hasattr(error, "format_message") else str(error)
            message = with_nearest_command(message, context)
            path = context.command_path if context is not None else named_command(args)
            typer.echo(f"envkit: error: {message}", err=True)
            typer.echo(f"  `{path} --help` lists what it takes.", err=True)
        code = getattr(error, "exit_code", 2)
    if argv is None:  # what the command imported and made is frozen too: the exit's last collection skips it, 5 ms
        gc.freeze()  # of a `create` (bench/create_speed.py)
    sys.exit(code if isinstance(code, int) else 0)
