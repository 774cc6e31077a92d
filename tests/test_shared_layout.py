"""The shared directory's layout and names (envkit.shared.layout: pure), and the checks made before anything is
published there (envkit.shared.access) on real directories."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest

from envkit.errors import BadInputError
from envkit.shared.access import check_group, check_publishable, require_root
from envkit.shared.layout import SharedLayout, is_version, shared_name, shared_root, version_id
from envkit.state.safedir import write_file


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


def _interpreter(base: Path, version: str = "3.99") -> Path:
    """A stand-in interpreter installed under ``base`` as a real one is: bin/pythonX.Y and lib/pythonX.Y/os.py."""
    (base / "bin").mkdir(parents=True)
    (base / "lib" / f"python{version}").mkdir(parents=True)
    (base / "lib" / f"python{version}" / "os.py").write_text("")
    python = base / "bin" / f"python{version}"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    return python


@pytest.fixture
def public() -> Iterator[Path]:
    """A directory every user can reach (pytest's own are private to the user running the tests)."""
    from support.unix_users import public_directory

    with public_directory() as path:
        yield path


def test_a_shared_venv_gets_a_python_every_user_can_run_and_the_refusal_names_what_stops_them(public: Path):
    """An admin's own Python under a home of mode 0700 is refused for everyone, with the directory, its owner and
    mode; one under the shared directory's python/ (`uv python install --install-dir`) is taken first."""
    from packaging.version import Version

    from envkit.shared.python import shareable_python
    from envkit.shared.reach import Audience

    home = public / "home-admin"
    private = _interpreter(home / ".pyenv" / "versions" / "3.99.1")
    os.chmod(home, 0o700)
    env = {"PATH": f"{private.parent}:/nowhere"}
    found, why = shareable_python(Version("3.99"), public / "shared", Audience(), env, lambda python: True)
    assert found is None and f"{private}: other users cannot enter the directory {home}" in why, why
    assert "mode 0700" in why and f"--install-dir {public / 'shared' / 'python'}" in why
    os.chmod(home, 0o755)
    os.chmod(home / ".pyenv" / "versions" / "3.99.1" / "lib" / "python3.99", 0o750)  # its standard library
    found, why = shareable_python(Version("3.99"), public / "shared", Audience(), env, lambda python: True)
    assert found is None and "cannot enter the directory" in why and "lib/python3.99 " in why, why
    site_python = _interpreter(public / "shared" / "python" / "cpython-3.99.1-linux-x86_64-gnu")
    found, why = shareable_python(Version("3.99"), public / "shared", Audience(), env, lambda python: True)
    assert found == site_python and why is None
    import grp

    mine = grp.getgrgid(os.getegid())
    os.chmod(site_python.parents[1], 0o750)  # the group may enter, others may not
    os.chown(site_python.parents[1], -1, mine.gr_gid)
    found, _ = shareable_python(Version("3.99"), public / "shared", Audience(), env, lambda python: True)
    assert found is None
    found, _ = shareable_python(Version("3.99"), public / "shared", Audience(mine.gr_gid), env, lambda python: True)
    assert found == site_python


def test_reachability_follows_links_and_judges_the_directories_of_their_targets(public: Path):
    from envkit.shared.reach import RUN, Audience, blocked, for_audience

    tmp_path = public
    hidden = tmp_path / "hidden"
    python = _interpreter(hidden / "py")
    os.chmod(hidden, 0o700)
    env = tmp_path / "env" / "bin"
    env.mkdir(parents=True)
    (env / "python").symlink_to(python)
    found = blocked(env / "python", RUN, for_audience(Audience()))
    assert found is not None and found.path == hidden and found.need == "enter"
    os.chmod(hidden, 0o711)  # entered, not listed: enough to run what is inside
    assert blocked(env / "python", RUN, for_audience(Audience())) is None
    python.chmod(0o700)
    found = blocked(env / "python", RUN, for_audience(Audience()))
    assert found is not None and found.path == python and found.need == "run"
