"""Paths a user gives (options, variables, the config and site files) and files envkit writes: a clean error for what
no path can be, a symlink loop reported as one, an output written through a link and never over what is not a file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from envkit.state.files import real_path, user_path, write_atomic

from tests.test_cli import PROFILES, assert_clean_error, envkit

H100 = str(PROFILES / "h100-cuda128.yaml")
NO_SUCH_USER = "~envkit-no-such-user"


@pytest.mark.parametrize("text, words", [("", "is empty"), ("  ", "is empty"), ("a\0b", "NUL byte"),
                                         (f"{NO_SUCH_USER}/x", f"{NO_SUCH_USER} is not a user here")])
def test_what_no_path_can_be_is_a_value_error(text: str, words: str):
    with pytest.raises(ValueError, match=words):
        user_path(text)


def test_home_is_expanded():
    assert user_path("~/x") == Path.home() / "x" and user_path("rel/x") == Path("rel/x")


def test_a_symlink_loop_resolves_to_where_it_was_given(tmp_path: Path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert real_path(tmp_path / "a") == tmp_path / "a"
    (tmp_path / "target").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    assert real_path(tmp_path / "link") == (tmp_path / "target").resolve()


def test_write_atomic_writes_through_a_link_and_keeps_the_mode(tmp_path: Path):
    target = tmp_path / "lock.yml"
    target.write_text("old")
    target.chmod(0o640)
    (tmp_path / "link").symlink_to(target)
    write_atomic(tmp_path / "link", b"new")
    assert (tmp_path / "link").is_symlink() and target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "new.yml", b"x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.yml").stat().st_mode) == 0o644  # not mkstemp's 0600: a lock is shared


def test_write_atomic_never_replaces_what_is_not_a_file(tmp_path: Path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for name, words in [("fifo", "not a regular file"), ("dir", "not a regular file"), ("file/x", "Not a directory"),
                        ("loop", "symbolic links")]:
        with pytest.raises(OSError, match=words):
            write_atomic(tmp_path / name, b"x")
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode) and (tmp_path / "loop").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "fifo", "file", "loop"]  # no temporary left


def test_symlink_loops_are_reported_not_internal_errors(tmp_path: Path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert_clean_error(envkit("list", "torch", "--machine", str(loop)), 2, str(loop), "symbolic links")
    assert_clean_error(envkit("list", "torch", env={"ENVKIT_MANIFESTS": str(loop)}), 2, str(loop))
    assert_clean_error(envkit("list", "torch", env={"ENVKIT_CONFIG": str(loop)}), 2, str(loop), "symbolic links")
    assert_clean_error(envkit("site", env={"ENVKIT_SITE": str(loop)}), 2, str(loop), "symbolic links")
    dangling = tmp_path / "site-to-be.yaml"
    dangling.symlink_to(tmp_path / "nowhere.yaml")  # where survey will write: no site file yet, not an error
    none_yet = envkit("site", env={"ENVKIT_SITE": str(dangling)})
    assert none_yet.returncode == 0 and "No site file" in none_yet.stdout, none_yet.stderr


def test_empty_path_options_are_refused_and_dot_is_the_current_directory(tmp_path: Path):
    for args in [("list", "--manifests", ""), ("list", "--machine", ""), ("manifests", "validate", ""),
                 ("verify", "--prefix", ""), ("doctor", "--python", " ")]:
        assert_clean_error(envkit(*args), 2, "is empty: give a path")
    shipped = Path(__file__).resolve().parent.parent / "envs"
    listed = envkit("list", "torch", "--manifests", ".", "--machine", H100, cwd=shipped)
    assert listed.returncode == 0 and "torch-" in listed.stdout, listed.stderr


def test_home_of_no_user_and_nul_bytes_in_the_config_and_variables(tmp_path: Path):
    config = tmp_path / "config.yaml"
    (tmp_path / "a-file").write_text("")
    for value, words in [(f"{NO_SUCH_USER}/envs", "is not a user here"), ("/tmp/a\\0b", "NUL byte"),
                         (str(tmp_path / "a-file"), "is not a directory"),
                         ("/scratch/$ENVKIT_TEST_UNSET/envs", "names $ENVKIT_TEST_UNSET, which is not set")]:
        config.write_text(f'envs_dir: "{value}"\n')
        made = envkit("create", "torch", "--machine", H100, "--dry-run", env={"ENVKIT_CONFIG": str(config)})
        assert_clean_error(made, 2, str(config), "envs_dir", words)
    assert_clean_error(envkit("site", env={"ENVKIT_SITE": f"{NO_SUCH_USER}/site.yaml"}), 2, "$ENVKIT_SITE")
    assert_clean_error(envkit("list", env={"ENVKIT_CONFIG": f"{NO_SUCH_USER}/c.yaml"}), 2, "$ENVKIT_CONFIG")
    assert_clean_error(envkit("list", "--manifests", f"{NO_SUCH_USER}/envs"), 2, "--manifests")


def test_an_installer_envkit_does_not_know_is_refused():
    made = envkit("create", "torch", "--machine", H100, "--dry-run", env={"ENVKIT_INSTALLER": "-x"})
    assert_clean_error(made, 2, "$ENVKIT_INSTALLER='-x': expected pip or uv")


def test_an_environment_inside_another_is_refused(tmp_path: Path):
    other = tmp_path / "other-env"  # what envkit leaves in every prefix it makes: the record naming it
    (other / ".envkit").mkdir(parents=True)
    (other / ".envkit" / "record.json").write_text('{"name": "other"}')
    made = envkit("create", "torch", "--machine", H100, "--dry-run", "--prefix", str(other / "nested"))
    assert_clean_error(made, 2, "inside the environment other", str(other))
    beside = envkit("create", "torch", "--machine", H100, "--dry-run", "--prefix", str(other / ".." / "beside"))
    assert beside.returncode == 0, beside.stderr  # through it and out again: not inside
