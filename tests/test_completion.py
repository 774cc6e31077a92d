"""Shell completion (typer's mechanism): the names envkit knows, completed in a real bash from the script envkit
prints, through the protocol zsh and fish use, and nothing of it on other commands' start-up."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from envkit.cli import completed_words, completion_wanted
from envkit.state import records
from envkit.state.userdirs import user_dirs
from tests.test_cli import PROFILES, assert_clean_error

CONSOLE_SCRIPT = Path(sysconfig.get_path("scripts")) / "envkit"
SITE = """version: 1
partitions:
  gpu-a100:
    nodes:
      - {node: a100-01, profile_file: h100.yaml}
      - {node: v100-01, profile_file: v100.yaml}
"""


@pytest.fixture
def home(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "_ENVKIT", "COMP_", "_TYPER"))}
    env.update({"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
                "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "ENVKIT_SITE": str(tmp_path / "site.yaml"), "PATH": f"{CONSOLE_SCRIPT.parent}:{os.environ['PATH']}"})
    shutil.copy(PROFILES / "h100-cuda130.yaml", tmp_path / "h100.yaml")
    shutil.copy(PROFILES / "v100x8-cuda130.yaml", tmp_path / "v100.yaml")
    (tmp_path / "site.yaml").write_text(SITE)
    for name in ("torch-cu126", "tf-course"):
        prefix = tmp_path / "envs" / name
        (prefix / "bin").mkdir(parents=True)
        records.save(records.Record(name=name, prefix=str(prefix), kind="venv", backend="venv", manifest="torch",
                                    build="torch-2.14-cu126", python="3.12", created="2026-11-01T00:00:00Z",
                                    machine={}, on_target=True), user_dirs(env).records)
    return env


def complete(env: dict, shell: str, line: str) -> list[str]:
    """What envkit answers ``shell``'s completion request for ``line`` (the words typed so far)."""
    request = {**env, "_ENVKIT_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        words = shlex.split(line) + ([""] if line.endswith(" ") else [])
        request.update(COMP_WORDS=" ".join(words), COMP_CWORD=str(len(words) - 1))
    else:
        request.update(_TYPER_COMPLETE_ARGS=line, _TYPER_COMPLETE_FISH_ACTION="get-args")
    done = subprocess.run([sys.executable, "-m", "envkit"], capture_output=True, text=True, env=request, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done
    return done.stdout.split()


@pytest.mark.parametrize("line, expected", [
    ("envkit create t", ["tensorflow", "torch"]),
    ("envkit list j", ["jax"]),
    ("envkit lock m", ["mxnet"]),
    ("envkit run t", ["tf-course", "torch-cu126"]),
    ("envkit remove tf", ["tf-course"]),
    ("envkit list --partition g", ["gpu-a100"]),
    ("envkit list --partition gpu-a100:", ["gpu-a100:h100-r580", "gpu-a100:v100x8"]),
    ("envkit create torch --partition gpu-a100:v100x8,h", ["gpu-a100:v100x8,h100-r580"]),
])
def test_bash_completes_the_names_envkit_knows(home, line, expected):
    assert complete(home, "bash", line) == expected


def test_build_ids_follow_the_manifest_already_typed(home):
    ids = complete(home, "bash", "envkit create torch --build torch-2.14-")
    assert ids and all(i.startswith("torch-2.14-") for i in ids) and "torch-2.14-cu126" in ids
    assert complete(home, "bash", "envkit create jax --build torch-") == []  # jax has no torch builds
    assert "jax-0.12-cu13" in complete(home, "bash", "envkit create --build jax-0.12")  # no manifest yet: all


def test_zsh_and_fish_get_the_same_names_in_their_formats(home):
    assert complete(home, "fish", "envkit run t") == ["tf-course", "torch-cu126"]
    zsh = " ".join(complete(home, "zsh", "envkit create t"))
    assert '"tensorflow"' in zsh and '"torch"' in zsh and zsh.startswith("_arguments")


def test_a_broken_site_file_completes_nothing_and_says_nothing(home, tmp_path):
    (tmp_path / "site.yaml").write_text("partitions: [\n")
    assert complete(home, "bash", "envkit list --partition g") == []


@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="envkit is not installed as a console script here")
def test_a_real_bash_completes_through_the_script_envkit_prints(home):
    """The script `envkit --show-completion` prints, sourced into bash, answers through envkit itself."""
    script = subprocess.run(["bash", "-c", "envkit --show-completion"], capture_output=True, text=True, env=home,
                            timeout=60)
    assert script.returncode == 0 and "complete" in script.stdout, script
    session = (f"{script.stdout}\nCOMP_WORDS=(envkit create to); COMP_CWORD=2; _envkit_completion envkit; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "-c", session], capture_output=True, text=True, env=home, timeout=60)
    assert done.stdout.split() == ["torch"], done


def test_a_shell_typer_cannot_complete_for_is_one_clear_error(home):
    done = subprocess.run(["sh", "-c", f"{shlex.quote(sys.executable)} -m envkit --show-completion"],
                          capture_output=True, text=True, env=home, timeout=60)
    assert_clean_error(done, 2, "shell completion is for bash, zsh, fish and PowerShell, and this shell is sh")
    named = subprocess.run([sys.executable, "-m", "envkit", "--show-completion", "tcsh"], capture_output=True,
                           text=True, env={**home, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}, timeout=60)
    assert_clean_error(named, 2, "'tcsh' is not one of 'bash', 'zsh', 'fish'")


def test_the_completion_options_are_built_only_when_asked_for():
    # typer builds --install-completion and --show-completion into the command when _add_completion is set: a
    # command that runs (envkit list) never pays for them; the help that lists them, and the shell's request, do.
    assert not completion_wanted(["list", "--json"], {})
    assert not completion_wanted(["create", "torch"], {})
    assert completion_wanted([], {}) and completion_wanted(["--help"], {})
    assert completion_wanted(["--show-completion"], {}) and completion_wanted(["--install-completion=bash"], {})
    assert completion_wanted(["list"], {"_ENVKIT_COMPLETE": "complete_bash"})


def test_a_completion_request_registers_only_the_command_it_completes_for():
    assert completed_words({"COMP_WORDS": "envkit create torch --build t", "COMP_CWORD": "4"}) == [
        "create", "torch", "--build"]
    assert completed_words({"COMP_WORDS": "envkit cr", "COMP_CWORD": "1"}) == []
    assert completed_words({"_TYPER_COMPLETE_ARGS": "envkit list "}) == ["list"]
    assert completed_words({"_TYPER_COMPLETE_ARGS": "envkit li"}) == []
    assert completed_words({"_TYPER_COMPLETE_ARGS": "envkit list 'unclosed"}) == []


def test_help_lists_the_completion_options_and_a_command_does_not_take_them(home):
    shown = subprocess.run([sys.executable, "-m", "envkit", "--help"], capture_output=True, text=True, env=home,
                           timeout=60)
    assert "--install-completion" in shown.stdout and "--show-completion" in shown.stdout
    listed = subprocess.run([sys.executable, "-m", "envkit", "list", "--install-completion"], capture_output=True,
                            text=True, env=home, timeout=60)
    assert_clean_error(listed, 2, "No such option: --install-completion")
