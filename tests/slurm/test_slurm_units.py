"""The pure parts of envkit.slurm, on captured and recorded text: sinfo, GRES, configurations, job ids, the sbatch
script, a job's view of its GPUs."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from envkit.errors import BadInputError
from envkit.machines.profile import Gpu, MachineProfile
from envkit.slurm.client import SlurmError, StepResult, exec_failure, parse_job_id
from envkit.slurm.job_context import apply_job_context, hides_all, job_context
from envkit.slurm.script import JobSpec, sbatch_script
from envkit.slurm.sinfo import distinct_configurations, gpu_count, parse_sinfo, partitions
from envkit.slurm.survey import profile_from_step
from envkit.versions import ComputeCapability

DATA = Path(__file__).parent / "data"


def cluster_partitions():
    return partitions(parse_sinfo((DATA / "sinfo-cluster.txt").read_text()))


def test_sinfo_rows_group_into_partitions_with_their_gpus():
    found = cluster_partitions()
    assert list(found) == ["gpu-4-a100", "gpu-8-v100", "cpu*", "legacy"]
    assert found["gpu-4-a100"].node_names == ("a100-01", "a100-02", "a100-03")
    assert found["gpu-8-v100"].has_gpus and not found["cpu*"].nodes[0].gpus
    assert found["legacy"].available == "down"


@pytest.mark.parametrize("gres, count", [
    ("gpu:a100:4(S:0-1)", 4), ("gpu:v100:8(S:0-1),shard:16", 8), ("gpu:2", 2), ("gpu", 1), ("(null)", 0),
    ("shard:8", 0), ("gpu:a100:2,gpu:v100:1", 3), ("gpu:a100:4(S:0,1)", 4),
])
def test_gpu_count_reads_every_gres_form(gres, count):
    assert gpu_count(gres) == count


def test_a_partition_whose_nodes_differ_gives_one_node_per_configuration_preferring_usable_ones():
    configurations = distinct_configurations(cluster_partitions()["gpu-8-v100"])
    # v100-01 and v100-02 share GRES and features; v100-01 is allocated (usable soon), v100-02 drained.
    assert [(row.node, count) for row, count in configurations] == [("v100-01", 2), ("v100-03", 1)]
    [(row, count)] = distinct_configurations(cluster_partitions()["gpu-4-a100"])
    assert (row.node, count) == ("a100-01", 3)


def test_a_named_node_is_asked_for_its_own_gpus_and_an_unknown_one_is_bad_input():
    # verify --partition P:NODE asked for the most GPUs any node of P has: srun refused a node with fewer.
    from envkit.errors import UnknownNameError
    from envkit.slurm.remote import node_gpus

    v100 = cluster_partitions()["gpu-8-v100"]
    assert node_gpus(v100) == 8 and node_gpus(v100, "v100-03") == 6
    with pytest.raises(UnknownNameError) as caught:
        node_gpus(v100, "a100-01")
    assert caught.value.exit_code == 2
    assert caught.value.message == ("partition 'gpu-8-v100' has no node 'a100-01'; its nodes are: v100-01, v100-02, "
                                    "v100-03")


def test_sinfo_text_with_a_missing_field_is_an_error_naming_the_line():
    with pytest.raises(ValueError, match="line 2"):
        parse_sinfo("p|up|n1|gpu:1|f|idle\np|up|n2|gpu:1\n")


@pytest.mark.parametrize("stdout, job", [("12345\n", "12345"), ("777;cluster-b\n", "777"),
                                         ("sbatch: warning: x\n42\n", "42")])
def test_the_job_id_is_read_from_sbatch_parsable(stdout, job):
    assert parse_job_id(stdout) == job


def test_no_job_id_is_a_clear_error():
    with pytest.raises(SlurmError, match="did not print a job id"):
        parse_job_id("Submitted batch job\n")


def test_the_sbatch_script_matches_the_recorded_one_and_quotes_every_user_value():
    spec = JobSpec(partition="gpu-8-v100", gpus=2, cpus=6, time="1:00:00", job_name="train_it-1.2+b",
                   output="logs/out-%j.txt", activate=("/shared/venv/bin/python", "-m", "envkit", "run",
                                                       "torch-cu126", "--"),
                   command=("python", "train it.py", "--tag", "$HOME", '"quoted"', "it's", "`id`"))
    script = sbatch_script(spec)
    assert script == (DATA / "sbatch-record.txt").read_text()
    last = script.splitlines()[-1]
    assert shlex.split(last)[6:] == list(spec.command)  # the shell reads back exactly the user's argv


def test_a_named_node_is_a_nodelist_directive_and_the_sbatch_variables_that_would_override_the_script_are_known():
    # (sbatch lets SBATCH_PARTITION, SBATCH_JOB_NAME, ... in the environment override the script's directives.)
    from envkit.slurm.script import overriding_variables

    spec = JobSpec(partition="p", node="gpu-a2", gpus=1, job_name="j", command=("true",), activate=("envkit",))
    script = sbatch_script(spec)
    assert script.splitlines()[1:5] == ["#SBATCH --partition=p", "#SBATCH --nodelist=gpu-a2", "#SBATCH --job-name=j",
                                        "#SBATCH --gpus-per-node=1"]
    assert overriding_variables(spec) == ["SBATCH_PARTITION", "SBATCH_JOB_NAME", "SBATCH_GPUS_PER_NODE"]
    timed = JobSpec(partition="p", time="5", output="o.txt", command=("true",), activate=("envkit",))
    assert overriding_variables(timed) == ["SBATCH_PARTITION", "SBATCH_TIMELIMIT", "SBATCH_OUTPUT"]
    with pytest.raises(BadInputError, match="node '-x' cannot be passed to sbatch"):
        sbatch_script(JobSpec(partition="p", node="-x", command=("true",), activate=("envkit",)))


@pytest.mark.parametrize("field, value", [("partition", "gpu a100"), ("partition", "--wrap=id"),
                                          ("time", "1:00 $(id)"), ("output", "out'.txt"), ("output", "-o")])
def test_a_directive_value_that_could_be_misread_is_refused(field, value):
    values = {"partition": "p", "command": ("true",), "activate": ("envkit",), field: value}
    with pytest.raises(BadInputError, match="cannot be passed to sbatch"):
        sbatch_script(JobSpec(**values))


@pytest.mark.parametrize("name", ["my job", "a$HOME", "x;y", "--begin=now", "-x", ".hidden", "+x", "", "é", "a" * 65])
def test_a_job_name_sbatch_could_misread_is_refused_not_rewritten(name):
    # It used to be rewritten silently ("my job" ran as my_job, "--begin=now" as begin_now).
    spec = JobSpec(partition="p", job_name=name, command=("true",), activate=("envkit",))
    with pytest.raises(BadInputError) as caught:
        sbatch_script(spec)
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith(f"--job-name {name!r} is not a job name")
    assert "letters, digits, '_', '.', '+' and '-', at most 64" in caught.value.message


def test_per_gpu_launches_torchrun_with_the_gpu_count():
    spec = JobSpec(partition="p", gpus=4, per_gpu=True, activate=("envkit", "run", "e", "--"),
                   command=("python", "train.py", "--x"))
    assert sbatch_script(spec).splitlines()[-1] == (
        "envkit run e -- torchrun --standalone --nproc-per-node=4 train.py --x")
    other = JobSpec(partition="p", per_gpu=True, activate=("envkit",), command=("./run.sh",))
    assert sbatch_script(other).splitlines()[-1] == "envkit torchrun --standalone --nproc-per-node=gpu --no-python " \
                                                    "./run.sh"


@pytest.mark.parametrize("pattern, path", [
    ("logs/%x-%j.out", "logs/train-42.out"), ("out-%6j.txt", "out-000042.txt"), ("%A_%N.out", "42_%N.out"),
    ("100%%-%j", "100%-42"), ("%%j.out", "%j.out"), ("plain.out", "plain.out"),
])
def test_the_output_file_named_after_submitting_is_the_one_sbatch_writes(pattern, path):
    # `envkit job --submit` said "its output goes to logs/%x-%j.out".
    from envkit.slurm.script import output_file

    assert output_file(pattern, "42", "train") == path


def _profile(count: int) -> MachineProfile:
    gpus = tuple(Gpu(index=i, name="NVIDIA A100-SXM4-40GB", compute_capability=ComputeCapability(8, 0))
                 for i in range(count))
    return MachineProfile(gpus=gpus)


def test_inside_a_job_only_the_visible_gpus_count_and_the_node_names_the_profile():
    context = job_context({"SLURM_JOB_ID": "17", "SLURMD_NODENAME": "a100-01", "CUDA_VISIBLE_DEVICES": "1,3"})
    seen = apply_job_context(_profile(4), context)
    assert [gpu.index for gpu in seen.gpus] == [1, 3]
    assert seen.name == "a100-01"
    assert any("job 17" in note and "CUDA_VISIBLE_DEVICES=1,3" in note and "2 of the 4" in note
               for note in seen.notes)


def test_a_job_given_no_gpus_sees_none_and_uuids_are_not_guessed():
    none = apply_job_context(_profile(2), job_context({"SLURM_JOB_ID": "5", "CUDA_VISIBLE_DEVICES": ""}))
    assert none.gpus == ()
    uuids = apply_job_context(_profile(2), job_context({"CUDA_VISIBLE_DEVICES": "GPU-4b1c,GPU-77aa"}))
    assert len(uuids.gpus) == 2 and any("UUID" in note for note in uuids.notes)


@pytest.mark.parametrize("value", ["-1", "NoDevFiles", "none", " "])
def test_every_value_that_hides_all_gpus_leaves_none_and_keeps_them_as_hidden(value):
    hidden = apply_job_context(_profile(2), job_context({"CUDA_VISIBLE_DEVICES": value}))
    assert hidden.gpus == () and [gpu.index for gpu in hidden.hidden_gpus] == [0, 1]
    assert hidden.whole().gpus == _profile(2).gpus and hidden.whole().hidden_gpus == ()


def test_the_list_is_read_as_cuda_reads_it_up_to_the_first_gpu_that_is_not_there():
    seen = apply_job_context(_profile(3), job_context({"CUDA_VISIBLE_DEVICES": "2,7,0"}))
    assert [gpu.index for gpu in seen.gpus] == [2] and [gpu.index for gpu in seen.hidden_gpus] == [0, 1]


def test_outside_a_job_without_cuda_visible_devices_nothing_changes():
    profile = _profile(2)
    assert apply_job_context(profile, job_context({})) is profile


def test_a_step_that_never_started_is_a_timeout_with_slurms_words():
    step = StepResult(False, 1, "", "srun: Partition in DOWN state\nsrun: job 3 queued and waiting for resources\n"
                      "srun: error: Unable to allocate resources: Requested nodes are busy\n", "envkit-survey-x")
    profile, why = profile_from_step(step, "n1", 5)
    assert profile is None
    assert why.startswith("timeout: the job did not start within 5 s (cancelled)")
    assert "Requested nodes are busy" in why


def test_a_node_that_cannot_run_envkit_says_what_to_do():
    stderr = "slurmstepd-n1: error: execve(): /home/u/venv/bin/python: No such file or directory\n"
    assert exec_failure(stderr) == "/home/u/venv/bin/python: No such file or directory"
    profile, why = profile_from_step(StepResult(True, 2, "", stderr, "j"), "n1", 5)
    assert profile is None and "cannot run envkit" in why and "shared home" in why


def test_an_aarch64_node_that_cannot_run_the_login_nodes_python_is_told_why():
    """Issue 43: a Grace partition surveyed from an x86_64 login node through a shared home: the node's kernel
    refuses the x86_64 interpreter (ENOEXEC), and the survey says so, with the two ways out."""
    stderr = "slurmstepd: error: execve(): /home/u/venv/bin/python: Exec format error\nsrun: error: gh-01: task 0\n"
    profile, why = profile_from_step(StepResult(True, 2, "", stderr, "j"), "gh-01", 5)
    assert profile is None and "/home/u/venv/bin/python: Exec format error" in why
    assert "built for another CPU than the node's" in why and "`envkit detect --json` on a node" in why


def test_a_surveyed_node_keeps_its_platform_and_l4t_into_the_site_file(tmp_path):
    """What `envkit detect --json` prints on a Grace node and on a Jetson reaches the site file, so that an x86_64
    login node plans for them (their profiles as tests/profiles has them, as detect writes them)."""
    import json

    from envkit.machines.profile import read_profile
    from envkit.site import Partition, Site, SiteNode, load_site
    from envkit.site.write import save_site

    nodes = []
    for name, node in (("gh200-r570-cuda128", "gh-01"), ("jetson-agx-orin-jp62", "orin-01")):
        printed = {**read_profile(Path(__file__).parents[1] / "profiles" / f"{name}.yaml").to_dict(), "name": node}
        profile, why = profile_from_step(StepResult(True, 0, json.dumps(printed), "", "j"), node, 5)
        assert why is None and profile.platform == "linux-aarch64"
        nodes.append(SiteNode(node=node, count=1, profile=profile))
    path = tmp_path / "site.yaml"
    save_site(Site(path=path, partitions={"arm": Partition(name="arm", nodes=tuple(nodes))}), path)
    again = load_site(path).partitions["arm"].nodes
    assert [(n.profile.platform, str(n.profile.l4t) if n.profile.l4t else None) for n in again] == [
        ("linux-aarch64", None), ("linux-aarch64", "36.4.3")]
    assert "platform: linux-aarch64" in path.read_text() and "l4t: 36.4.3" in path.read_text()


def test_a_sinfo_that_cannot_reach_slurm_is_one_line_and_a_next_step(tmp_path):
    # sinfo prints several error lines before its fatal one; the error used to carry them all and no next step.
    import os
    import shutil

    from envkit.slurm.client import Slurm

    if shutil.which("sinfo") is None:
        pytest.skip("Slurm's sinfo is not installed")
    (tmp_path / "slurm.conf").write_text("")
    slurm = Slurm(env={"PATH": os.environ["PATH"], "SLURM_CONF": str(tmp_path / "slurm.conf")})
    with pytest.raises(SlurmError) as failed:
        slurm.sinfo("%R")
    assert failed.value.message.startswith("sinfo failed: ") and "\n" not in failed.value.message
    assert "fatal" in failed.value.message and "sinfo` works on its own" in failed.value.hint


def test_per_gpu_never_hands_pythons_options_or_a_dash_command_to_torchrun():
    # `python -u train.py` used to become `torchrun ... -u train.py`: torchrun read -u as its own option.
    def last(*command):
        return sbatch_script(JobSpec(partition="p", gpus=2, per_gpu=True, activate=("envkit", "run", "e", "--"),
                                     command=command)).splitlines()[-1]

    assert last("python", "-u", "train.py") == ("envkit run e -- torchrun --standalone --nproc-per-node=2 "
                                                "--no-python python -u train.py")
    assert last("python", "-m", "pkg.train") == "envkit run e -- torchrun --standalone --nproc-per-node=2 -m pkg.train"
    assert last("python") == "envkit run e -- torchrun --standalone --nproc-per-node=2 --no-python python"
    for command in (("-m", "x"), ("--help",), ("",)):
        with pytest.raises(BadInputError, match="must start with the program"):
            last(*command)


@pytest.mark.parametrize("field, value, words", [
    ("cpus", 99999999999999999999, "--cpus must be a whole number from 1 to 8192"),
    ("cpus", 8193, "--cpus must be a whole number from 1 to 8192"),
    ("cpus", 0, "--cpus must be a whole number from 1 to 8192"),
    ("gpus", 10 ** 6, "--gpus must be a whole number from 1 to 1024"),
    ("time", "99999999999999999999", "longer than Slurm can ask for"),
    ("time", "99999999999-00:00:00", "longer than Slurm can ask for"),
    ("time", "1" * 5000, "longer than Slurm can ask for"),  # (int() refuses more than 4300 digits)
    ("time", "1:2:3:4", "not a time limit sbatch reads"),
    ("time", "１:00:00", "cannot be passed to sbatch"),
    ("time", "soon", "not a time limit sbatch reads"),
])
def test_numbers_sbatch_would_misread_or_refuse_are_bad_input(field, value, words):
    values = {"partition": "p", "command": ("true",), "activate": ("envkit",), field: value}
    with pytest.raises(BadInputError, match=words):
        sbatch_script(JobSpec(**values))


@pytest.mark.parametrize("time", ["90", "1:30", "1:30:00", "2-0", "2-00:30", "2-00:00:00", "UNLIMITED", "infinite",
                                  "4294967293"])
def test_every_time_limit_form_sbatch_reads_is_written(time):
    script = sbatch_script(JobSpec(partition="p", command=("true",), activate=("envkit",), time=time, cpus=8192))
    assert f"#SBATCH --time={time}\n" in script and "#SBATCH --cpus-per-task=8192\n" in script


@pytest.mark.parametrize("value, shown", [("²", []), ("１", []), ("0,²", [0]), ("abc", []), ("1,abc,0", [1]),
                                          ("0,GPU-4b1c", [0, 1])])
def test_what_names_no_gpu_ends_the_list_as_cuda_reads_it(value, shown):
    seen = apply_job_context(_profile(2), job_context({"CUDA_VISIBLE_DEVICES": value}))  # (int('²') would raise)
    assert [gpu.index for gpu in seen.gpus] == shown
    assert any(f"CUDA_VISIBLE_DEVICES={value}" in note for note in seen.notes)
    assert hides_all(value, 2) is (shown == [])  # the matchers' judgement agrees: a first entry naming no GPU
