"""Files a user (or an attacker) names: every one envkit reads is bounded (a regular file under a limit per kind, a
pipe or device read no further than it, a FIFO nobody writes to never waited on), and every file envkit writes at a
named path is written beside it and renamed over it, never through a symbolic link (envkit.state.output)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from envkit.errors import BadInputError
from envkit.state.files import LIMITS, read_text_file
from envkit.state.output import UnsafeOutput, write_output

from tests.support.slurm_cluster import slurm_required
from tests.test_cli import PROFILES, assert_clean_error, envkit

H100 = str(PROFILES / "h100-cuda128.yaml")


def one_line(result) -> None:
    assert result.stderr.count("envkit: error: ") == 1 and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize("args, env, words", [
    (("list", "torch", "--machine", "/dev/zero"), {}, "over 1 MiB, the most envkit reads of a machine profile"),
    (("list", "torch", "--machine", H100), {"ENVKIT_CONFIG": "/dev/zero"}, "over 1 MiB, the most envkit reads of a "
                                                                           "config file"),
    (("site",), {"ENVKIT_SITE": "/dev/zero"}, "over 16 MiB, the most envkit reads of a site file"),
    (("create", "--from-lock", "/dev/zero", "--machine", H100, "--dry-run"), {}, "over 64 MiB, the most envkit reads "
                                                                                   "of a lock file"),
])
def test_an_endless_device_is_refused_at_its_limit(args, env, words):
    made = envkit(*args, env=env)
    assert_clean_error(made, 2, "/dev/zero", words)
    one_line(made)


def test_a_fifo_nobody_writes_to_is_not_waited_on(tmp_path: Path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for args, env in [(("list", "torch", "--machine", str(fifo)), {}),
                      (("create", "--from-lock", str(fifo), "--machine", H100, "--dry-run"), {}),
                      (("list", "torch", "--machine", H100), {"ENVKIT_CONFIG": str(fifo)}),
                      (("site",), {"ENVKIT_SITE": str(fifo)})]:
        made = envkit(*args, env=env)  # (envkit() gives up after 60 s: a wait would fail here, not hang)
        assert made.returncode in (0, 2) and "Traceback" not in made.stderr, (args, env, made.stderr)
        if made.returncode == 2:
            one_line(made)


def test_a_file_over_its_kind_s_limit_is_refused_before_it_is_read(tmp_path: Path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as out:  # sparse: nothing to read, only a size
        out.truncate(LIMITS["machine profile"] + 1)
    made = envkit("list", "torch", "--machine", str(big))
    assert_clean_error(made, 2, str(big), "is over 1 MiB, the most envkit reads of a machine profile")
    manifests = tmp_path / "envs"
    manifests.mkdir()
    for table in (PROFILES.parent.parent / "envs").glob("*.yaml"):
        (manifests / table.name).write_bytes(table.read_bytes())
    with open(manifests / "torch.yaml", "r+b") as out:
        out.truncate(LIMITS["manifest"] + 1)
    made = envkit("list", "torch", "--machine", H100, "--manifests", str(manifests))
    assert_clean_error(made, 2, "torch.yaml", "over 4 MiB, the most envkit reads of a manifest")


def test_a_nul_byte_or_a_long_silence_is_an_error_not_a_hang(tmp_path: Path, monkeypatch):
    text = tmp_path / "nul.yaml"
    text.write_bytes(b"a: 1\nb: \x00\n")
    with pytest.raises(ValueError, match=r"holds a NUL byte \(line 2\)"):
        read_text_file(text, "machine profile")
    import envkit.state.files

    monkeypatch.setattr(envkit.state.files, "PIPE_WAIT_S", 0.2)
    reading, writing = os.pipe()
    try:  # a writer that holds the pipe open and sends nothing
        with pytest.raises(ValueError, match="sent nothing for 0.2 seconds"):
            read_text_file(Path(f"/dev/fd/{reading}"), "config file")
    finally:
        os.close(reading)
        os.close(writing)


def test_write_output_replaces_the_path_never_what_a_link_names(tmp_path: Path):
    target = tmp_path / "bashrc"
    target.write_text("keep me\n")
    link = tmp_path / "out.yml"
    link.symlink_to(target)
    with pytest.raises(UnsafeOutput, match="is a symbolic link .*never through a link") as refused:
        write_output(link, b"lock\n", what="the lock")
    assert isinstance(refused.value, BadInputError) and refused.value.exit_code == 2 and "--force" in refused.value.hint
    assert target.read_text() == "keep me\n" and link.is_symlink()
    write_output(link, b"lock\n", force=True)
    assert not link.is_symlink() and link.read_text() == "lock\n" and target.read_text() == "keep me\n"
    dangling = tmp_path / "dangling.yml"
    dangling.symlink_to(tmp_path / "elsewhere" / "made.yml")
    with pytest.raises(UnsafeOutput):
        write_output(dangling, b"x")
    assert not (tmp_path / "elsewhere").exists()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name in ("fifo", "dir"):
        with pytest.raises(UnsafeOutput, match="envkit replaces only a regular file"):
            write_output(tmp_path / name, b"x", force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bashrc", "dangling.yml", "dir", "fifo", "out.yml"]


def test_write_output_keeps_a_replaced_file_s_mode_and_gives_a_secret_0600(tmp_path: Path):
    kept = tmp_path / "kept"
    kept.write_text("old")
    kept.chmod(0o640)
    write_output(kept, b"new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_bytes() == b"new"
    secret = tmp_path / "new" / "dir" / "secret"
    write_output(secret, b"token", mode=0o600)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.read_bytes() == b"token"
    assert sorted(p.name for p in secret.parent.iterdir()) == ["secret"]  # no temporary left beside it


def test_lock_and_export_refuse_a_link_as_output_before_any_work(tmp_path: Path):
    target = tmp_path / "bashrc"
    target.write_text("keep me\n")
    link = tmp_path / "out.yml"
    link.symlink_to(target)
    made = envkit("lock", "torch", "--machine", H100, "-o", str(link))
    assert_clean_error(made, 2, f"the lock {link} is a symbolic link", "--force")
    made = envkit("export", "no-such-env", "-o", str(link))
    assert_clean_error(made, 2, f"the lock {link} is a symbolic link")
    assert target.read_text() == "keep me\n" and link.is_symlink()


def test_root_in_a_sticky_directory_never_follows_another_user_s_link(tmp_path: Path):
    """Another user plants ``out.yml -> /root-owned/file`` in a sticky world-writable directory (a shared /tmp);
    root's `envkit lock -o out.yml` must not overwrite the file, with or without --force."""
    if os.geteuid() != 0:
        if slurm_required(os.environ):
            pytest.fail("this test runs as root under CI")
        pytest.skip("needs root: to plant a link as another user")
    import pwd

    nobody = pwd.getpwnam("nobody")
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    precious = tmp_path / "precious"
    precious.write_text("root's\n")
    link = shared / "out.yml"
    link.symlink_to(precious)
    os.lchown(link, nobody.pw_uid, nobody.pw_gid)
    made = envkit("lock", "torch", "--machine", H100, "-o", str(link))
    assert_clean_error(made, 2, "is a symbolic link")
    with pytest.raises(UnsafeOutput):
        write_output(link, b"x")
    write_output(link, b"lock\n", force=True)  # the link itself goes, root's file stays
    assert precious.read_text() == "root's\n" and link.read_text() == "lock\n" and not link.is_symlink()


def test_a_nul_byte_in_a_file_name_and_a_5000_digit_version_in_a_lock_are_bad_input(tmp_path: Path):
    import dataclasses
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "lockfile"))
    from test_format import sample

    from envkit.lockfile.format import dump_lock

    lock = sample()
    conda = next(p for p in lock.packages if p.manager == "conda")
    pip = next(p for p in lock.packages if p.manager == "pip")
    for changed, words in [(dataclasses.replace(conda, url=conda.url.rsplit("/", 1)[0] + "/x%00y-1.0-0.conda"),
                            "holds a control character"),
                           (dataclasses.replace(pip, version="9" * 5000), "a version of 5000 characters is no version")]:
        bad = tmp_path / "bad.yml"
        packages = tuple(changed if p.name == changed.name else p for p in lock.packages)
        bad.write_text(dump_lock(dataclasses.replace(lock, packages=packages)))
        made = envkit("create", "--from-lock", str(bad), "--machine", H100, "--dry-run")
        assert_clean_error(made, 2, str(bad), words)
        one_line(made)


def test_survey_refuses_a_link_where_the_site_file_goes_before_asking_slurm(tmp_path: Path):
    target = tmp_path / "elsewhere" / "made.yaml"  # a dangling link: survey would create a file where it points
    link = tmp_path / "site.yaml"
    link.symlink_to(target)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "ENVKIT_SITE": str(link), "SLURM_CONF": str(tmp_path / "no-slurm.conf")}
    made = envkit("survey", env=env)
    assert_clean_error(made, 2, f"the site file {link} is a symbolic link", "--force")
    assert not target.parent.exists() and link.is_symlink()


def test_a_pylock_is_read_with_the_bounds_of_the_other_inputs(tmp_path: Path):
    # A pylock.toml was read whole, unbounded (issue #40): linked to /dev/zero it ended in "internal error:
    # MemoryError", as a FIFO nobody writes to it hung, 65 MiB were read past the 64 MiB limit, and 100,000 nested
    # arrays gave "internal error: RecursionError". Each is now exit 2 naming the file.
    cases = {}
    zero = tmp_path / "zero" / "pylock.toml"
    zero.parent.mkdir()
    zero.symlink_to("/dev/zero")
    cases[zero] = "is over 64 MiB, the most envkit reads of a lock file"
    fifo = tmp_path / "fifo" / "pylock.toml"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    cases[fifo] = "is not a valid pylock.toml"  # (a FIFO with no writer reads as empty: no lock-version)
    big = tmp_path / "big" / "pylock.toml"
    big.parent.mkdir()
    with open(big, "wb") as out:
        out.truncate(65 << 20)
    cases[big] = "is over 64 MiB, the most envkit reads of a lock file"
    deep = tmp_path / "deep" / "pylock.toml"
    deep.parent.mkdir()
    deep.write_text('lock-version = "1.0"\ncreated-by = "x"\nx = ' + "[" * 100_000 + "]" * 100_000 + "\n")
    cases[deep] = "nests deeper than"
    for path, words in cases.items():
        made = envkit("create", "--from-lock", str(path), "--machine", H100, "--dry-run")
        assert made.returncode == 2, (path, made.stderr)
        assert str(path) in made.stderr and words in made.stderr, (path, made.stderr)
        assert "internal error" not in made.stderr
        one_line(made)


def test_an_environment_s_record_that_is_a_fifo_is_not_waited_on(tmp_path: Path):
    # The record inside an environment (PREFIX/.envkit/record.json) was read unbounded: a FIFO there hung every
    # command that asks whose a directory is (`envkit envs`, `remove`, a cache_dir check).
    from envkit.state import records

    home = tmp_path / "home"
    prefix = home / "envs" / "f1"
    (prefix / ".envkit").mkdir(parents=True)
    os.mkfifo(prefix / ".envkit" / "record.json")
    good = {"name": "f1", "prefix": str(prefix), "kind": "venv", "backend": "venv", "manifest": "torch",
            "build": "torch-2.13-cpu", "python": "3.12", "created": "2026-11-21T10:00:00+00:00", "machine": {},
            "on_target": True}
    records.write_json_atomic(records.index_path(home / "data" / "envkit" / "records", "f1"), good)
    env = {"HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_CACHE_HOME": str(home / "cache"),
           "XDG_CONFIG_HOME": str(home / "config")}
    listed = envkit("envs", env=env)  # (envkit() gives up after 60 s: a wait would fail here, not hang)
    assert listed.returncode == 0 and "f1" in listed.stdout, listed.stdout + listed.stderr
    assert "Traceback" not in listed.stderr
