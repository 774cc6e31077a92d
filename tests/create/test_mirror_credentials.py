"""A mirror reached with credentials (``http://alice:PASSWORD@host/...``): every command that uses it works through
it, and the password is never shown (stdout, stderr), never in an argv (everyone's ``ps``), and never in a file that
others can read (envkit's cache, the lock's requirements file, the environment, its record)."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

from conftest import CONDA_FORGE, CU126, GTX1080TI, LEGACY_BUILD, LEGACY_CHANNEL, PROFILES, Home
from support.pypi_index import IndexServer

from envkit.text.redact import redact, split_credentials

PASSWORD = "s3cret-Pa55word"
RTX4090 = ("--machine", str(PROFILES / "rtx4090-cuda126.yaml"))


def test_redact_masks_passwords_and_tokens_in_any_text():
    assert redact("index: http://alice:pw@h:8/simple (x)") == "index: http://alice:***@h:8/simple (x)"
    assert redact("'https://TOKEN@h/x' and https://u:p@g/y") == "'https://***@h/x' and https://u:***@g/y"
    assert redact("mail alice@example.org, no URL") == "mail alice@example.org, no URL"
    assert split_credentials("http://a:b@h:1/p") == ("http://h:1/p", True)
    assert split_credentials("http://h/p") == ("http://h/p", False)


def run_watched(home: Home, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``envkit ARGS`` run to its end, and every argv `ps -eo args` showed while it ran."""
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.extend(subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines())
            done.wait(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = home.envkit(*args)
    finally:
        done.set()
        watcher.join()
    return result, seen


def assert_no_password(result: subprocess.CompletedProcess, argvs: list[str]) -> None:
    for where, text in (("stdout", result.stdout), ("stderr", result.stderr), ("ps", "\n".join(argvs))):
        assert PASSWORD not in text, (where, text)


def readable_files_with_the_password(root: Path, config: Path) -> list[str]:
    """The files under ``root`` holding the password that another user could read: the file's mode lets group or
    others read it, and every directory between it and ``root`` lets them through (``root`` itself counts as
    reachable: pytest's own directories are private to this user)."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path == config or path.is_symlink() or not path.is_file():
                continue
            if PASSWORD.encode() in path.read_bytes() and stat.S_IMODE(path.stat().st_mode) & 0o077 and \
                    all(parent.stat().st_mode & 0o011 for parent in path.parents if parent.is_relative_to(root)
                        and parent != root):
                found.append(str(path))
    return found


def test_a_mirror_with_credentials_works_and_its_password_never_leaks(home: Home, pypi_server: IndexServer,
                                                                       torch_wheels):
    pypi_server.add_index("/whl/cu126", torch_wheels["cu126"])
    pypi_server.add_index("/pypi/simple", torch_wheels["pypi"])
    pypi_server.require_credentials("alice", PASSWORD)
    base = pypi_server.url.replace("http://", f"http://alice:{PASSWORD}@")
    home.write_config({"https://download.pytorch.org/whl": f"{base}/whl", "https://pypi.org/simple": f"{base}/pypi/simple"})
    home.config.chmod(0o600)

    planned, argvs = run_watched(home, "create", *CU126, "--name", "t1", "--dry-run")
    assert planned.returncode == 0 and "http://alice:***@127.0.0.1:" in planned.stdout, planned.stderr
    assert "UV_INDEX_URL=http://alice:***@" in planned.stdout  # the command as it runs: the URL in uv's environment
    assert_no_password(planned, argvs)

    made, argvs = run_watched(home, "create", *CU126, "--name", "t1", "--yes")
    assert made.returncode == 0, made.stderr  # through the authenticated mirror: the credentials reached uv
    assert_no_password(made, argvs)
    assert home.in_env("t1", "import torch; print(torch.__version__)") == "2.13.0+cu126"

    lock = home.root / "t.lock.yml"
    locked, argvs = run_watched(home, "lock", *CU126, "-o", str(lock))
    assert locked.returncode == 0, locked.stderr
    assert_no_password(locked, argvs)
    from_lock, argvs = run_watched(home, "create", "--from-lock", str(lock), *RTX4090, "--name", "t2", "--yes")
    assert from_lock.returncode == 0, from_lock.stderr
    assert_no_password(from_lock, argvs)
    exported, argvs = run_watched(home, "export", "t1", "-o", str(home.root / "t1.lock.yml"))
    assert exported.returncode == 0, exported.stderr
    assert_no_password(exported, argvs)
    assert PASSWORD not in lock.read_text()

    # The mirror answers 404 (a build it does not have) and is down: the error names the mirror, not the password.
    home.write_config({"https://download.pytorch.org/whl": f"{base}/nothing",
                       "https://pypi.org/simple": f"{base}/pypi/simple"})
    missing, argvs = run_watched(home, "create", *CU126, "--name", "t3", "--yes")
    assert missing.returncode != 0 and "alice:***@" in missing.stderr, missing.stderr
    assert_no_password(missing, argvs)
    pypi_server.close()
    down, argvs = run_watched(home, "create", *CU126, "--name", "t4", "--yes")
    assert down.returncode == 1 and "alice:***@" in down.stderr, down.stderr
    assert_no_password(down, argvs)

    assert readable_files_with_the_password(home.root, home.config) == []


def test_a_conda_channel_mirror_with_credentials_never_reaches_conda_s_argv(home: Home, conda_manifests: Path):
    """conda, mamba and micromamba take channels only in their argv: with a credentialed channel mirror, `auto` makes
    the environment with the embedded engine instead, and `--backend conda` is refused."""

    conda = home.root / "bin" / "conda"  # a conda on PATH (never run for a dry run past this choice)
    conda.write_text("#!/bin/sh\necho '{\"envs_dirs\": []}'\n")
    conda.chmod(0o755)
    mirror = f"https://alice:{PASSWORD}@conda.cache.lab/legacy"
    home.write_config({LEGACY_CHANNEL: mirror, CONDA_FORGE: f"https://alice:{PASSWORD}@conda.cache.lab/forge"})
    args = ("create", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests), "--dry-run")
    planned = home.envkit(*args)
    assert planned.returncode == 0, planned.stderr
    assert "Backend:     rattler:" in planned.stdout and "carries credentials" in planned.stdout, planned.stdout
    assert PASSWORD not in planned.stdout + planned.stderr and str(conda) not in planned.stdout
    refused = home.envkit(*args, "--backend", "conda")
    assert refused.returncode == 2 and "--backend conda: the conda channel mirror https://alice:***@" in refused.stderr
    assert PASSWORD not in refused.stderr
    home.write_config({LEGACY_CHANNEL: "https://conda.cache.lab/legacy", CONDA_FORGE: "https://conda.cache.lab/forge"})
    plain = home.envkit(*args)  # without credentials, the user's conda as before
    assert plain.returncode == 0 and "Backend:     conda:" in plain.stdout, plain.stdout + plain.stderr


def test_the_embedded_engine_through_a_channel_mirror_with_credentials_keeps_no_readable_password(
        home: Home, legacy_channel: Path, conda_manifests: Path):
    """A real solve and install from a conda channel on 127.0.0.1 that demands basic auth: rattler's repodata cache,
    its package cache, the environment and its record hold the password nowhere that others can read."""
    import base64

    from support.http_servers import directory_handler, serving

    token = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    asked: list[tuple[str, bool]] = []
    with serving(directory_handler(legacy_channel, authorization=token, asked=asked)) as url:
        home.write_config({LEGACY_CHANNEL: url.replace("http://", f"http://alice:{PASSWORD}@")})
        home.config.chmod(0o600)
        made, argvs = run_watched(home, "create", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests),
                                  "--yes", "--no-verify")
    assert made.returncode == 0, made.stderr
    assert home.record("tensorflow-cu101")["backend"] == "rattler"
    assert asked and all(ok for _, ok in asked)  # every request carried them: the channel really demanded them
    assert_no_password(made, argvs)
    assert readable_files_with_the_password(home.root, home.config) == []
