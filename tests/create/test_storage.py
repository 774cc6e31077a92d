"""Environments on real filesystems (tmpfs mounts, bind mounts, read-only mounts: root, see support/mounts.py): the
package cache follows the environments, hard links are tested by making one, the room is checked before anything
is downloaded, and a disk that fills during an install leaves nothing half-made.

The stand-in torch here carries 4 MB of data, so that what an environment shares with the cache shows in its size.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import BIG, CU126, GTX1080TI, LEGACY_BUILD, Home, conda_mirrors
from support.mounts import Mounts, mounts  # noqa: F401 (a fixture)
from support.pypi_index import IndexServer

from envkit.storage.usage import disk_usage, usage_of

@pytest.fixture
def big_index(pypi_server: IndexServer, big_wheels: list[Path], home: Home) -> IndexServer:
    pypi_server.add_index("/whl/cu126", big_wheels)
    pypi_server.add_index("/pypi/simple", big_wheels)
    home.mirror_to(pypi_server)
    return pypi_server


def _config(home: Home, server: IndexServer, **extra: str) -> None:
    home.write_config({"https://download.pytorch.org/whl": f"{server.url}/whl",
                       "https://pypi.org/simple": f"{server.url}/pypi/simple"}, **extra)


def _create(home: Home, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return home.envkit("create", *CU126, "--yes", "--no-verify", *args, env=env)


def _plan(home: Home, *args: str) -> dict:
    done = home.envkit("create", *CU126, "--dry-run", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["storage"]


def _nothing_made(home: Home, *prefixes: Path) -> None:
    records = home.data / "records"
    assert not list((home.data / "locks").glob("*.creating")) if (home.data / "locks").is_dir() else True
    assert not any(records.iterdir()) if records.is_dir() else True
    for prefix in prefixes:
        assert not prefix.exists(), sorted(os.listdir(prefix))


def test_the_cache_follows_environments_on_another_filesystem(home: Home, big_index: IndexServer, mounts: Mounts,
                                                            tmp_path: Path):
    scratch = mounts.tmpfs(tmp_path / "scratch", size="200m")
    envs = scratch / "envs"
    _config(home, big_index, envs_dir=str(envs))
    plan = _plan(home)
    assert plan["cache"]["path"] == str(envs / ".envkit-cache") and plan["cache"]["source"] == "envs_dir"
    assert "hard links from" in plan["cache"]["why"] and "Invalid cross-device link" in plan["cache"]["why"]
    assert plan["links"]["hardlinks"] is True and plan["links"]["link_mode"] == "hardlink"
    text = home.envkit("create", *CU126, "--dry-run").stdout
    assert f"Cache:       {envs / '.envkit-cache'} (beside the environments" in text
    assert "hard links from the cache" in text
    assert not (envs / ".envkit-cache").exists()  # a dry run makes nothing (the probe's files are gone too)
    assert not [p for p in scratch.rglob("*") if ".envkit-link-probe" in p.name]

    first = _create(home, "--name", "one")
    assert first.returncode == 0, first.stderr
    second = _create(home, "--name", "two")
    assert second.returncode == 0, second.stderr
    cache, one, two = usage_of([envs / ".envkit-cache", envs / "one", envs / "two"])
    assert cache.bytes > BIG  # the packages are cached on the environments' filesystem...
    assert one.bytes < BIG / 2 and two.bytes < BIG / 2  # ...and each environment is linked from it, not a copy
    assert not (Path(home.env["XDG_CACHE_HOME"]) / "envkit" / "uv").exists()  # $HOME holds no package cache
    alone = disk_usage(envs / "two")  # counted on its own, it holds the 4 MB (shared with the cache)
    assert alone.bytes > BIG


def test_a_bind_mount_of_one_filesystem_is_copied_into_because_the_link_failed(home: Home, big_index: IndexServer,
                                                                            mounts: Mounts, tmp_path: Path):
    disk = mounts.tmpfs(tmp_path / "disk", size="200m")
    (disk / "cache").mkdir()
    (disk / "envs").mkdir()
    other_side = mounts.bind(disk / "envs", tmp_path / "bound")  # the same filesystem, the same st_dev
    assert os.stat(disk / "cache").st_dev == os.stat(other_side).st_dev
    _config(home, big_index, cache_dir=str(disk / "cache"))
    text = home.envkit("create", *CU126, "--dry-run", "--prefix", str(other_side / "env")).stdout
    assert re.search(r"links: +copies: a hard link from .* failed \(Invalid cross-device link\): each environment "
                     r"is a full copy", text), text
    done = _create(home, "--prefix", str(other_side / "env"))
    assert done.returncode == 0, done.stderr
    assert "Failed to hardlink" not in done.stderr  # uv was told to copy: no fallback warning per file
    seen: set = set()
    cache, env = usage_of([disk / "cache", other_side / "env"], seen)
    assert cache.bytes > BIG and env.bytes > BIG  # the environment shares nothing with the cache: a full copy
    weights = next((other_side / "env").glob("lib/python*/site-packages/torch/weights.bin"))
    assert os.stat(weights).st_nlink == 1


def test_an_environment_that_does_not_fit_stops_before_downloading(home: Home, big_index: IndexServer,
                                                                  mounts: Mounts, tmp_path: Path):
    _config(home, big_index)
    made = _create(home, "--name", "measured")  # the measurement of this build, made where there is room
    assert made.returncode == 0, made.stderr
    small = mounts.tmpfs(tmp_path / "small", size="2m")
    _config(home, big_index, cache_dir=str(small / "cache"))
    plan = _plan(home, "--prefix", str(small / "env"))
    assert plan["estimate"]["bytes"] > BIG and plan["fits"] is False
    dry = home.envkit("create", *CU126, "--dry-run", "--prefix", str(small / "env"))
    assert dry.returncode == 0 and "  NOT ROOM:  the environment and the cache on " in dry.stdout
    assert "envkit: note: the real run would stop here, before downloading: not enough room" in dry.stderr
    done = _create(home, "--prefix", str(small / "env"))
    assert done.returncode == 1, done.stderr
    assert "envkit: error: not enough room: the environment and the cache on " in done.stderr
    assert re.search(r"\d.* MB needed, \d.* (MB|kB) free", done.stderr)
    assert "--prefix PATH" in done.stderr and "envs_dir" in done.stderr and "cache_dir" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(os.listdir(small)) == []  # nothing downloaded, nothing made (not even the cache directory)
    assert home.record("env") is None


def test_a_filesystem_with_few_inodes_is_said_before_downloading(home: Home, big_index: IndexServer,
                                                                mounts: Mounts, tmp_path: Path):
    _config(home, big_index)
    assert _create(home, "--name", "measured").returncode == 0
    few = mounts.tmpfs(tmp_path / "few", size="200m", inodes=40)
    done = _create(home, "--prefix", str(few / "env"), env={"ENVKIT_CACHE_DIR": str(few / "cache")})
    assert done.returncode == 1, done.stderr
    assert re.search(r"[\d,]+ files needed, \d+ free \(inodes\)", done.stderr), done.stderr
    assert sorted(os.listdir(few)) == []


def test_a_disk_that_fills_during_the_install_is_rolled_back(home: Home, big_index: IndexServer, mounts: Mounts,
                                                            tmp_path: Path):
    """No estimate (the build was never made here): create goes on, the install runs out of room, and nothing
    half-made is left; an environment being replaced with --force stays as it was."""
    small = mounts.tmpfs(tmp_path / "small", size="3m")
    _config(home, big_index, cache_dir=str(small / "cache"))
    text = home.envkit("create", *CU126, "--dry-run", "--prefix", str(small / "env")).stdout
    assert "Disk:        no estimate" in text
    done = _create(home, "--prefix", str(small / "env"))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "envkit: error:" in done.stderr
    assert re.search(r"failed \(exit code \d\): a disk ran out of room \(now .* free on .*small", done.stderr)
    _nothing_made(home, small / "env")
    assert home.leftovers() == []


def test_a_replacement_that_runs_out_of_room_keeps_the_old_environment(home: Home, big_index: IndexServer,
                                                                      mounts: Mounts, tmp_path: Path):
    disk = mounts.tmpfs(tmp_path / "disk", size="12m")
    _config(home, big_index, cache_dir=str(tmp_path / "cache"), envs_dir=str(disk / "envs"))
    first = _create(home, "--name", "keep")
    assert first.returncode == 0, first.stderr
    (home.data / "sizes.json").unlink()  # no estimate: the install itself meets the full disk
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * max(free - BIG // 2, 0))  # another user's file
    before = sorted(str(p.relative_to(disk)) for p in (disk / "envs" / "keep").rglob("*"))
    done = _create(home, "--name", "keep", "--force")
    assert done.returncode == 1, done.stderr
    assert "a disk ran out of room" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(str(p.relative_to(disk)) for p in (disk / "envs" / "keep").rglob("*")) == before
    assert home.record("keep")["prefix"] == str(disk / "envs" / "keep")
    assert home.in_env("keep", "import torch, sys; print(torch.__version__)") == "2.13.0+cu126"


def test_environments_on_a_read_only_mount_are_refused_before_anything_is_made(home: Home, big_index: IndexServer,
                                                                              mounts: Mounts, tmp_path: Path):
    (tmp_path / "ro-source").mkdir()
    read_only = mounts.bind(tmp_path / "ro-source", tmp_path / "ro", read_only=True)
    _config(home, big_index, envs_dir=str(read_only / "envs"), cache_dir=str(tmp_path / "cache"))
    done = _create(home)
    assert done.returncode == 2, done.stderr
    assert f"envkit's environments directory {read_only / 'envs'}" in done.stderr
    assert "Read-only file system" in done.stderr and "Traceback" not in done.stderr
    _nothing_made(home)
    assert not (tmp_path / "cache").exists()
    _config(home, big_index, cache_dir=str(read_only / "cache"))
    done = _create(home)
    assert done.returncode == 2, done.stderr
    assert f"cache_dir {read_only / 'cache'} in {home.config} cannot be made" in done.stderr


def test_the_conda_engines_cache_follows_the_environments_too(home: Home, legacy_channel: Path,
                                                              conda_manifests: Path, mounts: Mounts, tmp_path: Path):
    """The embedded conda engine (rattler) unpacks its packages into <envs_dir>/.envkit-cache/conda-pkgs and links
    the environment's files from there."""
    from test_create_conda import no_conda

    scratch = mounts.tmpfs(tmp_path / "scratch", size="200m")
    home.write_config(conda_mirrors(legacy_channel), envs_dir=str(scratch / "envs"))
    done = home.envkit("create", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests), "--yes",
                       "--no-verify", env=no_conda(home))
    assert done.returncode == 0, done.stderr
    assert f"Cache:       {scratch / 'envs' / '.envkit-cache'} (beside the environments" in done.stdout
    packages = scratch / "envs" / ".envkit-cache" / "conda-pkgs" / "pkgs"
    assert packages.is_dir() and not (Path(home.env["XDG_CACHE_HOME"]) / "envkit" / "conda-pkgs").exists()
    cudart = scratch / "envs" / "tensorflow-cu101" / "lib" / "libcudart.so.10.1.243"
    assert cudart.read_text() == "cudart 10.1.243\n" and os.stat(cudart).st_nlink >= 2  # linked from the cache
