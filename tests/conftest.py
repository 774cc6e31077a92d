"""Shared fixtures. Real manifests from envs/, machine profiles from tests/profiles/; nothing touches the network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envkit.catalog import Catalog, default_manifests_dir, load_catalog
from envkit.machine import MachineProfile, read_profile

PROFILES = Path(__file__).parent / "profiles"
REPO = Path(__file__).parent.parent


@pytest.fixture(scope="session", autouse=True)
def _private_user_dirs(tmp_path_factory):
    """envkit (and Jupyter) write to the user's config, data and cache dirs: in the tests, temporary ones, so no
    test writes into the real home, even one that runs envkit with the caller's environment."""
    base = tmp_path_factory.mktemp("user-dirs")
    names = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")
    saved = {name: os.environ.get(name) for name in (*names, "ENVKIT_CONFIG")}
    for name in names:
        os.environ[name] = str(base / name.lower())
    os.environ.pop("ENVKIT_CONFIG", None)  # never the developer's own mirrors
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _no_leaked_state():
    """A test must not leave os.environ or the working directory changed (monkeypatch undoes its own)."""
    def environ() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}

    before, cwd = environ(), os.getcwd()
    yield
    assert environ() == before, "the test changed os.environ"
    assert os.getcwd() == cwd, "the test changed the working directory"


@pytest.fixture(scope="session")
def envs_dir() -> Path:
    return default_manifests_dir()


@pytest.fixture
def envs_copy(envs_dir: Path, tmp_path: Path) -> Path:
    """A copy of the shipped manifests to edit (support.manifest_edits), its YAML files only."""
    import shutil

    copy = tmp_path / "envs"
    shutil.copytree(envs_dir, copy, ignore=shutil.ignore_patterns("__pycache__", "__init__.py", "README.md"))
    return copy


@pytest.fixture(scope="session")
def catalog(envs_dir: Path) -> Catalog:
    return load_catalog(envs_dir)


@pytest.fixture(scope="session")
def load_profile():
    """Read a machine profile from tests/profiles/ by name."""

    def load(name: str) -> MachineProfile:
        return read_profile(PROFILES / f"{name}.yaml")

    return load
