"""Filesystem faults from real filesystems, as root: the data directory on a tmpfs out of inodes at each write of a
create, a read-only data directory when `verify` keeps its result, the cache on a full disk for `create --from-lock`,
a PYENV_ROOT the user may not read, the environments' disk too small for a venv or filling while the installer
writes. One line naming the path and the cause (or the installer's words), exit 1, nothing half-made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CU126, Home
from support.pypi_index import IndexServer
from support.tmpfs import fill_inodes, read_only, root_required, tmpfs, unavailable

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _as_root() -> None:
    why = unavailable()
    if why is not None:
        if root_required(os.environ):
            pytest.fail(f"these tests need root here (CI): {why}", pytrace=False)
        pytest.skip(why)


def _one_line(stderr: str, cause: str) -> str:
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    [line] = [line for line in stderr.splitlines() if line.startswith("envkit: error:")]
    assert cause in line and "/" in line, line
    return line


@pytest.mark.parametrize("free", range(10))
def test_a_data_directory_out_of_inodes_at_each_write_leaves_nothing(home: Home, torch_index: IndexServer,
                                                                     free: int):
    """The data directory (records, locks, journal) on a tmpfs with ``free`` inodes left: each count fails a later
    write of the run (a lock file, the journal, the records directory, the record). Once there is room, a create
    finds nothing to clean up."""
    prefix = home.root / "envs" / "t"
    with tmpfs(home.data, inodes=64) as data:
        fillers = data / "fill"
        fillers.mkdir()
        fill_inodes(fillers, leave=free)
        done = home.envkit("create", *CU126, "--name", "t", "--prefix", str(prefix), "--yes", "--no-verify")
        if done.returncode == 0:  # enough inodes for the environment (the journal's last note may not fit)
            assert home.record("t") is not None and prefix.is_dir()
            assert not list((data / "locks").glob("*.creating"))
            assert [e["state"] for e in json.loads(home.envkit("envs", "--json").stdout)["environments"]] == ["ready"]
            return
        assert done.returncode == 1, done.stderr
        _one_line(done.stderr, "No space left on device")
        assert not prefix.exists() and home.record("t") is None
        assert not list((data / "locks").glob("*.creating")) if (data / "locks").exists() else True
        for filler in fillers.iterdir():
            filler.unlink()
        again = home.envkit("create", *CU126, "--name", "t", "--prefix", str(prefix), "--yes", "--no-verify")
        assert again.returncode == 0, again.stderr
        assert "undid" not in again.stderr and home.record("t")["prefix"] == str(prefix)


def test_verify_on_a_read_only_data_directory_is_one_line(home: Home, torch_index: IndexServer):
    with tmpfs(home.data) as data:
        made = home.envkit("create", *CU126, "--name", "t", "--yes", "--no-verify", "--prefix",
                           str(home.root / "envs" / "t"))
        assert made.returncode == 0, made.stderr
        before = home.record("t")
        read_only(data)
        try:
            done = home.envkit("verify", "t", "--machine", CU126[-1])
        finally:
            read_only(data, on=False)
    assert done.returncode == 1, done.stderr
    line = _one_line(done.stderr, "Read-only file system")
    assert "could not be kept" in line
    assert before is not None


def test_create_from_lock_with_its_cache_on_a_full_disk_is_one_line(home: Home, torch_index: IndexServer):
    lock = home.root / "torch.conda-lock.yml"
    done = home.envkit("lock", *CU126, "-o", str(lock))
    assert done.returncode == 0, done.stderr
    with tmpfs(home.root / ".cache", size="64k") as cache:
        with open(cache / "filler", "wb", buffering=0) as filler:  # until the disk is full
            try:
                while True:
                    filler.write(b"\0" * 4096)
            except OSError:
                pass
        made = home.envkit("create", "--from-lock", str(lock), "--name", "t", "--yes", "--no-verify", "--machine",
                           CU126[-1])
    assert made.returncode == 1, made.stderr
    _one_line(made.stderr, "No space left on device")
    assert not home.prefix("t").exists() and home.record("t") is None


def test_a_pyenv_root_the_user_may_not_read_gives_no_python_and_no_traceback(tmp_path: Path):
    """Run as nobody: a PYENV_ROOT of root's, mode 0700, is searched for a Python without a PermissionError."""
    pyenv = tmp_path / "pyenv"
    (pyenv / "versions" / "3.9.1" / "bin").mkdir(parents=True)
    pyenv.chmod(0o700)
    tmp_path.chmod(0o755)
    code = ("import os, sys; from pathlib import Path; from envkit.backends.tools import _python_candidates; "
            "from packaging.version import Version; os.setgid(65534); os.setuid(65534); "
            "print(_python_candidates(Version('3.9'), {'PATH': '/nonexistent', 'PYENV_ROOT': sys.argv[1]}))")
    done = subprocess.run([sys.executable, "-c", code, str(pyenv)], capture_output=True, text=True, timeout=60,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_read_only_data_directory_refuses_create_in_one_line(home: Home, torch_index: IndexServer):
    prefix = home.root / "envs" / "t"
    with tmpfs(home.data) as data:
        (data / "locks").mkdir()
        read_only(data)
        try:
            done = home.envkit("create", *CU126, "--name", "t", "--prefix", str(prefix), "--yes", "--no-verify")
        finally:
            read_only(data, on=False)
        assert list(data.iterdir()) == [data / "locks"] and not list((data / "locks").iterdir())
    assert done.returncode == 1, done.stderr
    _one_line(done.stderr, "Read-only file system")
    assert not prefix.exists()


def _fill(directory: Path) -> None:
    with open(directory / ".filler", "wb", buffering=0) as filler:  # until the disk is full
        try:
            while True:
                filler.write(b"\0" * 4096)
        except OSError:
            pass


def test_a_disk_too_small_for_the_venv_leaves_nothing(home: Home, torch_index: IndexServer):
    with tmpfs(home.root / "envs", size="16k") as envs:
        done = home.envkit("create", *CU126, "--name", "t", "--prefix", str(envs / "t"), "--yes", "--no-verify")
        left = sorted(p.name for p in envs.iterdir())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert left == [] and home.record("t") is None


def test_a_disk_that_fills_while_the_installer_writes_leaves_nothing(home: Home, torch_index: IndexServer):
    """The environments' disk fills once the venv is made (another user's job writing there): the installer fails
    with its own words, the run is undone, the prefix is gone, nothing is recorded."""
    marker = home.root / "paused"
    with tmpfs(home.root / "envs", size="8m") as envs:
        run = subprocess.Popen([sys.executable, "-m", "envkit", "create", *CU126, "--name", "t", "--prefix",
                                str(envs / "t"), "--yes", "--no-verify"], cwd=home.root, text=True,
                               env={**home.env, "ENVKIT_TEST_PAUSE_AT": "stamped",
                                    "ENVKIT_TEST_PAUSE_FILE": str(marker)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while not marker.exists():
                assert run.poll() is None, run.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            _fill(envs)
            marker.unlink()  # go on: uv installs into a full disk
            _, err = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
        left = sorted(p.name for p in envs.iterdir())
    assert run.returncode == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "No space left on device" in err or "os error 28" in err, err
    assert left == [".filler"] and home.record("t") is None
    assert json.loads(home.envkit("envs", "--json").stdout)["environments"] == []
