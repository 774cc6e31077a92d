"""The environment guards itself: whichever way the user installs into it, the build cannot be replaced silently
(envkit.backends.guard). `pip` where the environment has none says so instead of running another Python's pip;
`uv pip install` after `envkit run`, `source bin/activate` and `module load` (real Lmod) reads UV_CONSTRAINT; the
environment's own pip (after `envkit add ENV pip`) reads its pip.conf; each fails with the installer's own error
naming the constraint, and deactivating gives the user's own settings back. And the documented limit: uv pointed
at the environment's Python without activating it reads neither, and envkit then refuses to add to a build changed
outside it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from add_helpers import installed_versions, lab, torch_files
from conftest import Home
from support import module_systems
from support.pypi_index import uv_binary

NAME = "torch-cu126"
HELD = "torch==2.13.0+cu126"


@pytest.fixture(scope="module")
def made(tmp_path_factory, torch_wheels):
    with lab(tmp_path_factory, torch_wheels, "guard") as (home, server):
        yield home, server.index_url("/pypi/simple")


def _bash(home: Home, script: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in home.env.items() if k not in ("UV_CONSTRAINT", "PIP_CONSTRAINT")}
    env.update(extra)
    uv = Path(uv_binary()).parent
    env["PATH"] = f"{uv}:{env['PATH']}"  # the uv envkit depends on, as a user's own uv
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", script], capture_output=True, text=True, env=env,
                          cwd=home.root, timeout=300)


def test_pip_where_the_environment_has_none_says_so_instead_of_running_another(made):
    home, index = made
    prefix = home.prefix(NAME)
    for way in (f"envkit_run() {{ {_envkit(home)} run {NAME} -- \"$@\"; }}; envkit_run pip install small",
                f"source {prefix}/bin/activate && pip install small", f"source {prefix}/bin/activate && pip3 install x",
                f"source {prefix}/bin/activate && pip{_python(prefix)} install x"):
        done = _bash(home, way)
        assert done.returncode == 1, way + done.stdout + done.stderr
        assert f"pip: {NAME} has no pip of its own" in done.stderr and f"envkit add {NAME} pip" in done.stderr
    assert "small" not in installed_versions(prefix)


@pytest.mark.parametrize("way", ["envkit run", "source bin/activate"])
def test_uv_pip_install_after_activating_cannot_replace_the_build(made, way):
    home, index = made
    prefix = home.prefix(NAME)
    before = torch_files(prefix)
    enter = (f"envkit_in() {{ {_envkit(home)} run {NAME} -- bash -c \"$1\"; }}" if way == "envkit run" else
             f"source {prefix}/bin/activate")
    run = (lambda command: f"envkit_in '{command}'") if way == "envkit run" else (lambda command: command)
    script = "\n".join([
        enter,
        run(f"uv pip install --index-url {index} oldtorch") + "; echo refused=$?",
        run(f"uv pip install --index-url {index} small==0.5") + "; echo added=$?",
        *(["deactivate"] if way != "envkit run" else []),
        'echo "after=[${UV_CONSTRAINT-unset}] [${PIP_CONSTRAINT-unset}]"',
    ])
    done = _bash(home, script, UV_CONSTRAINT=_mine(home))
    assert "refused=1" in done.stdout and HELD in done.stderr, done.stdout + done.stderr
    assert "added=0" in done.stdout, done.stderr
    assert torch_files(prefix) == before and installed_versions(prefix)["small"] == "0.5"
    assert f"after=[{_mine(home)}] [unset]" in done.stdout  # the user's own setting, back as it was


@pytest.fixture(scope="module")
def lmod():
    problem = module_systems.install_lmod()
    if problem is not None:
        if module_systems.required(os.environ):
            pytest.fail(problem)
        pytest.skip(problem)
    return module_systems.module_function("lmod")


def test_module_load_holds_the_build_and_unload_takes_it_back(made, lmod, tmp_path):
    home, index = made
    prefix = home.prefix(NAME)
    before = torch_files(prefix)
    modules = tmp_path / "modulefiles"
    modules.mkdir()
    written = home.envkit("module", NAME, "--lmod", "-o", str(modules), env={"MODULEPATH": str(modules)})
    assert written.returncode == 0, written.stderr
    script = "\n".join([
        lmod, f"export MODULEPATH={modules}", f"module load envkit/{NAME}",
        f"uv pip install --index-url {index} oldtorch; echo refused=$?",
        'echo "loaded=[$UV_CONSTRAINT]"', f"module unload envkit/{NAME}",
        'echo "after=[${UV_CONSTRAINT-unset}] [${PIP_CONSTRAINT-unset}]"',
    ])
    env = {k: v for k, v in home.env.items() if not k.startswith(module_systems.BOOKKEEPING)}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script], capture_output=True, text=True,
                          env={**env, "PATH": f"{Path(uv_binary()).parent}:{env['PATH']}",
                               "UV_CONSTRAINT": _mine(home)}, cwd=home.root, timeout=300)
    assert "refused=1" in done.stdout and HELD in done.stderr, done.stdout + done.stderr
    assert f"loaded=[{prefix}/.envkit/constraints.txt {_mine(home)}]" in done.stdout
    assert f"after=[{_mine(home)}] [unset]" in done.stdout
    assert torch_files(prefix) == before


def test_the_environments_own_pip_reads_its_pip_conf_and_the_documented_limit_holds(made):
    home, index = made
    prefix = home.prefix(NAME)
    given = home.envkit("add", NAME, "pip")
    assert given.returncode == 0, given.stderr
    script = (prefix / "bin" / "pip").read_text()
    assert script.startswith("#!") and "placeholder" not in script
    pip = str(prefix / "bin" / "pip")
    refused = _bash(home, f"{pip} install --index-url {index} oldtorch")  # not activated: pip.conf alone
    assert refused.returncode != 0 and f"The user requested (constraint) {HELD}" in refused.stdout + refused.stderr
    also = _bash(home, f"{_envkit(home)} run {NAME} -- pip install --index-url {index} oldtorch",
                 PIP_CONSTRAINT=_mine(home))  # the user's own PIP_CONSTRAINT, which pip reads before pip.conf
    assert also.returncode != 0 and f"(constraint) {HELD}" in also.stdout + also.stderr
    added = _bash(home, f"{pip} install --index-url {index} small==1.0")
    assert added.returncode == 0, added.stderr
    assert installed_versions(prefix)["torch"] == "2.13.0+cu126"
    isolated = _bash(home, f"{pip} install --isolated --no-deps --index-url {index} torch==2.13.1")
    assert isolated.returncode != 0 and installed_versions(prefix)["torch"] == "2.13.0+cu126"  # (site pip.conf)
    # The limit the guide states: uv pointed at the environment's Python without activating it reads nothing ...
    bypass = _bash(home, f"uv pip install --python {prefix}/bin/python --no-deps --index-url {index} torch==2.13.1")
    assert bypass.returncode == 0 and installed_versions(prefix)["torch"] == "2.13.1", bypass.stderr
    # ... and envkit says so rather than add to a build it no longer holds
    after = home.envkit("add", NAME, "small")
    assert after.returncode == 1 and "was changed outside envkit (torch is 2.13.1, not 2.13.0+cu126)" in after.stderr


def _mine(home: Home) -> str:
    """A constraints file of the user's own (UV_CONSTRAINT / PIP_CONSTRAINT): kept after envkit's."""
    mine = home.root / "mine.txt"
    mine.write_text("small>=0.1\n")
    return str(mine)


def _envkit(home: Home) -> str:
    import shlex
    import sys

    return f"{shlex.quote(sys.executable)} -m envkit"


def _python(prefix: Path) -> str:
    return next(prefix.glob("lib/python*")).name[len("python"):]
