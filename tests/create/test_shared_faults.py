"""Publishing under a hardened umask, and what a publication that died leaves: `envkit create --shared` killed for
real (SIGKILL once its version is made and checked, SIGKILL between its record and `current`, SIGKILL or SIGTERM
while it publishes) and what the next publication, or the admin's `envkit envs`, makes of it. The test-only hook
ENVKIT_TEST_PAUSE_AT (envkit/state/testpause.py) holds envkit at the point so that the signal lands exactly there."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import CU126, Home
from support.paused import wait_until_paused
from support.pypi_index import IndexServer
from support.unix_users import public_directory


@pytest.fixture
def site(home: Home, torch_index: IndexServer) -> Iterator[Path]:
    with public_directory() as public:
        root = public / "shared"
        root.mkdir(mode=0o755)
        os.chmod(root, 0o755)
        home.env["ENVKIT_SHARED"] = str(root)
        yield root


def publish(home: Home, *extra: str, umask: int = 0o022) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envkit", "create", *CU126, "--shared", "--yes", *extra],
                          capture_output=True, text=True, env=home.env, cwd=home.root, timeout=300,
                          preexec_fn=lambda: os.umask(umask))


@contextlib.contextmanager
def held_at(home: Home, point: str, *extra: str) -> Iterator[subprocess.Popen]:
    """A publication started and held at ``point`` (killed if the block leaves it running)."""
    marker = home.root / "paused"
    marker.unlink(missing_ok=True)
    env = {**home.env, "ENVKIT_TEST_PAUSE_AT": point, "ENVKIT_TEST_PAUSE_FILE": str(marker)}
    process = subprocess.Popen([sys.executable, "-m", "envkit", "create", *CU126, "--shared", "--yes", *extra],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=home.root)
    try:
        wait_until_paused(process, marker, point)
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


def versions(site: Path) -> list[str]:
    return sorted(p.name for p in (site / "envs" / "torch").iterdir() if p.name != "current")


def record_prefix(site: Path) -> Path:
    return Path(json.loads((site / "records" / "torch.json").read_text())["prefix"])


def test_a_publication_under_umask_077_is_readable_by_everyone(home: Home, site: Path):
    done = publish(home, "--no-verify", umask=0o077)
    assert done.returncode == 0, done.stderr
    for directory in ("envs", "envs/torch", "records", "modulefiles", "modulefiles/envkit", "state"):
        assert (site / directory).stat().st_mode & 0o7777 == 0o755, directory
    for name in ("records/torch.json", "modulefiles/envkit/torch", "modulefiles/envkit/torch.lua"):
        assert (site / name).stat().st_mode & 0o777 == 0o644, name
    prefix = record_prefix(site)
    for path in [prefix, *prefix.rglob("*")]:
        if not path.is_symlink():
            assert path.stat().st_mode & 0o004, path
            assert not path.is_dir() or path.stat().st_mode & 0o001, path


def test_a_publication_stopped_by_sigterm_takes_back_what_it_made_itself(home: Home, site: Path):
    assert publish(home, "--no-verify").returncode == 0
    first = record_prefix(site)
    modulefile = (site / "modulefiles" / "envkit" / "torch").read_text()
    with held_at(home, "publishing", "--force") as process:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode not in (0, None), stderr
    assert "Traceback" not in stderr, stderr
    assert versions(site) == [first.name]  # the version it was making is gone, the published one kept
    assert record_prefix(site) == first and (site / "modulefiles" / "envkit" / "torch").read_text() == modulefile
    assert os.readlink(site / "envs" / "torch" / "current") == first.name
    assert os.listdir(site / "state" / "runs" / "torch") == []


@pytest.mark.parametrize("point,sig", [("checked", signal.SIGKILL), ("publishing", signal.SIGKILL)])
def test_what_a_dead_publication_left_is_removed_by_the_next_one(home: Home, site: Path, point: str, sig: int):
    assert publish(home, "--no-verify").returncode == 0
    first = record_prefix(site)
    modulefile = (site / "modulefiles" / "envkit" / "torch").read_text()
    with held_at(home, point, "--force") as process:
        process.send_signal(sig)
        process.wait(timeout=60)
    [dead] = [v for v in versions(site) if v != first.name]  # made, never published
    assert (site / "state" / "runs" / "torch" / dead).is_dir()
    assert record_prefix(site) == first and (site / "modulefiles" / "envkit" / "torch").read_text() == modulefile
    again = publish(home, "--no-verify", "--force")
    assert again.returncode == 0, again.stderr
    assert f"removed {site / 'envs' / 'torch' / dead}" in again.stderr
    new = record_prefix(site)
    assert versions(site) == sorted([first.name, new.name]) and dead not in (first.name, new.name)
    assert os.readlink(site / "envs" / "torch" / "current") == new.name
    assert os.listdir(site / "state" / "runs" / "torch") == []


def test_the_admins_envs_finishes_a_publication_killed_after_its_record_and_removes_a_dead_one(home: Home,
                                                                                              site: Path):
    assert publish(home, "--no-verify").returncode == 0
    first = record_prefix(site)
    with held_at(home, "published-record", "--force") as process:  # its record names the new version already
        process.kill()
    published = record_prefix(site)
    assert published != first and os.readlink(site / "envs" / "torch" / "current") == first.name
    listed = home.envkit("envs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert os.readlink(site / "envs" / "torch" / "current") == published.name  # finished: the record's version
    assert versions(site) == sorted([first.name, published.name]) and "removed" not in listed.stderr
    [entry] = [e for e in json.loads(listed.stdout)["environments"] if e.get("shared")]
    assert entry["prefix"] == str(published)
    with held_at(home, "checked", "--force") as process:
        process.kill()
    [dead] = [v for v in versions(site) if v not in (first.name, published.name)]
    listed = home.envkit("envs")
    assert listed.returncode == 0 and f"removed {site / 'envs' / 'torch' / dead}" in listed.stderr, listed.stderr
    assert versions(site) == sorted([first.name, published.name])
    assert f'set bin "{published}/bin"' in (site / "modulefiles" / "envkit" / "torch").read_text()
    assert os.listdir(site / "state" / "runs" / "torch") == []
    assert home.envkit("envs").stderr == ""  # nothing left to say
