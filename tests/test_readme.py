"""The README's two newcomer commands stay true: CI runs the test command verbatim. And every `envkit ...` command
line that the README, docs/ (subdirectories included) and envs/README.md show, inline or in a fenced code block, or a
command's --help gives as an example, is one envkit takes: options spelled as the code spells them, on the command
that has them; concrete examples parse as they stand. The side-effect-free ones also run (see
test_the_side_effect_free_commands_the_docs_show_run); every relative link leads to a file (and heading) that exists;
every option of every command is named on its reference page."""

from __future__ import annotations

import os
import re
import sys
import shlex
from pathlib import Path

import pytest

from support.cli_tree import envkit_command

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


# The side-effect-free commands the docs show, run against the stand-ins. -----------------------------------------

PROFILES = REPO / "tests" / "profiles"
LAB_PROFILES = ("rtx2070-cuda124.yaml", "gtx1080ti-cuda112.yaml", "rtx4090-cuda126.yaml")
A100_NODE = {"driver_version": "535.104.05", "cuda_driver": "12.2",
             "gpus": [{"name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "memory_mib": 81920}]}
SITE_PARTITIONS = ("gpu-4-a100", "gpu-a100")  # the partitions the docs name, each of A100 nodes
RUNS = ("detect", "list", "site")  # commands that only read (with --help and create --dry-run)
EXIT_CODES: dict[str, int] = {}  # a documented command line that exits otherwise -> its documented code


def placeholders(home: Path) -> dict[str, str]:
    """The file names the docs use for the reader's own files -> stand-ins: profiles of tests/profiles and the
    shipped manifests."""
    lab, envs = str(home / "lab-profiles"), str(REPO / "envs")
    return {"a100-node.yaml": str(home / "a100-node.yaml"), "v100-node.yaml": str(PROFILES / "v100x8-cuda130.yaml"),
            "grace-node.yaml": str(PROFILES / "gh200-r570-cuda128.yaml"),  # docs/platforms.md (issue 43)
            "orin.yaml": str(PROFILES / "jetson-agx-orin-jp62.yaml"),
            "mi300x-node.yaml": str(PROFILES / "mi300x-x8-amdgpu6.12.yaml"),
            "lab-profiles/": lab, "~/lab-profiles/": lab, "saved-profiles/": lab,
            "~/manifests-edit": envs, "/shared/envkit/manifests": envs, "DIR": envs, "MANIFEST": "torch"}


def stand_in_home(home: Path) -> dict[str, str]:
    """A home with the lab's saved profiles and a site file of the docs' partitions; the environment envkit runs in
    there (no config, manifests, site or shared directory of the caller's)."""
    import json
    import shutil

    (home / "lab-profiles").mkdir(parents=True)
    (home / "a100-node.yaml").write_text(json.dumps(A100_NODE), encoding="utf-8")
    for name in LAB_PROFILES:
        shutil.copy(PROFILES / name, home / "lab-profiles" / name)
    site = {"version": 1, "partitions": {
        name: {"nodes": [{"node": "a100-01", "count": 4, "profile": A100_NODE}]} for name in SITE_PARTITIONS}}
    (home / ".config" / "envkit").mkdir(parents=True)
    (home / ".config" / "envkit" / "site.yaml").write_text(json.dumps(site), encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "XDG_", "_ENVKIT"))}
    return {**environment, "HOME": str(home), "NO_COLOR": "1", "COLUMNS": "120"}


def runnable(line: str) -> bool:
    """Whether a documented command line only reads: `envkit list`, `detect`, `site`, `create ... --dry-run` (not
    from a lock, which needs the reader's file), any `--help` and `--version`. A synopsis is not a command line."""
    words = shlex.split(line)[1:]
    if SYNOPSIS.search(line) or not words:
        return False
    named = [word for word in words if not word.startswith("-")]
    command = named[0] if named else None
    if {"--help", "-h"} & set(words) or (command is None and "--version" in words):
        return True
    if command in RUNS:
        return True
    return command == "create" and "--dry-run" in words and not any(w.startswith("--from-lock") for w in words)


def test_runnable_is_the_commands_that_only_read():
    assert runnable("envkit list torch --all") and runnable("envkit --no-color site --builds")
    assert runnable("envkit create torch --dry-run") and runnable("envkit job --help")
    assert not runnable("envkit create torch") and not runnable("envkit survey")
    assert not runnable("envkit list [MANIFEST...] [--all]") and not runnable("envkit create --from-lock a --dry-run")
    assert runnable("envkit --version") and not runnable("envkit remove site:torch --version 2.13 --yes")


def test_the_side_effect_free_commands_the_docs_show_run(tmp_path):
    """Every `envkit list`, `detect`, `site`, `create ... --dry-run`, `--help` and `--version` line of the README,
    docs/ and envs/README.md runs, in a temporary home, against the stand-ins: the shipped manifests, the profiles
    of tests/profiles (the placeholder names the docs use, `a100-node.yaml`, `lab-profiles/`, ..., mapped to them),
    a site file of the partitions the docs name, and this machine as it is (a GPU or none). Each exits 0, or the code
    EXIT_CODES documents. Commands that need Slurm (survey, job, shell, jupyter, verify --partition), a network or a
    real install (create, lock, manifests check, verify, doctor, export) are parsed, not run: the test above."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    home = tmp_path / "home"
    environment = stand_in_home(home)
    swap = placeholders(home)
    lines = sorted({line for doc in DOCS for line in documented_commands(doc) if runnable(line)})
    assert len(lines) >= 25, lines

    def run(line: str) -> tuple[str, int, str]:
        argv = [swap.get(word, word) for word in shlex.split(line)[1:]]
        done = subprocess.run([sys.executable, "-m", "envkit", *argv], capture_output=True, text=True,
                              env=environment, cwd=tmp_path, timeout=120)
        return line, done.returncode, done.stderr[-600:]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run, lines))
    wrong = {line: (code, err) for line, code, err in results if code != EXIT_CODES.get(line, 0)}
    assert not wrong, wrong


# Links, and the reference pages. ---------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchors_of(path: Path) -> set[str]:
    """The anchors GitHub gives a markdown file's headings (lower case, punctuation dropped, spaces as dashes)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        found.add(slug)
    return found


def link_problems(doc: str) -> list[str]:
    path = REPO / doc
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    problems = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https://..., mailto:
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            problems.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors_of(linked):
            problems.append(f"{target}: no such heading in {linked.relative_to(REPO)}")
    return problems


@pytest.mark.parametrize("doc", DOCS)
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(doc):
    assert not link_problems(doc)


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path, monkeypatch):
    page = REPO / "docs" / "lab-user.md"
    assert "#see-what-this-machine-can-run" in {f"#{a}" for a in anchors_of(page)}
    assert "envkit-create---from-lock" in anchors_of(REPO / "docs" / "reference" / "lock.md")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "a.md").write_text("# Title `x`\n[b](b.md) [c](a.md#nope) [d](a.md#title-x) [e](https://x.org)\n")
    assert link_problems("a.md") == ["b.md: no such file", "a.md#nope: no such heading in a.md"]


REFERENCE = {  # reference page -> the commands whose every option it names
    "global.md": [()],
    "inspect.md": [("detect",), ("list",)],
    "create.md": [("create",)],
    "add.md": [("add",), ("upgrade",)],
    "lock.md": [("lock",), ("export",)],
    "check.md": [("verify",), ("doctor",)],
    "envs.md": [("envs",), ("run",), ("remove",)],
    "cluster.md": [("site",), ("survey",), ("job",), ("shell",), ("jupyter",)],
    "manifests.md": [("manifests", "validate"), ("manifests", "check"), ("manifests", "diff")],
    "cache.md": [("cache",), ("cache", "clean")],
    "module.md": [("module",)],
    "travel.md": [("pack",), ("bundle",)],
}


def test_every_command_has_a_reference_page_that_names_every_option():
    """docs/reference/ has a page per command group; each names every option its commands' --help lists (the tables
    are taken from --help), so a new option or command without its documentation fails here."""
    root = envkit_command()

    def commands(command, path=()):
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from commands(sub, (*path, name))

    everything = {path: command for path, command in commands(root) if not hasattr(command, "commands") or
                  [p for p in command.params if p.opts and p.opts[0] not in ("--help",)]}
    documented = {path for paths in REFERENCE.values() for path in paths}
    assert set(everything) - {("manifests",)} <= documented, set(everything) - documented
    missing = {}
    for page, paths in REFERENCE.items():
        text = (REPO / "docs" / "reference" / page).read_text(encoding="utf-8")
        for path in paths:
            names = [name for param in everything.get(path, root).params if not getattr(param, "hidden", False)
                     for name in (*param.opts, *param.secondary_opts) if name.startswith("--")]
            absent = [name for name in names if f"`{name}`" not in text]
            if absent:
                missing[" ".join(("envkit", *path))] = absent
    assert not missing, missing
