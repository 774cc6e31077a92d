"""envkit.system.scratch: $TMPDIR directories named after the envkit that made them, removed by the next envkit once
that one is gone (a SIGKILL left them for good). Only this user's directories named so, never links, are touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.system.process import start_time
from envkit.system.scratch import scratch_dir, sweep


def _dead_pid() -> tuple[int, int]:
    """The pid and start time of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    since = start_time(child.pid)
    child.kill()
    child.wait()
    assert since is not None
    return child.pid, since


def test_a_dead_runs_directory_goes_a_live_runs_stays(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read $TMPDIR again
    pid, since = _dead_pid()
    dead = tmp_path / f"envkit-venv-{pid}-{since}-abc_12"
    (dead / "inside").mkdir(parents=True)
    (dead / "inside" / "cert.pem").write_text("x")
    mine = os.getpid()
    live = tmp_path / f"envkit-kernel-{mine}-{start_time(mine)}-xyz"
    live.mkdir()
    reused = tmp_path / f"envkit-probe-{mine}-{start_time(mine) - 1}-old"  # same pid, another process's start
    reused.mkdir()
    other = tmp_path / "someone-elses"
    other.mkdir()
    link = tmp_path / f"envkit-lock-{pid}-{since}-link"
    link.symlink_to(other)
    with scratch_dir("venv") as made:
        assert made.parent == tmp_path and made.name.startswith(f"envkit-venv-{mine}-{start_time(mine)}-")
        assert not dead.exists() and not reused.exists()
        assert live.is_dir() and other.is_dir() and link.is_symlink()
    assert not made.exists()


def test_another_users_directory_is_never_touched(tmp_path: Path):
    if os.getuid() != 0:
        from support.slurm_cluster import slurm_required

        if slurm_required(os.environ):  # under CI the test machine is root: a skip there would hide a failure
            pytest.fail("needs root to make a directory another user owns")
        pytest.skip("needs root to make a directory another user owns")
    pid, since = _dead_pid()
    theirs = tmp_path / f"envkit-venv-{pid}-{since}-theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    assert sweep(tmp_path) == [] and theirs.is_dir()


def test_a_purpose_is_a_word():
    with pytest.raises(ValueError):
        with scratch_dir("../x"):
            pass


def test_what_a_probe_cut_off_at_its_limit_left_in_tmpdir_goes_with_it(tmp_path: Path, monkeypatch):
    # The probe's multi-GPU check makes envkit-nccl-* in $TMPDIR; a probe stopped at its time limit (SIGTERM, then
    # SIGKILL) never removed it. It now runs with a $TMPDIR of envkit's, removed after it.
    import tempfile

    from envkit.probe.runner import ProbeOptions, run_probe

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    program = tmp_path.parent / f"{tmp_path.name}-probe.py"
    program.write_text("import tempfile, time\ntempfile.mkdtemp(prefix='envkit-nccl-')\nprint('made', flush=True)\n"
                       "time.sleep(600)\n")
    result = run_probe(Path(sys.executable), ProbeOptions(framework="torch", timeout=2), dict(os.environ),
                       script=program)
    assert result.exit_code is None and result.failure is not None  # cut off
    assert list(tmp_path.iterdir()) == []
