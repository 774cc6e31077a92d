"""envkit survey on the real test cluster: sinfo finds the GPU partitions, srun runs envkit detect on the nodes."""

from __future__ import annotations

import subprocess
import sys
import time

import yaml
from slurm_helpers import envkit, user_env

from envkit.site import load_site
from envkit.slurm.client import Slurm
from envkit.slurm.survey import gpu_partitions, survey


def test_survey_writes_every_gpu_partition_from_its_nodes(slurm_site, tmp_path):
    env = user_env(slurm_site, tmp_path)
    done = envkit("survey", "--timeout", "20", env=env)
    # The DOWN partition cannot be surveyed: said; a partition that is down is routine on a real cluster, and the
    # others were surveyed: exit 0 (it was 1). Only a survey that reached nothing is a failure.
    assert done.returncode == 0, done.stderr
    assert "closed: NOT surveyed: partition is down" in done.stdout
    assert "no partition could be surveyed" not in done.stderr
    site = load_site(tmp_path / "site.yaml")
    assert set(site.partitions) == {"part-a", "part-v", "mixed", "part-amd", "closed"}  # cpu has no GRES gpu
    [a_node] = site.partitions["part-a"].nodes
    assert (a_node.node, a_node.count) == ("gpu-a1", 2)
    assert a_node.members == ("gpu-a1", "gpu-a2")  # what P:NODE takes: gpu-a2 too, merged into gpu-a1's entry
    assert [g.name for g in a_node.profile.gpus] == ["NVIDIA A100-SXM4-40GB"] * 2
    assert str(a_node.profile.cuda_driver) == "12.2" and str(a_node.profile.driver_version) == "535.129.03"
    raw = yaml.safe_load((tmp_path / "site.yaml").read_text())["partitions"]["part-a"]["nodes"][0]["profile"]
    assert any("inside Slurm job" in note and "gpu-a1" in note for note in raw["notes"])  # the node said so
    # Each node's C library, as the node's own `envkit detect` read it (issue 46), kept in the site file.
    assert raw["libc"].startswith("glibc 2.") and a_node.profile.libc == raw["libc"]
    [v_node] = site.partitions["part-v"].nodes
    assert [str(g.compute_capability) for g in v_node.profile.gpus] == ["7.0"]
    assert str(v_node.profile.cuda_driver) == "11.4"
    mixed = site.partitions["mixed"]
    assert sorted((n.node, n.count) for n in mixed.nodes) == [("gpu-a1", 2), ("gpu-v1", 1)]
    assert site.partitions["closed"].error == "partition is down" and not site.partitions["closed"].nodes
    for name in ("part-a", "part-v", "mixed"):
        assert site.partitions[name].surveyed is not None
        assert f"{name}: detecting" in done.stderr  # progress per partition
    down = envkit("survey", "--partition", "closed", "--json", env=env)
    assert down.returncode == 1, down.stderr
    assert "envkit: no partition could be surveyed" in down.stderr
    assert [(p["name"], p["ok"], p["error"]) for p in yaml.safe_load(down.stdout)["partitions"]] == [
        ("closed", False, "partition is down")]


def test_all_nodes_detects_each_node(slurm_site, tmp_path):
    env = user_env(slurm_site, tmp_path)
    done = envkit("survey", "--partition", "part-a", "--all-nodes", "--json", env=env)
    assert done.returncode == 0, done.stderr
    [entry] = yaml.safe_load(done.stdout)["partitions"]
    assert [(n["node"], n["count"]) for n in entry["nodes"]] == [("gpu-a1", 1), ("gpu-a2", 1)]
    assert [n.node for n in load_site(tmp_path / "site.yaml").partitions["part-a"].nodes] == ["gpu-a1", "gpu-a2"]


def test_all_nodes_counts_nodes_and_names_the_ones_not_reached(slurm_site, tmp_path):
    # With --all-nodes it said "2 node configuration(s) surveyed" for two nodes of one configuration, and nothing
    # on stdout about a node it could not reach.
    env = user_env(slurm_site, tmp_path)
    blocker = subprocess.run(["sbatch", "--parsable", "-p", "part-a", "--nodelist=gpu-a2", "--gpus-per-node=2",
                              "-J", "blocker", "--output=/dev/null", "--wrap", "sleep 120"], env=slurm_site.env,
                             capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert blocker.returncode == 0, blocker.stderr
    job = blocker.stdout.strip()
    try:
        _wait_running(slurm_site, job)
        done = envkit("survey", "--partition", "part-a", "--all-nodes", "--timeout", "2", env=env)
        assert done.returncode == 0, done.stderr
        assert "part-a: 1 node(s) surveyed; not reached: gpu-a2 (`envkit site` says why)" in done.stdout
        assert "part-a: done: 1 node(s), 1 not reached" in done.stderr
        assert slurm_site.cluster.jobs() == [job]
    finally:
        slurm_site.cluster.query(["scancel", job])


def test_an_unknown_partition_is_exit_2_naming_those_there_are(slurm_site, tmp_path):
    done = envkit("survey", "--partition", "nosuch", env=user_env(slurm_site, tmp_path))
    assert done.returncode == 2
    assert "no partition named 'nosuch'" in done.stderr and "part-a" in done.stderr and "mixed" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "site.yaml").exists()


def test_a_partition_without_gpus_is_exit_2(slurm_site, tmp_path):
    done = envkit("survey", "--partition", "cpu", env=user_env(slurm_site, tmp_path))
    assert done.returncode == 2 and "has no GPU nodes" in done.stderr


def test_without_slurm_on_path_survey_says_so(slurm_site, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    done = envkit("survey", env=user_env(slurm_site, tmp_path, PATH=str(empty)))
    assert done.returncode == 1
    assert "not a Slurm cluster" in done.stderr and "Traceback" not in done.stderr


HAND_WRITTEN = {"version": 1, "partitions": {"part-v": {"nodes": [{"node": "gpu-v1", "count": 1, "profile": {
    "name": "by-hand", "cuda_driver": "12.0", "gpus": [{"name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}],
}}]}}}


def test_a_job_that_does_not_start_in_time_is_cancelled_and_the_partition_left_as_it_was(slurm_site, tmp_path):
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(HAND_WRITTEN))
    before = load_site(tmp_path / "site.yaml").partitions["part-v"]
    env = user_env(slurm_site, tmp_path)
    # Another user's job holds gpu-v1's only GPU.
    blocker = subprocess.run(["sbatch", "--parsable", "-p", "part-v", "--gpus-per-node=1", "-J", "blocker",
                              "--output=/dev/null", "--wrap", "sleep 120"], env=slurm_site.env, capture_output=True,
                             text=True, timeout=30, cwd=tmp_path)
    assert blocker.returncode == 0, blocker.stderr
    job = blocker.stdout.strip()
    try:
        _wait_running(slurm_site, job)
        started = time.monotonic()
        done = envkit("survey", "--partition", "part-v", "--timeout", "2", env=env)
        elapsed = time.monotonic() - started
        assert done.returncode == 1
        assert "part-v: NOT surveyed" in done.stdout
        assert "timeout: the job did not start within 2 s (cancelled)" in done.stdout
        assert "Requested nodes are busy" in done.stdout  # Slurm's own words
        assert elapsed < 30
        assert slurm_site.cluster.jobs() == [job]  # nothing of the survey's left queued
        assert load_site(tmp_path / "site.yaml").partitions["part-v"] == before
    finally:
        slurm_site.cluster.query(["scancel", job])


def _wait_running(slurm_site, job: str) -> None:
    for _ in range(100):
        state = slurm_site.cluster.query(["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip()
        if state == "RUNNING":
            return
        time.sleep(0.1)
    raise AssertionError(f"job {job} did not start: {state}")


def test_a_node_that_cannot_run_envkit_is_reported_with_what_to_do(slurm_site):
    slurm = Slurm(slurm_site.env)
    chosen = gpu_partitions(slurm, ["part-v"])
    [outcome] = survey(slurm, chosen, all_nodes=False, timeout=20,
                       node_argv=["/nonexistent/venv/bin/python", "-m", "envkit", "detect", "--json"])
    assert outcome.partition is None
    [(node, reason)] = outcome.unreachable
    assert node == "gpu-v1"
    assert "cannot run envkit" in reason and "/nonexistent/venv/bin/python" in reason


def test_a_node_where_envkit_fails_keeps_the_programs_words(slurm_site):
    slurm = Slurm(slurm_site.env)
    chosen = gpu_partitions(slurm, ["part-v"])
    [outcome] = survey(slurm, chosen, all_nodes=False, timeout=20,
                       node_argv=[sys.executable, "-c", "import sys; sys.exit('detector exploded')"])
    assert outcome.error is not None and "detector exploded" in outcome.error


def test_a_controller_that_does_not_answer_is_a_clear_error_not_a_hang(slurm_site, tmp_path):
    import re

    from envkit.slurm.client import SlurmError

    conf = slurm_site.cluster.conf.read_text()
    dead = tmp_path / "slurm.conf"  # the same cluster, but slurmctld's port has nothing listening
    dead.write_text(re.sub(r"SlurmctldPort=\d+", "SlurmctldPort=9", conf))
    slurm = Slurm({**slurm_site.env, "SLURM_CONF": str(dead)}, query_timeout=3)
    started = time.monotonic()
    try:
        gpu_partitions(slurm)
    except SlurmError as error:
        assert "sinfo" in error.message
    else:
        raise AssertionError("sinfo answered without a controller")
    assert time.monotonic() - started < 20


def test_a_partition_name_that_could_read_as_an_option_is_bad_input_before_sinfo_runs(tmp_path):
    # Slurm is not reachable here (an empty slurm.conf): the name is judged first, exit 2, not sinfo's failure (1).
    (tmp_path / "slurm.conf").write_text("")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "SLURM_CONF": str(tmp_path / "slurm.conf")}
    for name in ("-x", "", "a b", "--all"):
        done = envkit("survey", "--partition", name, env=env)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("envkit: error: --partition") and "Traceback" not in done.stderr


def test_a_queue_time_limit_that_is_not_a_finite_number_of_seconds_is_bad_input(tmp_path):
    # nan passed typer's min/max range check and reached int() in srun's --immediate: a crash on a real cluster.
    (tmp_path / "slurm.conf").write_text("")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "SLURM_CONF": str(tmp_path / "slurm.conf")}
    for value in ("nan", "inf", "0"):
        for args in (("survey", "--timeout", value), ("verify", "x", "--partition", "p", "--queue-timeout", value)):
            done = envkit(*args, env=env)
            assert done.returncode == 2 and "give seconds between 1 and 86400" in done.stderr, (args, done.stderr)


def test_what_a_node_said_when_surveyed_is_shown_by_site(slurm_site, tmp_path):
    # The survey writes what each node said about itself (its job's GPUs) into the site file; reading the file
    # dropped it: `envkit site --json` showed "notes": [] and `envkit site` nothing.
    import json
    import re

    env = user_env(slurm_site, tmp_path)
    done = envkit("survey", "-p", "mixed", env=env)
    assert done.returncode == 0, done.stderr
    shown = envkit("site", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    [mixed] = json.loads(shown.stdout)["partitions"]
    notes = {node["name"]: node["profile"]["notes"] for node in mixed["nodes"]}
    assert any(re.fullmatch(r"inside Slurm job \d+ on node gpu-v1: only the GPUs in CUDA_VISIBLE_DEVICES=0 count "
                            r"\(1 of the 1 NVML lists\)", note) for note in notes["gpu-v1"]), notes
    text = envkit("site", env=env).stdout
    assert re.search(r"\n  gpu-v1 \(1 node\): [^\n]*\n    note from gpu-v1: inside Slurm job \d+ on node gpu-v1: ",
                     text), text


def test_two_surveys_at_once_keep_both_partitions(slurm_site, tmp_path):
    """One survey per partition at the same time: the one that writes last reads the site file again under its
    lock, so the other's partition stays (each used to write the file as it had read it before its jobs ran)."""
    env = user_env(slurm_site, tmp_path)
    marker = tmp_path / "paused"
    held = subprocess.Popen([sys.executable, "-m", "envkit", "survey", "--partition", "part-a"],
                            env={**env, "ENVKIT_TEST_PAUSE_AT": "surveyed", "ENVKIT_TEST_PAUSE_FILE": str(marker)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():  # part-a detected, its site file read, not yet written
            assert held.poll() is None, held.communicate()
            assert time.monotonic() < deadline, "the first survey never finished its jobs"
            time.sleep(0.05)
        other = envkit("survey", "--partition", "part-v", env=env)
        assert other.returncode == 0, other.stderr
        assert set(load_site(tmp_path / "site.yaml").partitions) == {"part-v"}
        marker.unlink()  # the first one goes on
        out, err = held.communicate(timeout=120)
    finally:
        if held.poll() is None:
            held.kill()
            held.communicate()
    assert held.returncode == 0, err
    site = load_site(tmp_path / "site.yaml")
    assert set(site.partitions) == {"part-a", "part-v"}
    assert [n.node for n in site.partitions["part-v"].nodes] == ["gpu-v1"]
    assert not list(tmp_path.glob(".site.yaml.*[!k]"))  # no temporary file left beside it (the lock file stays)


def test_sinfo_rows_of_a_large_partition_are_grouped_once_each():
    """40,000 rows of one partition, each node twice (sinfo lists a node once per state line): one row per node,
    in order (grouped with a set: linear; bench/survey_scale.py measures it)."""
    from envkit.slurm.sinfo import distinct_configurations, parse_sinfo, partitions

    text = "".join(f"gpu|up|n{i:05d}|gpu:a100:4|a100|idle\n" for i in range(20000) for _ in range(2))
    found = partitions(parse_sinfo(text))
    assert [row.node for row in found["gpu"].nodes] == [f"n{i:05d}" for i in range(20000)]
    assert [(row.node, count) for row, count in distinct_configurations(found["gpu"])] == [("n00000", 20000)]
