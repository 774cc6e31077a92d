"""`envkit doctor` and `envkit verify --prefix`, run as a user runs them: real subprocesses, real exit codes."""

from __future__ import annotations

import json
import os
import stat

from probe_helpers import A100, PROFILES, RTX5090, V100, envkit

REQUIRED_KEYS = {"ok", "framework", "version", "cuda", "devices", "diagnosis"}


def doctor_json(*args: str, env: dict | None = None):
    result = envkit("doctor", "--json", *args, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result, json.loads(result.stdout)


def test_a_working_environment_passes(fake_env, this_machine):
    env = fake_env({"torch": {"version": "2.5.1+cu121", "gpus": [A100, V100]}})
    result, data = doctor_json("--python", str(env.python), env=this_machine([A100, V100]))
    assert result.returncode == 0, result.stdout + result.stderr
    assert REQUIRED_KEYS <= set(data)
    assert (data["ok"], data["framework"], data["version"], data["cuda"]) == (True, "torch", "2.5.1+cu121", "12.1")
    assert data["devices"] == [
        {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "gfx": None, "ok": True,
         "detail": "matmul ok, conv2d ok"},
        {"index": 1, "name": "Tesla V100-SXM2-32GB", "compute_capability": "7.0", "gfx": None, "ok": True,
         "detail": "matmul ok, conv2d ok"},
    ]
    assert data["diagnosis"] == [] and data["next"] is None
    assert data["python"]["executable"] == str(env.python) and data["probed_on_machine"] is True


def test_wrong_results_fail_with_exit_1_and_a_diagnosis(fake_env, this_machine):
    env = fake_env({"torch": {"gpus": [A100, A100], "wrong_results": [0]}})
    result, data = doctor_json("--python", str(env.python), env=this_machine([A100, A100]))
    assert result.returncode == 1
    assert data["ok"] is False and [d["ok"] for d in data["devices"]] == [False, True]
    [finding] = data["diagnosis"]
    assert finding["rule"] == "wrong-results" and set(finding) >= {"cause", "advice"}
    assert "GPU 0" in finding["cause"]


def test_a_cpu_build_judged_for_a_gpu_machine_names_the_build_to_create(fake_env):
    env = fake_env({"torch": {"version": "2.13.0+cpu", "cuda": None}})
    result, data = doctor_json("--python", str(env.python), "--machine", str(PROFILES / "h100-cuda128.yaml"))
    assert result.returncode == 1
    assert data["probed_on_machine"] is False and data["installed_build"] == "torch-2.13-cpu"
    assert [f["rule"] for f in data["diagnosis"]] == ["cpu-build", "gpus-not-checked-here"]
    assert data["next"]["build"] == "torch-2.14-cu126"
    # The command names that machine: pasted here it makes the build for the H100 machine, not for this one.
    h100 = str(PROFILES / "h100-cuda128.yaml")
    assert data["next"]["command"] == f"envkit create torch --build torch-2.14-cu126 --machine {h100}"
    assert data["next"]["manual"][0].startswith("python3.12 -m venv")  # the same by hand, for those without envkit
    assert any("--index-url https://download.pytorch.org/whl/cu126" in line for line in data["next"]["manual"])


def test_the_command_advised_for_another_machine_works_when_pasted(fake_env, tmp_path):
    # It used to leave out --machine: pasted on a machine without GPUs, it said the build does not fit here.
    import shlex

    env = fake_env({"torch": {"version": "2.14.0+cu126", "cuda": "12.6", "gpus": []}})
    b200 = tmp_path / "my profiles" / "b200.yaml"
    b200.parent.mkdir()
    b200.write_text((PROFILES / "b200-cuda130.yaml").read_text())
    result, data = doctor_json("--python", str(env.python), "--machine", str(b200))
    assert result.returncode == 1 and data["next"]["build"] == "torch-2.15-cu130"
    argv = shlex.split(data["next"]["command"])
    assert argv[-2:] == ["--machine", str(b200)]
    pasted = envkit(*argv[1:], "--dry-run", "--json")
    assert pasted.returncode == 0, pasted.stderr
    assert json.loads(pasted.stdout)["build"] == "torch-2.15-cu130"


def test_the_commands_advised_read_the_manifests_the_check_read(fake_env, tmp_path):
    # doctor --manifests DIR advised `envkit create torch --build ...` without it: pasted, the build was looked up
    # in the shipped manifests, which need not have it.
    import shlex
    import shutil

    env = fake_env({"torch": {"version": "2.13.0+cpu", "cuda": None}})
    manifests = tmp_path / "our manifests"
    shutil.copytree(PROFILES.parents[1] / "envs", manifests)
    h100 = str(PROFILES / "h100-cuda128.yaml")
    result, data = doctor_json("--python", str(env.python), "--machine", h100, "--manifests", str(manifests))
    assert result.returncode == 1
    argv = shlex.split(data["next"]["command"])
    assert argv[-4:] == ["--machine", h100, "--manifests", str(manifests)]
    pasted = envkit(*argv[1:], "--dry-run", "--json")
    assert pasted.returncode == 0, pasted.stderr
    assert json.loads(pasted.stdout)["build"] == data["next"]["build"]


def test_an_environment_without_a_framework_is_pointed_at_the_builds_for_the_machine_judged(tmp_path):
    # With --machine, the advice said "`envkit list` shows the builds that fit this machine": this one, not the
    # machine judged.
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True, timeout=60)
    h100 = str(PROFILES / "h100-cuda128.yaml")
    result, data = doctor_json("--python", str(tmp_path / "bare" / "bin" / "python"), "--machine", h100)
    assert result.returncode == 1
    [missing] = [f for f in data["diagnosis"] if f["rule"] == "no-framework"]
    assert f"`envkit list --machine {h100}` shows the builds that fit that machine." in missing["advice"]


def test_text_output_says_what_is_installed_and_what_to_run(fake_env, this_machine):
    env = fake_env({"torch": {"version": "2.6.0+cu124", "cuda": "12.4", "gpus": [RTX5090]}})
    # an R570 driver (CUDA 12.8): Blackwell's first branch (issue 46)
    result = envkit("doctor", "--python", str(env.python), env=this_machine([RTX5090], "570.133.07", 12080))
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "Installed: torch 2.6.0+cu124 (CUDA 12.4" in out
    assert "Machine: driver 570.133.07, CUDA 12.8 (nvml); NVIDIA GeForce RTX 5090 (sm_120)" in out  # not the host's
    assert "GPU 0: NVIDIA GeForce RTX 5090, compute capability 12.0: FAIL" in out
    assert "FAIL: torch 2.6.0+cu124 does not work on this machine." in out
    assert "this build has no kernels for GPU 0, NVIDIA GeForce RTX 5090 (sm_120)" in out
    # cu128 runs natively, the cu129 builds only through minor-version compatibility: the newest release ranks first
    # (2.12 and 2.13 have cu129 builds since issue 30; 2.14 has none, issue 46).
    assert "To get a build that fits: envkit create torch --build torch-2.13-cu129" in out
    assert "sm_120 is not compatible with the current PyTorch installation" in out  # the captured warning


def test_gpus_hidden_from_the_check_are_said_and_no_other_build_is_advised(fake_env, this_machine):
    # The machine has an A100; CUDA_VISIBLE_DEVICES=1 names no GPU of it, so torch sees none. The cure is the
    # variable: no build is advised (it used to be a CPU build, for the machine as it looked: without GPU).
    env = fake_env({"torch": {"version": "2.5.1+cu121", "cuda": "12.1", "gpus": []}})
    result = envkit("doctor", "--python", str(env.python), env={**this_machine([A100]), "CUDA_VISIBLE_DEVICES": "1"})
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "Machine: driver 550.54.14, CUDA 12.4 (nvml), no GPU visible (1 hidden by CUDA_VISIBLE_DEVICES)" in out
    assert "CUDA_VISIBLE_DEVICES='1' hides the GPUs: torch sees none" in out
    assert "To get a build that fits" not in out and "cpu" not in out


def test_gpu_arch_and_cuda_overrides_judge_another_machine(fake_env):
    env = fake_env({"torch": {"version": "2.14.0+cu130", "cuda": "13.0", "gpus": []}})
    result, data = doctor_json("--python", str(env.python), "--cuda", "13.0", "--gpu-arch", "7.0")
    assert result.returncode == 1 and data["probed_on_machine"] is False
    assert "does-not-fit" in [f["rule"] for f in data["diagnosis"]]
    assert data["devices"][0]["compute_capability"] == "7.0" and data["devices"][0]["ok"] is False


def test_the_active_environment_is_the_default(fake_env, this_machine):
    env = fake_env({"torch": {"version": "2.13.0+cpu", "cuda": None}})
    result, data = doctor_json(env={"VIRTUAL_ENV": str(env.root), **this_machine([])})  # a CPU build, no GPU
    assert result.returncode == 0, result.stderr
    assert data["python"]["executable"] == str(env.python)


def test_an_active_environment_that_is_gone_is_said_not_replaced_by_another_python(fake_env, tmp_path):
    conda = fake_env({"torch": {"version": "2.13.0+cpu", "cuda": None}})  # conda's base, active under the venv
    gone = tmp_path / "deleted-venv"
    result = envkit("doctor", env={"VIRTUAL_ENV": str(gone), "CONDA_PREFIX": str(conda.root)})
    assert result.returncode == 2 and result.stdout == "", result
    assert result.stderr.startswith(f"envkit: error: the active environment $VIRTUAL_ENV={gone} is gone: there is "
                                    "no Python in it to check\n"), result.stderr
    assert "--python" in result.stderr and "Traceback" not in result.stderr


def test_multi_gpu_and_bench_on_one_gpu(fake_env, this_machine):
    env = fake_env({"torch": {"gpus": [A100]}})
    result, data = doctor_json("--python", str(env.python), "--multi-gpu", "--bench", env=this_machine([A100]))
    assert result.returncode == 0, data["diagnosis"]
    assert data["probe"]["multi_gpu"]["skipped"] == "needs at least 2 GPUs; this machine has 1 (visible to torch)"
    assert [f["rule"] for f in data["diagnosis"]] == ["multi-gpu-skipped"]
    assert [run["dtype"] for run in data["probe"]["bench"]["runs"]] == ["float32", "float16"]


def test_garbage_from_the_python_is_a_failed_check_not_a_crash(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'not json'\nexit 3\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    result, data = doctor_json("--python", str(python))
    assert result.returncode == 1
    assert data["ok"] is False and data["framework"] is None
    assert [f["rule"] for f in data["diagnosis"]] == ["probe-no-report"]
    assert "exited with code 3" in data["diagnosis"][0]["cause"]
    # No report, so no framework is known: the advice runs the Python itself, not "import the framework".
    assert data["diagnosis"][0]["advice"].startswith(f"Run `{python} -V` to see whether it starts")


def test_the_python_named_is_the_one_run_here_or_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for where, code in ((tmp_path, 3), (bin_dir, 4)):  # ./python3 here, and a python3 first on PATH
        python = where / "python3"
        python.write_text(f"#!/bin/sh\necho 'not json'\nexit {code}\n")
        python.chmod(python.stat().st_mode | stat.S_IXUSR)
    on_path = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for given, code in (("./python3", 3), ("python3", 4), (str(tmp_path / "python3"), 3)):
        result = envkit("doctor", "--json", "--python", given, env=on_path, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert f"exited with code {code}" in json.loads(result.stdout)["diagnosis"][0]["cause"], given


def test_a_hanging_python_is_stopped(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexec sleep 60\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    result, data = doctor_json("--python", str(python), "--probe-timeout", "1")
    assert result.returncode == 1
    assert [f["rule"] for f in data["diagnosis"]] == ["probe-timed-out"]


def test_bad_input_exits_2(tmp_path, fake_env):
    missing = envkit("doctor", "--python", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.startswith("envkit: error: --python")
    env = fake_env({"torch": {}})
    for args in (["--framework", "caffe"], ["--cuda", "twelve"], ["--machine", str(tmp_path / "none.yaml")],
                 ["--probe-timeout", "0"]):
        result = envkit("doctor", "--python", str(env.python), *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_verify_prefix_checks_the_environment_there(fake_env, tmp_path):
    env = fake_env({"torch": {"gpus": [A100]}})
    result = envkit("verify", "--prefix", str(env.root), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["python"]["executable"] == str(env.root / "bin" / "python")
    missing = envkit("verify", "--prefix", str(tmp_path / "no-env"))
    assert missing.returncode == 2 and "no environment at" in missing.stderr
    no_prefix = envkit("verify")
    assert no_prefix.returncode == 2


def test_help_explains_the_commands():
    wide = {"COLUMNS": "200"}
    top = envkit("--help", env=wide).stdout
    assert "doctor" in top and "verify" in top
    doctor = envkit("doctor", "--help", env=wide).stdout
    for option in ("--python", "--machine", "--cuda", "--gpu-arch", "--manifests", "--json", "--multi-gpu",
                   "--bench", "--framework", "--probe-timeout"):
        assert option in doctor
    verify = envkit("verify", "--help", env=wide).stdout
    assert "ENV" in verify and "--prefix" in verify and "stored in its record" in verify


def test_text_output_for_a_missing_and_a_broken_framework(fake_env):
    nothing = fake_env({}, frameworks=())
    missing = envkit("doctor", "--python", str(nothing.python), "--framework", "jax")
    assert missing.returncode == 1 and "Installed: no jax" in missing.stdout
    assert "jax is not installed for" in missing.stdout
    none = envkit("doctor", "--python", str(nothing.python))
    assert none.returncode == 1 and "Installed: none of torch, tensorflow, jax, mxnet" in none.stdout
    broken = fake_env({"torch": {"import_error": "missing-library"}})
    result = envkit("doctor", "--python", str(broken.python))
    assert result.returncode == 1 and "Installed: torch, which cannot be imported" in result.stdout
    assert "torch cannot load libcudnn.so.9: a library this build needs is not installed" in result.stdout


def test_a_plain_pypi_torch_that_cannot_be_imported_is_named_with_its_cuda(fake_env):
    """Issue 30: PyPI's own torch 2.15.0 is the CUDA 13.2 build, and its version names no CUDA. When it cannot even
    be imported, doctor reads torch/version.py (as a wheel of 2.15 writes it) and names both."""
    broken = fake_env({"torch": {"import_error": "missing-library"}})
    (broken.site / "torch" / "version.py").write_text(
        "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
        "__version__ = '2.15.0'\ndebug = False\ncuda: Optional[str] = '13.2'\ngit_version = 'abc'\n"
        "hip: Optional[str] = None\n")
    result = envkit("doctor", "--python", str(broken.python))
    assert result.returncode == 1
    assert "Installed: torch 2.15.0 (CUDA 13.2, by its version.py), which cannot be imported" in result.stdout
    data = json.loads(envkit("doctor", "--python", str(broken.python), "--json").stdout)
    assert data["probe"]["package"] == {"version": "2.15.0", "cuda": "13.2"}
    # without the file (or for a framework other than torch): as before
    (broken.site / "torch" / "version.py").unlink()
    assert "Installed: torch, which cannot be imported" in envkit("doctor", "--python", str(broken.python)).stdout


def test_the_tensorflow_check_writes_nothing_into_home(fake_env, this_machine, tmp_path):
    # Importing TensorFlow makes Keras write ~/.keras/keras.json (the stand-in does as Keras 3 does): the check
    # gives the framework its own temporary KERAS_HOME and caches, removed after it, so the user's home stays as it
    # was (docs/reference/formats.md, "Where envkit writes").
    env = fake_env({"tensorflow": {"version": "2.15.0", "gpus": [A100]}}, frameworks=("tensorflow",))
    home = tmp_path / "home"
    home.mkdir()
    result, data = doctor_json("--python", str(env.python), env={**this_machine([A100]), "HOME": str(home),
                                                                 "TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert data["framework"] == "tensorflow" and data["ok"] is True
    assert list(home.iterdir()) == []
    assert not any(tmp_path.glob("**/keras.json"))  # the scratch the check gave it is gone too
