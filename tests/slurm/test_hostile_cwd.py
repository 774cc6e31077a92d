"""On the real test cluster, from a working directory holding a planted envkit/, envkit.py, json.py and ipykernel/:
survey, verify --partition and a job's activation line run the installed envkit on the node, never the planted one
(which `python -m envkit` imported: survey failed, and the planted file ran as the user's job)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from slurm_helpers import user_env, wait_done

from envkit.site import load_site

CONSOLE_SCRIPT = Path(sys.executable).parent / "envkit"  # the user's `envkit`: its own path is not the cwd


def _plant(cwd: Path, marker: Path) -> None:
    code = f"open({str(marker)!r}, 'a').write('planted ran\\n')\nraise SystemExit(99)\n"
    for package in ("envkit", "ipykernel"):
        (cwd / package).mkdir()
        (cwd / package / "__init__.py").write_text(code)
        (cwd / package / "__main__.py").write_text(code)
    for module in ("envkit.py", "json.py", "runpy.py"):
        (cwd / module).write_text(code)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    cwd = tmp_path / "work"  # under tmp_path: the conftest's check that jobs run in the tests' directories holds
    cwd.mkdir()
    marker = tmp_path / "planted-ran"
    _plant(cwd, marker)
    return cwd, marker


def _envkit(*args: str, env, cwd: Path):
    import subprocess

    if not CONSOLE_SCRIPT.exists():
        pytest.skip(f"no envkit console script beside {sys.executable}")
    return subprocess.run([str(CONSOLE_SCRIPT), *args], env=dict(env), cwd=cwd, capture_output=True, text=True,
                          timeout=180)


def test_survey_and_verify_on_a_partition_run_the_installed_envkit_on_the_node(slurm_site, cluster_user, hostile,
                                                                                tmp_path):
    cwd, marker = hostile
    env = user_env(slurm_site, tmp_path)
    done = _envkit("survey", "--partition", "part-a", "--timeout", "30", env=env, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    [node] = load_site(tmp_path / "site.yaml").partitions["part-a"].nodes
    assert [g.name for g in node.profile.gpus] == ["NVIDIA A100-SXM4-40GB"] * 2
    user, _ = cluster_user
    checked = _envkit("verify", "torch-test", "--partition", "part-a", env=user, cwd=cwd)
    assert checked.returncode == 0 and "PASS" in checked.stdout, checked.stdout + checked.stderr
    assert not marker.exists()


def test_a_jobs_activation_line_runs_the_installed_envkit_in_the_jobs_directory(slurm_site, cluster_user, hostile):
    cwd, marker = hostile
    env, _ = cluster_user
    done = _envkit("job", "torch-test", "-p", "part-a", "--gpus", "1", "--output", "out-%j.txt", "--submit", "--",
                   "sh", "-c", 'echo "job ran in $(pwd) with $VIRTUAL_ENV"', env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    wait_done(slurm_site, job)
    output = (cwd / f"out-{job}.txt").read_text()
    assert f"job ran in {cwd}" in output and "/envs/torch-test" in output, output
    assert not marker.exists()
