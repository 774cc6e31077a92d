"""Shared fixtures. Real manifests from envs/, machine profiles from tests/profiles/; nothing touches the network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envkit.catalog import Catalog, default_manifests_dir, load_catalog
from envkit.machine import MachineProfile, read_profile

PROFILES = Path(__file__).parent / "profiles"
REPO = Path(__file__).parent.parent


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


@pytest.fixture(scope="session")
def catalog(envs_dir: Path) -> Catalog:
    return load_catalog(envs_dir)


@pytest.fixture(scope="session")
def load_profile():
    """Read a machine profile from tests/profiles/ by name."""

    def load(name: str) -> MachineProfile:
        return read_profile(PROFILES / f"{name}.yaml")

    return load
