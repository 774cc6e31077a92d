"""Modulefiles from one pure function per syntax (envkit.shared.modulefile): their text, and what the real module
systems make of it (Lmod, Environment Modules: tests/support/module_systems.py): a path with spaces, `$`, quotes and
brackets reaches PATH and VIRTUAL_ENV exactly, `module help` and `whatis` say the build, loading a second envkit
module swaps the first, and `module unload` restores the environment exactly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from envkit.shared.modulefile import (ModuleInfo, cuda_of, lua_string, lua_text, module_info, rocm_of, tcl_string,
                                     tcl_text)
from support import module_systems

NASTY = "/opt/site envs/it's \"$HOME\" [x] {y} \\z"
# Lmod's reader of Tcl modulefiles (tcl2lua.tcl, 8.6) writes a prepend-path value into Lua without escaping its
# quotes and backslashes: where Lmod is the module system, envkit's Lua modulefile is the one to use (published
# beside the Tcl one, which Lmod then ignores). A path without them goes through Lmod's Tcl reader intact.
LESS_NASTY = "/opt/site envs/it's $HOME [x] {y}"


def info(prefix: str, kind: str = "venv", name: str = "torch-cu126") -> ModuleInfo:
    record = SimpleNamespace(build="torch-2.13-cu126", manifest="torch", python="3.11", prefix=prefix, kind=kind,
                             name=name, machine={"name": "rtx4090"},
                             target={"options": ["--partition", "gpu-4-a100"], "machines": ["a100"]},
                             verify={"ok": True, "time": "2026-11-27T01:00:00+00:00", "node": "node1"})
    return module_info(f"site:{name}", record, "alice")


def test_the_words_of_help_and_whatis():
    made = info("/opt/x")
    assert made.whatis == ("Name: site:torch-cu126", "Description: torch build torch-2.13-cu126 (CUDA 12.6), Python "
                           "3.11", "CUDA: 12.6", "Fits: partition gpu-4-a100",
                           "Last check: PASS 2026-11-27T01:00:00+00:00 on node1")
    assert "Published by alice." in made.help
    assert cuda_of("torch-2.13-cu130") == "13.0" and cuda_of("tensorflow-2.4.1-cu101") == "10.1"
    assert cuda_of("torch-2.13-cpu") is None


def test_a_rocm_build_says_its_rocm_release_and_that_it_is_for_amd_gpus():
    record = SimpleNamespace(build="torch-2.9-rocm6.4", manifest="torch", python="3.12", prefix="/opt/x", kind="venv",
                             name="torch-rocm", machine={"name": "mi300x-node"}, target=None, verify=None)
    made = module_info("site:torch-rocm", record, "alice")
    assert made.whatis[1:3] == ("Description: torch build torch-2.9-rocm6.4 (ROCm 6.4, for AMD GPUs), Python 3.12",
                                "ROCm: 6.4 (AMD GPUs)")
    assert "whatis(\"ROCm: 6.4 (AMD GPUs)\")" in lua_text(made) and "CUDA" not in tcl_text(made)
    assert (rocm_of("torch-2.7-rocm6.2.4"), rocm_of("torch-2.13-cu126"), cuda_of("torch-2.9-rocm6.4")) == (
        "6.2.4", None, None)


def test_each_syntax_quotes_by_its_own_rule():
    assert lua_string('a "b" \\c $d\n') == '"a \\"b\\" \\\\c $d\\n"'
    assert tcl_string('a "b" \\c $d [e] {f}') == '"a \\"b\\" \\\\c \\$d \\[e\\] \\{f\\}"'
    venv, conda = info("/opt/x"), info("/opt/y", kind="conda", name="tf")
    assert 'setenv("VIRTUAL_ENV", "/opt/x")' in lua_text(venv) and "CONDA" not in lua_text(venv)
    assert 'setenv CONDA_PREFIX "/opt/y"' in tcl_text(conda) and 'setenv CONDA_DEFAULT_ENV "tf"' in tcl_text(conda)
    assert "VIRTUAL_ENV" not in tcl_text(conda)
    for text in (lua_text(venv), tcl_text(venv)):  # nothing else is set: no PYTHONPATH, no LD_LIBRARY_PATH
        assert sum(line.startswith(("setenv", "prepend", "append", "pushenv")) for line in text.splitlines()) == 2


@pytest.fixture(scope="session")
def systems(tmp_path_factory) -> dict[str, str]:
    """{"lmod": the function, "tcl": the function} of the module systems there are (missing ones skip the test,
    or fail it under CI)."""
    out = {}
    problems = []
    problem = module_systems.install_lmod()
    if problem is None:
        out["lmod"] = module_systems.module_function("lmod")
    else:
        problems.append(problem)
    cmd, problem = module_systems.modulecmd_tcl(tmp_path_factory.mktemp("environment-modules"))
    if cmd is not None:
        out["tcl"] = module_systems.module_function("tcl", cmd)
    else:
        problems.append(problem)
    if problems:
        if module_systems.required(os.environ):
            pytest.fail("; ".join(problems))
        pytest.skip("; ".join(problems))
    return out


def shell(function: str, script: str, modulepath: Path) -> subprocess.CompletedProcess:
    # A login shell's environment: no environment active (CI runs the suite inside a venv, whose VIRTUAL_ENV an
    # envkit module would replace and unloading it unset, as a module's setenv does)
    env = {k: v for k, v in os.environ.items() if not k.startswith(module_systems.BOOKKEEPING)
           and k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV")}
    env["MODULEPATH"] = str(modulepath)
    # Lmod keeps one of each PATH entry when it changes PATH (this machine's PATH may name one twice)
    env["PATH"] = ":".join(dict.fromkeys(env.get("PATH", os.defpath).split(":")))
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", f"{function}\nset -e\n{script}"],
                          capture_output=True, text=True, env=env, timeout=120)


ENV0 = 'env -0 > "$1"'


@pytest.mark.parametrize("system", ["lmod", "lmod-reading-tcl", "tcl"])
def test_a_real_module_system_loads_swaps_and_unloads_exactly(systems, system: str, tmp_path: Path):
    modules = tmp_path / "modulefiles"
    (modules / "envkit").mkdir(parents=True)
    nasty = LESS_NASTY if system == "lmod-reading-tcl" else NASTY
    first, second = info(nasty), info("/opt/other env", name="jax")
    for made, name in ((first, "torch"), (second, "jax")):
        (modules / "envkit" / name).write_text(tcl_text(made))
        if system == "lmod":  # as published: both, and Lmod takes the Lua one
            (modules / "envkit" / f"{name}.lua").write_text(lua_text(made))
    dumps = [tmp_path / f"env{i}" for i in range(4)]
    script = "\n".join([
        f"env -0 > {dumps[0]}",
        "module load envkit/torch", f"env -0 > {dumps[1]}",
        "module load envkit/jax", f"env -0 > {dumps[2]}",
        "module unload envkit/jax", f"env -0 > {dumps[3]}",
        "module help envkit/torch 2>&1 | tr -d '\\n' > " + str(tmp_path / "help"),
        "module whatis envkit/torch > " + str(tmp_path / "whatis") + " 2>&1",
    ])
    done = shell(systems[system.split("-")[0]], script, modules)
    assert done.returncode == 0, done.stderr
    before, loaded, swapped, after = (module_systems.parse_env0(d.read_text()) for d in dumps)
    assert loaded["_LMFILES_"].endswith(".lua" if system == "lmod" else "envkit/torch")
    assert loaded["VIRTUAL_ENV"] == nasty and loaded["PATH"].split(":")[0] == f"{nasty}/bin"
    assert loaded["PATH"].split(":")[1:] == before["PATH"].split(":")
    assert swapped["VIRTUAL_ENV"] == "/opt/other env" and f"{nasty}/bin" not in swapped["PATH"]
    assert swapped["PATH"] == f"/opt/other env/bin:{before['PATH']}"
    assert module_systems.activation(after) == module_systems.activation(before)
    assert "torch build torch-2.13-cu126 (CUDA 12.6)" in (tmp_path / "help").read_text()
    whatis = (tmp_path / "whatis").read_text()
    assert "CUDA: 12.6" in whatis and "Fits: partition gpu-4-a100" in whatis and "Last check: PASS" in whatis
