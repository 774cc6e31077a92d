"""The pure parts of the work across nodes: the launch lines of `envkit job --nodes` per framework (their quoting,
and the shell that builds TF_CONFIG run for real by bash), the bad node counts, the rendezvous port, scontrol's
NodeAddr, srun --label's output, and the diagnosis of a cross-node all-reduce."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from envkit.commands.nodes_report import read_tasks
from envkit.errors import BadInputError
from envkit.probe.cross_node import bandwidth, diagnose, differences
from envkit.slurm.multinode import check_nodes, labelled_lines, node_address, rendezvous_port
from envkit.slurm.script import JobSpec, sbatch_script

TRICKY = ["a b", "it's", "$HOME", "`id`", "; rm -rf /"]
ACTIVATE = ("/usr/bin/python3", "-m", "envkit", "run", "my env", "--")


def _script(framework, command=("python", "train.py", *TRICKY), **extra):
    return sbatch_script(JobSpec(partition="gpu", command=tuple(command), activate=ACTIVATE, nodes=2, gpus=4,
                                 framework=framework, **extra))


def _launch(script: str) -> list[str]:
    """The words of the script's srun line, as bash reads them."""
    [line] = [line for line in script.splitlines() if line.startswith("srun ")]
    return shlex.split(line)


def test_torch_across_nodes_is_one_torchrun_per_node_with_a_c10d_rendezvous_on_the_first_node():
    script = _script("torch", per_gpu=True)
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n" in script
    assert "#SBATCH --gpus-per-node=4\n" in script
    assert 'scontrol show node -o "$first_node"' in script and "NodeAddr" in script
    assert 'export MASTER_PORT="${MASTER_PORT:-$(( 20000 + SLURM_JOB_ID % 10000 ))}"' in script
    words = _launch(script)
    assert words[:4] == ["srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert words[4:10] == list(ACTIVATE)
    assert words[10:17] == ["torchrun", "--nnodes=$SLURM_NNODES", "--nproc-per-node=4", "--rdzv-backend=c10d",
                            "--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT", "--rdzv-id=envkit-$SLURM_JOB_ID",
                            "train.py"]
    assert words[17:] == TRICKY  # every user word exactly as given
    assert "--standalone" not in script


def test_torch_without_per_gpu_runs_one_process_per_node_and_other_programs_go_through_no_python():
    words = _launch(_script("torch", command=("./run.sh", "-x")))
    assert "--nproc-per-node=1" in words and words[-3:] == ["--no-python", "./run.sh", "-x"]


def test_the_tensorflow_launch_gives_each_task_its_tf_config_and_runs_the_command_exactly(tmp_path):
    script = _script("tensorflow", command=("python3", "-c", "import os, sys; print(os.environ['TF_CONFIG']); "
                                            "print(sys.argv[1:])", *TRICKY))
    [line] = [line for line in script.splitlines() if line.startswith("srun ")]
    words = shlex.split(line)
    assert words[4:6] == ["bash", "-c"] and words[7] == "envkit-job" and words[8:14] == list(ACTIVATE)
    # What srun would start on task 1, run by bash for real (the environment's activation left out).
    env = {"PATH": os.environ["PATH"], "SLURM_PROCID": "1",
           "ENVKIT_TF_WORKERS": '["10.0.0.1:20042","10.0.0.2:20042"]'}
    done = subprocess.run(["bash", "-c", words[6], "envkit-job", *words[14:]], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    config, argv = done.stdout.splitlines()
    assert json.loads(config) == {"cluster": {"worker": ["10.0.0.1:20042", "10.0.0.2:20042"]},
                                  "task": {"type": "worker", "index": 1}}
    assert argv == repr(TRICKY)


def test_the_tensorflow_worker_list_is_built_from_every_nodes_address(tmp_path):
    script = _script("tensorflow")
    start = script.index('workers=""')
    loop = script[start:script.index("export ENVKIT_TF_WORKERS")] + 'echo "[$workers]"\n'
    fake = tmp_path / "scontrol"  # a stand-in for scontrol: two nodes, each with its NodeAddr
    fake.write_text("#!/bin/bash\nif [ \"$2\" = hostnames ]; then echo n1; echo n2; "
                    "else echo \"NodeName=$4 Arch=x NodeAddr=10.1.0.${4#n} NodeHostName=$4\"; fi\n")
    fake.chmod(0o755)
    done = subprocess.run(["bash", "-c", loop], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{tmp_path}:{os.environ['PATH']}", "MASTER_PORT": "20001",
                               "SLURM_JOB_NODELIST": "n[1-2]"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["10.1.0.1:20001", "10.1.0.2:20001"]


def test_the_jax_launch_is_one_task_per_node_with_the_coordinator_at_the_first_nodes_address():
    script = _script("jax")
    assert 'export JAX_COORDINATOR_ADDRESS="${JAX_COORDINATOR_ADDRESS:-$MASTER_ADDR:$MASTER_PORT}"' in script
    assert _launch(script)[4:] == [*ACTIVATE, "python", "train.py", *TRICKY]


def test_a_framework_without_a_launch_across_nodes_is_bad_input():
    with pytest.raises(BadInputError) as caught:
        _script("mxnet")
    assert caught.value.exit_code == 2 and "this environment has mxnet" in caught.value.message


@pytest.mark.parametrize("nodes, named, available, words", [
    (0, (), 4, "--nodes 0: a job needs at least 1 node"),
    (5, (), 4, "--nodes 5: partition gpu has 4 node(s) (sinfo)"),
    (3, ("a", "b"), 4, "--partition gpu:a,b names only 2 node(s)"),
    (2, ("node-a100", "node-a100"), 4, "--partition gpu:node-a100,node-a100 names the node node-a100 twice"),
])
def test_node_counts_a_job_cannot_have_are_bad_input(nodes, named, available, words):
    with pytest.raises(BadInputError) as caught:
        check_nodes(nodes, named, available, "gpu")
    assert caught.value.exit_code == 2 and words in caught.value.message
    assert check_nodes(2, ("a", "b"), 4, "gpu") == 2


def test_the_rendezvous_port_is_derived_from_the_job_id_below_the_ephemeral_ports():
    assert rendezvous_port("123456") == 20000 + 3456 == rendezvous_port("3456")
    assert all(20000 <= rendezvous_port(str(job)) < 30000 for job in (0, 9999, 10000, 4294967295))
    with pytest.raises(BadInputError):
        rendezvous_port("12; rm")


def test_node_addr_is_read_from_scontrol_and_labelled_output_is_split_by_task():
    text = "NodeName=gpu-a1 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.2.3.4 NodeHostName=gpu-a1 Version=23.02"
    assert node_address(text) == "10.2.3.4" and node_address("NodeName=x") is None
    assert labelled_lines("0: {\"a\"\n1: x\n0: : 1}\nsrun: warning\n") == {
        0: ['{"a"', ': 1}'], 1: ["x"], -1: ["srun: warning"]}


def _rank(rank, **extra):
    result = {"rank": rank, "world_size": 2, "address": "10.0.0.1", "port": 20042, "timeout": 15.0,
              "local_address": "10.0.0.2", "interface": "eth0", "backend": "nccl", "phase": "all_reduce",
              "ok": True, "correct": True, "expected": 3.0, "got": 3.0, "bytes": 2 ** 20, "seconds_per_op": 0.001,
              "error": None}
    result.update(extra)
    return result


NODES = [{"node": "n1", "ok": True, "version": "2.5.0", "cuda": "12.4", "driver": "550.54"},
         {"node": "n2", "ok": True, "version": "2.5.0", "cuda": "12.4", "driver": "550.54"}]


def test_a_rendezvous_that_timed_out_names_the_address_the_interface_and_the_variables():
    stuck = _rank(1, ok=False, phase="rendezvous", correct=None, error={
        "where": "rendezvous", "type": "DistStoreError", "message": "Timed out after 16 seconds waiting for clients"})
    [found] = diagnose(NODES, [_rank(0, ok=False, phase="rendezvous", error=stuck["error"]), stuck])[:1]
    assert found["rule"] == "rendezvous-timeout"
    assert "the rendezvous at 10.0.0.1:20042" in found["cause"] and "from 10.0.0.2 on interface eth0" in found["cause"]
    for variable in ("MASTER_ADDR", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "MASTER_PORT"):
        assert variable in found["advice"]


@pytest.mark.parametrize("message, meaning", [
    ("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details)",
     "NCCL_SOCKET_IFNAME"),
    ("NCCL error: unhandled cuda error, NCCL version 2.21.5", "NCCL_P2P_DISABLE"),
    ("NCCL communicator was aborted: remote process exited or there was a network error", "other nodes' reports"),
])
def test_nccl_error_strings_are_mapped_to_their_meaning(message, meaning):
    failed = _rank(1, ok=False, correct=None, error={"where": "all_reduce", "type": "DistBackendError",
                                                       "message": message})
    [found] = diagnose(NODES, [_rank(0), failed])
    assert found["rule"] == "nccl-error" and found["cause"].startswith("on n2, NCCL said")
    assert meaning in found["advice"]


def test_nodes_with_different_builds_or_drivers_are_said_even_when_the_check_passes():
    nodes = [NODES[0], {**NODES[1], "version": "2.4.1", "driver": "535.129.03"}]
    rules = {note["rule"]: note for note in differences(nodes)}
    assert "n1: 2.5.0 (CUDA 12.4); n2: 2.4.1 (CUDA 12.4)" in rules["builds-differ"]["cause"]
    assert "n1: 550.54; n2: 535.129.03" in rules["drivers-differ"]["cause"]
    assert differences(NODES) == []


def test_the_bus_bandwidth_is_that_of_the_slowest_node():
    algbw, busbw = bandwidth([_rank(0, seconds_per_op=0.001), _rank(1, seconds_per_op=0.002)])
    assert algbw == round(2 ** 20 / 0.002 / 1e9, 3) and busbw == algbw  # 2 (n - 1) / n = 1 for two nodes
    assert bandwidth([_rank(0, seconds_per_op=None)]) == (None, None)


def test_a_node_that_printed_no_report_is_named_and_fails_the_whole_check():
    report = {"ok": True, "framework": "torch", "version": "2.5.0", "cuda": "12.4", "diagnosis": [],
              "machine": {"driver_version": "550.54"}}
    stdout = "\n".join([f"0: {json.dumps({'envkit_node': 'n1'})}", f"0: {json.dumps({'cross_node': _rank(0)})}",
                        f"0: {json.dumps(report)}", f"1: {json.dumps({'envkit_node': 'n2'})}"])
    outcome = read_tasks(stdout, "1: envkit: error: no such environment here\n", 2, "gpu")
    assert [n["node"] for n in outcome["nodes"]] == ["n1", "n2"] and outcome["ok"] is False
    assert outcome["nodes"][1]["why"] == ["envkit: error: no such environment here"]
    assert outcome["diagnosis"][0]["rule"] == "node-did-not-join" and "n2" in outcome["diagnosis"][0]["cause"]


def test_each_pair_of_nodes_gets_its_bandwidth_and_a_slow_one_is_named():
    from envkit.probe.cross_node import pair_bandwidths

    mib = 4 * 2 ** 20
    times = {"0-1": 0.001, "0-2": 0.001, "1-2": 0.004}  # the link between n2 and n3 is four times slower
    ranks = [_rank(r, pair_bytes=mib, pairs={k: v for k, v in times.items() if str(r) in k.split("-")})
             for r in range(3)]
    ranks[2]["pairs"]["1-2"] = 0.005  # the slower rank of a pair counts
    pairs = pair_bandwidths(["n1", "n2", "n3"], ranks)
    assert [(p["nodes"], p["slow"]) for p in pairs] == [(["n1", "n2"], False), (["n1", "n3"], False),
                                                        (["n2", "n3"], True)]
    assert pairs[2]["busbw_gbs"] == round(mib / 0.005 / 1e9, 3)
    [note] = differences([{**n, "node": name} for n, name in zip(NODES * 2, ["n1", "n2", "n3"])], pairs)
    assert note["rule"] == "slow-pair" and note["cause"].startswith("the link between n2 and n3 (0.839 GB/s) is slow")
    assert "NCCL_SOCKET_IFNAME" in note["advice"]
    assert differences(NODES, pairs[:2]) == []


DATA = Path(__file__).parent / "data"


def test_what_the_worker_printed_on_a_real_h100_is_read_and_diagnosed():
    # Captured on one H100 (torch 2.11.0+cu130): rank 0 of 1 over NCCL; rank 1 of 2 alone, whose first node never
    # came (the client socket's own words on a timed-out rendezvous).
    alone = json.loads((DATA / "cross-node-h100-nccl-world1.json").read_text())
    assert alone["backend"] == "nccl" and alone["ok"] and alone["got"] == alone["expected"] == 1.0
    assert bandwidth([alone])[0] > 0
    waiting = json.loads((DATA / "cross-node-h100-nccl-rendezvous-timeout.json").read_text())
    [found] = diagnose(NODES, [_rank(0), waiting])
    assert found["rule"] == "rendezvous-timeout"
    assert found["cause"].startswith("the rendezvous at 127.0.0.1:29556 (the first node, at the address Slurm has "
                                     "for it) did not complete within 10 s: n2 reached it from 127.0.0.1 on "
                                     "interface lo")


def test_a_framework_without_an_all_reduce_across_nodes_is_said_never_failed():
    # MXNet: every rank says it ran none; the nodes passed: PASS, saying what was not checked.
    skipped = "envkit runs no all-reduce across nodes for mxnet: each node's own check ran; the network ..."
    report = {"ok": True, "framework": "mxnet", "version": "1.9.1", "cuda": None, "diagnosis": [], "machine": {}}
    stdout = "\n".join(f"{task}: {json.dumps(document)}" for task in (0, 1) for document in (
        {"envkit_node": f"n{task + 1}"},
        {"cross_node": _rank(task, ok=None, skipped=skipped, framework="mxnet", backend=None, correct=None, got=None)},
        report))
    outcome = read_tasks(stdout, "", 2, "gpu")
    assert outcome["ok"] is True and outcome["diagnosis"] == []
    reduce = outcome["all_reduce"]
    assert (reduce["ok"], reduce["skipped"], reduce["framework"], reduce["results"]) == (None, skipped, "mxnet", [])
    # A node that failed its own check: the FAIL is that node's, nothing is said of the all-reduce.
    failed = read_tasks(stdout.replace('"ok": true, "framework": "mxnet"', '"ok": false, "framework": "mxnet"', 1),
                        "", 2, "gpu")
    assert failed["ok"] is False and failed["diagnosis"] == []


@pytest.mark.parametrize("framework, words", [
    ("torch", "TORCH_DISTRIBUTED_DEBUG=DETAIL"),
    ("jax", "TF_CPP_MIN_LOG_LEVEL=0 (JAX's own log)"),
    ("tensorflow", "TF_CPP_MIN_LOG_LEVEL=0 (TensorFlow's own log)"),
])
def test_a_failed_all_reduce_is_advised_in_its_frameworks_own_terms(framework, words):
    failed = _rank(1, ok=False, correct=None, framework=framework,
                   error={"where": "all_reduce", "type": "XlaRuntimeError", "message": "the collective stopped"})
    [found] = diagnose(NODES, [_rank(0), failed])
    assert found["rule"] == "all-reduce-failed" and words in found["advice"]
    missing = f"No module named '{framework}'"
    not_there = _rank(1, ok=False, correct=None, framework=framework, phase="import",
                      error={"where": "import", "type": "ModuleNotFoundError", "message": missing})
    [found] = diagnose(NODES, [_rank(0), not_there])
    assert found["rule"] == "framework-not-imported" and found["cause"] == (
        f"on n2, the all-reduce could not start {framework}: {missing}")


def test_a_worker_that_died_at_the_rendezvous_is_read_by_how_far_it_got(tmp_path):
    # JAX ends the process (SIGABRT, glog's fatal line) when its coordinator does not answer: no result, but the
    # phase it said it entered, and its fatal line, give the rendezvous diagnosis.
    from envkit.probe.cross_node import run_rank

    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n"
                      "echo 'envkit-cross-node: rendezvous 10.0.0.1:20042 from 10.0.0.2 on eth0' >&2\n"
                      "echo 'F1128 14:05:57.627971   28345 client.h:80] Terminating process because the JAX "
                      "distributed service detected fatal errors. absl::Status: DEADLINE_EXCEEDED: Deadline "
                      "Exceeded' >&2\necho 'RPC: /xla.coordination.CoordinationService/RegisterTask' >&2\n"
                      "echo '*** Check failure stack trace: ***' >&2\necho '    @     0x7fce9e703b62  abort' >&2\n"
                      "kill -ABRT $$\n")
    python.chmod(0o755)
    result = run_rank(python, "jax", 1, 2, ["10.0.0.1", "10.0.0.2"], 20042, 10.0, {"PATH": "/usr/bin:/bin"},
                      cache_dir=tmp_path / "cache")
    assert (result["phase"], result["local_address"], result["interface"]) == ("rendezvous", "10.0.0.2", "eth0")
    assert result["error"]["message"].endswith(
        "was ended by signal 6 and printed no result: Terminating process because the JAX distributed service "
        "detected fatal errors. absl::Status: DEADLINE_EXCEEDED: Deadline Exceeded RPC: "
        "/xla.coordination.CoordinationService/RegisterTask")
    [found] = diagnose(NODES, [_rank(0), result])
    assert found["rule"] == "rendezvous-timeout" and "from 10.0.0.2 on interface eth0" in found["cause"]
