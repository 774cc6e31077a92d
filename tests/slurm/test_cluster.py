"""The test cluster itself: a real Slurm whose nodes run the real nvidia-ml-py against the stand-in library."""

from __future__ import annotations

import json
import sys


def test_partitions_and_gres_are_what_the_tests_expect(slurm_site):
    done = slurm_site.cluster.query(["sinfo", "-h", "-o", "%P|%G|%N"])
    assert done.returncode == 0, done.stderr
    rows = {tuple(line.split("|")) for line in done.stdout.splitlines()}
    assert ("part-v", "gpu:v100:1", "gpu-v1") in rows
    assert ("part-a", "gpu:a100:2", "gpu-a[1-2]") in rows
    assert any(row[0] == "cpu" and row[1] == "(null)" for row in rows)


def test_a_job_on_a_node_sees_that_nodes_gpus_through_the_real_pynvml(slurm_site):
    code = ("import pynvml; pynvml.nvmlInit(); "
            "print(pynvml.nvmlDeviceGetCount(), pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)))")
    import subprocess

    done = subprocess.run(["srun", "-p", "part-v", "--gpus-per-node=1", sys.executable, "-c", code],
                          env=slurm_site.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1 Tesla V100-SXM2-16GB"


def test_outside_a_job_the_stand_in_has_no_driver(slurm_site):
    import subprocess

    done = subprocess.run([sys.executable, "-m", "envkit", "detect", "--json"], env=slurm_site.env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    profile = json.loads(done.stdout)
    assert profile["gpus"] == []
    assert any("Driver Not Loaded" in note or "driver not loaded" in note.lower() for note in profile["notes"])


def test_under_ci_a_missing_slurm_fails_instead_of_skipping():
    from support.slurm_cluster import slurm_required

    assert slurm_required({"CI": "true"}) and slurm_required({"ENVKIT_TEST_REQUIRE_SLURM": "1"})
    assert not slurm_required({}) and not slurm_required({"CI": "false"})


def test_the_ci_script_requires_slurm():
    from pathlib import Path

    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "export ENVKIT_TEST_REQUIRE_SLURM=1" in ci


def test_detect_inside_a_job_counts_the_gpus_the_job_was_given_and_says_so(slurm_site):
    import subprocess

    done = subprocess.run(["srun", "-p", "part-a", "-w", "gpu-a2", "--gpus-per-node=1", sys.executable, "-m",
                           "envkit", "detect", "--json"], env=slurm_site.env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    profile = json.loads(done.stdout)
    assert profile["name"] == "gpu-a2"
    assert [gpu["index"] for gpu in profile["gpus"]] == [0]  # NVML lists 2; the job was given one
    assert any("inside Slurm job" in note and "CUDA_VISIBLE_DEVICES=0" in note and "1 of the 2" in note
               for note in profile["notes"])
    text = subprocess.run(["srun", "-p", "part-a", "--gpus-per-node=1", sys.executable, "-m", "envkit", "detect"],
                          env=slurm_site.env, capture_output=True, text=True, timeout=60)
    assert text.returncode == 0 and "inside Slurm job" in text.stdout
