"""Filesystem faults at every write of `envkit create` (fresh, --force, --from-lock) and `envkit remove`, for the
venv and the embedded conda engine (rattler): the faults a shared machine produces (ENOSPC, EDQUOT, EACCES, EROFS,
EXDEV), injected exactly at a write with the test-only fault point ENVKIT_TEST_FAULT_AT (envkit/state/testpause.py).
Whatever the step: one line naming the path and the cause, exit 1, no traceback, nothing half-made, the environment
a --force run was replacing intact, the journal clean. The same faults from real filesystems (a tmpfs out of
inodes, a read-only one) are in test_fs_real.py."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from conftest import CU126, GTX1080TI, LEGACY_BUILD, Home, conda_mirrors
from support.pypi_index import IndexServer
from test_create_conda import no_conda
from test_faults import Target, rattler_target, venv_target  # noqa: F401 (fixtures)

ERRNOS = ("ENOSPC", "EDQUOT", "EACCES", "EROFS", "EXDEV")
# The writes of a run, in order. "room": the journal before the directories above the prefix are made, "room-dir"
# one of them; "process": the journal naming an installer; "stamp" the stamp in the prefix; "commit" the journal
# saying the new one is complete; "commit-delete" deleting what it replaced.
FRESH = ("journal", "room", "room-dir", "begun", "process", "stamp", "stamped", "record", "unstamp")
FORCE = ("journal", "aside", "aside-rename", "begun", "process", "stamp", "stamped", "record", "unstamp")
COMPLETE = ("commit", "commit-delete")  # the new environment stands; what it replaced goes on the next run
NO_CHILD = ("process",)  # the embedded engine installs in envkit's own process: no installer to name (--no-verify)
CASES = [(backend, mode, point, "EXDEV" if point == "aside-rename" else ERRNOS[number % len(ERRNOS)])
         for backend in ("venv", "rattler") for mode, points in (("fresh", FRESH), ("force", FORCE + COMPLETE))
         for number, point in enumerate(p for p in points if backend == "venv" or p not in NO_CHILD)]


def test_every_cause_reaches_every_backend_and_mode():
    for backend in ("venv", "rattler"):
        for mode in ("fresh", "force"):
            assert {cause for b, m, _, cause in CASES if (b, m) == (backend, mode)} == set(ERRNOS)


def _faulted(target: Target, point: str, cause: str, *args: str, faults: str = ""):
    return target.home.envkit(*args, env={**target.env, "ENVKIT_TEST_FAULT_AT": faults or f"{point}:{cause}"})


def _one_error_line(stderr: str, cause: str) -> str:
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    [line] = [line for line in stderr.splitlines() if line.startswith("envkit: error:")]
    assert os.strerror(getattr(errno, cause)) in line, line
    assert "/" in line, line  # names the path
    return line


def _clean(target: Target) -> None:
    locks = target.home.data / "locks"
    assert not list(locks.glob("*.creating")) if locks.exists() else True
    assert [p for p in target.beside() if "~envkit-replaced-" in p] == []


@pytest.mark.parametrize("backend,mode,point,cause", CASES, ids=[f"{b}-{m}-{p}-{c}" for b, m, p, c in CASES])
def test_a_fault_at_each_write_of_create(request, backend: str, mode: str, point: str, cause: str):
    target: Target = request.getfixturevalue(f"{backend}_target")
    old_run = None
    if mode == "force":
        seeded = target.create("--no-verify")
        assert seeded.returncode == 0, seeded.stderr
        (target.prefix / "my-notes.txt").write_text("mine")
        old_run = target.home.record(target.name)["run"]
    done = _faulted(target, point, cause, "create", *target.args, "--yes", "--no-verify",
                    *(("--force",) if mode == "force" else ()))
    if point in COMPLETE:  # the new one is complete and recorded; what it replaced is deleted by the next run
        assert done.returncode == 0, done.stderr
        if point == "commit":  # its note cannot be written: the run's record in the prefix says it, deleting goes on
            _clean(target)
        else:
            assert "could not all be deleted" in done.stderr and "tries again" in done.stderr, done.stderr
        assert target.home.record(target.name)["run"] != old_run
        assert not (target.prefix / "my-notes.txt").exists()
        again = target.envkit("create", *target.args, "--yes", "--no-verify", "--name", "other", "--prefix",
                              str(target.home.root / "other"))
        assert again.returncode == 0, again.stderr
        _clean(target)
        assert target.beside() == [target.name]
        return
    assert done.returncode == 1, done.stdout + done.stderr
    line = _one_error_line(done.stderr, cause)
    _clean(target)
    if mode == "fresh":
        assert not target.prefix.exists(), (line, target.beside())
        assert target.home.record(target.name) is None
        assert target.envs() == []
    else:
        assert target.beside() == [target.name]
        assert (target.prefix / "my-notes.txt").read_text() == "mine"
        assert target.home.record(target.name)["run"] == old_run
        inside = json.loads((target.prefix / ".envkit" / "record.json").read_text())
        assert inside["run"] == old_run and not (target.prefix / ".envkit" / "incomplete").exists()
        [entry] = target.envs()
        assert entry["state"] == "ready", entry
    made = target.create("--no-verify", *(("--force",) if mode == "force" else ()))  # with the fault gone
    assert made.returncode == 0, made.stderr
    assert "undid" not in made.stderr  # nothing was left to clean up
    assert target.home.record(target.name)["run"] not in (old_run, None)


@pytest.mark.parametrize("point,cause", [("remove", "EACCES"), ("remove", "EROFS"), ("forget", "EROFS"),
                                         ("forget", "ENOSPC")])
def test_a_fault_while_removing_is_one_line_and_remove_again_finishes(venv_target: Target, point: str, cause: str):
    made = venv_target.create("--no-verify")
    assert made.returncode == 0, made.stderr
    done = _faulted(venv_target, point, cause, "remove", venv_target.name, "--yes")
    assert done.returncode == 1, done.stderr
    _one_error_line(done.stderr, cause)
    assert venv_target.home.record(venv_target.name) is not None  # still known: `envkit remove` finishes it
    again = venv_target.envkit("remove", venv_target.name, "--yes")
    assert again.returncode == 0, again.stderr
    assert venv_target.beside() == [] and venv_target.home.record(venv_target.name) is None


def test_a_fault_while_undoing_keeps_the_journal_for_the_next_run(venv_target: Target):
    """The disk is still full while the run undoes itself after --force failed: the old index entry cannot be
    written back, so the journal stays and the next run puts it back."""
    seeded = venv_target.create("--no-verify")
    assert seeded.returncode == 0, seeded.stderr
    old_run = venv_target.home.record(venv_target.name)["run"]
    done = _faulted(venv_target, "unstamp", "ENOSPC", "create", *venv_target.args, "--yes", "--no-verify",
                    "--force")
    assert done.returncode == 1  # (the record was written, then unstamping failed: the index must go back)
    assert venv_target.home.record(venv_target.name)["run"] == old_run
    failed = _faulted(venv_target, "", "", "create", *venv_target.args, "--yes", "--no-verify", "--force",
                      faults="unstamp:ENOSPC,undo-record:ENOSPC")
    assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr
    assert "tries again" in failed.stderr
    journal = venv_target.home.data / "locks" / f"{venv_target.name}.creating"
    assert journal.exists()
    removed = venv_target.envkit("envs", "--json")
    assert [e["state"] for e in json.loads(removed.stdout)["environments"]] == ["interrupted"]
    again = venv_target.create("--no-verify")  # no --force: it cleans up, and the old one is there again
    assert again.returncode == 1 and "already exists" in again.stderr, again.stderr
    assert not journal.exists() and venv_target.home.record(venv_target.name)["run"] == old_run
    assert (venv_target.prefix / ".envkit" / "record.json").is_file()



@pytest.fixture
def venv_lock_target(home: Home, torch_index: IndexServer) -> Target:
    lock = home.root / "torch.conda-lock.yml"
    done = home.envkit("lock", *CU126, "-o", str(lock))
    assert done.returncode == 0, done.stderr
    return Target(home, "venv", ("--from-lock", str(lock), "--machine", CU126[-1], "--name", "locked"), {}, "locked")


@pytest.fixture
def rattler_lock_target(home: Home, legacy_channel: Path, conda_manifests: Path) -> Target:
    home.write_config(conda_mirrors(legacy_channel))
    lock = home.root / "tf.conda-lock.yml"
    done = home.envkit("lock", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests), "-o", str(lock))
    assert done.returncode == 0, done.stderr
    args = ("--from-lock", str(lock), *GTX1080TI, "--manifests", str(conda_manifests), "--name", "tf-locked")
    return Target(home, "rattler", args, no_conda(home), "tf-locked")


LOCK_CASES = [(backend, mode, point, "EXDEV" if point == "aside-rename" else ERRNOS[(number + shift) % len(ERRNOS)])
              for shift, backend in enumerate(("venv", "rattler"))
              for mode, points in (("fresh", ("journal", "room-dir", "begun", "stamp", "record")),
                                   ("force", ("aside-rename", "stamped", "unstamp")))
              for number, point in enumerate(points)]


@pytest.mark.parametrize("backend,mode,point,cause", LOCK_CASES,
                         ids=[f"{b}-{m}-{p}-{c}" for b, m, p, c in LOCK_CASES])
def test_a_fault_at_each_write_of_create_from_a_lock(request, backend: str, mode: str, point: str, cause: str):
    target: Target = request.getfixturevalue(f"{backend}_lock_target")
    if mode == "force":
        seeded = target.create("--no-verify")
        assert seeded.returncode == 0, seeded.stderr
        (target.prefix / "my-notes.txt").write_text("mine")
    old = target.home.record(target.name)
    done = _faulted(target, point, cause, "create", *target.args, "--yes", "--no-verify",
                    *(("--force",) if mode == "force" else ()))
    assert done.returncode == 1, done.stdout + done.stderr
    _one_error_line(done.stderr, cause)
    _clean(target)
    assert target.home.record(target.name) == old
    if mode == "fresh":
        assert not target.prefix.exists() and target.envs() == []
    else:
        assert (target.prefix / "my-notes.txt").read_text() == "mine"
        assert [e["state"] for e in target.envs()] == ["ready"]
