"""The runner: a probe that hangs is cut off with everything it started, garbage is a result, not a crash."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from probe_helpers import A100, base_environ, probe

from envkit.errors import BadInputError
from envkit.probe.result import BAD_REPORT, NO_REPORT, TIMED_OUT
from envkit.probe.runner import (ProbeOptions, check_request, default_python, locate_python, probe_environment,
                                 run_probe)


def fake_python(path: Path, body: str) -> Path:
    """An executable that stands where a Python should be, and does something else."""
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def gone(pid: int) -> bool:
    """Whether a process no longer runs (a zombie waiting for init to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pids: list[int], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(gone(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_hanging_probe_is_cut_off_with_the_processes_it_started(tmp_path):
    pids = tmp_path / "pids"
    # The "python" starts a child that would outlive it, then hangs; both ignore nothing, but neither ever ends.
    python = fake_python(tmp_path / "python", f"sleep 300 & echo $! > {pids}; echo $$ >> {pids}; "
                                               "echo started >&2; wait")
    started = time.monotonic()
    result = run_probe(python, ProbeOptions(timeout=1.0), base_environ())
    elapsed = time.monotonic() - started
    assert result.failure == TIMED_OUT and result.exit_code is None and result.timeout == 1.0
    assert 1.0 <= elapsed < 5.0
    assert "started" in result.stderr
    children = [int(line) for line in pids.read_text().split()]
    assert len(children) == 2 and wait_gone(children), "the probe's processes are still running"


def test_a_probe_that_ignores_sigterm_is_killed(tmp_path):
    pids = tmp_path / "pids"
    python = fake_python(tmp_path / "python", f"trap '' TERM; echo $$ > {pids}; while true; do sleep 0.1; done")
    started = time.monotonic()
    result = run_probe(python, ProbeOptions(timeout=0.5), base_environ())
    assert result.failure == TIMED_OUT
    assert time.monotonic() - started < 6.0
    assert wait_gone([int(pids.read_text())])


def test_the_real_probe_hanging_in_the_framework_is_cut_off(fake_env):
    env = fake_env({"torch": {"gpus": [A100], "hang": "is_available"}})
    started = time.monotonic()
    result = probe(env.python, "torch", timeout=2.0)
    assert result.failure == TIMED_OUT
    assert time.monotonic() - started < 6.0
    assert "did not finish within 2 s" in result.failure_detail


def test_garbage_on_stdout_is_a_result(tmp_path):
    python = fake_python(tmp_path / "python", "echo 'Segmentation fault (core dumped)'; exit 139")
    result = run_probe(python, ProbeOptions(), base_environ())
    assert result.failure == NO_REPORT and result.exit_code == 139
    assert "exited with code 139" in result.failure_detail and "Segmentation fault" in result.failure_detail
    assert "Segmentation fault" in result.stdout


def test_a_clean_exit_without_output_is_a_result(tmp_path):
    python = fake_python(tmp_path / "python", "exit 0")
    result = run_probe(python, ProbeOptions(), base_environ())
    assert result.failure == NO_REPORT
    assert result.failure_detail == "exited normally and printed nothing instead of its report"


def test_json_in_the_wrong_shape_is_a_result(tmp_path):
    python = fake_python(tmp_path / "python", """echo '{"probe_format": 1, "devices": [{"checks": 3}]}'""")
    result = run_probe(python, ProbeOptions(), base_environ())
    assert result.failure == BAD_REPORT and "cannot read" in result.failure_detail


def test_python_2_cannot_run_the_probe(tmp_path):
    candidates = sorted(Path("/root/.pyenv/versions").glob("2.7.*/bin/python2.7"))
    if not candidates:
        pytest.skip("no Python 2.7 on this machine")
    result = run_probe(candidates[-1], ProbeOptions(), base_environ())
    assert result.failure == NO_REPORT and result.exit_code != 0
    assert "-I" in result.stderr


def test_the_probe_gets_a_clean_environment(tmp_path):
    dump = tmp_path / "env.txt"
    python = fake_python(tmp_path / "python", f"env > {dump}; exit 1")
    environ = base_environ(CUDA_VISIBLE_DEVICES="0,1", LD_LIBRARY_PATH="/opt/cuda/lib64", NCCL_SOCKET_IFNAME="ib0",
                           SECRET_TOKEN="x", PYTHONPATH="/elsewhere", PYTHONHOME="/nowhere", SLURM_JOB_ID="7")
    run_probe(python, ProbeOptions(), environ)
    seen = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert seen["CUDA_VISIBLE_DEVICES"] == "0,1" and seen["LD_LIBRARY_PATH"] == "/opt/cuda/lib64"
    assert seen["NCCL_SOCKET_IFNAME"] == "ib0" and seen["SLURM_JOB_ID"] == "7"
    assert seen["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    for dropped in ("SECRET_TOKEN", "PYTHONPATH", "PYTHONHOME"):
        assert dropped not in seen


def test_the_probe_runs_in_isolated_mode_with_the_framework_argument(tmp_path):
    args = tmp_path / "args.txt"
    python = fake_python(tmp_path / "python", f'printf "%s\\n" "$@" > {args}; exit 1')
    run_probe(python, ProbeOptions(framework="jax", multi_gpu=True, bench=True), base_environ())
    argv = args.read_text().splitlines()
    assert argv[0] == "-I" and argv[1].endswith(".pyz")
    assert argv[2:] == ["jax", "--multi-gpu", "--bench"]


def test_probe_environment_keeps_path_even_when_unset():
    assert probe_environment({})["PATH"] == os.defpath
    assert probe_environment({"PATH": "/x"})["PATH"] == "/x"


def test_bad_python_is_bad_input(tmp_path):
    with pytest.raises(BadInputError, match="no such file"):
        run_probe(tmp_path / "missing", ProbeOptions(), base_environ())
    with pytest.raises(BadInputError, match="is a directory"):
        run_probe(tmp_path, ProbeOptions(), base_environ())
    not_executable = tmp_path / "python"
    not_executable.write_text("nothing")
    with pytest.raises(BadInputError, match="cannot run"):
        run_probe(not_executable, ProbeOptions(), base_environ())
    with pytest.raises(BadInputError, match="--framework"):
        run_probe(not_executable, ProbeOptions(framework="caffe"), base_environ())


def test_a_directory_given_as_python_is_answered_with_the_python_in_it_only_when_there_is_one(tmp_path):
    # `--python ~/envs/dl` and `--python ~/envs/dl/bin` name the Python in them; a directory without one got
    # "Did you mean DIR/bin/python?" all the same, a path that is not there either.
    prefix = tmp_path / "dl"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").write_text("")
    for given in (prefix, prefix / "bin"):
        with pytest.raises(BadInputError) as raised:
            check_request(given, ProbeOptions())
        assert raised.value.hint == f"Did you mean {prefix / 'bin' / 'python'}?"
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInputError) as raised:
        check_request(tmp_path / "empty", ProbeOptions())
    assert "Did you mean" not in raised.value.hint and "Python interpreter" in raised.value.hint


def test_default_python_prefers_the_active_environment(tmp_path):
    venv, conda, path_dir = tmp_path / "venv", tmp_path / "conda", tmp_path / "bin"
    for prefix in (venv, conda):
        fake_python(_mkdir(prefix / "bin") / "python", "exit 0")
    fake_python(_mkdir(path_dir) / "python3", "exit 0")
    both = {"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": str(conda), "PATH": str(path_dir)}
    assert default_python(both) == venv / "bin" / "python"
    assert default_python({"CONDA_PREFIX": str(conda), "PATH": str(path_dir)}) == conda / "bin" / "python"
    with pytest.raises(BadInputError, match="no python3 on PATH"):
        default_python({"PATH": str(tmp_path / "empty")})


@pytest.mark.parametrize("variable", ["VIRTUAL_ENV", "CONDA_PREFIX"])
def test_an_active_environment_without_its_python_is_said_not_passed_over(tmp_path, variable):
    # A venv deleted while still active: checking python3 on PATH (or conda's base under it) instead would judge
    # a Python the user did not ask about.
    conda, path_dir = tmp_path / "conda", tmp_path / "bin"
    fake_python(_mkdir(conda / "bin") / "python", "exit 0")
    fake_python(_mkdir(path_dir) / "python3", "exit 0")
    gone = tmp_path / "gone"
    environ = {variable: str(gone), "PATH": str(path_dir)}
    if variable == "VIRTUAL_ENV":
        environ["CONDA_PREFIX"] = str(conda)
    with pytest.raises(BadInputError) as caught:
        default_python(environ)
    assert caught.value.message == f"the active environment ${variable}={gone} is gone: there is no Python in it to check"
    assert "--python" in caught.value.hint and caught.value.exit_code == 2
    _mkdir(gone)  # there, with no Python in it
    with pytest.raises(BadInputError, match=f"has no working {gone / 'bin' / 'python'}"):
        default_python(environ)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def test_a_bare_python_name_is_looked_up_on_path(tmp_path):
    bin_dir = _mkdir(tmp_path / "bin")
    fake_python(bin_dir / "python3.99", "exit 0")
    assert locate_python(Path("python3.99"), {"PATH": str(bin_dir)}) == bin_dir / "python3.99"
    assert locate_python(Path("python3.98"), {"PATH": str(bin_dir)}) == Path("python3.98")  # left for the error
    assert locate_python(Path("/abs/python"), {"PATH": str(bin_dir)}) == Path("/abs/python")
