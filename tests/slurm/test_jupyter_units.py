"""The pure parts of `envkit jupyter` and `envkit shell`: the job script, the connection file, the srun line."""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

import pytest

from envkit.errors import BadInputError
from envkit.slurm.interactive import login_shell, shell_argv
from envkit.slurm.jupyter_job import (JupyterJob, read_connection, server_program, server_url, tunnel_command,
                                      jupyter_script)
from envkit.slurm.jupyter_server import new_directory, read_token
from envkit.slurm.script import JobSpec


def _job(**changes) -> JupyterJob:
    base = dict(directives=(("partition", "gpu"), ("job-name", "envkit-jupyter"), ("gpus-per-node", "2")),
                directory=Path("/home/u/it's here"), envkit=("/opt/py/bin/python", "-m", "envkit"), env="torch-a",
                server="jupyter-lab")
    base.update(changes)
    return JupyterJob(**base)


def test_the_script_reads_the_token_from_its_file_and_quotes_every_path():
    script = jupyter_script(_job())
    lines = script.splitlines()
    assert lines[:4] == ["#!/bin/bash", "#SBATCH --partition=gpu", "#SBATCH --job-name=envkit-jupyter",
                         "#SBATCH --gpus-per-node=2"]
    assert f"dir={shlex.quote('/home/u/it' + chr(39) + 's here')}" in lines
    assert 'IFS= read -r JUPYTER_TOKEN < "$dir/token" || exit 3' in lines and "export JUPYTER_TOKEN" in lines
    assert "umask 077" in lines and 'export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"' in lines
    assert "/opt/py/bin/python -m envkit verify torch-a --on-node > \"$dir/check.txt\" 2>&1" in lines
    start = next(line for line in lines if "jupyter-lab" in line)
    assert start.strip().startswith("/opt/py/bin/python -m envkit run torch-a -- jupyter-lab --no-browser")
    assert '--ip="$addr" --port="$port" --ServerApp.port_retries=0' in start and "--allow-root" not in start
    assert "--allow-root" in jupyter_script(_job(root=True))
    assert "verify" not in jupyter_script(_job(check=False))
    unchecked = jupyter_script(_job(unchecked=True)).splitlines()  # an image with --no-fit-check: the node skips it
    assert "/opt/py/bin/python -m envkit verify --no-fit-check torch-a --on-node > \"$dir/check.txt\" 2>&1" in unchecked
    assert any(line.strip().startswith("/opt/py/bin/python -m envkit run --no-fit-check torch-a -- jupyter-lab")
               for line in unchecked)
    assert jupyter_script(_job()) == script  # pure


def test_the_connection_file_is_read_only_when_whole():
    assert read_connection("gpu-a1 10.0.0.5 40123 2\n") == ("gpu-a1", "10.0.0.5", 40123, 2)
    for partial in ("", "gpu-a1 10.0.0.5", "gpu-a1 10.0.0.5 40123", "gpu-a1 10.0.0.5 x 1", "n a 70000 1"):
        assert read_connection(partial) is None


def test_url_and_tunnel():
    assert server_url("10.0.0.5", 8888, "t0k", lab=True) == "http://10.0.0.5:8888/lab?token=t0k"
    assert server_url("fe80::1", 8888, "t0k", lab=False) == "http://[fe80::1]:8888/?token=t0k"
    assert tunnel_command(8888, "10.0.0.5", "ana", "login1") == "ssh -N -L 8888:10.0.0.5:8888 ana@login1"


def test_server_program_prefers_jupyterlab(tmp_path: Path):
    (tmp_path / "bin").mkdir()
    assert server_program(tmp_path) is None
    (tmp_path / "bin" / "jupyter-server").touch()
    assert server_program(tmp_path) == "jupyter-server"
    (tmp_path / "bin" / "jupyter-lab").touch()
    assert server_program(tmp_path) == "jupyter-lab"


def test_the_token_file_is_the_owners_alone(tmp_path: Path):
    directory, token = new_directory(tmp_path / "jupyter")
    assert stat.S_IMODE((tmp_path / "jupyter").stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "token").stat().st_mode) == 0o600
    assert read_token(directory) == token and len(token) == 48
    other, second = new_directory(tmp_path / "jupyter")
    assert other != directory and second != token


def test_the_srun_line_asks_for_what_was_given_and_runs_the_shell_in_the_environment():
    spec = JobSpec(partition="gpu", command=(), activate=("/py", "-m", "envkit", "run", "t", "--"), gpus=2, cpus=4,
                   time="1:00:00", job_name="envkit-shell", node="n1")
    argv = shell_argv("/usr/bin/srun", spec, 30, "/bin/zsh")
    assert argv[:5] == ["/usr/bin/srun", "--pty", "--nodes=1", "--ntasks=1", "--immediate=30"]
    split = argv.index("--")
    assert set(argv[5:split]) == {"--partition=gpu", "--nodelist=n1", "--job-name=envkit-shell",
                                  "--gpus-per-node=2", "--cpus-per-task=4", "--time=1:00:00"}
    assert argv[split + 1:split + 3] == ["/bin/bash", "-c"]
    assert argv[split + 4:] == ["envkit-shell", "/py", "-m", "envkit", "run", "t", "--", "/bin/zsh"]


@pytest.mark.parametrize("field,value", [("partition", "-x"), ("time", "--pty"), ("node", "a b")])
def test_values_that_could_be_read_as_options_are_refused(field, value):
    fields = {"partition": "gpu", "command": (), "activate": (), "job_name": "envkit-shell", field: value}
    with pytest.raises(BadInputError):
        shell_argv("/usr/bin/srun", JobSpec(**fields), 30, "/bin/sh")


def test_login_shell_takes_an_absolute_path_only():
    assert login_shell(["/bin/zsh"]) == "/bin/zsh"
    assert login_shell(["zsh", ""]) == "/bin/bash"


def test_the_free_port_finder_runs_no_socket_py_of_the_directory_the_job_starts_in(tmp_path):
    """The job finds its port with `python -c`, which puts the working directory first on sys.path: a socket.py
    there (a user's, a planted one) must not run."""
    import subprocess
    import sys

    from envkit.slurm.jupyter_job import _FREE_PORT

    marker = tmp_path / "ran"
    (tmp_path / "socket.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit(7)\n")
    done = subprocess.run([sys.executable, "-c", _FREE_PORT, "127.0.0.1"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and 0 < int(done.stdout) < 65536 and not marker.exists(), done
