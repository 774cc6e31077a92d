"""`envkit run ENV -- CMD`: a command that cannot be run is said for what it is (a directory, a file that is not
executable, a script that is no program), exit 2, as a missing command is; one that can runs with its exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.state import records
from envkit.state.userdirs import user_dirs


class Here:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("ENVKIT_") and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
        self.env.update({"HOME": str(root), "XDG_DATA_HOME": str(root / "data"), "XDG_CACHE_HOME": str(root / "cache"),
                         "XDG_CONFIG_HOME": str(root / "config"), "ENVKIT_CONFIG": str(root / "envkit.yaml")})
        (root / "envkit.yaml").write_text("# nothing\n", encoding="utf-8")
        self.prefix = root / "envs" / "fake"
        (self.prefix / "bin").mkdir(parents=True)
        record = records.Record(name="fake", prefix=str(self.prefix), kind="venv", backend="venv", manifest="torch",
                                build="torch-2.15-cpu", python="3.12", created="2025-01-01T00:00:00Z", machine={},
                                on_target=True)
        records.save(record, user_dirs(self.env).records)

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envkit", "run", "fake", "--", *argv], capture_output=True,
                              text=True, env=self.env, cwd=self.root, timeout=60)


@pytest.fixture
def here(tmp_path: Path) -> Here:
    return Here(tmp_path)


def refused(done: subprocess.CompletedProcess, message: str) -> str:
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert done.stderr.startswith(f"envkit: error: {message}\n"), done.stderr
    return done.stderr


def test_a_directory_is_not_a_command(here: Here):
    (here.root / "adir").mkdir()
    refused(here.run("./adir"), "./adir is a directory, not a command")
    refused(here.run(str(here.root / "adir")), f"{here.root / 'adir'} is a directory, not a command")


def test_a_file_without_the_execute_bit_is_not_executable_and_says_how_to_run_it(here: Here):
    (here.root / "job.sh").write_text("echo hi\n", encoding="utf-8")
    said = refused(here.run("./job.sh", "--epochs", "3"), "./job.sh is not executable")
    assert "chmod +x ./job.sh" in said and "envkit run fake -- bash ./job.sh" in said


def test_a_path_to_nothing_is_no_such_file_not_no_such_command_on_path(here: Here):
    refused(here.run("./nope"), "./nope: no such file")
    os.symlink(here.root / "gone", here.root / "dangling")
    refused(here.run("./dangling"), "./dangling: no such file (a symbolic link to nothing)")


def test_a_name_found_only_unusable_on_path_says_what_it_found(here: Here):
    tool = here.prefix / "bin" / "mytool-xyz"
    tool.write_text("#!/bin/sh\necho hi\n", encoding="utf-8")
    refused(here.run("mytool-xyz"), f"mytool-xyz: no such command in fake or on PATH ({tool} is not executable)")
    refused(here.run("no-such-command-xyz"), "no-such-command-xyz: no such command in fake or on PATH")
    tool.chmod(0o755)  # once it can run, it runs in the environment, with its exit code
    tool.write_text('#!/bin/sh\necho "$VIRTUAL_ENV"\nexit 7\n', encoding="utf-8")
    done = here.run("mytool-xyz")
    assert done.returncode == 7 and done.stdout.strip() == str(here.prefix), done


def test_an_executable_that_is_no_program_is_said_not_an_internal_error(here: Here):
    script = here.root / "noshebang"
    script.write_bytes(b"\x00\x01\x02 not a program\n")
    script.chmod(0o755)
    said = refused(here.run("./noshebang"), "./noshebang cannot be run: Exec format error")
    assert "#! line" in said



def test_an_environment_without_its_bin_is_not_said_gone_and_the_advice_pastes(here: Here):
    (here.prefix / "bin").rmdir()  # the directory, and its record, are still there: `remove` deletes, not forgets
    done = subprocess.run([sys.executable, "-m", "envkit", "run", "fake", "--", "python", "-V"], capture_output=True,
                          text=True, env=here.env, cwd=here.root, timeout=60)
    assert done.returncode == 1 and "is gone" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"envkit: error: no environment at {here.prefix} ({here.prefix / 'bin'} does not "
                                  "exist)\n"), done.stderr
    # where it is (this one is not in envkit's default place: without --prefix the new one would go there)
    assert (f"`envkit create torch --build torch-2.15-cpu --name fake --prefix {here.prefix} --python 3.12 --force` "
            "makes it again, or `envkit remove fake --yes` deletes it.") in done.stderr


def test_an_option_after_env_is_the_command_and_the_error_says_so(here: Here):
    said = refused(here.run("-h"), "-h: no such command in fake or on PATH")
    assert "Everything after ENV is the command to run; `envkit run --help` shows what run itself takes." in said


def test_the_environment_active_now_is_left_first_as_activating_does():
    from envkit.system.activation import activated_environ

    venv = {"PATH": "/work/other/bin:/usr/bin", "VIRTUAL_ENV": "/work/other"}  # its tools stood in for this one's
    assert activated_environ(Path("/envs/t"), "venv", "t", venv)["PATH"] == "/envs/t/bin:/usr/bin"
    conda = {"PATH": "/opt/conda/envs/a/bin/:/opt/conda/condabin:/usr/bin", "CONDA_PREFIX": "/opt/conda/envs/a"}
    assert activated_environ(Path("/envs/t"), "conda", "t", conda)["PATH"] == "/envs/t/bin:/opt/conda/condabin:/usr/bin"
    # Another kind's stays on PATH, as bin/activate keeps a conda environment's and conda activate a venv's.
    assert activated_environ(Path("/envs/t"), "venv", "t", conda)["PATH"] == (
        "/envs/t/bin:/opt/conda/envs/a/bin/:/opt/conda/condabin:/usr/bin")
