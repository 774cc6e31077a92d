"""SIGTERM, SIGHUP and Ctrl-C to the commands that start jobs, while their job is pending on the real test cluster:
each cancels its job, stops its srun (whichever thread started it: the survey's are in threads of their own),
removes its temporary files, writes nothing half-made, and exits 128 + N, as create and jupyter do."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Mapping

import pytest

from support.processes import naming, reaped


@contextlib.contextmanager
def busy(slurm_site, node: str, gpus: int) -> Iterator[str]:
    """A job holding ``gpus`` GPUs of ``node`` for the block: a job that needs them stays pending."""
    held = slurm_site.cluster.query(["sbatch", "--parsable", "-p", "mixed", "-w", node, f"--gpus-per-node={gpus}",
                                     "-o", "/dev/null", "--wrap", "sleep 300"])
    assert held.returncode == 0, held.stderr
    job = held.stdout.strip()
    try:
        deadline = time.monotonic() + 60
        while _state(slurm_site, job) != "R" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _state(slurm_site, job) == "R"
        yield job
    finally:
        slurm_site.cluster.query(["scancel", job])


def _state(slurm_site, job: str) -> str:
    return slurm_site.cluster.query(["squeue", "-h", "-j", job, "-o", "%t"]).stdout.strip()


def _pending_job(slurm_site, but: tuple[str, ...] = ()) -> tuple[str, str]:
    """(id, name) of the one job waiting in the queue, other than ``but``; waits until there is one."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = slurm_site.cluster.query(["squeue", "-h", "-t", "PENDING", "-o", "%i %j"]).stdout.split("\n")
        found = [row.split() for row in rows if row.strip() and row.split()[0] not in but]
        if found:
            [(job, name)] = found
            return job, name
        time.sleep(0.1)
    raise AssertionError("no job of envkit's came to wait in the queue")


def _signalled(args: list[str], env: Mapping[str, str], cwd: Path, signum: int, slurm_site,
               but: tuple[str, ...] = ()) -> tuple[int, str, str]:
    """Start envkit with ``args``, wait until its job is pending, send ``signum``: (exit status, stderr, job name)."""
    with reaped(subprocess.Popen([sys.executable, "-m", "envkit", *args], env=dict(env), cwd=cwd,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) as process:
        _, name = _pending_job(slurm_site, but)
        assert naming(f"--job-name={name}")  # its srun, waiting for the job to start
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    return process.returncode, err, name


def _beside(path: Path) -> list[str]:
    """The files named after ``path`` in its directory (the file, its lock, a temporary copy being written)."""
    return sorted(p.name for p in path.parent.iterdir() if path.name in p.name)


def _scratch(tmp_path: Path, env: Mapping[str, str]) -> dict[str, str]:
    (tmp_path / "tmp").mkdir()
    return {**env, "TMPDIR": str(tmp_path / "tmp")}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_verify_on_a_partition_cancels_its_pending_job_on_a_signal(slurm_site, cluster_user, tmp_path, signum):
    env, _ = cluster_user
    env = _scratch(tmp_path, env)
    status, err, name = _signalled(["verify", "torch-test", "-p", "closed", "--queue-timeout", "120"], env, tmp_path,
                                   signum, slurm_site)
    assert status == 128 + signum, err
    assert "envkit: interrupted" in err and "Traceback" not in err
    assert slurm_site.cluster.jobs() == []
    assert naming(f"--job-name={name}") == []  # srun is gone
    assert list((tmp_path / "tmp").iterdir()) == []


def test_verify_across_two_nodes_cancels_its_pending_job_on_sighup(slurm_site, cluster_user, tmp_path):
    env, _ = cluster_user
    env = _scratch(tmp_path, env)
    with busy(slurm_site, "gpu-a2", 2) as holder:
        status, err, name = _signalled(["verify", "torch-test", "-p", "part-a", "--nodes", "2", "--queue-timeout",
                                        "120"], env, tmp_path, signal.SIGHUP, slurm_site, but=(holder,))
        assert status == 128 + signal.SIGHUP, err
        assert "envkit: interrupted (SIGHUP)" in err and "Traceback" not in err
        assert slurm_site.cluster.jobs() == [holder]  # the check's job is gone
    assert naming(f"--job-name={name}") == []
    assert list((tmp_path / "tmp").iterdir()) == []


def test_survey_cancels_the_pending_jobs_of_its_threads_on_sigterm_and_writes_nothing(slurm_site, cluster_user,
                                                                                    tmp_path):
    env, _ = cluster_user
    env = _scratch(tmp_path, env)
    site_file = Path(env["ENVKIT_SITE"])
    before, beside = site_file.read_bytes(), _beside(site_file)
    with busy(slurm_site, "gpu-v1", 1) as holder:
        status, err, name = _signalled(["survey", "--partition", "part-v", "--timeout", "120"], env, tmp_path,
                                       signal.SIGTERM, slurm_site, but=(holder,))
        assert status == 128 + signal.SIGTERM, err
        assert "envkit: interrupted (SIGTERM)" in err and "Traceback" not in err
        assert slurm_site.cluster.jobs() == [holder]
    assert naming(f"--job-name={name}") == []
    assert site_file.read_bytes() == before  # nothing half-written
    assert _beside(site_file) == beside  # no temporary file of its writing left either
    assert list((tmp_path / "tmp").iterdir()) == []


def test_verify_stops_a_slurm_query_that_does_not_answer_on_sigterm(slurm_site, cluster_user, tmp_path):
    """Before any job: sinfo itself does not answer (a stand-in that sleeps); it is stopped, not left running."""
    env, _ = cluster_user
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text(f"#!/bin/sh\necho $$ > {tmp_path}/sinfo.pid\nexec sleep 60\n")
    (bin_dir / "sinfo").chmod(0o755)
    env = {**_scratch(tmp_path, env), "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}
    with reaped(subprocess.Popen([sys.executable, "-m", "envkit", "verify", "torch-test", "-p", "part-a"], env=env,
                                 cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) as process:
        deadline = time.monotonic() + 60
        while not (tmp_path / "sinfo.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "sinfo.pid").read_text()), 0)
