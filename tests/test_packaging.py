"""A non-editable install works from any directory: the envs/ manifests ship inside the wheel."""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent
PROFILES = Path(__file__).parent / "profiles"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # Build from a copy so that the build leaves nothing in the checkout; no build isolation, so no network.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("envkit", "envs"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(out), str(source)],
        check=True, capture_output=True, timeout=300,
    )
    [built] = out.glob("envkit_gpu-*.whl")  # the distribution's name: "envkit" on PyPI is another project
    return built


def test_wheel_carries_every_manifest(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for manifest in (REPO / "envs").glob("*.yaml"):
        assert f"envkit/envs/{manifest.name}" in names


def test_wheel_carries_every_module(wheel):
    """A package missing from pyproject's list would install an envkit that fails on its first import of it."""
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {path.relative_to(REPO).as_posix() for path in (REPO / "envkit").rglob("*.py")}
    assert modules and modules <= names, sorted(modules - names)


def test_installed_envkit_lists_from_any_directory(wheel, tmp_path):
    # A venv that gets envkit only from the wheel, and its dependencies (typer, pyyaml, ...) from the environment
    # running the tests, through a .pth file (system_site_packages would reach the base interpreter, not a venv).
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "_test_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "-q", str(wheel)], check=True, capture_output=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([str(python), "-c", "import envkit.catalog as c; print(c.default_manifests_dir())"],
                           capture_output=True, text=True, cwd=elsewhere, check=True)
    assert Path(where.stdout.strip()).is_relative_to(env)
    result = subprocess.run(
        [str(env / "bin" / "envkit"), "list", "--json", "--machine", str(PROFILES / "h100-cuda128.yaml")],
        capture_output=True, text=True, cwd=elsewhere, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    # envkit --version tells this envkit from PyPI's unrelated "envkit": the distribution's name and where it is
    version = subprocess.run([str(env / "bin" / "envkit"), "--version"], capture_output=True, text=True, cwd=elsewhere,
                             timeout=60)
    assert version.stdout.startswith("envkit 0.1.0 (envkit-gpu, ") and str(env) in version.stdout, version.stdout
    metadata = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('envkit-gpu'))"],
                              capture_output=True, text=True, check=True)
    assert metadata.stdout.strip() == "0.1.0"
    manifests = {m["name"]: m for m in json.loads(result.stdout)["manifests"]}
    assert manifests["torch"]["selected"] == "torch-2.14-cu126"
    assert {"tensorflow", "jax", "mxnet"} <= set(manifests)
    plan = subprocess.run(
        [str(env / "bin" / "envkit"), "create", "torch", "--dry-run", "--json", "--machine",
         str(PROFILES / "h100-cuda128.yaml")],
        capture_output=True, text=True, cwd=elsewhere, timeout=60,
        env={"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
    )
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["build"] == "torch-2.14-cu126"
