"""`envkit create --jupyter` run from a working directory holding a planted ipykernel/, json.py and envkit/: the
environment's own ipykernel registers the kernel (``python -m ipykernel`` imported the planted one instead)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CU126, Home
from support.local_wheels import dependency_closure, local_distribution_files
from support.pypi_index import IndexServer

CONSOLE_SCRIPT = Path(sys.executable).parent / "envkit"  # the user's `envkit`: its own path is not the cwd


def test_create_jupyter_from_a_hostile_directory_runs_the_environments_ipykernel(home: Home,
                                                                                 torch_index: IndexServer):
    kernel = [w for w in local_distribution_files(["ipykernel"]) if w.name.startswith("ipykernel-")][-1:]
    if not kernel:
        pytest.skip("no ipykernel wheel on this machine")
    if not CONSOLE_SCRIPT.exists():
        pytest.skip(f"no envkit console script beside {sys.executable}")
    torch_index.add_index("/pypi/simple", kernel + local_distribution_files(dependency_closure(kernel[0])))
    cwd = home.root / "work"
    cwd.mkdir()
    marker = home.root / "planted-ran"
    code = f"open({str(marker)!r}, 'a').write('planted ran\\n')\nraise SystemExit(99)\n"
    for package in ("ipykernel", "envkit", "pip", "venv"):
        (cwd / package).mkdir()
        (cwd / package / "__init__.py").write_text(code)
        (cwd / package / "__main__.py").write_text(code)
    for module in ("json.py", "runpy.py", "envkit.py"):
        (cwd / module).write_text(code)
    done = subprocess.run([str(CONSOLE_SCRIPT), "create", *CU126, "--yes", "--no-verify", "--jupyter"], cwd=cwd,
                          env=home.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not marker.exists()
    spec = home.root / ".local" / "share" / "jupyter" / "kernels" / "torch-cu126" / "kernel.json"
    assert json.loads(spec.read_text())["argv"][0] == str(home.prefix("torch-cu126") / "bin" / "python")
    assert home.leftovers() == []
