"""What a run killed inside the backend or the installers leaves, and what the next run makes of it: files the user
put at the prefix afterwards are theirs and stay; an installer that started in the instant before the journal could
name it is found by the run's mark (ENVKIT_RUN in its environment) and stopped."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from envkit.create.journal import Journal, recover
from support.pypi_index import IndexServer
from test_faults import Target, _running_in, venv_target  # noqa: F401 (a fixture)


def _settled(prefix: Path) -> None:
    deadline = time.monotonic() + 60
    while _running_in(prefix):  # what the dead run's installer still does (uv finishing the venv)
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_files_put_at_the_prefix_after_a_run_died_in_the_backend_are_kept(venv_target: Target):
    venv_target.kill_at("inside-backend")
    _settled(venv_target.prefix)
    shutil.rmtree(venv_target.prefix, ignore_errors=True)  # the user clears the half-made one and uses the path
    venv_target.prefix.mkdir(parents=True)
    (venv_target.prefix / "thesis.tex").write_text("mine")
    other = venv_target.envkit("create", *venv_target.args, "--yes", "--no-verify", "--name", "other")
    assert other.returncode == 0, other.stderr
    assert "undid an envkit run of torch-cu126" in other.stderr
    assert f"{venv_target.prefix} was left by an envkit run" in other.stderr  # said, not deleted
    assert (venv_target.prefix / "thesis.tex").read_text() == "mine"
    assert venv_target.home.record(venv_target.name) is None
    assert not (venv_target.home.data / "locks" / f"{venv_target.name}.creating").exists()
    removed = venv_target.envkit("remove", venv_target.name, "--yes")  # nothing of envkit's is left to remove
    assert (venv_target.prefix / "thesis.tex").read_text() == "mine", removed.stderr


def test_a_dead_runs_own_half_made_prefix_still_goes(venv_target: Target):
    venv_target.kill_at("inside-backend")
    _settled(venv_target.prefix)
    removed = venv_target.envkit("remove", venv_target.name, "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not venv_target.prefix.exists() and venv_target.beside() == []


def test_an_installer_the_journal_never_named_is_stopped_by_the_runs_mark(venv_target: Target,
                                                                          torch_index: IndexServer, torch_wheels):
    """SIGKILL in the instant between uv starting and the journal naming it: the journal on disk is then the one
    before (no process group of uv in it). The next run finds uv by the run's mark and stops it."""
    wheel = next(w for w in torch_wheels["cu126"] if w.name.startswith("torchvision"))
    torch_index.delay_file(wheel.name, 30)  # uv is still downloading when envkit dies
    venv_target.kill_at("installing")
    journal_file = venv_target.home.data / "locks" / f"{venv_target.name}.creating"
    data = json.loads(journal_file.read_text())
    data["processes"] = data["processes"][:-1]  # the journal as it was before uv's save: uv not in it
    journal_file.write_text(json.dumps(data))
    deadline = time.monotonic() + 60
    while not any(path.endswith(wheel.name) for path in torch_index.requests):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _running_in(venv_target.prefix)  # uv, in its own session, outlived envkit
    removed = venv_target.envkit("remove", venv_target.name, "--yes")
    assert removed.returncode == 0, removed.stderr
    assert _running_in(venv_target.prefix) == []
    time.sleep(1)
    assert not venv_target.prefix.exists()  # and nothing writes into it again


def _journal(tmp_path: Path, prefix: Path) -> Journal:
    journal = Journal(tmp_path / "locks" / "t.creating", name="t", prefix=str(prefix), run="r1")
    journal.path.parent.mkdir(exist_ok=True)
    journal.save()
    journal.begin_prefix()
    return journal


def test_the_noted_directory_goes_and_one_made_in_its_place_stays(tmp_path: Path):
    prefix = tmp_path / "envs" / "t"
    journal = _journal(tmp_path, prefix)
    (prefix / "lib").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr\n")
    assert journal.note_prefix(prefix)
    recover(journal.path, tmp_path / "records")
    assert not prefix.exists()

    journal = _journal(tmp_path, prefix)
    (prefix / "lib").mkdir(parents=True)
    assert journal.note_prefix(prefix)
    shutil.rmtree(prefix)
    prefix.mkdir()  # the user's, made after the run died (its number may be the freed one: what it holds tells)
    (prefix / "results.csv").write_text("1,2\n")
    notes = recover(journal.path, tmp_path / "records")
    assert (prefix / "results.csv").is_file() and any("remove it yourself" in note for note in notes)


def test_a_directory_the_journal_never_noted_goes_only_if_a_backend_made_all_of_it(tmp_path: Path):
    prefix = tmp_path / "envs" / "t"
    journal = _journal(tmp_path, prefix)  # died before its watcher saw the prefix
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr\n")
    recover(journal.path, tmp_path / "records")
    assert not prefix.exists()

    journal = _journal(tmp_path, prefix)
    (prefix / "bin").mkdir(parents=True)
    (prefix / "notes.txt").write_text("mine")
    recover(journal.path, tmp_path / "records")
    assert (prefix / "notes.txt").read_text() == "mine"
