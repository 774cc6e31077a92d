"""`envkit create` of pure-pip builds, end to end: the real envs/torch.yaml, a real index on 127.0.0.1 through the
mirror setting, real uv and pip, the real post-install check (on the stand-in torch)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CU126, PROFILES, PYTHON, Home, fake_torch_files
from support.pypi_index import IndexServer
from support.wheels import build_wheel

VERSION = "import importlib.metadata as m; print(m.version('torch'), m.version('torchvision'), m.version('torchaudio'))"


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_every_package_comes_from_the_build_index_never_a_higher_pypi_version(home: Home, torch_index: IndexServer,
                                                                              installer: str):
    done = home.envkit("create", *CU126, "--yes", env={"ENVKIT_INSTALLER": installer})
    assert done.returncode == 0, done.stderr
    assert home.in_env("torch-cu126", VERSION) == "2.13.0+cu126 0.28.0+cu126 2.11.0+cu126"
    fetched = torch_index.fetched_files()
    assert fetched and all(path.startswith("/whl/cu126/") for path in fetched), fetched
    assert not any(path.startswith("/pypi/simple") for path in torch_index.requests)
    record = home.record("torch-cu126")
    assert record["build"] == "torch-2.13-cu126" and record["backend"] == "venv"
    assert record["installer"] == installer and record["python"] == PYTHON
    assert record["machine"]["name"] == "ada" and record["on_target"] is False
    assert record["verify"]["ok"] is True, done.stdout  # the stand-in torch says 2.13.0+cu126, CUDA 12.6
    assert not home.sudo_log.exists()
    assert "[1/3] Creating the environment" in done.stderr and "done in" in done.stderr
    assert f"source {home.prefix('torch-cu126')}/bin/activate" in done.stdout


def test_the_users_own_pip_and_uv_settings_do_not_leak_in(home: Home, torch_index: IndexServer, tmp_path: Path):
    """A find-links directory and an extra index with a higher torch, set every way a user can: none is used."""
    decoy = tmp_path / "decoy"
    build_wheel(decoy, "torch", "2.13.9", requires=["filelock"])
    (home.root / ".config" / "pip").mkdir(parents=True)
    (home.root / ".config" / "pip" / "pip.conf").write_text(f"[global]\nfind-links = {decoy}\n")
    (home.root / ".config" / "uv").mkdir(parents=True)
    (home.root / ".config" / "uv" / "uv.toml").write_text(f'find-links = ["{decoy}"]\n')
    decoys = {"PIP_FIND_LINKS": str(decoy), "UV_FIND_LINKS": str(decoy),
              "PIP_EXTRA_INDEX_URL": torch_index.index_url("/pypi/simple"),
              "UV_EXTRA_INDEX_URL": torch_index.index_url("/pypi/simple")}
    for installer in ("uv", "pip"):
        done = home.envkit("create", *CU126, "--yes", "--no-verify", "--force",
                           env={**decoys, "ENVKIT_INSTALLER": installer})
        assert done.returncode == 0, done.stderr
        assert home.in_env("torch-cu126", VERSION).split()[0] == "2.13.0+cu126", installer


def test_dry_run_prints_the_plan_and_changes_nothing(home: Home, torch_index: IndexServer):
    done = home.envkit("create", *CU126, "--dry-run")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    index = torch_index.index_url("/whl/cu126").rstrip("/")
    assert f"Environment: torch-cu126 at {home.prefix('torch-cu126')}" in out
    assert f"Python:      {PYTHON}" in out and "Backend:     venv:" in out
    assert f"index:     {index} (the only index)" in out
    assert f"uv pip install --python {home.prefix('torch-cu126')}/bin/python --index-url {index}" in out
    assert "'torch==2.13.*' 'torchvision==0.28.*' 'torchaudio==2.11.*'" in out
    assert not home.data.exists() and torch_index.requests == []
    plan = json.loads(home.envkit("create", *CU126, "--dry-run", "--json").stdout)
    assert plan["pip"] == [{"purpose": "torch-2.13-cu126 packages", "index_url": index, "find_links": None,
                            "packages": ["torch==2.13.*", "torchvision==0.28.*", "torchaudio==2.11.*"]}]
    assert plan["backend"] == "venv" and plan["conda"] is None and len(plan["commands"]) == 2


def test_a_failing_index_leaves_nothing_behind(home: Home, torch_index: IndexServer):
    torch_index.fail_project("/whl/cu126", "torchaudio")
    done = home.envkit("create", *CU126, "--yes")
    assert done.returncode == 1
    # pinned to their +cu126 builds, but for torchaudio, whose page failed: the installer's answer is the error
    assert "installing torch==2.13.0+cu126, torchvision==0.28.0+cu126, torchaudio==2.11.* from" in done.stderr
    assert "  | " in done.stderr  # the installer's last lines
    assert "500" in done.stderr
    assert not home.prefix("torch-cu126").exists() and home.record("torch-cu126") is None
    assert not (home.data / "envs").exists()  # made by this run (a first one), so removed with the rest


def test_an_existing_environment_is_kept_unless_forced_and_kept_when_the_replacement_fails(
        home: Home, torch_index: IndexServer):
    assert home.envkit("create", *CU126, "--yes", "--no-verify").returncode == 0
    prefix = home.prefix("torch-cu126")
    (prefix / "my-notes.txt").write_text("mine")
    again = home.envkit("create", *CU126, "--yes", "--no-verify")
    assert again.returncode == 1 and "already exists" in again.stderr and "--force" in again.stderr
    torch_index.fail_project("/whl/cu126", "torchvision")
    failed = home.envkit("create", *CU126, "--yes", "--no-verify", "--force")
    assert failed.returncode == 1
    assert (prefix / "my-notes.txt").read_text() == "mine"  # the old one, untouched
    assert home.in_env("torch-cu126", VERSION).startswith("2.13.0+cu126")
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["torch-cu126"]  # nothing set aside is left


def torch_that_does_not_import(wheels: Path) -> list[Path]:
    """torch-2.13-cu126's three wheels, its torch failing to import (a missing library): the post-install check
    fails."""
    files = fake_torch_files("2.13.0+cu126", "12.6")
    files["fake_config.json"] = json.dumps({"torch": {"import_error": "missing-library"}})
    return [build_wheel(wheels, "torch", "2.13.0+cu126", files=files),
            build_wheel(wheels, "torchvision", "0.28.0+cu126", requires=["torch==2.13.0"]),
            build_wheel(wheels, "torchaudio", "2.11.0+cu126", requires=["torch==2.13.0"])]


def test_force_whose_new_environment_fails_its_check_keeps_the_old_one(home: Home, torch_index: IndexServer,
                                                                     tmp_path: Path):
    """The replacement installs but its torch does not import: it replaces nothing (the report says why), and the
    old environment is there and runs as before."""
    assert home.envkit("create", *CU126, "--yes").returncode == 0
    prefix = home.prefix("torch-cu126")
    (prefix / "my-notes.txt").write_text("mine")
    old_run = home.record("torch-cu126")["run"]
    torch_index.add_index("/broken/whl/cu126", torch_that_does_not_import(tmp_path / "w"))
    home.write_config({"https://download.pytorch.org/whl": f"{torch_index.url}/broken/whl"})
    failed = home.envkit("create", *CU126, "--yes", "--force")
    assert failed.returncode == 1, failed.stderr
    assert "FAIL" in failed.stdout and "libcudnn.so.9" in failed.stdout  # the new one's report: why
    assert "failed its post-install check, so it replaced nothing" in failed.stderr and "Traceback" not in failed.stderr
    assert "Created" not in failed.stdout and "Replaced" not in failed.stdout
    assert (prefix / "my-notes.txt").read_text() == "mine" and home.record("torch-cu126")["run"] == old_run
    assert home.in_env("torch-cu126", VERSION).startswith("2.13.0+cu126")
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["torch-cu126"]  # nothing set aside is left
    [entry] = json.loads(home.envkit("envs", "--json").stdout)["environments"]
    assert entry["state"] == "ready" and entry["verify"]["ok"] is True


def test_force_replaces_it(home: Home, torch_index: IndexServer):
    assert home.envkit("create", *CU126, "--yes", "--no-verify").returncode == 0
    (home.prefix("torch-cu126") / "my-notes.txt").write_text("old")
    done = home.envkit("create", *CU126, "--yes", "--no-verify", "--force")
    assert done.returncode == 0, done.stderr
    assert not (home.prefix("torch-cu126") / "my-notes.txt").exists()
    assert "Replaced the environment" in done.stdout


def test_a_path_envkit_did_not_make_is_never_replaced(home: Home, torch_index: IndexServer, tmp_path: Path):
    mine = tmp_path / "project"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    done = home.envkit("create", *CU126, "--yes", "--prefix", str(mine), "--force")
    assert done.returncode == 1 and "something envkit did not make" in done.stderr
    assert (mine / "thesis.tex").read_text() == "precious"


def _wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _processes_mentioning(text: str) -> list[str]:
    out = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in args:
            out.append(args)
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupt_mid_install_removes_what_was_made(home: Home, torch_index: IndexServer, torch_wheels, sig):
    wheel = next(w for w in torch_wheels["cu126"] if w.name.startswith("torchvision"))
    torch_index.delay_file(wheel.name, 60)
    process = home.popen("create", *CU126, "--yes", "--no-verify")
    try:
        _wait_for(lambda: any(path.endswith(wheel.name) for path in torch_index.requests))
        assert home.prefix("torch-cu126").exists()
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + sig and "interrupted" in err  # 143 for SIGTERM, as shells count
    assert not home.prefix("torch-cu126").exists() and home.record("torch-cu126") is None
    assert _processes_mentioning(str(home.prefix("torch-cu126"))) == []  # the installer was stopped too


def test_two_creates_of_one_name_one_proceeds_the_other_is_told(home: Home, torch_index: IndexServer, torch_wheels):
    wheel = next(w for w in torch_wheels["cu126"] if w.name.startswith("torchaudio"))
    torch_index.delay_file(wheel.name, 2)
    first = home.popen("create", *CU126, "--yes", "--no-verify")
    try:
        _wait_for(lambda: home.prefix("torch-cu126").exists())
        second = home.envkit("create", *CU126, "--yes", "--no-verify")
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == 1 and "another envkit run is working on environment 'torch-cu126'" in second.stderr
    assert first.returncode == 0, err
    assert home.record("torch-cu126")["build"] == "torch-2.13-cu126"


def test_a_run_that_was_killed_is_cleaned_up_by_the_next(home: Home, torch_index: IndexServer, torch_wheels):
    wheel = next(w for w in torch_wheels["cu126"] if w.name.startswith("torchvision"))
    torch_index.delay_file(wheel.name, 5)
    process = home.popen("create", *CU126, "--yes", "--no-verify")
    _wait_for(lambda: any(path.endswith(wheel.name) for path in torch_index.requests))
    process.kill()  # SIGKILL: no chance to clean up
    process.communicate(timeout=30)
    _wait_for(lambda: not _processes_mentioning(f"--python {home.prefix('torch-cu126')}/bin/python"), timeout=30)
    assert home.prefix("torch-cu126").exists() and home.record("torch-cu126") is None  # debris
    torch_index.delay_file(wheel.name, 0)
    done = home.envkit("create", *CU126, "--yes", "--no-verify")
    assert done.returncode == 0, done.stderr
    assert "undid an envkit run of torch-cu126 that did not finish" in done.stderr


def test_a_dry_run_says_when_the_name_is_taken(home: Home, torch_index: IndexServer):
    assert home.envkit("create", *CU126, "--yes", "--no-verify").returncode == 0
    done = home.envkit("create", *CU126, "--dry-run")
    assert done.returncode == 0 and "Environment: torch-cu126" in done.stdout
    assert "the real run would stop here: environment 'torch-cu126' already exists" in done.stderr
    assert "would stop" not in home.envkit("create", *CU126, "--dry-run", "--force").stderr


def test_a_check_that_fails_keeps_the_environment_records_the_failure_and_exits_1(
        home: Home, pypi_server: IndexServer, tmp_path: Path):
    """The install worked but the framework does not import: the environment stays (it is what was asked for), the
    record says FAIL, the report says why, and the exit code tells a script."""
    pypi_server.add_index("/whl/cu126", torch_that_does_not_import(tmp_path / "w"))
    home.mirror_to(pypi_server)
    done = home.envkit("create", *CU126, "--yes")
    assert done.returncode == 1, done.stderr
    assert "FAIL" in done.stdout and "libcudnn.so.9" in done.stdout
    # The advice's commands name the machine create was told of (--machine), as pasted they would build for it.
    advised = re.findall(r"envkit create torch --build [^`\n]*", done.stdout)
    assert advised and all(f"--machine {PROFILES}" in command for command in advised), advised
    assert home.prefix("torch-cu126").is_dir()
    record = home.record("torch-cu126")
    assert record["verify"]["ok"] is False and record["verify"]["causes"]
    assert "FAIL" in home.envkit("envs").stdout


def test_nothing_is_written_outside_the_environment_and_the_user_dirs(home: Home, torch_index: IndexServer):
    before = {p for p in home.root.rglob("*")}
    assert home.envkit("create", *CU126, "--yes").returncode == 0
    written = [p.relative_to(home.root).parts for p in set(home.root.rglob("*")) - before]
    data, cache = (".local", "share", "envkit"), (".cache", "envkit")
    outside = [parts for parts in written if parts[:3] != data and parts[:2] != cache
               and parts not in (data[:1], data[:2], cache[:1])]
    assert written and outside == [], outside


def test_on_a_terminal_it_asks_first_and_no_creates_nothing(home: Home, torch_index: IndexServer):
    leader, follower = os.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "envkit", "create", *CU126], stdin=follower,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=home.env,
                                   cwd=home.root)
        os.write(leader, b"n\n")
        out, err = process.communicate(timeout=120)
    finally:
        os.close(leader)
        os.close(follower)
    assert process.returncode == 1 and "Create it?" in err and "nothing created" in err
    assert "Environment: torch-cu126" in out  # the plan was shown before the question
    assert not home.prefix("torch-cu126").exists() and torch_index.requests == []


def _kill_mid_install(home: Home, torch_index: IndexServer, torch_wheels, *args: str) -> None:
    """Start a create, SIGKILL it while uv downloads, and wait until its orphaned installer is gone too."""
    wheel = next(w for w in torch_wheels["cu126"] if w.name.startswith("torchvision"))
    torch_index.delay_file(wheel.name, 3)
    shutil.rmtree(Path(home.env["XDG_CACHE_HOME"]) / "envkit" / "uv", ignore_errors=True)  # so uv downloads again
    seen = len(torch_index.requests)
    process = home.popen("create", *CU126, "--yes", "--no-verify", *args)
    _wait_for(lambda: any(path.endswith(wheel.name) for path in torch_index.requests[seen:]))
    process.kill()
    process.communicate(timeout=30)
    _wait_for(lambda: not _processes_mentioning(f"--python {home.prefix('torch-cu126')}/bin/python"), timeout=30)
    torch_index.delay_file(wheel.name, 0)


def test_a_killed_force_run_gets_the_old_environment_back_on_the_next_run(home: Home, torch_index: IndexServer,
                                                                          torch_wheels):
    assert home.envkit("create", *CU126, "--yes", "--no-verify").returncode == 0
    prefix = home.prefix("torch-cu126")
    (prefix / "my-notes.txt").write_text("mine")
    _kill_mid_install(home, torch_index, torch_wheels, "--force")
    assert [p.name for p in prefix.parent.iterdir() if "envkit-replaced" in p.name]  # the old one, set aside
    again = home.envkit("create", *CU126, "--yes", "--no-verify")
    assert "undid an envkit run of torch-cu126" in again.stderr
    assert again.returncode == 1 and "already exists" in again.stderr  # the old one is back, so no --force: no
    assert (prefix / "my-notes.txt").read_text() == "mine"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["torch-cu126"]
    assert home.record("torch-cu126")["prefix"] == str(prefix)


def test_a_dead_runs_path_that_the_user_reused_is_never_deleted(home: Home, torch_index: IndexServer, torch_wheels):
    _kill_mid_install(home, torch_index, torch_wheels)
    prefix = home.prefix("torch-cu126")
    shutil.rmtree(prefix)  # the user cleans up by hand, then keeps their own files there
    prefix.mkdir()
    (prefix / "thesis.tex").write_text("precious")
    done = home.envkit("create", *CU126, "--yes", "--no-verify")
    assert done.returncode == 1 and "something envkit did not make" in done.stderr
    assert "cannot tell it from files of yours" in done.stderr
    assert (prefix / "thesis.tex").read_text() == "precious"


def test_force_over_a_stale_record_never_deletes_what_is_at_its_path_now(home: Home, torch_index: IndexServer):
    assert home.envkit("create", *CU126, "--yes", "--no-verify").returncode == 0
    prefix = home.prefix("torch-cu126")
    shutil.rmtree(prefix)  # deleted by hand; the index still names it
    prefix.mkdir()
    (prefix / "thesis.tex").write_text("precious")
    done = home.envkit("create", *CU126, "--yes", "--no-verify", "--force")
    assert done.returncode == 1 and "something envkit did not make" in done.stderr
    assert (prefix / "thesis.tex").read_text() == "precious"


def test_an_environment_deleted_by_hand_is_simply_made_again(home: Home, torch_index: IndexServer):
    assert home.envkit("create", *CU126, "--yes", "--no-verify").returncode == 0
    shutil.rmtree(home.prefix("torch-cu126"))
    done = home.envkit("create", *CU126, "--yes", "--no-verify")  # no --force needed: nothing to replace
    assert done.returncode == 0, done.stderr
    assert home.in_env("torch-cu126", VERSION).startswith("2.13.0+cu126")
