"""The README's two newcomer commands stay true: CI runs the test command verbatim. And every `envkit ...` command
line that the README, docs/ (subdirectories included) and envs/README.md show, inline or in a fenced code block, or a
command's --help gives as an example, is one envkit takes: options spelled as the code spells them, on the command
that has them; concrete examples parse as they stand. The side-effect-free ones also run (see
test_the_side_effect_free_commands_the_docs_show_run); every relative link leads to a file (and heading) that exists;
every option of every command is named on its reference page."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent


def readme_commands() -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", (REPO / "README.md").read_text())


def test_readme_gives_exactly_two_commands_install_and_test():
    commands = readme_commands()
    assert len(commands) == 2
    install, tests = commands
    assert install.startswith("python3 -m pip install . && envkit ")
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_ci_runs_it_in_a_fresh_venv_as_a_newcomer_would_and_on_the_machine_python():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    runs = [i for i, line in enumerate(ci) if line.split("#")[0].strip() == "readme_tests"]
    assert ci[ci.index("readme_tests() {") + 1] == readme_commands()[1]  # the function runs the command verbatim
    made = next(i for i, line in enumerate(ci) if line.startswith("python3 -m venv "))
    activated = next(i for i, line in enumerate(ci) if line.startswith(". ") and line.endswith("/bin/activate\""))
    left = ci.index("deactivate")
    assert len(runs) == 2 and made < activated < runs[0] < left < runs[1]


DOCS = ("README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md")), "envs/README.md")
SYNOPSIS = re.compile(r"[\[\]|]|\.\.\.")  # `envkit list [MANIFEST...] [--all]`: a synopsis, not a command line


def quoted_commands(text: str) -> list[str]:
    """The `envkit ...` spans of a text (markdown or help), each on one line, fenced code blocks left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    spans = [" ".join(span.replace("\\|", "|").split()) for span in re.findall(r"`(envkit [^`]+)`", text)]
    return [span if SYNOPSIS.search(span) else shell_words_of(span) for span in spans]


FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.S | re.M)
OUTPUT_BLOCKS = ("text",)  # a ```text block is what envkit prints, not commands to type


def fenced_commands(text: str) -> list[str]:
    """The `envkit ...` lines of a text's fenced code blocks (``$ `` prompts taken off), each cut where the shell
    takes over (a redirection, a pipe, `&&`, `;`, a comment): `envkit detect --json > a100-node.yaml` is
    `envkit detect --json`. Blocks marked ```text are output and left out."""
    lines = []
    for info, body in FENCE.findall(text):
        if info.strip() in OUTPUT_BLOCKS:
            continue
        for line in body.splitlines():
            line = line.strip()
            line = line[2:] if line.startswith("$ envkit ") else line
            if line.startswith("envkit "):
                lines.append(shell_words_of(line))
    return lines


def shell_words_of(line: str) -> str:
    """The command line up to where the shell takes over, its words as the shell splits them, joined again."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word and set(word) <= set("|&;<>()"):
            break
        words.append(word)
    return shlex.join(words)


def documented_commands(doc: str) -> list[str]:
    text = (REPO / doc).read_text(encoding="utf-8")
    return quoted_commands(text) + fenced_commands(text)


def test_fenced_commands_are_the_envkit_lines_of_code_blocks_cut_where_the_shell_takes_over():
    text = ("```\nenvkit detect --json > a100-node.yaml\n$ envkit list torch  # why\nmodule load x\n```\n"
            "```text\nenvkit 0.1.0 (envkit-gpu, ...)\n```\n```sh\npython3 -m pip install . && envkit create torch\n```\n"
            "```\nenvkit run site:torch -- python -c \"import torch; print(1)\"\n```\n")
    assert fenced_commands(text) == ["envkit detect --json", "envkit list torch",
                                     "envkit run site:torch -- python -c 'import torch; print(1)'"]


def envkit_command():
    """The click command of envkit with every group registered (a fresh app: envkit.cli's own stays untouched)."""
    import typer
    import typer.main

    from envkit.cli import _main, groups_for, reflow_help

    app = typer.Typer(context_settings={"help_option_names": ["-h", "--help"]})
    app.callback()(_main)
    for group in groups_for(["--help"]):
        group.register(app)
    reflow_help(app)
    return typer.main.get_command(app)


def help_texts(command, path=("envkit",)):
    """(words, help) of the command and of every command under it, their options' and arguments' help included."""
    yield " ".join(path), "\n\n".join([command.help or "", *(getattr(p, "help", None) or "" for p in command.params)])
    for name, sub in getattr(command, "commands", {}).items():
        yield from help_texts(sub, (*path, name))


def option_names(command) -> set[str]:
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)
            if name.startswith("-")} | {"-h", "--help"}


def takes_a_value(command, name: str) -> bool:
    return any(name in (*param.opts, *param.secondary_opts) and not getattr(param, "is_flag", False)
               and not getattr(param, "count", False) for param in command.params)


def problems_of(line: str, root) -> list[str]:
    """What is wrong with a command line (or a synopsis) for envkit: an unknown command, an option its command
    does not take, or (for a concrete command line) whatever the parser refuses."""
    words = shlex.split(line)[1:]
    command, path, at, after_command = root, ["envkit"], 0, 0
    while at < len(words) and words[at] != "--":
        word = words[at]
        at += 1
        if hasattr(command, "commands") and not word.startswith("-") and not SYNOPSIS.search(word):
            if word not in command.commands:
                return [f"`{' '.join(path)}` has no command {word!r}"]
            command = command.commands[word]
            path.append(word)
            after_command = at  # `envkit --debug create torch`: what follows `create` is create's
            continue
        if hasattr(command, "commands") and word.startswith("-") and "=" not in word and at < len(words) \
                and takes_a_value(command, word):
            at += 1  # `envkit --color always list`: `always` is --color's, not a command
        for piece in word.split("|"):  # `[--print|--submit]`, `FILE...|--partition`
            name = piece.strip("[]").split("=")[0].rstrip(".]")
            if name.startswith("-") and name not in option_names(command):
                return [f"`{' '.join(path)}` takes no option {name}"]
    if SYNOPSIS.search(line) or hasattr(command, "commands") or len(path) == len(words) + 1:
        return []  # a synopsis, a group, or a command named in passing (`envkit lock`): its words are checked
    rest = words[after_command:]
    while rest and rest[0].startswith("-") and len(path) == 1:
        rest = rest[1:]
    try:
        command.make_context(" ".join(path), list(rest))
    except Exception as error:  # click's UsageError, BadParameter: the parser refused it
        return [f"{type(error).__name__}: {getattr(error, 'format_message', error.__str__)()}"]
    return []


def test_problems_of_finds_a_misspelt_option_a_wrong_command_and_a_refused_value():
    root = envkit_command()
    assert problems_of("envkit list --all --json", root) == []
    assert problems_of("envkit list [MANIFEST...] [--all] [--json]", root) == []
    assert problems_of("envkit list --al", root) == ["`envkit list` takes no option --al"]
    assert problems_of("envkit list [--al]", root) == ["`envkit list` takes no option --al"]
    assert problems_of("envkit manifests validate | chek", root) == []  # a synopsis: its options alone are checked
    assert problems_of("envkit manifests chek DIR", root) == ["`envkit manifests` has no command 'chek'"]
    assert problems_of("envkit lock --machine a.yaml", root)[0].startswith("MissingParameter")
    assert problems_of("envkit verify x --gpus 0", root)[0].startswith("BadParameter")
    assert problems_of("envkit --color always --debug list torch --all", root) == []
    assert problems_of("envkit --color always lst", root) == ["`envkit` has no command 'lst'"]


@pytest.mark.parametrize("doc", DOCS)
def test_every_envkit_command_line_in_the_docs_is_one_envkit_takes(doc):
    root = envkit_command()
    lines = documented_commands(doc)
    assert lines or doc.startswith("docs/")
    wrong = {line: problems for line in lines if (problems := problems_of(line, root))}
    assert not wrong, wrong


def test_every_envkit_command_line_in_the_help_is_one_envkit_takes():
    """The examples in `envkit --help` and each command's --help parse as they stand (paste one: no usage error)."""
    root = envkit_command()
    shown = {(words, line) for words, text in help_texts(root) for line in quoted_commands(text)}
    assert len(shown) >= 20 and ("envkit list", "envkit list tensorflow --cuda 11.2 --gpu-arch 7.5") in shown
    wrong = {line: problems for _, line in shown if (problems := problems_of(line, root))}
    assert not wrong, wrong
