"""The companions a build installs beside its framework (torchvision, torchaudio beside torch): the check imports each
one and runs one small operation of it on the CPU and on every GPU (issue 39). Stand-ins of tests/probe/fakes; the
real broken pair (PyPI's torchvision beside the torch CPU wheel) is in test_probe_real_torch.py."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone

from probe_helpers import A100, envkit

from envkit.state import records
from envkit.state.userdirs import user_dirs

TORCH = {"version": "2.5.1+cu121", "cuda": "12.1", "gpus": [A100, A100]}
COMPANIONS = {"torchvision": "0.20.1", "torchaudio": "2.5.1"}


def _doctor(env, machine):
    done = envkit("doctor", "--json", "--python", str(env.python), env=machine)
    assert "Traceback" not in done.stderr, done.stderr
    return done, json.loads(done.stdout)


def test_every_companion_runs_its_operation_on_the_cpu_and_on_every_gpu(fake_env, this_machine):
    env = fake_env({"torch": TORCH, "torchvision": {"version": "0.20.1"}, "torchaudio": {"version": "2.5.1"}},
                   frameworks=("torch", "torchvision", "torchaudio"), distributions=COMPANIONS)
    done, data = _doctor(env, this_machine([A100, A100]))
    assert done.returncode == 0, done.stdout + done.stderr
    companions = {c["name"]: c for c in data["probe"]["companions"]}
    assert set(companions) == {"torchvision", "torchaudio"} and all(c["ok"] for c in companions.values())
    assert [(k["name"], k["device"], k["ok"]) for k in companions["torchvision"]["checks"]] == [
        ("ops.nms", "cpu", True), ("ops.nms", "cuda:0", True), ("ops.nms", "cuda:1", True)]
    assert [(k["name"], k["device"]) for k in companions["torchaudio"]["checks"]] == [
        ("transforms.Spectrogram", "cpu"), ("transforms.Spectrogram", "cuda:0"), ("transforms.Spectrogram", "cuda:1")]
    assert companions["torchaudio"]["version"] == "2.5.1" and companions["torchaudio"]["asked"] is False
    text = envkit("doctor", "--python", str(env.python), env=this_machine([A100, A100]))
    assert "  torchvision 0.20.1: ok (ops.nms ok on cpu, cuda:0, cuda:1)" in text.stdout
    assert "  torchaudio 2.5.1: ok (transforms.Spectrogram ok on cpu, cuda:0, cuda:1)" in text.stdout


def test_a_companion_built_for_another_torch_fails_the_check_naming_the_pair(fake_env, this_machine):
    # torch alone works; torchvision, built for another torch, cannot be imported beside it: the check said PASS.
    env = fake_env({"torch": TORCH, "torchvision": {"version": "0.21.0", "broken": True},
                    "torchaudio": {"version": "2.5.1"}},
                   frameworks=("torch", "torchvision", "torchaudio"), distributions={**COMPANIONS,
                                                                                    "torchvision": "0.21.0"})
    done, data = _doctor(env, this_machine([A100, A100]))
    assert done.returncode == 1, done.stdout + done.stderr
    assert data["ok"] is False and all(d["ok"] for d in data["devices"])  # the framework itself works
    [finding] = data["diagnosis"]
    assert finding["rule"] == "companion-broken"
    assert finding["cause"] == ("torchvision 0.21.0 does not work with torch 2.5.1+cu121: importing it fails: "
                                "RuntimeError: operator torchvision::nms does not exist")
    # the build torch 2.5.1+cu121 is (envs/torch.yaml) installs its own torchvision; a build made again pairs them
    assert "the build installs torchvision==0.20.*" in finding["advice"]
    assert f"`{data['next']['command']}`" in finding["advice"] and data["next"]["command"].startswith(
        "envkit create torch --build torch-")
    text = envkit("doctor", "--python", str(env.python), env=this_machine([A100, A100]))
    assert "  torchvision 0.21.0: FAIL (cannot be imported)" in text.stdout and "FAIL: torch" in text.stdout


def test_a_companion_whose_operation_fails_on_a_gpu_fails_the_check(fake_env, this_machine):
    env = fake_env({"torch": {**TORCH, "wrong_results": [1]}, "torchvision": {"version": "0.20.1"}},
                   frameworks=("torch", "torchvision"), distributions={"torchvision": "0.20.1"})
    done, data = _doctor(env, this_machine([A100, A100]))
    assert done.returncode == 1
    [broken] = [f for f in data["diagnosis"] if f["rule"] == "companion-broken"]
    assert broken["cause"].startswith("torchvision 0.20.1 does not work with torch 2.5.1+cu121: ops.nms failed on "
                                      "cuda:1: the result differs from the reference")


def test_verify_checks_the_companions_its_build_installs_and_names_a_missing_one(fake_env, this_machine):
    # The environment was made from torch-2.5-cu121, which installs torchvision and torchaudio; torchaudio is gone.
    env = fake_env({"torch": TORCH, "torchvision": {"version": "0.20.1"}}, frameworks=("torch", "torchvision"),
                   distributions={"torchvision": "0.20.1"})
    record = records.Record(
        name="dl", prefix=str(env.root), kind="venv", backend="venv", manifest="torch", build="torch-2.5-cu121",
        python=f"{sys.version_info[0]}.{sys.version_info[1]}",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine={}, on_target=False)
    records.save(record, user_dirs(os.environ).records)
    done = envkit("verify", "dl", "--json", env=this_machine([A100, A100]))
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert [(c["name"], c["asked"], c["imported"]) for c in data["probe"]["companions"]] == [
        ("torchvision", True, True), ("torchaudio", True, False)]
    [missing] = data["diagnosis"]
    assert missing["rule"] == "companion-missing"
    assert missing["cause"] == "torchaudio is not installed, and the build installs it (torchaudio==2.5.*)"
