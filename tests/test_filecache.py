"""The file cache (envkit.state.filecache): catalogs and parsed YAML come back as loading gives them, never stale."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envkit.catalog import load_catalog
from envkit.catalog.cache import cached_catalog
from envkit.errors import ManifestError


def test_a_hit_equals_a_fresh_load_and_is_served_from_the_cache(envs_copy: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    first = cached_catalog(envs_copy, ["torch"], cache)
    [entry] = (cache / "catalog").glob("*.pickle")
    second = cached_catalog(envs_copy, ["torch"], cache)
    assert second == first == load_catalog(envs_copy, ["torch"])
    os.utime(entry, ns=(1, 1))  # untouched by the second call: it only read
    assert cached_catalog(envs_copy, ["torch"], cache) == first and entry.stat().st_mtime_ns == 1


def test_an_edited_manifest_is_a_miss(envs_copy: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    before = cached_catalog(envs_copy, ["torch"], cache)
    torch = envs_copy / "torch.yaml"
    torch.write_text(torch.read_text().replace("summary: PyTorch", "summary: Edited PyTorch"))
    after = cached_catalog(envs_copy, ["torch"], cache)
    assert after.manifests["torch"].summary.startswith("Edited") and before != after


def test_a_broken_manifest_is_reported_not_cached(envs_copy: Path, tmp_path: Path):
    (envs_copy / "torch.yaml").write_text("name: torch\n")
    with pytest.raises(ManifestError):
        cached_catalog(envs_copy, ["torch"], tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("catalog/*.pickle"))


def test_a_corrupt_entry_is_ignored_and_replaced(envs_copy: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    good = cached_catalog(envs_copy, ["torch"], cache)
    [entry] = (cache / "catalog").glob("*.pickle")
    entry.write_bytes(b"not a pickle")
    assert cached_catalog(envs_copy, ["torch"], cache) == good
    assert entry.read_bytes() != b"not a pickle"


def test_an_unwritable_cache_still_loads(envs_copy: Path, tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cached_catalog(envs_copy, ["torch"], blocker / "cache") == load_catalog(envs_copy, ["torch"])


def test_old_entries_are_pruned(envs_copy: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    torch = envs_copy / "torch.yaml"
    for edit in range(20):
        torch.write_text(torch.read_text() + f"\n# edit {edit}\n")
        cached_catalog(envs_copy, ["torch"], cache)
    assert len(list((cache / "catalog").glob("*.pickle"))) == 16


def test_a_profile_is_parsed_again_when_it_changes_and_a_broken_one_is_not_cached(tmp_path: Path):
    from envkit.errors import ProfileError
    from envkit.machines.profile import read_profile

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


def test_a_directory_of_profiles_is_keyed_on_every_module_that_makes_its_machines(tmp_path: Path):
    """envkit.machines.fleet keeps a directory's parsed Machines: a change to any envkit module that making them imports
    (a fixed version parser in versions.py) must be a miss, so PROFILES_CODE names them all."""
    import subprocess
    import sys

    from envkit.machines.fleet import PROFILES_CODE

    profiles = Path(__file__).parent / "profiles"
    script = ("import sys; from pathlib import Path; from envkit.machines.fleet import load_profiles; "
              f"load_profiles([Path({str(profiles)!r})], Path({str(tmp_path / 'cache')!r})); "
              "top = Path(sys.modules['envkit'].__file__).parent; "
              "print(*sorted(Path(m.__file__).relative_to(top).as_posix() for n, m in sys.modules.items() "
              "if n.startswith('envkit.')))")  # a package as its __init__.py
    imported = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    modules = set(imported.split())
    assert {"versions.py", "state/yamltext.py", "state/filecache.py"} <= modules <= set(PROFILES_CODE)


def test_a_file_replaced_with_the_same_size_and_time_is_a_miss(envs_copy: Path, tmp_path: Path):
    """Where timestamps are coarse (NFS, FAT), `sed -i` can leave a manifest with its old size and modification time;
    it is a new file (another inode) all the same."""
    cache = tmp_path / "cache"
    cached_catalog(envs_copy, ["torch"], cache)
    torch = envs_copy / "torch.yaml"
    before = torch.stat()
    edited = torch.read_text().replace("summary: PyTorch", "summary: PYTORCH")
    replacement = envs_copy / "torch.yaml.new"
    replacement.write_text(edited)
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    replacement.replace(torch)
    assert (torch.stat().st_size, torch.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert cached_catalog(envs_copy, ["torch"], cache).manifests["torch"].summary.startswith("PYTORCH")


def test_a_link_pointed_at_another_file_of_the_same_size_and_time_is_a_miss(tmp_path: Path):
    """An input's path is keyed as given, not resolved: the file it names is told by its device and inode, so a link
    (a manifest an admin links to the current release) repointed at another file is another state."""
    from envkit.state.filecache import cached

    first, second = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    first.write_text("release: 1\n")
    second.write_text("release: 2\n")
    os.utime(second, ns=(first.stat().st_atime_ns, first.stat().st_mtime_ns))
    link = tmp_path / "current.yaml"
    link.symlink_to(first)

    def read() -> str:
        return link.read_text()

    assert cached(tmp_path / "cache", "text", [link], (), read) == "release: 1\n"
    assert cached(tmp_path / "cache", "text", [link], (), lambda: "never computed") == "release: 1\n"  # a hit
    link.unlink()
    link.symlink_to(second)
    assert cached(tmp_path / "cache", "text", [link], (), read) == "release: 2\n"
    link.unlink()
    link.symlink_to(tmp_path / "missing.yaml")  # a link to nothing: no key, the computation says what is wrong
    assert cached(tmp_path / "cache", "text", [link], (), lambda: "computed") == "computed"


def test_a_cached_catalog_is_keyed_on_every_catalog_module_that_builds_it(envs_dir: Path):
    """envkit.catalog.cache keeps a loaded catalog: a change to any module of envkit.catalog that loading imports (a
    new field of the `bundled:` entries in catalog/bundled.py) must be a miss, so its _CODE names them all. (It did
    not name bundled.py: a catalog cached before `min_driver` came would have been read without it.)"""
    import subprocess
    import sys

    from envkit.catalog.cache import _CODE

    script = ("import sys; from pathlib import Path; from envkit.catalog.load import load_catalog; "
              f"load_catalog(Path({str(envs_dir)!r}), ()); "
              "print(*sorted(m for m in sys.modules if m.startswith('envkit.catalog.')))")
    imported = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    modules = {name.removeprefix("envkit.").replace(".", "/") + ".py" for name in imported.split()}
    assert "catalog/bundled.py" in modules and modules - {"catalog/cache.py"} <= set(_CODE)
