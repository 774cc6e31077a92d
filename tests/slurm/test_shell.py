"""envkit shell on the test cluster, driven through a pseudo-terminal: srun --pty gives a shell on a node with the
environment activated; a command runs inside it and leaving the shell ends the job."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys

from slurm_helpers import envkit

SHOW = "python -c \"import os, sys; print('IN', sys.prefix, 'OMP', os.environ['OMP_NUM_THREADS'])\""


def drive(argv: list[str], env: dict[str, str], lines: list[str], limit: float = 120.0) -> tuple[int, str]:
    """Run ``argv`` on a new pseudo-terminal, type ``lines`` into it, read all it prints; (exit status, text)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(argv, env=env, stdin=follower, stdout=follower, stderr=follower, start_new_session=True)
    os.close(follower)
    os.write(leader, "".join(line + "\n" for line in lines).encode())
    out = b""
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], limit)
            if not ready:
                raise AssertionError(f"no output for {limit} s: {out.decode(errors='replace')}")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not chunk:
                break
            out += chunk
        return process.wait(timeout=limit), out.decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)


def test_shell_runs_a_command_in_the_activated_environment_on_a_node_and_exit_ends_the_job(slurm_site, cluster_user):
    env, home = cluster_user
    argv = [sys.executable, "-m", "envkit", "shell", "torch-test", "-p", "part-a:gpu-a1", "--gpus", "1", "--cpus",
            "2", "--time", "5"]
    code, text = drive(argv, {**env, "SHELL": "/bin/sh"}, [SHOW, "exit"])
    assert code == 0, text
    assert f"IN {home / 'envs' / 'torch-test'} OMP 2" in text
    assert "envkit: job " in text and " on node gpu-a1, GPUs: 0;" in text  # the node named, one GPU
    assert slurm_site.cluster.jobs() == []


def test_shell_is_refused_with_reasons_where_the_build_does_not_run_and_for_bad_values(slurm_site, cluster_user):
    env, _ = cluster_user
    done = envkit("shell", "torch-test", "-p", "part-v", env=env)
    assert done.returncode == 1 and "would not run on partition part-v" in done.stderr, done.stderr
    done = envkit("shell", "torch-test", "-p", "part-a", "--time", "soon", env=env)
    assert done.returncode == 2 and "--time 'soon' is not a time limit" in done.stderr, done.stderr
    assert slurm_site.cluster.jobs() == []


def test_a_shell_whose_job_cannot_start_within_the_timeout_is_withdrawn(slurm_site, cluster_user, tmp_path):
    env, _ = cluster_user
    hold = slurm_site.cluster.query(["sbatch", "--parsable", "-p", "part-a", "-N", "2", "--exclusive",
                                     f"--chdir={tmp_path}", "--wrap", "sleep 300"])
    assert hold.returncode == 0, hold.stderr
    held = hold.stdout.strip().split(";")[0]
    try:
        argv = [sys.executable, "-m", "envkit", "shell", "torch-test", "-p", "part-a", "--gpus", "1", "--timeout",
                "2"]
        code, text = drive(argv, {**env, "SHELL": "/bin/sh"}, [])
        assert code != 0, text
        assert "waiting at most 2 s for it to start" in text and "Traceback" not in text
        assert "srun: error: Unable to allocate resources" in text  # Slurm's own word on it
        assert slurm_site.cluster.jobs() == [held]
    finally:
        slurm_site.cluster.query(["scancel", held])
