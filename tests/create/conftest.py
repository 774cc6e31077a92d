"""Fixtures for `envkit create` and friends: a private home for each test, a local index, stand-in wheels.

envkit runs as a user runs it (a subprocess) with HOME and the XDG directories inside the test's tmp_path, a
config file whose mirrors point the real manifests in envs/ at a real PEP 503 index on 127.0.0.1, and a `sudo` on
PATH that records any call (none may happen). This machine's own pip settings (PIP_FIND_LINKS, pip.conf) are left
in place on purpose: envkit's installers must not see them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

import pytest

from support.fixtures import pypi_server  # noqa: F401 (a fixture)
from support.next_steps import check_pasted
from support.paused import wait_until_paused
from support.pypi_index import IndexServer
from support.stand_ins import stand_in_files
from support.wheels import build_wheel

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
        environment = {**self.env, **(env or {})}
        done = subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True,
                              env=environment, timeout=timeout, cwd=self.root, input=stdin)
        check_pasted(args, done.stdout + done.stderr, environment, self.root)
        return done

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "envkit", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env, cwd=self.root)

    def record(self, name: str) -> Optional[dict[str, Any]]:
        path = self.data / "records" / f"{name}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def leftovers(self) -> list[str]:
        """What is left in the $TMPDIR envkit ran with: nothing, once a command has ended."""
        return sorted(entry.name for entry in (self.root / "tmp").iterdir())

    def in_env(self, name: str, code: str) -> str:
        """What ``python -c code`` prints inside the environment, run through `envkit run`."""
        done = self.envkit("run", name, "--", "python", "-c", code)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path / "home")


def make_home(root: Path) -> Home:
    """A private home at ``root`` (the ``home`` fixture's; a module's own, for tests that share one environment)."""
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
    (root / "tmp").mkdir()
    env["TMPDIR"] = str(root / "tmp")  # what envkit and its installers leave there is seen (Home.leftovers)
    config = root / "envkit.yaml"
    config.write_text("# no mirrors: tests that fetch write theirs\n", encoding="utf-8")
    return Home(root=root, env=env, config=config, sudo_log=sudo_log)


@contextlib.contextmanager
def held_at(home: Home, args: Sequence[str], step: str, env: Mapping[str, str] = {}  # noqa: B006 (read only)
            ) -> Iterator[tuple[subprocess.Popen, Path]]:
    """`envkit ARGS...` started and held at ``step`` (envkit/state/testpause.py): (the process, the file whose
    removal lets it go on). Ctrl-C reaches it as a terminal delivers it; it is killed if the block leaves it
    running."""
    marker = home.root / "paused"
    marker.unlink(missing_ok=True)
    environ = {**home.env, **env, "ENVKIT_TEST_PAUSE_AT": step, "ENVKIT_TEST_PAUSE_FILE": str(marker)}
    process = subprocess.Popen([sys.executable, "-m", "envkit", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environ, cwd=home.root,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_until_paused(process, marker, step)
        yield process, marker
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)


def fake_torch_files(version: str, cuda: Optional[str]) -> dict[str, str]:
    """The probe tests' stand-in PyTorch (tests/probe/fakes), as wheel contents: the post-install check runs it."""
    return stand_in_files("torch", {"torch": {"version": version, "cuda": cuda, "gpus": []}})


@pytest.fixture(scope="session")
def torch_wheels(tmp_path_factory) -> dict[str, list[Path]]:
    """Stand-in torch 2.13 wheels: the cu126 index's (+cu126) and a PyPI stand-in's, with a HIGHER plain version."""
    out = tmp_path_factory.mktemp("torch-wheels")
    cu126 = [
        build_wheel(out / "cu126", "torch", "2.13.0+cu126", requires=["filelock"],
                    files=fake_torch_files("2.13.0+cu126", "12.6")),
        build_wheel(out / "cu126", "torchvision", "0.28.0+cu126", requires=["torch==2.13.0"],
                    files=stand_in_files("torchvision")),
        build_wheel(out / "cu126", "torchaudio", "2.11.0+cu126", requires=["torch==2.13.0"],
                    files=stand_in_files("torchaudio")),
        build_wheel(out / "cu126", "filelock", "3.20.0"),
    ]
    pypi = [
        build_wheel(out / "pypi", "torch", "2.13.1", requires=["filelock"], files=fake_torch_files("2.13.1", "13.0")),
        build_wheel(out / "pypi", "torchvision", "0.28.1", requires=["torch==2.13.1"],
                    files=stand_in_files("torchvision")),
        build_wheel(out / "pypi", "torchaudio", "2.11.1", requires=["torch==2.13.1"],
                    files=stand_in_files("torchaudio")),
        build_wheel(out / "pypi", "filelock", "3.20.0"),
    ]
    return {"cu126": cu126, "pypi": pypi}


BIG = 4_000_000  # bytes of random data in big_wheels' torch: a download that takes a moment, a size that shows


@pytest.fixture(scope="session")
def big_wheels(tmp_path_factory) -> list[Path]:
    """The cu126 stand-ins, torch's wheel over BIG bytes (uv names such a download: "Downloading torch (3.8MiB)")."""
    out = tmp_path_factory.mktemp("big-wheels")
    files = {**fake_torch_files("2.13.0+cu126", "12.6"), "torch/weights.bin": os.urandom(BIG)}
    return [
        build_wheel(out, "torch", "2.13.0+cu126", requires=["filelock"], files=files),
        build_wheel(out, "torchvision", "0.28.0+cu126", requires=["torch==2.13.0"]),
        build_wheel(out, "torchaudio", "2.11.0+cu126", requires=["torch==2.13.0"]),
        build_wheel(out, "filelock", "3.20.0"),
    ]


@pytest.fixture
def torch_index(pypi_server: IndexServer, torch_wheels: dict[str, list[Path]], home: Home) -> IndexServer:
    """The local index serving /whl/cu126 and /pypi/simple, with `home`'s config mirroring envs/ to it."""
    pypi_server.add_index("/whl/cu126", torch_wheels["cu126"])
    pypi_server.add_index("/pypi/simple", torch_wheels["pypi"])
    home.mirror_to(pypi_server)
    return pypi_server


# `envkit create torch` for an RTX 4090 machine, the cu126 build of 2.13, on this machine's Python.
CU126 = ("torch", "--build", "torch-2.13-cu126", "--python", PYTHON, "--machine", str(PROFILES / "rtx4090-cuda126.yaml"))


# --- The conda side: a local channel of legacy-TensorFlow-like packages, and manifests that install from it --------

LEGACY_CHANNEL = "https://conda.anaconda.org/legacy-test"  # the upstream channel the test manifest names
CONDA_FORGE = "https://conda.anaconda.org/conda-forge"  # python.yaml's conda_channel: Python of pure-pip builds
PYTHON_FULL = ".".join(str(part) for part in sys.version_info[:3])
SITE_PACKAGES = f"lib/python{PYTHON}/site-packages"
# The GPU code of the manifest's legacy build and of the stand-in TensorFlow that its conda package ships.
LEGACY_SASS = ("3.5", "5.2", "6.0", "6.1", "7.0", "7.5")

# A legacy-TF-like manifest: the conda build bundles cudatoolkit 10.1 (so its Python comes from conda too), and a
# newer pure-pip CPU build installs tensorflow-cpu from the default index. Its Python ranges admit the Python
# running the tests, which is the one the channel's `python` package provides.
TENSORFLOW_MANIFEST = f"""\
# Sources: none; a test stand-in for envs/tensorflow.yaml (tests/create/conftest.py).
name: tensorflow
summary: Stand-in TensorFlow builds for envkit's conda tests
framework: tensorflow
releases:
  - version: "2.4.1"
    python: ">=3.7,<{sys.version_info[0]}.{sys.version_info[1] + 1}"
    builds:
      - variant: cu101
        cuda: "10.1"
        arch:
          sass: [{", ".join(f'"{arch}"' for arch in LEGACY_SASS)}]
        conda:
          channels: ["{LEGACY_CHANNEL}"]
          packages: ["tensorflow-gpu=2.4.1", "cudatoolkit=10.1"]
  - version: "2.15"
    python: ">=3.9,<{sys.version_info[0]}.{sys.version_info[1] + 1}"
    builds:
      - variant: cpu
        pip: {{packages: ["tensorflow-cpu==2.15.*"]}}
"""
LEGACY_BUILD = ("tensorflow", "--build", "tensorflow-2.4.1-cu101", "--python", PYTHON)
GTX1080TI = ("--machine", str(PROFILES / "gtx1080ti-cuda101.yaml"))  # driver 418.87: CUDA 10.1


def fake_tensorflow_files(version: str, cuda: Optional[str]) -> dict[str, str]:
    """The probe tests' stand-in TensorFlow (tests/probe/fakes), as files relative to site-packages."""
    arch_list = [f"sm_{arch.replace('.', '')}" for arch in LEGACY_SASS]
    return {
        "fakearray.py": (FAKES / "fakearray.py").read_text(encoding="utf-8"),
        "tensorflow/__init__.py": (FAKES / "tensorflow" / "__init__.py").read_text(encoding="utf-8"),
        "fake_config.json": json.dumps({"tensorflow": {"version": version, "cuda": cuda, "gpus": [],
                                                       "arch_list": arch_list}}),
    }


def conda_python_metadata(name: str, version: str) -> dict[str, str]:
    """The Python metadata a conda package of a Python library carries (pip and uv see it; its INSTALLER: conda)."""
    dist_info = f"{SITE_PACKAGES}/{name}-{version}.dist-info"
    return {f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
            f"{dist_info}/INSTALLER": "conda\n", f"{dist_info}/RECORD": ""}


@pytest.fixture(scope="session")
def legacy_channel(tmp_path_factory) -> Path:
    """A local conda channel: a working python (this interpreter), a stand-in pip, cudatoolkit 10.1 (needs
    __cuda >=10.1, ships an activation script setting CUDA_TEST_HOME) and tensorflow-gpu 2.4.1 (pins that
    cudatoolkit, needs __cuda >=10.1, ships the stand-in TensorFlow)."""
    from support.conda_channel import build_package, build_pip_package, build_python_package, index_channel

    root = tmp_path_factory.mktemp("legacy-channel")
    build_python_package(root, PYTHON_FULL)
    build_pip_package(root)
    build_package(root, "cudatoolkit", "10.1.243", depends=("__cuda >=10.1",), files={
        "lib/libcudart.so.10.1.243": "cudart 10.1.243\n",
        "etc/conda/activate.d/cudatoolkit_activate.sh": 'export CUDA_TEST_HOME="$CONDA_PREFIX/cuda"\n',
    })
    python_range = f"python >={PYTHON},<{sys.version_info[0]}.{sys.version_info[1] + 1}"
    build_package(root, "tensorflow-gpu", "2.4.1", depends=("cudatoolkit >=10.1,<10.2", python_range, "__cuda >=10.1"),
                  files={**{f"{SITE_PACKAGES}/{path}": text
                            for path, text in fake_tensorflow_files("2.4.1", "10.1").items()},
                         **conda_python_metadata("tensorflow", "2.4.1")})
    index_channel(root)
    return root


@pytest.fixture(scope="session")
def conda_manifests(tmp_path_factory) -> Path:
    """A manifests directory (for --manifests): envs/'s cuda, python and gpus tables and the stand-in tensorflow."""
    import shutil

    out = tmp_path_factory.mktemp("manifests")
    for table in ("cuda.yaml", "python.yaml", "gpus.yaml"):
        shutil.copy(REPO / "envs" / table, out / table)
    (out / "tensorflow.yaml").write_text(TENSORFLOW_MANIFEST, encoding="utf-8")
    return out


def conda_mirrors(channel: Path, server: Optional[IndexServer] = None) -> dict[str, str]:
    """The config's mirrors: the legacy channel and conda-forge to the local channel, PyPI to ``server``."""
    mirrors = {LEGACY_CHANNEL: channel.as_uri(), CONDA_FORGE: channel.as_uri()}
    if server is not None:
        mirrors["https://pypi.org/simple"] = f"{server.url}/pypi/simple"
    return mirrors
