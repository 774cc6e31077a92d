"""Locks: one run per environment name; where the filesystem has no flock, an exclusive lock file instead."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from envkit.create import lock
from envkit.create.lock import Busy, name_lock


def test_a_second_holder_is_told_who_holds_it(tmp_path):
    with name_lock(tmp_path, "torch-cu126"):
        code = (f"import sys; sys.path.insert(0, {str(lock.__file__.rsplit('/envkit/', 1)[0])!r})\n"
                "from pathlib import Path\nfrom envkit.create.lock import name_lock, Busy\n"
                f"try:\n    name_lock(Path({str(tmp_path)!r}), 'torch-cu126').__enter__()\n"
                "except Busy as busy:\n    print(busy.message)\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.startswith("another envkit run is working on environment 'torch-cu126' (process ")
    assert f"{os.getpid()} on {os.uname().nodename}" in out


@pytest.fixture
def no_flock(monkeypatch):
    def refuse(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(lock.fcntl, "flock", refuse)


def test_without_flock_an_exclusive_file_locks_and_is_removed_after(tmp_path, no_flock):
    with name_lock(tmp_path, "env"):
        assert (tmp_path / "env.lock.excl").read_text() == f"{os.uname().nodename}:{os.getpid()}"
        with pytest.raises(Busy):
            with name_lock(tmp_path, "env"):
                pass
    assert not (tmp_path / "env.lock.excl").exists()


def test_without_flock_a_dead_holders_file_is_taken_over_and_another_hosts_is_not(tmp_path, no_flock):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    (tmp_path / "env.lock.excl").write_text(f"{os.uname().nodename}:{dead}")
    with name_lock(tmp_path, "env"):
        pass
    (tmp_path / "env.lock.excl").write_text(f"another-node:{dead}")
    with pytest.raises(Busy, match="on another-node"):
        with name_lock(tmp_path, "env"):
            pass
