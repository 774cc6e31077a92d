"""The suite-wide check of next steps (tests/support/next_steps.py, issue 39): every `envkit ...` line a command
prints in the suite's scenarios is parsed as envkit's command line and the environment it names must exist for the
user told. Here, that the check itself tells a working line from one that would fail when pasted."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.next_steps import next_steps, pasted_problem


@pytest.fixture
def user(tmp_path: Path) -> dict[str, str]:
    """A user with one environment, jax (its record only: the check reads records, it runs nothing)."""
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    from envkit.state import records
    from envkit.state.userdirs import user_dirs

    prefix = tmp_path / "envs" / "jax"
    prefix.mkdir(parents=True)
    record = records.Record(name="jax", prefix=str(prefix), kind="venv", backend="venv", manifest="jax",
                            build="jax-0.12-cu12", python="3.11", created="2026-11-28T00:00:00Z", machine={},
                            on_target=True)
    dirs = user_dirs(env)
    dirs.records.mkdir(parents=True)
    records.save(record, dirs.records)
    return env


def test_a_line_that_works_when_pasted_passes(user, tmp_path):
    assert pasted_problem("envkit run jax -- python your_script.py", user, tmp_path) is None
    assert pasted_problem("envkit list torch --partition gpu-a100", user, tmp_path) is None
    assert pasted_problem("envkit detect --json > machine.json", user, tmp_path) is None


@pytest.mark.parametrize("line,why", [
    ("envkit run torch -- python your_script.py", "envkit made no environment named 'torch'"),
    ("envkit verify site:jax", "no shared directory is configured here"),
    ("envkit lsit torch", "No such command 'lsit'"),
    ("envkit list torch --partiton gpu", "No such option: --partiton"),
    ("envkit run 'jax -- python", "not a shell line"),
    ("source envs/jax/bin/activate", "no such file to source"),
])
def test_a_line_that_would_fail_is_told_why(user, tmp_path, line, why):
    problem = pasted_problem(line, user, tmp_path)
    assert problem is not None and why in problem, problem


def test_the_steps_are_the_labelled_lines_and_the_quoted_commands():
    text = ("Made jax.\n  Or run in it: envkit run jax -- python your_script.py\n"
            "Not checked (no GPU here): run `envkit verify jax` to check it.\n")
    assert next_steps(text) == ["envkit run jax -- python your_script.py", "envkit verify jax"]
