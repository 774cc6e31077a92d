"""`envkit lock`, `envkit create --from-lock` and `envkit export` end to end: real solves of a local conda channel,
real uv resolutions against the loopback index, real installs, the real post-install check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import CU126, GTX1080TI, LEGACY_BUILD, LEGACY_CHANNEL, PROFILES, PYTHON, Home, conda_mirrors
from support.pypi_index import IndexServer

from envkit.lockfile.format import read_lock
from envkit.lockfile import model

from test_create_conda import leftovers, no_conda


@pytest.fixture
def conda_home(home: Home, legacy_channel: Path) -> Home:
    home.write_config(conda_mirrors(legacy_channel))
    return home


def conda_meta(prefix: Path) -> dict[str, dict]:
    """Each conda package's identity and its files with their hashes, as conda-meta records them."""
    out = {}
    for path in (prefix / "conda-meta").glob("*.json"):
        data = json.loads(path.read_text())
        out[data["name"]] = {"version": data["version"], "build": data["build"], "sha256": data["sha256"],
                             "md5": data["md5"],
                             "files": sorted((p["_path"], p.get("sha256")) for p in data["paths_data"]["paths"])}
    return out


def test_legacy_conda_build_locks_installs_exactly_and_exports(conda_home: Home, legacy_channel: Path,
                                                                conda_manifests: Path):
    home = conda_home
    lock = home.root / "tf.lock.yml"
    done = home.envkit("lock", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests), "-o", str(lock))
    assert done.returncode == 0, done.stderr
    locked = read_lock(lock)
    names = {p.name for p in locked.conda()}
    assert names == {"python", "cudatoolkit", "tensorflow-gpu"}
    for package in locked.conda():  # upstream URLs, not the mirror, and both hashes
        assert package.url.startswith(LEGACY_CHANNEL + "/"), package.url
        assert len(package.sha256) == 64 and len(package.md5) == 32
    assert locked.custom[model.BUILD] == "tensorflow-2.4.1-cu101"
    assert locked.custom[model.CUDA_DRIVER] == "10.1" and locked.custom[model.CUDA_ARCH] == "6.1"
    assert locked.custom[model.PYTHON] == PYTHON

    made = home.envkit("create", "--from-lock", str(lock), "--name", "tf-locked", *GTX1080TI, "--manifests",
                       str(conda_manifests), "--yes", env=no_conda(home))
    assert made.returncode == 0, made.stderr + made.stdout
    prefix = home.prefix("tf-locked")
    meta = conda_meta(prefix)
    assert {name: (m["sha256"]) for name, m in meta.items()} == {p.name: p.sha256 for p in locked.conda()}
    assert home.record("tf-locked")["verify"]["ok"] is True

    exported = home.root / "exported.yml"
    done = home.envkit("export", "tf-locked", "-o", str(exported), "--manifests", str(conda_manifests))
    assert done.returncode == 0, done.stderr
    again = read_lock(exported)
    assert {(p.name, p.url, p.sha256) for p in again.conda()} == {(p.name, p.url, p.sha256) for p in locked.conda()}


def test_pip_build_locks_and_installs_with_hashes(home: Home, torch_index: IndexServer):
    lock = home.root / "torch.lock.yml"
    done = home.envkit("lock", *CU126, "-o", str(lock))
    assert done.returncode == 0, done.stderr
    locked = read_lock(lock)
    assert not locked.conda()
    pins = {p.name: p for p in locked.pip()}
    assert set(pins) == {"torch", "torchvision", "torchaudio", "filelock"}
    assert pins["torch"].version == "2.13.0+cu126"
    assert pins["torch"].url.startswith("https://download.pytorch.org/whl/cu126/"), pins["torch"].url
    made = home.envkit("create", "--from-lock", str(lock), "--name", "t1", "--machine",
                       str(PROFILES / "rtx4090-cuda126.yaml"), "--yes")
    assert made.returncode == 0, made.stderr + made.stdout
    assert home.in_env("t1", "import torch; print(torch.__version__)") == "2.13.0+cu126"
    exported = home.root / "t1.yml"
    done = home.envkit("export", "t1", "-o", str(exported))
    assert done.returncode == 0, done.stderr
    assert {(p.name, p.url, p.sha256) for p in read_lock(exported).pip()} == {
        (p.name, p.url, p.sha256) for p in locked.pip()}
