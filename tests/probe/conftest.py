"""Fixtures for the probe tests: throw-away venvs holding the stand-in frameworks of fakes/, and the real PyTorch
CPU wheel where this machine has it. Nothing touches the network; everything is written under pytest's tmp dirs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

import pytest
from probe_helpers import FAKES, FakeEnv

REAL_TORCH_WHEEL_SPEC = "torch==2.13.0"


def make_fake_env(
    root: Path,
    config: Mapping[str, object],
    frameworks: Sequence[str] = ("torch",),
    interpreter: str = sys.executable,
    distributions: Optional[Mapping[str, str]] = None,
) -> FakeEnv:
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True,
                   timeout=60)
    [site] = root.glob("lib/python*/site-packages")
    shutil.copy(FAKES / "fakearray.py", site)
    for framework in frameworks:
        shutil.copytree(FAKES / framework, site / framework, ignore=shutil.ignore_patterns("__pycache__"))
    (site / "fake_config.json").write_text(json.dumps(config), encoding="utf-8")
    for name, version in (distributions or {}).items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    return FakeEnv(root=root, python=root / "bin" / "python", site=site)


@pytest.fixture
def fake_env(tmp_path):
    """fake_env(config, frameworks=("torch",), interpreter=..., distributions={name: version}) -> FakeEnv."""
    count = iter(range(1000))

    def make(config, frameworks=("torch",), interpreter=sys.executable, distributions=None) -> FakeEnv:
        return make_fake_env(tmp_path / f"env{next(count)}", config, frameworks, interpreter, distributions)

    return make


@pytest.fixture(scope="session")
def real_torch_python(tmp_path_factory) -> Path:
    """A venv with the real PyTorch CPU wheel from pip's configured find-links (never an index), or a skip."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the PyTorch CPU wheel at hand is for CPython 3.11")
    root = tmp_path_factory.mktemp("real-torch") / "venv"
    # System site-packages give torch its pure-Python dependencies (sympy, typing_extensions, ...) without an index.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True,
                   capture_output=True, timeout=60)
    python = root / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
         REAL_TORCH_WHEEL_SPEC],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PIP_NO_INPUT": "1"},
    )
    if installed.returncode != 0:
        pytest.skip(f"no {REAL_TORCH_WHEEL_SPEC} wheel in pip's find-links here: {installed.stderr.strip()[-300:]}")
    return python
