"""Shared fixtures. Real manifests from envs/, machine profiles from tests/profiles/; nothing touches the network."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import pytest

from envkit.catalog import Catalog, default_manifests_dir, load_catalog
from envkit.machines.profile import MachineProfile, read_profile

from support import fake_nvml, json_outputs, next_steps

PROFILES = Path(__file__).parent / "profiles"
REPO = Path(__file__).parent.parent


def pytest_configure(config):
    """Every envkit the suite runs keeps a copy of its JSON outputs, checked against schemas/ at the end. And Ctrl-C
    reaches the programs the tests start, however the suite itself was started."""
    import signal
    import tempfile

    # A job a shell starts in the background (`pytest ... &` in a script, `nohup`) ignores SIGINT and SIGQUIT, and
    # so does every program it starts: a Python started ignoring SIGINT never raises KeyboardInterrupt. The tests of
    # what a Ctrl-C does would then test nothing (and fail): they get the default back.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)

    if json_outputs.VARIABLE not in os.environ:
        config._envkit_json_dir = tempfile.mkdtemp(prefix="envkit-json-outputs-")
        os.environ[json_outputs.VARIABLE] = config._envkit_json_dir


def pytest_sessionfinish(session, exitstatus):
    if next_steps.PROBLEMS:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    directory = getattr(session.config, "_envkit_json_dir", None)
    if directory is None:
        return
    import shutil

    try:
        session.config._envkit_json_checked = json_outputs.problems(Path(directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        os.environ.pop(json_outputs.VARIABLE, None)
    if session.config._envkit_json_checked[1]:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    checked, found = getattr(config, "_envkit_json_checked", (0, []))
    if checked:
        terminalreporter.write_line(f"--json outputs checked against schemas/: {checked}, problems: {len(found)}")
    for line in found:
        terminalreporter.write_line(f"JSON SCHEMA FAILED: {line}", red=True)
    if next_steps.CHECKED[0]:
        terminalreporter.write_line(f"next steps checked as a user would paste them: {next_steps.CHECKED[0]}, "
                                    f"problems: {len(next_steps.PROBLEMS)}")
    for line in next_steps.PROBLEMS:
        terminalreporter.write_line(f"NEXT STEP FAILED: {line}", red=True)


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


@pytest.fixture(scope="session")
def nvml_library(tmp_path_factory) -> Path:
    """The stand-in libnvidia-ml.so.1 (tests/support/fake_nvml.py), built once for the session."""
    if fake_nvml.compiler() is None:
        pytest.skip("no C compiler (cc) to build the stand-in libnvidia-ml.so.1")
    return fake_nvml.build_library(tmp_path_factory.mktemp("nvml"))


@pytest.fixture
def this_machine(nvml_library, tmp_path):
    """this_machine(gpus, driver=..., cuda=...) -> the variables under which envkit detects that machine here, GPUs
    in the probe stand-ins' form (tests/probe/probe_helpers.py: A100, ...). NVML answers with it, so neither /proc
    nor nvidia-smi is asked: a command judging "this machine" sees those GPUs whatever the host has (no driver on
    CI, an H100 on a developer's workstation). The default driver, 550.54.14, is CUDA 12.4's."""
    count = iter(range(1000))

    def make(gpus: Sequence[Mapping], driver: str = "550.54.14", cuda: int = 12040) -> dict[str, str]:
        described = [(gpu["name"], tuple(gpu["capability"]), gpu["memory"] // 2**20) for gpu in gpus]
        machine = fake_nvml.write_machine(tmp_path / f"nvml-machine-{next(count)}", driver, cuda, described)
        search = [str(nvml_library.parent), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]
        return {"LD_LIBRARY_PATH": os.pathsep.join(search), "FAKE_NVML_MACHINE": str(machine)}

    return make
