"""Recovery from a run that died at each point of its journal: what it made goes, what it set aside comes back,
a run that had finished its environment is finished, not undone, and what its installers left running is stopped
first. Runs are told apart by their id, never by the time they were made."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from envkit.create.journal import Journal, check_settled, interrupted, recover, recover_others, stamp, unstamp
from envkit.create.lock import journal_path, name_lock
from envkit.state import ownership, records

SAME_SECOND = "2026-11-21T10:00:00+00:00"


def _env(prefix: Path, name: str, created: str = SAME_SECOND, run: str | None = None) -> dict:
    prefix.mkdir(parents=True)
    record = {"name": name, "prefix": str(prefix), "kind": "venv", "backend": "venv", "manifest": "torch",
              "build": "torch-2.13-cpu", "python": "3.12", "created": created, "machine": {}, "on_target": True,
              "run": run}
    records.write_json_atomic(records.in_prefix(prefix), record)
    return record


def _journal(tmp_path: Path, prefix: Path, old: dict | None, run: str = "new-run") -> Journal:
    journal = Journal(tmp_path / "locks" / "t.creating", name="t", prefix=str(prefix), run=run, old_record=old)
    journal.path.parent.mkdir(exist_ok=True)
    journal.save()
    return journal


def test_died_after_setting_the_old_one_aside_puts_it_back(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    old = _env(prefix, "t", run="old-run")
    records.write_json_atomic(records.index_path(index, "t"), old)
    journal = _journal(tmp_path, prefix, old)
    journal.move_aside(prefix)
    journal.begin_prefix()
    prefix.mkdir()
    stamp(prefix)  # the new one, half made
    assert recover(journal.path, index)[0].startswith("undid")
    assert ownership.owner(prefix) == "t" and json.loads(records.in_prefix(prefix).read_text())["run"] == "old-run"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["t"] and not journal.path.exists()


def test_died_inside_the_backend_before_the_stamp_removes_the_prefix_and_puts_the_old_one_back(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    old = _env(prefix, "t", run="old-run")
    records.write_json_atomic(records.index_path(index, "t"), old)
    journal = _journal(tmp_path, prefix, old)
    journal.move_aside(prefix)
    journal.begin_prefix()
    (prefix / "bin").mkdir(parents=True)  # what `uv venv` or the conda engine had made: no stamp yet
    recover(journal.path, index)
    assert json.loads(records.in_prefix(prefix).read_text())["run"] == "old-run"
    assert not (prefix / "bin").exists() and sorted(p.name for p in prefix.parent.iterdir()) == ["t"]
    assert records.load(index, "t").run == "old-run"


def test_a_fresh_run_that_died_inside_the_backend_leaves_nothing(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    journal = _journal(tmp_path, prefix, None)
    journal.begin_prefix()
    (prefix / "conda-meta").mkdir(parents=True)
    recover(journal.path, index)
    assert not prefix.exists() and records.load(index, "t") is None and not journal.path.exists()


def test_a_prefix_the_run_had_not_begun_is_left_alone(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    journal = _journal(tmp_path, prefix, None)
    (prefix / "mine").mkdir(parents=True)  # the user's, made after the run died before its backend started
    recover(journal.path, index)
    assert (prefix / "mine").is_dir()


def test_died_after_finishing_the_new_one_in_the_same_second_keeps_it_and_deletes_the_old(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    old = _env(prefix, "t", run="old-run")  # made in the same second as the new one: only the run id tells them apart
    journal = _journal(tmp_path, prefix, old)
    journal.move_aside(prefix)
    journal.begin_prefix()
    _env(prefix, "t", run="new-run")
    stamp(prefix)
    unstamp(prefix)  # complete: it died before deleting what it replaced
    assert recover(journal.path, index)[0].startswith("finished")
    assert json.loads(records.in_prefix(prefix).read_text())["run"] == "new-run"
    assert records.load(index, "t").run == "new-run"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["t"]


def test_died_before_touching_anything_leaves_the_old_one_as_it_was(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    old = _env(prefix, "t", run="old-run")
    journal = _journal(tmp_path, prefix, old)
    assert recover(journal.path, index)[0].startswith("undid")
    assert ownership.owner(prefix) == "t" and records.load(index, "t").run == "old-run"


def test_a_dead_force_run_that_had_not_begun_leaves_the_old_environments_jupyter_kernel(tmp_path: Path):
    """--force --jupyter killed before it set anything aside: the kernelspec of that name is still the old one's."""
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    old = _env(prefix, "t", run="old-run")
    spec = tmp_path / "kernels" / "t"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": [str(prefix / "bin" / "python"), "-m", "ipykernel"]}))
    journal = _journal(tmp_path, prefix, old)
    journal.kernelspec = str(spec)
    journal.save()
    recover(journal.path, index)
    assert (spec / "kernel.json").is_file() and ownership.owner(prefix) == "t"


def test_a_run_that_died_once_its_environment_was_complete_leaves_it_settled(tmp_path: Path):
    """Killed while deleting what it replaced (committed) or just before (unstamped): the new environment stands,
    so `envkit run` and `envkit envs` take it as it is; the next create or remove deletes what was set aside."""
    prefix, index, locks = tmp_path / "envs" / "t", tmp_path / "records", tmp_path / "locks"
    old = _env(prefix, "t", run="old-run")
    journal = _journal(tmp_path, prefix, old)  # at journal_path(locks, "t")
    journal.move_aside(prefix)
    journal.begin_prefix()
    records.write_json_atomic(records.index_path(index, "t"), _env(prefix, "t", run="new-run"))
    unstamp(prefix)
    check_settled(locks, "t")
    assert interrupted(locks) == []
    journal.committed = True
    journal.save()
    check_settled(locks, "t")
    assert interrupted(locks) == []


def test_an_installer_the_dead_run_left_running_is_stopped_before_the_prefix_is_touched(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    journal = _journal(tmp_path, prefix, None)
    journal.begin_prefix()
    (prefix / "lib").mkdir(parents=True)
    assert journal.note_prefix(prefix)  # as the run's watcher does once the backend made it
    # An installer in its own session, with a worker, writing into the prefix (as uv does after envkit is killed).
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"[(open({str(prefix / 'lib' / 'written')!r}, 'a').write('x'), time.sleep(0.02)) for _ in range(3000)]")
    installer = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        journal.add_process(installer.pid)
        time.sleep(0.5)
        recover(journal.path, index)
        assert installer.wait(timeout=5) == -signal.SIGKILL
        members = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _group(p) == installer.pid]
        assert members == []  # its worker too
        time.sleep(0.2)
        assert not prefix.exists()  # removed after it stopped: nothing writes into it again
    finally:
        if installer.poll() is None:
            os.killpg(installer.pid, signal.SIGKILL)
            installer.wait()


def _group(proc: Path) -> int:
    """The process group of a live process (a zombie is done: it only waits for its parent to reap it)."""
    try:
        fields = (proc / "stat").read_text().rpartition(")")[2].split()
        return -1 if fields[0] == "Z" else int(fields[2])
    except (OSError, ValueError, IndexError):
        return -1


def test_a_recorded_process_group_number_reused_by_a_later_process_is_not_touched(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        journal = _journal(tmp_path, prefix, None)
        journal.processes.append([other.pid, 1 << 62])  # a group of that number that started "later": not this one
        journal.save()
        recover(journal.path, index)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_other_names_dead_runs_are_undone_but_live_ones_are_left_alone(tmp_path: Path):
    locks, index = tmp_path / "locks", tmp_path / "records"
    dead_prefix, live_prefix = tmp_path / "envs" / "dead", tmp_path / "envs" / "live"
    for name, prefix in (("dead", dead_prefix), ("live", live_prefix)):
        journal = Journal(journal_path(locks, name), name=name, prefix=str(prefix), run=name)
        locks.mkdir(exist_ok=True)
        journal.begin_prefix()
        prefix.mkdir(parents=True)
    with name_lock(locks, "live"):
        assert {(i.name, i.running) for i in interrupted(locks)} == {("dead", False), ("live", True)}
        notes = recover_others(locks, index, "new")
    assert notes and "dead" in notes[0]
    assert not dead_prefix.exists() and live_prefix.exists() and journal_path(locks, "live").exists()
    assert [i.name for i in interrupted(locks)] == ["live"]
