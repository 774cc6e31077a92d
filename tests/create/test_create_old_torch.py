"""PyTorch 1.x end to end: the d2l course's machine (4x V100, driver 418.67, CUDA 10.1) gets torch 1.8.1+cu101 from
the find-links page (download.pytorch.org/whl/torch_stable.html, here a stand-in on 127.0.0.1 through the mirror
setting), on an old Python (3.8) that the build publishes, with its dependencies from the PyPI stand-in: never
PyPI's plain torch 1.8.1 (the cu102 build) nor a higher version from anywhere.

Runs where the machine has a Python 3.8 (on PATH or in pyenv); the dry runs need none.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from conftest import PROFILES, Home, fake_torch_files
from envkit.backends.tools import find_python
from support.pypi_index import IndexServer
from support.stand_ins import stand_in_files
from support.wheels import build_wheel

D2L = ("--machine", str(PROFILES / "d2l.yaml"))
PY38 = Version("3.8")
VERSIONS = "import importlib.metadata as m; print(m.version('torch'), m.version('torchvision'), m.version('torchaudio'))"


@pytest.fixture(scope="module")
def old_torch_wheels(tmp_path_factory) -> dict[str, list[Path]]:
    """The find-links page's wheels (+cu101, +cu102 and +cu111 builds of 1.8.1) and PyPI's: the plain 1.8.1 (PyPI's
    cu102 build), a higher 1.8.2, torchaudio 0.8.1 and typing-extensions, torch's one dependency."""
    out = tmp_path_factory.mktemp("old-torch")
    links = [
        build_wheel(out / "links", "torch", "1.8.1+cu101", requires=["typing-extensions"],
                    files=fake_torch_files("1.8.1+cu101", "10.1")),
        build_wheel(out / "links", "torchvision", "0.9.1+cu101", requires=["torch==1.8.1"],
                    files=stand_in_files("torchvision")),
        build_wheel(out / "links", "torch", "1.8.1+cu111", requires=["typing-extensions"],
                    files=fake_torch_files("1.8.1+cu111", "11.1")),
        build_wheel(out / "links", "torchvision", "0.9.1+cu111", requires=["torch==1.8.1"],
                    files=stand_in_files("torchvision")),
        build_wheel(out / "links", "torchaudio", "0.8.1", requires=["torch==1.8.1"],
                    files=stand_in_files("torchaudio")),
    ]
    pypi = [
        build_wheel(out / "pypi", "torch", "1.8.1", requires=["typing-extensions"],
                    files=fake_torch_files("1.8.1", "10.2")),
        build_wheel(out / "pypi", "torch", "1.8.2", requires=["typing-extensions"],
                    files=fake_torch_files("1.8.2", "10.2")),
        build_wheel(out / "pypi", "torchvision", "0.9.1", requires=["torch==1.8.1"],
                    files=stand_in_files("torchvision")),
        build_wheel(out / "pypi", "torchaudio", "0.8.1", requires=["torch==1.8.1"],
                    files=stand_in_files("torchaudio")),
        build_wheel(out / "pypi", "typing-extensions", "4.1.1"),
    ]
    return {"links": links, "pypi": pypi}


@pytest.fixture
def stable_page(pypi_server: IndexServer, old_torch_wheels, home: Home) -> IndexServer:
    pypi_server.add_find_links("/whl/torch_stable.html", old_torch_wheels["links"])
    pypi_server.add_index("/pypi/simple", old_torch_wheels["pypi"])
    home.mirror_to(pypi_server)  # https://download.pytorch.org/whl -> /whl, https://pypi.org/simple -> /pypi/simple
    return pypi_server


def test_the_d2l_machine_is_planned_torch_1_8_1_cu101_with_a_python_it_publishes(home: Home, stable_page):
    done = home.envkit("create", "torch", *D2L, "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["build"] == "torch-1.8-cu101"
    assert Version("3.6") <= Version(plan["python"]) < Version("3.10")  # 1.8.1 publishes 3.6-3.9
    [step] = plan["pip"]
    assert step["packages"] == ["torch==1.8.1+cu101", "torchvision==0.9.1+cu101", "torchaudio==0.8.1"]
    assert step["find_links"] == f"{stable_page.url}/whl/torch_stable.html"  # the upstream page, mirrored
    assert step["index_url"] == f"{stable_page.url}/pypi/simple"  # dependencies: PyPI, mirrored
    assert stable_page.requests == []  # a dry run fetches nothing


def test_the_text_plan_names_the_find_links_page_and_passes_it_to_the_installer(home: Home, stable_page):
    done = home.envkit("create", "torch", *D2L, "--python", "3.8", "--dry-run")
    assert done.returncode == 0, done.stderr
    page = f"{stable_page.url}/whl/torch_stable.html"
    assert "Build:       torch-1.8-cu101" in done.stdout and "Python:      3.8" in done.stdout
    assert f"links:     {page}" in done.stdout
    assert f"--find-links {page} torch==1.8.1+cu101 torchvision==0.9.1+cu101" in done.stdout


def test_a_python_the_build_does_not_publish_is_refused(home: Home, stable_page):
    done = home.envkit("create", "torch", *D2L, "--python", "3.11", "--build", "torch-1.8-cu101", "--dry-run")
    assert done.returncode != 0
    assert "3.11" in done.stderr


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_torch_1_8_1_cu101_installs_on_python_3_8_from_the_find_links_page(home: Home, stable_page,
                                                                            installer: str):
    if find_python(PY38, None, home.env) is None:
        pytest.skip("no Python 3.8 on this machine")
    done = home.envkit("create", "torch", *D2L, "--python", "3.8", "--yes", env={"ENVKIT_INSTALLER": installer})
    assert done.returncode == 0, done.stdout + done.stderr
    assert home.in_env("torch-cu101", VERSIONS) == "1.8.1+cu101 0.9.1+cu101 0.8.1"
    assert home.in_env("torch-cu101", "import sys; print(sys.version_info[:2])") == "(3, 8)"
    fetched = stable_page.fetched_files()
    torch_files = [path for path in fetched if "/torch-" in path or "/torchvision-" in path]
    assert torch_files and all(path.startswith("/whl/") for path in torch_files), fetched
    assert any(path.startswith("/pypi/simple/typing-extensions/") for path in fetched), fetched
    record = home.record("torch-cu101")
    assert record["build"] == "torch-1.8-cu101" and record["python"] == "3.8"
    assert record["installer"] == installer
    assert home.leftovers() == []  # (python3.8 -m venv's pip leaves its CA bundle in $TMPDIR when let)


def test_a_lock_of_torch_1_8_pins_the_find_links_wheels_and_installs_them_from_there(home: Home, stable_page):
    """`envkit lock` resolves a find-links build with its page and keeps the page among its facts; create
    --from-lock fetches the wheels the lock pins (from the page's URLs) itself, and the installer takes them from
    the directory envkit put them in, with the hash-pinned requirements."""
    from envkit.lockfile import model
    from envkit.lockfile.format import read_lock

    lock = home.root / "d2l.yml"
    done = home.envkit("lock", "torch", *D2L, "--python", "3.8", "-o", str(lock))
    assert done.returncode == 0, done.stderr
    locked = read_lock(lock)
    pins = {p.name: p for p in locked.pip()}
    assert pins["torch"].version == "1.8.1+cu101" and pins["torchvision"].version == "0.9.1+cu101"
    assert pins["torch"].url.startswith("https://download.pytorch.org/whl/"), pins["torch"].url
    assert pins["typing-extensions"].url.startswith("https://pypi.org/simple/"), pins["typing-extensions"].url
    assert locked.custom[model.FIND_LINKS] == "https://download.pytorch.org/whl/torch_stable.html"
    assert locked.custom[model.INDEX_URL] == "https://pypi.org/simple" and locked.custom[model.PYTHON] == "3.8"
    if find_python(PY38, None, home.env) is None:
        dry = home.envkit("create", "--from-lock", str(lock), *D2L, "--dry-run")
        if dry.returncode == 1 and "no Python 3.8" in dry.stderr:
            pytest.skip("no Python 3.8 on this machine to install the lock into")
    made = home.envkit("create", "--from-lock", str(lock), *D2L, "--yes")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "--require-hashes --no-deps --no-index --find-links " in made.stdout and stable_page.url not in made.stdout
    assert home.in_env("torch-cu101", VERSIONS) == "1.8.1+cu101 0.9.1+cu101 0.8.1"
