"""`envkit add` stopped for real at each of its steps, by Ctrl-C (SIGINT) and by SIGKILL: the environment is as it
was before it (every file, the record), nothing of the run is left (its journal, what it set aside, the installer
it started), and it passes its check. A Ctrl-C is undone by the run itself; a SIGKILL by the next command that uses
the environment. The addition (newfl, which needs a newer filelock than the build installed) takes the longest road:
the installer first pinned to add only, then what it replaces set aside."""

from __future__ import annotations

import signal

import pytest

from add_helpers import fingerprint, lab, record_json
from conftest import held_at

NAME = "torch-cu126"
STEPS = ("add-journal", "add-installing", "add-aside", "add-installed", "add-checked", "add-recorded")


@pytest.fixture(scope="module")
def made(tmp_path_factory, torch_wheels):
    with lab(tmp_path_factory, torch_wheels, "add-faults") as (home, _):
        prefix = home.prefix(NAME)
        yield home, prefix, fingerprint(prefix), record_json(home, NAME)


def _held_at(home, step: str):
    return held_at(home, ["add", NAME, "newfl"], step)


def _as_before(home, prefix, files, record) -> None:
    assert fingerprint(prefix) == files
    assert record_json(home, NAME) == record
    assert not list((prefix / ".envkit").glob("aside-*"))
    assert not (home.data / "locks" / f"{NAME}.adding").exists()


@pytest.mark.parametrize("step", STEPS)
def test_sigkill_at_each_step_is_undone_by_the_next_command(made, step):
    home, prefix, files, record = made
    with _held_at(home, step) as (process, _):
        process.kill()
        process.communicate(timeout=60)
    check = home.envkit("verify", NAME)  # the next command that uses it puts it back first
    assert check.returncode == 0, check.stdout + check.stderr
    assert "an interrupted `envkit add` of torch-cu126 was undone" in check.stderr
    _as_before(home, prefix, files, record)
    assert not [line for line in _processes() if str(prefix) in line]


@pytest.mark.parametrize("step", ("add-installing", "add-aside", "add-checked"))
def test_ctrl_c_at_a_step_puts_the_environment_back_at_once(made, step):
    home, prefix, files, record = made
    with _held_at(home, step) as (process, _):
        process.send_signal(signal.SIGINT)
        (home.root / "paused").unlink(missing_ok=True)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    _as_before(home, prefix, files, record)
    check = home.envkit("verify", NAME)
    assert check.returncode == 0 and "was undone" not in check.stderr, check.stderr


def test_after_the_faults_the_addition_itself_still_works(made):
    home, prefix, _, _ = made
    done = home.envkit("add", NAME, "newfl")
    assert done.returncode == 0, done.stderr
    assert home.in_env(NAME, "import filelock; print(filelock.VERSION)") == "3.30.0"


def _processes() -> list[str]:
    from pathlib import Path

    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit():
                out.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace"))
        except OSError:
            continue
    return out
