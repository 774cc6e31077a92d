"""Where an environment goes, when that place cannot be used or was made for it by the user.

- envkit's environments directory (the default one, or `envs_dir` in the config) or the directory of a --prefix that
  cannot be written: said plainly, with the directory, the system's reason and what helps (--prefix, `envs_dir` in
  the config file named by its real path), before anything is made; it used to be the venv installer's "Not a
  directory" with "try --backend rattler", which does not help. Tests run as root, whom permission bits do not stop:
  a file where a directory should be stops everyone.
- An empty directory given as --prefix (the installers want none there, so envkit removes it) is back as it was
  (there, empty, its permissions and owner) after a failed, interrupted or killed run; it used to be gone.
- The directories above a --prefix that a failed run made are gone again.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import CU126, Home
from support.pypi_index import IndexServer
from test_faults import Target


def _plain_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("envkit: error: ") and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 2  # the error, and what helps
    assert "--backend rattler" not in done.stderr  # another backend cannot write there either
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def _nothing_made(home: Home, killed: bool = False) -> None:
    """No journal, no record, nothing left in $TMPDIR (a SIGKILL leaves the scratch directory it was in)."""
    locks, records = home.data / "locks", home.data / "records"
    assert not list(locks.glob("*.creating")) if locks.is_dir() else True
    assert not any(records.iterdir()) if records.is_dir() else True
    assert killed or home.leftovers() == []


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.parametrize("named_config", [True, False])
def test_the_default_environments_directory_being_a_file_is_said_plainly(home: Home, torch_index: IndexServer,
                                                                          named_config: bool, dry_run: bool):
    envs = home.data / "envs"
    envs.parent.mkdir(parents=True)
    envs.write_text("mine\n", encoding="utf-8")
    config = home.config
    if not named_config:  # the default config file (XDG_CONFIG_HOME/envkit/config.yaml), whether it exists or not
        config = Path(home.env["XDG_CONFIG_HOME"]) / "envkit" / "config.yaml"
        del home.env["ENVKIT_CONFIG"]
    done = home.envkit("create", *CU126, "--yes", *(("--dry-run",) if dry_run else ()))
    _plain_error(done, f"cannot create {envs / 'torch-cu126'}: envkit's environments directory {envs} (the default) "
                       f"cannot be written: {envs} is a file, not a directory (Not a directory)",
                 "Give --prefix PATH", f"`envs_dir: DIR` (a directory you can write) in envkit's config file {config}.")
    assert envs.read_text(encoding="utf-8") == "mine\n"
    _nothing_made(home)


def test_the_configs_environments_directory_under_a_file_is_said_plainly(home: Home, torch_index: IndexServer):
    blocker = home.root / "scratch"
    blocker.write_text("not a directory\n", encoding="utf-8")
    envs = blocker / "envkit-envs"
    home.write_config({"https://download.pytorch.org/whl": f"{torch_index.url}/whl"}, envs_dir=str(envs))
    done = home.envkit("create", *CU126, "--yes")
    _plain_error(done, f"envkit's environments directory {envs} (envs_dir in {home.config}) cannot be made: "
                       f"{blocker} is a file, not a directory (Not a directory)",
                 f"in envkit's config file {home.config}.")
    assert blocker.read_text(encoding="utf-8") == "not a directory\n"
    _nothing_made(home)


def test_a_prefix_under_a_file_names_its_directory_and_suggests_another_prefix(home: Home, torch_index: IndexServer):
    blocker = home.root / "afile"
    blocker.write_text("", encoding="utf-8")
    prefix = blocker / "sub" / "env"
    done = home.envkit("create", *CU126, "--yes", "--prefix", str(prefix))
    _plain_error(done, f"cannot create {prefix}: the directory {blocker / 'sub'} cannot be made: {blocker} is a file, "
                       "not a directory (Not a directory)", "Give --prefix PATH (a new directory inside one you can write).")
    assert "envs_dir" not in done.stderr  # the config's directory is not what was asked for
    _nothing_made(home)


def test_an_environments_directory_without_write_permission_says_permission_denied(home: Home,
                                                                                    torch_index: IndexServer):
    if os.geteuid() == 0:  # permission bits do not stop root: judged as an unprivileged user would see it
        _permission_denied_as_nobody()
        return
    envs = home.data / "envs"
    envs.mkdir(parents=True)
    envs.chmod(0o555)
    try:
        done = home.envkit("create", *CU126, "--yes")
    finally:
        envs.chmod(0o755)
    _plain_error(done, f"envkit's environments directory {envs} (the default) cannot be written: {envs}: "
                       "Permission denied", "Give --prefix PATH")
    assert not any(envs.iterdir())


def _permission_denied_as_nobody() -> None:
    """As root: what create's check says of a 0555 directory, asked with the effective ids of an unprivileged user
    (os.access judges with them), in a directory that user can reach (pytest's own are root's alone)."""
    from envkit.create.prepare import unwritable

    top = Path(tempfile.mkdtemp(prefix="envkit-test-"))  # the system's temporary directory: others may reach it
    envs = top / "envs"
    try:
        top.chmod(0o755)
        envs.mkdir()
        envs.chmod(0o555)
        os.setegid(65534)
        os.seteuid(65534)
        try:
            said = unwritable(envs), unwritable(envs / "env" / "deeper")
        finally:
            os.seteuid(0)
            os.setegid(0)
        assert said == (f"cannot be written: {envs}: Permission denied", f"cannot be made: {envs}: Permission denied")
    finally:
        shutil.rmtree(top)  # (root removes what is in a 0555 directory)


def test_the_directories_a_failed_run_made_above_its_prefix_are_gone_again(home: Home, torch_index: IndexServer):
    torch_index.fail_project("/whl/cu126", "torchaudio")
    top = home.root / "projects"
    done = home.envkit("create", *CU126, "--yes", "--prefix", str(top / "a" / "b" / "env"))
    assert done.returncode == 1, done.stderr
    assert not top.exists()  # the installer made them, and they stayed
    _nothing_made(home)


def test_a_create_into_new_directories_still_works(home: Home, torch_index: IndexServer):
    prefix = home.root / "projects" / "a" / "env"
    done = home.envkit("create", *CU126, "--yes", "--no-verify", "--prefix", str(prefix))
    assert done.returncode == 0, done.stderr
    assert home.record("env")["prefix"] == str(prefix) and (prefix / "bin" / "python").exists()


def _users_empty_directory(home: Home) -> tuple[Path, tuple[int, int, int]]:
    """An empty directory the user made for the environment: 0750, and (as root can) someone else's."""
    mine = home.root / "mine"
    mine.mkdir()
    mine.chmod(0o750)
    if os.geteuid() == 0:
        os.chown(mine, 4242, 4343)
    return mine, _state(mine)


def _state(path: Path) -> tuple[int, int, int]:
    status = path.stat()
    return stat.S_IMODE(status.st_mode), status.st_uid, status.st_gid


def _as_it_was(path: Path, state: tuple[int, int, int]) -> None:
    assert path.is_dir() and not path.is_symlink(), f"{path} is gone"
    assert list(path.iterdir()) == []
    assert _state(path) == state


def test_an_empty_prefix_directory_is_back_as_it_was_after_a_failed_run(home: Home, torch_index: IndexServer):
    mine, state = _users_empty_directory(home)
    torch_index.fail_project("/whl/cu126", "torchaudio")
    done = home.envkit("create", *CU126, "--yes", "--prefix", str(mine))
    assert done.returncode == 1 and "torchaudio" in done.stderr, done.stderr
    _as_it_was(mine, state)
    _nothing_made(home)


def test_an_empty_prefix_directory_becomes_the_environment(home: Home, torch_index: IndexServer):
    mine, _ = _users_empty_directory(home)
    done = home.envkit("create", *CU126, "--yes", "--no-verify", "--prefix", str(mine))
    assert done.returncode == 0, done.stderr
    assert home.record("mine")["prefix"] == str(mine) and (mine / "bin" / "python").exists()
    assert home.in_env("mine", "import sys; print(sys.prefix)") == str(mine)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("step", ["room", "inside-backend", "installing"])
def test_an_empty_prefix_directory_is_back_after_an_interrupt(home: Home, torch_index: IndexServer, step: str,
                                                              sig: int):
    mine, state = _users_empty_directory(home)
    target = Target(home, "venv", (*CU126, "--prefix", str(mine)), {}, "mine")
    err = target.kill_at(step, "--no-verify", sig=sig)
    assert "interrupted" in err
    _as_it_was(mine, state)
    _nothing_made(home)


# A run killed outright (SIGKILL) at each step: the next run (a create of the same prefix, or `envkit remove`) puts
# the directory back before anything else. From "unstamped" on the environment is complete and stands.
KILLED = ("journal", "room", "begun", "inside-backend", "backend", "stamped", "installing", "installed", "recorded")


@pytest.mark.parametrize("step", KILLED)
def test_an_empty_prefix_directory_is_back_after_a_killed_run_is_undone(home: Home, torch_index: IndexServer,
                                                                        step: str):
    mine, state = _users_empty_directory(home)
    target = Target(home, "venv", (*CU126, "--prefix", str(mine)), {}, "mine")
    target.kill_at(step, "--no-verify")
    assert [(e["name"], e["state"]) for e in target.envs() if e["name"] == "mine"] == [("mine", "interrupted")]
    removed = target.envkit("remove", "mine", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert "undid an envkit run of mine that did not finish" in removed.stdout.lower(), removed.stdout
    _as_it_was(mine, state)
    _nothing_made(home, killed=True)
    again = target.create("--no-verify")  # and the directory is as usable as before
    assert again.returncode == 0, again.stderr
    assert home.record("mine")["prefix"] == str(mine)


@pytest.mark.parametrize("step", ["room", "inside-backend", "installing"])
def test_a_killed_run_into_an_empty_directory_is_undone_by_the_next_create_of_it(home: Home,
                                                                                 torch_index: IndexServer, step: str):
    mine, _ = _users_empty_directory(home)
    target = Target(home, "venv", (*CU126, "--prefix", str(mine)), {}, "mine")
    target.kill_at(step, "--no-verify")
    again = target.create("--no-verify")
    assert again.returncode == 0, again.stderr
    assert "undid an envkit run of mine that did not finish" in again.stderr
    assert home.record("mine")["prefix"] == str(mine) and (mine / "bin" / "python").exists()


def test_a_killed_run_that_had_completed_its_environment_keeps_it(home: Home, torch_index: IndexServer):
    mine, _ = _users_empty_directory(home)
    target = Target(home, "venv", (*CU126, "--prefix", str(mine)), {}, "mine")
    target.kill_at("unstamped", "--no-verify")
    assert home.in_env("mine", "import sys; print(sys.prefix)") == str(mine)  # not put back: it is the environment
    assert [(e["name"], e["state"]) for e in target.envs()] == [("mine", "ready")]
