"""Bad input said in one line (exit 2), confirmation when nobody can be asked, the exit codes of signals and of a
bare `envkit`, progress printed once per step, and nothing written outside the directories the README lists."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CU126, PROFILES, Home
from support.pypi_index import IndexServer

RTX4090 = ("--machine", str(PROFILES / "rtx4090-cuda126.yaml"))


def _one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("envkit: error: ") and "Traceback" not in done.stderr
    assert "╭" not in done.stderr and "Usage:" not in done.stderr  # not typer's boxed usage
    assert len(done.stderr.strip().splitlines()) <= 2  # the error, and its next step
    for word in words:
        assert word in done.stderr, (word, done.stderr)


@pytest.mark.parametrize("args, words", [
    (("create", "torch", "--name", "", *RTX4090, "--dry-run"), ("--name is empty",)),
    (("create", "torch", "--prefix", "/", *RTX4090, "--dry-run"), ("--prefix /", "root directory")),
    (("create", "torch", "--gpu-arch", "0.0", "--cuda", "12.6", "--dry-run"), ("--gpu-arch 0.0",)),
    (("list", "torch", "--gpu-arch", "0.0", "--cuda", "12.6"), ("--gpu-arch 0.0",)),
    (("detect", "--timeout", "-1"), ("--timeout", "between 0.1 and 600")),
    (("detect", "--no-such-option"), ("--no-such-option",)),
    (("list", "torch", "--cuda", "１２.４", "--gpu-arch", "9.0"), ("--cuda", "is not a CUDA version")),
    (("list", "torch", "--cuda", "99999999999999999999.0", "--gpu-arch", "9.0"), ("is not a CUDA version",)),
    (("list", "torch", "--cuda", "12.8", "--gpu-arch", "99999999999.9"), ("is not a compute capability",)),
])
def test_bad_input_is_one_line_and_exit_2(home: Home, args, words):
    done = home.envkit(*args)
    _one_line_error(done, *words)
    assert not home.data.exists()


@pytest.mark.parametrize("where, words", [
    # empty, as on a first run: it was made into a venv
    (".local/share/envkit/envs", ("is envkit's environments directory (",)),
    (".local/share/envkit", ("is envkit's data directory (",)),
    (".local/share/envkit/records/x", ("is inside envkit's data directory (",)),
    (".local", ("is above envkit's data directory (",)),
    ("d" * 300 + "/env", ("File name too long", "shorter path")),  # was an internal error (OSError)
])
def test_a_prefix_in_or_above_envkits_own_directory_or_too_long_is_bad_input(home: Home, where: str, words):
    (home.data / "envs").mkdir(parents=True)
    done = home.envkit("create", "torch", "--name", "t", "--prefix", str(home.root / where), *RTX4090, "--dry-run")
    _one_line_error(done, *words)  # (the real run prepares its plan the same way, and stops there too)
    assert sorted(p.name for p in home.data.iterdir()) == ["envs"] and not any((home.data / "envs").iterdir())


def test_a_prefix_above_the_configs_environments_directory_names_that_directory(home: Home):
    # It said "is envkit's own directory (~/.local/share/envkit), inside it or above it": none of them was.
    envs = home.root / "big" / "envs"
    home.write_config({}, envs_dir=str(envs))
    done = home.envkit("create", "torch", "--name", "t", "--prefix", str(home.root / "big"), *RTX4090, "--dry-run")
    _one_line_error(done, f"--prefix {home.root / 'big'} is above envkit's environments directory ({envs})",
                    f"--prefix {envs / 'NAME'}")


@pytest.mark.parametrize("field, value", [("cuda_driver", "١٢.٤"), ("cuda_driver", "99999999999999999999999.4"),
                                          ("compute_capability", "８.0"),
                                          ("compute_capability", "999999999999999999999.0")])
def test_a_profile_with_unicode_digits_or_absurd_numbers_is_bad_input(home: Home, field, value):
    profile = home.root / "profile.yaml"
    text = (PROFILES / "h100-cuda128.yaml").read_text()
    old = '"12.8"' if field == "cuda_driver" else '"9.0"'
    profile.write_text(text.replace(f'{field}: {old}', f'{field}: "{value}"'), encoding="utf-8")
    _one_line_error(home.envkit("list", "torch", "--machine", str(profile)), field, repr(value))


@pytest.mark.parametrize("value", ["--foo", "12.4."])
def test_a_cuda_override_that_is_not_a_version_is_bad_input_before_any_solve(home: Home, value):
    args = ("tensorflow", "--build", "tensorflow-2.4.1-cu101", "--cuda", "11.0", "--gpu-arch", "7.0")
    (home.root / "no-channel").mkdir()  # were the override let through, the solve would stop here, offline
    home.write_config({"https://repo.anaconda.com/pkgs/main": (home.root / "no-channel").as_uri()})
    for command in (("create", *args, "--backend", "rattler", "--dry-run"), ("lock", *args, "-o", "x.lock.yml")):
        done = home.envkit(*command, env={"CONDA_OVERRIDE_CUDA": value})
        _one_line_error(done, f"CONDA_OVERRIDE_CUDA={value!r}", "is not a CUDA version")
    assert not (home.root / "x.lock.yml").exists()


def test_an_empty_manifests_variable_is_an_error_as_an_empty_config_variable_is(home: Home):
    for variable in ("ENVKIT_MANIFESTS", "ENVKIT_CONFIG"):
        done = home.envkit("create", "torch", *RTX4090, "--dry-run", env={variable: ""})
        _one_line_error(done, f"${variable} is empty")


def test_bare_envkit_prints_the_help_and_exits_2_as_a_usage_error(home: Home):
    done = home.envkit()
    assert done.returncode == 2 and "Usage: envkit" in done.stdout and "create" in done.stdout
    assert home.envkit("--help").returncode == 0


def test_force_without_a_terminal_needs_yes_and_replaces_nothing(home: Home, torch_index: IndexServer):
    assert home.envkit("create", *CU126, "--yes", "--no-verify").returncode == 0
    before = home.record("torch-cu126")
    done = home.envkit("create", *CU126, "--no-verify", "--force")  # stdin is not a terminal
    _one_line_error(done, "not replacing torch-cu126 without confirmation", "--yes")
    assert home.record("torch-cu126") == before
    assert sorted(p.name for p in home.prefix("torch-cu126").parent.iterdir()) == ["torch-cu126"]
    assert home.envkit("create", *CU126, "--yes", "--no-verify", "--force").returncode == 0
    assert home.record("torch-cu126")["run"] != before["run"]


def test_sigterm_cleans_up_and_exits_143(home: Home, torch_index: IndexServer, tmp_path: Path):
    marker = tmp_path / "paused"
    process = subprocess.Popen([sys.executable, "-m", "envkit", "create", *CU126, "--yes"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=home.root,
                               env={**home.env, "ENVKIT_TEST_PAUSE_AT": "stamped", "ENVKIT_TEST_PAUSE_FILE": str(marker)})
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 143 and "envkit: interrupted (SIGTERM)" in err
    assert not home.prefix("torch-cu126").exists() and home.record("torch-cu126") is None


def _written_outside_envkit(home: Home, before: set[Path]) -> list[tuple[str, ...]]:
    written = [p.relative_to(home.root).parts for p in set(home.root.rglob("*")) - before]
    data, cache = (".local", "share", "envkit"), (".cache", "envkit")
    return [parts for parts in written if parts[:3] != data and parts[:2] != cache
            and parts not in (data[:1], data[:2], cache[:1])]


def test_a_dry_run_writes_no_environment_data_and_nothing_outside_envkits_cache(home: Home, torch_index: IndexServer):
    other_python = "3.12" if sys.version_info[:2] != (3, 12) else "3.11"  # not envkit's own: uv looks for it
    before = set(home.root.rglob("*"))
    done = home.envkit("create", "torch", "--build", "torch-2.13-cu126", "--python", other_python, *RTX4090,
                       "--dry-run")
    assert done.returncode in (0, 2), done.stderr  # 2: that Python is not published/there; either way, nothing written
    assert _written_outside_envkit(home, before) == []
    assert not home.data.exists()  # no environment, record, lock or journal
    assert not (home.root / ".cache" / "uv").exists()


def test_a_run_whose_index_fails_leaves_no_uv_files_outside_envkits_dirs(home: Home, pypi_server: IndexServer):
    home.mirror_to(pypi_server)  # serves nothing under /whl/cu126: every page is a 404
    before = set(home.root.rglob("*"))
    done = home.envkit("create", *CU126, "--yes")
    assert done.returncode == 1, done.stderr
    assert _written_outside_envkit(home, before) == []
    assert not (home.root / ".local" / "share" / "uv").exists() and not (home.root / ".cache" / "uv").exists()


def test_on_a_terminal_each_step_is_printed_once_and_updated_in_place(home: Home, torch_index: IndexServer):
    leader, follower = os.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "envkit", "create", *CU126, "--yes", "--no-verify"],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower, cwd=home.root,
                                   env={**home.env, "COLUMNS": "200"})
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=120)
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert process.returncode == 0, text
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if "[1/2] Creating the environment" in line]
    assert len(lines) == 1, lines  # one line per step: "... ..." rewritten as "...: done in 0.1s"
    assert "\r" in lines[0] and lines[0].rstrip().endswith("s") and "done in" in lines[0]
