"""`envkit bundle` and `envkit create --from-bundle` end to end: a real lock of the local conda channel, bundled here
(fetched through the config's mirror, hash-checked), then installed inside `unshare -n` (a network namespace with no
network at all, not even its loopback up) with no config and no mirror; a bundle that lacks a file, holds one its
lock does not name, or holds a tampered one is refused before anything is made (exit 2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import GTX1080TI, LEGACY_BUILD, Home, conda_mirrors
from test_create_conda import no_conda

from envkit.lockfile.format import read_lock


@pytest.fixture
def conda_home(home: Home, legacy_channel: Path) -> Home:
    home.write_config(conda_mirrors(legacy_channel))
    return home


def offline(home: Home, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """envkit in a new network namespace (as root: `unshare -n`), with a config of no mirrors: nothing to reach."""
    env = {**home.env, **no_conda(home), **(extra or {})}
    empty = home.root / "offline-config.yaml"
    empty.write_text("# no mirrors\n", encoding="utf-8")
    env["ENVKIT_CONFIG"] = str(empty)
    return subprocess.run(["unshare", "-n", sys.executable, "-m", "envkit", *args], capture_output=True, text=True,
                          env=env, cwd=home.root, timeout=300)


@pytest.fixture
def bundled(conda_home: Home, conda_manifests: Path) -> tuple[Home, Path, Path]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        from support.slurm_cluster import slurm_required

        if slurm_required(os.environ):  # under CI a skipped real-part test is a failure
            pytest.fail("the offline install must run here (CI): it needs root and unshare", pytrace=False)
        pytest.skip("a network namespace (unshare -n) needs root")
    lock = conda_home.root / "tf.conda-lock.yml"
    done = conda_home.envkit("lock", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests), "-o", str(lock))
    assert done.returncode == 0, done.stderr
    out = conda_home.root / "tf-bundle.tar.gz"
    done = conda_home.envkit("bundle", str(lock), "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["files"] == 3 and report["bundle"] == str(out)
    return conda_home, lock, out


def test_a_bundle_installs_with_no_network_at_all(bundled, conda_manifests: Path):
    home, lock, out = bundled
    with tarfile.open(out) as tar:
        names = sorted(tar.getnames())
    locked = read_lock(lock)
    assert names == sorted(["bundle.json", "conda-lock.yml", "files",
                            *(f"files/{p.file_name}" for p in locked.packages)])
    made = offline(home, "create", "--from-bundle", str(out), "--name", "tf-offline", *GTX1080TI, "--manifests",
                   str(conda_manifests), "--yes", "--verbose")
    assert made.returncode == 0, made.stderr + made.stdout
    assert "all 3 conda packages match their locked hashes" in made.stderr
    prefix = home.prefix("tf-offline")
    metas = {json.loads(p.read_text())["name"]: json.loads(p.read_text())["sha256"]
             for p in (prefix / "conda-meta").glob("*.json")}
    assert metas == {p.name: p.sha256 for p in locked.conda()}
    assert home.record("tf-offline")["verify"]["ok"] is True
    # the lock kept in the environment is the bundle's, with its upstream URLs (export takes them from it)
    kept = read_lock(prefix / ".envkit" / "conda-lock.yml")
    assert {p.url for p in kept.packages} == {p.url for p in locked.packages}
    assert home.leftovers() == []  # the unpacked tar is gone


def _directory_copy(home: Home, out: Path) -> Path:
    tree = home.root / "copy"
    with tarfile.open(out) as tar:
        tar.extractall(tree)
    return tree


@pytest.mark.parametrize("damage,said", [
    ("missing", "lacks"),
    ("extra", "which its lock does not name"),
    ("tampered", "but the lock pins"),
])
def test_a_bundle_not_whole_or_not_what_its_lock_names_is_refused(bundled, conda_manifests: Path, damage: str,
                                                                  said: str):
    home, lock, out = bundled
    tree = _directory_copy(home, out)
    files = sorted((tree / "files").iterdir())
    if damage == "missing":
        files[0].unlink()
    elif damage == "extra":
        (tree / "files" / "evil-1.0-0.tar.bz2").write_bytes(b"not locked")
    else:
        files[0].write_bytes(files[0].read_bytes() + b"\0")
    done = offline(home, "create", "--from-bundle", str(tree), "--name", "tf-bad", *GTX1080TI, "--manifests",
                   str(conda_manifests), "--yes")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and said in done.stderr.splitlines()[0], done.stderr
    assert "nothing was installed" in done.stderr
    assert home.record("tf-bad") is None and not home.prefix("tf-bad").exists()


def test_bundle_refuses_an_output_that_is_there_and_a_lock_that_is_not(conda_home: Home, tmp_path: Path):
    taken = tmp_path / "taken"
    taken.mkdir()
    done = conda_home.envkit("bundle", str(tmp_path / "none.conda-lock.yml"), "-o", str(tmp_path / "b"))
    assert done.returncode == 2 and "does not exist" in done.stderr
    lock = tmp_path / "x.conda-lock.yml"
    lock.write_text("version: 1\nmetadata: {}\npackage: []\n")
    done = conda_home.envkit("bundle", str(lock), "-o", str(taken))
    assert done.returncode == 2 and "is there already" in done.stderr, done.stderr
