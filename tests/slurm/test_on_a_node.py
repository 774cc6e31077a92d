"""The node a check or a job runs on: verify --partition of a partition the environment was not made for, create
--verify-on-node's plan, job --partition P:NODE, and what sbatch would take from the user's environment instead of
the script."""

from __future__ import annotations

import json
from pathlib import Path

from slurm_helpers import envkit, make_torch_env, wait_done

from envkit.state import records
from envkit.state.userdirs import user_dirs


def _record(env, name: str):
    return records.load(user_dirs(env).records, name)


def _driver_found(root: Path, version) -> None:
    """What the stand-in torch in ``root`` says of the driver (None: it fits)."""
    [packages] = root.glob("lib/python*/site-packages")
    config = json.loads((packages / "fake_config.json").read_text())
    config["torch"].pop("driver_found", None)
    if version is not None:
        config["torch"]["driver_found"] = version
    (packages / "fake_config.json").write_text(json.dumps(config))


def test_verify_on_a_partition_the_environment_was_not_made_for_checks_that_node_for_real(slurm_site, cluster_user):
    # The node's envkit judged the A100 profile the record keeps (exit 1, advice for part-a:gpu-a1) instead of
    # checking the V100 node it ran on: the check the user asked for never ran.
    env, home = cluster_user
    root = make_torch_env(home / "envs" / "torch-a", env, name="torch-a")
    (home / "no-slurm").mkdir()
    made = envkit("verify", "torch-a", "--partition", "part-a", env={**env, "PATH": str(home / "no-slurm")})
    assert made.returncode == 0, made.stdout + made.stderr  # judged from part-a's profile: now made for part-a
    before = _record(env, "torch-a")
    assert before.target_partition() == "part-a"
    _driver_found(root, 11040)  # on gpu-v1, the stand-in torch finds the node's driver (CUDA 11.4) too old
    done = envkit("verify", "torch-a", "--partition", "part-v", env=env)
    assert done.returncode == 1 and "FAIL" in done.stdout, done.stdout + done.stderr
    assert done.stdout.startswith("Note: gpu-v1 (partition part-v) is not one of the machines torch-a was made for "
                                  "(gpu-a1 of partition part-a). The check ran on gpu-v1's own GPUs, as asked"), \
        done.stdout
    assert "Machine: gpu-v1: driver 470.82.01" in done.stdout and "gpu-a1:" not in done.stdout.split("\n", 1)[1]
    assert "\nTo get a build that fits: envkit create torch --build torch-2.7-cu118 --partition part-v:gpu-v1\n" \
        in done.stdout, done.stdout  # pasteable on the login node: the node it ran on, not part-a's
    assert "Its record is unchanged." in done.stdout.split("\n", 1)[0]
    as_json = envkit("verify", "torch-a", "--partition", "part-v", "--json", env=env)
    assert as_json.returncode == 1, as_json.stdout + as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["machine"]["name"] == "gpu-v1" and report["probed_on_machine"] is True
    assert report["made_for"] == {"machines": ["gpu-a1"], "partition": "part-a", "includes_this_machine": False}
    after = _record(env, "torch-a")  # what it says of its own machines stays
    assert after.verify == before.verify and after.target == before.target
    # On the partition it was made for: a real check, no note, recorded with the node.
    _driver_found(root, None)
    own = envkit("verify", "torch-a", "--partition", "part-a", env=env)
    assert own.returncode == 0 and "PASS" in own.stdout, own.stdout + own.stderr
    assert "Note:" not in own.stdout and "not one of the machines" not in own.stdout
    assert _record(env, "torch-a").verify["node"] in ("gpu-a1", "gpu-a2")
    assert slurm_site.cluster.jobs() == []


def test_verify_on_node_option_is_refused_beside_options_that_name_other_machines(cluster_user):
    env, _ = cluster_user
    done = envkit("verify", "torch-test", "--on-node", "--partition", "part-a", env=env)
    assert done.returncode == 2 and "--on-node checks the machine it runs on" in done.stderr, done.stderr
    assert done.stdout == ""


def _check_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("Check:"))


def test_create_verify_on_node_dry_run_says_where_the_check_runs(cluster_user):
    # The plan said only "Check: yes, here (...)": not that the check would run on a node of the partition.
    env, _ = cluster_user
    cases = [
        (("--partition", "part-a"), "Check:       yes, here (without the target's GPUs: whether they are covered is "
         "judged from the build's CUDA and GPU code in the manifest); then on a node of part-a through srun, with its "
         "own GPUs (--verify-on-node)"),
        (("--partition", "mixed:gpu-v1"), "then on node gpu-v1 of mixed through srun, with its own GPUs "
         "(--verify-on-node)"),
        (("--partition", "part-a", "--no-verify"), "Check:       on a node of part-a through srun, with its own GPUs "
         "(--verify-on-node); not here (--no-verify)"),
    ]
    for options, words in cases:
        done = envkit("create", "torch", *options, "--verify-on-node", "--dry-run", env=env)
        assert done.returncode == 0, done.stderr
        assert words in _check_line(done.stdout), done.stdout
    plain = envkit("create", "torch", "--partition", "part-a", "--dry-run", env=env)
    assert "srun" not in _check_line(plain.stdout)


def test_a_job_on_a_named_node_runs_there(slurm_site, cluster_user, tmp_path):
    # `job -p P:NODE` was refused ("is not a partition name") while verify and create take P:NODE.
    env, _ = cluster_user
    printed = envkit("job", "torch-test", "-p", "part-a:gpu-a1", "--", "true", env=env)
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert "#SBATCH --partition=part-a" in lines and "#SBATCH --nodelist=gpu-a1" in lines
    assert "#SBATCH --gpus-per-node=2" in lines
    # Named as `envkit site` shows it (a profile of its own name): sbatch gets the Slurm node, and the job runs there.
    site = tmp_path / "site.yaml"
    site.write_text("version: 1\npartitions:\n  part-a:\n    nodes:\n      - node: gpu-a2\n        profile: "
                    "{name: a100-box, cuda_driver: '12.2', gpus: [{name: NVIDIA A100-SXM4-40GB, "
                    "compute_capability: '8.0'}]}\n")
    mine = {**env, "ENVKIT_SITE": str(site)}
    done = envkit("job", "torch-test", "-p", "part-a:a100-box", "--submit", "--", "python", "-c",
                  "import os; print('node:', os.environ['SLURMD_NODENAME'])", env=mine, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    assert f"submitted job {job} to node gpu-a2 of part-a;" in done.stderr
    wait_done(slurm_site, job)
    assert "node: gpu-a2" in (tmp_path / f"slurm-{job}.out").read_text()


def test_a_job_on_a_node_that_is_not_there_or_does_not_fit_is_refused_before_any_job(slurm_site, cluster_user):
    env, _ = cluster_user
    unknown = envkit("job", "torch-test", "-p", "part-a:gpu-v1", "--submit", "--", "true", env=env)
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    assert "partition 'part-a' has no node 'gpu-v1'" in unknown.stderr and unknown.stdout == ""
    several = envkit("job", "torch-test", "-p", "part-a:gpu-a1,gpu-a2", "--submit", "--", "true", env=env)
    assert several.returncode == 2, several.stderr
    assert "--partition part-a:gpu-a1,gpu-a2: a job runs on one node" in several.stderr
    assert "--partition part-a:gpu-a1" in several.stderr
    too_many = envkit("job", "torch-test", "-p", "mixed:gpu-v1", "--gpus", "2", "--", "true", env=env)
    assert too_many.returncode == 2 and "node gpu-v1 of partition mixed has at most 1 GPU(s)" in too_many.stderr
    misfit = envkit("job", "torch-test", "-p", "mixed:gpu-v1", "--submit", "--", "true", env=env)
    assert misfit.returncode == 1, misfit.stderr
    assert "would not run on node gpu-v1 of partition mixed: gpu-v1:" in misfit.stderr
    assert "envkit create torch --partition mixed:gpu-v1" in misfit.stderr and "gpu-a1" not in misfit.stderr
    assert slurm_site.cluster.jobs() == []


def test_a_job_keeps_its_long_name_and_partition_whatever_sbatch_variables_say(slurm_site, cluster_user, tmp_path):
    # Slurm keeps a 64-character name (an environment's longest) as it is; but SBATCH_JOB_NAME and SBATCH_PARTITION
    # in the user's environment override the script's directives: the job ran elsewhere, under another name, and
    # its output was not where envkit said.
    env, home = cluster_user
    name = "t" * 60 + "-a.b"
    make_torch_env(home / "envs" / name, env, name=name)
    mine = {**env, "SBATCH_JOB_NAME": "other", "SBATCH_PARTITION": "mixed", "SBATCH_TIMELIMIT": "1"}
    done = envkit("job", name, "-p", "part-a", "--gpus", "1", "--time", "5", "--output", "%x-%j.out", "--submit",
                  "--", "python", "-c", "import os; print(os.environ['SLURM_JOB_NAME'], "
                  "os.environ['SLURM_JOB_PARTITION'])", env=mine, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    assert "not passing SBATCH_PARTITION=mixed, SBATCH_JOB_NAME=other, SBATCH_TIMELIMIT=1 to sbatch" in done.stderr
    # the script's --time, not SBATCH_TIMELIMIT's minute (scontrol keeps a job that ended for MinJobAge, 300 s)
    shown = slurm_site.cluster.query(["scontrol", "show", "job", job]).stdout
    assert "TimeLimit=00:05:00" in shown.split(), shown
    assert f"its output goes to {name}-{job}.out;" in done.stderr
    wait_done(slurm_site, job)
    assert (tmp_path / f"{name}-{job}.out").read_text().split()[-2:] == [name, "part-a"]


A100_PROFILE = ("{name: NAME, cuda_driver: '12.2', gpus: [{name: NVIDIA A100-SXM4-40GB, compute_capability: '8.0'}, "
                "{name: NVIDIA A100-SXM4-40GB, compute_capability: '8.0'}]}")


def test_an_entry_without_a_slurm_node_is_refused_before_any_job_unless_its_name_is_a_node(slurm_site, cluster_user,
                                                                                          tmp_path):
    # A hand-written entry without `node:` went to sbatch/srun by its name: named after its configuration
    # ('a100x4', 16 nodes) the job failed inside sbatch (exit 1, sbatch's words), and verify said only "no node".
    env, _ = cluster_user
    site = tmp_path / "site.yaml"
    entries = [("a100x4", 16), ("a100-solo", 1), ("gpu-a1", 1)]
    site.write_text("version: 1\npartitions:\n  part-a:\n    nodes:\n" + "".join(
        f"      - count: {count}\n        profile: {A100_PROFILE.replace('NAME', name)}\n" for name, count in entries))
    mine = {**env, "ENVKIT_SITE": str(site)}
    for name, why in (("a100x4", "and stands for 16 nodes: its name is a configuration's, not a Slurm node's"),
                      ("a100-solo", "and Slurm's partition part-a has no node of that name")):
        for command in (("job", "torch-test", "-p", f"part-a:{name}", "--submit", "--", "true"),
                        ("job", "torch-test", "-p", f"part-a:{name}", "--", "true"),
                        ("verify", "torch-test", "--partition", f"part-a:{name}")):
            done = envkit(*command, env=mine, cwd=tmp_path)
            assert done.returncode == 2, done.stdout + done.stderr
            assert done.stdout == "" and "Traceback" not in done.stderr
            assert f"envkit: error: --partition part-a:{name}: the site file's entry {name!r} has no `node:`, " \
                   f"{why}\n" in done.stderr, done.stderr
            assert f"Add `node: NODE` to that entry in {site}" in done.stderr
            assert "or give the partition alone: --partition part-a" in done.stderr
    assert "partition part-a has: gpu-a1, gpu-a2)" in done.stderr  # where sinfo was asked, the nodes it named
    assert slurm_site.cluster.jobs() == []
    # An entry named after its node (no `node:`) still reaches that node.
    done = envkit("job", "torch-test", "-p", "part-a:gpu-a1", "--submit", "--", "python", "-c",
                  "import os; print('node:', os.environ['SLURMD_NODENAME'])", env=mine, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    wait_done(slurm_site, job)
    assert "node: gpu-a1" in (tmp_path / f"slurm-{job}.out").read_text()
