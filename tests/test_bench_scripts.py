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
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name != "bench_venv.py")
# The interpreter the venv running these tests was made from: the machine's python3, without envkit's packages.
BASE_PYTHON = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"


def _machine_python_lacks_envkit() -> bool:
    done = subprocess.run([str(BASE_PYTHON), "-c", "import typer"], capture_output=True, timeout=60)
    return done.returncode != 0


def test_every_script_is_covered():
    assert len(SCRIPTS) >= 10 and "create_speed.py" in SCRIPTS and "lock_create.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_from_the_machines_python_makes_no_venv_and_no_traceback(script: str, tmp_path: Path):
    if not BASE_PYTHON.exists():
        pytest.skip(f"no base interpreter at {BASE_PYTHON}")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "_ENVKIT"))}
    environ["TMPDIR"] = str(tmp_path)  # a venv would be made here
    done = subprocess.run([str(BASE_PYTHON), str(BENCH / script), "--help"], capture_output=True, text=True,
                          timeout=120, env=environ, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and "Traceback" not in done.stderr
    assert "--venv" in done.stdout
    assert list(tmp_path.iterdir()) == []  # no venv was made for the help


def test_the_machines_python_really_lacks_envkit_here_or_the_help_test_proves_less():
    if not BASE_PYTHON.exists():
        pytest.skip(f"no base interpreter at {BASE_PYTHON}")
    if not _machine_python_lacks_envkit():
        pytest.skip(f"{BASE_PYTHON} has typer: the help test ran where envkit's packages are")
    done = subprocess.run([str(BASE_PYTHON), "-c", "import envkit"], capture_output=True, cwd="/", timeout=60)
    assert done.returncode != 0
