"""PyTorch before 1.6 (1.5.1 cu102, say) has no torch.cuda.get_arch_list: the check still judges it, and what the
build carries then comes from the manifest build the environment holds, as for any probe that could not tell."""

from __future__ import annotations

import json

from probe_helpers import envkit, probe

GTX1080TI = {"name": "NVIDIA GeForce GTX 1080 Ti", "capability": [6, 1], "memory": 11811160064}
K40 = {"name": "Tesla K40m", "capability": [3, 5], "memory": 12079595520}  # below sm_37, the oldest it has
TORCH_1_5 = {"version": "1.5.1", "cuda": "10.2", "cudnn": 7603, "before_1_6": True,
             "arch_list": ["sm_37", "sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "compute_37"]}
R440 = {"driver": "440.33.01", "cuda": 10020}  # CUDA 10.2's driver


def doctor(python, environ):
    result = envkit("doctor", "--json", "--python", str(python), env=environ)
    assert "Traceback" not in result.stderr, result.stderr
    return result, json.loads(result.stdout)


def test_the_probe_of_a_torch_without_get_arch_list_reports_no_arch_list_and_no_error(fake_env):
    env = fake_env({"torch": dict(TORCH_1_5, gpus=[GTX1080TI])})
    result = probe(env.python)
    assert result.probe_error is None, result.probe_error
    assert result.imported and result.version == "1.5.1" and result.gpu_build
    assert result.arch_list == ()  # unknown: this torch cannot say
    assert result.errors == ()  # an API that torch lacks is not an error of the environment
    assert [(d.compute_capability, [c.ok for c in d.checks]) for d in result.devices] == [("6.1", [True, True])]


def test_a_torch_1_5_environment_that_works_passes(fake_env, this_machine):
    env = fake_env({"torch": dict(TORCH_1_5, gpus=[GTX1080TI])})
    result, data = doctor(env.python, this_machine([GTX1080TI], **R440))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (data["ok"], data["version"], data["installed_build"]) == (True, "1.5.1", "torch-1.5-cu102")
    assert data["diagnosis"] == [] and [d["ok"] for d in data["devices"]] == [True]


def test_a_gpu_that_torch_1_5_has_no_kernels_for_is_diagnosed_from_the_manifest_build(fake_env, this_machine):
    env = fake_env({"torch": dict(TORCH_1_5, gpus=[K40])})
    result, data = doctor(env.python, this_machine([K40], **R440))
    assert result.returncode == 1
    assert data["ok"] is False and data["installed_build"] == "torch-1.5-cu102"
    rules = [f["rule"] for f in data["diagnosis"]]
    assert "no-kernels" in rules and "probe-crashed" not in rules, rules
    [finding] = [f for f in data["diagnosis"] if f["rule"] == "no-kernels"]
    assert data["probe"]["arch_list"] == []  # the probe could not tell: what the build carries is the manifest's
    assert "Tesla K40m (sm_35)" in finding["cause"]
    assert "it carries sm_37, sm_50, sm_60, sm_61, sm_70, sm_75, compute_37" in finding["cause"]
