"""Fixtures for `envkit create` and friends: a private home for each test, a local index, stand-in wheels.

envkit runs as a user runs it (a subprocess) with HOME and the XDG directories inside the test's tmp_path, a
config file whose mirrors point the real manifests in envs/ at a real PEP 503 index on 127.0.0.1, and a `sudo` on
PATH that records any call (none may happen). This machine's own pip settings (PIP_FIND_LINKS, pip.conf) are left
in place on purpose: envkit's installers must not see them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

import pytest

from support.fixtures import pypi_server  # noqa: F401 (a fixture)
from support.pypi_index import IndexServer, build_wheel

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "probe" / "fakes"
PROFILES = REPO / "tests" / "profiles"
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"

_SUDO = """#!/bin/sh
echo "$@" >> "{log}"
exit 1
"""


@dataclass
class Home:
    root: Path
    env: dict[str, str]
    config: Path
    sudo_log: Path

    @property
    def data(self) -> Path:
        return Path(self.env["XDG_DATA_HOME"]) / "envkit"

    def prefix(self, name: str) -> Path:
        return self.data / "envs" / name

    def write_config(self, mirrors: Mapping[str, str], **extra: Any) -> None:
        self.config.write_text(json.dumps({"mirrors": dict(mirrors), **extra}), encoding="utf-8")

    def mirror_to(self, server: IndexServer) -> None:
        """The upstream URLs of envs/ mapped to the local server: /whl/<variant> and /pypi/simple."""
        self.write_config({"https://download.pytorch.org/whl": f"{server.url}/whl",
                           "https://pypi.org/simple": f"{server.url}/pypi/simple"})

    def envkit(self, *args: str, env: Optional[Mapping[str, str]] = None, timeout: float = 300,
               stdin: Optional[str] = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True,
                              env={**self.env, **(env or {})}, timeout=timeout, cwd=self.root, input=stdin)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "envkit", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env, cwd=self.root)

    def record(self, name: str) -> Optional[dict[str, Any]]:
        path = self.data / "records" / f"{name}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def in_env(self, name: str, code: str) -> str:
        """What ``python -c code`` prints inside the environment, run through `envkit run`."""
        done = self.envkit("run", name, "--", "python", "-c", code)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


@pytest.fixture
def home(tmp_path: Path) -> Home:
    root = tmp_path / "home"
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    sudo_log = root / "sudo-calls.log"
    sudo = bin_dir / "sudo"
    sudo.write_text(_SUDO.format(log=sudo_log), encoding="utf-8")
    sudo.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ENVKIT_") and k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_OVERRIDE_CUDA")}
    env.update({
        "HOME": str(root),
        "XDG_CONFIG_HOME": str(root / ".config"),
        "XDG_DATA_HOME": str(root / ".local" / "share"),
        "XDG_CACHE_HOME": str(root / ".cache"),
        "ENVKIT_CONFIG": str(root / "envkit.yaml"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "NO_PROXY": "127.0.0.1,localhost",
    })
    config = root / "envkit.yaml"
    config.write_text("# no mirrors: tests that fetch write theirs\n", encoding="utf-8")
    return Home(root=root, env=env, config=config, sudo_log=sudo_log)


def fake_torch_files(version: str, cuda: Optional[str]) -> dict[str, str]:
    """The probe tests' stand-in PyTorch (tests/probe/fakes), as wheel contents: the post-install check runs it."""
    files = {"fakearray.py": (FAKES / "fakearray.py").read_text(encoding="utf-8")}
    for source in sorted((FAKES / "torch").glob("*.py")):
        files[f"torch/{source.name}"] = source.read_text(encoding="utf-8")
    files["fake_config.json"] = json.dumps({"torch": {"version": version, "cuda": cuda, "gpus": []}})
    return files


@pytest.fixture(scope="session")
def torch_wheels(tmp_path_factory) -> dict[str, list[Path]]:
    """Stand-in torch 2.13 wheels: the cu126 index's (+cu126) and a PyPI stand-in's, with a HIGHER plain version."""
    out = tmp_path_factory.mktemp("torch-wheels")
    cu126 = [
        build_wheel(out / "cu126", "torch", "2.13.0+cu126", requires=["filelock"],
                    files=fake_torch_files("2.13.0+cu126", "12.6")),
        build_wheel(out / "cu126", "torchvision", "0.28.0+cu126", requires=["torch==2.13.0"]),
        build_wheel(out / "cu126", "torchaudio", "2.11.0+cu126", requires=["torch==2.13.0"]),
        build_wheel(out / "cu126", "filelock", "3.20.0"),
    ]
    pypi = [
        build_wheel(out / "pypi", "torch", "2.13.1", requires=["filelock"], files=fake_torch_files("2.13.1", "13.0")),
        build_wheel(out / "pypi", "torchvision", "0.28.1", requires=["torch==2.13.1"]),
        build_wheel(out / "pypi", "torchaudio", "2.11.1", requires=["torch==2.13.1"]),
        build_wheel(out / "pypi", "filelock", "3.20.0"),
    ]
    return {"cu126": cu126, "pypi": pypi}


@pytest.fixture
def torch_index(pypi_server: IndexServer, torch_wheels: dict[str, list[Path]], home: Home) -> IndexServer:
    """The local index serving /whl/cu126 and /pypi/simple, with `home`'s config mirroring envs/ to it."""
    pypi_server.add_index("/whl/cu126", torch_wheels["cu126"])
    pypi_server.add_index("/pypi/simple", torch_wheels["pypi"])
    home.mirror_to(pypi_server)
    return pypi_server


# `envkit create torch` for an RTX 4090 machine, the cu126 build of 2.13, on this machine's Python.
CU126 = ("torch", "--build", "torch-2.13-cu126", "--python", PYTHON, "--machine", str(PROFILES / "rtx4090-cuda126.yaml"))
