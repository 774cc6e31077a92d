"""The bench scripts start with the machine's Python, which has no envkit, no typer, no uv: each answers --help
there at once (no venv made for it), and one that is run makes its own venv with envkit installed from the
checkout (bench/bench_venv.py) instead of stopping with a traceback. Nothing here is timed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name not in ("bench_venv.py", "bench_slurm.py"))  # (helpers)
# The interpreter the venv running these tests was made from: the machine's python3. It is started with -S (no
# site-packages), as on a machine whose python3 has none of envkit's packages: a machine that ran the README's test
# command on its own python3 (CI does, in its second half) has them all there, and the help would then prove less.
BASE_PYTHON = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
BARE_PYTHON = [str(BASE_PYTHON), "-S"]


def test_every_script_is_covered():
    assert len(SCRIPTS) >= 10 and "create_speed.py" in SCRIPTS and "lock_create.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_from_the_machines_python_makes_no_venv_and_no_traceback(script: str, tmp_path: Path):
    if not BASE_PYTHON.exists():
        pytest.skip(f"no base interpreter at {BASE_PYTHON}")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "_ENVKIT", "PIP_"))}
    environ["TMPDIR"] = str(tmp_path)  # a venv would be made here
    environ.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1")  # and installing envkit into it would fail
    done = subprocess.run([*BARE_PYTHON, str(BENCH / script), "--help"], capture_output=True, text=True,
                          timeout=120, env=environ, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and "Traceback" not in done.stderr
    assert "--venv" in done.stdout
    assert list(tmp_path.iterdir()) == []  # no venv was made for the help


@pytest.mark.parametrize("module", ["envkit", "typer", "packaging", "yaml"])
def test_the_bare_python_really_lacks_envkits_packages_or_the_help_test_proves_less(module: str):
    if not BASE_PYTHON.exists():
        pytest.skip(f"no base interpreter at {BASE_PYTHON}")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run([*BARE_PYTHON, "-c", f"import {module}"], capture_output=True, cwd="/", timeout=60,
                          env=environ)
    assert done.returncode != 0, f"{module} is importable without site-packages"
