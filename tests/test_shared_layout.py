"""The shared directory's layout and names (envkit.shared.layout: pure), and the checks made before anything is
published there (envkit.shared.access) on real directories."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from envkit.errors import BadInputError
from envkit.shared.access import check_group, check_publishable, require_root
from envkit.shared.layout import SharedLayout, is_version, shared_name, shared_root, version_id
from envkit.shared.store import write_file


def test_names_and_versions():
    assert shared_name("site:torch") == "torch" and shared_name("torch") is None
    when = datetime(2026, 11, 27, 1, 8, 55, tzinfo=timezone.utc)
    assert version_id("torch-2.13-cu126", "torch", when) == "2.13-cu126-20261127T010855Z"
    assert version_id("legacy-build", "torch", when) == "legacy-build-20261127T010855Z"
    assert is_version("2.13-cu126-20261127T010855Z")
    assert not any(is_version(bad) for bad in ("current", "..", "a/b", "-rf", ""))
    layout = SharedLayout(Path("/opt/envkit"))
    assert layout.prefix("torch", "v1") == Path("/opt/envkit/envs/torch/v1")
    assert layout.module_files("torch") == (Path("/opt/envkit/modulefiles/envkit/torch"),
                                            Path("/opt/envkit/modulefiles/envkit/torch.lua"))


def test_the_variable_wins_over_the_config_and_a_relative_one_is_ignored():
    assert shared_root({"ENVKIT_SHARED": "/a//b/"}, Path("/c")) == Path("/a/b")
    assert shared_root({"ENVKIT_SHARED": "rel"}, Path("/c")) == Path("/c")
    assert shared_root({}, None) is None
    with pytest.raises(BadInputError, match="no shared directory is configured"):
        require_root(None)


def test_unsafe_shared_directories_are_refused(tmp_path: Path):
    root = tmp_path / "shared"
    with pytest.raises(BadInputError, match="does not exist"):
        check_publishable(SharedLayout(root))
    root.mkdir()
    os.chmod(root, 0o777)
    with pytest.raises(BadInputError, match="writable by everyone"):
        check_publishable(SharedLayout(root))
    os.chmod(root, 0o755)
    check_publishable(SharedLayout(root))  # its owner publishes
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "records").symlink_to(elsewhere)
    with pytest.raises(BadInputError, match="symbolic link"):
        check_publishable(SharedLayout(root))
    (root / "records").unlink()
    (root / "envs").mkdir()
    os.chmod(root / "envs", 0o757)
    with pytest.raises(BadInputError, match="envs is writable by everyone"):
        check_publishable(SharedLayout(root))
    with pytest.raises(BadInputError, match="no such group"):
        check_group("no-such-group-here")
    assert check_group(None) is None


def test_a_file_is_written_whole_with_its_mode_and_replaces_a_link_instead_of_following_it(tmp_path: Path):
    target = tmp_path / "victim"
    target.write_text("keep")
    link = tmp_path / "record.json"
    link.symlink_to(target)
    write_file(link, b"new", 0o640)
    assert target.read_text() == "keep" and not link.is_symlink() and link.read_text() == "new"
    assert link.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json", "victim"]  # no temporary left
