"""Beyond one node, on the real two-node Slurm with the real PyTorch CPU wheel: `envkit verify --nodes 2` (each
node's check and a real gloo all-reduce between the two slurmd nodes) and `envkit job --nodes 2` (a real two-node
torchrun), with the failures people meet: a node whose environment is broken, a rendezvous port that is blocked."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from slurm_helpers import add_stand_ins, envkit, make_fake_env, make_jax_env, record_env, wait_done

from envkit.state import records
from envkit.state.userdirs import user_dirs

NAME = "torch-cpu"


@pytest.fixture(scope="module")
def torch_env(cluster_user):
    """A venv with the real torch 2.13.0 CPU wheel (pip finds it on this machine without a download) and stand-ins of
    its companions, recorded as if `envkit create torch --build torch-2.13-cpu` had made it: (the user's environment,
    its home, the prefix)."""
    from support.local_wheels import find_torch_cpu_wheel

    wheel = find_torch_cpu_wheel()  # torch==2.13.0 as pip finds it here, named so that no other build is fetched
    if wheel is None:
        pytest.skip("no PyTorch CPU wheel for this Python on this machine (pip's find-links)")
    env, home = cluster_user
    root = home / "envs" / NAME
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True, timeout=120)
    done = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.skip(f"pip could not install torch==2.13.0 here: {done.stderr.strip()[-300:]}")
    # No CPU torchvision or torchaudio is at hand: stand-ins whose operations run on the real torch (the check runs
    # every companion the build installs)
    add_stand_ins(root, ("torchvision", "torchaudio"), {"torchvision": "0.28.0", "torchaudio": "2.11.0"})
    record = records.Record(
        name=NAME, prefix=str(root), kind="venv", backend="venv", manifest="torch", build="torch-2.13-cpu",
        python=f"{sys.version_info[0]}.{sys.version_info[1]}",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine={}, on_target=False)
    records.save(record, user_dirs(env).records)
    return env, home, root


def _verify(env, *extra: str, name: str = NAME, prefix=None):
    which = [name] if prefix is None else ["--prefix", str(prefix)]
    return envkit("verify", *which, "--partition", "part-a", "--nodes", "2", "--probe-timeout", "60", *extra,
                  env=env, timeout=400)


@pytest.mark.real_torch
def test_verify_on_two_nodes_runs_a_real_gloo_all_reduce_between_them_and_passes(slurm_site, torch_env):
    env, _, root = torch_env
    done = _verify(env, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["ok"] is True
    assert [n["node"] for n in outcome["nodes"]] == ["gpu-a1", "gpu-a2"]
    assert all(n["ok"] and n["version"] == "2.13.0+cpu" for n in outcome["nodes"])
    reduce = outcome["all_reduce"]
    assert reduce["backend"] == "gloo" and reduce["ok"] and reduce["correct"]
    assert reduce["results"] == [3.0, 3.0] and reduce["expected"] == 3.0  # rank r gives r + 1
    assert reduce["address"] == "127.0.0.1"  # gpu-a1's NodeAddr, not its name
    assert reduce["busbw_gbs"] > 0 and reduce["bytes"] == 16 * 2 ** 20
    assert {r["interface"] for r in reduce["ranks"]} == {"lo"}
    verify = records.load(user_dirs(env).records, NAME).verify
    assert verify["ok"] is True and verify["nodes"] == ["gpu-a1", "gpu-a2"]
    assert verify["all_reduce"]["backend"] == "gloo"

    text = _verify(env)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "Across 2 nodes of part-a: gpu-a1, gpu-a2" in text.stdout
    assert "gpu-a2: PASS (2.13.0+cpu" in text.stdout
    assert "All-reduce across 2 nodes (torch.distributed all_reduce, gloo, 16 MiB per node" in text.stdout
    assert "bus bandwidth" in text.stdout
    assert text.stdout.rstrip().endswith("PASS: every node passed and the all-reduce across them is right")

    # Given by its directory, as verify takes it on one node: with no recorded build to judge by, a CPU-only build
    # on nodes with GPUs fails on each node, as it does on one; the all-reduce across them still ran, and is right.
    bare = _verify(env, prefix=root)
    assert bare.returncode == 1, bare.stdout + bare.stderr
    for node in ("gpu-a1", "gpu-a2"):
        assert f"{node}: FAIL (2.13.0+cpu, CUDA none): torch 2.13.0+cpu is a CPU-only build" in bare.stdout
    assert "(expected 3): right" in bare.stdout and "FAIL: gpu-a1, gpu-a2 failed" in bare.stdout

    # doctor, of an environment envkit did not make: the same check across the nodes, by its Python.
    doctor = envkit("doctor", "--python", str(root / "bin" / "python"), "-p", "part-a", "--nodes", "2",
                    "--probe-timeout", "60", "--json", env=env, timeout=400)
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    outcome = json.loads(doctor.stdout)
    assert [n["node"] for n in outcome["nodes"]] == ["gpu-a1", "gpu-a2"] and not any(n["ok"] for n in outcome["nodes"])
    assert outcome["all_reduce"]["ok"] and outcome["all_reduce"]["results"] == [3.0, 3.0]
    alone = envkit("doctor", "--python", str(root / "bin" / "python"), "--nodes", "2", env=env)
    assert alone.returncode == 2 and "--nodes checks nodes of a Slurm partition: add --partition P" in alone.stderr


@pytest.mark.real_torch
def test_three_nodes_of_a_mixed_partition_give_each_pair_its_bandwidth_and_the_drivers_that_differ(slurm_site,
                                                                                                     torch_env):
    # mixed: gpu-a1 and gpu-a2 (two A100, driver 535) and gpu-v1 (one V100, driver 470): one GPU per node is asked
    # (the fewest any node has), and the check says that the drivers differ, though the CPU build passes on all.
    env, _, _ = torch_env
    done = envkit("verify", NAME, "--partition", "mixed", "--nodes", "3", "--probe-timeout", "60", "--json",
                  env=env, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert [n["node"] for n in outcome["nodes"]] == ["gpu-a1", "gpu-a2", "gpu-v1"] and outcome["ok"]
    reduce = outcome["all_reduce"]
    assert reduce["results"] == [6.0, 6.0, 6.0] and reduce["backend"] == "gloo"
    assert [p["nodes"] for p in reduce["pairs"]] == [["gpu-a1", "gpu-a2"], ["gpu-a1", "gpu-v1"],
                                                     ["gpu-a2", "gpu-v1"]]
    assert all(p["busbw_gbs"] > 0 for p in reduce["pairs"])
    [drivers] = [n for n in outcome["notes"] if n["rule"] == "drivers-differ"]
    assert "gpu-a1: 535.129.03; gpu-a2: 535.129.03; gpu-v1: 470.82.01" in drivers["cause"]


@pytest.mark.real_torch
def test_a_node_whose_python_is_missing_there_fails_with_that_node_named(slurm_site, torch_env, tmp_path):
    env, home, root = torch_env
    # A stand-in for a node that does not mount the environment: its python answers "not found" on gpu-a2 alone
    # (the node's envkit, the python's parent, runs in gpu-a2's job step).
    broken = home / "envs" / "torch-broken"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(broken)],
                   check=True, capture_output=True, timeout=60)
    real = root / "bin" / "python"
    wrapper = broken / "bin" / "python"
    wrapper.unlink()
    wrapper.write_text("#!/bin/bash\n"
                       "if tr '\\0' '\\n' < /proc/$PPID/environ | grep -qx SLURMD_NODENAME=gpu-a2; then\n"
                       f"  echo \"{wrapper}: No such file or directory\" >&2; exit 127\nfi\n"
                       f"exec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    record = records.load(user_dirs(env).records, NAME)
    import dataclasses

    records.save(dataclasses.replace(record, name="torch-broken", prefix=str(broken)), user_dirs(env).records)
    done = _verify(env, "--json", name="torch-broken")
    assert done.returncode == 1, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    by_node = {n["node"]: n for n in outcome["nodes"]}
    assert by_node["gpu-a1"]["ok"] is True and by_node["gpu-a2"]["ok"] is False
    assert outcome["ok"] is False and outcome["all_reduce"]["ok"] is False
    [joined] = [d for d in outcome["diagnosis"] if d["rule"] == "node-did-not-join"]
    assert joined["cause"].startswith("gpu-a2 did not take part in the all-reduce")
    verify = records.load(user_dirs(env).records, "torch-broken").verify
    assert verify["ok"] is False and verify["nodes"] == ["gpu-a1", "gpu-a2"]


@pytest.mark.real_torch
def test_a_blocked_rendezvous_port_gives_the_rendezvous_diagnosis(slurm_site, torch_env):
    env, _, _ = torch_env
    with socket.socket() as blocker:  # something else holds the port: no rendezvous can happen there
        blocker.bind(("0.0.0.0", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        done = _verify({**env, "MASTER_PORT": str(port)}, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert all(n["ok"] for n in outcome["nodes"])  # each node alone is fine: the fabric is not
    assert outcome["all_reduce"]["ok"] is False and outcome["all_reduce"]["port"] == port
    rules = {d["rule"]: d for d in outcome["diagnosis"]}
    assert "rendezvous-port-taken" in rules or "rendezvous-timeout" in rules, outcome["diagnosis"]
    words = " ".join(d["cause"] + " " + d["advice"] for d in outcome["diagnosis"])
    assert f"127.0.0.1:{port}" in words or f"port {port} on 127.0.0.1" in words
    assert "MASTER_PORT" in words


@pytest.mark.real_torch
def test_job_on_two_nodes_runs_a_real_torchrun_on_each_and_every_rank_sees_the_world(slurm_site, torch_env,
                                                                                      tmp_path):
    env, _, _ = torch_env
    program = tmp_path / "ranks.py"
    program.write_text(
        "import os, socket, torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "t = torch.ones(1); dist.all_reduce(t)\n"
        # one string, one write: four processes share the job's output file (print's pieces interleaved there)
        "os.write(1, f\"rank {dist.get_rank()} of {dist.get_world_size()} sum {int(t.item())} node \"\n"
        "            f\"{os.environ['SLURMD_NODENAME']} local {os.environ['LOCAL_RANK']}\\n\".encode())\n"
        "dist.destroy_process_group()\n")
    done = envkit("job", NAME, "-p", "part-a", "--nodes", "2", "--per-gpu", "--time", "5", "--submit", "--",
                  "python", str(program), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    wait_done(slurm_site, job, timeout=300)
    output = (tmp_path / f"slurm-{job}.out").read_text()
    lines = sorted(line for line in output.splitlines() if line.startswith("rank "))
    assert [line.split()[:6] for line in lines] == [["rank", str(r), "of", "4", "sum", "4"] for r in range(4)], output
    assert {line.split()[7] for line in lines} == {"gpu-a1", "gpu-a2"}  # two processes (one per GPU) per node


@pytest.mark.parametrize("args, words", [
    (["--nodes", "0"], "--nodes 0: a job needs at least 1 node"),
    (["--nodes", "3"], "--nodes 3: partition part-a has 2 node(s) (sinfo)"),
    (["--nodes", "2", "-p", "part-a:gpu-a1"], "names only 1 node(s)"),
    (["--nodes", "2", "-p", "part-a:gpu-a1,gpu-a1"], "names the node gpu-a1 twice"),  # a job ran, "did not run"
])
def test_bad_node_counts_are_exit_2_before_any_job(slurm_site, cluster_user, args, words):
    env, _ = cluster_user
    partition = [] if "-p" in args else ["-p", "part-a"]
    for command in (["job", "torch-test", *partition, *args, "--submit", "--", "true"],
                    ["verify", "torch-test", *(["--partition", "part-a"] if not partition == [] else []), *args]):
        done = envkit(*command, env=env)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert words in done.stderr and "Traceback" not in done.stderr
        assert len([line for line in done.stderr.splitlines() if line.startswith("envkit: error")]) == 1
    assert slurm_site.cluster.jobs() == []


@pytest.fixture(scope="module")
def jax_env(cluster_user):
    """A venv with the real JAX CPU wheels of the test extra, recorded as the jax manifest's CPU build of their line:
    (the user's environment, the prefix, the JAX version)."""
    env, home = cluster_user
    root = home / "envs" / "jax-cpu"
    version = make_jax_env(root, env)
    return env, root, version


def _passed_on_two_nodes(env, name: str, version: str) -> dict:
    """`verify NAME -p part-a --nodes 2 --json`, which must PASS on both nodes with ``version`` and a right sum
    (rank r gives r + 1), never a word of torch: its all-reduce."""
    done = _verify(env, "--json", name=name)
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["ok"] is True and "torch" not in done.stdout
    assert [(n["node"], n["ok"], n["version"]) for n in outcome["nodes"]] == [("gpu-a1", True, version),
                                                                               ("gpu-a2", True, version)]
    reduce = outcome["all_reduce"]
    assert reduce["ok"] and reduce["correct"] and reduce["results"] == [3.0, 3.0] and reduce["busbw_gbs"] > 0
    return reduce


def test_verify_on_two_nodes_of_a_jax_environment_runs_a_real_psum_across_them_with_jax_itself(slurm_site, jax_env):
    # The environment has JAX and no torch: the check across the nodes is JAX's own (jax.distributed, then a psum
    # across the two processes over gloo), never torch's ("No module named 'torch'" was its FAIL).
    env, _, version = jax_env
    reduce = _passed_on_two_nodes(env, "jax-cpu", version)
    assert (reduce["framework"], reduce["method"], reduce["backend"]) == ("jax", "jax.distributed psum", "gloo")
    assert reduce["address"] == "127.0.0.1" and reduce["busbw_gbs"] > 0
    assert all(r["rendezvous_seconds"] >= 0 and r["seconds_per_op"] > 0 for r in reduce["ranks"])
    verify = records.load(user_dirs(env).records, "jax-cpu").verify
    assert verify["ok"] is True and verify["all_reduce"]["framework"] == "jax"


def test_verify_on_two_nodes_of_an_mxnet_environment_says_what_was_checked_and_what_was_not(slurm_site,
                                                                                             cluster_user):
    # MXNet (retired) has no all-reduce envkit runs across nodes: each node's own check runs and passes, and the
    # report says that nothing across the nodes was checked; it is no FAIL for a missing torch.
    env, home = cluster_user
    make_fake_env(home / "envs" / "mx-cpu", env, "mx-cpu", "mxnet", "mxnet-1.9.1-cpu",
                  {"mxnet": {"version": "1.9.1", "cuda": None}}, {"mxnet": "1.9.1"})
    text = _verify(env, name="mx-cpu")
    assert text.returncode == 0, text.stdout + text.stderr
    assert "gpu-a1: PASS (1.9.1, CUDA none)" in text.stdout and "gpu-a2: PASS (1.9.1" in text.stdout
    assert ("Across the 2 nodes: not checked: envkit runs no all-reduce across nodes for mxnet: each node's own "
            "check ran; the network between the nodes and a collective across them were not checked") in text.stdout
    assert text.stdout.rstrip().endswith("PASS: every node passed; nothing across the nodes was checked")
    assert "torch" not in text.stdout + text.stderr and "FAIL" not in text.stdout
    done = _verify(env, "--json", name="mx-cpu")
    outcome = json.loads(done.stdout)
    assert done.returncode == 0 and outcome["ok"] is True and outcome["diagnosis"] == []
    reduce = outcome["all_reduce"]
    assert reduce["ok"] is None and reduce["framework"] == "mxnet" and "for mxnet" in reduce["skipped"]
    assert reduce["correct"] is None and reduce["results"] == []


def test_a_jax_job_on_two_nodes_initializes_jax_distributed_from_slurms_variables(slurm_site, jax_env, tmp_path):
    env, _, _ = jax_env
    program = tmp_path / "procs.py"
    program.write_text(
        "import os, jax\n"
        "jax.distributed.initialize()\n"
        "from jax.experimental import multihost_utils\n"
        "multihost_utils.sync_global_devices('envkit')  # every process meets the others\n"
        "print('process', jax.process_index(), 'of', jax.process_count(), 'node', os.environ['SLURMD_NODENAME'],\n"
        "      'coordinator', os.environ['JAX_COORDINATOR_ADDRESS'], flush=True)\n"
        "jax.distributed.shutdown()\n")
    refused = envkit("job", "jax-cpu", "-p", "part-a", "--nodes", "2", "--per-gpu", "--", "python", str(program),
                     env=env, cwd=tmp_path)
    assert refused.returncode == 2 and "--per-gpu starts one process per GPU with torchrun" in refused.stderr
    done = envkit("job", "jax-cpu", "-p", "part-a", "--nodes", "2", "--time", "5", "--submit", "--",
                  "python", str(program), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    wait_done(slurm_site, job, timeout=300)
    output = (tmp_path / f"slurm-{job}.out").read_text()
    lines = sorted(line.split() for line in output.splitlines() if line.startswith("process "))
    assert [words[:4] for words in lines] == [["process", "0", "of", "2"], ["process", "1", "of", "2"]], output
    assert [words[5] for words in lines] == ["gpu-a1", "gpu-a2"]
    port = 20000 + int(job) % 10000
    assert {words[7] for words in lines} == {f"127.0.0.1:{port}"}  # gpu-a1's NodeAddr and the job's port


def test_a_check_across_nodes_that_cannot_start_is_not_run_and_its_job_cancelled(slurm_site, cluster_user):
    # Both nodes are needed at once: one of them busy with another job, the check's job cannot start in time.
    env, _ = cluster_user
    busy = slurm_site.cluster.query(["sbatch", "--parsable", "-p", "part-a", "-w", "gpu-a2", "--gpus-per-node=2",
                                     "-o", "/dev/null", "--wrap", "sleep 120"])
    assert busy.returncode == 0, busy.stderr
    try:
        before = records.load(user_dirs(env).records, "torch-test").verify
        done = envkit("verify", "torch-test", "--partition", "part-a", "--nodes", "2", "--queue-timeout", "2",
                      env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stdout.startswith("NOT RUN on 2 nodes of part-a: the job did not start within 2 s (cancelled)")
        assert "PASS" not in done.stdout and "FAIL" not in done.stdout
        assert records.load(user_dirs(env).records, "torch-test").verify == before
        assert slurm_site.cluster.jobs() == [busy.stdout.strip()]  # the sleeper only: the check's job is gone
    finally:
        slurm_site.cluster.query(["scancel", busy.stdout.strip()])


def test_a_job_on_named_nodes_asks_for_those_nodes(cluster_user):
    env, _ = cluster_user
    done = envkit("job", "torch-test", "-p", "part-a:gpu-a1,gpu-a2", "--nodes", "2", "--", "python", "train.py",
                  env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "#SBATCH --nodelist=gpu-a1,gpu-a2\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n" in done.stdout
    assert "#SBATCH --gpus-per-node=2\n" in done.stdout  # all of a node's GPUs: part-a's nodes have two each
    assert done.stdout.rstrip().endswith("--rdzv-id=\"envkit-$SLURM_JOB_ID\" train.py")
    for command in (["job", "torch-test", "-p", "part-a:gpu-a1,gpu-zz", "--nodes", "2", "--", "true"],
                    ["verify", "torch-test", "-p", "part-a:gpu-a1,gpu-zz", "--nodes", "2"]):
        unknown = envkit(*command, env=env)
        assert unknown.returncode == 2, unknown.stdout + unknown.stderr
        assert "partition 'part-a' has no node 'gpu-zz'" in unknown.stderr and unknown.stdout == ""


@pytest.fixture(scope="module")
def tensorflow_env(cluster_user, tmp_path_factory):
    """A venv with the real TensorFlow CPU wheel (about 600 MB, not in the test extra) and its dependencies, from the
    wheels this machine keeps (support.local_wheels), installed by uv with no index and no network; a skip that
    says why where the machine has none. Recorded as the tensorflow manifest's CPU build of its line: (the user's
    environment, its home, the TensorFlow version)."""
    from support.local_wheels import MissingDistributionError, dependency_closure, local_distribution_files
    from support.pypi_index import installer_env, uv_binary

    try:
        [wheel] = local_distribution_files(["tensorflow-cpu"])[-1:]
        files = local_distribution_files(dependency_closure(wheel))
    except MissingDistributionError as missing:
        pytest.skip(f"the TensorFlow CPU wheel and its dependencies are not on this machine: {missing}")
    version = wheel.name.split("-")[1]
    build = f"tensorflow-{'.'.join(version.split('.')[:2])}-cpu"
    from envkit.catalog import default_manifests_dir, load_catalog

    if build not in {b.id for b in load_catalog(default_manifests_dir()).manifests["tensorflow"].builds}:
        pytest.skip(f"tensorflow-cpu {version} (the wheel on this machine) has no CPU build in envs/tensorflow.yaml")
    scratch = tmp_path_factory.mktemp("tensorflow-wheels")
    links = scratch / "links"
    links.mkdir()
    for path in [wheel, *files]:
        if not (links / path.name).exists():
            (links / path.name).symlink_to(path)
    env, home = cluster_user
    root = home / "envs" / "tf-cpu"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True,
                   timeout=120)
    done = subprocess.run([uv_binary(), "pip", "install", "-q", "--python", str(root / "bin" / "python"),
                           "--offline", "--no-index", "--find-links", str(links), f"tensorflow-cpu=={version}"],
                          env=installer_env(scratch), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    record_env(root, env, "tf-cpu", "tensorflow", build)
    return env, home, version


@pytest.mark.real_tensorflow
def test_verify_on_two_nodes_of_a_tensorflow_environment_runs_multiworkermirroredstrategy_across_them(
        slurm_site, tensorflow_env):
    # TensorFlow's own all-reduce across the nodes: MultiWorkerMirroredStrategy over TF_CONFIG (each node a worker at
    # its address; both test nodes are 127.0.0.1, so worker i listens on the port + i). The check writes nothing
    # into $HOME: Keras would write ~/.keras/keras.json.
    env, home, version = tensorflow_env
    Path(env["HOME"]).mkdir(exist_ok=True)  # a home Keras can write to (else it writes into /tmp)
    reduce = _passed_on_two_nodes(env, "tf-cpu", version)
    assert (reduce["framework"], reduce["method"]) == ("tensorflow", "MultiWorkerMirroredStrategy all-reduce")
    assert reduce["backend"] == "ring"
    assert reduce["busbw_gbs"] > 0
    home_dir = Path(env["HOME"])
    assert not (home_dir / ".keras").exists() and not list(home_dir.glob(".keras*"))
    assert not (home_dir / ".nv").exists()
