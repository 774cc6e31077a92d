"""Every Python envkit starts runs the installed code, never what lies in the working directory.

``python -m envkit`` (survey, verify --partition, the job script's activation line), ``-m ipykernel``, ``-m pip`` and
``-m venv`` put the working directory first on sys.path: a planted ``envkit/``, ``envkit.py``, ``json.py``,
``ipykernel/`` (or ``runpy.py``, which ``-m`` itself imports on Python 3.6) ran instead. Each argv envkit builds is
run here for real, in a working directory holding each of them, with this Python and with a Python 3.6 where the
machine has one (pyenv).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from envkit.backends.installers import pip_command
from envkit.backends.plan import PipPart
from envkit.backends.tools import find_python
from envkit.create.jupyter import install_argv
from envkit.slurm.remote import envkit_argv
from envkit.slurm.survey import envkit_on_node
from envkit.system.launch import python_module

PLANTED = ("envkit/", "envkit.py", "json.py", "ipykernel/", "pip/", "venv/", "runpy.py", "importlib/")


def plant(cwd: Path, what: str, marker: Path) -> None:
    """A module or package named like ``what`` whose import writes ``marker`` and exits 99."""
    code = f"open({str(marker)!r}, 'w').write('planted {what}')\nraise SystemExit(99)\n"
    if what.endswith("/"):
        package = cwd / what.rstrip("/")
        package.mkdir()
        (package / "__init__.py").write_text(code)
        (package / "__main__.py").write_text(code)
    else:
        (cwd / what).write_text(code)


@pytest.fixture(params=PLANTED)
def hostile(request, tmp_path: Path) -> tuple[Path, Path]:
    """(a working directory holding one planted module, the file the planted code would write)."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    marker = tmp_path / "planted-ran"
    plant(cwd, request.param, marker)
    return cwd, marker


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def pythons() -> list[Path]:
    found = [Path(sys.executable)]
    old = find_python(Version("3.6"), None, {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    return found + ([old] if old is not None else [])


def test_the_node_argv_of_survey_and_verify_runs_the_installed_envkit(hostile):
    cwd, marker = hostile
    for argv in (envkit_on_node(), envkit_argv(["detect", "--json"])):
        done = run(argv, cwd)
        assert done.returncode == 0, done.stderr
        assert "gpus" in json.loads(done.stdout) and not marker.exists()  # the real detect answered


def test_the_planted_envkit_would_have_run_under_dash_m(tmp_path: Path):
    # What the tests above guard against, shown once: the plain `-m` form runs the planted package.
    marker = tmp_path / "planted-ran"
    plant(tmp_path, "envkit/", marker)
    done = run([sys.executable, "-m", "envkit", "detect", "--json"], tmp_path)
    assert done.returncode == 99 and marker.read_text() == "planted envkit/"


@pytest.mark.parametrize("python", pythons(), ids=lambda p: p.name)
def test_pip_and_venv_run_from_the_interpreters_own_library(hostile, python: Path):
    cwd, marker = hostile
    step = PipPart(purpose="x", index_url="https://example.invalid/simple", packages=())
    done = run(pip_command(step, python, None, Version("3.6")), cwd)  # pip's own answer to nothing to install
    assert done.returncode == 1 and "at least one requirement" in done.stderr, done.stderr
    assert not marker.exists()
    done = run(python_module(python, "venv", "--help"), cwd)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr
    assert not marker.exists()


@pytest.mark.parametrize("python", pythons(), ids=lambda p: p.name)
def test_a_module_that_is_not_installed_is_no_module_named_it_not_the_working_directorys(hostile, python: Path):
    # (ipykernel is not installed in these interpreters: the planted one must not stand in for it)
    cwd, marker = hostile
    done = run(install_argv(python, "Env"), cwd)
    assert done.returncode == 1 and done.stderr.strip() == f"{python}: No module named ipykernel", done.stderr
    assert not marker.exists()


def test_the_arguments_reach_the_module_as_they_are(tmp_path: Path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "echoargs.py").write_text("import json, sys\nprint(json.dumps([__name__, sys.argv[1:]]))\n")
    argv = python_module(sys.executable, "echoargs", "-c", "--x", "it's", "")
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(tmp_path / "lib"), "PATH": "/usr/bin:/bin"})
    assert json.loads(done.stdout) == ["__main__", ["-c", "--x", "it's", ""]], done.stderr


@pytest.mark.parametrize("name", ["", "-m", "pip install", "os;x"])
def test_only_a_module_name_is_taken(name: str):
    with pytest.raises(ValueError):
        python_module(sys.executable, name)
