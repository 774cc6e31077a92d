"""The next-step lines envkit prints (`  Or run in it: envkit run site:torch -- python your_script.py`, "run
`envkit verify NAME` to check it"), taken out of its output so that a test can run each one as a user would paste
it."""

from __future__ import annotations

import re

# A labelled line of create's "how to use it" block, and a command quoted in a sentence.
_LABELLED = re.compile(r"^\s+(?:Load it|Activate it|Or run in it|Check a node|Or as a job):\s+(\S.*)$")
_QUOTED = re.compile(r"`((?:envkit|module|source) [^`]+)`")


def next_steps(text: str) -> list[str]:
    """Every command ``text`` tells its reader to run, in order."""
    out = []
    for line in text.splitlines():
        labelled = _LABELLED.match(line)
        if labelled:
            out.append(labelled.group(1).strip())
        else:
            out += _QUOTED.findall(line)
    return out


# Every next step the suite's scenarios print, checked as it is printed (issue 39): each `envkit ...` line parses as
# envkit's command line (its command, options and arguments) and the environment it names exists for the user who
# was told, at that moment; each `source FILE` names a file there. The test helpers that run envkit
# (tests/create/conftest.py, tests/slurm/slurm_helpers.py, tests/probe/probe_helpers.py, tests/test_cli.py) call
# check_pasted; tests/conftest.py reports what was found at the end and fails the run on any.
CHECKED: list[int] = [0]
PROBLEMS: dict[str, None] = {}


def check_pasted(args, text: str, env, cwd) -> None:
    """Check each next step of ``text``, the output of `envkit ARGS`, as a user of ``env`` in ``cwd`` would paste it;
    problems go to PROBLEMS. A help text's examples are examples (NAME, P), not steps."""
    import os

    if "--help" in args or "-h" in args or not [a for a in args if not a.startswith("-")]:
        return
    for step in next_steps(text):
        CHECKED[0] += 1
        problem = pasted_problem(step, env, cwd if cwd is not None else os.getcwd())
        if problem is not None:
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
            PROBLEMS[f"{test}: `{step}`: {problem}"] = None


def pasted_problem(step: str, env, cwd) -> "str | None":
    """Why ``step`` would not work when pasted, or None."""
    import os
    import shlex

    try:
        words = shlex.split(step)
    except ValueError as error:
        return f"not a shell line ({error})"
    if words[0] == "source":
        return None if len(words) == 2 and os.path.isfile(os.path.join(cwd, words[1])) else "no such file to source"
    if words[0] != "envkit":
        return None  # `module load ...`: run by tests/create/test_shared_users.py with a real module system
    ends = [at for at, word in enumerate(words) if word in _SHELL_OPERATORS or word.startswith((">", "2>"))]
    return _envkit_problem(words[1:ends[0] if ends else None], env)


_SHELL_OPERATORS = ("|", "||", "&&", ";", "&", "<")
_PLACEHOLDER = re.compile(r"(?:site:)?[A-Z][A-Z_]*")


def _envkit_problem(args: list[str], env) -> "str | None":
    from unittest import mock

    from envkit.errors import EnvkitError

    leaf, values, problem = _parse(args)
    if problem is not None and problem.startswith("Missing argument") and all(a.isalpha() for a in args):
        return None  # `envkit lock` alone, in a sentence ("made with `envkit lock`"): the command named, not a step
    if problem is not None or leaf is None:
        return problem
    name = values.get("env")
    if not name or "--help" in args or "-h" in args or _PLACEHOLDER.fullmatch(name):
        return None  # (a template's ENV or NAME: the reader puts theirs in; the line still parses as envkit's)
    from envkit.commands.recorded import find_record

    with mock.patch.dict("os.environ", dict(env), clear=True):
        if leaf.name == "remove" and _removable(name):
            return None
        try:
            find_record(name, settled=False, held=False)
        except EnvkitError as error:
            return f"{error}"
    return None


def _removable(name: str) -> bool:
    """What `envkit remove` takes besides a readable record: a run of the name that was interrupted, a record that
    cannot be read (envkit.commands.envs.remove)."""
    from envkit.commands.places import user_dirs
    from envkit.commands.recorded import plain_name
    from envkit.create.journal import Journal
    from envkit.create.lock import journal_path
    from envkit.state import records

    dirs = user_dirs()
    return plain_name(name) and (Journal.load(journal_path(dirs.locks, name)) is not None
                                 or records.unreadable(dirs.records, name) is not None)


def _parse(args: list[str]):
    """(the command, its parsed values, None), or (None, {}, why the line is not envkit's)."""
    click = _click()
    try:
        context = _tree().make_context("envkit", list(args), resilient_parsing="--help" in args or "-h" in args)
        command = context.command
        rest = [*getattr(context, "_protected_args", getattr(context, "protected_args", [])), *context.args]
        while hasattr(command, "commands"):
            if not rest:
                return None, {}, None if "--help" in args or "-h" in args else "names no command"
            name, command, rest = command.resolve_command(context, rest)
            context = command.make_context(name, list(rest), parent=context,
                                           resilient_parsing="--help" in args or "-h" in args)
            rest = [*getattr(context, "_protected_args", getattr(context, "protected_args", [])), *context.args]
    except click.ClickException as error:
        return None, {}, error.format_message()
    return command, context.params, None


def _click():
    try:  # typer 0.27 and later carry their own click
        import typer._click as click  # type: ignore[import-not-found]
    except ImportError:
        import click
    return click


_TREE: list = []


def _tree():
    """envkit's whole command line, built once (envkit.cli registers only the group a command names)."""
    if not _TREE:
        from support.cli_tree import envkit_command

        _TREE.append(envkit_command())
    return _TREE[0]
