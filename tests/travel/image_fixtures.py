"""The fixtures of test_images.py (imported there by name: a conftest.py here would stand in for tests/create's,
which its tests import as `conftest`). Images made for real: Debian's squashfs-tools, squashfuse and fuse3 (installed when missing, as root:
tests/support/squashfs.py), a stand-in PyTorch environment (tests/slurm/slurm_helpers.py's) packed once for the
module, mounted and run by envkit in subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping

import pytest

from support import squashfs


class Packer:
    """A user's directories (config, data, cache), one environment made in them (torch-test, the probe tests'
    stand-in PyTorch: two A100s, CUDA 12.6), and envkit run with them."""

    def __init__(self, root: Path) -> None:
        from tests.slurm.slurm_helpers import make_torch_env

        self.root = root
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("ENVKIT_", "FAKE_NVML")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
        self.env.update({"HOME": str(root), "XDG_DATA_HOME": str(root / "data"), "XDG_CACHE_HOME": str(root / "cache"),
                         "XDG_CONFIG_HOME": str(root / "config")})
        self.prefix = make_torch_env(root / "envs" / "torch-test", self.env)

    def envkit(self, *args: str, env: Mapping[str, str] = {}, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True,
                              env={**self.env, **env}, cwd=self.root, timeout=timeout)

    def popen(self, *args: str, env: Mapping[str, str] = {}, **kwargs) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "envkit", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**self.env, **env}, cwd=self.root, **kwargs)


@pytest.fixture(scope="session")
def squashfs_tools() -> None:
    squashfs.ensure_installed()


@pytest.fixture(scope="module")
def packer(squashfs_tools, tmp_path_factory) -> Packer:
    return Packer(tmp_path_factory.mktemp("packer"))


@pytest.fixture(scope="module")
def image(packer: Packer) -> Path:
    """torch-test packed to mount at ROOT/mnt/torch (its own path holds the environment itself)."""
    out = packer.root / "torch.sqfs"
    done = packer.envkit("pack", "torch-test", "-o", str(out), "--relocate", str(packer.root / "mnt" / "torch"))
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(autouse=True)
def _nothing_left_mounted(request):
    """Every test of images: no squashfuse mount of its own left behind."""
    before = set(squashfs.squashfuse_mounts()) if "squashfs_tools" in request.fixturenames or \
        "image" in request.fixturenames else None
    yield
    if before is not None:
        left = set(squashfs.squashfuse_mounts()) - before
        assert not left, f"left mounted: {left}"
