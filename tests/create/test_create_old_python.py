"""Old Pythons: uv cannot install into Python 3.7 environments, so envkit makes them with venv and installs with pip.

Runs where the machine has a Python 3.7 (on PATH or in pyenv): a real venv, real pip, a real local index.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from conftest import REPO, Home
from envkit.backends.tools import find_python
from support.pypi_index import IndexServer
from support.wheels import build_wheel

OLD = Version("3.7")

MANIFEST = """
name: course
summary: an old course's stack
framework: mxnet
releases:
  - version: "1.0"
    python: ">=3.7,<3.8"
    pip:
      packages: ["coursepkg==1.0.*"]
    builds:
      - {variant: cpu}
"""


@pytest.fixture
def old_python(home: Home) -> Path:
    python = find_python(OLD, None, home.env)
    if python is None:
        pytest.skip("no Python 3.7 on this machine")
    return python


def test_a_python_37_build_gets_a_venv_with_pip_and_pip_installs_it(home: Home, old_python: Path,
                                                                   pypi_server: IndexServer, tmp_path: Path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for table in ("cuda.yaml", "python.yaml", "gpus.yaml"):
        shutil.copy(REPO / "envs" / table, manifests / table)
    (manifests / "course.yaml").write_text(MANIFEST)
    pypi_server.add_index("/pypi/simple", [build_wheel(tmp_path / "w", "coursepkg", "1.0.2",
                                                       files={"coursepkg.py": "VALUE = 'old course'\n"})])
    home.mirror_to(pypi_server)
    args = ("create", "course", "--manifests", str(manifests), "--python", "3.7", "--yes", "--no-verify")
    plan = home.envkit(*args, "--dry-run")
    assert " venv " in plan.stdout and " pip install --index-url" in plan.stdout, plan.stdout
    done = home.envkit(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert home.in_env("course-cpu", "import sys, coursepkg; print(sys.version_info[:2], coursepkg.VALUE)") \
        == "(3, 7) old course"
    assert home.record("course-cpu")["installer"] == "pip"
    assert home.leftovers() == []  # (python3.7 -m venv's pip leaves its CA bundle in $TMPDIR when let)
