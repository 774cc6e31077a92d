"""envkit.storage on plain directories: the link probe, du-style counting, the room arithmetic, the partial clean."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from envkit.errors import ConfigError
from envkit.storage.cache import BESIDE_ENVS, CacheBusy, cache_place, clean, known_caches, named_cache, using_cache
from envkit.storage.links import nearest_existing, probe_links
from envkit.storage.room import Free, Need, needs, record_size, recorded_size, shortfalls
from envkit.storage.usage import Usage, disk_usage, usage_of
from envkit.text.words import size_text


def test_a_link_within_one_directory_works_and_the_probe_leaves_nothing(tmp_path: Path):
    (tmp_path / "cache").mkdir()
    probe = probe_links(tmp_path / "cache", tmp_path / "envs" / "not-yet")
    assert probe.works is True and probe.source == tmp_path / "cache" and probe.target == tmp_path
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["cache"]


def test_a_probe_that_cannot_be_made_says_why_and_decides_nothing(tmp_path: Path):
    probe = probe_links(Path("/proc/envkit-no-such"), tmp_path)
    assert probe.works is None and probe.source == Path("/proc") and "no probe file can be made in /proc" in \
        probe.reason
    assert list(tmp_path.iterdir()) == []


def test_nearest_existing_climbs_to_a_directory(tmp_path: Path):
    assert nearest_existing(tmp_path / "a" / "b") == tmp_path


def test_a_file_linked_twice_is_counted_once_like_du(tmp_path: Path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "env").mkdir()
    (tmp_path / "cache" / "big").write_bytes(os.urandom(100_000))
    os.link(tmp_path / "cache" / "big", tmp_path / "env" / "big")
    os.link(tmp_path / "cache" / "big", tmp_path / "env" / "again")
    (tmp_path / "env" / "own").write_bytes(os.urandom(10_000))
    os.symlink("/usr", tmp_path / "env" / "usr")  # counted as a link, never followed
    alone = disk_usage(tmp_path / "env")
    assert 110_000 <= alone.bytes < 130_000 and alone.files == 4  # the directory, big (once), own, the symlink
    cache, env = usage_of([tmp_path / "cache", tmp_path / "env"])
    assert cache.bytes >= 100_000 and env.bytes < 20_000  # shared: counted with the cache only
    assert disk_usage(tmp_path / "gone") == Usage()


def test_the_room_needed_counts_one_copy_where_links_work_two_where_they_fail():
    size = Usage(1000, 10)
    disk = Free(Path("/scratch"), 1500, 15, device=1)
    home = Free(Path("/home"), 5000, 100, device=2)
    assert shortfalls(needs(size, disk, disk, links=True)) == []
    [short] = shortfalls(needs(size, disk, disk, links=False))
    assert short == "the environment and the cache on /scratch: 2.0 kB needed, 1.5 kB free; 20 files needed, 15 " \
                    "free (inodes)"
    wanted = needs(size, disk, home, links=False)  # apart: one copy on each
    assert wanted == [Need("the environment", disk, size), Need("the cache", home, size)]
    assert shortfalls(needs(Usage(1000, 200), disk, home, links=True)) == [
        "the environment on /scratch: 200 files needed, 15 free (inodes)",
        "the cache on /home: 200 files needed, 100 free (inodes)"]


@pytest.mark.parametrize("count,text", [(0, "0 B"), (999, "999 B"), (12_345, "12.3 kB"), (123_456, "123 kB"),
                                        (1_500_000_000, "1.5 GB"),
                                        (340_000_000, "340 MB"), (5_100_000_000, "5.1 GB")])
def test_sizes_read_as_df_h_says_them(count: int, text: str):
    assert size_text(count) == text


def test_a_measurement_is_kept_per_key_and_a_bad_file_is_no_estimate(tmp_path: Path):
    assert recorded_size(tmp_path, "k") is None
    record_size(tmp_path, "k", Usage(5, 2))
    record_size(tmp_path, "other", Usage(7, 3))
    assert recorded_size(tmp_path, "k") == Usage(5, 2)
    (tmp_path / "sizes.json").write_text("{not json", encoding="utf-8")
    assert recorded_size(tmp_path, "k") is None
    record_size(tmp_path, "k", Usage(6, 2))  # a broken file is replaced, never an error
    assert recorded_size(tmp_path, "k") == Usage(6, 2)


def test_the_cache_follows_the_environments_only_where_links_fail(tmp_path: Path):
    place = cache_place(None, tmp_path / "cache", tmp_path / "envs")
    assert place.root == tmp_path / "cache" and place.source == "default" and "work" in place.why
    named = named_cache({"ENVKIT_CACHE_DIR": str(tmp_path / "mine")}, tmp_path / "configured", Path("/c.yaml"))
    assert named is not None and named.root == tmp_path / "mine" and named.source == "variable"
    assert cache_place(named, tmp_path / "cache", tmp_path / "envs") is named
    configured = named_cache({}, tmp_path / "configured", Path("/c.yaml"))
    assert configured is not None and configured.why == "cache_dir in /c.yaml"
    assert named_cache({}, None, None) is None
    (tmp_path / "envs" / BESIDE_ENVS).mkdir(parents=True)
    assert [p.source for p in known_caches(None, tmp_path / "cache", tmp_path / "envs")] == ["default", "envs_dir"]


def test_an_empty_cache_variable_is_an_error(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"\$ENVKIT_CACHE_DIR is empty"):
        named_cache({"ENVKIT_CACHE_DIR": ""}, None, None)


def test_a_partial_clean_removes_what_was_not_written_lately_and_only_envkits_parts(tmp_path: Path):
    old, new = tmp_path / "uv" / "archive-v0" / "old", tmp_path / "uv" / "archive-v0" / "new"
    for entry in (old, new):
        entry.mkdir(parents=True)
        (entry / "module.py").write_text("x", encoding="utf-8")
    (tmp_path / "conda-pkgs" / "pkgs" / "ancient-1.0-0").mkdir(parents=True)
    (tmp_path / "theirs").mkdir()  # the user's own directory beside the caches
    week_ago = time.time() - 8 * 86400
    for path in (old / "module.py", old, tmp_path / "conda-pkgs" / "pkgs" / "ancient-1.0-0", tmp_path / "theirs"):
        os.utime(path, (week_ago, week_ago))
    done = clean(tmp_path, older_than_days=7)
    assert done.removed == 2 and done.kept == 1
    assert new.is_dir() and not old.exists() and (tmp_path / "conda-pkgs" / "pkgs").is_dir()
    assert (tmp_path / "theirs").is_dir()
    assert clean(tmp_path).removed == 2  # uv/ and conda-pkgs/: all of them
    assert sorted(p.name for p in tmp_path.iterdir()) == [".envkit-cache.lock", "theirs"]


def test_a_clean_never_waits_for_a_create(tmp_path: Path):
    with using_cache(tmp_path), using_cache(tmp_path):  # creates share it
        with pytest.raises(CacheBusy, match="installing from the cache"):
            clean(tmp_path)
    assert clean(tmp_path).removed == 0


def test_the_installers_cache_where_the_storage_plan_says_and_copy_only_when_told(tmp_path: Path):
    from envkit.backends.installers import installer_environ
    from envkit.state.userdirs import user_dirs

    dirs = user_dirs({"HOME": str(tmp_path / "home")})
    env = installer_environ({"UV_LINK_MODE": "symlink"}, dirs, None, tmp_path / "scratch" / ".envkit-cache")
    assert env["UV_CACHE_DIR"] == str(tmp_path / "scratch" / ".envkit-cache" / "uv")
    assert env["PIP_CACHE_DIR"] == str(tmp_path / "scratch" / ".envkit-cache" / "pip")
    assert "UV_LINK_MODE" not in env  # the user's own is dropped; uv's default is hard links
    assert env["UV_CREDENTIALS_DIR"] == str(dirs.data / "uv-credentials")  # not a cache: stays in the data dir
    assert installer_environ({}, dirs, "copy")["UV_LINK_MODE"] == "copy"
    assert installer_environ({}, dirs)["UV_CACHE_DIR"] == str(dirs.cache / "uv")


def test_a_build_is_measured_again_only_when_its_measurement_is_missing_broken_or_a_week_old(tmp_path: Path):
    from datetime import datetime, timedelta, timezone

    from envkit.storage.room import MEASURE_AGAIN_AFTER, measurement_due

    assert measurement_due(tmp_path, "k")  # no file
    record_size(tmp_path, "k", Usage(5, 2))
    now = datetime.now(timezone.utc)
    assert not measurement_due(tmp_path, "k", now)
    assert measurement_due(tmp_path, "other", now)  # another build, Python or backend
    assert not measurement_due(tmp_path, "k", now + MEASURE_AGAIN_AFTER - timedelta(minutes=1))
    assert measurement_due(tmp_path, "k", now + MEASURE_AGAIN_AFTER + timedelta(minutes=1))
    assert measurement_due(tmp_path, "k", now - timedelta(hours=1))  # measured "in the future": a clock moved
    for entry in ('{"k": {"bytes": 5, "files": 2}}', '{"k": {"bytes": 5, "files": 2, "measured": "yesterday"}}',
                  '{"k": {"bytes": 5, "files": 2, "measured": "2026-11-27T00:00:00"}}', '{not json'):
        (tmp_path / "sizes.json").write_text(entry, encoding="utf-8")
        assert measurement_due(tmp_path, "k", now), entry


def test_what_a_removal_frees_leaves_out_files_linked_from_elsewhere(tmp_path: Path):
    from envkit.storage.usage import disk_usage, freed_by_removing

    cache, env = tmp_path / "cache", tmp_path / "env"
    (cache / "pkg").mkdir(parents=True)
    env.mkdir()
    (cache / "pkg" / "linked.bin").write_bytes(b"x" * 100_000)
    os.link(cache / "pkg" / "linked.bin", env / "linked.bin")  # an environment's file, hard-linked from the cache
    (cache / "pkg" / "own.bin").write_bytes(b"y" * 50_000)
    os.link(cache / "pkg" / "own.bin", cache / "own-again.bin")  # both links in the cache: freed once
    whole = disk_usage(cache).bytes
    linked = os.stat(env / "linked.bin").st_blocks * 512
    assert freed_by_removing([cache]) == whole - linked
    assert freed_by_removing([cache / "pkg"]) == disk_usage(cache / "pkg").bytes - linked - \
        os.stat(cache / "own-again.bin").st_blocks * 512  # one of own.bin's two links stays
