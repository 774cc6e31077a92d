"""envkit job (sbatch scripts, submitted for real) and envkit verify --partition (the check on a node, via srun)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest
from slurm_helpers import envkit, make_torch_env, user_env, wait_done

from envkit.state import records
from envkit.state.userdirs import user_dirs


def _record(env):
    return records.load(user_dirs(env).records, "torch-test")


TRICKY = ["a b", "it's", "$HOME", '"quoted"', "`id`", "; rm -rf /"]
SHOW = "import json, os, sys; print(json.dumps([sys.argv[1:], sys.prefix, os.environ.get('OMP_NUM_THREADS')]))"


def test_a_submitted_job_runs_the_command_exactly_inside_the_environment(slurm_site, cluster_user, tmp_path):
    env, home = cluster_user
    done = envkit("job", "torch-test", "--partition", "part-a", "--gpus", "1", "--cpus", "2", "--time", "5",
                  "--job-name", "my-job_1", "--submit", "--", "python", "-c", SHOW, *TRICKY,
                  env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    assert job.isdigit()  # the job id alone on stdout
    wait_done(slurm_site, job)
    output = tmp_path / f"slurm-{job}.out"  # sbatch's default, in the working directory
    argv, prefix, threads = json.loads(output.read_text().strip().splitlines()[-1])
    assert argv == TRICKY
    assert Path(prefix) == home / "envs" / "torch-test"
    assert threads == "2"


def test_output_goes_where_envkit_says_and_a_directory_that_is_not_there_is_refused(slurm_site, cluster_user,
                                                                                     tmp_path):
    # sbatch took `--output logs/x.out` without a logs directory and the job failed without a line anywhere; and
    # envkit said the output went to "logs/%x-%j.out", a file no one would find.
    env, _ = cluster_user
    missing = envkit("job", "torch-test", "-p", "part-a", "--output", "logs/%x-%j.out", "--submit", "--", "true",
                     env=env, cwd=tmp_path)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "--output logs/%x-%j.out: the directory logs does not exist" in missing.stderr and missing.stdout == ""
    assert slurm_site.cluster.jobs() == []
    (tmp_path / "logs").mkdir()
    done = envkit("job", "torch-test", "-p", "part-a", "--gpus", "1", "--output", "logs/%x-%j.out", "--submit", "--",
                  "python", "-c", "print('hello from the job')", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    assert f"its output goes to logs/torch-test-{job}.out;" in done.stderr
    wait_done(slurm_site, job)
    assert "hello from the job" in (tmp_path / "logs" / f"torch-test-{job}.out").read_text()


def test_print_shows_the_script_with_directives_and_quoted_command(cluster_user):
    env, _ = cluster_user
    done = envkit("job", "torch-test", "-p", "part-a", "--job-name", "a.b+c", "--per-gpu", "--", "python",
                  "train.py", "it's", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "#SBATCH --partition=part-a" in lines and "#SBATCH --gpus-per-node=2" in lines  # a node's GPUs
    assert "#SBATCH --job-name=a.b+c" in lines
    assert lines[-1].endswith(" envkit run torch-test -- torchrun --standalone --nproc-per-node=2 train.py "
                              "'it'\"'\"'s'")


def test_a_job_whose_build_does_not_fit_the_partition_is_refused_with_reasons(cluster_user):
    env, _ = cluster_user
    for partition in ("part-v", "mixed"):
        done = envkit("job", "torch-test", "-p", partition, "--submit", "--", "true", env=env)
        assert done.returncode == 1, done.stderr
        assert f"would not run on partition {partition}" in done.stderr
        assert "gpu-v1:" in done.stderr and "11.4" in done.stderr
        assert done.stdout == ""


def test_job_bad_input_is_exit_2(cluster_user):
    env, _ = cluster_user
    unknown = envkit("job", "torch-test", "-p", "nosuch", "--", "true", env=env)
    assert unknown.returncode == 2 and "part-a" in unknown.stderr and "part-v" in unknown.stderr
    option = envkit("job", "torch-test", "-p", "part-a", "--time", "--wrap=id", "--", "true", env=env)
    assert option.returncode == 2 and "cannot be passed to sbatch" in option.stderr
    no_command = envkit("job", "torch-test", "-p", "part-a", env=env)
    assert no_command.returncode == 2
    too_many = envkit("job", "torch-test", "-p", "part-a", "--gpus", "3", "--", "true", env=env)
    assert too_many.returncode == 2 and "at most 2 GPU(s)" in too_many.stderr  # as verify --partition --gpus


def test_sbatch_refusing_is_reported_with_its_own_message(slurm_site, cluster_user, tmp_path):
    env, _ = cluster_user
    # A site file older than the cluster: it still has a partition Slurm no longer has, so sbatch refuses the job.
    import yaml

    site = yaml.safe_load(Path(env["ENVKIT_SITE"]).read_text())
    site["partitions"]["part-gone"] = site["partitions"]["part-a"]
    stale = tmp_path / "stale-site.yaml"
    stale.write_text(yaml.safe_dump(site))
    done = envkit("job", "torch-test", "-p", "part-gone", "--submit", "--", "true",
                  env={**env, "ENVKIT_SITE": str(stale)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "sbatch refused the job" in done.stderr and "partition" in done.stderr.lower()
    assert slurm_site.cluster.jobs() == []


def test_verify_on_a_node_passes_and_records_the_node(slurm_site, cluster_user):
    env, _ = cluster_user
    done = envkit("verify", "torch-test", "--partition", "part-a", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout
    assert "inside Slurm job" in done.stderr and "CUDA_VISIBLE_DEVICES=0,1" in done.stderr
    summary = _record(env).verify
    assert summary["ok"] is True and summary["node"] in ("gpu-a1", "gpu-a2") and summary["partition"] == "part-a"


def test_verify_with_fewer_gpus_checks_those_the_job_was_given(cluster_user):
    env, _ = cluster_user
    done = envkit("verify", "torch-test", "--partition", "part-a", "--gpus", "1", "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert "CUDA_VISIBLE_DEVICES=0)" in done.stderr
    assert len(report["machine"]["gpus"]) == 1, report["machine"]


def test_a_check_that_cannot_start_is_not_run_and_its_job_cancelled(slurm_site, cluster_user):
    env, _ = cluster_user
    before = _record(env).verify
    done = envkit("verify", "torch-test", "--partition", "closed", "--queue-timeout", "2", env=env)
    assert done.returncode == 1
    assert done.stdout.startswith("NOT RUN on closed: the job did not start within 2 s (cancelled)")
    assert "PASS" not in done.stdout and "FAIL" not in done.stdout
    assert _record(env).verify == before
    assert slurm_site.cluster.jobs() == []


def test_verify_on_a_named_node_asks_for_that_nodes_gpus(slurm_site, cluster_user):
    # mixed:gpu-v1 used to ask srun for 2 GPUs (the most a node of mixed has) on a node with one: NOT RUN.
    env, _ = cluster_user
    done = envkit("verify", "torch-test", "--partition", "mixed:gpu-v1", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "running the check on node gpu-v1 of mixed with 1 GPU(s)" in done.stderr
    assert "on node gpu-v1" in done.stderr and "CUDA_VISIBLE_DEVICES=0)" in done.stderr
    assert _record(env).verify["node"] == "gpu-v1"
    # A node the partition does not have is bad input, said before any job (srun's refusal was a NOT RUN, exit 1).
    unknown = envkit("verify", "torch-test", "--partition", "part-a:gpu-v1", env=env)
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    assert "partition 'part-a' has no node 'gpu-v1'; its nodes are: gpu-a1, gpu-a2" in unknown.stderr
    assert "running the check" not in unknown.stderr and unknown.stdout == ""
    assert slurm_site.cluster.jobs() == []


def test_a_node_survey_merged_into_another_nodes_configuration_is_named_by_its_own_name(slurm_site, cluster_user):
    # The survey keeps one entry for part-a (gpu-a1, 2 nodes): gpu-a2, which sinfo lists, was "no node 'gpu-a2'".
    env, _ = cluster_user
    listed = envkit("list", "torch", "--partition", "part-a:gpu-a2", env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    done = envkit("verify", "torch-test", "--partition", "part-a:gpu-a2", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "running the check on node gpu-a2 of part-a with 2 GPU(s)" in done.stderr
    assert _record(env).verify["node"] == "gpu-a2"


def test_a_check_that_fails_on_a_node_advises_a_create_for_that_node_that_works_here(slurm_site, cluster_user,
                                                                                     tmp_path):
    # The node advised `envkit create torch --build B` alone: pasted on the login node (no GPU) it was refused.
    import re

    env, _ = cluster_user
    root = make_torch_env(tmp_path / "torch-old", env, name="torch-old")
    [packages] = root.glob("lib/python*/site-packages")
    config = json.loads((packages / "fake_config.json").read_text())
    config["torch"]["driver_found"] = 11040  # the node's driver (CUDA 11.4) is too old for the build's CUDA 12.6
    (packages / "fake_config.json").write_text(json.dumps(config))
    done = envkit("verify", "torch-old", "--partition", "part-v", env=env)
    assert done.returncode == 1 and "FAIL" in done.stdout, done.stdout + done.stderr
    advised = re.search(r"To get a build that fits: (envkit create torch --build \S+ --partition part-v:gpu-v1)\n",
                        done.stdout)
    assert advised is not None, done.stdout
    pasted = envkit(*advised.group(1).split()[1:], "--dry-run", env=env)
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.startswith("Machine:     gpu-v1: driver 470.82.01, CUDA 11.4")


def test_verify_of_a_prefix_that_holds_no_environment_is_exit_2_before_any_job(slurm_site, cluster_user, tmp_path):
    # It started a job whose envkit refused the prefix: NOT RUN, exit 1, for what verify calls bad input here.
    env, _ = cluster_user
    done = envkit("verify", "--prefix", str(tmp_path / "none"), "--partition", "part-a", env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"no environment at {tmp_path / 'none'}" in done.stderr and "running the check" not in done.stderr
    assert done.stdout == "" and slurm_site.cluster.jobs() == []


def test_verify_on_an_unknown_partition_is_exit_2(cluster_user):
    env, _ = cluster_user
    done = envkit("verify", "torch-test", "--partition", "nosuch", env=env)
    assert done.returncode == 2 and "part-a" in done.stderr


def test_verify_with_an_unknown_framework_is_exit_2_before_any_job(cluster_user):
    # It used to start a job and let the node's envkit refuse the option.
    env, _ = cluster_user
    done = envkit("verify", "torch-test", "--partition", "part-a", "--framework=--json", env=env)
    assert done.returncode == 2 and "--framework --json: expected one of" in done.stderr
    assert "running the check on a node" not in done.stderr


def test_create_verify_on_node_needs_a_partition_and_slurm(slurm_site, tmp_path):
    env = user_env(slurm_site, tmp_path)
    done = envkit("create", "torch", "--verify-on-node", "--dry-run", env=env)
    assert done.returncode == 2 and "add --partition P" in done.stderr
    (tmp_path / "site.yaml").write_text("version: 1\npartitions: {}\n")
    empty = tmp_path / "bin"
    empty.mkdir()
    no_slurm = envkit("create", "torch", "--partition", "part-a", "--verify-on-node", "--yes",
                      env={**env, "PATH": str(empty)})
    assert no_slurm.returncode == 1 and "not a Slurm cluster" in no_slurm.stderr
    assert not (tmp_path / "data" / "envkit").exists() or not any((tmp_path / "data" / "envkit").rglob("*.json"))


def test_a_job_partition_that_is_no_name_is_exit_2_before_anything_is_looked_up(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for partition in ("-x", "", "a b"):
        done = envkit("job", "nosuch", "-p", partition, "--", "true", env=env)
        assert done.returncode == 2 and "is not a partition name" in done.stderr, done.stderr
    no_command = envkit("job", "my env", "-p", "gpu", env=env)  # the example it prints pastes as one argument each
    assert no_command.returncode == 2 and "envkit job 'my env' --partition gpu -- python train.py" in no_command.stderr


def test_create_verify_on_node_refuses_what_the_check_would_refuse_before_creating(tmp_path):
    # Several nodes, or --machine beside the partition, used to be refused by the check only after the create.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    profile = str(Path(__file__).resolve().parents[1] / "profiles" / "h100-cuda128.yaml")
    for extra, words in ((("--partition", "gpu:a1,a2"), "the check runs on one node"),
                         (("--partition", "gpu", "--machine", profile), "leave out --machine")):
        done = envkit("create", "torch", "--verify-on-node", "--dry-run", *extra, env=env)
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert done.stdout == ""


def _bare_env(tmp_path: Path, path: str = "/usr/bin:/bin") -> dict[str, str]:
    return {"PATH": path, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "ENVKIT_SITE": str(tmp_path / "site.yaml")}


def test_a_job_name_sbatch_could_misread_is_refused_not_rewritten(cluster_user):
    # `--job-name 'a b$c'` used to be submitted as a_b_c without a word.
    env, _ = cluster_user
    for name in ("a b$c", "--begin=now", "a" * 65):
        done = envkit("job", "torch-test", "-p", "part-a", "--job-name", name, "--", "true", env=env)
        assert done.returncode == 2, done.stderr
        assert f"--job-name {name!r} is not a job name envkit passes to sbatch: use letters, digits" in done.stderr
        assert done.stdout == ""


def test_verify_options_for_the_job_on_a_node_are_refused_without_a_partition(tmp_path):
    # `verify NAME --gpus 3` used to check this machine, --gpus silently ignored.
    env = _bare_env(tmp_path)
    make_torch_env(tmp_path / "envs" / "torch-test", env)
    for options, words in ((("--gpus", "3"), "--gpus only applies with --partition"),
                           (("--queue-timeout", "60"), "--queue-timeout only applies with --partition"),
                           (("--gpus", "1", "--queue-timeout", "60"), "--gpus and --queue-timeout only apply with "
                                                                       "--partition")):
        done = envkit("verify", "torch-test", *options, env=env)
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr
    assert _record(env).verify is None
    # Without Slurm, --partition judges from the site file's profiles: no job, and it says --gpus is not used.
    profile = Path(__file__).resolve().parents[1] / "profiles" / "h100-cuda128.yaml"
    Path(env["ENVKIT_SITE"]).write_text(f"version: 1\npartitions:\n  gpu: {{nodes: [{{profile_file: {profile}}}]}}\n")
    empty = tmp_path / "no-slurm"
    empty.mkdir()
    judged = envkit("verify", "torch-test", "--partition", "gpu", "--gpus", "1", env={**env, "PATH": str(empty)})
    assert "no Slurm here" in judged.stderr and "(without a job, --gpus is not used)" in judged.stderr, judged.stderr


def test_a_check_judged_from_a_partitions_profiles_says_how_to_run_it_on_a_node(tmp_path):
    # It said only "run `envkit verify torch-test` there": on a Slurm login node, "there" is reached through srun.
    env = _bare_env(tmp_path, path=str(tmp_path / "no-slurm"))
    (tmp_path / "no-slurm").mkdir()
    make_torch_env(tmp_path / "envs" / "torch-test", env)
    profile = Path(__file__).resolve().parents[1] / "profiles" / "h100-cuda128.yaml"
    Path(env["ENVKIT_SITE"]).write_text(f"version: 1\npartitions:\n  gpu: {{nodes: [{{profile_file: {profile}}}]}}\n")
    on_node = ("or `envkit verify torch-test --partition gpu` on the cluster's login node (the check then runs on a "
               "node through srun)")
    for options in (("--partition", "gpu"), ()):  # named, then the target the first one recorded
        done = envkit("verify", "torch-test", *options, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "run `envkit verify torch-test` there, " + on_node in done.stdout, done.stdout


def _slurm_bin(tmp_path: Path, programs: tuple[str, ...], scripts: Optional[dict[str, str]] = None) -> str:
    """A PATH with only these Slurm programs (and the scripts given, as programs of those names)."""
    import shutil
    import sys

    directory = tmp_path / "slurm-bin"
    directory.mkdir()
    for name in programs:
        (directory / name).symlink_to(shutil.which(name))
    for name, text in (scripts or {}).items():
        (directory / name).write_text(text)
        (directory / name).chmod(0o755)
    return f"{directory}:{Path(sys.executable).parent}"


@pytest.mark.parametrize("srun, why", [
    ("echo 'srun: error: the controller said no' >&2; exit 1", "(srun's exit status 1): srun: error: the controller "
                                                               "said no"),
    ("exec /nonexistent/srun \"$@\"", "(srun's exit status 127): "),
])
def test_a_failing_srun_is_a_check_not_run_saying_why(slurm_site, cluster_user, tmp_path, srun, why):
    # srun failing in words envkit did not know used to print its stderr alone and exit with srun's status
    # (127 for a broken srun): no NOT RUN, no PASS or FAIL.
    env, _ = cluster_user
    before = _record(env).verify
    path = _slurm_bin(tmp_path, ("sinfo", "scancel"), {"srun": f"#!/bin/sh\n{srun}\n"})
    for json_output in ((), ("--json",)):
        done = envkit("verify", "torch-test", "--partition", "part-a", *json_output, env={**env, "PATH": path})
        assert done.returncode == 1, done.stdout + done.stderr
        if json_output:
            report = json.loads(done.stdout)
            assert report["status"] == "not run" and report["reason"].startswith("no report came back " + why)
        else:
            assert done.stdout.startswith("NOT RUN on part-a: no report came back " + why), done.stdout
        assert "neither PASS nor FAIL" in done.stderr and "Traceback" not in done.stderr
    assert _record(env).verify == before


def test_a_missing_srun_or_sbatch_is_named(cluster_user, tmp_path):
    env, _ = cluster_user
    path = _slurm_bin(tmp_path, ("sinfo",))
    for command in (("verify", "torch-test", "--partition", "part-a"), ("job", "torch-test", "-p", "part-a",
                                                                      "--submit", "--", "true")):
        done = envkit(*command, env={**env, "PATH": path})
        program = "srun" if command[0] == "verify" else "sbatch"
        assert done.returncode == 1, done.stderr
        assert f"envkit: error: Slurm's {program} is not on PATH (sinfo is: " in done.stderr
        assert "Traceback" not in done.stderr


def test_job_submit_needs_sbatch_not_sinfo(slurm_site, cluster_user, tmp_path):
    # Without sinfo on PATH, --submit used to say "this is not a Slurm cluster's login node" with sbatch right there.
    env, _ = cluster_user
    done = envkit("job", "torch-test", "-p", "part-a", "--submit", "--", "true",
                  env={**env, "PATH": _slurm_bin(tmp_path, ("sbatch",))}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    wait_done(slurm_site, done.stdout.strip())


def test_verify_on_a_node_named_as_site_shows_it_runs_on_its_slurm_node(slurm_site, cluster_user, tmp_path):
    # A hand-written site file whose profile has a name of its own: `envkit site` shows 'a100-box', and
    # --partition part-a:a100-box went to srun as --nodelist=a100-box (not a Slurm node: NOT RUN).
    env, _ = cluster_user
    site = tmp_path / "site.yaml"
    site.write_text("version: 1\npartitions:\n  part-a:\n    nodes:\n      - node: gpu-a2\n        profile: "
                    "{name: a100-box, cuda_driver: '12.2', gpus: [{name: NVIDIA A100-SXM4-40GB, "
                    "compute_capability: '8.0'}]}\n")
    mine = {**env, "ENVKIT_SITE": str(site)}
    assert "a100-box" in envkit("site", env=mine).stdout
    for node in ("a100-box", "gpu-a2"):
        done = envkit("verify", "torch-test", "--partition", f"part-a:{node}", env=mine)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "PASS" in done.stdout and _record(env).verify["node"] == "gpu-a2"


def test_a_broken_slurm_client_judges_from_the_site_file(tmp_path):
    """sinfo is here but Slurm does not answer (no controller, no configuration): verify --partition judges from the
    site file's profiles, as without Slurm, instead of failing (exit 1) before anything was queued."""
    env = _bare_env(tmp_path)
    make_torch_env(tmp_path / "envs" / "torch-test", env)
    profile = Path(__file__).resolve().parents[1] / "profiles" / "h100-cuda128.yaml"
    Path(env["ENVKIT_SITE"]).write_text(f"version: 1\npartitions:\n  gpu: {{nodes: [{{profile_file: {profile}}}]}}\n")
    path = _slurm_bin(tmp_path, ("sinfo",), {"srun": "#!/bin/sh\necho srun ran >> \"$0.log\"\nexit 1\n"})
    conf = tmp_path / "slurm.conf"  # a client configuration naming no cluster: sinfo fails at once
    conf.write_text("# left half-written by a broken install\n")
    done = envkit("verify", "torch-test", "--partition", "gpu", env={**env, "PATH": path, "SLURM_CONF": str(conf)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Slurm does not answer here (sinfo failed" in done.stderr, done.stderr
    assert "judging the build from the site file's node profiles" in done.stderr
    assert not (tmp_path / "slurm-bin" / "srun.log").exists()  # nothing was queued


def test_without_an_answering_slurm_shell_and_jupyter_say_so_in_one_sentence(tmp_path):
    # sinfo is here, Slurm does not answer: `envkit jupyter --list` said "No Jupyter servers of yours are running"
    # and `envkit shell` showed srun's raw four-line error. Both say, as verify does, that Slurm does not answer.
    env = _bare_env(tmp_path)
    make_torch_env(tmp_path / "envs" / "torch-test", env)
    profile = Path(__file__).resolve().parents[1] / "profiles" / "h100-cuda128.yaml"
    Path(env["ENVKIT_SITE"]).write_text(f"version: 1\npartitions:\n  gpu: {{nodes: [{{profile_file: {profile}}}]}}\n")
    logged = "#!/bin/sh\necho \"$0 ran\" >> \"$0.log\"\nexit 1\n"
    path = _slurm_bin(tmp_path, ("sinfo", "squeue"), {"srun": logged, "sbatch": logged})
    conf = tmp_path / "slurm.conf"  # a client configuration naming no cluster: sinfo fails at once
    conf.write_text("# left half-written by a broken install\n")
    broken = {**env, "PATH": path, "SLURM_CONF": str(conf)}
    for command, what in ((["jupyter", "--list"], "your Jupyter servers cannot be listed"),
                          (["shell", "torch-test", "-p", "gpu"], "no job can be asked of partition gpu"),
                          (["jupyter", "torch-test", "-p", "gpu"], "no job can be asked of partition gpu")):
        done = envkit(*command, env=broken)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        [error] = [line for line in done.stderr.splitlines() if line.startswith("envkit: error:")]
        assert error.startswith("envkit: error: Slurm does not answer here (sinfo failed: ") and error.endswith(what)
        assert "No Jupyter servers" not in done.stdout and "Traceback" not in done.stderr
    assert not list((tmp_path / "slurm-bin").glob("*.log"))  # neither srun nor sbatch ran


def test_a_jax_cuda12_build_on_a_node_whose_driver_is_cuda_11_4_is_told_so_not_that_the_job_has_no_gpu(
        slurm_site, cluster_user, tmp_path):
    # Issue 39: part-v's node has a V100 and a driver for CUDA 11.4; JAX's CUDA 12 plugin only says it found no GPU
    # (the stand-in says what JAX says). The job was given its GPU (its own output shows CUDA_VISIBLE_DEVICES=0,
    # SLURM_GPUS_ON_NODE=1): the check said "this Slurm job has no GPU". The driver is the cause, and is named.
    from slurm_helpers import make_fake_env

    env, _ = cluster_user
    v100 = {"name": "Tesla V100-SXM2-16GB", "capability": [7, 0], "memory": 16 * 2 ** 30}
    make_fake_env(tmp_path / "jax-cu12", env, "jax-cu12", "jax", "jax-0.10-cu12",
                  {"jax": {"version": "0.10.2", "cuda": "12.8", "gpus": [v100],
                           "backend_error": "INTERNAL: no supported devices found for platform CUDA"}},
                  {"jax": "0.10.2", "jaxlib": "0.10.2", "jax-cuda12-plugin": "0.10.2"})
    done = envkit("verify", "jax-cu12", "-p", "part-v", "--json", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["probe"]["environment"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert report["probe"]["environment"]["SLURM_GPUS_ON_NODE"] == "1"
    assert [d["rule"] for d in report["diagnosis"]] == ["driver-too-old"]
    assert report["diagnosis"][0]["cause"] == ("the NVIDIA driver is too old for this build: it supports CUDA 11.4, "
                                               "the build needs CUDA 12.0")
    assert "has no GPU" not in done.stdout
