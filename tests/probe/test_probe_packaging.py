"""The probe ships inside the wheel, and an installed envkit runs it from any directory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from probe_helpers import A100, REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")  # a copy: the build leaves nothing in the checkout
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("envkit", "envs"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(out), str(source)], check=True, capture_output=True, timeout=300)
    [built] = out.glob("envkit_gpu-*.whl")  # the distribution envkit-gpu
    return built


def test_the_wheel_carries_the_probe(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("__init__", "zipapp", "runner", "result", "diagnose", "builds", "render", "program/__init__",
                   "program/main", "program/torch_probe", "program/tensorflow_probe", "program/jax_probe",
                   "program/mxnet_probe"):
        assert f"envkit/probe/{module}.py" in names


def _see_the_test_interpreters_packages(home: Path) -> None:
    """envkit's dependencies (typer, packaging, ...) for a venv holding only envkit's wheel: the site directories of
    the interpreter running the tests, whether that is the system Python or a venv of its own (whose base Python
    has none of them, so system_site_packages would not do). Listed in a .pth file, they come after the venv's own
    site-packages, and their own .pth files (an editable envkit's) are not run: the wheel's envkit is the one
    imported."""
    [site] = (home / "lib").glob("python*/site-packages")
    found = [entry for entry in sys.path if entry.endswith(("site-packages", "dist-packages")) and Path(entry).is_dir()]
    (site / "test-dependencies.pth").write_text("".join(f"{entry}\n" for entry in found), encoding="utf-8")


def test_installed_envkit_runs_doctor_from_any_directory(wheel, tmp_path, fake_env):
    home = tmp_path / "envkit-venv"
    venv.EnvBuilder(with_pip=False).create(home)
    _see_the_test_interpreters_packages(home)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(home / "bin" / "python"), "install", "--no-deps",
                    "--no-index", "-q", str(wheel)], check=True, capture_output=True, timeout=300)
    checked = fake_env({"torch": {"gpus": [A100]}})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([str(home / "bin" / "python"), "-c", "import envkit.probe.zipapp as z; print(z.SOURCE)"],
                           capture_output=True, text=True, cwd=elsewhere, check=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(home)  # the wheel's probe, not the checkout's
    result = subprocess.run([str(home / "bin" / "envkit"), "doctor", "--json", "--python", str(checked.python)],
                            capture_output=True, text=True, cwd=elsewhere, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["devices"][0]["name"] == "NVIDIA A100-SXM4-80GB"
    assert data["installed_build"] == "torch-2.5-cu121"
