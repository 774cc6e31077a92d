"""What environments and caches cost (`envkit envs` sizes, `envkit cache`), `envkit cache clean` (safe, never while
a create installs from the cache), and the bad inputs of the cache's place (cache_dir, $ENVKIT_CACHE_DIR). Plain
directories, no mounts: these run as any user."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CU126, GTX1080TI, LEGACY_BUILD, Home, conda_mirrors
from support.pypi_index import IndexServer
from test_storage import BIG, _config, _create, big_index  # noqa: F401 (fixtures; big_wheels is conftest's)


def _plain_error(done: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith("envkit: error: ") and "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def test_envs_shows_each_size_counting_what_is_shared_once_and_the_total(home: Home, big_index: IndexServer):
    for name in ("a", "b"):
        made = _create(home, "--name", name)
        assert made.returncode == 0, made.stderr
    listed = home.envkit("envs", "--json")
    assert listed.returncode == 0, listed.stderr
    disks = {entry["name"]: entry["disk"] for entry in json.loads(listed.stdout)["environments"]}
    for disk in disks.values():  # the 4 MB of each is the cache's, linked: counted with the cache
        assert 0 < disk["bytes"] < BIG / 2 and disk["files"] > 10
    text = home.envkit("envs").stdout
    header = text.splitlines()[0]
    assert header.index("SIZE") < header.index("PREFIX")
    total = next(line for line in text.splitlines() if line.startswith("Total: "))
    assert "package caches 4." in total or "package caches 5." in total, total  # MB: the one copy of the weights
    assert "counted once" in total


def test_cache_shows_where_and_what_and_clean_empties_it_environments_still_work(home: Home,
                                                                                big_index: IndexServer):
    made = _create(home, "--name", "a")
    assert made.returncode == 0, made.stderr
    cache = Path(home.env["XDG_CACHE_HOME"]) / "envkit"
    shown = home.envkit("cache", "--json")
    assert shown.returncode == 0, shown.stderr
    [entry] = json.loads(shown.stdout)["caches"]
    assert entry["path"] == str(cache) and entry["bytes"] > BIG and entry["parts"]["uv"]["files"] > 10
    assert str(cache) in home.envkit("cache").stdout
    kept = home.envkit("cache", "clean", "--older-than", "1", "--yes", "--json")
    assert kept.returncode == 0, kept.stderr
    [result] = json.loads(kept.stdout)["caches"]
    assert result["removed"] == 0 and result["kept"] > 0  # all of it was written just now
    assert (cache / "uv").is_dir()
    (cache / "catalogs-stay").mkdir()  # not one of the package caches: never touched
    asked = home.envkit("cache", "clean")
    assert asked.returncode == 2 and "--yes" in asked.stderr
    assert result["freed_bytes"] == 0 and json.loads(kept.stdout)["freed_bytes"] == 0
    done = home.envkit("cache", "clean", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert not (cache / "uv").exists() and (cache / "catalogs-stay").is_dir()
    # How much it freed (issue #39): what was removed, less the weights environment a is still linked to.
    [result] = json.loads(done.stdout)["caches"]
    assert 0 < result["freed_bytes"] <= entry["bytes"] - BIG, (result, entry["bytes"])
    assert json.loads(done.stdout)["freed_bytes"] == result["freed_bytes"]
    said = home.envkit("cache", "clean", "--yes")
    assert said.returncode == 0 and f"Cleaned {cache}: removed 0 entries, freed 0 B." in said.stdout, said.stdout
    assert json.loads(home.envkit("cache", "--json").stdout)["caches"][0]["bytes"] == 0
    assert home.in_env("a", "import torch; print(torch.__version__)") == "2.13.0+cu126"
    again = _create(home, "--name", "b")  # and the next create downloads again
    assert again.returncode == 0, again.stderr


def test_clean_is_refused_while_a_create_installs_from_the_cache(home: Home, big_index: IndexServer):
    marker = home.root / "paused"
    env = {**home.env, "ENVKIT_TEST_PAUSE_AT": "installing", "ENVKIT_TEST_PAUSE_FILE": str(marker)}
    process = subprocess.Popen([sys.executable, "-m", "envkit", "create", *CU126, "--yes", "--no-verify"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=home.root)
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        refused = home.envkit("cache", "clean", "--yes")
        _plain_error(refused, 1, "an envkit create is installing from the cache", "once it has finished")
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
    done = home.envkit("cache", "clean", "--yes")  # once it has ended (undone), the clean goes ahead
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("value,words", [
    ("relative/cache", "'cache_dir' ... must be an absolute path"),
    ("FILE", "is not a directory"),
])
def test_a_bad_cache_dir_is_said_before_anything_is_made(home: Home, big_index: IndexServer, value: str, words: str):
    if value == "FILE":
        value = str(home.root / "afile")
        Path(value).write_text("x", encoding="utf-8")
    _config(home, big_index, cache_dir=value)
    for args in (("--dry-run",), ()):
        done = _create(home, *args)
        _plain_error(done, 2, f"cache_dir {value!r}", words.split("... ")[-1])
    assert home.record("torch-cu126") is None and not home.prefix("torch-cu126").exists()


def test_a_cache_dir_inside_an_environment_is_refused(home: Home, big_index: IndexServer):
    made = _create(home, "--name", "a")
    assert made.returncode == 0, made.stderr
    inside = home.prefix("a") / "cache"
    _config(home, big_index, cache_dir=str(inside))
    done = _create(home, "--name", "b")
    _plain_error(done, 2, f"cache_dir {inside} in {home.config} is inside the environment a")
    assert not inside.exists() and home.record("b") is None
    done = _create(home, "--name", "b", env={"ENVKIT_CACHE_DIR": str(inside)})
    _plain_error(done, 2, f"$ENVKIT_CACHE_DIR {inside} is inside the environment a")


@pytest.mark.parametrize("value,words", [("", "$ENVKIT_CACHE_DIR is empty"),
                                         ("  ", "$ENVKIT_CACHE_DIR is empty"),
                                         ("cache", "$ENVKIT_CACHE_DIR 'cache' must be an absolute path")])
def test_a_bad_cache_variable_is_said(home: Home, big_index: IndexServer, value: str, words: str):
    done = _create(home, env={"ENVKIT_CACHE_DIR": value})
    _plain_error(done, 2, words)
    assert not (home.root / "cache").exists() and home.record("torch-cu126") is None
    _plain_error(home.envkit("cache", env={"ENVKIT_CACHE_DIR": value}), 2, words)


def test_the_cache_variable_wins_and_the_plan_says_so(home: Home, big_index: IndexServer, tmp_path: Path):
    _config(home, big_index, cache_dir=str(tmp_path / "from-config"))
    plan = home.envkit("create", *CU126, "--dry-run", env={"ENVKIT_CACHE_DIR": str(tmp_path / "from-variable")})
    assert f"Cache:       {tmp_path / 'from-variable'} ($ENVKIT_CACHE_DIR)" in plan.stdout, plan.stdout
    made = _create(home, env={"ENVKIT_CACHE_DIR": str(tmp_path / "from-variable")})
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "from-variable" / "uv").is_dir() and not (tmp_path / "from-config").exists()


def test_lock_and_create_from_lock_use_the_same_package_cache(home: Home, legacy_channel: Path,
                                                             conda_manifests: Path, tmp_path: Path):
    from test_create_conda import no_conda

    home.write_config(conda_mirrors(legacy_channel))
    cache = tmp_path / "pinned-cache"
    env = {**no_conda(home), "ENVKIT_CACHE_DIR": str(cache)}
    lock = home.root / "tf.lock.yml"
    done = home.envkit("lock", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests), "-o", str(lock),
                       env=env)
    assert done.returncode == 0, done.stderr
    made = home.envkit("create", "--from-lock", str(lock), "--name", "tf", *GTX1080TI, "--manifests",
                       str(conda_manifests), "--yes", "--no-verify", env=env)
    assert made.returncode == 0, made.stderr
    assert f"Cache:       {cache} ($ENVKIT_CACHE_DIR)" in made.stdout
    assert any((cache / "conda-pkgs").rglob("*"))
    assert not (Path(home.env["XDG_CACHE_HOME"]) / "envkit" / "conda-pkgs").exists()


def test_a_build_made_again_within_the_week_keeps_its_measurement_and_a_stale_one_is_measured_again(
        home: Home, big_index: IndexServer):
    """The walk over every file of a new environment is made once per build a week, not at every create."""
    assert _create(home, "--name", "a").returncode == 0
    sizes = home.data / "sizes.json"
    first = json.loads(sizes.read_text(encoding="utf-8"))
    [(key, kept)] = first.items()
    assert kept["bytes"] > BIG and kept["files"] > 10
    kept["bytes"] = 1  # what the next create would overwrite if it measured again
    sizes.write_text(json.dumps(first), encoding="utf-8")
    assert _create(home, "--name", "b").returncode == 0
    assert json.loads(sizes.read_text(encoding="utf-8"))[key]["bytes"] == 1
    kept["measured"] = "2026-01-01T00:00:00+00:00"  # older than a week: measured again
    sizes.write_text(json.dumps(first), encoding="utf-8")
    assert _create(home, "--name", "c").returncode == 0
    again = json.loads(sizes.read_text(encoding="utf-8"))[key]
    assert again["bytes"] > BIG and again["measured"] != "2026-01-01T00:00:00+00:00"
