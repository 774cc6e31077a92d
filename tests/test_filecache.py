"""The file cache (envkit.filecache): catalogs and parsed YAML come back as loading gives them, never stale."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from envkit.catalog import load_catalog
from envkit.catalog.cache import cached_catalog
from envkit.errors import ManifestError


@pytest.fixture
def manifests(envs_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "envs"
    shutil.copytree(envs_dir, copy, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    return copy


def test_a_hit_equals_a_fresh_load_and_is_served_from_the_cache(manifests: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    first = cached_catalog(manifests, ["torch"], cache)
    [entry] = (cache / "catalog").glob("*.pickle")
    second = cached_catalog(manifests, ["torch"], cache)
    assert second == first == load_catalog(manifests, ["torch"])
    os.utime(entry, ns=(1, 1))  # untouched by the second call: it only read
    assert cached_catalog(manifests, ["torch"], cache) == first and entry.stat().st_mtime_ns == 1


def test_an_edited_manifest_is_a_miss(manifests: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    before = cached_catalog(manifests, ["torch"], cache)
    torch = manifests / "torch.yaml"
    torch.write_text(torch.read_text().replace("summary: PyTorch", "summary: Edited PyTorch"))
    after = cached_catalog(manifests, ["torch"], cache)
    assert after.manifests["torch"].summary.startswith("Edited") and before != after


def test_a_broken_manifest_is_reported_not_cached(manifests: Path, tmp_path: Path):
    (manifests / "torch.yaml").write_text("name: torch\n")
    with pytest.raises(ManifestError):
        cached_catalog(manifests, ["torch"], tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("catalog/*.pickle"))


def test_a_corrupt_entry_is_ignored_and_replaced(manifests: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    good = cached_catalog(manifests, ["torch"], cache)
    [entry] = (cache / "catalog").glob("*.pickle")
    entry.write_bytes(b"not a pickle")
    assert cached_catalog(manifests, ["torch"], cache) == good
    assert entry.read_bytes() != b"not a pickle"


def test_an_unwritable_cache_still_loads(manifests: Path, tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cached_catalog(manifests, ["torch"], blocker / "cache") == load_catalog(manifests, ["torch"])


def test_old_entries_are_pruned(manifests: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    torch = manifests / "torch.yaml"
    for edit in range(20):
        torch.write_text(torch.read_text() + f"\n# edit {edit}\n")
        cached_catalog(manifests, ["torch"], cache)
    assert len(list((cache / "catalog").glob("*.pickle"))) == 16


def test_a_profile_is_parsed_again_when_it_changes_and_a_broken_one_is_not_cached(tmp_path: Path):
    from envkit.errors import ProfileError
    from envkit.machine import read_profile

    cache = tmp_path / "cache"
    profile = tmp_path / "node.yaml"
    profile.write_text('name: a\ncuda_driver: "12.4"\ngpus: []\n')
    assert read_profile(profile, cache).name == "a"
    assert read_profile(profile, cache).name == "a" and len(list((cache / "yaml").glob("*.pickle"))) == 1
    profile.write_text('name: bb\ncuda_driver: "12.4"\ngpus: []\n')
    assert read_profile(profile, cache).name == "bb"
    profile.write_text("name: [\n")
    with pytest.raises(ProfileError, match="not valid YAML"):
        read_profile(profile, cache)
    assert len(list((cache / "yaml").glob("*.pickle"))) == 2
