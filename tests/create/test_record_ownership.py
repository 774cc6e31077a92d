"""Whose a directory is: every command that acts on a named environment's prefix (`run`, `verify`, `export`, `job`,
`remove`) first checks that the record inside the prefix names that environment, and that no `envkit create` of it
is going on or was interrupted. envkit never writes its record into, runs in, or deletes a directory that holds
another environment, or no envkit environment at all; an index entry that is not envkit's (a directory named
NAME.json) is never deleted; a record that cannot be written is a clean error naming the file."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import pytest

from conftest import CU126, Home
from envkit.create.lock import journal_path, name_lock
from envkit.errors import EnvkitError
from envkit.state import ownership, records
from support.pypi_index import IndexServer

RECORD = {"kind": "venv", "backend": "venv", "manifest": "torch", "build": "torch-2.13-cpu", "python": "3.12",
          "created": "2026-11-21T10:00:00+00:00", "machine": {}, "on_target": True}
# The commands that act on a named environment's prefix (`envkit job` only writes a script: no Slurm needed).
ACTING = [("run", "{}", "--", "python", "-c", "pass"), ("verify", "{}"), ("export", "{}", "-o", "out.yml"),
          ("job", "{}", "--partition", "gpu", "--", "python", "train.py")]


def _argv(command: tuple[str, ...], name: str) -> list[str]:
    return [part.format(name) for part in command]


def fake_env(home: Home, name: str, prefix: Optional[Path] = None, inside: Optional[str] = "same") -> Path:
    """An index entry for ``name`` and a prefix with a Python; the record inside names ``inside`` ("same": the
    environment itself; None: no record inside)."""
    prefix = prefix or home.prefix(name)
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    if not (prefix / "bin" / "python").exists():
        (prefix / "bin" / "python").symlink_to(sys.executable)
    record = {**RECORD, "name": name, "prefix": str(prefix)}
    index = records.index_path(home.data / "records", name)
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text(json.dumps(record), encoding="utf-8")
    if inside is not None:
        records.in_prefix(prefix).parent.mkdir(exist_ok=True)
        records.in_prefix(prefix).write_text(json.dumps({**record, "name": name if inside == "same" else inside}),
                                             encoding="utf-8")
    return prefix


def _clean(done) -> None:
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr


# --- Bug: a stale entry pointing at another environment's directory --------------------------------------------------

@pytest.fixture
def two(home: Home, torch_index: IndexServer) -> Home:
    """Two real environments envkit made: fl8 and tiny-cpu."""
    for name in ("fl8", "tiny-cpu"):
        done = home.envkit("create", *CU126, "--name", name, "--yes", "--no-verify")
        assert done.returncode == 0, done.stderr
    return home


def test_an_entry_pointing_at_another_environment_is_never_acted_on_and_remove_keeps_that_one(two: Home):
    tiny = two.prefix("tiny-cpu")
    index = records.index_path(two.data / "records", "fl8")
    index.write_text(json.dumps({**two.record("fl8"), "prefix": str(tiny)}), encoding="utf-8")
    owned = records.in_prefix(tiny).read_text(encoding="utf-8")

    for command in ACTING:
        refused = two.envkit(*_argv(command, "fl8"))
        assert refused.returncode == 1, (command, refused.stderr)
        assert f"{tiny} no longer holds environment 'fl8': it holds envkit's environment 'tiny-cpu'" in refused.stderr
        assert "`envkit remove fl8 --yes` forgets fl8" in refused.stderr
        _clean(refused)
    assert records.in_prefix(tiny).read_text(encoding="utf-8") == owned  # tiny-cpu's record is untouched
    assert not (two.root / "out.yml").exists()
    listed = {entry["name"]: entry for entry in json.loads(two.envkit("envs", "--json").stdout)["environments"]}
    assert listed["fl8"]["state"] == "not held" and "tiny-cpu" in listed["fl8"]["error"]  # what scripts read
    assert listed["tiny-cpu"]["state"] == "ready" and "error" not in listed["tiny-cpu"]
    listed = two.envkit("envs")
    assert listed.returncode == 0 and f"{tiny} (not fl8's)" in listed.stdout
    assert f"fl8: {tiny} no longer holds it (it holds envkit's environment 'tiny-cpu'); `envkit remove fl8 --yes` " \
           "forgets it and leaves the directory alone." in listed.stdout

    removed = two.envkit("remove", "fl8", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert f"Left {tiny} alone: it does not hold envkit's environment fl8 (it holds envkit's environment " \
           "'tiny-cpu')." in removed.stdout and "Forgot fl8." in removed.stdout
    assert tiny.is_dir() and ownership.owner(tiny) == "tiny-cpu" and two.record("fl8") is None
    assert two.in_env("tiny-cpu", "import sys; print(sys.prefix)") == str(tiny)
    assert [e["name"] for e in json.loads(two.envkit("envs", "--json").stdout)["environments"]] == ["tiny-cpu"]


@pytest.mark.parametrize("command", ACTING, ids=[c[0] for c in ACTING])
def test_a_directory_holding_no_envkit_record_is_never_acted_on(home: Home, command):
    prefix = fake_env(home, "mine", inside=None)
    done = home.envkit(*_argv(command, "mine"))
    assert done.returncode == 1 and f"{prefix} no longer holds environment 'mine': it holds no envkit record" \
        in done.stderr, done.stderr
    _clean(done)
    assert not (prefix / ".envkit").exists()  # verify wrote no record into it


def test_remove_forgets_an_entry_whose_directory_holds_no_record_and_keeps_the_directory(home: Home):
    prefix = fake_env(home, "mine", inside=None)
    done = home.envkit("remove", "mine", "--yes")
    assert done.returncode == 0, done.stderr
    assert f"Left {prefix} alone: it does not hold envkit's environment mine (it holds no envkit record)." \
        in done.stdout and "Forgot mine." in done.stdout
    assert (prefix / "bin" / "python").exists() and home.record("mine") is None


def test_remove_leaves_the_other_environments_kernel_alone(home: Home):
    prefix = fake_env(home, "other")
    fake_env(home, "stale", prefix=home.prefix("other"), inside=None)  # an entry naming other's directory
    spec = home.root / ".local" / "share" / "jupyter" / "kernels" / "other"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": [str(prefix / "bin" / "python"), "-m", "ipykernel"]}))
    index = records.index_path(home.data / "records", "stale")
    index.write_text(json.dumps({**json.loads(index.read_text()), "kernel": "other"}))
    done = home.envkit("remove", "stale", "--yes")
    assert done.returncode == 0 and "Left" in done.stdout, done.stderr
    assert (spec / "kernel.json").exists() and ownership.owner(prefix) == "other"


def test_remove_of_an_environment_moved_elsewhere_and_linked_back_deletes_it_and_the_link(home: Home):
    # It failed with "Cannot call rmtree on a symbolic link" and advised fixing the permissions.
    moved = home.root / "other-disk" / "big"
    fake_env(home, "big", prefix=moved)
    home.prefix("big").parent.mkdir(parents=True, exist_ok=True)
    home.prefix("big").symlink_to(moved)
    index = records.index_path(home.data / "records", "big")
    index.write_text(json.dumps({**json.loads(index.read_text()), "prefix": str(home.prefix("big"))}))
    records.in_prefix(moved).write_text(index.read_text())
    done = home.envkit("remove", "big", "--yes")
    assert done.returncode == 0, done.stderr
    assert f"Deleted {moved} and the link {home.prefix('big')} to it." in done.stdout
    assert not os.path.lexists(home.prefix("big")) and not moved.exists() and (home.root / "other-disk").is_dir()


def test_remove_says_it_left_a_kernel_that_no_longer_runs_the_environment(home: Home):
    prefix = fake_env(home, "kept")
    spec = home.root / ".local" / "share" / "jupyter" / "kernels" / "kept"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": ["/opt/python3/bin/python", "-m", "ipykernel"]}))
    index = records.index_path(home.data / "records", "kept")
    index.write_text(json.dumps({**json.loads(index.read_text()), "kernel": "kept"}))
    done = home.envkit("remove", "kept", "--yes")
    assert done.returncode == 0, done.stderr
    assert "Left the Jupyter kernel 'kept' alone: it no longer runs this environment's Python." in done.stdout
    assert (spec / "kernel.json").exists() and not prefix.exists()


def test_a_remove_that_fails_part_way_keeps_the_record_so_the_next_one_finishes(home: Home, monkeypatch):
    # The record inside the directory goes last: before, a failure after it was gone left a half-deleted directory
    # that the next `envkit remove` (as the error advised) no longer knew as the environment, and only forgot.
    from envkit.create.remove import remove_environment
    from envkit.state.userdirs import user_dirs

    prefix = fake_env(home, "half")
    (prefix / "lib").mkdir()
    (prefix / "lib" / "stuck.so").write_text("")
    real_unlink = os.unlink

    def refusing(path, *args, **kwargs):
        if os.path.basename(path) == "stuck.so":
            raise PermissionError(13, "Permission denied", path)
        return real_unlink(path, *args, **kwargs)

    dirs = user_dirs(home.env)
    monkeypatch.setattr(os, "unlink", refusing)
    with pytest.raises(EnvkitError) as failed:
        remove_environment("half", dirs, home.env)
    assert f"({prefix / 'lib' / 'stuck.so'})" in failed.value.message  # the whole path, not 'stuck.so'
    assert records.in_prefix(prefix).exists() and home.record("half") is not None
    monkeypatch.setattr(os, "unlink", real_unlink)
    done = remove_environment("half", dirs, home.env)
    assert done[-2:] == [f"Deleted {prefix}.", "Forgot half."] and not prefix.exists()


def test_a_record_inside_that_cannot_be_read_is_never_overwritten(home: Home):
    prefix = fake_env(home, "cut", inside=None)
    records.in_prefix(prefix).parent.mkdir()
    records.in_prefix(prefix).write_text('{"name": "cu', encoding="utf-8")
    done = home.envkit("verify", "cut")
    assert done.returncode == 1 and "its envkit record" in done.stderr and "is not valid JSON" in done.stderr
    _clean(done)
    assert records.in_prefix(prefix).read_text(encoding="utf-8") == '{"name": "cu'


# --- Bug: export of an environment being created or interrupted -------------------------------------------------------

def test_export_refuses_an_environment_being_created_or_interrupted(home: Home):
    fake_env(home, "busy")
    locks = home.data / "locks"
    locks.mkdir(parents=True)
    journal_path(locks, "busy").write_text(json.dumps({"name": "busy", "prefix": str(home.prefix("busy"))}))
    interrupted = home.envkit("export", "busy", "-o", "out.yml")
    assert interrupted.returncode == 1 and "the last `envkit create` of 'busy' was interrupted" in interrupted.stderr
    with name_lock(locks, "busy"):  # a live run holds it
        running = home.envkit("export", "busy", "-o", "out.yml")
    assert running.returncode == 1 and "environment 'busy' is being created right now" in running.stderr
    _clean(running)
    assert not (home.root / "out.yml").exists()


# --- Bug: records/NAME.json is a directory ----------------------------------------------------------------------------

def test_an_index_entry_that_is_a_directory_is_not_deleted_and_no_command_suggests_removing_it(home: Home):
    fake_env(home, "fine")
    entry = records.index_path(home.data / "records", "odd")
    (entry / "inside").mkdir(parents=True)
    removed = home.envkit("remove", "odd", "--yes")
    assert removed.returncode == 1 and f"{entry} is a directory, not an envkit record" in removed.stderr
    _clean(removed)
    assert (entry / "inside").is_dir()
    for command in [("envs",), *ACTING]:
        done = home.envkit(*_argv(command, "odd"))
        _clean(done)
        assert "envkit remove odd" not in done.stderr + done.stdout, (command, done.stderr, done.stdout)
        if command != ("envs",):
            assert done.returncode == 1 and "is a directory, not an envkit record" in done.stderr, done.stderr
    listed = home.envkit("envs")
    assert listed.returncode == 0 and "odd" in listed.stdout and "move it out of" in listed.stdout
    assert "fine" in listed.stdout


# --- Bug: PREFIX/.envkit/record.json is a directory; a record that cannot be written ---------------------------------

def test_verify_with_a_directory_for_the_record_inside_is_a_clean_error(home: Home):
    prefix = fake_env(home, "dirrec", inside=None)
    records.in_prefix(prefix).mkdir(parents=True)
    done = home.envkit("verify", "dirrec")
    assert done.returncode == 1 and f"{prefix} no longer holds environment 'dirrec'" in done.stderr, done.stderr
    _clean(done)
    assert records.in_prefix(prefix).is_dir()


def test_a_record_that_cannot_be_written_is_an_error_naming_the_file(tmp_path: Path):
    prefix = tmp_path / "env"
    records.in_prefix(prefix).mkdir(parents=True)
    record = records.Record(name="x", prefix=str(prefix), **RECORD)
    with pytest.raises(EnvkitError) as caught:
        records.save(record, tmp_path / "records")
    assert caught.value.message == f"cannot write {records.in_prefix(prefix)}: it exists and is not a regular file"
    assert not records.index_path(tmp_path / "records", "x").exists()


def test_update_writes_only_into_a_prefix_the_environment_holds(tmp_path: Path):
    prefix = tmp_path / "env"
    record = records.Record(name="x", prefix=str(prefix), **RECORD)
    records.save(record, tmp_path / "records")
    ownership.update(records.with_verify(record, {"ok": True}), tmp_path / "records")
    assert records.load(tmp_path / "records", "x").verify == {"ok": True}
    records.save(records.Record(name="y", prefix=str(prefix), **RECORD), tmp_path / "other")
    with pytest.raises(ownership.NotHeld, match="it holds envkit's environment 'y'"):
        ownership.update(records.with_verify(record, {"ok": False}), tmp_path / "records")
    assert ownership.owner(prefix) == "y" and records.load(tmp_path / "records", "x").verify == {"ok": True}


# --- Bug: verify of an environment whose directory is gone -----------------------------------------------------------

def test_verify_of_a_vanished_environment_says_how_to_forget_or_remake_it(home: Home):
    prefix = fake_env(home, "gone")
    import shutil

    shutil.rmtree(prefix)
    done = home.envkit("verify", "gone")
    assert done.returncode == 1 and f"environment gone is gone from {prefix}" in done.stderr, done.stderr
    assert "`envkit remove gone --yes` forgets it" in done.stderr and "envkit create torch" in done.stderr
    assert "Give the directory" not in done.stderr
    _clean(done)


def test_verify_of_an_environment_without_its_python_says_how_to_remake_it(home: Home):
    prefix = fake_env(home, "broken")
    (prefix / "bin" / "python").unlink()
    done = home.envkit("verify", "broken")
    assert done.returncode == 1 and f"no environment at {prefix}" in done.stderr, done.stderr
    assert "Give the directory" not in done.stderr and "`envkit remove broken --yes`" in done.stderr


def test_forget_deletes_only_what_envkit_could_have_written(tmp_path: Path):
    index = tmp_path / "records"
    (index / "odd.json").mkdir(parents=True)
    with pytest.raises(records.ForeignEntry, match="odd.json is a directory, not an envkit record"):
        records.forget(index, "odd")
    assert (index / "odd.json").is_dir()
    (index / "loop.json").symlink_to("loop.json")  # unreadable, and deleting the link deletes nothing else
    assert records.unreadable(index, "loop") is not None
    records.forget(index, "loop")
    assert not os.path.lexists(index / "loop.json")
